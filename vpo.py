"""
VPO: Vector Policy Optimization's advantage, and the ablations that isolate its two ingredients.

A VPO rollout holds a SET of M answers, each with a reward vector r in [0,1]^D. Each prompt group
draws N weightings w ~ Dirichlet(alpha) and scores a rollout by its best answer under each:

    R_g = (1/N) sum_n max_m  w_n . r_gm          (a Monte-Carlo estimate of E_w[best-of-M])

then z-normalizes R within the group as GRPO does. A set scores high only if its answers cover
different trade-offs: a second copy of an answer adds nothing. All else is GRPO's.

Ablations (the paper's): Multi-RLVR scores the M-answer set by the sum of its fixed scalar rewards
(no random weights); random-weight GRPO scores one answer by w.r, one w per group (no sets). Beside
them, not part of VPO: `leave_one_out_advantages`, the RLOO baseline (an exercise).

Per-answer credit, off by default (`vpo_credit`, not the paper's): answer j is paid what it changed,
not the set's score. "togo" (reward-to-go): the set's score minus that of the answers before j;
"gain": what j adds when written; "marginal": the set's score minus its score without j (pass@k
training's, Chen et al. 2025). Each answer is written seeing those before it, so its log-probability
moves every later answer: REINFORCE is unbiased for the return from j on, less a baseline fixed by
the answers before j. "togo" is that; "gain" drops what j changes later (greedy, biased);
"marginal"'s baseline is made of later answers, so it is unbiased only for answers drawn apart.

Deliberately left out: learned weight distributions, non-linear scalarizations.
"""

import numpy as np
import torch

from grpo import grpo_advantages

# the names sample_weights knows; config.py checks weight_sampler here
WEIGHT_SAMPLERS = ("dirichlet", "sobol")
# what vpo_credit may name: "set" is VPO's, the others pay each answer its own (answer_credits)
CREDITS = ("set", "togo", "gain", "marginal")


def sample_weights(num_groups, num_weights, dim, alpha=1.0, sampler="dirichlet", generator=None):
    """(P, N, D) weightings on the simplex, N per prompt group, reproducible from `generator`.

    sampler "dirichlet": i.i.d. Dirichlet(alpha * 1_D). sampler "sobol": scrambled Sobol points in
    [0,1]^(D-1) turned into simplex points by sorted-uniform spacings, which is uniform on the
    simplex (alpha = 1 only) and covers it more evenly than i.i.d. draws, so R_g is less noisy.
    """
    if alpha <= 0:
        raise ValueError(f"alpha must be > 0, got {alpha}")
    if dim == 1:
        return torch.ones(num_groups, num_weights, 1)
    # the seed is drawn on the generator's own device (a CUDA generator cannot make a CPU tensor)
    device = generator.device if generator is not None else "cpu"
    seed = int(torch.randint(0, 2**62, (1,), generator=generator, device=device).item())
    if sampler == "dirichlet":
        # numpy's Dirichlet accepts a seeded generator; torch's does not
        rng = np.random.default_rng(seed)
        w = rng.dirichlet(np.full(dim, alpha), size=(num_groups, num_weights))
        return torch.tensor(w, dtype=torch.float32)
    if sampler == "sobol":
        if alpha != 1.0:
            raise ValueError(
                "sampler='sobol' maps points uniformly onto the simplex, i.e. alpha=1 only"
            )
        engine = torch.quasirandom.SobolEngine(dimension=dim - 1, scramble=True, seed=seed)
        u = engine.draw(num_groups * num_weights).view(num_groups, num_weights, dim - 1)
        u, _ = torch.sort(u, dim=-1)
        edges = torch.cat([torch.zeros_like(u[..., :1]), u, torch.ones_like(u[..., :1])], dim=-1)
        # spacings of D-1 sorted uniforms: uniform on the simplex
        return edges[..., 1:] - edges[..., :-1]
    raise ValueError(f"unknown sampler '{sampler}' (choose one of {', '.join(WEIGHT_SAMPLERS)})")


def set_scores(rewards, weights):
    """rewards (P, G, M, D), weights (P, N, D) -> (P, G): mean over n of max over m of w_n . r_m."""
    scalarized = torch.einsum("pgmd,pnd->pgnm", rewards, weights)  # (P, G, N, M)
    return scalarized.max(dim=-1).values.mean(dim=-1)  # (P, G)


def vpo_advantages(rewards, weights, eps=1e-6, std="group", credit="set"):
    """rewards (P, G, M, D), zero rows for missing or repeated, weights (P, N, D) -> (P, G); with a
    per-answer credit (not "set") -> (P, G, M), credit_advantages."""
    if credit != "set":
        return credit_advantages(rewards, weights, credit, eps=eps, std=std)
    return grpo_advantages(set_scores(rewards, weights), eps, std)


# ---- Per-answer credit (vpo_credit), off by default: the module's docstring says why each form


def prefix_scores(rewards, weights):
    """rewards (P, G, M, D), weights (P, N, D) -> (P, G, M + 1): the set score of the first j
    answers, j = 0..M (rewards are >= 0, so the empty set's 0 is a max's starting point)."""
    prefix = [set_scores(rewards[:, :, :j], weights) for j in range(1, rewards.size(2) + 1)]
    return torch.stack([torch.zeros_like(prefix[0]), *prefix], dim=-1)  # (P, G, M + 1)


def answer_credits(rewards, weights, credit):
    """-> (P, G, M): what each answer is paid, before its group's baseline (the module says why)."""
    prefix = prefix_scores(rewards, weights)  # (P, G, M + 1)
    before = prefix[..., :-1]  # the score of the answers written before j
    if credit == "togo":
        return prefix[..., -1:] - before
    if credit == "gain":
        return prefix[..., 1:] - before
    if credit == "marginal":
        keep = 1 - torch.eye(rewards.size(2), device=rewards.device)  # row j: every answer but j
        without = [set_scores(rewards * row[:, None], weights) for row in keep]
        return prefix[..., -1:] - torch.stack(without, dim=-1)
    raise ValueError(f"unknown credit '{credit}' (choose one of {', '.join(CREDITS)})")


def credit_advantages(rewards, weights, credit, eps=1e-6, std="group"):
    """-> (P, G, M): each answer's credit minus its group's mean credit at the same place, divided
    by the std VPO's own advantage takes (grpo_advantages' `std`, of the set scores; a later place's
    credits can spread wider than the set scores); a group whose set scores are all equal gets
    zeros, as in VPO."""
    credits = answer_credits(rewards, weights, credit)  # (P, G, M)
    scores = set_scores(rewards, weights)  # (P, G)
    # The scale VPO's own advantage puts on each group's set scores (0 for a group that tied),
    # read off grpo_advantages itself, so the two can never disagree.
    centred = scores - scores.mean(dim=1, keepdim=True)
    advantages = grpo_advantages(scores, eps, std)
    scale = (advantages * centred).sum(1) / (centred**2).sum(1).clamp(min=1e-30)  # (P,)
    return (credits - credits.mean(dim=1, keepdim=True)) * scale[:, None, None]


def multi_rlvr_scores(scalar_rewards):
    """scalar_rewards (P, G, M) of the fixed scalarization (zero rows stay 0) -> (P, G) sums."""
    return scalar_rewards.sum(dim=-1)


def random_weight_scores(rewards, weights):
    """rewards (P, G, 1, D) of one answer, weights (P, 1, D): one per group -> (P, G) of w . r."""
    return torch.einsum("pgd,pd->pg", rewards[:, :, 0], weights[:, 0])


def leave_one_out_advantages(scores):
    """scores (P, G) -> (P, G): each score minus the mean of the OTHER G-1 in its group (RLOO).

    Not part of VPO: an example of a new advantage idea (docs/EXERCISES.md). Unlike the z-norm it
    keeps the scale of the score, so groups with a larger spread push harder.
    """
    G = scores.size(1)
    others_mean = (scores.sum(dim=1, keepdim=True) - scores) / (G - 1)
    return scores - others_mean
