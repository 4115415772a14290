"""oracle.py: hand-computed optima, brute force over every subset, and the code task's reward
tensor."""

import itertools
import math
import random

import numpy as np
import pytest
import torch

import maze
import vpo
from codetask import CodeTask
from lab import oracle
from lab.oracle import (
    best_at_1,
    best_at_k_ceiling,
    best_subset,
    code_oracle,
    gap_closed,
    greedy_path,
    pass_ceiling,
    reward_tensor,
    set_score_ceiling,
)
from maze import MazeTask


def subset_value(scores, subset) -> float:
    """value(S) of oracle.py's docstring: scores (S, A) >= 0, subset: answer indices -> mean over
    scenarios of the best chosen score: VPO's set score (vpo.set_scores, exercise (b)) of the chosen
    answers, each scenario a one-hot weighting of their scores."""
    chosen = torch.as_tensor(np.asarray(scores, dtype=float)[:, list(subset)].T)  # (|S|, scenarios)
    one_hot = torch.eye(chosen.shape[1], dtype=torch.float64)  # (scenarios, scenarios)
    return float(vpo.set_scores(chosen[None, None], one_hot[None]))


# one threshold in (0, 4] on the domain 0..5, shown at 0 and 4: hidden tests 1, 2, 3, 5; answer u
# and
# truth t disagree on exactly |t - u| tests (those in [min, max)), test 5 always passes
ONE = CodeTask(thresholds=1, domain=6)
ONE_PROBLEM = (2, 0, 4)


def brute(scores, k):
    """The best value over every k-subset of columns."""
    Q = np.asarray(scores, dtype=float)
    return max(subset_value(Q, c) for c in itertools.combinations(range(Q.shape[1]), k))


def random_R(rng, T=5, A=6, D=4):
    return (rng.random((T, A, D)) < 0.6).astype(float) * rng.integers(1, 4, (T, A, D)) / 3


def test_one_threshold_by_hand():
    R, hyps = reward_tensor(ONE, ONE_PROBLEM)
    assert hyps == [(1,), (2,), (3,), (4,)]
    assert np.allclose(R.mean(-1), 1 - np.abs(np.subtract.outer(np.arange(4), np.arange(4))) / 4)
    assert best_at_1(R) == pytest.approx(0.75)  # u = 2 or 3: E|t - u| = 1
    # every pair misses two truths by one test
    assert best_at_k_ceiling(R, 2)[0] == pytest.approx(0.875)
    assert pass_ceiling(R, 3)[0] == pytest.approx(0.75)
    # all the weight on test 1: u = 1 is right only when t = 1, u >= 2 whenever t >= 2
    onehot = np.array([[1.0, 0, 0, 0]])
    assert set_score_ceiling(R, onehot, 1)[0] == pytest.approx(0.75)
    assert set_score_ceiling(R, onehot, 2)[0] == pytest.approx(1.0)


def test_best_subset_matches_brute_force_and_greedy_bounds_it():
    rng = np.random.default_rng(0)
    for _ in range(30):
        Q = rng.random((7, 8)) * (rng.random((7, 8)) < 0.5)
        for k in (1, 2, 3, 5):
            value, chosen, upper = best_subset(Q, k)
            assert value == pytest.approx(brute(Q, k)) and upper == value
            assert len(set(chosen)) == k and subset_value(Q, chosen) == pytest.approx(value)
        values, chosen, uppers = greedy_path(Q, 5)
        for j in range(5):
            opt = brute(Q, j + 1)
            assert values[j] == pytest.approx(subset_value(Q, chosen[: j + 1]))
            assert (1 - (1 - 1 / (j + 1)) ** (j + 1)) * opt - 1e-12 <= values[j] <= opt + 1e-12
            assert uppers[j] >= opt - 1e-12
        # forced into greedy, best_subset returns its set and its certified bound
        value, chosen, upper = best_subset(Q, 3, exact_limit=0)
        assert value == pytest.approx(values[2]) and upper >= brute(Q, 3) - 1e-12


def test_greedy_on_disjoint_columns_is_exact_and_certified():
    # each answer serves one scenario: any k answers are worth k/6
    Q = np.eye(6)[:, [3, 1, 0, 2, 5, 4]]
    values, chosen, uppers = greedy_path(Q, 6)
    assert np.allclose(values, np.arange(1, 7) / 6) and np.allclose(uppers, values)


def test_objectives_on_R_match_brute_force():
    rng = np.random.default_rng(1)
    for _ in range(20):
        R = random_R(rng)
        w = rng.dirichlet(np.ones(4), size=3)
        assert best_at_1(R) == pytest.approx(max(R[:, a].mean() for a in range(6)))
        for k in (1, 2, 3):
            assert best_at_k_ceiling(R, k)[0] == pytest.approx(brute(R.mean(-1), k))
            assert pass_ceiling(R, k)[0] == pytest.approx(brute((R >= 1).all(-1), k))
            by_hand = max(
                np.mean([[max(w[n] @ R[t, a] for a in c) for n in range(3)] for t in range(5)])
                for c in itertools.combinations(range(6), k)
            )
            assert set_score_ceiling(R, w, k)[0] == pytest.approx(by_hand)


def test_gap_closed():
    assert gap_closed(0.75, 0.5, 1.0) == 0.5
    assert gap_closed(0.5, 0.5, 0.9) == 0.0
    assert gap_closed(0.25, 0.5, 1.0) == -0.5  # worse than the warm start
    assert np.isnan(gap_closed(0.7, 0.6, 0.6))  # no gap to close
    assert np.isnan(gap_closed(float("nan"), 0.5, 1.0)) and np.isnan(
        gap_closed(0.7, 0.5, float("nan"))
    )


@pytest.mark.parametrize(
    "task",
    [CodeTask(), CodeTask(thresholds=3, domain=14, window_share=0.5)],
    ids=["default", "k3-window"],
)
def test_reward_tensor_is_the_task_reward_under_each_truth(task):
    for problem in task.problems("train", 3, random.Random(2)):
        R, hyps = reward_tensor(task, problem)
        shown = tuple(task.shown(problem))
        for t, truth in enumerate(hyps):
            for a, answer in enumerate(hyps):
                assert (
                    R[t, a] == task.reward(tuple(truth) + shown, task.program_text(answer))
                ).all()
        assert (R[np.arange(len(hyps)), np.arange(len(hyps))] == 1).all()


def test_code_oracle_without_R_agrees_with_R():
    task = CodeTask()
    w = np.random.default_rng(3).dirichlet(np.ones(task.dim), size=20)
    ks = [1, 2, 4, 30]
    for problem in task.problems("train", 4, random.Random(4)):
        full = code_oracle(task, problem, ks, w)  # R built: exact for k <= 3
        split = code_oracle(task, problem, ks, w, max_tensor=0)  # per-gap tables, greedy
        H = full["hypotheses"]
        assert split["best_at_1"] == pytest.approx(full["best_at_1"])
        assert full["pass_at_k"] == split["pass_at_k"] == {k: min(1.0, k / H) for k in ks}
        for k in ks:
            exact = (
                full["best_at_k"][k]
                if k >= H or math.comb(H, k) <= 50_000
                else full["best_at_k_upper"][k]
            )
            assert split["best_at_k"][k] <= exact + 1e-6 <= split["best_at_k_upper"][k] + 2e-6
        assert split["set_score"] <= full["set_score"] + 1e-6 <= split["set_score_upper"] + 2e-6
        # a scenario budget too small for all of them samples some: still a real set's exact value
        sampled = code_oracle(task, problem, [2], w, max_tensor=0, budget=H * 50)
        assert sampled["set_score"] <= full["set_score"] + 1e-6 <= sampled["set_score_upper"] + 2e-6


def test_code_oracle_scales_to_thousands_of_programs():
    task = CodeTask(thresholds=4, domain=40)
    problem = (5, 12, 20, 30, 0, 10, 15, 25, 39)  # gaps of 10, 5, 10, 14 thresholds: H = 7000
    w = np.random.default_rng(5).dirichlet(np.ones(task.dim), size=10)
    out = code_oracle(task, problem, [1, 4], w, budget=2_000_000)
    assert out["hypotheses"] == 7000 and out["pass_at_k"][4] == pytest.approx(4 / 7000)
    # best@1: the median threshold of each gap, E|t - u| summed over gaps, over D = 35 tests
    spread = sum(
        np.abs(np.arange(g) - np.arange(g)[:, None]).mean(0).min() for g in (10, 5, 10, 14)
    )
    assert out["best_at_1"] == pytest.approx(1 - spread / 35)
    assert out["best_at_1"] <= out["best_at_k"][4] <= out["best_at_k_upper"][4] <= 1
    # three answers beat the best single one (each gap alone: exact for one answer)
    assert (
        oracle._relaxed_upper(*oracle._gap_tables(task, problem, w), 1, 50_000)
        < out["set_score"]
        <= out["set_score_upper"]
    )


def test_maze_oracle_is_at_least_every_demonstration_and_grows_with_k():
    """No demonstration (nor a set of three) beats the maze's optimum; w-best@k grows with k up to
    the best route of each weighting; a route that passes both corners is impossible, so pass@k is
    0."""
    task, rng = MazeTask(), random.Random(3)
    weights = np.random.default_rng(4).dirichlet(np.ones(4), size=16)
    for problem in task.problems("heldout", 6, rng):
        out = oracle.maze_oracle(task, problem, [1, 2, 4], weights, m=3)
        demos = np.array([task.reward(problem, a) for a in task.demonstration(problem, 8, rng)])
        assert out["best_at_1"] >= task.scalarize(demos).max() - 1e-6
        for k in (1, 2, 4):
            scores = weights @ demos.T  # (W, 8): each demonstration under each weighting
            best_k_demos = max(subset_value(scores, c) for c in itertools.combinations(range(8), k))
            assert out["w_best_at_k"][k] >= best_k_demos - 1e-6
        assert out["w_best_at_k"][1] <= out["w_best_at_k"][2] <= out["w_best_at_k"][4]
        front = weights @ maze.pareto_front(problem).T  # (W, F): the Pareto front's routes
        assert out["w_best_at_k"][4] <= subset_value(front, range(front.shape[1])) + 1e-9
        three = oracle.maze_oracle(task, problem, [3], weights, m=3)
        assert out["set_score"] == pytest.approx(three["w_best_at_k"][3])
        assert out["pass_at_k"] == {1: 0.0, 2: 0.0, 4: 0.0}
