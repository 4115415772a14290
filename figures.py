"""
What a finished run shows, printed and drawn: `report_run`, what `python train.py` shows at its
end (the run's held-out best@k and w-best@k beside its warm start's, in <run_dir>/run.png with its
training curves and, for the maze, where the routes go: routes.png); `print_pools`, the tables of
pool metrics that train.py and search.py print.

Deliberately left out: interactive plots, dashboards, figures across runs (lab/plots.py draws
those).
"""

import io
import json
import os
import random

import maze
from config import make_task
from evaluate import LOOK_SEED, evaluate_policy, load_policy, policy_from_saved
from runfiles import load_checkpoint, save_figure, write_file


def warm_label(m):
    """The warm start's row: a set method's is asked for its m answers a rollout, as it starts."""
    return "its warm start" + (f", {m} answers a rollout" if m > 1 else "")


def report_run(run_dir, seed=LOOK_SEED):
    """What `python train.py` shows at its end: held-out best@k and w-best@k against the warm
    start's, printed and in <run_dir>/run.png (the same problems in every run, so figures
    compare)."""
    final = os.path.join(run_dir, "final.pt")
    saved = load_checkpoint(final)
    cfg = saved["config"]
    m = saved["m"]
    task = make_task(cfg["task"], **cfg["task_options"])
    problems = task.problems("heldout", cfg["eval_problems"], random.Random(seed))
    n = max(m, cfg["pool_n"] // m * m)
    warm, _ = load_policy(saved["warm_start"], m)
    policies = {"this run": policy_from_saved(saved), warm_label(m): warm}
    weightings = cfg["heldout_weightings"]
    pools = {
        name: evaluate_policy(
            policy, task, problems, n=n, seed=seed, num_heldout_weights=weightings
        )
        for name, policy in policies.items()
    }
    rows = [(name, result) for name, (result, _, _) in pools.items()]
    print()
    print_pools(rows, len(problems), seed)
    if cfg["task"] == "maze":  # the routes themselves: where a policy's answers go on the grid
        drawn = {name: answers for name, (_, _, answers) in pools.items()}
        picture = io.BytesIO()  # a PNG, written whole or not at all
        maze.conflict_figure(picture, drawn, problems)
        write_file(os.path.join(run_dir, "routes.png"), picture.getvalue())
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        logged = [json.loads(line) for line in f]
    return run_figure(os.path.join(run_dir, "run.png"), cfg, logged, rows=rows)


def run_figure(path, cfg, logged, rows):
    """One run's picture: its training curves, then best@k and w-best@k against its warm start's ->
    path."""
    steps = [r for r in logged if r.get("kind") == "train"]
    evals = [r for r in logged if r.get("kind") == "eval"]
    # matplotlib only when drawing (a second to import): train.py and the lab's workers import this
    # file; no pyplot: files only, on any machine, no display
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

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
    save_figure(fig, path, dpi=100)
    return path


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
