"""
GRPO: the scalar-reward baseline, and the policy loss that every algorithm here shares.

- `grpo_advantages`: each rollout's scalar score, z-normalised within its prompt group.
- `policy_loss`: PPO's clipped ratio loss averaged over completion tokens, plus an optional
  k3 KL penalty to a frozen reference policy. VPO and every ablation reuse it unchanged: they only
  change the score that goes into the advantage (see vpo.py).

Why the loss can read ~0: with one update per batch the new and old log-probs are equal, the ratio
is 1, and the z-normalised advantages average to zero, so the loss value is about 0 even while the
gradient is large. Watch reward, grad norm and clip fraction instead.

Deliberately left out: value functions (GRPO has none), per-sequence length normalisation
(we average over all completion tokens in the batch, so long answers are not down-weighted),
entropy bonus (coefficient 0 in the paper), the std-free "Dr. GRPO" variant.
"""

import torch


def grpo_advantages(scores: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """scores (P, G) -> advantages (P, G): z-norm within each group, population std.

    A group whose scores are all (nearly) equal carries no signal: it gets zeros, never NaN.
    """
    mean = scores.mean(dim=1, keepdim=True)
    std = scores.std(dim=1, keepdim=True, unbiased=False)
    adv = (scores - mean) / (std + eps)
    return torch.where(std < eps, torch.zeros_like(adv), adv)


def policy_loss(logprobs, old_logprobs, advantages, mask, clip=0.2, ref_logprobs=None, kl_coef=0.0):
    """Clipped policy-gradient loss, averaged over every completion token in the batch.

    logprobs (B, T) under the current policy (with grad), old_logprobs (B, T) under the policy that
    sampled, advantages (B,) one per rollout (broadcast to its tokens), mask (B, T) True on
    completion tokens, ref_logprobs (B, T) under the frozen reference (only if kl_coef > 0).
    Returns (loss, stats) where stats holds clip fraction and KL as floats.
    """
    mask = mask.float()
    n_tokens = mask.sum().clamp(min=1)
    ratio = torch.exp(logprobs - old_logprobs)  # (B, T); 1 on the first update of a batch
    adv = advantages[:, None]  # (B, 1): the same advantage for every token of a rollout
    unclipped = ratio * adv
    clipped = ratio.clamp(1 - clip, 1 + clip) * adv
    pg_loss = -(torch.minimum(unclipped, clipped) * mask).sum() / n_tokens
    clip_frac = (((ratio - 1).abs() > clip).float() * mask).sum() / n_tokens
    kl = torch.zeros((), device=logprobs.device)
    if kl_coef > 0 and ref_logprobs is not None:
        # k3 estimator of KL(policy || ref): non-negative and low-variance (Schulman's note)
        log_r = ref_logprobs - logprobs
        kl = ((torch.exp(log_r) - log_r - 1) * mask).sum() / n_tokens
    loss = pg_loss + kl_coef * kl
    return loss, {"clip_frac": clip_frac.item(), "kl": kl.item(), "pg_loss": pg_loss.item()}
