"""
GRPO: the scalar-reward baseline, and the policy loss that every algorithm here shares.

- `grpo_advantages`: each rollout's scalar score, z-normalized within its prompt group.
- `policy_loss`: PPO's clipped ratio loss over completion tokens, plus an optional k3 KL to a frozen
  reference. VPO and every baseline reuse it unchanged: they only change the advantage's score.
- `token_advantages`: one advantage per answer (VPO's vpo_credit) spread over that answer's tokens.

Why the loss can read ~0: with one update per batch the ratio is 1 and the z-normalized advantages
average to zero, even while the gradient is large. Watch reward, grad norm and clip fraction.

GRPO's own fixes against collapse, off by default (the paper uses none):
- Dr. GRPO (arXiv 2503.20783): `std="none"` drops the group std, which over-weights groups whose
  answers all score alike (`std="batch"`: TRL's one std); `normalizer`: a constant instead of the
  token count, so a token's weight does not depend on the other completions' lengths.
- `clip_high`: DAPO's clip-higher (arXiv 2503.14476): unlikely tokens of good answers can grow.
- `entropy_coef`: an entropy bonus; from detached entropies it would change the loss and nothing
  else.
- `format_advantages`: a format reward (as DeepSeek-R1's). Why: VPO's set score is a max, so nothing
  else asks an answer the first one dominates to be valid.

Deliberately left out: value functions (GRPO has none), per-sequence length normalization.
"""

from dataclasses import dataclass

import torch


def grpo_advantages(scores: torch.Tensor, eps: float = 1e-6, std: str = "group") -> torch.Tensor:
    """scores (P, G) -> advantages (P, G): each score minus its group's mean, divided by a std.

    std "group": the group's own std (population), GRPO's z-norm; "batch": one std over the whole
    batch's scores (TRL's scale_rewards="batch"); "none": no division (Dr. GRPO).
    A group whose scores are all (nearly) equal carries no signal: it gets zeros, never NaN.
    """
    mean = scores.mean(dim=1, keepdim=True)
    group_std = scores.std(dim=1, keepdim=True, unbiased=False)
    if std == "group":
        adv = (scores - mean) / (group_std + eps)
    elif std == "batch":
        adv = (scores - mean) / (scores.std(unbiased=False) + eps)
    elif std == "none":
        adv = scores - mean
    else:
        raise ValueError(f"std must be group, batch or none, got '{std}'")
    return torch.where(group_std < eps, torch.zeros_like(adv), adv)


def format_advantages(rewards: torch.Tensor) -> torch.Tensor:
    """rewards (P, G, m, D) as training scores them -> (P, G): the group z-score of each rollout's
    share of answers whose reward vector is not all zero."""
    return grpo_advantages((rewards.sum(-1) > 0).float().mean(-1))


def advantage_rms(adv: torch.Tensor, snap: float = 0.01) -> float:
    """adv (P, G), or (P, G, m) one per answer -> their RMS over the groups with a signal, to size
    fixed-weight terms (format, entropy) alike in every method; within `snap` of 1 (any z-score)
    it is exactly 1."""
    adv = adv.flatten(1)  # (P, G) or (P, G * m)
    signal = adv.abs().sum(1) > 0  # (P,)
    if not signal.any():
        return 1.0
    rms = float(adv[signal].double().pow(2).mean().sqrt())
    return 1.0 if abs(rms - 1.0) < snap else rms


def token_advantages(adv, completion, mask, sep):
    """adv (B, M) of each answer, completion (B, T) token ids, mask (B, T) True on completion
    tokens, sep the <|sep|> id -> (B, T): each token its answer's advantage (an answer owns the
    <|sep|> or <|eos|> that closes it); tokens past the M-th answer and padding get 0."""
    is_sep = (completion == sep).long()
    place = is_sep.cumsum(dim=1) - is_sep  # the answer each token belongs to: 0, 1, ...
    owned = mask.bool() & (place < adv.size(1))
    return torch.where(owned, adv.gather(1, place.clamp(max=adv.size(1) - 1)), 0.0)


@dataclass
class LossSettings:
    """What shapes the policy loss beyond the ratio clip's lower side."""

    clip: float = 0.2  # the ratio's range is [1 - clip, 1 + clip_high]
    clip_high: float | None = None  # DAPO's clip-higher (None: clip)
    kl_coef: float = 0.0  # weight of the k3 KL to the reference (needs ref_logprobs)
    entropy_coef: float = 0.0  # weight of the entropy bonus (needs entropy with its gradient)
    normalizer: float | None = None  # None: the token mean; a number: a constant (Dr. GRPO)


def policy_loss(
    logprobs, old_logprobs, advantages, mask, settings=None, ref_logprobs=None, entropy=None
):
    """Clipped policy-gradient loss, summed over the batch's completion tokens and divided by
    settings.normalizer (None: the token count, a token mean; a number: a constant, Dr. GRPO).

    logprobs (B, T) current policy (with grad), old_logprobs (B, T) sampling policy, advantages (B,)
    one per rollout or (B, T) one per token, mask (B, T) True on completion tokens, ref_logprobs
    (B, T) frozen reference (if kl_coef > 0), entropy (B, T) WITH grad (if entropy_coef > 0).
    -> (loss, stats): clip_frac (tokens whose loss the clip changes, as TRL and veRL count them),
    ratio_outside_clip, KL, the entropy bonus: token means whatever the normalizer. settings:
    LossSettings (None: its defaults).
    """
    settings = settings or LossSettings()
    clip = settings.clip
    kl_coef = settings.kl_coef
    entropy_coef = settings.entropy_coef
    mask = mask.float()
    n_tokens = mask.sum().clamp(min=1)
    ratio = torch.exp(logprobs - old_logprobs)  # (B, T); 1 on the first update of a batch
    # (B, 1): the same advantage for every token of a rollout; (B, T): a token's own (vpo_credit)
    adv = advantages[:, None] if advantages.dim() == 1 else advantages
    high = clip if settings.clip_high is None else settings.clip_high
    unclipped = ratio * adv
    clipped = ratio.clamp(1 - clip, 1 + high) * adv
    pg_loss = -(torch.minimum(unclipped, clipped) * mask).sum() / n_tokens
    # the clip changes the loss only where it binds in the direction the advantage pushes (TRL)
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
    # token means -> token sums / normalizer, every term alike (exactly 1.0 for the token mean)
    per_normalizer = 1.0 if settings.normalizer is None else n_tokens / settings.normalizer
    loss = (pg_loss + kl_coef * kl - entropy_coef * bonus) * per_normalizer
    return loss, {
        "clip_frac": clip_frac.item(),
        "ratio_outside_clip": outside.item(),
        "kl": kl.item(),
        "pg_loss": pg_loss.item(),
        "entropy_bonus": bonus.item(),
    }
