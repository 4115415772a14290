"""
Test-time search with a trained policy: best@k / pass@k evaluation and an evolutionary search that
uses the policy as its mutation operator.

    python search.py --checkpoints out/code-grpo-s0/final.pt out/code-vpo-s0/final.pt --n 30

1. `evaluate_checkpoint`: for every held-out problem, sample a pool of n candidate ANSWERS (a set
   method writes m answers per rollout, so it needs n/m rollouts; a single-answer method n
   rollouts: k always counts answers), score every answer as written (a repeat scores what its
   first copy scores, as the VPO authors' evaluation does; only training zeroes repeats), and
   report per k = 1, 2, 4, ..., n: best@k of the fixed scalarisation, best@k averaged over
   held-out random weightings w.r, pass@k (all components 1), the reward-space diversity of the
   pool, and the share of wasted answers (repeats within a rollout, invalid answers), the cost a
   set method pays. The metric functions live in metrics.py.
2. `evolve`: the AlphaEvolve / FunSearch loop in miniature. A database of scored programs split
   into islands; each iteration takes a parent (and an inspiration) from every island, writes them
   into the prompt worst to best, lets the policy write 3 children (a set policy in one rollout, a
   single-answer policy in three), scores them with the task's
   reward vector, keeps a child if its pass pattern is new to the island or it beats the island's
   worst, and now and then copies each island's best into the next island (ring migration).
   The budget counts candidates evaluated, so a set policy and a single-answer policy are compared
   at the same cost. A collapsed policy writes the same child again and again, and search stalls.

Deliberately left out: MAP-Elites grids, LLM-written prompts, asynchronous evaluation, program
diffs (our programs are one line, so a child is written whole), island resets.
"""

import argparse
import json
import random

import numpy as np
import torch

from checkpoint import model_from_checkpoint
from metrics import (best_at_k_curve, distinct_count, pareto_fraction, pass_at_k_curve, reward_space_diversity,
                     scalarized_best_at_k)
from rewards import make_task
from rollouts import sample_rollouts, score_answers
from vpo import sample_weights, set_scores

# Every evaluation and search setting, in one place: experiment.py reads this table and
# `python train.py --set key=value` reaches every key.
SETTINGS = dict(
    pool_n=30,                 # answers in each held-out problem's pool (k counts answers, up to this)
    pool_problems=40,          # held-out problems per task and seed (the same for every method)
    heldout_weightings=64,     # random weightings no training run drew, for w-best@k
    evo_problems=16,           # hard code problems searched per seed (no checkpoint's pool solves them)
    evo_screen=200,            # extra held-out problems screened when the pools' problems hold too few
    evo_budget=60,             # candidates evaluated per search
    evo_islands=4,
    evo_children=3,            # candidates per island per iteration
    evo_capacity=8,            # programs an island keeps
    evo_migrate_every=4,       # iterations between ring migrations
    evo_seeds=1,               # searches per problem and checkpoint
)


def checked_setting(key, value):
    """A --set value for SETTINGS: the default's type and a positive count (ValueError in one line)."""
    default = SETTINGS[key]
    if not isinstance(value, type(default)) or isinstance(value, bool) or value < (0 if key.startswith("evo_") else 1):
        raise ValueError(f"setting '{key}' must be a {'non-negative' if key.startswith('evo_') else 'positive'} "
                         f"{type(default).__name__}, got {value!r}")
    return value


def k_grid(n):
    """1, 2, 4, ... up to n (n itself included)."""
    ks = [1]
    while ks[-1] * 2 < n:
        ks.append(ks[-1] * 2)
    return ks + [n] if ks[-1] != n else ks


# ----------------------------------------------------------------------------------------------
# Pools of answers and the metrics over them

def sample_pools(model, tok, task, problems, n, m, cfg, seed, device="cpu", goal_conditioned=False,
                 as_written=True, batch_problems=16):
    """n answers per problem, written m per rollout and scored as written -> rewards (P, n, D),
    answers (P lists of n), wasted (P, n), tokens, entropy. An answer is wasted when it repeats an
    earlier answer of its own rollout or is invalid (missing, unparseable).
    goal_conditioned: every rollout's prompt carries its own random weighting (Dirichlet(1), drawn
    from the evaluation's generator), as the policy always saw in training. as_written=False scores
    the pools as training does (repeats zeroed), to see what the convention changes."""
    if n % m:
        raise ValueError(f"pool size n={n} must be a multiple of m={m}")
    gen = torch.Generator(device=device).manual_seed(seed)
    goal_rng = np.random.default_rng(seed)
    rewards, answers, tokens, entropy = [], [], 0, []
    for start in range(0, len(problems), batch_problems):
        chunk = problems[start:start + batch_problems]
        if goal_conditioned:  # one prompt per rollout, each with its own weighting
            rows = [p for p in chunk for _ in range(n // m)]
            goals = goal_rng.dirichlet(np.ones(task.dim), size=len(rows)).tolist()
            batch = sample_rollouts(model, tok, task, rows, m, 1, cfg, gen, device, goals=goals, as_written=as_written)
        else:
            batch = sample_rollouts(model, tok, task, chunk, m, n // m, cfg, gen, device, as_written=as_written)
        rewards.append(batch["rewards"].reshape(len(chunk), n, task.dim).numpy())
        flat = [a for group in batch["answers"] for rollout in group for a in rollout]
        answers += [flat[i * n:(i + 1) * n] for i in range(len(chunk))]
        tokens += batch["num_tokens"]
        mask = batch["completion_mask"].float()
        entropy.append(float((batch["entropy"] * mask).sum() / mask.sum()))
    wasted = np.array([[not task.valid(problem, a) or task.answer_key(a) in {task.answer_key(b) for b in pool[j - j % m:j]}
                        for j, a in enumerate(pool)] for problem, pool in zip(problems, answers)])
    return np.concatenate(rewards), answers, wasted, tokens, float(np.mean(entropy))


def pool_metrics(task, rewards, answers, ks, heldout_weights, wasted=None):
    """rewards (P, n, D) of P problems' pools -> averaged metrics, one value per k where it applies."""
    P, n, _ = rewards.shape
    scalar = rewards.mean(-1)  # (P, n): the fixed scalarisation
    solved = (rewards >= 1.0).all(-1)  # (P, n): every test / component maxed
    out = {
        "ks": ks,
        "best_at_k": np.mean([best_at_k_curve(scalar[i], ks) for i in range(P)], 0).tolist(),
        "heldout_weight_best_at_k": np.mean([scalarized_best_at_k(rewards[i], heldout_weights, ks)
                                             for i in range(P)], 0).tolist(),
        "pass_at_k": np.mean([pass_at_k_curve(n, int(solved[i].sum()), ks) for i in range(P)], 0).tolist(),
        "diversity": float(np.mean([reward_space_diversity(rewards[i]) for i in range(P)])),
        "distinct_answers": float(np.mean([distinct_count([task.answer_key(a) for a in answers[i]])
                                           for i in range(P)])),
        "pareto_fraction": float(np.mean([pareto_fraction(rewards[i]) for i in range(P)])),
        "nonzero_answers": float((rewards.sum(-1) > 0).mean()),
        "wasted": float(np.mean(wasted)) if wasted is not None else 0.0,
        "mean_scalar": float(scalar.mean()),
        # per problem, at k = n: what paired comparisons between methods resample
        "per_problem": {"best": scalar.max(1).round(4).tolist(), "pass": solved.any(1).astype(float).tolist(),
                        "w_best": (rewards @ heldout_weights.T).max(1).mean(1).round(4).tolist()},
    }
    return out


def evaluate_checkpoint(path, problems, n, seed=0, num_heldout_weights=SETTINGS["heldout_weightings"], device="cpu",
                        m=None, task=None,
                        as_written=True):
    """Load a checkpoint and measure its pools on `problems`. m defaults to what it was trained with,
    task to the one it was trained on (a shared warm start is scored on the task given)."""
    model, tok, cfg, trained_m = model_from_checkpoint(path, device)
    task = task or make_task(cfg["task"], **cfg["task_options"])
    m = m or trained_m
    rewards, answers, wasted, tokens, entropy = sample_pools(model, tok, task, problems, n, m, cfg, seed, device,
                                                             cfg["algo"] == "goal_conditioned", as_written)
    # weightings no training run ever drew: their own seed, far from any training seed
    weights = sample_weights(1, num_heldout_weights, task.dim,
                             generator=torch.Generator().manual_seed(10_000 + seed))[0].numpy()
    result = pool_metrics(task, rewards, answers, k_grid(n), weights, wasted)
    # the objective a set method trains for, under the held-out weightings: each rollout's best answer
    sets = torch.from_numpy(rewards.reshape(len(problems), n // m, m, -1))
    w = torch.from_numpy(weights).float()[None].expand(len(problems), -1, -1)
    result.update(tokens_generated=tokens, entropy=entropy, m=m, checkpoint=path,
                  set_score=float(set_scores(sets, w).mean()),
                  valid=float(np.mean([[task.valid(p, a) for a in pool] for p, pool in zip(problems, answers)])))
    return result, rewards, answers


# ----------------------------------------------------------------------------------------------
# Evolutionary search

class Island:
    """Programs kept by one island: at most `capacity`, one per pass pattern (FunSearch's signature)."""

    def __init__(self, capacity):
        self.capacity = capacity
        self.programs = []  # (score, text, reward vector), best first

    def add(self, text, reward):
        score = float(reward.mean())
        for i, (_, kept, kept_reward) in enumerate(self.programs):
            if np.array_equal(kept_reward, reward):  # same behaviour: keep one, the shorter text
                if len(text) < len(kept):
                    self.programs[i] = (score, text, reward)
                return
        self.programs.append((score, text, reward))
        self.programs.sort(key=lambda p: -p[0])
        del self.programs[self.capacity:]

    def best(self):
        return self.programs[0] if self.programs else None

    def pick_parents(self, rng, explore=0.3):
        """A parent (usually the best, sometimes any) and an inspiration, ordered worst to best."""
        if not self.programs:
            return []
        parent = self.programs[0] if rng.random() > explore else rng.choice(self.programs)
        others = [p for p in self.programs if p is not parent]
        chosen = [parent] + ([rng.choice(others)] if others else [])
        return [text for _, text, _ in sorted(chosen, key=lambda p: p[0])]


def evolve(model, tok, task, problem, m, cfg, budget=120, num_islands=4, children=3, capacity=8,
           migrate_every=4, seed=0, device="cpu"):
    """Search for a program solving `problem`; returns solved-vs-candidates and the best program.

    Every iteration writes `children` candidates per island, conditioned on that island's parents:
    a set policy in children / m rollouts of m answers, a single-answer policy in `children`
    rollouts. So every policy gets the same candidates AND the same number of iterations (rounds of
    selection) per budget; what differs is whether a parent's children are written together, as a
    set, or independently. The first iteration has no parents (seeds straight from the policy).
    """
    if children % m:
        raise ValueError(f"children={children} must be a multiple of m={m}")
    rng = random.Random(seed)
    gen = torch.Generator(device=device).manual_seed(seed)
    islands = [Island(capacity) for _ in range(num_islands)]
    evaluated, solved_at, history, iteration = 0, None, [], 0
    # how good a mutation operator the policy is: of the children written from parents, how many are
    # invalid (unparseable or contradicting an example) and how many beat their best parent
    mutations = {"children": 0, "invalid": 0, "improved": 0}
    while evaluated < budget:
        parents = [island.pick_parents(rng) or None for island in islands]
        best_parent = [max((score for score, text, _ in island.programs if text in (p or [])), default=None)
                       for island, p in zip(islands, parents)]
        batch = sample_rollouts(model, tok, task, [problem] * num_islands, m, children // m, cfg, gen, device,
                                parents=parents)
        for i, island in enumerate(islands):
            for answer in [a for rollout in batch["answers"][i] for a in rollout[:m]]:
                if evaluated >= budget:
                    break
                reward = score_answers(task, problem, [answer], 1)[0]
                evaluated += 1
                if parents[i]:
                    mutations["children"] += 1
                    mutations["invalid"] += not task.valid(problem, answer)
                    mutations["improved"] += float(reward.mean()) > best_parent[i]
                island.add(answer, reward)
                if solved_at is None and (reward >= 1.0).all():
                    solved_at = evaluated
        iteration += 1
        if iteration % migrate_every == 0:  # ring migration: each island receives its neighbour's best
            bests = [island.best() for island in islands]
            for i, island in enumerate(islands):
                donor = bests[(i - 1) % num_islands]
                if donor is not None:
                    island.add(donor[1], donor[2])
        best_score = max((island.best()[0] for island in islands if island.best()), default=0.0)
        history.append((evaluated, best_score))
    best = max((island.best() for island in islands if island.best()), key=lambda p: p[0], default=None)
    return {"solved_at": solved_at, "history": history, "best": best[1] if best else None,
            "best_score": best[0] if best else 0.0, "mutations": mutations}


def solved_curve(results, budget):
    """Fraction of searches solved after b candidates, for b = 1..budget."""
    curve = np.zeros(budget)
    for r in results:
        if r["solved_at"] is not None:
            curve[r["solved_at"] - 1:] += 1
    return (curve / max(1, len(results))).tolist()


def main():
    parser = argparse.ArgumentParser(description="best@k / pass@k of checkpoints on held-out problems")
    parser.add_argument("--checkpoints", nargs="+", required=True)
    parser.add_argument("--n", type=int, default=30, help="pool size in answers")
    parser.add_argument("--problems", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument("--zero-repeats", action="store_true",
                        help="score pools as training does (a repeat inside a rollout scores zero), not as written")
    args = parser.parse_args()
    rows = []
    for path in args.checkpoints:
        try:
            _, _, cfg, _ = model_from_checkpoint(path)
        except (FileNotFoundError, RuntimeError) as e:
            raise SystemExit(f"error: {e}")
        task = make_task(cfg["task"], **cfg["task_options"])
        problems = task.problems("heldout", args.problems, random.Random(args.seed))
        result, _, _ = evaluate_checkpoint(path, problems, args.n, args.seed, as_written=not args.zero_repeats)
        rows.append((path, result))
    ks = rows[0][1]["ks"]
    print(f"{'checkpoint':40s} " + " ".join(f"best@{k:<3d}" for k in ks) + "  diversity  distinct  wasted")
    for path, r in rows:
        print(f"{path[-40:]:40s} " + " ".join(f"{v:7.3f} " for v in r["best_at_k"]) +
              f"  {r['diversity']:8.3f}  {r['distinct_answers']:7.1f}  {r['wasted']:6.2f}")
    print(f"\n{'checkpoint':40s} " + " ".join(f"w-best@{k:<3d}" for k in ks))
    for path, r in rows:
        print(f"{path[-40:]:40s} " + " ".join(f"{v:9.3f} " for v in r["heldout_weight_best_at_k"]))
    print(f"\n{'checkpoint':40s} " + " ".join(f"pass@{k:<3d}" for k in ks))
    for path, r in rows:
        print(f"{path[-40:]:40s} " + " ".join(f"{v:7.3f} " for v in r["pass_at_k"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({p: r for p, r in rows}, f, indent=1)


if __name__ == "__main__":
    main()
