"""Evaluation metrics for test-time search over sets of answers.

Pure functions of numbers in hand (evaluate.py draws the candidates): pass@k, best@k, maj@k,
descriptions of a pool of reward vectors. Every estimator is exact (an expectation over all size-k
subsets), so tests can pin values to 1e-12; the exception is maj@k where a pool has too many
k-subsets to list (then a seeded sample, with its standard error). Intervals that compare methods
over seeds live in the lab (lab/report.py).
"""

import itertools
import math
import operator

import numpy as np


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of Chen et al. 2021: 1 - C(n-c, k) / C(n, k)."""
    n, c, k = operator.index(n), operator.index(c), operator.index(k)
    if not 0 <= c <= n:
        raise ValueError(f"need 0 <= c <= n, got n={n}, c={c}")
    if not 1 <= k <= n:
        raise ValueError(f"need 1 <= k <= n, got n={n}, k={k}")
    if n - c < k:
        return 1.0  # every size-k subset holds a correct sample
    # The product form never builds C(n, k), which overflows floats near n=1000.
    return 1.0 - float(np.prod(1.0 - k / np.arange(n - c + 1, n + 1, dtype=float)))


def pass_at_k_curve(n: int, c: int, ks) -> list[float]:
    """pass_at_k(n, c, k) for each k in ks."""
    return [pass_at_k(n, c, k) for k in ks]


def max_at_k(scores, k: int) -> float:
    """Expected max of k scores drawn without replacement from the pool."""
    s = np.asarray(scores, dtype=float)
    if s.ndim != 1 or s.size == 0:
        raise ValueError(f"scores must be a non-empty 1-D array, got shape {s.shape}")
    s = np.sort(s)  # ascending
    n = len(s)
    k = operator.index(k)
    if not 1 <= k <= n:
        raise ValueError(f"need 1 <= k <= n, got n={n}, k={k}")
    # the i-th smallest is the max of a k-subset with probability C(i-1, k-1) / C(n, k), exact to
    # one ulp
    total = math.comb(n, k)
    w = np.zeros(n)
    num = 1  # C(k-1, k-1); walk C(j, k-1) up j by an exact integer recurrence
    for j in range(k - 1, n):
        w[j] = num / total
        num = num * (j + 1) // (j + 2 - k)
    return math.fsum(w * s)


def best_at_k_curve(scores, ks) -> list[float]:
    """max_at_k(scores, k) for each k in ks."""
    return [max_at_k(scores, k) for k in ks]


def majority_at_k(keys, values, ks, num_subsets=2000, seed=0):
    """maj@k (majority voting, self-consistency): the expected value of the answer a vote picks
    among k answers drawn without replacement from the pool -> (estimates, standard errors), one
    per k.

    keys: each answer's vote (hashable), None for an answer that cannot vote; values: (n,) or
    (n, V), several values of one pick. In a subset the most frequent key among the voting answers
    wins, ties broken uniformly among the tied keys, and the pick is one of the winner's answers:
    its value is the mean over the winner's answers in the subset (answers sharing a key share a
    value on this project's tasks, so the mean only guards). A subset with no voting answer picks
    one of its answers uniformly. Exact (every k-subset, standard error 0) when C(n, k) <=
    num_subsets; else the mean over num_subsets uniformly drawn subsets, with a seeded generator."""
    values = np.asarray(values, dtype=float)
    one_value = values.ndim == 1
    values = values[:, None] if one_value else values
    n = len(keys)
    if n == 0 or values.ndim != 2 or len(values) != n:
        raise ValueError(f"need n >= 1 keys and (n,) or (n, V) values, got {n} and {values.shape}")
    V = values.shape[1]
    columns = {}  # each distinct voting key -> its number; an answer that cannot vote gets the last
    numbers = [None if key is None else columns.setdefault(key, len(columns)) for key in keys]
    m = len(columns)
    code = np.array([m if c is None else c for c in numbers])
    if operator.index(num_subsets) < 2:
        raise ValueError(f"num_subsets must be at least 2, got {num_subsets}")
    rng = np.random.default_rng(seed)
    means, errors = [], []
    for k in ks:
        k = operator.index(k)
        if not 1 <= k <= n:
            raise ValueError(f"need 1 <= k <= n, got n={n}, k={k}")
        exact = math.comb(n, k) <= num_subsets
        if exact:
            subsets = np.array(list(itertools.combinations(range(n), k)))
        else:  # the first k of a random order of the pool, one order per subset
            subsets = np.argsort(rng.random((num_subsets, n)), axis=1)[:, :k]
        S = len(subsets)
        # each (subset, key) pair one bin: counts (S, keys) are its votes, sums (S, keys, V) the
        # summed values of its answers; the non-voters' column is dropped
        bins = (np.arange(S)[:, None] * (m + 1) + code[subsets]).ravel()
        counts = np.bincount(bins, minlength=S * (m + 1)).reshape(S, m + 1)[:, :m]
        sums = np.stack(
            [
                np.bincount(bins, values[subsets, v].ravel(), minlength=S * (m + 1))
                for v in range(V)
            ],
            -1,
        ).reshape(S, m + 1, -1)[:, :m]
        top = counts.max(1, keepdims=True, initial=0)
        winners = (counts == top) & (top > 0)  # (S, keys): the keys tied for the most votes
        per_key = sums / np.maximum(counts, 1)[..., None]  # a key's mean value in the subset
        voted = (winners[..., None] * per_key).sum(1) / np.maximum(winners.sum(1), 1)[:, None]
        picked = np.where(top > 0, voted, values[subsets].mean(1))  # (S, V)
        means.append(picked.mean(0))
        # a sample's error; an exact value has none (and a sample always holds 2+ subsets here)
        errors.append(np.zeros(V) if exact else picked.std(0, ddof=1) / np.sqrt(num_subsets))
    means, errors = np.array(means), np.array(errors)  # (len(ks), V)
    return (means[:, 0], errors[:, 0]) if one_value else (means, errors)


def _as_rows(rewards) -> np.ndarray:
    r = np.asarray(rewards, dtype=float)
    if r.size == 0:
        return r.reshape(0, r.shape[-1] if r.ndim == 2 else 0)
    if r.ndim != 2:
        raise ValueError(f"rewards must be an (n, D) array, got shape {r.shape}")
    return r


def reward_space_diversity(rewards) -> float:
    """Mean L1 distance between reward vectors over unordered pairs i < j."""
    r = _as_rows(rewards)
    n = len(r)
    if n < 2:
        return 0.0
    # per sorted column, a gap lies inside g(n-g) pairs: O(n log n), and identical rows give exactly
    # 0
    gaps = np.diff(np.sort(r, axis=0), axis=0)
    g = np.arange(1, n)
    return float((g * (n - g)) @ gaps.sum(axis=1) / (n * (n - 1) / 2))


def pareto_fraction(rewards) -> float:
    """Fraction of rows that no other row Pareto-dominates."""
    r = _as_rows(rewards)
    if len(r) == 0:
        return 0.0
    # row j dominates row i if >= everywhere and > somewhere: equal rows (duplicates on the front)
    # never do
    ge = (r[None, :, :] >= r[:, None, :]).all(axis=2)
    gt = (r[None, :, :] > r[:, None, :]).any(axis=2)
    dominated = (ge & gt).any(axis=1)
    return float((~dominated).mean())


def scalarized_best_at_k(rewards, weights, ks) -> list[float]:
    """best@k of rewards @ w, averaged over the weightings w (rows of weights)."""
    r = _as_rows(rewards)
    w = np.asarray(weights, dtype=float)
    if w.ndim != 2 or w.shape[1] != r.shape[1] or len(w) == 0:
        raise ValueError(f"weights must be (W, {r.shape[1]}) with W >= 1, got {w.shape}")
    if len(r) == 0:
        raise ValueError("rewards must hold at least one row")
    scores = r @ w.T  # (n, W): the pool's scores under each weighting
    return [float(np.mean([max_at_k(scores[:, j], k) for j in range(len(w))])) for k in ks]
