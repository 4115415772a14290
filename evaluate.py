"""
Evaluation: a policy's pools of answers on held-out problems and the metrics over them, as the VPO
authors evaluate (settings: config.EVALUATION, part of train.DEFAULTS).

    python search.py --checkpoints out/persona-grpo-s0/final.pt out/persona-vpo-s0/final.pt

`evaluate_checkpoint`: a pool of n ANSWERS per held-out problem (k counts answers), every answer
scored as written, measured by metrics.py (best@k, w-best@k under held-out weightings, pass@k,
maj@k, diversity), with the share of wasted answers (repeats, invalid). `heldout_look`: training's
quick look at the held-out problems.

Deliberately left out: LLM judges, evaluation during sampling, results cached across calls.
"""

import dataclasses
import random

import numpy as np
import torch

from config import EVALUATION, ConfigError
from metrics import (
    best_at_k_curve,
    majority_at_k,
    pareto_fraction,
    pass_at_k_curve,
    reward_space_diversity,
    scalarized_best_at_k,
)
from policy import Policy
from rollouts import sample_rollouts
from runfiles import load_checkpoint, model_from_saved
from vpo import sample_weights, set_scores

POOL_PROBLEMS = 16  # problems sampled in one call: the memory of a call, never a result
# training's held-out look and a run's closing report draw these problems, with these draws, in
# every run, so runs compare
LOOK_SEED = 12345
# held-out weightings are drawn from this + the evaluation seed: a stream no training run draws
# (training seeds are small numbers)
HELDOUT_WEIGHTS_SEED = 10_000


def k_grid(n):
    """1, 2, 4, ... up to n (n itself included)."""
    ks = [1]
    while ks[-1] * 2 < n:
        ks.append(ks[-1] * 2)
    return ks + [n] if ks[-1] != n else ks


def heldout_look(policy, task, num_problems):
    """Training's quick held-out look: two rollouts on each of `num_problems` held-out problems,
    the same problems and draws every time -> mean scalar, best in a rollout, share valid."""
    policy = policy.seeded(LOOK_SEED)
    problems = task.problems("heldout", num_problems, random.Random(LOOK_SEED))
    policy.model.eval()
    batch = sample_rollouts(policy, task, problems, G=2)
    valid = batch["rewards"].sum(-1) > 0  # (P, 2, m)
    scalar = task.scalarize(batch["rewards"])
    return {
        "heldout_scalar": float(scalar[valid].mean()) if valid.any() else 0.0,
        "heldout_best_in_rollout": float(scalar.max(-1).values.mean()),
        "heldout_valid": float(valid.float().mean()),
    }


def sample_pools(policy, task, problems, n, seed, as_written=True):
    """n answers per problem, the policy's m per rollout, scored as written or as training does
    -> rewards (P, n, D), answers, wasted (a repeat or invalid), tokens, entropy. A goal-conditioned
    policy gets a weighting of its own in every prompt."""
    m = policy.answers_per_rollout
    if n % m:
        raise ConfigError(f"pool size n={n} must be a multiple of m={m}")
    policy = policy.seeded(seed)
    goal_rng = np.random.default_rng(seed)
    rewards = []
    answers = []
    tokens = 0
    entropy = []
    for start in range(0, len(problems), POOL_PROBLEMS):
        chunk = problems[start : start + POOL_PROBLEMS]
        if policy.goal_conditioned:  # one prompt per rollout, each with its own weighting
            rows = [p for p in chunk for _ in range(n // m)]
            goals = goal_rng.dirichlet(np.ones(task.dim), size=len(rows)).tolist()
            batch = sample_rollouts(policy, task, rows, G=1, goals=goals, as_written=as_written)
        else:
            batch = sample_rollouts(policy, task, chunk, G=n // m, as_written=as_written)
        rewards.append(batch["rewards"].reshape(len(chunk), n, task.dim).numpy())
        flat = [a for group in batch["answers"] for rollout in group for a in rollout]
        answers += [flat[i * n : (i + 1) * n] for i in range(len(chunk))]
        tokens += batch["num_tokens"]
        mask = batch["completion_mask"].float()
        entropy.append(float((batch["entropy"] * mask).sum() / mask.sum()))
    wasted = np.array([wasted_answers(task, q, pool, m=m) for q, pool in zip(problems, answers)])
    return np.concatenate(rewards), answers, wasted, tokens, float(np.mean(entropy))


def wasted_answers(task, problem, pool, m):
    """Per answer of a pool written m per rollout: invalid, or a repeat within its rollout."""
    wasted = []
    for j, answer in enumerate(pool):
        earlier = {task.answer_key(b) for b in pool[j - j % m : j]}  # its rollout's answers so far
        wasted.append(not task.valid(problem, answer) or task.answer_key(answer) in earlier)
    return wasted


def pool_metrics(task, rewards, answers, ks, heldout_weights, wasted=None, problems=None):
    """rewards (P, n, D) of P problems' pools -> averaged metrics, one value per k where it
    applies; with the problems, maj@k too (majority_votes)."""
    P, n, _ = rewards.shape
    scalar = task.scalarize(rewards)  # (P, n): the fixed scalarization
    solved = (rewards >= 1.0).all(-1)  # (P, n): every test / component maxed
    diversity = [reward_space_diversity(rewards[i]) for i in range(P)]
    out = {
        "ks": ks,
        "best_at_k": np.mean([best_at_k_curve(scalar[i], ks) for i in range(P)], 0).tolist(),
        "heldout_weight_best_at_k": np.mean(
            [scalarized_best_at_k(rewards[i], heldout_weights, ks) for i in range(P)], 0
        ).tolist(),
        "pass_at_k": np.mean(
            [pass_at_k_curve(n, int(solved[i].sum()), ks) for i in range(P)], 0
        ).tolist(),
        "diversity": float(np.mean(diversity)),
        "distinct_answers": float(
            np.mean([len({task.answer_key(a) for a in answers[i]}) for i in range(P)])
        ),
        "pareto_fraction": float(np.mean([pareto_fraction(rewards[i]) for i in range(P)])),
        "nonzero_answers": float((rewards.sum(-1) > 0).mean()),
        "wasted": float(np.mean(wasted)) if wasted is not None else 0.0,
        "mean_scalar": float(scalar.mean()),
        # per problem, at k = n: what paired comparisons between methods resample
        "per_problem": {
            "best": scalar.max(1).round(4).tolist(),
            "pass": solved.any(1).astype(float).tolist(),
            "w_best": np.round(
                [scalarized_best_at_k(rewards[i], heldout_weights, [n])[0] for i in range(P)], 4
            ).tolist(),
            "diversity": np.round(diversity, 4).tolist(),
        },
    }
    if problems is not None:
        votes = majority_votes(task, problems, answers, scalar=scalar, passed=solved, ks=ks)
        out["per_problem"].update(votes.pop("per_problem"))
        out.update(votes)
    return out


def majority_votes(task, problems, answers, scalar, passed, ks):
    """maj@k of each pool, averaged over problems: the fixed scalarization of the answer a majority
    vote picks (task.vote_key), the share of picks that pass as pass@k counts (on code: every
    hidden test), and the standard error of the mean maj@k (0 where every k-subset was listed); per
    problem, both at the largest k."""
    means, errors = [], []
    for i, (problem, pool) in enumerate(zip(problems, answers)):
        keys = [task.vote_key(problem, a) for a in pool]
        picked = [scalar[i], passed[i]]
        # a seed per problem: the problems' sampled subsets are independent draws
        mean, error = majority_at_k(keys, np.stack(picked, 1), ks, seed=i)
        means.append(mean)
        errors.append(error)
    means, errors = np.array(means), np.array(errors)  # (P, len(ks), 2)
    return {
        "maj_at_k": means[:, :, 0].mean(0).round(4).tolist(),
        "maj_at_k_se": (np.sqrt((errors[:, :, 0] ** 2).sum(0)) / len(problems)).round(4).tolist(),
        "maj_pass_at_k": means[:, :, 1].mean(0).round(4).tolist(),
        "per_problem": {
            "maj": means[:, -1, 0].round(4).tolist(),
            "maj_pass": means[:, -1, 1].round(4).tolist(),
        },
    }


def heldout_weights(dim, n, seed):
    """(n, D) weightings no training run ever drew: their own seed, far from any training seed."""
    generator = torch.Generator().manual_seed(HELDOUT_WEIGHTS_SEED + seed)
    return sample_weights(1, n, dim, generator=generator)[0].numpy()


def load_policy(path, m=None, temperature=None):
    """A checkpoint -> (its policy (policy_from_saved), its config)."""
    saved = load_checkpoint(path)
    return policy_from_saved(saved, m, temperature), saved["config"]


def policy_from_saved(saved, m=None, temperature=None):
    """A loaded checkpoint -> its policy on the CPU, asking for m answers a rollout (default: its
    own), sampling at `temperature` (default: its training's)."""
    model, tok = model_from_saved(saved)
    m = m or saved.get("m", 1)
    policy = Policy.from_config(model, tok, saved["config"], device="cpu", answers_per_rollout=m)
    if temperature is not None:
        policy = dataclasses.replace(policy, temperature=temperature)
    return policy


def evaluate_policy(policy, task, problems, n, seed=0, num_heldout_weights=None, as_written=True):
    """A policy's pools on `problems`, measured -> (metrics, rewards (P, n, D), answers);
    num_heldout_weights defaults to heldout_weightings (config.EVALUATION)."""
    rewards, answers, wasted, tokens, entropy = sample_pools(
        policy, task, problems, n=n, seed=seed, as_written=as_written
    )
    num_heldout_weights = num_heldout_weights or EVALUATION["heldout_weightings"]
    weights = heldout_weights(task.dim, num_heldout_weights, seed)
    result = pool_metrics(
        task,
        rewards,
        answers,
        ks=k_grid(n),
        heldout_weights=weights,
        wasted=wasted,
        problems=problems,
    )
    # the objective a set method trains for, under the held-out weightings: each rollout's best
    m = policy.answers_per_rollout
    sets = torch.from_numpy(rewards.reshape(len(problems), n // m, m, -1))
    w = torch.from_numpy(weights).float()[None].expand(len(problems), -1, -1)
    valid = [[task.valid(p, a) for a in pool] for p, pool in zip(problems, answers)]
    result.update(tokens_generated=tokens, entropy=entropy, m=m)
    result.update(set_score=float(set_scores(sets, w).mean()), valid=float(np.mean(valid)))
    return result, rewards, answers


def evaluate_checkpoint(path, task, problems, n, seed=0, m=None, num_heldout_weights=None):
    """A checkpoint's pools on `problems` of `task` (a warm start serves several tasks), on the
    CPU, measured (evaluate_policy); m defaults to its own."""
    policy, _ = load_policy(path, m)
    result, rewards, answers = evaluate_policy(
        policy, task, problems, n=n, seed=seed, num_heldout_weights=num_heldout_weights
    )
    result["checkpoint"] = path
    return result, rewards, answers
