"""The oracle: the best value each objective can reach on a code problem, so that learning is
measured as the share of the gap from the warm start to the best achievable that a method closes.

Given a prompt, every plausible program (CodeTask.hypotheses) is equally likely the hidden truth:
the problem generator draws the shown inputs first, then each threshold uniformly in its gap.
R[t, a, :] is the reward vector answer a would get if hypothesis t were the truth. Every objective
here is a mean over scenarios s of the best chosen answer's score Q[s, a]:

    objective                                   scenarios s   Q[s, a]
    best@1, best@k (expected best fixed reward)  truths t      mean_d R[t, a, d]
    pass@k (some answer passes every test)       truths t      1 if R[t, a] is all ones, else 0
    VPO's set score E_w[max_j w . r_j]           (t, w_n)      w_n . R[t, a]

value(S) = mean_s max_{a in S} Q[s, a] over sets S of k distinct answers is, with Q >= 0, monotone
and submodular: `best_subset` tries every k-subset up to `exact_limit` of them, else runs greedy,
which reaches at least 1 - 1/e of the optimum and certifies an upper bound (greedy_path).

`code_oracle` builds R while H, the number of plausible programs, is small. Beyond (R holds H^2 D
numbers) it uses that a hidden test between shown inputs x_i and x_{i+1} depends on threshold i
alone, so w . R[t, a] = (weight of the tests outside every gap) + sum_i M_i[t_i, a_i] (_gap_tables).
Then best@1 is exact (each gap's median: the per-test majority vote), pass@k too (min(1, k / H):
every program has its own pass pattern), and best@k and the set score are greedy on every (truth,
weighting) scenario or, past `budget`, on a fixed sample of them, the greedy set then scored
exactly: a true set's value, a lower bound, with greedy's certificate or the per-gap relaxation as
the upper. Speed, and how close the per-gap path comes to the exact values: docs/RESULTS.md
("oracle.py").

Answers range over the plausible programs: no program outside the family passes more truths or beats
best@1; for best@k (k > 1) and the set score it is a restriction checked on small cases, not proven
(docs/RESULTS.md). Held-out problems are chosen by a hash, which we treat as independent of the
truth. Deliberately left out: the persona task (its answers are not a small set), answers outside
the family, and exact optimization beyond brute force (branch and bound, integer programming).
"""

import itertools
import math

import numpy as np

import lang
import maze


def greedy_path(scores, k, block=1 << 21):
    """Greedy for value(S) = mean_s max_{a in S} scores[s, a] with scores (S, A) >= 0: add the
    answer of largest marginal gain, k times. Returns (values, chosen, uppers): values[j] is the
    value of the first j + 1 picks, uppers[j] a certified bound on the best set of j + 1 answers (at
    every step and for every size k', best_k' <= value(S) + sum of the k' largest marginal gains
    over S)."""
    Q = np.asarray(scores)
    A = Q.shape[1]
    k = min(k, A)
    best = np.zeros(len(Q), dtype=Q.dtype)  # the chosen set's best score per scenario
    open_ = np.ones(A, dtype=bool)
    chosen, values, uppers = [], [], np.full(k, np.inf)
    step = max(1, block // max(1, len(Q)))  # answers per block: bounds the (S, block) temporary
    for j in range(k + 1):
        gains = np.concatenate(
            [
                np.maximum(Q[:, i : i + step] - best[:, None], 0).mean(axis=0, dtype=float)
                for i in range(0, A, step)
            ]
        )
        top = np.sort(gains[open_])[::-1]
        value = float(best.mean(dtype=float))
        sums = value + np.cumsum(top)[:k] if len(top) else np.full(1, value)
        uppers = np.minimum(uppers, np.concatenate([sums, np.full(k - len(sums), sums[-1])]))
        if j == k:
            break
        a = int(np.flatnonzero(open_)[np.argmax(gains[open_])])
        chosen.append(a)
        best = np.maximum(best, Q[:, a])
        open_[a] = False
        values.append(float(best.mean(dtype=float)))
    return np.array(values), chosen, np.maximum(uppers, values)


def best_subset(scores, k, exact_limit=50_000):
    """The k answers (columns) of scores (S, A) >= 0 maximizing mean_s max_{a in set} scores[s, a]
    -> (value, chosen, upper). Exact (upper == value) when C(A, k) <= exact_limit, else greedy."""
    Q = np.asarray(scores, dtype=float)
    A = Q.shape[1]
    k = min(k, A)
    if math.comb(A, k) > exact_limit:
        values, chosen, uppers = greedy_path(Q, k)
        return float(values[-1]), chosen, float(uppers[-1])
    best_value, best_set = -1.0, None
    # every (k-1)-subset in lexicographic order, then all later answers at once as its last member
    for head in itertools.combinations(range(A), k - 1):
        start = head[-1] + 1 if head else 0
        if start >= A:
            continue
        base = Q[:, list(head)].max(axis=1, keepdims=True) if head else np.zeros((len(Q), 1))
        values = np.maximum(base, Q[:, start:]).mean(axis=0)
        j = int(np.argmax(values))
        if values[j] > best_value:
            best_value, best_set = float(values[j]), list(head) + [start + j]
    return best_value, best_set, best_value


# ---- The objectives, as pure functions of R (T truths, A answers, D tests), every truth equally
# likely ----


def best_at_1(R) -> float:
    """The Bayes-optimal single answer's expected fixed reward: max_a mean_t mean_d R[t, a, d]."""
    return float(np.asarray(R, dtype=float).mean(axis=(0, 2)).max())


def pass_ceiling(R, k, exact_limit=50_000):
    """The best probability that k distinct answers include one passing every test -> (value,
    chosen, upper)."""
    return best_subset((np.asarray(R) >= 1).all(axis=-1).astype(float), k, exact_limit)


def best_at_k_ceiling(R, k, exact_limit=50_000):
    """The best expected max fixed reward of k distinct answers -> (value, chosen, upper)."""
    return best_subset(np.asarray(R, dtype=float).mean(axis=-1), k, exact_limit)


def set_score_ceiling(R, weights, m, exact_limit=50_000):
    """VPO's objective: the best m answers under mean_t mean_n max_j w_n . R[t, a_j] -> (value,
    chosen, upper)."""
    R, w = np.asarray(R, dtype=float), np.asarray(weights, dtype=float)
    Q = np.einsum("tad,nd->tna", R, w).reshape(-1, R.shape[1])  # scenarios (t, n) x answers
    return best_subset(Q, m, exact_limit)


def gap_closed(value, warm_value, optimum, eps=1e-12) -> float:
    """(value - warm) / (optimum - warm): 0 at the warm start, 1 at the optimum; nan when there is
    no gap to close (|optimum - warm| <= eps) or any input is nan."""
    value, warm_value, optimum = float(value), float(warm_value), float(optimum)
    if not abs(optimum - warm_value) > eps:  # also catches nan
        return float("nan")
    return (value - warm_value) / (optimum - warm_value)


# ---- Code problems ----


def reward_tensor(task, problem):
    """R (H, H, D) of a code problem over its plausible programs, and the programs
    (task.hypotheses). Each program runs once; R[t, a, d] = 1 iff program a's output on hidden test
    d is truth t's."""
    hyps = task.hypotheses(problem)
    shown, tests = tuple(task.shown(problem)), task.tests(problem)
    outputs = np.array([lang.run(task.program_text(h), tests) for h in hyps], dtype=object)
    truths = np.array(
        [[task.target(tuple(h) + shown, x) for x in tests] for h in hyps], dtype=object
    )
    return (truths[:, None, :] == outputs[None, :, :]).astype(np.float32), hyps


def _gap_tables(task, problem, weights):
    """Per gap i, M_i (N, g_i, g_i): M_i[n, t, u] = weight of the gap's hidden tests that truth
    threshold t and answer threshold u get right; and the weight (N,) of the tests outside every
    gap, which all pass."""
    shown, tests = task.shown(problem), task.tests(problem)
    w = np.asarray(weights, dtype=float)
    column = {x: j for j, x in enumerate(tests)}
    outside = np.ones(len(tests), dtype=bool)
    tables = []
    for i in range(task.k):
        ts = np.arange(shown[i] + 1, shown[i + 1] + 1)  # the gap's thresholds
        xs = np.arange(shown[i] + 1, shown[i + 1])  # the gap's hidden tests
        outside[[column[x] for x in xs]] = False
        # (t, u, x)
        right = (xs[None, None, :] < ts[:, None, None]) == (xs[None, None, :] < ts[None, :, None])
        tables.append(np.einsum("tux,nx->ntu", right.astype(float), w[:, [column[x] for x in xs]]))
    return tables, w[:, outside].sum(axis=1)


def _separable_scores(tables, const, ns, truths, answers):
    """Q[s, a] = const[n_s] + sum_i M_i[n_s, t_si, u_ai] (float32) for scenarios (ns (S,), truths
    (S, k)) and answers (A, k), thresholds as indices inside their gaps."""
    Q = np.repeat(const[ns].astype(np.float32)[:, None], len(answers), axis=1)
    for i, M in enumerate(tables):
        Q += M[ns, truths[:, i]].astype(np.float32)[:, answers[:, i]]
    return Q


def _relaxed_upper(tables, const, k, exact_limit):
    """A bound on every set of k answers: each gap chooses its own best k thresholds (max_j of a sum
    <= the sum of the max_j), each gap's choice bounded by best_subset."""
    return float(const.mean()) + sum(
        best_subset(M.reshape(-1, M.shape[2]), k, exact_limit)[2] for M in tables
    )


def _separable_ceiling(task, problem, weights, k, budget, exact_limit, rng):
    """Without R: greedy over every plausible program on at most `budget` // H scenarios
    (all (truth, weighting) pairs when they fit, else a fixed random sample), each prefix of the
    greedy set then scored exactly on every scenario -> (values (k,), uppers (k,))."""
    tables, const = _gap_tables(task, problem, weights)
    sizes = [M.shape[1] for M in tables]
    grid = np.array(list(itertools.product(*[range(g) for g in sizes])))  # hypotheses' order
    H, N = len(grid), len(const)
    pairs = H * N
    picked = (
        np.arange(pairs)
        if pairs * H <= budget
        else rng.choice(pairs, max(1, budget // H), replace=False)
    )
    Q = _separable_scores(tables, const, picked % N, grid[picked // N], grid)
    _, chosen, uppers = greedy_path(Q, k)
    exact = np.maximum.accumulate(
        _separable_scores(
            tables, const, np.tile(np.arange(N), H), np.repeat(grid, N, axis=0), grid[chosen]
        ),
        axis=1,
    )
    values = exact.mean(axis=0, dtype=float)
    relaxed = np.array(
        [_relaxed_upper(tables, const, j + 1, exact_limit) for j in range(len(chosen))]
    )
    uppers = np.minimum(uppers, relaxed) if len(picked) == pairs else relaxed
    return values, np.maximum(uppers, values)


def code_oracle(
    task, problem, ks, weights, m=3, exact_limit=50_000, max_tensor=128, budget=20_000_000, seed=0
):
    """The best achievable values on one code problem: hypotheses, best_at_1, pass_at_k and
    best_at_k ({k: value}), best_at_k_upper, set_score (m answers under the weightings (N, D)) and
    set_score_upper. R is built for H <= max_tensor plausible programs, else the per-gap path runs
    (`seed`: its scenario sample)."""
    H = len(task.hypotheses(problem))
    if max_tensor >= H:
        R, _ = reward_tensor(task, problem)
        best1 = best_at_1(R)
        passes = {k: pass_ceiling(R, k, exact_limit)[0] for k in ks}
        at_k = {k: best_at_k_ceiling(R, k, exact_limit) for k in ks}
        best_k, best_k_upper = (
            {k: v[0] for k, v in at_k.items()},
            {k: v[2] for k, v in at_k.items()},
        )
        set_value, _, set_upper = set_score_ceiling(R, weights, m, exact_limit)
    else:
        rng = np.random.default_rng(seed)
        uniform = np.full((1, task.dim), 1.0 / task.dim)
        tables, const = _gap_tables(task, problem, uniform)
        # gaps are independent
        best1 = float(const.mean()) + sum(float(M[0].mean(axis=0).max()) for M in tables)
        # every plausible program has its own pass pattern
        passes = {k: min(1.0, k / H) for k in ks}
        values, uppers = _separable_ceiling(
            task, problem, uniform, max(ks), budget, exact_limit, rng
        )
        # greedy sets are nested: one path serves every k
        best_k = {k: float(values[min(k, H) - 1]) for k in ks}
        best_k_upper = {k: float(uppers[min(k, H) - 1]) for k in ks}
        values, uppers = _separable_ceiling(task, problem, weights, m, budget, exact_limit, rng)
        set_value, set_upper = float(values[-1]), float(uppers[-1])
    return {
        "hypotheses": H,
        "best_at_1": best1,
        "pass_at_k": passes,
        "best_at_k": best_k,
        "best_at_k_upper": best_k_upper,
        "set_score": set_value,
        "set_score_upper": set_upper,
    }


def maze_oracle(task, problem, ks, weights, m=3, exact_limit=50_000):
    """The best achievable values on one maze, exact: every objective's best routes lie on the
    Pareto front of the reward vectors some arriving route earns (maze.pareto_front). A policy that
    always writes the best route under the fixed scalarization has best@k = best@1 at every k;
    w-best@k and the set score pick the best k (or m) routes of the front for the weightings."""
    front = maze.pareto_front(problem)  # (F, 4)
    best1 = float(task.scalarize(front).max())
    Q = np.asarray(weights, dtype=float) @ front.T  # (N weightings, F routes)
    w_best = {k: best_subset(Q, k, exact_limit)[0] for k in ks}
    set_value = best_subset(Q, m, exact_limit)[0]
    return {
        "hypotheses": len(front),  # here: the routes on the front
        "best_at_1": best1,
        "pass_at_k": {k: float((front == 1).all(1).any()) for k in ks},
        "best_at_k": {k: best1 for k in ks},
        "best_at_k_upper": {k: best1 for k in ks},
        "w_best_at_k": w_best,
        "set_score": set_value,
        "set_score_upper": set_value,
    }


def mean_oracle(task, problems, ks, weights, m=3):
    """code_oracle (maze_oracle on the maze) on every problem, averaged over the problems
    (best_at_k and pass_at_k: lists in the order of ks); "hypotheses" keeps each problem's count of
    plausible programs (of Pareto-optimal routes on the maze)."""
    one = maze_oracle if isinstance(task, maze.MazeTask) else code_oracle
    per_problem = [one(task, p, ks, weights, m=m) for p in problems]

    def mean(key):
        return float(np.mean([o[key] for o in per_problem]))

    return {
        "best_at_1": mean("best_at_1"),
        "set_score": mean("set_score"),
        "set_score_upper": mean("set_score_upper"),
        "best_at_k": [float(np.mean([o["best_at_k"][k] for o in per_problem])) for k in ks],
        "pass_at_k": [float(np.mean([o["pass_at_k"][k] for o in per_problem])) for k in ks],
        **(
            {
                "w_best_at_k": [
                    float(np.mean([o["w_best_at_k"][k] for o in per_problem])) for k in ks
                ]
            }
            if "w_best_at_k" in per_problem[0]
            else {}
        ),
        "hypotheses": [o["hypotheses"] for o in per_problem],
    }
