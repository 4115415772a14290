"""lab/estimators.py: the exact objective gradients against finite differences, the enumerated
expected updates against sampled groups (and, for the unbiased estimators, against G times the
gradient), every method with a claim, and the pitfalls the field has hit, each as an example that
the checks here catch: per-component normalization when the components sum to one total, MaxRL
on non-binary rewards, a pass@k credit that does not zero the non-best answers, dynamic sampling
that filters on the shaped reward, and a bootstrapped best@k against metrics.max_at_k."""

import numpy as np
import pytest
import torch

import baselines
import train
from lab import estimators

RNG_LOGITS = np.random.default_rng(0).normal(size=4) * 0.7  # a start that is no symmetric point


def test_every_algorithm_has_a_claim_and_the_command_a_row_per_method_and_case(tmp_path):
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
    case = estimators.CONSTANT_SUM
    gradient = estimators.objective_gradient(estimators.objective_of(case, "mean"), RNG_LOGITS)
    gdpo = estimators.Estimator("gdpo", case).expected_update(RNG_LOGITS)
    assert np.abs(gdpo).max() < 1e-9 and np.linalg.norm(gradient) > 0.05
    assert not agrees(gdpo, gradient)
    assert agrees(estimators.Estimator("grpo", case).expected_update(RNG_LOGITS), gradient)


def test_maxrl_follows_log_success_only_on_binary_rewards():
    """On 0/1 rewards MaxRL's update is a function of P(success) alone, so it points along grad
    log P(success); on graded rewards it follows the mean reward instead."""
    for case, expected in ((estimators.BINARY, True), (estimators.CASES["rare"], False)):
        gradient = estimators.objective_gradient(
            estimators.objective_of(case, "log_success"), case.start
        )
        update = estimators.Estimator("maxrl", case).expected_update(case.start)
        assert agrees(update, gradient) is expected


def test_pass_at_k_credit_must_zero_the_non_best_answers_by_a_baseline():
    """grad E[max of k] = E over k-subsets of sum_i (max S - max S without i) score_i: the
    non-best answers get zero, exact in expectation with a small variance. Crediting every member
    with max S is unbiased too, with many times the variance; zeroing the non-best by dropping
    their credit (no baseline) is biased."""
    k = 4
    scores = torch.tensor(np.random.default_rng(0).integers(0, 5, size=(50, k)) / 4.0)
    marginal = estimators.PASS_AT_K_CREDITS["marginal"]
    for j in range(k):
        below = scores[:, j] < scores.max(1).values
        assert (marginal(scores, j)[below] == 0).all() and (marginal(scores, j) >= 0).all()
    credits = estimators.pass_at_k_credits(estimators.CASES["rare"], k)
    assert credits["marginal"][0] > 1 - 1e-9 and credits["every_member"][0] > 1 - 1e-9
    assert credits["every_member"][1] > 20 * credits["marginal"][1]
    assert credits["best_only"][0] < 0.9
    # the project's Max@K without its std division is the unbiased one
    case = estimators.CASES["rare"]
    enum = estimators.enumerate_groups(case, 1, 8)
    plain = baselines.max_at_k_advantages(enum.scalar[:, :, 0], k, std="none").numpy()
    update = estimators.expected_update_of(plain, enum, estimators.softmax(case.start))
    gradient = estimators.objective_gradient(estimators.objective_of(case, "max@k"), case.start)
    assert estimators.cosine(update, gradient) > 1 - 1e-9


def test_dynamic_sampling_must_filter_on_the_raw_reward():
    """Correctness plus a 0.02 style bonus, GRPO on their sum. Filtering groups on the shaped
    reward keeps the groups whose answers are all correct, where the z-score blows the bonus up to
    unit size: the update chases the bonus. Filtering on the raw reward follows correctness."""
    on_raw, on_shaped, raw_gradient = estimators.filtered_updates(estimators.SHAPED)
    assert agrees(on_raw, raw_gradient)
    assert not agrees(on_shaped, raw_gradient)
    assert on_shaped[0] < 0  # a correct answer pushed down


def test_bootstrapped_best_at_k_is_biased_low_against_the_exact_estimator():
    """Over every pool of n answers a policy can draw, metrics.max_at_k (k of the n without
    replacement) averages to the exact E[best of k]; resampling the pool with replacement (the
    bootstrap) draws repeats, and averages lower."""
    exact, unbiased, bootstrap = estimators.best_at_k_from_pools(
        estimators.CASES["conflict"], n=8, k=4
    )
    assert abs(unbiased - exact) < 1e-12
    assert bootstrap < exact - 0.005
