"""baselines.py against independent computations: Max@K against brute force over every k-subset and
against pass@k training's closed form, GDPO and MaxRL against hand-computed values."""

import itertools
import math
import statistics

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from baselines import gdpo_advantages, max_at_k_advantages, maxrl_advantages
from grpo import grpo_advantages


def brute_max_at_k(group, k, eps=1e-6):
    """By definition: every k-subset is an attempt worth its max; a rollout's credit is the mean
    worth of the attempts it joins, centered and scaled by the attempts' mean and population std."""
    subsets = list(itertools.combinations(range(len(group)), k))
    worth = [max(group[i] for i in s) for s in subsets]
    rho, sigma = statistics.fmean(worth), statistics.pstdev(worth)
    if sigma < eps:
        return [0.0] * len(group)
    return [
        (statistics.fmean(w for s, w in zip(subsets, worth) if i in s) - rho) / (sigma + eps)
        for i in range(len(group))
    ]


@st.composite
def groups(draw, values=None):
    G = draw(st.integers(1, 7))
    value = st.sampled_from(values) if values else st.floats(0, 1, allow_nan=False)
    rows = [[draw(value) for _ in range(G)] for _ in range(draw(st.integers(1, 3)))]
    return rows, draw(st.integers(1, G))


@settings(max_examples=60, deadline=None, derandomize=True)
@given(groups())
def test_max_at_k_matches_brute_force_over_all_subsets(case):
    rows, k = case
    got = max_at_k_advantages(torch.tensor(rows, dtype=torch.float64), k)
    assert torch.allclose(
        got, torch.tensor([brute_max_at_k(r, k) for r in rows], dtype=torch.float64), atol=1e-9
    )


@settings(max_examples=60, deadline=None, derandomize=True)
@given(groups(values=[0.0, 0.3, 0.7, 1.0]))
def test_max_at_k_with_ties_matches_brute_force_and_sums_to_zero(case):
    rows, k = case
    got = max_at_k_advantages(torch.tensor(rows, dtype=torch.float64), k)
    assert torch.allclose(
        got, torch.tensor([brute_max_at_k(r, k) for r in rows], dtype=torch.float64), atol=1e-9
    )
    assert torch.all(got.sum(1).abs() < 1e-9)


def test_max_at_k_hand_computed():
    # 2-subsets of {0, .5, 1}: maxima .5, 1, 1 -> rho = 5/6, sigma = sqrt(1/18); m = (.75, .75, 1)
    got = max_at_k_advantages(torch.tensor([[0.0, 0.5, 1.0]]), 2, eps=0.0)
    s = math.sqrt(2)
    assert torch.allclose(got, torch.tensor([[-1 / (2 * s), -1 / (2 * s), 1 / s]]), atol=1e-6)


def test_max_at_k_on_binary_rewards_is_pass_at_k_training():
    """arXiv 2508.10751's closed form: rho = 1 - C(n-c, k)/C(n, k), sigma = sqrt(rho (1 - rho)),
    A_pos = (1 - rho)/sigma, A_neg = (1 - rho - C(n-c-1, k-1)/C(n-1, k-1))/sigma."""
    for n in range(2, 9):
        for c in range(n + 1):
            for k in range(1, n + 1):
                rho = 1 - math.comb(n - c, k) / math.comb(n, k)
                sigma = math.sqrt(rho * (1 - rho)) + 1e-6
                neg = (
                    (1 - rho - math.comb(n - c - 1, k - 1) / math.comb(n - 1, k - 1)) / sigma
                    if c < n
                    else 0
                )
                want = [(1 - rho) / sigma] * c + [neg] * (n - c)
                if rho * (1 - rho) == 0:
                    want = [0.0] * n
                got = max_at_k_advantages(
                    torch.tensor([[1.0] * c + [0.0] * (n - c)], dtype=torch.float64), k
                )
                assert torch.allclose(got[0], torch.tensor(want, dtype=torch.float64), atol=1e-9), (
                    n,
                    c,
                    k,
                )


def test_max_at_k_with_k_1_is_grpo_and_with_k_g_is_zero():
    scores = torch.rand(4, 6, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    assert torch.allclose(max_at_k_advantages(scores, 1), grpo_advantages(scores), atol=1e-9)
    assert torch.all(max_at_k_advantages(scores, 6) == 0)
    flat = torch.full((2, 4), 0.3)
    assert (
        torch.all(max_at_k_advantages(flat, 2) == 0)
        and torch.isfinite(max_at_k_advantages(flat, 2)).all()
    )


def test_max_at_k_stays_finite_for_large_groups():
    scores = torch.rand(2, 64, generator=torch.Generator().manual_seed(1))
    adv = max_at_k_advantages(scores, 32)
    assert adv.dtype == torch.float32 and torch.isfinite(adv).all()


def test_gdpo_hand_computed_where_grpo_cannot_tell_the_groups_apart():
    # group A: answers (1, 0) and (0, 0); group B: (1, 1) and (0, 0). GRPO on the summed reward
    # gives
    # both groups (1, -1). GDPO: A's component 1 is constant -> sums (1, -1); B -> (2, -2); then the
    # batch std of (1, -1, 2, -2) is sqrt(2.5): B's better answer earns twice A's
    rewards = torch.tensor([[[1.0, 0.0], [0.0, 0.0]], [[1.0, 1.0], [0.0, 0.0]]])
    assert torch.allclose(
        grpo_advantages(rewards.sum(-1)), torch.tensor([[1.0, -1.0], [1.0, -1.0]]), atol=1e-5
    )
    want = torch.tensor([[1.0, -1.0], [2.0, -2.0]]) / math.sqrt(2.5)
    assert torch.allclose(gdpo_advantages(rewards), want, atol=1e-6)


def test_gdpo_ignores_a_component_constant_in_the_group_and_the_scale_of_each_component():
    g = torch.Generator().manual_seed(0)
    rewards = torch.rand(3, 5, 3, generator=g)
    scaled = rewards * torch.tensor([10.0, 1.0, 0.1])
    assert torch.allclose(gdpo_advantages(rewards), gdpo_advantages(scaled), atol=1e-5)
    with_constant = torch.cat([rewards, torch.full((3, 5, 1), 0.7)], -1)
    assert torch.allclose(gdpo_advantages(rewards), gdpo_advantages(with_constant), atol=1e-6)
    # D = 1: GRPO's z-scores, rescaled once over the batch
    one = rewards[..., :1]
    z = grpo_advantages(one[..., 0])
    assert torch.allclose(gdpo_advantages(one), z / z.std(unbiased=False), atol=1e-4)
    assert torch.all(gdpo_advantages(torch.full((2, 4, 3), 0.5)) == 0)


def test_maxrl_hand_computed():
    # successes weigh 1/K - 1/G per rollout (times G): one success of four -> A = (3, -1, -1, -1)
    got = maxrl_advantages(
        torch.tensor([[1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.0]]), eps=0
    )
    assert torch.allclose(
        got, torch.tensor([[3.0, -1, -1, -1], [1 / 3, 1 / 3, 1 / 3, -1], [0, 0, 0, 0]])
    )
    # GRPO gives both groups the same magnitudes up to sign; MaxRL makes the rare success count more
    assert got[0, 0] > got[1, 0]


@pytest.mark.parametrize(
    "fn",
    [
        lambda s: max_at_k_advantages(s, 4),
        maxrl_advantages,
        lambda s: gdpo_advantages(s[..., None].repeat(1, 1, 3)),
    ],
)
def test_baselines_give_zeros_never_nan_on_groups_without_signal(fn):
    scores = torch.tensor([[0.0] * 8, [0.5] * 8, [1.0] * 8])
    adv = fn(scores)
    assert adv.shape == (3, 8) and torch.all(adv == 0)


def test_max_at_k_without_std_division_keeps_the_credit_undivided():
    # the hand case above: m = (.75, .75, 1), rho = 5/6, left undivided
    got = max_at_k_advantages(torch.tensor([[0.0, 0.5, 1.0]]), 2, std="none")
    assert torch.allclose(got, torch.tensor([[-1 / 12, -1 / 12, 1 / 6]]), atol=1e-6)


# ---------------------------------------------------------------- scale_rewards=none for every
# algorithm
# One group of three rollouts of m = 2 answers in D = 2, and two weightings (the single-answer
# weighted methods use the first). First answers (0,0), (1,0), (1,1): fixed scores 0, .5, 1.
STD_REWARDS = torch.tensor(
    [[[[0.0, 0.0], [0.0, 0.0]], [[1.0, 0.0], [0.0, 1.0]], [[1.0, 1.0], [0.0, 0.0]]]]
)
STD_WEIGHTS = torch.tensor([[[0.25, 0.75], [1.0, 0.0]]])
# Without the std division each advantage is its score minus the group's mean, by hand:
UNDIVIDED = {
    "grpo": [-0.5, 0.0, 0.5],  # fixed scores 0, .5, 1
    "multi_rlvr": [-2 / 3, 1 / 3, 1 / 3],  # set sums 0, 1, 1
    "random_weights": [-5 / 12, -1 / 6, 7 / 12],  # (.25, .75) . first answers: 0, .25, 1
    "goal_conditioned": [-5 / 12, -1 / 6, 7 / 12],
    "vpo": [-0.625, 0.25, 0.375],  # set scores 0, (.75 + 1) / 2, (1 + 1) / 2
    "max_at_k": [-1 / 12, -1 / 12, 1 / 6],  # k = 2 on 0, .5, 1 (the hand case above)
}
REFUSED = {
    "gdpo": "per-component std",
    "maxrl": "group's mean",
    "vpo_loo": "leave-one-out",
    "rloo": "leave-one-out",
}


# Their advantages also take the batch's outcomes, so the table above cannot call them; they pass
# scale_rewards on to GRPO's z-score (exploration.exploration_advantages).
EXPLORING = {"ucb", "ucb_mean", "ucb_con", "batch_explore"}


def test_scale_rewards_is_decided_for_every_algorithm():
    from train import ADVANTAGES

    decided = [set(UNDIVIDED), set(REFUSED), EXPLORING]
    assert set().union(*decided) == set(ADVANTAGES) and sum(map(len, decided)) == len(ADVANTAGES)


@pytest.mark.parametrize("algo", sorted(UNDIVIDED))
def test_scale_rewards_none_is_honored(algo):
    from train import ADVANTAGES, resolve_config

    fn = ADVANTAGES[algo][0]
    args = (STD_REWARDS, STD_REWARDS.mean(-1), STD_WEIGHTS)
    undivided = fn(
        *args, resolve_config(overrides=[f"algo={algo}", "max_k=2", "scale_rewards=none"])
    )
    assert torch.allclose(undivided, torch.tensor([UNDIVIDED[algo]]), atol=1e-6)
    divided = fn(*args, resolve_config(overrides=[f"algo={algo}", "max_k=2"]))
    assert not torch.allclose(divided, undivided, atol=1e-3)  # the flag changes something


@pytest.mark.parametrize("algo", sorted(REFUSED))
@pytest.mark.parametrize("scale", ["none", "batch"])
def test_scale_rewards_is_refused_where_no_group_std_is_divided(algo, scale):
    from config import ConfigError
    from train import resolve_config

    resolve_config(overrides=[f"algo={algo}"])
    with pytest.raises(ConfigError) as err:
        resolve_config(overrides=[f"algo={algo}", f"scale_rewards={scale}"])
    message = str(err.value)
    assert (
        message.startswith(f"scale_rewards={scale} does not apply to {algo}: ")
        and REFUSED[algo] in message
    )
    assert len(message.splitlines()) == 1


# ---------------------------------------------------------------- RLOO and TRL's scale_rewards
def test_rloo_is_each_score_minus_the_mean_of_the_others():
    # RLOO's advantage is vpo_loo's, on one answer's scalar score
    from vpo import leave_one_out_advantages

    got = leave_one_out_advantages(torch.tensor([[1.0, 2.0, 6.0], [4.0, 4.0, 4.0]]))
    # 1 - (2 + 6) / 2 = -3, 2 - (1 + 6) / 2 = -1.5, 6 - (1 + 2) / 2 = 4.5; a flat group gets zeros
    assert torch.allclose(got, torch.tensor([[-3.0, -1.5, 4.5], [0.0, 0.0, 0.0]]))


def test_rloo_trains_on_the_fixed_scalarization_of_one_answer():
    from train import ADVANTAGES, resolve_config

    fn = ADVANTAGES["rloo"].advantage
    assert not ADVANTAGES["rloo"].writes_sets
    got = fn(
        STD_REWARDS, STD_REWARDS.mean(-1), STD_WEIGHTS, resolve_config(overrides=["algo=rloo"])
    )
    # fixed scores of the first answers 0, .5, 1: 0 - .75, .5 - .5, 1 - .25
    assert torch.allclose(got, torch.tensor([[-0.75, 0.0, 0.75]]))


def test_batch_scale_divides_by_one_std_for_the_whole_batch():
    from grpo import grpo_advantages

    scores = torch.tensor([[0.0, 1.0], [0.0, 3.0], [2.0, 2.0]])
    # batch scores 0, 1, 0, 3, 2, 2: mean 4/3, population variance (16 + 1 + 16 + 25 + 4 + 4) / 9 /
    # 4... by hand:
    mean = 8 / 6
    std = (sum((x - mean) ** 2 for x in [0, 1, 0, 3, 2, 2]) / 6) ** 0.5
    want = torch.tensor([[-0.5, 0.5], [-1.5, 1.5], [0.0, 0.0]]) / std
    assert torch.allclose(grpo_advantages(scores, std="batch"), want, atol=1e-5)
    with pytest.raises(ValueError, match="std must be group, batch or none"):
        grpo_advantages(scores, std="rank")


def test_max_at_k_batch_std_is_grpos_at_k_1_and_every_attempts_std():
    """std="batch" divides by the std of every best-of-k attempt in the batch: at k = 1 GRPO's batch
    option (TRL's scale_rewards="batch"), not a mean of the groups' own spreads."""
    scores = torch.tensor([[0.0, 1.0], [2.0, 3.0]])
    # every score minus its group mean (0.5) over the std of 0, 1, 2, 3: sqrt(1.25)
    want = torch.tensor([[-0.5, 0.5], [-0.5, 0.5]]) / 1.25**0.5  # +-0.447
    assert torch.allclose(grpo_advantages(scores, std="batch"), want, atol=1e-6)
    assert torch.allclose(max_at_k_advantages(scores, 1, std="batch"), want, atol=1e-6)
    # k = 2 of 3: the attempts (subset maxima) are 0.5, 1, 1 in the first group and 0, 2, 2 in the
    # second; their std over all six, around their mean 13/12
    scores = torch.tensor([[0.0, 0.5, 1.0], [0.0, 0.0, 2.0]])
    attempts = torch.tensor([0.5, 1.0, 1.0, 0.0, 2.0, 2.0], dtype=torch.float64)
    none = max_at_k_advantages(scores, 2, std="none")
    batch = max_at_k_advantages(scores, 2, std="batch")
    assert torch.allclose(batch, none / attempts.std(unbiased=False), atol=1e-6)
    with pytest.raises(ValueError, match="std must be group, batch or none"):
        max_at_k_advantages(scores, 2, std="rank")


def test_reward_weights_set_the_fixed_scalarization_and_are_checked():
    import numpy as np

    from config import ConfigError, make_task
    from train import resolve_config

    r = torch.tensor([[1.0, 0.0, 0.5, 0.5]])
    assert make_task("persona").scalarize(r).item() == pytest.approx(0.5)  # the mean by default
    task = make_task("persona", reward_weights=[0.5, 0.0, 0.25, 0.25])
    assert task.scalarize(r).item() == pytest.approx(0.75)
    assert task.scalarize(np.array([[1.0, 0.0, 0.5, 0.5]])) == pytest.approx(0.75)  # numpy too
    for bad, why in [
        ([0.5, 0.5], "needs 4 numbers"),
        ([1.5, -0.5, 0, 0], "non-negative"),
        ([0.3, 0.3, 0.3, 0.0], "sum to 1"),
    ]:
        with pytest.raises(ConfigError, match=why):
            resolve_config(overrides=[f"task_options={{reward_weights: {bad}}}"])
