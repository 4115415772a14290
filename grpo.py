"""
GRPO: the scalar-reward baseline, and the policy loss that every algorithm here shares.

- `grpo_advantages`: each rollout's scalar score, z-normalised within its prompt group.
- `policy_loss`: PPO's clipped ratio loss averaged over completion tokens, plus an optional
  k3 KL penalty to a frozen reference policy. VPO and every baseline reuse it unchanged: they only
  change the score that goes into the advantage (see vpo.py, baselines.py).

Why the loss can read ~0: with one update per batch the new and old log-probs are equal, the ratio
is 1, and the z-normalised advantages average to zero, so the loss value is about 0 even while the
gradient is large. Watch reward, grad norm and clip fraction instead.

GRPO's own fixes against collapse are options here, off by default (the paper uses none):
- Dr. GRPO (arXiv 2503.20783) has two halves. `scale="none"` drops the division by the group's
  std, which over-weights groups whose answers all score alike (`scale="batch"`, TRL's middle way,
  divides by one std over the whole batch). `normaliser`: the loss is summed
  over tokens and divided by a constant (rollouts x the longest completion sampling allows)
  instead of by the batch's token count, so a token's weight no longer depends on how long the
  other completions of its batch happen to be.
- `clip_high`: DAPO's clip-higher (arXiv 2503.14476): the ratio's upper bound 1 + clip_high
  (0.28 in DAPO) above the lower 1 - clip, so unlikely tokens of good answers can grow.
- `entropy_coef`: a bonus for the policy's token entropy. The entropy must come from the scoring
  forward WITH its gradient: a bonus computed from detached entropies (as some trainers log them)
  changes the reported loss and nothing else.
DAPO's dynamic sampling (draw again until enough groups' scores spread) lives in train.py.

`format_advantages`: a format reward, as RLVR recipes add one next to the task's reward (e.g.
DeepSeek-R1's). It is the group z-score of the share of a rollout's answers that score at all
(training zeroes an invalid, missing or repeated answer), added with a weight (`format_coef` in
train.py) to any algorithm's advantage, scaled by `advantage_scale` (the RMS of that algorithm's own
advantages) so that the weight means the same against the task's signal in every method. Why it exists: VPO's set score is a max over the set, so
an invalid second answer costs no more than a valid one the first answer dominates, and nothing
else in VPO's objective asks for the others to be valid.

Deliberately left out: value functions (GRPO has none), per-sequence length normalisation.
"""

import torch


def grpo_advantages(scores: torch.Tensor, eps: float = 1e-6, scale: str = "group") -> torch.Tensor:
    """scores (P, G) -> advantages (P, G): each score minus its group's mean, divided by a std.

    scale "group": the group's own std (population), GRPO's z-norm; "batch": one std over the whole
    batch's scores (TRL's scale_rewards="batch"); "none": no division (Dr. GRPO).
    A group whose scores are all (nearly) equal carries no signal: it gets zeros, never NaN.
    """
    mean = scores.mean(dim=1, keepdim=True)
    std = scores.std(dim=1, keepdim=True, unbiased=False)
    if scale == "group":
        adv = (scores - mean) / (std + eps)
    elif scale == "batch":
        adv = (scores - mean) / (scores.std(unbiased=False) + eps)
    elif scale == "none":
        adv = scores - mean
    else:
        raise ValueError(f"scale must be group, batch or none, got '{scale}'")
    return torch.where(std < eps, torch.zeros_like(adv), adv)


def format_advantages(rewards: torch.Tensor) -> torch.Tensor:
    """rewards (P, G, m, D) as training scores them -> (P, G): the group z-score of each rollout's
    share of answers whose reward vector is not all zero."""
    return grpo_advantages((rewards.sum(-1) > 0).float().mean(-1))


def advantage_scale(adv: torch.Tensor, snap: float = 0.01) -> float:
    """adv (P, G) a method's task advantages -> their root-mean-square over the groups that carry a
    signal (flat groups, all zero, are left out). A fixed-weight term (format reward, entropy bonus)
    is multiplied by it, so it weighs the same against the task's signal whatever the method's scale.
    A group z-score's RMS is std / (std + eps), 1 to within 1e-4 for any real spread: within `snap`
    of 1 it is 1 exactly, so z-scored methods get exactly the unscaled term."""
    signal = adv.abs().sum(1) > 0  # (P,)
    if not signal.any():
        return 1.0
    rms = float(adv[signal].double().pow(2).mean().sqrt())
    return 1.0 if abs(rms - 1.0) < snap else rms


def policy_loss(logprobs, old_logprobs, advantages, mask, clip=0.2, ref_logprobs=None, kl_coef=0.0,
                clip_high=None, entropy=None, entropy_coef=0.0, normaliser=None):
    """Clipped policy-gradient loss, summed over every completion token in the batch and divided by
    `normaliser`: None is the batch's token count (a token mean), a number is a constant (Dr. GRPO).

    logprobs (B, T) under the current policy (with grad), old_logprobs (B, T) under the policy that
    sampled, advantages (B,) one per rollout (broadcast to its tokens), mask (B, T) True on
    completion tokens, ref_logprobs (B, T) under the frozen reference (only if kl_coef > 0),
    entropy (B, T) of the current policy WITH grad (only if entropy_coef > 0); clip_high: the
    upper clip (None: the same as clip).
    Returns (loss, stats) where stats holds clip_frac (the share of tokens whose loss the clip changes:
    ratio above the upper bound with a positive advantage or below the lower with a negative one, as
    TRL and veRL count it), ratio_outside_clip (every token whose ratio leaves the range, whatever the
    advantage), KL and the entropy bonus as floats; the
    stats are token means whatever the normaliser, so that they read the same in every run.
    """
    mask = mask.float()
    n_tokens = mask.sum().clamp(min=1)
    ratio = torch.exp(logprobs - old_logprobs)  # (B, T); 1 on the first update of a batch
    adv = advantages[:, None]  # (B, 1): the same advantage for every token of a rollout
    high = clip if clip_high is None else clip_high
    unclipped = ratio * adv
    clipped = ratio.clamp(1 - clip, 1 + high) * adv
    pg_loss = -(torch.minimum(unclipped, clipped) * mask).sum() / n_tokens
    # the clip changes the loss only where it binds in the direction the advantage pushes (TRL, veRL)
    clipped_tokens = ((ratio < 1 - clip) & (adv < 0)) | ((ratio > 1 + high) & (adv > 0))
    clip_frac = (clipped_tokens.float() * mask).sum() / n_tokens
    outside = (((ratio < 1 - clip) | (ratio > 1 + high)).float() * mask).sum() / n_tokens
    kl = torch.zeros((), device=logprobs.device)
    if kl_coef > 0 and ref_logprobs is not None:
        # k3 estimator of KL(policy || ref): non-negative and low-variance (Schulman's note)
        log_r = ref_logprobs - logprobs
        kl = ((torch.exp(log_r) - log_r - 1) * mask).sum() / n_tokens
    bonus = torch.zeros((), device=logprobs.device)
    if entropy_coef > 0 and entropy is not None:
        bonus = (entropy * mask).sum() / n_tokens
    # token means -> token sums / normaliser, for every term alike (exactly 1.0 for the token mean)
    scale = 1.0 if normaliser is None else n_tokens / normaliser
    loss = (pg_loss + kl_coef * kl - entropy_coef * bonus) * scale
    return loss, {"clip_frac": clip_frac.item(), "ratio_outside_clip": outside.item(), "kl": kl.item(),
                  "pg_loss": pg_loss.item(), "entropy_bonus": bonus.item()}
