"""Exact tests for metrics.py: hand arithmetic, brute force, and invariants."""

import itertools
import math
import os
import sys
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from metrics import (  # noqa: E402
    best_at_k_curve,
    majority_at_k,
    max_at_k,
    pareto_fraction,
    pass_at_k,
    pass_at_k_curve,
    reward_space_diversity,
    scalarized_best_at_k,
)

FAST = settings(max_examples=60, deadline=None)


def brute_max_at_k(scores, k):
    """Mean over all size-k subsets of their max, in exact fractions."""
    subsets = list(itertools.combinations([Fraction(s) for s in scores], k))
    return float(sum(max(c) for c in subsets) / len(subsets))


def brute_best_at_k_by_order(scores, k):
    """best@k = running max after k draws, averaged over every order of the pool."""
    perms = list(itertools.permutations([Fraction(s) for s in scores]))
    return float(sum(max(p[:k]) for p in perms) / len(perms))


def comb_pass_at_k(n, c, k):
    return float(1 - Fraction(math.comb(n - c, k), math.comb(n, k)))


# ---------------------------------------------------------------- maj@k


def brute_majority_at_k(keys, values, k):
    """maj@k by its definition, in exact fractions: every k-subset, its vote written out."""
    picks = []
    for subset in itertools.combinations(range(len(keys)), k):
        votes = {}
        for i in subset:
            if keys[i] is not None:
                votes.setdefault(keys[i], []).append(Fraction(values[i]))
        if not votes:  # no answer can vote: one of the subset, uniformly
            picks.append(sum(Fraction(values[i]) for i in subset) / k)
            continue
        most = max(len(v) for v in votes.values())
        tied = [sum(v) / len(v) for v in votes.values() if len(v) == most]
        picks.append(sum(tied) / len(tied))
    return float(sum(picks) / len(picks))


def test_majority_at_k_hand_cases():
    keys, values = ["a", "a", "b", "c"], [1.0, 1.0, 0.0, 0.0]
    means, errors = majority_at_k(keys, values, [1, 2, 3, 4])
    # k=1: the pool mean; k=2: {a,a} picks 1, {a,b} x2 and {a,c} x2 tie (1/2), {b,c} ties at 0,
    # so (1 + 4/2) / 6 = 1/2; k=3: {a,a,b} and {a,a,c} pick 1, {a,b,c} x2 tie three ways (1/3),
    # so (2 + 2/3) / 4 = 2/3; k=4: "a" holds the majority
    assert means == pytest.approx([0.5, 0.5, 2 / 3, 1.0], abs=1e-12)
    assert (errors == 0).all()  # every case is exact here
    # a tie at k=n: "a" and "b" hold two votes each, the pick is either's value with chance 1/2
    tie = majority_at_k(["a", "a", "b", "b", "c"], [1.0, 1.0, 0.0, 0.0, 0.5], [5])[0]
    assert tie == pytest.approx([0.5], abs=1e-12)


def test_majority_at_k_with_answers_that_cannot_vote():
    # the two None answers never win a vote; only a subset of them alone falls back to the uniform
    # pick: k=2 has 6 subsets, {None, None} picks (0 + 1) / 2, the other five pick "a" (0.25)
    keys, values = ["a", "a", None, None], [0.25, 0.25, 0.0, 1.0]
    means, _ = majority_at_k(keys, values, [2, 4])
    assert means == pytest.approx([(0.5 + 5 * 0.25) / 6, 0.25], abs=1e-12)
    # no answer votes at all: the uniform pick, i.e. the pool mean at every k
    means, _ = majority_at_k([None] * 3, [0.0, 0.3, 0.9], [1, 2, 3])
    assert means == pytest.approx([0.4, 0.4, 0.4], abs=1e-12)


def test_majority_at_k_with_every_key_distinct_is_the_voters_mean():
    # every voter ties with every other, so a subset with a voter picks a voter uniformly, and by
    # symmetry the mean over voters; the subsets of non-voters alone (C(2, k) of C(5, k)) pick the
    # non-voters' mean
    keys, values = ["a", "b", "c", None, None], [0.9, 0.6, 0.0, 0.2, 0.4]
    means, _ = majority_at_k(keys, values, [1, 2, 3, 5])
    for k, got in zip([1, 2, 3, 5], means):
        alone = Fraction(math.comb(2, k), math.comb(5, k))
        assert got == pytest.approx(float((1 - alone) * Fraction(1, 2) + alone * Fraction(3, 10)))
    # with every answer voting, maj@k is the pool mean at every k: voting picks no better than one
    means, _ = majority_at_k(list("abcd"), [0.1, 0.2, 0.3, 1.0], [1, 2, 3, 4])
    assert means == pytest.approx([0.4] * 4, abs=1e-12)


@FAST
@given(
    st.lists(
        st.tuples(st.sampled_from(["a", "b", "c", None]), st.integers(0, 4)), min_size=1, max_size=7
    )
)
def test_majority_at_k_matches_brute_force(pool):
    # values follow keys where the key votes (as on the tasks), and are free where it does not
    keys = [key for key, _ in pool]
    values = [({"a": 1, "b": 0, "c": 3}.get(key, v)) / 4 for key, v in pool]
    ks = list(range(1, len(pool) + 1))
    means, errors = majority_at_k(keys, values, ks)
    assert means == pytest.approx([brute_majority_at_k(keys, values, k) for k in ks], abs=1e-12)
    assert means[0] == pytest.approx(np.mean(values), abs=1e-12)  # k=1 is the pool mean
    assert (errors == 0).all()


def test_majority_at_k_sampled_lies_near_the_exact_value_and_repeats_itself():
    rng = np.random.default_rng(3)
    keys = [str(x) if x < 4 else None for x in rng.integers(0, 6, size=14)]
    values = np.array([{"0": 0.0, "1": 0.3, "2": 0.7, "3": 1.0}.get(k, 0.5) for k in keys])
    exact, zero = majority_at_k(keys, values, [5, 7], num_subsets=5000)  # C(14, 7) = 3432
    sampled, error = majority_at_k(keys, values, [5, 7], num_subsets=500, seed=1)
    assert (zero == 0).all() and (error > 0).all()
    assert (np.abs(sampled - exact) <= 4 * error).all()
    again, _ = majority_at_k(keys, values, [5, 7], num_subsets=500, seed=1)
    assert (again == sampled).all()  # a fixed seed, the same subsets
    # two value columns read one vote: the pair equals the two single calls
    both, _ = majority_at_k(keys, np.stack([values, values > 0.5], 1), [5, 7], num_subsets=500)
    alone, _ = majority_at_k(keys, values > 0.5, [5, 7], num_subsets=500)
    assert both.shape == (2, 2) and both[:, 1] == pytest.approx(alone, abs=1e-12)


@pytest.mark.parametrize(
    "keys,values,ks,kwargs",
    [
        (["a"], [1.0], [2], {}),
        ([], [], [1], {}),
        (["a", "b"], [1.0], [1], {}),
        (["a", "b", "c"], [0, 0, 0], [2], {"num_subsets": 1}),
    ],
)
def test_majority_at_k_rejects_bad_arguments(keys, values, ks, kwargs):
    with pytest.raises(ValueError):
        majority_at_k(keys, values, ks, **kwargs)


# ---------------------------------------------------------------- pass@k


def test_pass_at_k_hand_cases():
    # n=4, c=1, k=2: 1 - C(3,2)/C(4,2) = 1 - 3/6 = 0.5
    assert pass_at_k(4, 1, 2) == pytest.approx(0.5, abs=1e-15)
    # n=5, c=2, k=2: 1 - C(3,2)/C(5,2) = 1 - 3/10 = 0.7
    assert pass_at_k(5, 2, 2) == pytest.approx(0.7, abs=1e-15)
    # k=1 is the plain accuracy c/n: 3/10
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3, abs=1e-15)
    # n - c < k: every 3-subset of 4 holds one of the 2 correct -> 1
    assert pass_at_k(4, 2, 3) == 1.0
    assert pass_at_k(7, 0, 3) == 0.0
    assert pass_at_k(7, 7, 1) == 1.0


@FAST
@given(
    st.integers(1, 40).flatmap(
        lambda n: st.tuples(st.just(n), st.integers(0, n), st.integers(1, n))
    )
)
def test_pass_at_k_matches_comb_formula(nck):
    n, c, k = nck
    assert pass_at_k(n, c, k) == pytest.approx(comb_pass_at_k(n, c, k), abs=1e-12)


def test_pass_at_k_large_n_is_finite():
    p = pass_at_k(1000, 3, 500)
    # 1 - (500*499*498)/(1000*999*998) = 1 - 0.1246...
    assert math.isfinite(p) and 0.0 <= p <= 1.0
    assert p == pytest.approx(comb_pass_at_k(1000, 3, 500), abs=1e-12)
    assert 0.0 <= pass_at_k(1000, 1, 1) <= 1.0


@pytest.mark.parametrize("n,c,k", [(5, -1, 1), (5, 6, 1), (5, 2, 0), (5, 2, 6), (0, 0, 1)])
def test_pass_at_k_rejects_bad_arguments(n, c, k):
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


def test_pass_at_k_curve():
    # n=4, c=1: 1 - C(3,k)/C(4,k) = 1 - 3/4, 1 - 3/6, 1 - 1/4, 1 - 0/1
    assert pass_at_k_curve(4, 1, [1, 2, 3, 4]) == pytest.approx([0.25, 0.5, 0.75, 1.0], abs=1e-15)


# ---------------------------------------------------------------- max@k


def test_max_at_k_lies_between_the_pools_mean_and_its_best():
    """What must hold before any exact value: best of k draws is at least the mean (k = 1) and at
    most the pool's best (k = n); a weight off by one place breaks this first."""
    pool = [4, 1, 3, 2]
    for k in range(1, 5):
        got = max_at_k(pool, k)
        assert 2.5 - 1e-12 <= got <= 4 + 1e-12, (
            f"max_at_k({pool}, {k}) = {got}: impossible, the best of {k} of these lies between "
            "their mean 2.5 and their best 4"
        )


def test_max_at_k_hand_cases():
    # pool {1,2,3,4}, k=2: pair maxima 2,3,4,3,4,4 -> 20/6
    assert max_at_k([4, 1, 3, 2], 2) == pytest.approx(20 / 6, abs=1e-15)
    # k=3: triple maxima 3,4,4,4 -> 15/4
    assert max_at_k([4, 1, 3, 2], 3) == pytest.approx(3.75, abs=1e-15)
    # pool {0,0,1}, k=2: pairs (0,0),(0,1),(0,1) -> 2/3
    assert max_at_k([0, 1, 0], 2) == pytest.approx(2 / 3, abs=1e-15)
    # negative scores: {-5,-1}, k=1 -> mean -3, k=2 -> -1
    assert max_at_k([-5, -1], 1) == pytest.approx(-3.0, abs=1e-15)
    assert max_at_k([-5, -1], 2) == -1.0


scores_st = st.lists(st.integers(-20, 20), min_size=1, max_size=7)


@FAST
@given(scores_st, st.data())
def test_max_at_k_matches_all_combinations(scores, data):
    k = data.draw(st.integers(1, len(scores)))
    assert max_at_k(scores, k) == pytest.approx(brute_max_at_k(scores, k), abs=1e-12)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(-9, 9), min_size=1, max_size=5), st.data())
def test_max_at_k_matches_running_max_over_orders(scores, data):
    k = data.draw(st.integers(1, len(scores)))
    assert max_at_k(scores, k) == pytest.approx(brute_best_at_k_by_order(scores, k), abs=1e-12)


@FAST
@given(st.lists(st.integers(0, 1), min_size=1, max_size=60), st.data())
def test_max_at_k_on_binary_scores_is_pass_at_k(scores, data):
    k = data.draw(st.integers(1, len(scores)))
    assert max_at_k(scores, k) == pytest.approx(pass_at_k(len(scores), sum(scores), k), abs=1e-12)


@FAST
@given(st.lists(st.floats(-1e3, 1e3), min_size=1, max_size=50))
def test_max_at_k_endpoints_and_monotone(scores):
    n = len(scores)
    assert max_at_k(scores, 1) == pytest.approx(float(np.mean(scores)), abs=1e-9)
    assert max_at_k(scores, n) == pytest.approx(max(scores), abs=1e-9)
    curve = best_at_k_curve(scores, range(1, n + 1))
    assert all(b >= a - 1e-9 for a, b in zip(curve, curve[1:]))


def test_max_at_k_large_pool_is_exact():
    # 0/1 pool of 1000 with 3 ones: must agree with the exact rational pass@k.
    scores = [1, 1, 1] + [0] * 997
    for k in (1, 10, 500, 997, 998, 1000):
        assert max_at_k(scores, k) == pytest.approx(comb_pass_at_k(1000, 3, k), abs=1e-12)
    # 0..999, k=500: E[max] = k(n+1)/(k+1) - 1 for a uniform pool {0..n-1}
    assert max_at_k(np.arange(1000), 500) == pytest.approx(500 * 1001 / 501 - 1, abs=1e-9)


def test_max_at_k_rejects_bad_arguments():
    for bad_k in (0, 4):
        with pytest.raises(ValueError):
            max_at_k([1, 2, 3], bad_k)
    with pytest.raises(ValueError):
        max_at_k([], 1)


def test_best_at_k_curve():
    # pool {1,2,3,4}: k=1 mean 2.5, k=2 20/6, k=4 max 4
    assert best_at_k_curve([1, 2, 3, 4], [1, 2, 4]) == pytest.approx([2.5, 20 / 6, 4.0], abs=1e-15)


# ---------------------------------------------------------------- pools of reward vectors


def test_reward_space_diversity():
    assert reward_space_diversity([[0.3, 0.7]] * 5) == 0.0
    assert reward_space_diversity([[1, 0, 0, 0], [0, 1, 0, 0]]) == pytest.approx(2.0)
    # rows (0,0), (1,0), (1,2): pair distances 1, 3, 2 -> mean 2
    assert reward_space_diversity([[0, 0], [1, 0], [1, 2]]) == pytest.approx(2.0)
    assert reward_space_diversity([[1.0, 2.0]]) == 0.0
    assert reward_space_diversity(np.zeros((0, 3))) == 0.0


@FAST
@given(
    st.integers(2, 8).flatmap(
        lambda n: st.lists(
            st.lists(st.integers(-5, 5), min_size=3, max_size=3), min_size=n, max_size=n
        )
    )
)
def test_reward_space_diversity_matches_pairwise_loop(rows):
    r = np.asarray(rows, dtype=float)
    pairs = list(itertools.combinations(range(len(r)), 2))
    expected = sum(np.abs(r[i] - r[j]).sum() for i, j in pairs) / len(pairs)
    assert reward_space_diversity(rows) == pytest.approx(expected, abs=1e-12)


def test_pareto_fraction():
    # (3,0), (0,3), (2,2) are mutually non-dominated; (1,1) is dominated by (2,2);
    # (2,1) is dominated by (2,2) (equal first, greater second) -> 3/5
    pool = [[3, 0], [0, 3], [2, 2], [1, 1], [2, 1]]
    assert pareto_fraction(pool) == pytest.approx(3 / 5)
    # identical rows do not dominate each other
    assert pareto_fraction([[1, 1], [1, 1]]) == 1.0
    assert pareto_fraction([[1, 1], [1, 1], [0, 1]]) == pytest.approx(2 / 3)
    assert pareto_fraction([]) == 0.0


def test_scalarized_best_at_k_hand_case():
    # rewards (1,0), (0,1), (0.5,0.5); weightings (1,0) and (0,1) give score columns
    # (1,0,0.5) and (0,1,0.5): k=1 -> mean 0.5 each; k=2 -> pair maxima 1,1,0.5 -> 5/6 each
    rewards = [[1, 0], [0, 1], [0.5, 0.5]]
    assert scalarized_best_at_k(rewards, [[1, 0], [0, 1]], [1, 2, 3]) == pytest.approx(
        [0.5, 5 / 6, 1.0], abs=1e-15
    )
    # a single weighting (0.5, 0.5) scores every row 0.5
    assert scalarized_best_at_k(rewards, [[0.5, 0.5]], [1, 3]) == pytest.approx([0.5, 0.5])


@FAST
@given(st.lists(st.floats(-10, 10), min_size=1, max_size=20), st.floats(0.1, 3))
def test_scalarized_best_at_k_one_dimension_is_max_at_k(col, w):
    ks = range(1, len(col) + 1)
    rewards = [[x] for x in col]
    expected = best_at_k_curve([w * x for x in col], ks)
    assert scalarized_best_at_k(rewards, [[w]], ks) == pytest.approx(expected, abs=1e-9)


def test_scalarized_best_at_k_rejects_mismatched_weights():
    with pytest.raises(ValueError):
        scalarized_best_at_k([[1, 0]], [[1, 0, 0]], [1])
