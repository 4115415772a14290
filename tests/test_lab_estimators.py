"""lab/estimators.py: the exact objective gradients against finite differences, the enumerated
expected updates against sampled groups (and, for the unbiased estimators, against G times the
gradient), every method with a claim, and the pitfalls the field has hit, each as an example that
the checks here catch: per-component normalization when the components sum to one total, MaxRL
on non-binary rewards, a pass@k credit that does not zero the non-best answers, dynamic sampling
that filters on the shaped reward, and a bootstrapped best@k against metrics.max_at_k. Then sets
written in sequence: which per-answer credits stay exact, which only for independent answers."""

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


# ---- Sets written in sequence: per-answer credit ----


@pytest.fixture(scope="module")
def sequences():
    """The sequential case's enumerations, m = 3 and m = 2 (built once: 27,405 groups of 4)."""
    return {m: estimators.Sequences(estimators.SEQUENTIAL_CASE, m) for m in (3, 2)}


def start_update(seqs, form, baseline, independent):
    """(cosine, norm ratio) of a row's expected update against grad E[R] at the start."""
    theta = estimators.sequential_start(seqs, independent)
    update = estimators.SequentialCredit(seqs, form, baseline).expected_update(theta)
    gradient = seqs.gradient(theta)
    return estimators.cosine(update, gradient), np.linalg.norm(update) / np.linalg.norm(gradient)


@pytest.mark.parametrize("m", [3, 2])
@pytest.mark.parametrize("independent", [False, True])
def test_sequential_gradient_matches_finite_differences(sequences, m, independent):
    seqs = sequences[m]
    theta = estimators.sequential_start(seqs, independent, seed=1)
    h = 1e-5
    numeric = []
    for e in np.eye(theta.size):
        step = h * e.reshape(theta.shape)
        numeric.append((seqs.value(theta + step) - seqs.value(theta - step)) / (2 * h))
    np.testing.assert_allclose(seqs.gradient(theta), numeric, atol=1e-9)


def test_the_scores_of_a_hand_counted_set():
    """left (1, 0), right (0, 1), balanced (0.6, 0.6) under uniform weightings: E max(w, 1 - w) =
    3/4, E max(w, 0.6) = 0.68 (the fixed Sobol weightings within 1e-3)."""
    seqs = estimators.Sequences(estimators.SEQUENTIAL_CASE, 2, G=2)
    left_balanced = seqs.seqs.tolist().index([0, 2])
    left_left = seqs.seqs.tolist().index([0, 0])
    np.testing.assert_allclose(seqs.prefix[left_balanced], [0, 0.5, 0.68], atol=1e-3)
    np.testing.assert_allclose(seqs.prefix[left_left], [0, 0.5, 0.5], atol=1e-3)
    # a repeat: the set without the first left still holds the second (0.5); with the first row
    # zeroed in the training rewards, whose repeat is zero already, it holds nothing
    assert abs(seqs.without["marginal"][left_left, 0] - 0.5) < 1e-3
    assert seqs.without["marginal_zeroed"][left_left, 0] == 0.0


UNBIASED_EVERYWHERE = {("set", "mean"): 1, ("set", "loo"): 0, ("togo", "mean"): 1}
UNBIASED_EVERYWHERE |= {("togo", "loo"): 0, ("value", "none"): 0}


@pytest.mark.parametrize("row", list(UNBIASED_EVERYWHERE))
@pytest.mark.parametrize("independent", [False, True])
def test_set_and_reward_to_go_credits_are_unbiased_for_sequential_sets(sequences, row, independent):
    """A baseline fixed by the answers before j (the prefix's score, the exact expectation) or by
    the other rollouts (the group's mean at the same place) leaves answer j's term exact: the
    expected update is G times the gradient (G - 1 with the mean, which holds the rollout itself;
    to 1e-4: grpo_advantages zeroes a group whose set scores differ by less than its eps, as the
    fixed weightings score left and right alone, 0.5 each in exact arithmetic)."""
    for m, seqs in sequences.items():
        cos, ratio = start_update(seqs, *row, independent)
        assert cos > 1 - 1e-9, (m, cos)
        assert abs(ratio - (seqs.G - UNBIASED_EVERYWHERE[row])) < 1e-4, (m, ratio)


def test_marginal_credit_is_unbiased_only_for_independent_answers(sequences):
    """The set without answer j holds the answers written after j, which depend on j when the
    answers are written in sequence: exact for independent answers, bent for sequential ones."""
    for seqs in sequences.values():
        for baseline in ("mean", "loo"):
            assert start_update(seqs, "marginal", baseline, True)[0] > 1 - 1e-9
            assert start_update(seqs, "marginal", baseline, False)[0] < 0.99


def test_prefix_gain_is_biased_even_for_independent_answers(sequences, monkeypatch):
    """What j adds when written leaves out what it changes in the later answers' gains (a repeat
    of j adds nothing): biased for independent answers too, and its ascent stops at the greedy set
    (balanced, then a specialist: 0.68) where two answers are written, below the optimum's 0.75.
    Ascent is cut at 1000 steps: the gain's is at the greedy set by then, the optimum's within
    1e-3 of 0.75."""
    for seqs in sequences.values():
        for independent in (False, True):
            assert start_update(seqs, "gain", "loo", independent)[0] < 0.99
    monkeypatch.setattr(estimators, "ASCENT_STEPS", 1000)
    rows = estimators.measure_sequential([("gain", "loo")], sets=(2,))
    gain, optimum = [r for r in rows if not r.independent]
    assert gain.value < 0.69 and gain.shares[2] > 0.45 and optimum.value > 0.749


def test_zeroing_a_repeat_before_the_marginal_biases_it_even_for_independent_answers(sequences):
    """Training zeroes a repeated answer's reward; the set without j, taken by zeroing j's row of
    those rewards, loses j's later repeats too, so the first of two copies is paid for both."""
    for seqs in sequences.values():
        assert start_update(seqs, "marginal", "loo", True)[0] > 1 - 1e-9
        assert start_update(seqs, "marginal_zeroed", "loo", True)[0] < 0.99


def test_the_group_std_bends_every_credit(sequences):
    """Dividing by the std of the group's set scores (VPO's z-score) bends the set credit and the
    reward-to-go alike; dropping the groups whose set scores are all equal (with no division) bends
    the reward-to-go, whose credits can differ inside such a group."""
    seqs = sequences[3]
    assert start_update(seqs, "set", "z", False)[0] < 0.99
    assert start_update(seqs, "togo", "z", False)[0] < 0.99
    assert start_update(sequences[2], "togo", "zeroed", True)[0] < 0.99
    assert start_update(seqs, "togo", "zeroed", False)[0] < 1 - 1e-6


def test_vpo_z_score_stops_short_of_the_compromise_for_independent_answers(monkeypatch):
    """The table's first finding on the sequential lab's own case: VPO's z-score keeps about half
    the compromise the set score's optimum holds when the answers are independent. Ascent is cut
    at 200 steps: the independent policies' ascents stop by themselves before it (checked), the
    sequential ones, unused here, would take thousands."""
    monkeypatch.setattr(estimators, "ASCENT_STEPS", 200)
    rows = estimators.measure_sequential([("set", "z")], sets=(3,))
    vpo_row, optimum = [r for r in rows if r.independent]
    assert vpo_row.steps < 200 and optimum.steps < 200
    assert vpo_row.shares[2] < 0.15 and 0.2 < optimum.shares[2] < 0.3
    assert vpo_row.value < optimum.value


@pytest.mark.parametrize("row", [("marginal", "loo"), ("togo", "z")])
def test_sequential_enumeration_matches_sampled_groups(sequences, row):
    """The enumerated expected update against the mean over sampled groups of G sequences."""
    seqs = sequences[3]
    theta = estimators.sequential_start(seqs, False)
    credit = estimators.SequentialCredit(seqs, *row)
    exact = credit.expected_update(theta)
    rng = np.random.default_rng(0)
    p = np.exp(seqs.log_probs(theta))
    members = rng.choice(len(p), size=(20000, seqs.G), p=p / p.sum())
    credits = estimators.credit_of(row[0], seqs.R, seqs.prefix, seqs.without)[members]
    adv = estimators.group_baseline(credits, seqs.R[members], row[1])  # (n, G, m)
    phi = seqs.scores(theta).reshape(len(p), seqs.m, -1)  # (S, m, parameters)
    per_group = np.einsum("ngj,ngjp->np", adv, phi[members])
    mean, se = per_group.mean(0), per_group.std(0, ddof=1) / np.sqrt(len(per_group))
    assert (np.abs(mean - exact) <= 4.5 * se + 1e-12).all()


def test_the_sequential_command_writes_its_table_and_figure(tmp_path, monkeypatch):
    """Every row and the optimum, at the start and where ascent stops; ascent is cut at 20 steps,
    as the numbers are not what is checked here (the findings' tests above check them)."""
    monkeypatch.setattr(estimators, "ASCENT_STEPS", 20)
    rows = estimators.main(["--sequential", "--sets", "2", "--out", str(tmp_path)])
    assert {r.m for r in rows} == {2} and len(rows) == 2 * (len(estimators.SEQUENTIAL_ROWS) + 1)
    table = (tmp_path / "table.md").read_text()
    assert "vpo_loo (set, leave-one-out)" in table and "the optimum" in table
    assert (tmp_path / "fixed_points.png").stat().st_size > 0
