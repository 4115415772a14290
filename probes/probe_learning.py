"""
How much of the reachable gap a finished code run closed, measured on training problems.

    python probes/probe_learning.py out/p1 out/p2 [--problems 40 --n 30 --json probe.json]
    python probes/probe_learning.py out/final --split heldout   # once, for a finished recipe only

For each run folder (its final.pt and the warm start it started from) this samples pools of n answers
on training problems with a seed of its own (not RL's), the run's m answers per rollout, scores every
answer as written, and reports for the run, its warm start and the task's own demonstrator (`demos`,
what the warm start imitates): the shares of valid answers (also by place in the rollout), malformed
ones (do not parse) and repeats (already written in their rollout), where the thresholds land (in
their gap, in another's, outside the examples; by the gap's width), the mean fixed reward, the set
score E_w[max_j w . r_j] of sets of 3 answers, best@k and pass@k; and each as the share of the gap
from the warm start to oracle.py's optimum that it closed. GRPO's objective is the mean reward
(optimum: the Bayes-optimal single answer), VPO's the set score and pass@k. A run below `demos` has
not yet learned what its teacher shows; a run above it learned more than that.

Tuning on these numbers never looks at held-out problems: `--split heldout` is for the one final
check of a recipe chosen on training problems.

Deliberately left out: plots, the persona task (oracle.py covers code only), evolutionary search,
training curves (a run's metrics.jsonl holds them).
"""

import argparse
import json
import os
import random
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import lang  # noqa: E402
from checkpoint import load_checkpoint, model_from_checkpoint  # noqa: E402
from metrics import best_at_k_curve, pass_at_k_curve  # noqa: E402
from lab.oracle import gap_closed, mean_oracle  # noqa: E402
from config import make_task  # noqa: E402
from search import k_grid, sample_pools  # noqa: E402
from vpo import sample_weights, set_scores  # noqa: E402

PROBE_SEED = 424_242  # problems, sampling and weightings: far from any RL seed (0..9) and SFT's (seed + 1000)
SET_SIZE = 3  # answers per set for the set score, as VPO's m


def pool_numbers(task, model, tok, cfg, problems, n, m, weights):
    """Sample a pool of n answers per problem, m per rollout, scored as written -> its numbers."""
    rewards, answers, _, _, _ = sample_pools(model, tok, task, problems, n, m, cfg, PROBE_SEED)
    return score_pools(task, problems, rewards, answers, m, weights)


def demo_numbers(task, problems, n, m, weights):
    """The same numbers for the task's own demonstrator (what the warm start was trained to imitate),
    asked for m answers at a time: how far imitating the demonstrations perfectly would go, so a run's
    gap can be read as 'not yet as good as its teacher' or 'beyond it'."""
    rng = random.Random(PROBE_SEED)
    answers = [[a for _ in range(n // m) for a in task.demonstration(p, m, rng)] for p in problems]
    rewards = np.array([[task.reward(p, a) for a in pool] for p, pool in zip(problems, answers)], dtype=np.float32)
    return score_pools(task, problems, rewards, answers, m, weights)


def placements(task, problem, answer):
    """Each threshold of an answer -> (width of its own gap, where it landed): "after example" (the
    first number of its gap, where the demonstrations' habit puts it), "in gap" (anywhere else in its
    gap), "other gap" (between two other examples: the right kind of number, read off the wrong
    examples) or "outside" (below the first example or above the last). An answer that does not
    parse, or has another number of thresholds, lists nothing."""
    thresholds = task.thresholds(answer)
    if lang.canonical(answer) is None or len(thresholds) != task.k:
        return []
    shown = task.shown(problem)
    def where(i, t):
        if shown[i] < t <= shown[i + 1]:
            return "after example" if t == shown[i] + 1 else "in gap"
        return "other gap" if shown[0] < t <= shown[-1] else "outside"
    return [(shown[i + 1] - shown[i], where(i, t)) for i, t in enumerate(thresholds)]


WIDTHS = {"1": (1, 1), "2-4": (2, 4), "5-9": (5, 9), "10+": (10, 10**9)}  # a gap of 1 allows one number


def score_pools(task, problems, rewards, answers, m, weights):
    """Pools (rewards (P, n, D) scored as written, answers P lists of n, written m per rollout) -> numbers."""
    n = rewards.shape[1]
    valid = np.array([[task.valid(p, a) for a in pool] for p, pool in zip(problems, answers)])
    # an invalid answer either does not parse or parses and contradicts an example: a format to learn,
    # or numbers to place between the examples
    malformed = np.array([[lang.canonical(a) is None for a in pool] for pool in answers])
    repeat = np.array([[task.answer_key(a) in {task.answer_key(b) for b in pool[j - j % m:j]} for j, a in enumerate(pool)]
                       for pool in answers])
    # a threshold outside its gap but between two other examples was read off the wrong examples; one
    # outside every example ignored them: which one a policy does tells a format problem from a number one
    placed = [pw for p, pool in zip(problems, answers) for a in pool for pw in placements(task, p, a)]
    kinds = [kind for _, kind in placed]
    with_choice = [kind for width, kind in placed if width > 1]  # gaps that leave more than one number
    scalar, solved = rewards.mean(-1), (rewards >= 1.0).all(-1)
    ks = k_grid(n)
    sets = torch.from_numpy(rewards).reshape(len(problems), n // SET_SIZE, SET_SIZE, task.dim)
    w = torch.from_numpy(weights).float().expand(len(problems), -1, -1)
    # by place in the rollout: a set policy can let one place decay (its answer adds nothing to the
    # set score while another answer covers the weightings), which the mean alone hides
    by_place = valid.reshape(len(problems), n // m, m).mean(axis=(0, 1))
    return {"valid": float(valid.mean()), "malformed": float(malformed.mean()), "repeats": float(repeat.mean()),
            "mean_reward": float(scalar.mean()),
            "valid_by_place": by_place.round(3).tolist(),
            # per threshold written, over all answers of the pool
            "misplaced": {kind: kinds.count(kind) / (valid.size * task.k) for kind in ("other gap", "outside")},
            # of the thresholds in parsed answers, by the width of their gap: where exactness is needed
            "in_gap_by_width": {name: float(np.mean([kind in ("after example", "in gap") for w, kind in placed
                                                     if lo <= w <= hi] or [np.nan]))
                                for name, (lo, hi) in WIDTHS.items()},
            # thresholds whose gap leaves a choice (wider than 1): the habit, a varied number in the gap,
            # or a varied number outside it: a policy that varies as often as the demonstrations but
            # lands outside its gap has not learnt the gap
            "varied": {kind: float(np.mean([k == kind for k in with_choice] or [np.nan]))
                       for kind in ("after example", "in gap", "other gap", "outside")},
            "set_score": float(set_scores(sets, w).mean()),
            "best_at_k": np.mean([best_at_k_curve(s, ks) for s in scalar], 0).tolist(),
            "pass_at_k": np.mean([pass_at_k_curve(n, int(c.sum()), ks) for c in solved], 0).tolist()}


def gaps(run, warm, optimum):
    """Each number of a run as the share of the warm start's gap to the optimum it closed."""
    out = {"valid": gap_closed(run["valid"], warm["valid"], 1.0),
           "mean_reward": gap_closed(run["mean_reward"], warm["mean_reward"], optimum["best_at_1"]),
           "set_score": gap_closed(run["set_score"], warm["set_score"], optimum["set_score"])}
    for key in ("best_at_k", "pass_at_k"):
        out[key] = [gap_closed(r, w, o) for r, w, o in zip(run[key], warm[key], optimum[key])]
    return out


def probe(run_dirs, num_problems=40, n=30, split="train"):
    """{run folder: {"run", "warm", "optimum", "gap"}} on problems of `split`."""
    results, cache = {}, {}
    for run_dir in run_dirs:
        final = load_checkpoint(os.path.join(run_dir, "final.pt"))
        cfg, m = final["config"], final.get("m", 1)
        task = make_task(cfg["task"], **cfg["task_options"])
        problems = task.problems(split, num_problems, random.Random(PROBE_SEED))
        weights = sample_weights(1, 100, task.dim, generator=torch.Generator().manual_seed(PROBE_SEED))[0].numpy()
        ks = k_grid(n)
        key = json.dumps(cfg["task_options"], sort_keys=True)
        if key not in cache:  # the oracle depends on the task and the problems only
            best = mean_oracle(task, problems, ks, weights, m=SET_SIZE)
            cache[key] = {k: best[k] for k in ("best_at_1", "set_score", "best_at_k", "pass_at_k")}
        if (key, m) not in cache:
            cache[key, m] = demo_numbers(task, problems, n, m, weights)
        warm_key = (final["warm_start"], m, key)
        if warm_key not in cache:
            model, tok, warm_cfg, _ = model_from_checkpoint(final["warm_start"])
            cache[warm_key] = pool_numbers(task, model, tok, warm_cfg, problems, n, m, weights)
        model, tok, _, _ = model_from_checkpoint(os.path.join(run_dir, "final.pt"))
        run = pool_numbers(task, model, tok, cfg, problems, n, m, weights)
        results[run_dir] = {"algo": cfg["algo"], "m": m, "ks": ks, "run": run, "warm": cache[warm_key],
                            "demos": cache[key, m], "optimum": cache[key],
                            "gap": gaps(run, cache[warm_key], cache[key]),
                            "demos_gap": gaps(cache[key, m], cache[warm_key], cache[key])}
    return results


def report(results, split="train"):
    nan, sources = float("nan"), ("warm", "run", "demos")
    for run_dir, r in results.items():
        print(f"\n{run_dir} ({r['algo']}, m={r['m']}), {split} problems")
        print(f"{'':14s} {'warm':>7s} {'run':>7s} {'optimum':>8s} {'gap closed':>10s} {'demos':>7s} {'their gap':>9s}")
        best = {"valid": 1.0, "malformed": 0.0, "repeats": 0.0, "mean_reward": r["optimum"]["best_at_1"],
                "set_score": r["optimum"]["set_score"]}
        rows = [(key.replace("_", " "), key, None, value) for key, value in best.items()]
        rows += [(f"{key[:-5]}@{k}", key, i, r["optimum"][key][i]) for key in ("best_at_k", "pass_at_k")
                 for i, k in enumerate(r["ks"]) if k in (1, 4, r["ks"][-1])]
        for name, key, i, value in rows:
            at = [r[s].get(key, nan) if i is None else r[s][key][i]
                  for s in ("warm", "run", "gap", "demos", "demos_gap")]
            print(f"{name:14s} {at[0]:7.3f} {at[1]:7.3f} {value:8.3f} {at[2]:10.2f} {at[3]:7.3f} {at[4]:9.2f}")
        print("thresholds outside their gap, share of all written: " + ", ".join(
            f"{s} {r[s]['misplaced']['other gap']:.3f} in another's gap + {r[s]['misplaced']['outside']:.3f} "
            f"outside the examples" for s in sources))
        print("thresholds in their gap, by its width: " + ", ".join(
            f"{s} " + " ".join(f"{w}: {v:.3f}" for w, v in r[s]["in_gap_by_width"].items()) for s in sources))
        print("thresholds with a choice (gap wider than 1), after the example / elsewhere in the gap / outside it: "
              + ", ".join(f"{s} {r[s]['varied']['after example']:.3f} / {r[s]['varied']['in gap']:.3f} / "
                          f"{r[s]['varied']['other gap'] + r[s]['varied']['outside']:.3f}" for s in sources))
        if r["m"] > 1:
            print(f"valid by place in the rollout: warm {r['warm']['valid_by_place']}, run {r['run']['valid_by_place']}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].strip())
    parser.add_argument("runs", nargs="+", help="finished run folders (final.pt inside)")
    parser.add_argument("--problems", type=int, default=40)
    parser.add_argument("--n", type=int, default=30, help="pool size in answers (a multiple of 3)")
    parser.add_argument("--split", choices=["train", "heldout"], default="train",
                        help="heldout only for the final check of a recipe, never for tuning")
    parser.add_argument("--json", help="also write the numbers to this file")
    args = parser.parse_args()
    torch.set_num_threads(1)
    results = probe(args.runs, args.problems, args.n, args.split)
    report(results, args.split)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
