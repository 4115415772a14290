"""grpo.py's terms beside the advantage: fixed-weight terms (format reward, entropy bonus) on the same
footing for every method (advantage_scale), and the clip fraction as TRL and veRL count it."""

import os

import pytest
import torch

from grpo import format_advantages

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
def test_the_format_term_weighs_the_same_against_every_methods_task_signal():
    """For GRPO, Max@K, MaxRL, Dr. GRPO and VPO on the same rewards, the format term's size over the
    task advantage's (RMS over the groups with a signal) is format_coef times the format z-score's
    RMS, within 1%; unscaled (as before), Max@K's would be several times larger."""
    from train import ADVANTAGES, resolve_config
    from grpo import advantage_scale
    g = torch.Generator().manual_seed(0)
    rewards = (torch.rand(16, 8, 3, 5, generator=g) < 0.5).float() * torch.rand(16, 8, 3, 5, generator=g)
    rewards[torch.rand(16, 8, 3, generator=g) < 0.3] = 0.0  # invalid answers: the format term has something to say
    weights = torch.distributions.Dirichlet(torch.ones(5)).sample((16, 100))
    coef, ratios, unscaled = 0.5, {}, {}
    for name, algo, flags in [("grpo", "grpo", []), ("max_at_k", "max_at_k", []), ("maxrl", "maxrl", []),
                              ("dr_grpo", "grpo", ["scale_rewards=none"]), ("vpo", "vpo", [])]:
        fn, sets = ADVANTAGES[algo]
        r = rewards if sets else rewards[:, :, :1]
        task = fn(r, r.mean(-1), weights, resolve_config(overrides=[f"algo={algo}", *flags]))
        fmt = format_advantages(r)
        signal = task.abs().sum(1) > 0
        task_rms = task[signal].pow(2).mean().sqrt()
        ratios[name] = float(coef * advantage_scale(task) * fmt.pow(2).mean().sqrt() / task_rms)
        unscaled[name] = float(coef * fmt.pow(2).mean().sqrt() / task_rms)
        assert ratios[name] == pytest.approx(coef * float(fmt.pow(2).mean().sqrt()), rel=0.01), name
    assert advantage_scale(ADVANTAGES["grpo"][0](rewards[:, :, :1], rewards[:, :, :1].mean(-1), weights,
                                                 resolve_config())) == 1.0  # z-scores: exactly the old term
    assert unscaled["max_at_k"] > 2 * unscaled["grpo"]  # the unfairness the scale removes


def test_advantage_scale_is_the_rms_over_groups_with_a_signal():
    from grpo import advantage_scale
    adv = torch.tensor([[0.3, -0.3], [0.0, 0.0], [0.4, -0.4]])  # the flat middle group is left out
    assert advantage_scale(adv) == pytest.approx(((0.09 * 2 + 0.16 * 2) / 4) ** 0.5)
    assert advantage_scale(torch.zeros(2, 3)) == 1.0
    assert advantage_scale(torch.tensor([[1.004, -1.004]])) == 1.0  # a z-score's RMS snaps to exactly 1


def test_clip_fraction_counts_the_tokens_whose_loss_the_clip_changes():
    from grpo import policy_loss
    # two rollouts of two tokens, ratios 1.5 and 0.5 in each; advantages +1 and -1
    old = torch.zeros(2, 2)
    logprobs = torch.log(torch.tensor([[1.5, 0.5], [1.5, 0.5]]))
    _, stats = policy_loss(logprobs, old, torch.tensor([1.0, -1.0]), torch.ones(2, 2, dtype=torch.bool), clip=0.2)
    # the clip binds for (A > 0, ratio 1.5) and (A < 0, ratio 0.5): 2 of 4, as TRL and veRL count it
    assert stats["clip_frac"] == pytest.approx(0.5)
    assert stats["ratio_outside_clip"] == pytest.approx(1.0)  # every ratio is outside [0.8, 1.2]


def test_the_entropy_bonus_is_scaled_like_the_format_term(tmp_path, monkeypatch):
    import train as trainer
    seen = []
    real = trainer.policy_update
    monkeypatch.setattr(trainer, "policy_update", lambda run, batch, adv, coef=0.0: seen.append(coef) or
                        real(run, batch, adv, coef))
    monkeypatch.setattr(trainer.grpo, "advantage_scale", lambda adv: 0.25)
    cfg = trainer.resolve_config(os.path.join(ROOT, "configs", "tiny.yaml"),
                                 [f"out_dir={tmp_path}/run", f"warmstart_dir={tmp_path}/ws", "steps=1",
                                  "algo=max_at_k", "max_k=2", "entropy_coef=0.02", "eval_every=0", "ckpt_every=0"])
    trainer.train(cfg)
    assert seen and all(c == pytest.approx(0.005) for c in seen)
