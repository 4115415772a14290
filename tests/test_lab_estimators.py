"""lab/estimators.py: the exact objective gradients against finite differences, the enumerated
expected updates against sampled groups (and, for the unbiased estimators, against G times the
gradient), every method with a claim, and the pitfalls the field has hit, each as an example that
the checks here catch: per-component normalization when the components sum to one total, MaxRL
on non-binary rewards, a pass@k credit that does not zero the non-best answers, dynamic sampling
that filters on the shaped reward, and a bootstrapped best@k against metrics.max_at_k."""

import itertools
import math

import numpy as np
import pytest
import torch

import baselines
import grpo
import metrics
import train
from lab import estimators

RNG_LOGITS = np.random.default_rng(0).normal(size=4) * 0.7  # a start that is no symmetric point


def test_every_algorithm_has_a_claim_and_a_row_on_every_case(tmp_path):
    assert set(train.ADVANTAGES) <= set(estimators.CLAIMS)
    rows = estimators.main(
        ["--methods", "grpo", "maxrl", "--cases", "rare", "code"]
        + ["--check-groups", "200", "--out", str(tmp_path)]
    )
    assert [(r.method, r.case) for r in rows] == [
        ("grpo", "rare"),
        ("maxrl", "rare"),
        ("grpo", "code"),
        ("maxrl", "code"),
    ]
    assert (tmp_path / "conflict_fixed_points.png").stat().st_size > 0


@pytest.mark.parametrize("claim", ["mean", "set", "sum", "max@k", "log_success"])
def test_objective_gradients_match_finite_differences(claim):
    for case in estimators.CASES.values():
        objective = estimators.objective_of(case, claim)
        exact = estimators.objective_gradient(objective, RNG_LOGITS)
        h = 1e-5
        numeric = [
            (
                estimators.objective_value(objective, RNG_LOGITS + h * e)
                - estimators.objective_value(objective, RNG_LOGITS - h * e)
            )
            / (2 * h)
            for e in np.eye(4)
        ]
        np.testing.assert_allclose(exact, numeric, atol=1e-8, rtol=1e-6)


@pytest.mark.parametrize("method", ["rloo", "vpo_loo"])
def test_leave_one_out_expects_G_times_the_gradient(method):
    """An unbiased estimator with a leave-one-out baseline: E[sum_g A_g score_g] = G grad J, so
    the enumeration, the advantage and the objective must agree to rounding."""
    case = estimators.CASES["conflict"]
    estimator = estimators.Estimator(method, case)
    objective = estimators.objective_of(case, estimators.CLAIMS[method])
    G = estimator.enum.groups.shape[1]
    np.testing.assert_allclose(
        estimator.expected_update(RNG_LOGITS),
        G * estimators.objective_gradient(objective, RNG_LOGITS),
        atol=1e-10,
    )


SAMPLED = ["grpo", "vpo", "max_at_k", "random_weights", "ucb_con", "batch_explore", "maxrl"]


@pytest.mark.parametrize("method", SAMPLED + ["one_file vpo"])
def test_enumerated_update_matches_sampled_groups(method):
    case = estimators.CASES["rare"]
    exact = estimators.Estimator(method, case).expected_update(RNG_LOGITS)
    groups = 3000 if estimators.method_answers(method) > 1 else 20000
    mean, se = estimators.sampled_update(method, case, RNG_LOGITS, groups, seed=1)
    assert (np.abs(mean - exact) <= 4.5 * se + 1e-9).all(), (mean, exact, se)


# ---- The pitfalls, each as a failing example ----


def agrees(update, gradient):
    """The check the table makes: the expected update points along the claimed gradient."""
    return estimators.cosine(update, gradient) > 0.99


def test_per_component_normalization_vanishes_when_components_sum_to_one_total():
    """GDPO z-scores each component: with r_1 + r_2 = 1 for every answer the z-scores cancel, and
    its update is zero although the fixed scalarization (0.7, 0.3) has a gradient."""
    case = estimators.Case(
        ["a", "b", "c", "d"],
        [[1.0, 0.0], [0.0, 1.0], [0.5, 0.5], [0.8, 0.2]],
        start=[0.0] * 4,
        scalar_weights=[0.7, 0.3],
    )
    gradient = estimators.objective_gradient(estimators.objective_of(case, "mean"), RNG_LOGITS)
    gdpo = estimators.Estimator("gdpo", case).expected_update(RNG_LOGITS)
    assert np.abs(gdpo).max() < 1e-9 and np.linalg.norm(gradient) > 0.05
    assert not agrees(gdpo, gradient)
    assert agrees(estimators.Estimator("grpo", case).expected_update(RNG_LOGITS), gradient)


def test_maxrl_follows_log_success_only_on_binary_rewards():
    """On 0/1 rewards MaxRL's update is a function of P(success) alone, so it points along grad
    log P(success); on graded rewards it follows the mean reward instead (cosine 0.08 on rare)."""
    binary = estimators.Case(
        ["pass", "fail_a", "fail_b", "fail_c"], [[1.0], [0.0], [0.0], [0.0]], start=[0.0] * 4
    )
    for case, expected in ((binary, True), (estimators.CASES["rare"], False)):
        gradient = estimators.objective_gradient(
            estimators.objective_of(case, "log_success"), case.start
        )
        update = estimators.Estimator("maxrl", case).expected_update(case.start)
        assert agrees(update, gradient) is expected


def subset_credits(scores, k, credit):
    """Per rollout, the mean over the k-subsets of its group that hold it of credit(subset scores
    (P, k), its place in the subset) -> (P, G)."""
    P, G = scores.shape
    total = torch.zeros_like(scores)
    for subset in itertools.combinations(range(G), k):
        chosen = scores[:, list(subset)]
        for j, i in enumerate(subset):
            total[:, i] += credit(chosen, j)
    return total / math.comb(G - 1, k - 1)


def others_max(chosen, j):
    return torch.cat([chosen[:, :j], chosen[:, j + 1 :]], 1).max(1).values


def test_pass_at_k_credit_must_zero_the_non_best_answers_by_a_baseline():
    """grad E[max of k] = E over k-subsets of sum_i (max S - max S without i) score_i: the
    non-best answers get zero, and the estimate is exact in expectation with a small variance.
    Crediting every member with max S is unbiased too, but its variance is ~90 times as large;
    zeroing the non-best by dropping their credit (no baseline) is biased."""
    case, k = estimators.CASES["rare"], 4
    pi = estimators.softmax(case.start)
    enum = estimators.enumerate_groups(case, 1, 8)
    scores = enum.scalar[:, :, 0]
    gradient = estimators.objective_gradient(estimators.objective_of(case, "max@k"), case.start)
    marginal = subset_credits(scores, k, lambda s, j: s.max(1).values - others_max(s, j))
    every_member = subset_credits(scores, k, lambda s, j: s.max(1).values)
    best_only = subset_credits(
        scores, k, lambda s, j: torch.where(s.max(1).indices == j, s.max(1).values, 0.0)
    )
    # inside every subset the marginal credit is zero for each answer below the subset's best
    subsets = scores[:, :k]
    for j in range(k):
        below = subsets[:, j] < subsets.max(1).values
        credit = subsets.max(1).values - others_max(subsets, j)
        assert (credit[below] == 0).all() and (credit[~below] >= 0).all()

    def relative_variance(adv):
        update = estimators.expected_update_of(adv.numpy(), enum, pi)
        return estimators.update_variance(adv.numpy(), enum, pi) / (update @ update), update

    marginal_var, marginal_update = relative_variance(marginal)
    every_var, every_update = relative_variance(every_member)
    assert agrees(marginal_update, gradient) and agrees(every_update, gradient)
    assert every_var > 20 * marginal_var
    assert not agrees(estimators.expected_update_of(best_only.numpy(), enum, pi), gradient)
    # the project's Max@K without the std division is the unbiased one
    plain = baselines.max_at_k_advantages(scores, k, std="none").numpy()
    assert agrees(estimators.expected_update_of(plain, enum, pi), gradient)


def test_dynamic_sampling_must_filter_on_the_raw_reward():
    """Raw 0/1 correctness plus a small shaping bonus. Filtering groups on the shaped reward keeps
    the groups whose answers are all correct, where the z-score blows the 0.02 bonus up to unit
    size: the update chases the bonus. Filtering on the raw reward follows correctness."""
    case = estimators.Case(
        ["right", "right_styled", "wrong_styled", "wrong"],
        [[1.0, 0.0], [1.0, 0.02], [0.0, 0.02], [0.0, 0.0]],
        start=np.log([0.45, 0.45, 0.05, 0.05]),
    )
    pi = estimators.softmax(case.start)  # mostly right: most groups are all right
    enum = estimators.enumerate_groups(case, 1, 8)
    raw, shaped = enum.rewards[:, :, 0, 0], enum.rewards[:, :, 0].sum(-1)
    adv = grpo.grpo_advantages(shaped).numpy()  # trained on the shaped reward, as DAPO would

    def kept_update(keep):
        """The mean over kept groups: a batch of groups that pass the filter."""
        P = estimators.group_probabilities(enum, pi) * keep.numpy()
        return P @ estimators.update_of(adv, enum.counts, pi) / P.sum()

    correctness = estimators.objective_of(case._replace(scalar_weights=[1.0, 0.0]), "mean")
    raw_gradient = estimators.objective_gradient(correctness, case.start)
    on_raw = kept_update(raw.std(1) > 0)
    on_shaped = kept_update(shaped.std(1) > 0)
    assert agrees(on_raw, raw_gradient)
    assert not agrees(on_shaped, raw_gradient)


def test_bootstrapped_best_at_k_is_biased_low_against_the_exact_estimator():
    """Over every pool of n answers a policy can draw, metrics.max_at_k (k of the n without
    replacement) averages to the exact E[best of k]; resampling the pool with replacement (the
    bootstrap) draws repeats, and averages lower."""
    case, n, k = estimators.CASES["rare"], 8, 4
    pi = estimators.softmax(RNG_LOGITS)
    exact = estimators.objective_value(estimators.objective_of(case, "max@k"), RNG_LOGITS)
    enum = estimators.enumerate_groups(case, 1, n)
    P = estimators.group_probabilities(enum, pi)
    pools = np.sort(enum.scalar[:, :, 0].numpy(), axis=1)
    unbiased = P @ np.array([metrics.max_at_k(pool, k) for pool in pools])
    # with replacement: the j-th smallest is the max with probability (j/n)^k - ((j-1)/n)^k
    j = np.arange(1, n + 1)
    bootstrap = P @ (pools @ ((j / n) ** k - ((j - 1) / n) ** k))
    assert abs(unbiased - exact) < 1e-12
    assert bootstrap < exact - 0.01
