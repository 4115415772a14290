"""Exact small cases and invariances for the GRPO and VPO advantages (grpo.py, vpo.py)."""

import math

import pytest
import torch
from hypothesis import given, settings, strategies as st

from grpo import format_advantages, grpo_advantages, policy_loss
from vpo import (multi_rlvr_scores, random_weight_scores, sample_weights, set_scores,
                 vpo_advantages)


def assert_close(got, want, atol=1e-8, what="result"):
    """torch.allclose's check, failing with a few numbers instead of two tensor dumps."""
    __tracebackhide__ = True  # pytest: show the test's line, not this one
    got, want = torch.as_tensor(got), torch.as_tensor(want, dtype=torch.as_tensor(got).dtype)
    if got.shape != want.shape:
        raise AssertionError(f"{what} has shape {tuple(got.shape)}, expected {tuple(want.shape)}")
    if not torch.allclose(got, want, atol=atol):
        worst = int((got - want).abs().flatten().nan_to_num(float("inf")).argmax())
        flat_got, flat_want = got.flatten().tolist(), want.flatten().tolist()
        raise AssertionError(f"{what}: got {[round(x, 4) for x in flat_got[:6]]}, expected "
                             f"{[round(x, 4) for x in flat_want[:6]]}; worst at position {worst}: "
                             f"{flat_got[worst]:.4g} instead of {flat_want[worst]:.4g}")


# ---------------------------------------------------------------- GRPO
def test_grpo_hand_computed():
    # scores 0, 1, 2, 3: mean 1.5, population std sqrt(1.25) = 1.1180
    adv = grpo_advantages(torch.tensor([[0.0, 1.0, 2.0, 3.0]]), eps=0.0)
    s = math.sqrt(1.25)
    assert_close(adv, torch.tensor([[-1.5 / s, -0.5 / s, 0.5 / s, 1.5 / s]]), atol=1e-6)


def test_grpo_two_values():
    # a 0/1 group with one success out of 4: mean .25, std sqrt(.1875)
    adv = grpo_advantages(torch.tensor([[1.0, 0.0, 0.0, 0.0]]), eps=0.0)
    s = math.sqrt(0.1875)
    assert_close(adv, torch.tensor([[0.75 / s, -0.25 / s, -0.25 / s, -0.25 / s]]), atol=1e-6)


def test_grpo_degenerate_group_is_zero_not_nan():
    adv = grpo_advantages(torch.tensor([[0.7, 0.7, 0.7], [0.0, 0.0, 0.0], [0.0, 1.0, 0.0]]))
    assert torch.isfinite(adv).all()
    assert (adv[:2] == 0).all() and (adv[2] != 0).all()


def test_grpo_groups_are_independent():
    a = torch.tensor([[1.0, 2.0, 4.0], [10.0, 0.0, 5.0]])
    both = grpo_advantages(a)
    assert_close(both[0], grpo_advantages(a[:1])[0])
    assert_close(both[1], grpo_advantages(a[1:])[0])


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(-10, 10), min_size=2, max_size=8), st.floats(-100, 100), st.floats(0.1, 100))
def test_grpo_shift_and_scale_invariant(values, shift, scale):
    s = torch.tensor([values], dtype=torch.float64)
    if s.std(unbiased=False) < 1e-3:
        return  # the eps guard legitimately breaks scale invariance for near-constant groups
    a = grpo_advantages(s, eps=1e-9)
    b = grpo_advantages(s * scale + shift, eps=1e-9)
    assert_close(a, b, atol=1e-5)
    assert abs(float(a.mean())) < 1e-6


# ---------------------------------------------------------------- VPO
def test_set_score_hand_computed():
    # one group, two rollouts of M=2 answers in D=2; two weightings (1,0) and (0,1)
    rewards = torch.tensor([[[[1.0, 0.0], [0.0, 1.0]],      # specialists: max under (1,0)=1, under (0,1)=1
                             [[0.6, 0.6], [0.6, 0.6]]]])    # a generalist twice: .6 and .6
    weights = torch.tensor([[[1.0, 0.0], [0.0, 1.0]]])
    scores = set_scores(rewards, weights)
    # the mean over weightings of the best answer: (1 + 1) / 2 = 1 and .6; the reductions swapped (the best
    # answer's mean over weightings) would give max(.5, .5) = .5 for the specialists
    assert_close(scores, torch.tensor([[1.0, 0.6]]), what="set_scores")
    adv = vpo_advantages(rewards, weights, eps=0.0)
    assert_close(adv, torch.tensor([[1.0, -1.0]]), what="vpo_advantages")


def test_vpo_with_one_dimension_is_grpo_on_the_max():
    torch.manual_seed(0)
    rewards = torch.rand(3, 5, 4, 1)
    weights = sample_weights(3, 7, 1)
    expected = grpo_advantages(rewards.squeeze(-1).max(-1).values)
    assert_close(vpo_advantages(rewards, weights), expected, atol=1e-6)


def test_duplicates_do_not_change_vpo():
    torch.manual_seed(1)
    rewards = torch.rand(2, 4, 3, 5)
    weights = sample_weights(2, 50, 5, generator=torch.Generator().manual_seed(0))
    duplicated = rewards.clone()
    duplicated[:, :, 2] = duplicated[:, :, 0]  # a repeated answer ...
    deduped = duplicated.clone()
    deduped[:, :, 2] = 0.0  # ... and the same set with the repeat dropped (zero row)
    assert_close(set_scores(duplicated, weights), set_scores(deduped, weights))


def test_vpo_degenerate_group_is_zero():
    rewards = torch.zeros(2, 4, 3, 5)
    weights = sample_weights(2, 10, 5)
    adv = vpo_advantages(rewards, weights)
    assert torch.isfinite(adv).all() and (adv == 0).all()


def test_vpo_prefers_a_spread_set_to_a_repeated_one():
    # the point of VPO: two specialists beat one specialist written twice, on average over w
    spread = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    repeated = torch.tensor([[1.0, 0.0], [0.0, 0.0]])
    rewards = torch.stack([spread, repeated])[None]  # (1, 2, 2, 2)
    weights = sample_weights(1, 200, 2, generator=torch.Generator().manual_seed(0))
    adv = vpo_advantages(rewards, weights)
    assert adv[0, 0] > 0 > adv[0, 1]


@pytest.mark.parametrize("sampler", ["dirichlet", "sobol"])
def test_sample_weights_on_simplex_and_seeded(sampler):
    w = sample_weights(3, 64, 4, sampler=sampler, generator=torch.Generator().manual_seed(0))
    assert w.shape == (3, 64, 4)
    assert (w >= 0).all() and torch.allclose(w.sum(-1), torch.ones(3, 64), atol=1e-5)
    w2 = sample_weights(3, 64, 4, sampler=sampler, generator=torch.Generator().manual_seed(0))
    assert torch.equal(w, w2)
    # uniform on the simplex: each coordinate has mean 1/D
    assert_close(w.mean((0, 1)), torch.full((4,), 0.25), atol=0.05)


def test_sobol_lowers_the_noise_of_the_set_score():
    # same N, many repetitions: the quasi-MC estimate of E_w[max_m w.r] varies less
    rewards = torch.eye(4)[None, None, :3]  # one rollout with three one-hot answers in D=4
    def spread(sampler):
        est = [set_scores(rewards, sample_weights(1, 16, 4, sampler=sampler,
                                                  generator=torch.Generator().manual_seed(s))).item()
               for s in range(200)]
        return torch.tensor(est).std()
    assert spread("sobol") < spread("dirichlet")


def test_sample_weights_rejects_bad_arguments():
    with pytest.raises(ValueError):
        sample_weights(1, 4, 3, alpha=0.0)
    with pytest.raises(ValueError):
        sample_weights(1, 4, 3, sampler="sobol", alpha=0.5)
    with pytest.raises(ValueError):
        sample_weights(1, 4, 3, sampler="grid")


def test_dirichlet_alpha_concentrates():
    gen = torch.Generator().manual_seed(0)
    peaked = sample_weights(1, 2000, 3, alpha=0.1, generator=gen).max(-1).values.mean()
    flat = sample_weights(1, 2000, 3, alpha=10.0, generator=gen).max(-1).values.mean()
    assert peaked > 0.8 and flat < 0.5


# ---------------------------------------------------------------- ablation scores
def test_multi_rlvr_is_the_set_sum():
    scalar = torch.tensor([[[0.5, 0.25, 0.0], [1.0, 0.0, 0.0]]])
    assert_close(multi_rlvr_scores(scalar), torch.tensor([[0.75, 1.0]]))


def test_random_weight_scores():
    rewards = torch.tensor([[[1.0, 0.0], [0.2, 0.8]]])  # (P=1, G=2, D=2)
    w = torch.tensor([[0.25, 0.75]])
    assert_close(random_weight_scores(rewards, w), torch.tensor([[0.25, 0.65]]))


# ---------------------------------------------------------------- shared loss
def test_policy_loss_first_update_is_minus_mean_advantage():
    logp = torch.log(torch.tensor([[0.5, 0.5, 0.5], [0.2, 0.2, 0.2]])).requires_grad_()
    mask = torch.tensor([[True, True, False], [True, True, True]])
    adv = torch.tensor([1.0, -2.0])
    loss, stats = policy_loss(logp, logp.detach(), adv, mask)
    # ratio 1: loss = -(1 + 1 - 2 - 2 - 2) / 5 tokens = 0.8
    assert abs(loss.item() - 0.8) < 1e-6 and stats["clip_frac"] == 0 and stats["kl"] == 0
    loss.backward()
    # d loss / d logp = -adv / n_tokens on real tokens, 0 on padding
    assert_close(logp.grad, torch.tensor([[-0.2, -0.2, 0.0], [0.4, 0.4, 0.4]]))


def test_policy_loss_clips():
    old = torch.zeros(1, 2)
    new = torch.tensor([[0.5, -0.5]], requires_grad=True)  # ratios e^.5=1.65 and e^-.5=.61
    loss, stats = policy_loss(new, old, torch.tensor([1.0]), torch.ones(1, 2, dtype=torch.bool), clip=0.2)
    # positive advantage: the high ratio is clipped to 1.2 (no gradient), the low one is not
    assert stats["clip_frac"] == 0.5 and stats["ratio_outside_clip"] == 1.0
    assert abs(loss.item() - (-(1.2 + math.exp(-0.5)) / 2)) < 1e-6
    loss.backward()
    assert new.grad[0, 0] == 0 and new.grad[0, 1] != 0


def test_k3_kl_is_zero_at_reference_and_positive_elsewhere():
    logp = torch.log(torch.tensor([[0.5, 0.25]]))
    mask = torch.ones(1, 2, dtype=torch.bool)
    _, same = policy_loss(logp, logp, torch.zeros(1), mask, ref_logprobs=logp, kl_coef=0.1)
    _, diff = policy_loss(logp, logp, torch.zeros(1), mask, ref_logprobs=logp - 0.3, kl_coef=0.1)
    assert same["kl"] == 0 and diff["kl"] > 0
    # k3 with log r = -0.3 on both tokens: e^-.3 + .3 - 1
    assert abs(diff["kl"] - (math.exp(-0.3) + 0.3 - 1)) < 1e-6


def test_leave_one_out_hand_computed():
    from vpo import leave_one_out_advantages
    # scores 1, 2, 6: others' means 4, 3.5, 1.5
    adv = leave_one_out_advantages(torch.tensor([[1.0, 2.0, 6.0]]))
    assert_close(adv, torch.tensor([[-3.0, -1.5, 4.5]]))
    assert (leave_one_out_advantages(torch.ones(2, 4)) == 0).all()


# ---------------------------------------------------------------- GRPO's own fixes (flags, off by default)
def test_grpo_without_std_division_is_dr_grpo():
    scores = torch.tensor([[1.0, 2.0, 6.0], [4.0, 4.0, 4.0]])
    assert_close(grpo_advantages(scores, scale="none"), torch.tensor([[-2.0, -1.0, 3.0], [0.0, 0.0, 0.0]]))


def test_clip_higher_lets_a_likely_good_token_grow_further():
    old = torch.zeros(1, 2)
    new = torch.tensor([[0.25, 0.5]], requires_grad=True)  # ratios 1.28 and 1.65
    loss, stats = policy_loss(new, old, torch.tensor([1.0]), torch.ones(1, 2, dtype=torch.bool), clip=0.2,
                              clip_high=0.3)
    assert stats["clip_frac"] == 0.5  # 1.28 is inside [0.8, 1.3], 1.65 is not
    assert abs(loss.item() - (-(math.exp(0.25) + 1.3) / 2)) < 1e-6
    loss.backward()
    assert new.grad[0, 0] != 0 and new.grad[0, 1] == 0


def test_entropy_bonus_has_the_gradient_of_the_mean_token_entropy():
    torch.manual_seed(0)
    logits = torch.randn(2, 3, 5, requires_grad=True)
    mask = torch.tensor([[True, True, False], [True, True, True]])
    tokens = torch.randint(0, 5, (2, 3))

    def loss_of(coef):
        logp_all = torch.log_softmax(logits, -1)
        logp = logp_all.gather(-1, tokens[..., None])[..., 0]
        entropy = -(logp_all.exp() * logp_all).sum(-1)
        return policy_loss(logp, logp.detach(), torch.zeros(2), mask, entropy=entropy, entropy_coef=coef)
    loss, stats = loss_of(0.5)
    grad_with = torch.autograd.grad(loss, logits)[0]
    # with zero advantages the whole gradient is the bonus's: -0.5 * d(mean entropy)/d(logits), != 0
    p = torch.softmax(logits.detach(), -1)
    plogp = p * torch.log(p)
    d_entropy = -(plogp - p * plogp.sum(-1, keepdim=True))  # d H / d logits, by hand
    want = -0.5 * d_entropy * mask[..., None] / mask.sum()
    assert_close(grad_with, want, atol=1e-6)
    assert grad_with.abs().sum() > 0
    assert abs(stats["entropy_bonus"] - float((-(p * torch.log(p)).sum(-1) * mask).sum() / mask.sum())) < 1e-6
    loss0, _ = loss_of(0.0)
    assert torch.autograd.grad(loss0, logits, allow_unused=True)[0].abs().sum() == 0


def test_clip_higher_acts_once_the_ratio_passes_1_plus_clip():
    # a ratio of 1.25 on a positive advantage: the symmetric clip (0.2) caps it at 1.2 and stops its
    # gradient; clip-higher (0.28) leaves it alone. At ratio 1 (one update per batch) both are equal.
    old = torch.zeros(1, 1)
    mask = torch.ones(1, 1, dtype=torch.bool)
    adv = torch.tensor([1.0])
    for clip_high, want_loss, want_grad in [(None, -1.2, 0.0), (0.28, -1.25, -1.25)]:
        new = torch.tensor([[math.log(1.25)]], requires_grad=True)
        loss, stats = policy_loss(new, old, adv, mask, clip=0.2, clip_high=clip_high)
        loss.backward()
        assert abs(loss.item() - want_loss) < 1e-6 and abs(new.grad.item() - want_grad) < 1e-6
        assert stats["clip_frac"] == (1.0 if clip_high is None else 0.0)
        at_one, _ = policy_loss(old.clone(), old, adv, mask, clip=0.2, clip_high=clip_high)
        assert abs(at_one.item() + 1.0) < 1e-6


def test_constant_normaliser_gives_every_token_the_same_weight():
    """Dr. GRPO's loss: token sum / (rollouts x longest possible completion). A token's gradient is
    -A / normaliser however long the batch's other completions are; under the token mean it is
    -A / (tokens in the batch), so a long completion elsewhere shrinks it."""
    def grad(lengths, normaliser):
        mask = torch.tensor([[t < n for t in range(4)] for n in lengths])
        logp = torch.zeros(len(lengths), 4, requires_grad=True)
        loss, stats = policy_loss(logp, logp.detach(), torch.tensor([1.0] * len(lengths)), mask,
                                  normaliser=normaliser)
        loss.backward()
        return logp.grad[0, 0].item(), loss.item(), stats
    # two rollouts, at most 4 tokens each: normaliser 2 x 4 = 8
    assert abs(grad([1, 1], 8)[0] + 1 / 8) < 1e-7 and abs(grad([1, 4], 8)[0] + 1 / 8) < 1e-7
    assert abs(grad([1, 1], None)[0] + 1 / 2) < 1e-7 and abs(grad([1, 4], None)[0] + 1 / 5) < 1e-7
    _, loss, stats = grad([1, 4], 8)
    assert abs(loss + 5 / 8) < 1e-6 and abs(stats["pg_loss"] + 1.0) < 1e-6  # stats stay token means


def test_grpo_format_advantage_is_the_group_z_score_of_the_share_of_answers_that_score():
    r = torch.zeros(2, 2, 3, 4)  # (P, G, m, D)
    r[0, 0, :, 0] = 1.0  # group 0: rollout 0 has 3 answers that score, rollout 1 one (share 1 vs 1/3)
    r[0, 1, 2, 1:] = 0.5
    r[1, :, 0, 0] = 1.0  # group 1: one answer each, flat, no signal
    assert_close(format_advantages(r), torch.tensor([[1.0, -1.0], [0.0, 0.0]]), atol=1e-4)

