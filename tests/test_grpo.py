"""grpo.py: the GRPO advantage on exact small cases and invariances, the clipped policy loss every
method trains with (KL, clip-higher, entropy bonus, loss normalizer), the format advantage, and the
terms beside the advantage: fixed-weight terms (format reward, entropy bonus) on the same footing
for every method (advantage_rms), and the clip fraction as TRL and veRL count it."""

import math
import os

import pytest
import torch
from checks import assert_close
from hypothesis import given, settings
from hypothesis import strategies as st

from grpo import (
    LossSettings,
    format_advantages,
    grpo_advantages,
    policy_loss,
    token_advantages,
)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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
    expected = "a group whose scores all tie has std 0: its advantages must be 0 (guard std < eps)"
    assert torch.isfinite(adv).all(), f"{expected}, not NaN or inf; got {adv.tolist()}"
    assert (adv[:2] == 0).all(), f"{expected}; got {adv[:2].tolist()}"
    assert (adv[2] != 0).all(), (
        f"a group whose scores differ keeps its signal; got {adv[2].tolist()}"
    )


def test_grpo_near_equal_group_is_zero():
    # std 4.8e-7 < eps: without the guard (std < eps -> 0) the division by std + eps gives
    # [-0.20, 0.48, -0.20], a push from float noise; exactly equal scores cannot catch that
    adv = grpo_advantages(torch.tensor([[0.5, 0.5 + 1e-6, 0.5], [0.0, 1.0, 0.0]]))
    assert_close(adv[0], torch.zeros(3), what="a group whose std is below eps")
    assert (adv[1] != 0).all()


def test_grpo_groups_are_independent():
    a = torch.tensor([[1.0, 2.0, 4.0], [10.0, 0.0, 5.0]])
    both = grpo_advantages(a)
    assert_close(both[0], grpo_advantages(a[:1])[0])
    assert_close(both[1], grpo_advantages(a[1:])[0])


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.floats(-10, 10), min_size=2, max_size=8), st.floats(-100, 100), st.floats(0.1, 100)
)
def test_grpo_shift_and_scale_invariant(values, shift, scale):
    s = torch.tensor([values], dtype=torch.float64)
    if s.std(unbiased=False) < 1e-3:
        return  # the eps guard legitimately breaks scale invariance for near-constant groups
    a = grpo_advantages(s, eps=1e-9)
    b = grpo_advantages(s * scale + shift, eps=1e-9)
    assert_close(a, b, atol=1e-5)
    assert abs(float(a.mean())) < 1e-6


# ---------------------------------------------------------------- the loss (every method's)
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
    loss, stats = policy_loss(
        new, old, torch.tensor([1.0]), torch.ones(1, 2, dtype=torch.bool), LossSettings(clip=0.2)
    )
    # positive advantage: the high ratio is clipped to 1.2 (no gradient), the low one is not
    assert stats["clip_frac"] == 0.5 and stats["ratio_outside_clip"] == 1.0
    assert abs(loss.item() - (-(1.2 + math.exp(-0.5)) / 2)) < 1e-6
    loss.backward()
    assert new.grad[0, 0] == 0 and new.grad[0, 1] != 0


def test_k3_kl_is_zero_at_reference_and_positive_elsewhere():
    logp = torch.log(torch.tensor([[0.5, 0.25]]))
    mask = torch.ones(1, 2, dtype=torch.bool)
    _, same = policy_loss(
        logp, logp, torch.zeros(1), mask, LossSettings(kl_coef=0.1), ref_logprobs=logp
    )
    _, diff = policy_loss(
        logp, logp, torch.zeros(1), mask, LossSettings(kl_coef=0.1), ref_logprobs=logp - 0.3
    )
    assert same["kl"] == 0 and diff["kl"] > 0
    # k3 with log r = -0.3 on both tokens: e^-.3 + .3 - 1
    assert abs(diff["kl"] - (math.exp(-0.3) + 0.3 - 1)) < 1e-6


def test_the_papers_kl_coefficient_adds_its_k3_term_to_the_loss():
    """kl_coef 0.001 (the VPO authors'), policy 1/2 and reference 1/4 on one token, no advantage:
    k3 = r - log r - 1 with r = ref / policy = 1/2, so the loss is 0.001 * (0.5 + ln 2 - 1)."""
    logp = torch.log(torch.tensor([[0.5]]))
    ref = torch.log(torch.tensor([[0.25]]))
    mask = torch.ones(1, 1, dtype=torch.bool)
    loss, stats = policy_loss(
        logp, logp, torch.zeros(1), mask, LossSettings(kl_coef=0.001), ref_logprobs=ref
    )
    assert abs(stats["kl"] - 0.1931472) < 1e-6
    assert abs(loss.item() - 0.001 * 0.1931472) < 1e-9


# ---------------------------------------------------------------- GRPO's own fixes (flags, off by
# default)
def test_grpo_without_std_division_is_dr_grpo():
    scores = torch.tensor([[1.0, 2.0, 6.0], [4.0, 4.0, 4.0]])
    assert_close(
        grpo_advantages(scores, std="none"), torch.tensor([[-2.0, -1.0, 3.0], [0.0, 0.0, 0.0]])
    )


def test_grpo_batch_std_divides_by_one_std_of_the_whole_batch():
    # scores 0, 1 | 0, 3 | 2, 2: each minus its group's mean, over the population std of all six
    scores = torch.tensor([[0.0, 1.0], [0.0, 3.0], [2.0, 2.0]])
    mean = 8 / 6
    std = (sum((x - mean) ** 2 for x in [0, 1, 0, 3, 2, 2]) / 6) ** 0.5
    want = torch.tensor([[-0.5, 0.5], [-1.5, 1.5], [0.0, 0.0]]) / std  # the flat group: zeros
    assert_close(grpo_advantages(scores, std="batch"), want, atol=1e-5)


def test_grpo_rejects_an_unknown_std():
    with pytest.raises(ValueError):
        grpo_advantages(torch.tensor([[0.0, 1.0]]), std="rank")


def test_clip_higher_lets_a_likely_good_token_grow_further():
    old = torch.zeros(1, 2)
    new = torch.tensor([[0.25, 0.5]], requires_grad=True)  # ratios 1.28 and 1.65
    loss, stats = policy_loss(
        new,
        old,
        torch.tensor([1.0]),
        torch.ones(1, 2, dtype=torch.bool),
        LossSettings(clip=0.2, clip_high=0.3),
    )
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
        return policy_loss(
            logp,
            logp.detach(),
            torch.zeros(2),
            mask,
            LossSettings(entropy_coef=coef),
            entropy=entropy,
        )

    loss, stats = loss_of(0.5)
    grad_with = torch.autograd.grad(loss, logits)[0]
    # with zero advantages the whole gradient is the bonus's: -0.5 * d(mean entropy)/d(logits), != 0
    p = torch.softmax(logits.detach(), -1)
    plogp = p * torch.log(p)
    d_entropy = -(plogp - p * plogp.sum(-1, keepdim=True))  # d H / d logits, by hand
    want = -0.5 * d_entropy * mask[..., None] / mask.sum()
    assert_close(grad_with, want, atol=1e-6)
    assert grad_with.abs().sum() > 0
    assert (
        abs(stats["entropy_bonus"] - float((-(p * torch.log(p)).sum(-1) * mask).sum() / mask.sum()))
        < 1e-6
    )
    loss0, _ = loss_of(0.0)
    assert torch.autograd.grad(loss0, logits, allow_unused=True)[0].abs().sum() == 0


def test_clip_higher_acts_once_the_ratio_passes_1_plus_clip():
    # a ratio of 1.25 on a positive advantage: the symmetric clip (0.2) caps it at 1.2 and stops its
    # gradient; clip-higher (0.28) leaves it alone. At ratio 1 (one update per batch) both are
    # equal.
    old = torch.zeros(1, 1)
    mask = torch.ones(1, 1, dtype=torch.bool)
    adv = torch.tensor([1.0])
    for clip_high, want_loss, want_grad in [(None, -1.2, 0.0), (0.28, -1.25, -1.25)]:
        new = torch.tensor([[math.log(1.25)]], requires_grad=True)
        loss, stats = policy_loss(new, old, adv, mask, LossSettings(clip=0.2, clip_high=clip_high))
        loss.backward()
        assert abs(loss.item() - want_loss) < 1e-6 and abs(new.grad.item() - want_grad) < 1e-6
        assert stats["clip_frac"] == (1.0 if clip_high is None else 0.0)
        at_one, _ = policy_loss(
            old.clone(), old, adv, mask, LossSettings(clip=0.2, clip_high=clip_high)
        )
        assert abs(at_one.item() + 1.0) < 1e-6


def test_constant_normalizer_gives_every_token_the_same_weight():
    """Dr. GRPO's loss: token sum / (rollouts x longest possible completion). A token's gradient is
    -A / normalizer however long the batch's other completions are; under the token mean it is
    -A / (tokens in the batch), so a long completion elsewhere shrinks it."""

    def grad(lengths, normalizer):
        mask = torch.tensor([[t < n for t in range(4)] for n in lengths])
        logp = torch.zeros(len(lengths), 4, requires_grad=True)
        loss, stats = policy_loss(
            logp,
            logp.detach(),
            torch.tensor([1.0] * len(lengths)),
            mask,
            LossSettings(normalizer=normalizer),
        )
        loss.backward()
        return logp.grad[0, 0].item(), loss.item(), stats

    # two rollouts, at most 4 tokens each: normalizer 2 x 4 = 8
    assert abs(grad([1, 1], 8)[0] + 1 / 8) < 1e-7 and abs(grad([1, 4], 8)[0] + 1 / 8) < 1e-7
    assert abs(grad([1, 1], None)[0] + 1 / 2) < 1e-7 and abs(grad([1, 4], None)[0] + 1 / 5) < 1e-7
    _, loss, stats = grad([1, 4], 8)
    assert abs(loss + 5 / 8) < 1e-6 and abs(stats["pg_loss"] + 1.0) < 1e-6  # stats stay token means


def test_grpo_format_advantage_is_the_group_z_score_of_the_share_of_answers_that_score():
    r = torch.zeros(2, 2, 3, 4)  # (P, G, m, D)
    # group 0: rollout 0 has 3 answers that score, rollout 1 one (share 1 vs 1/3)
    r[0, 0, :, 0] = 1.0
    r[0, 1, 2, 1:] = 0.5
    r[1, :, 0, 0] = 1.0  # group 1: one answer each, flat, no signal
    assert_close(format_advantages(r), torch.tensor([[1.0, -1.0], [0.0, 0.0]]), atol=1e-4)


# ---------------------------------------------------------------- terms beside the advantage
def test_the_format_term_weighs_the_same_against_every_methods_task_signal():
    """For GRPO, Max@K, MaxRL, Dr. GRPO and VPO on the same rewards, the format term's size over the
    task advantage's (RMS over the groups with a signal) is format_coef times the format z-score's
    RMS, within 1%; unscaled (as before), Max@K's would be several times larger."""
    from grpo import advantage_rms
    from train import ADVANTAGES, resolve_config

    g = torch.Generator().manual_seed(0)
    rewards = (torch.rand(16, 8, 3, 5, generator=g) < 0.5).float() * torch.rand(
        16, 8, 3, 5, generator=g
    )
    # invalid answers: the format term has something to say
    rewards[torch.rand(16, 8, 3, generator=g) < 0.3] = 0.0
    weights = torch.distributions.Dirichlet(torch.ones(5)).sample((16, 100))
    coef, ratios, unscaled = 0.5, {}, {}
    for name, algo, flags in [
        ("grpo", "grpo", []),
        ("max_at_k", "max_at_k", []),
        ("maxrl", "maxrl", []),
        ("dr_grpo", "grpo", ["scale_rewards=none"]),
        ("vpo", "vpo", []),
    ]:
        fn = ADVANTAGES[algo].advantage
        r = rewards if ADVANTAGES[algo].writes_sets else rewards[:, :, :1]
        task = fn(r, r.mean(-1), weights, resolve_config(overrides=[f"algo={algo}", *flags]))
        fmt = format_advantages(r)
        signal = task.abs().sum(1) > 0
        task_rms = task[signal].pow(2).mean().sqrt()
        ratios[name] = float(coef * advantage_rms(task) * fmt.pow(2).mean().sqrt() / task_rms)
        unscaled[name] = float(coef * fmt.pow(2).mean().sqrt() / task_rms)
        assert ratios[name] == pytest.approx(coef * float(fmt.pow(2).mean().sqrt()), rel=0.01), name
    assert (
        advantage_rms(
            ADVANTAGES["grpo"][0](
                rewards[:, :, :1],
                rewards[:, :, :1].mean(-1),
                weights,
                # z-scores: exactly the old term
                resolve_config(),
            )
        )
        == 1.0
    )
    assert unscaled["max_at_k"] > 2 * unscaled["grpo"]  # the unfairness the scale removes


def test_advantage_rms_is_the_rms_over_groups_with_a_signal():
    from grpo import advantage_rms

    adv = torch.tensor([[0.3, -0.3], [0.0, 0.0], [0.4, -0.4]])  # the flat middle group is left out
    assert advantage_rms(adv) == pytest.approx(((0.09 * 2 + 0.16 * 2) / 4) ** 0.5)
    assert advantage_rms(torch.zeros(2, 3)) == 1.0
    # a z-score's RMS snaps to exactly 1
    assert advantage_rms(torch.tensor([[1.004, -1.004]])) == 1.0


def test_clip_fraction_counts_the_tokens_whose_loss_the_clip_changes():
    from grpo import LossSettings, policy_loss

    # two rollouts of two tokens, ratios 1.5 and 0.5 in each; advantages +1 and -1
    old = torch.zeros(2, 2)
    logprobs = torch.log(torch.tensor([[1.5, 0.5], [1.5, 0.5]]))
    _, stats = policy_loss(
        logprobs,
        old,
        torch.tensor([1.0, -1.0]),
        torch.ones(2, 2, dtype=torch.bool),
        LossSettings(clip=0.2),
    )
    # the clip binds for (A > 0, ratio 1.5) and (A < 0, ratio 0.5): 2 of 4, as TRL and veRL count it
    assert stats["clip_frac"] == pytest.approx(0.5)
    assert stats["ratio_outside_clip"] == pytest.approx(1.0)  # every ratio is outside [0.8, 1.2]


def test_the_entropy_bonus_is_scaled_like_the_format_term(tmp_path, monkeypatch):
    import train as trainer

    seen = []
    real = trainer.policy_update
    monkeypatch.setattr(
        trainer,
        "policy_update",
        lambda run, batch, adv, entropy_coef=0.0: (
            seen.append(entropy_coef) or real(run, batch, adv, entropy_coef)
        ),
    )
    monkeypatch.setattr(trainer.grpo, "advantage_rms", lambda adv: 0.25)
    cfg = trainer.resolve_config(
        os.path.join(ROOT, "configs", "tiny.yaml"),
        [
            f"out_dir={tmp_path}/run",
            f"warmstart_dir={tmp_path}/ws",
            "steps=1",
            "algo=max_at_k",
            "max_k=2",
            "entropy_coef=0.02",
            "eval_every=0",
            "ckpt_every=0",
        ],
    )
    trainer.train(cfg)
    assert seen and all(c == pytest.approx(0.005) for c in seen)


def test_policy_loss_takes_one_advantage_per_token():
    # every token its rollout's advantage: the same loss and gradient as one per rollout
    logp = torch.log(torch.tensor([[0.5, 0.5, 0.5], [0.2, 0.2, 0.2]])).requires_grad_()
    mask = torch.tensor([[True, True, False], [True, True, True]])
    per_rollout = torch.tensor([1.0, -2.0])
    loss, _ = policy_loss(logp, logp.detach(), per_rollout, mask)
    per_token, _ = policy_loss(logp, logp.detach(), per_rollout[:, None].expand(2, 3), mask)
    assert loss.item() == per_token.item()
    # a token's own advantage moves that token alone: d loss / d logp = -adv / 5 tokens
    adv = torch.tensor([[1.0, 0.0, 7.0], [0.0, -2.0, 3.0]])
    loss, _ = policy_loss(logp, logp.detach(), adv, mask)
    loss.backward()
    assert_close(logp.grad, torch.tensor([[-0.2, 0.0, 0.0], [0.0, 0.4, -0.6]]), atol=1e-6)


def test_token_advantages_give_each_answer_its_own_tokens():
    sep, eos = 2, 3
    # a1 a1 <sep> a2 <sep> a3 <eos> pad; a rollout of four answers, one past m = 3
    completion = torch.tensor([[5, 5, sep, 6, sep, 7, eos, 0], [5, sep, 6, sep, 7, sep, 8, eos]])
    mask = torch.tensor([[1, 1, 1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1, 1, 1]]).bool()
    adv = torch.tensor([[1.0, 2.0, 3.0], [-1.0, -2.0, -3.0]])
    want = [[1, 1, 1, 2, 2, 3, 3, 0], [-1, -1, -2, -2, -3, -3, 0, 0]]
    assert_close(token_advantages(adv, completion, mask, sep), torch.tensor(want).float())
