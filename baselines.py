"""
The baselines the field compares VPO against, each an advantage function like grpo.grpo_advantages
((P, G) out); train.ADVANTAGES names them, docs/EXERCISES.md shows how to add yours.

- max_at_k_advantages: Max@K (arXiv 2510.23393) / pass@k training (arXiv 2508.10751, PKPO arXiv
  2505.15201): train for the best of k samples, not for the average one.
- gdpo_advantages: GDPO (arXiv 2601.05242): normalize each reward component on its own.
- maxrl_advantages: MaxRL (arXiv 2602.02710): GRPO with the group's std replaced by its mean.
- pick_groups: the groups DAPO's dynamic sampling keeps (train.dapo_sample), as one batch.

Deliberately left out: Max@K's off-policy correction, PKPO's leave-one-out baselines, GDPO's
conditioned rewards (reward design), anything that needs a learned model.
"""

import math

import torch
import torch.nn.functional as F


def best_rank_chances(n, k):
    """[n floats]: the chance that the i-th smallest of n scores (from 0) is the best of k drawn
    without replacement from them, for i = 0 .. n - 1; they sum to 1 (exercise at_k, beside
    metrics.max_at_k, which weighs the sorted scores by them)."""
    return [math.comb(i, k - 1) / math.comb(n, k) for i in range(n)]


def max_at_k_advantages(scores, k, eps=1e-6, std="group"):
    """scores (P, G) -> (P, G): each rollout's credit towards the best of k samples.

    Every k-subset S of a group is a best-of-k attempt worth max(S): rho (their mean) estimates
    max@k without bias, sigma is their std, subset_mean_i their mean over the subsets holding
    rollout i; A_i = (subset_mean_i - rho) / (sigma + eps), 0 where sigma < eps: a rare good answer
    earns a lot, one of many little. std "batch" divides by the std of every attempt in the batch,
    "none" by nothing, as grpo_advantages does: for 0/1 rewards pass@k training's closed form; k = 1
    is GRPO. Computed from sorted ranks: how often each rank is the best of a k-subset
    (best_rank_chances), and how often it is the best of one that also holds a given lower rank.
    """
    P, G = scores.shape
    v, order = torch.sort(scores.double(), dim=1)  # (P, G) ascending
    top = torch.tensor(best_rank_chances(G, k), dtype=v.dtype, device=v.device)
    # rank j is the best of a k-subset holding a lower rank i when the other k - 2 come from the
    # j - 1 ranks below it but i: the chance that rank j - 1 of G - 1 is the best of k - 1
    below = best_rank_chances(G - 1, k - 1) if k >= 2 else [0.0] * (G - 1)
    pair = torch.tensor([0.0, *below], dtype=v.dtype, device=v.device)
    rho = (top * v).sum(1, keepdim=True)  # (P, 1) the max@k estimate
    sigma = (top * (v - rho) ** 2).sum(1, keepdim=True).sqrt()  # (P, 1)
    above = (pair * v).flip(1).cumsum(1).flip(1) - pair * v  # sum over the ranks above each one
    subset_mean = top * math.comb(G, k) / math.comb(G - 1, k - 1) * v + above  # (P, G), sorted
    # every group has as many attempts: the batch's variance is the groups' mean within-group
    # variance plus the variance of their means
    batch_sigma = (sigma.pow(2) + (rho - rho.mean()).pow(2)).mean().sqrt()
    if std not in ("group", "batch", "none"):
        raise ValueError(f"std must be group, batch or none, got '{std}'")
    divisor = {"group": sigma + eps, "batch": batch_sigma + eps, "none": 1.0}[std]
    adv = torch.where(sigma < eps, torch.zeros_like(subset_mean), (subset_mean - rho) / divisor)
    return torch.empty_like(adv).scatter_(1, order, adv).to(scores.dtype)


def gdpo_advantages(rewards, eps=1e-6):
    """rewards (P, G, D) reward vectors of single answers -> (P, G).

    GDPO z-scores each component within its group (so a component with a large spread cannot drown
    the others), sums the z-scores and divides by the batch's std of the sums. What it gives up: a
    change counts in its component's stds, not by its size: on persona, one-letter words
    (docs/RESULTS.md).
    """
    std = rewards.std(dim=1, keepdim=True, unbiased=False)  # (P, 1, D)
    z = torch.where(
        std < eps,
        torch.zeros_like(rewards),
        (rewards - rewards.mean(dim=1, keepdim=True)) / std.clamp(min=eps),
    )
    s = z.sum(-1)  # (P, G)
    batch_std = s.std(unbiased=False)
    return torch.zeros_like(s) if batch_std < eps else s / batch_std


def maxrl_advantages(scores, eps=1e-6):
    """scores (P, G), non-negative -> (P, G): (r_i - mean) / (mean + eps), 0 where the mean is 0.
    MaxRL aims at the log success rate, so rare 0/1 successes weigh more; on our continuous rewards:
    GRPO with the group's mean for its std."""
    mean = scores.mean(dim=1, keepdim=True)
    return torch.where(mean > 0, (scores - mean) / (mean + eps), torch.zeros_like(scores))


# ---- DAPO's dynamic sampling (train.dapo_sample; dynamic_sampling > 0, off by default) --------


def pick_groups(batches, groups, pad_id, G):
    """Batches of several rounds -> one batch of the groups `groups` (numbered across rounds),
    padded to the widest round (padding is masked, so no score changes)."""
    rows = torch.tensor(
        [g * G + i for g in groups for i in range(G)], device=batches[0]["completion"].device
    )

    def cat(key, value, left=False):
        width = max(b[key].size(1) for b in batches)
        padded = []
        for b in batches:
            short = width - b[key].size(1)
            padded.append(F.pad(b[key], (short, 0) if left else (0, short), value=value))
        return torch.cat(padded)[rows]

    problems = [p for b in batches for p in b["problems"]]
    answers = [a for b in batches for a in b["answers"]]
    completion_mask = cat("completion_mask", False)
    return dict(
        problems=[problems[g] for g in groups],
        answers=[answers[g] for g in groups],
        prompt=cat("prompt", pad_id, left=True),
        prompt_mask=cat("prompt_mask", False, left=True),
        completion=cat("completion", pad_id),
        completion_mask=completion_mask,
        old_logprobs=cat("old_logprobs", 0.0),
        entropy=cat("entropy", 0.0),
        rewards=torch.cat([b["rewards"] for b in batches])[groups],
        num_tokens=int(completion_mask.sum()),
    )
