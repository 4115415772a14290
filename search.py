"""
Test-time search with a trained policy: best@k / pass@k evaluation, and an evolutionary search that
uses the policy as its mutation operator (settings: config.EVALUATION, part of train.DEFAULTS).

    python search.py --checkpoints out/code-grpo-s0/final.pt out/code-vpo-s0/final.pt --n 30
    python search.py --checkpoints out/warmstart/warmstart-code-*.pt --search   # and the searches

1. `evaluate_checkpoint`: a pool of n ANSWERS per held-out problem (k counts answers), scored as
   written, measured by metrics.py, with the share of wasted answers (repeats, invalid).
2. `run_searches`: the OpenEvolve loop in miniature (islands; the policy, shown parents WITH their
   scores, writes the children; ring migration), one search per problem, all on the same budget,
   next to a same-budget control of plain samples: search earns its keep only where it beats that.

Deliberately left out: MAP-Elites grids, LLM-written prompts, asynchronous evaluation, multi-line
diffs, island resets, early stopping on stagnation.
"""

import json
import os
import random
import sys
import time

import numpy as np
import torch
from matplotlib.figure import Figure  # no pyplot: files only, on any machine, no display
from matplotlib.ticker import MaxNLocator

import maze
from config import EVALUATION, make_task, resolve_evaluation, settings_parser
from metrics import (
    best_at_k_curve,
    pareto_fraction,
    pass_at_k_curve,
    reward_space_diversity,
    scalarized_best_at_k,
)
from rollouts import sample_rollouts
from runfiles import load_checkpoint, model_from_checkpoint
from vpo import sample_weights, set_scores

POOL_PROBLEMS = 16  # problems sampled in one call: the memory of a call, never a result


def k_grid(n):
    """1, 2, 4, ... up to n (n itself included)."""
    ks = [1]
    while ks[-1] * 2 < n:
        ks.append(ks[-1] * 2)
    return ks + [n] if ks[-1] != n else ks


# ---- Pools of answers and the metrics over them --------------------------------------------------


def heldout_look(model, tok, task, m, cfg, device, seed=12345):
    """Training's quick held-out look: two rollouts on each of `eval_problems` held-out problems,
    the same problems and draws every time -> mean scalar, best in a rollout, share valid."""
    problems = task.problems("heldout", cfg["eval_problems"], random.Random(seed))
    model.eval()
    generator = torch.Generator(device=device).manual_seed(seed)
    batch = sample_rollouts(model, tok, task, problems, m, 2, cfg, generator)
    valid = batch["rewards"].sum(-1) > 0  # (P, 2, m)
    scalar = task.scalarize(batch["rewards"])
    return {
        "heldout_scalar": float(scalar[valid].mean()) if valid.any() else 0.0,
        "heldout_best_in_rollout": float(scalar.max(-1).values.mean()),
        "heldout_valid": float(valid.float().mean()),
    }


def sample_pools(
    model,
    tok,
    task,
    problems,
    n,
    m,
    cfg,
    seed,
    device="cpu",
    goal_conditioned=False,
    as_written=True,
):
    """n answers per problem, m per rollout, scored as written or as training does -> rewards (P, n,
    D), answers, wasted (a repeat or invalid), tokens, entropy; goal_conditioned: a weighting per
    prompt."""
    if n % m:
        raise ValueError(f"pool size n={n} must be a multiple of m={m}")
    gen = torch.Generator(device=device).manual_seed(seed)
    goal_rng = np.random.default_rng(seed)
    rewards = []
    answers = []
    tokens = 0
    entropy = []
    for start in range(0, len(problems), POOL_PROBLEMS):
        chunk = problems[start : start + POOL_PROBLEMS]
        if goal_conditioned:  # one prompt per rollout, each with its own weighting
            rows = [p for p in chunk for _ in range(n // m)]
            goals = goal_rng.dirichlet(np.ones(task.dim), size=len(rows)).tolist()
            batch = sample_rollouts(
                model, tok, task, rows, m, 1, cfg, gen, goals=goals, as_written=as_written
            )
        else:
            batch = sample_rollouts(
                model, tok, task, chunk, m, n // m, cfg, gen, as_written=as_written
            )
        rewards.append(batch["rewards"].reshape(len(chunk), n, task.dim).numpy())
        flat = [a for group in batch["answers"] for rollout in group for a in rollout]
        answers += [flat[i * n : (i + 1) * n] for i in range(len(chunk))]
        tokens += batch["num_tokens"]
        mask = batch["completion_mask"].float()
        entropy.append(float((batch["entropy"] * mask).sum() / mask.sum()))
    wasted = np.array([wasted_answers(task, q, pool, m) for q, pool in zip(problems, answers)])
    return np.concatenate(rewards), answers, wasted, tokens, float(np.mean(entropy))


def wasted_answers(task, problem, pool, m):
    """Per answer of a pool written m per rollout: invalid, or a repeat within its rollout."""
    wasted = []
    for j, answer in enumerate(pool):
        earlier = {task.answer_key(b) for b in pool[j - j % m : j]}  # its rollout's answers so far
        wasted.append(not task.valid(problem, answer) or task.answer_key(answer) in earlier)
    return wasted


def pool_metrics(task, rewards, answers, ks, heldout_weights, wasted=None):
    """rewards (P, n, D) of P problems' pools -> averaged metrics, one value per k where it
    applies."""
    P, n, _ = rewards.shape
    scalar = task.scalarize(rewards)  # (P, n): the fixed scalarization
    solved = (rewards >= 1.0).all(-1)  # (P, n): every test / component maxed
    diversity = [reward_space_diversity(rewards[i]) for i in range(P)]
    return {
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
            "w_best": (rewards @ heldout_weights.T).max(1).mean(1).round(4).tolist(),
            "diversity": np.round(diversity, 4).tolist(),
        },
    }


def heldout_weights(dim, n, seed):
    """(n, D) weightings no training run ever drew: their own seed, far from any training seed."""
    generator = torch.Generator().manual_seed(10_000 + seed)
    return sample_weights(1, n, dim, generator=generator)[0].numpy()


def evaluate_checkpoint(
    path,
    problems,
    n,
    seed=0,
    num_heldout_weights=None,
    m=None,
    task=None,
    as_written=True,
    temperature=None,
):
    """A checkpoint's pools on `problems`, on the CPU, measured; m and task default to its own,
    num_heldout_weights to heldout_weightings (config.EVALUATION), temperature to its training's."""
    model, tok, cfg, trained_m = model_from_checkpoint(path)
    if temperature is not None:
        cfg = dict(cfg, temperature=temperature)
    task = task or make_task(cfg["task"], **cfg["task_options"])
    m = m or trained_m
    goal_conditioned = cfg["algo"] == "goal_conditioned"
    pools = sample_pools(
        model, tok, task, problems, n, m, cfg, seed, "cpu", goal_conditioned, as_written
    )
    rewards, answers, wasted, tokens, entropy = pools
    num_heldout_weights = num_heldout_weights or EVALUATION["heldout_weightings"]
    weights = heldout_weights(task.dim, num_heldout_weights, seed)
    result = pool_metrics(task, rewards, answers, k_grid(n), weights, wasted)
    # the objective a set method trains for, under the held-out weightings: each rollout's best
    sets = torch.from_numpy(rewards.reshape(len(problems), n // m, m, -1))
    w = torch.from_numpy(weights).float()[None].expand(len(problems), -1, -1)
    valid = [[task.valid(p, a) for a in pool] for p, pool in zip(problems, answers)]
    result.update(tokens_generated=tokens, entropy=entropy, m=m, checkpoint=path)
    result.update(set_score=float(set_scores(sets, w).mean()), valid=float(np.mean(valid)))
    return result, rewards, answers


# ---- Evolutionary search -------------------------------------------------------------------------


class Island:
    """Programs kept by one island: at most `capacity`, one per pass pattern (FunSearch's
    signature)."""

    def __init__(self, capacity):
        self.capacity = capacity
        self.programs = []  # (score, text, reward vector), best first

    def add(self, text, reward, score):
        """Keep a program with its reward vector and its score (the task's scalarization of it)."""
        for i, (_, kept, kept_reward) in enumerate(self.programs):
            if np.array_equal(kept_reward, reward):  # same behavior: keep one, the shorter text
                if len(text) < len(kept):
                    self.programs[i] = (score, text, reward)
                return
        self.programs.append((score, text, reward))
        self.programs.sort(key=lambda p: -p[0])
        del self.programs[self.capacity :]

    def best(self):
        return self.programs[0] if self.programs else None

    def pick_parents(self, rng, explore):
        """A parent (the best, or with probability `explore` any) and an inspiration: (text, score),
        worst first."""
        if not self.programs:
            return []
        parent = self.programs[0] if rng.random() >= explore else rng.choice(self.programs)
        others = [p for p in self.programs if p is not parent]
        chosen = [parent] + ([rng.choice(others)] if others else [])
        return [(text, score) for score, text, _ in sorted(chosen, key=lambda p: p[0])]


def search_problems(task, split, n, min_plausible, seed, max_draws=100_000):
    """The first n problems of `split` (from `seed`) with at least `min_plausible` plausible
    programs."""
    rng = random.Random(seed)
    found = []
    drawn = 0
    while len(found) < n:
        if drawn >= max_draws:
            raise ValueError(
                f"only {len(found)} of {max_draws} {split} problems leave >= {min_plausible} "
                f"plausible programs (wanted {n}); lower evo_min_plausible or use a larger code "
                "family"
            )
        batch = task.problems(split, n, rng)
        drawn += len(batch)
        found += [p for p in batch if task.num_plausible(p) >= min_plausible]
    return found[:n]


def _sample(model, tok, task, problems, m, rollouts, cfg, settings, gen, parents=None):
    """sample_rollouts at the search's settings, memory-capped -> rewards (P, rollouts, m, D),
    answers."""
    cfg = dict(cfg, temperature=settings["evo_temperature"], top_p=settings["evo_top_p"], top_k=0)
    length = rollouts * (m * task.max_answer_tokens + 1 + 96)  # 96: room for a prompt with parents
    chunk = max(1, settings["evo_positions_per_call"] // length)
    rewards = []
    answers = []
    for start in range(0, len(problems), chunk):
        part = problems[start : start + chunk]
        shown = parents[start : start + chunk] if parents else None
        batch = sample_rollouts(
            model, tok, task, part, m, rollouts, cfg, gen, shown, as_written=True
        )
        rewards.append(batch["rewards"].numpy())
        answers += batch["answers"]
    return np.concatenate(rewards), answers


def sampling_control(
    model, tok, task, problems, budget, per_call, cfg, settings, seed, device="cpu"
):
    """The same-budget control: `budget` plain samples per problem -> the index (1-based) of the
    first pass, or None."""
    rollouts = -(
        -budget // per_call
    )  # enough rollouts for `budget` answers; the rest not looked at
    gen = torch.Generator(device=device).manual_seed(seed)
    rewards, _ = _sample(model, tok, task, problems, per_call, rollouts, cfg, settings, gen)
    passed = (rewards >= 1.0).all(-1).reshape(len(problems), -1)[:, :budget]  # (P, budget)
    return [int(row.nonzero()[0][0]) + 1 if row.any() else None for row in passed]


def evolve_many(model, tok, task, problems, cfg, settings, seed, children_per_call, device="cpu"):
    """One evolutionary search per problem, in lockstep (islands, children_per_call children a call,
    ring migration every `evo_migrate_every`) -> per problem: solved_at, candidates, best,
    best_score, mutations."""
    budget = settings["evo_budget"]
    num_islands = settings["evo_islands"]
    every = settings["evo_migrate_every"]
    if min(budget, num_islands, every, children_per_call) < 1:
        raise ValueError(
            "evo_budget, evo_islands, evo_migrate_every and children_per_call must be >= 1"
        )
    rng = random.Random(seed)
    gen = torch.Generator(device=device).manual_seed(seed)
    islands = [[Island(settings["evo_capacity"]) for _ in range(num_islands)] for _ in problems]
    runs = [
        {
            "problem": repr(p),
            "solved_at": None,
            "candidates": 0,
            "best": None,
            "best_score": 0.0,
            "mutations": {"children": 0, "invalid": 0, "improved": 0},
        }
        for p in problems
    ]
    while True:
        live = [
            s for s, r in enumerate(runs) if r["solved_at"] is None and r["candidates"] < budget
        ]
        if not live:
            return runs
        rows = [(s, i) for s in live for i in range(num_islands)]
        parents = [
            islands[s][i].pick_parents(rng, settings["evo_explore"]) or None for s, i in rows
        ]
        asked = [problems[s] for s, _ in rows]
        rewards, answers = _sample(
            model, tok, task, asked, children_per_call, 1, cfg, settings, gen, parents
        )
        crossed = {s: runs[s]["candidates"] // every for s in live}
        for r, (s, i) in enumerate(rows):
            children = zip(answers[r][0], rewards[r, 0])
            add_children(runs[s], islands[s][i], task, problems[s], children, parents[r], budget)
        for s in live:  # ring migration once a search crosses a multiple of `every`
            if runs[s]["solved_at"] is None and runs[s]["candidates"] // every > crossed[s]:
                migrate(islands[s])


def add_children(run, island, task, problem, children, parents, budget):
    """(answer, reward) children of one island's call into its island and its search's record,
    until the search is solved or its budget spent; parents: what the call showed (best last)."""
    for answer, reward in children:
        if run["solved_at"] is not None or run["candidates"] >= budget:
            return
        run["candidates"] += 1
        score = float(task.scalarize(reward))  # the examples only
        valid = task.valid(problem, answer)
        if parents:  # the policy as a mutation operator
            run["mutations"]["children"] += 1
            run["mutations"]["invalid"] += not valid
            run["mutations"]["improved"] += score > parents[-1][1]
        if valid:
            island.add(answer, reward, score)
            if run["best"] is None or score > run["best_score"]:
                run["best"] = answer
                run["best_score"] = score
        if (reward >= 1.0).all():
            run["solved_at"] = run["candidates"]


def migrate(islands):
    """Ring migration: each island receives its left neighbor's best program."""
    bests = [island.best() for island in islands]
    for i, island in enumerate(islands):
        if bests[i - 1] is not None:
            score, text, reward = bests[i - 1]
            island.add(text, reward, score)


def run_searches(
    model, tok, task, problems, m, cfg, settings, seed, children_per_call, device="cpu"
):
    """evolve_many and the same-budget sampling control for one policy; children_per_call: 1 or its
    m."""
    if children_per_call not in (1, m):
        raise ValueError(
            f"children_per_call must be 1 or the policy's m={m}, got {children_per_call}"
        )
    t0 = time.time()
    runs = evolve_many(model, tok, task, problems, cfg, settings, seed, children_per_call, device)
    seconds = time.time() - t0
    t0 = time.time()
    budget = settings["evo_budget"]
    control_seed = seed + 1_000_003  # its own random stream, not the search's
    sampled = sampling_control(
        model, tok, task, problems, budget, children_per_call, cfg, settings, control_seed, device
    )
    for run, at in zip(runs, sampled):
        run["sampling_solved_at"] = at
    return {
        "searches": len(runs),
        "budget": budget,
        "children_per_call": children_per_call,
        "solved": sum(r["solved_at"] is not None for r in runs),
        "solved_problems": [r["problem"] for r in runs if r["solved_at"] is not None],
        "solved_curve": solved_curve(runs, budget),
        "sampling_solved": sum(at is not None for at in sampled),
        "sampling_curve": solved_curve([{"solved_at": at} for at in sampled], budget),
        "mutations": {
            k: sum(r["mutations"][k] for r in runs) for k in ("children", "invalid", "improved")
        },
        "seconds": seconds,
        "sampling_seconds": time.time() - t0,
        "runs": runs,
    }


def solved_curve(results, budget):
    """Fraction of searches solved after b candidates, for b = 1..budget."""
    curve = np.zeros(budget)
    for r in results:
        if r["solved_at"] is not None:
            curve[r["solved_at"] - 1 :] += 1
    return (curve / max(1, len(results))).tolist()


def print_pools(rows, problems, seed, split="heldout"):
    """A table per metric, a row per checkpoint; pass@k only where some answer passed. The first
    line says which problems: a table of other problems has other numbers."""
    ks = rows[0][1]["ks"]
    print(
        f"{split}, {problems} problems drawn with seed {seed}, {ks[-1]} answers each (k counts "
        f"answers; python search.py --problems {problems} --seed {seed} draws the same)"
    )
    print(
        f"{'checkpoint':40s} "
        + " ".join(f"best@{k:<3d}" for k in ks)
        + "  diversity  distinct  wasted"
    )
    for path, r in rows:
        print(
            f"{path[-40:]:40s} "
            + " ".join(f"{v:7.3f} " for v in r["best_at_k"])
            + f"  {r['diversity']:8.3f}  {r['distinct_answers']:7.1f}  {r['wasted']:6.2f}"
        )
    passed = any(v > 0 for _, r in rows for v in r["pass_at_k"])
    for name, key, width in (("w-best@", "heldout_weight_best_at_k", 9), ("pass@", "pass_at_k", 7))[
        : 1 + passed
    ]:
        print(f"\n{'checkpoint':40s} " + " ".join(f"{name}{k:<3d}" for k in ks))
        for path, r in rows:
            print(f"{path[-40:]:40s} " + " ".join(f"{v:{width}.3f} " for v in r[key]))
    if not passed:
        print(
            "\npass@k is 0 at every k: no answer passed every reward component (on the persona "
            "tasks none can: a word has room for only so many letters; nor on the maze: no route "
            "passes both corners)"
        )


def warm_label(m):
    """The warm start's row: a set method's is asked for its m answers a rollout, as it starts."""
    return "its warm start" + (f", {m} answers a rollout" if m > 1 else "")


def report_run(run_dir, seed=12345):
    """What `python train.py` shows at its end: held-out best@k and w-best@k against the warm
    start's, printed and in <run_dir>/run.png (the same problems in every run, so figures
    compare)."""
    final = os.path.join(run_dir, "final.pt")
    saved = load_checkpoint(final)
    cfg, m = saved["config"], saved["m"]
    task = make_task(cfg["task"], **cfg["task_options"])
    problems = task.problems("heldout", cfg["eval_problems"], random.Random(seed))
    n = max(m, cfg["pool_n"] // m * m)
    pools = {
        name: evaluate_checkpoint(
            path, problems, n, seed, cfg["heldout_weightings"], m=m, task=task
        )
        for name, path in (("this run", final), (warm_label(m), saved["warm_start"]))
    }
    rows = [(name, result) for name, (result, _, _) in pools.items()]
    print()
    print_pools(rows, len(problems), seed)
    if cfg["task"] == "maze":  # the routes themselves: where a policy's answers go on the grid
        drawn = {name: answers for name, (_, _, answers) in pools.items()}
        maze.conflict_figure(os.path.join(run_dir, "routes.png"), drawn, problems)
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        logged = [json.loads(line) for line in f]
    return run_figure(os.path.join(run_dir, "run.png"), cfg, logged, rows)


def run_figure(path, cfg, logged, rows):
    """One run's picture: its training curves, then best@k and w-best@k against its warm start's ->
    path."""
    steps = [r for r in logged if r.get("kind") == "train"]
    evals = [r for r in logged if r.get("kind") == "eval"]
    fig = Figure(figsize=(13, 3.6))
    axes = fig.subplots(1, 3)
    x = [r["step"] for r in steps]
    axes[0].plot(x, [r["reward_scalar"] for r in steps], lw=0.8, label="reward (fixed mean)")
    axes[0].plot(x, [r["set_score"] for r in steps], lw=0.8, label="set score, fixed weightings")
    heldout = ([r["step"] for r in evals], [r["heldout_scalar"] for r in evals])
    axes[0].plot(*heldout, "ko", ms=3, label="held-out reward")
    axes[0].xaxis.set_major_locator(MaxNLocator(integer=True))
    title = f"{cfg['task']}, {cfg['algo']}, seed {cfg['seed']}: training"
    axes[0].set(xlabel="RL step", title=title)
    for ax, key, name in (
        (axes[1], "best_at_k", "best@k, fixed mean"),
        (axes[2], "heldout_weight_best_at_k", "best@k, held-out weightings"),
    ):
        for (label, r), style in zip(rows, ("o-", "o--")):
            color = "tab:blue" if label == "this run" else "0.5"
            ax.plot(r["ks"], r[key], style, ms=3, label=label, color=color)
        ax.set_xscale("log", base=2)
        ax.set(xlabel="k (answers)", title=f"held-out {name}")
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return path


def main(argv=None):
    parser = settings_parser(
        "best@k / pass@k of checkpoints on held-out problems, and with --search the evolutionary "
        "search; --set changes the evaluation settings listed below",
        EVALUATION,
        config_file=False,
    )
    parser.add_argument("--checkpoints", nargs="+", required=True)
    parser.add_argument("--n", type=int, help="pool size in answers (default: pool_n)")
    parser.add_argument("--problems", type=int, help="problems (default: pool_problems)")
    parser.add_argument("--seed", type=int, default=0)
    # train: to design a task or a setting without looking at the problems reported
    parser.add_argument("--split", choices=["heldout", "train"], default="heldout")
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument("--zero-repeats", action="store_true", help="score as training does")
    parser.add_argument("--search", action="store_true", help="also run_searches on evo_problems")
    parser.add_argument("--children-per-call", type=int, help="1, or the policy's m (--search)")
    args = parser.parse_args(argv)
    try:
        settings = resolve_evaluation(args.set)
        args.n = args.n or settings["pool_n"]  # the options win over --set
        args.problems = args.problems or settings["pool_problems"]
        args.children_per_call = args.children_per_call or settings["evo_children_per_call"]
        rows, searches = evaluate_all(args, settings)
    except (ValueError, FileNotFoundError, RuntimeError) as e:  # a bad setting or checkpoint
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    print_pools(rows, args.problems, args.seed, args.split)
    print_searches(searches)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {"pools": dict(rows), "searches": searches} if searches else dict(rows), f, indent=1
            )


def evaluate_all(args, settings):
    """Every checkpoint's pools and, with --search, its searches -> (rows, searches by path)."""
    rows = []
    searches = {}
    for path in args.checkpoints:
        model, tok, cfg, m = model_from_checkpoint(path)
        task = make_task(cfg["task"], **cfg["task_options"])
        problems = task.problems(args.split, args.problems, random.Random(args.seed))
        as_written = not args.zero_repeats
        result, _, _ = evaluate_checkpoint(path, problems, args.n, args.seed, as_written=as_written)
        rows.append((path, result))
        if args.search:
            count = settings["evo_problems"]
            least = settings["evo_min_plausible"]
            hard = search_problems(task, args.split, count, least, args.seed)
            searches[path] = run_searches(
                model, tok, task, hard, m, cfg, settings, args.seed, args.children_per_call
            )
    return rows, searches


def print_searches(searches):
    """A row per checkpoint: its searches solved against the same-budget control's."""
    if not searches:
        return
    print(
        f"\n{'checkpoint':40s} search solved  sampling solved  invalid children  better "
        "children  seconds"
    )
    for path, s in searches.items():
        n = max(1, s["mutations"]["children"])
        print(
            f"{path[-40:]:40s} {s['solved']:6d}/{s['searches']:<6d} "
            f"{s['sampling_solved']:8d}/{s['searches']:<6d} "
            f"{s['mutations']['invalid'] / n:16.2f} {s['mutations']['improved'] / n:16.3f} "
            f"{s['seconds']:6.0f} + {s['sampling_seconds']:.0f}"
        )


if __name__ == "__main__":
    main()
