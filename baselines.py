"""
The baselines the field compares VPO against, each one advantage function: scores or reward
vectors of a batch of prompt groups in, one advantage per rollout (P, G) out, like
grpo.grpo_advantages. train.ADVANTAGES gives each a name; docs/EXERCISES.md shows how to add yours.

- max_at_k_advantages: Max@K (arXiv 2510.23393) / pass@k training (arXiv 2508.10751, PKPO arXiv
  2505.15201): train for the best of k samples, not for the average one.
- gdpo_advantages: GDPO (arXiv 2601.05242): normalise each reward component on its own, so one
  component cannot drown the others.
- maxrl_advantages: MaxRL (arXiv 2602.02710): GRPO with the group's std replaced by its mean.
GRPO's own fixes against collapse (an entropy bonus, DAPO's clip-higher and dynamic sampling,
Dr. GRPO's missing std division and constant loss normaliser) are flags on the shared loss and
advantage: see grpo.py and train.py's DEFAULTS.

Deliberately left out: Max@K's off-policy importance correction and PKPO's leave-one-out
baselines, GDPO's conditioned rewards (reward design, done before the advantage), anything that
needs a learned model.
"""

import math

import torch


def max_at_k_advantages(scores, k, eps=1e-6, std_norm=True):
    """scores (P, G) -> (P, G): each rollout's credit towards the best of k samples.

    Think of every k-subset S of a group as one best-of-k attempt worth max(S). The mean of max(S)
    over all C(G, k) subsets, rho, is the unbiased estimate of the group's expected best-of-k
    (max@k; pass@k for 0/1 rewards); sigma is the (population) std of max(S) over the subsets; m_i
    is the mean of max(S) over the subsets that contain rollout i. The advantage is
    A_i = (m_i - rho) / (sigma + eps), 0 for a whole group whose sigma < eps.
    A rollout is pushed up when the attempts it joins do better than average: a good answer that
    is one of many identical good answers earns little, a rare good answer earns a lot.
    For 0/1 rewards this is pass@k training's closed form (arXiv 2508.10751); k = 1 is GRPO; k = G
    gives zeros (one subset, nothing to compare). Max@K's own variant z-scores m over the group
    instead (the same signs, another scale per group): grpo.grpo_advantages(m).
    std_norm=False keeps m_i - rho undivided, as Dr. GRPO drops GRPO's std: sigma is the same kind
    of per-group scale (the std of the attempts' worth), not part of what the credit measures.
    Computed from sorted ranks, not by enumerating subsets: with the group sorted ascending
    (0-based ranks), rank j is the maximum of C(j, k-1) subsets, and of C(j-1, k-2) of the
    subsets that also contain a lower rank i.
    """
    P, G = scores.shape
    v, order = torch.sort(scores.double(), dim=1)  # (P, G) ascending
    top = torch.tensor([math.comb(j, k - 1) / math.comb(G, k) for j in range(G)], dtype=v.dtype, device=v.device)
    pair = torch.tensor([math.comb(j - 1, k - 2) if j >= 1 and k >= 2 else 0 for j in range(G)],
                        dtype=v.dtype, device=v.device) / math.comb(G - 1, k - 1)
    rho = (top * v).sum(1, keepdim=True)  # (P, 1) the max@k estimate
    sigma = (top * (v - rho) ** 2).sum(1, keepdim=True).sqrt()  # (P, 1)
    above = (pair * v).flip(1).cumsum(1).flip(1) - pair * v  # sum over the ranks above each one
    m = top * math.comb(G, k) / math.comb(G - 1, k - 1) * v + above  # (P, G) in sorted order
    adv = torch.where(sigma < eps, torch.zeros_like(m), (m - rho) / (sigma + eps) if std_norm else m - rho)
    return torch.empty_like(adv).scatter_(1, order, adv).to(scores.dtype)


def gdpo_advantages(rewards, eps=1e-6):
    """rewards (P, G, D) reward vectors of single answers -> (P, G).

    GRPO sums the components and z-scores the sum, so (1, 0) vs (0, 0) and (1, 1) vs (0, 0) get the
    same advantages, and a component with a large spread drowns the others. GDPO z-scores each
    component within its group first (a component constant in a group adds 0), sums the z-scores,
    then divides by the std of the sums over the whole batch (as the paper does; under torchrun,
    over each rank's share), so the scale does not grow with D. The batch mean of the sums is 0 by
    construction, since each component's z-scores sum to 0 in their group.
    What it gives up: each component's change counts in that component's own stds, not by its size.
    On persona (sqrt of letter shares) a letter moved from a word's main letter to a missing one
    gains 0.29 and costs 0.04, so the fixed mean favours balanced words, yet in a group both sides
    count about the same number of stds: measured, GDPO's push against a word's main letter was
    2-5x weaker than GRPO's, and its policy drifted to one-letter words below the warm start.
    """
    std = rewards.std(dim=1, keepdim=True, unbiased=False)  # (P, 1, D)
    z = torch.where(std < eps, torch.zeros_like(rewards), (rewards - rewards.mean(dim=1, keepdim=True)) / std.clamp(min=eps))
    s = z.sum(-1)  # (P, G)
    spread = s.std(unbiased=False)
    return torch.zeros_like(s) if spread < eps else s / spread


def maxrl_advantages(scores, eps=1e-6):
    """scores (P, G), non-negative -> (P, G): A_i = (r_i - mean) / (mean + eps), 0 where the mean is 0.

    MaxRL aims at the log of the success rate (maximum likelihood) instead of the success rate.
    With 0/1 rewards and K successes among G rollouts, A_i / G = r_i / K - 1 / G: the average score
    function of the successes, an unbiased estimate of the gradient of the log-likelihood objective
    truncated at order G, minus a zero-mean control variate. Rare successes therefore weigh more
    than under GRPO. On continuous rewards (our tasks) we apply the same formula, which loses that
    reading: it is then GRPO with the group's mean in place of its std.
    """
    mean = scores.mean(dim=1, keepdim=True)
    return torch.where(mean > 0, (scores - mean) / (mean + eps), torch.zeros_like(scores))
