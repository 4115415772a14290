"""
The maze's KL sweep, read from the result files of one `lab/experiment.py` run per KL coefficient:
"is a KL anchor not enough?" Tables with paired intervals (docs/RESULTS.md takes them) and one
figure of each measure against the coefficient, GRPO beside VPO.

    python lab/experiment.py --tasks maze --seeds 0 1 2 \
        --algos grpo vpo multi_rlvr max_at_k grpo_x3 --set out_dir=out/maze_kl0.001
    for kl in 0 0.05 0.01; do
      python lab/experiment.py --tasks maze --seeds 0 1 2 --algos grpo vpo \
          --set kl_coef=$kl out_dir=out/maze_kl$kl
    done
    python lab/maze_sweep.py out/maze_kl* --out docs/figures/maze_kl

Writes OUT/kl.png, OUT/routes.png (where each method's routes go at the adopted coefficient, seed
0's pools sampled again from its checkpoints: run it where the experiments ran, or name that
folder with --root) and OUT/tables.md. Deliberately left out: anything the experiment's own
report already shows (best@k curves per method, training curves); choosing a coefficient
(configs/maze.yaml says which and why).
"""

import argparse
import glob
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np

import evaluate
import maze
from config import make_task
from lab.report import fmt_interval, paired_bootstrap_interval, verdict, warm_start_answers

ADOPTED_KL = 0.001  # configs/maze.yaml's, the paper's
DRAWN = ("warm_start", "grpo", "vpo", "max_at_k", "multi_rlvr")  # routes.png's columns
NAMES = {
    "warm_start": "base",
    "grpo": "GRPO",
    "grpo_x3": "GRPO x3 (compute-matched)",
    "multi_rlvr": "Multi-RLVR",
    "max_at_k": "Max@K",
    "vpo": "VPO",
    "optimum": "optimum",
}
# the paper's maze, Qwen3-4B (best@30 under the mean / reward-space diversity)
PAPER = {"grpo": "0.432 / 0.003", "multi_rlvr": "0.436 / -", "max_at_k": "0.577 / -"}
PAPER["vpo"] = "0.593 / 1.01"


def name_of(method):
    """A row's name in the tables: NAMES's, "base, m answers" for the warm start asked for m > 1."""
    m = warm_start_answers(method)
    return NAMES[method] if m in (None, 1) else f"base, {m} answers"


def table_order(present):
    """The rows of a table among `present`, in NAMES's order with the base asked for m answers (by
    m) right after the base."""
    sets = sorted(
        (x for x in present if warm_start_answers(x) not in (None, 1)), key=warm_start_answers
    )
    order = ["warm_start", *sets] + [x for x in NAMES if x != "warm_start"]
    return [x for x in order if x in present]


def load(dirs):
    """{(kl, method, seed): the result's pools} from every results/ folder under `dirs`."""
    rows = {}
    for d in dirs:
        for path in glob.glob(os.path.join(d, "results", "maze-*.json")):
            with open(path) as f:
                record = json.load(f)
            pools = record.get("pools")
            if pools is None:
                continue
            kl = pools["key"]["run"]["kl_coef"]
            rows[kl, record["method"], record["seed"]] = pools
    return rows


def measures(pools, temperature="1.0"):
    """One result's pools -> its measures (0.7: the pools sampled at the authors' temperature)."""
    p = pools if temperature == "1.0" else pools.get("at_temperature_0.7")
    if p is None:
        return None
    out = {
        "best@1": p["best_at_k"][0],
        "best@30": p["best_at_k"][-1],
        "w-best@30": p.get("heldout_weight_best_at_k", [np.nan])[-1],
        "diversity": p.get("diversity", np.nan),
    }
    if "route_families" in p:
        out["arrive"] = p["route_families"]["exit"]
        out["wall moves"] = p["route_families"]["wall_moves"]
        for k in ("gold", "diamond", "bonus", "direct"):
            out[f"via {k}"] = p["route_families"][k]
        for k in ("gold", "diamond", "both"):
            out[f"covers {k}"] = p["corner_coverage"][k]
    return out


def per_problem(pools, key, temperature="1.0"):
    """A per-maze list: best, w_best, diversity (per_problem) or both_corners, arrive (per_maze)."""
    p = pools if temperature == "1.0" else pools["at_temperature_0.7"]
    return p["per_problem"][key] if key in p["per_problem"] else p["per_maze"][key]


def interval(rows, kl, a, b, key, temperature="1.0"):
    """(mean a - b, low, high) over the seeds both have, paired by maze; None if one is absent."""
    seeds = sorted(s for (k, m, s) in rows if k == kl and m == a and (kl, b, s) in rows)
    if not seeds:
        return None
    values = [[per_problem(rows[kl, m, s], key, temperature) for s in seeds] for m in (a, b)]
    return paired_bootstrap_interval(np.array(values[0]), np.array(values[1]))


def fmt(interval_or_none):
    """An interval and its verdict, by lab/report.py's one rule."""
    if interval_or_none is None:
        return "not measured"
    return f"{fmt_interval(interval_or_none)} ({verdict(interval_or_none)})"


def mean_over_seeds(rows, kl, method, temperature="1.0"):
    """{measure: (mean, half the spread)} over the seeds of (kl, method); None if none ran."""
    found = [
        measures(p, temperature) for (k, m, _), p in sorted(rows.items()) if (k, m) == (kl, method)
    ]
    found = [x for x in found if x]
    if not found:
        return None, 0
    out = {}
    for key in found[0]:
        values = np.array([x.get(key, np.nan) for x in found], dtype=float)
        out[key] = (float(values.mean()), float(values.max() - values.min()) / 2)
    return out, len(found)


def method_table(rows, kl, temperature):
    """The maze table at one coefficient and temperature: a row per method."""
    columns = ["best@1", "best@30", "w-best@30", "arrive", "wall moves", "covers gold"]
    columns += ["covers diamond", "covers both", "via gold", "via diamond", "via bonus"]
    columns += ["via direct", "diversity"]
    lines = [
        f"| method (KL {kl}, pools at T={temperature}) | seeds | "
        + " | ".join(columns)
        + " | paper |",
        "|---" * (len(columns) + 3) + "|",
    ]
    for method in table_order({x for k, x, _ in rows if k == kl}):
        found, n = mean_over_seeds(rows, kl, method, temperature)
        if not found:
            continue
        cells = []
        for c in columns:
            mean, half = found.get(c, (np.nan, 0))
            spread = f" ±{half:.3f}" if c == "best@30" and n > 1 else ""
            cells.append("" if np.isnan(mean) else f"{mean:.3f}{spread}")
        paper = PAPER.get(method, "") if temperature == "0.7" else ""
        lines.append(f"| {name_of(method)} | {n} | " + " | ".join(cells) + f" | {paper} |")
    return lines


def verdicts(rows, kl, temperature):
    """VPO against each other method, paired by maze and seed, on the measures kept per maze."""
    lines = [
        f"Paired 95% intervals, KL {kl}, pools at T={temperature} (mazes and seeds resampled):"
    ]
    for other in ("grpo", "grpo_x3", "multi_rlvr", "max_at_k", "warm_start"):
        if not any(k == kl and m == other for k, m, _ in rows):
            continue
        parts = [
            f"{label} {fmt(interval(rows, kl, 'vpo', other, key, temperature))}"
            for label, key in (("best@30", "best"), ("w-best@30", "w_best"))
            + (("both corners", "both_corners"), ("diversity", "diversity"))
        ]
        lines.append(f"- VPO - {NAMES[other]}: " + "; ".join(parts))
    return lines


def sweep_table(rows, temperature):
    """GRPO and VPO at every coefficient: the sweep's numbers, and VPO - GRPO paired."""
    kls = sorted({k for k, m, _ in rows if m in ("grpo", "vpo")})
    columns = ["best@1", "best@30", "w-best@30", "covers both", "diversity", "arrive"]
    columns += ["via gold", "via diamond"]
    lines = [
        "| KL | method | seeds | "
        + " | ".join(columns)
        + " | VPO - GRPO best@30 | VPO - GRPO w-best@30 | VPO - GRPO both corners |",
        "|---" * (len(columns) + 6) + "|",
    ]
    for kl in kls:
        for method in ("grpo", "vpo"):
            found, n = mean_over_seeds(rows, kl, method, temperature)
            if not found:
                continue
            cells = [f"{found[c][0]:.3f}" for c in columns]
            gaps = ["", "", ""]
            if method == "vpo":
                gaps = [
                    fmt(interval(rows, kl, "vpo", "grpo", key, temperature))
                    for key in ("best", "w_best", "both_corners")
                ]
            lines.append(f"| {kl} | {NAMES[method]} | {n} | " + " | ".join(cells + gaps) + " |")
    return lines


def kl_figure(path, rows):
    """Each measure against the KL coefficient, GRPO beside VPO: the mean and every seed."""
    from matplotlib.figure import Figure

    kls = sorted({k for k, m, _ in rows if m in ("grpo", "vpo")})
    panels = ["best@1", "best@30", "w-best@30", "covers both", "diversity", "arrive"]
    fig = Figure(figsize=(11, 6.2), layout="constrained")
    axes = fig.subplots(2, 3).ravel()
    colors = {"grpo": "tab:red", "vpo": "tab:blue"}
    x = np.arange(len(kls))
    for ax, panel in zip(axes, panels):
        for method, color in colors.items():
            means = []
            for i, kl in enumerate(kls):
                seeds = [
                    measures(p)[panel] for (k, m, _), p in rows.items() if (k, m) == (kl, method)
                ]
                means.append(np.mean(seeds) if seeds else np.nan)
                ax.plot([i] * len(seeds), seeds, ".", color=color, alpha=0.5)
            ax.plot(x, means, "-o", color=color, label=NAMES[method])
        base = [measures(p)[panel] for (k, m, _), p in rows.items() if m == "warm_start"]
        if base:
            ax.axhline(np.mean(base), color="grey", ls="--", label="base (no RL)")
        optimum = [p["best_at_k"][-1] for (k, m, _), p in rows.items() if m == "optimum"]
        if panel in ("best@1", "best@30") and optimum:
            ax.axhline(np.mean(optimum), color="black", ls=":", label="optimum")
        ax.set(title=panel, xticks=x, xticklabels=[str(k) for k in kls], xlabel="KL coefficient")
    axes[0].legend(fontsize=8)
    fig.suptitle(
        "The maze: what the KL anchor to the base changes (held-out mazes, pools of 30, 3 seeds)"
    )
    fig.savefig(path, dpi=90)
    return path


def routes_figure(path, rows, kl, root=".", seed=0, methods=DRAWN):
    """maze.conflict_figure of seed `seed`'s pools at coefficient `kl`, sampled again from the
    checkpoints the result files name (relative to `root`, where the experiment ran): the same
    draws as the results' pools, every maze's routes (the result files keep only three pools')."""
    shown = [m for m in methods if (kl, m, seed) in rows]
    pools = {}
    for method in shown:
        record = rows[kl, method, seed]
        problems = [int(p) for p in record["problems"]]
        checkpoint = os.path.join(root, record["checkpoint"])
        n = record["ks"][-1]
        policy, cfg = evaluate.load_policy(checkpoint, record["m"])
        task = make_task(cfg["task"], **cfg["task_options"])
        _, _, answers = evaluate.evaluate_policy(policy, task, problems, n, seed)
        pools[NAMES[method]] = answers
    return maze.conflict_figure(path, pools, problems)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dirs", nargs="+", help="lab/experiment.py out_dirs, one per coefficient")
    parser.add_argument("--out", default="out/maze_kl")
    parser.add_argument("--root", default=".", help="where the experiments ran (checkpoint paths)")
    parser.add_argument("--tables-only", action="store_true", help="no figures (seconds)")
    args = parser.parse_args(argv)
    rows = load(args.dirs)
    if not rows:
        raise SystemExit(f"no maze result files under {', '.join(args.dirs)}")
    os.makedirs(args.out, exist_ok=True)
    lines = []
    for temperature in ("1.0", "0.7"):
        lines += [f"## The sweep, pools at T={temperature}", ""] + sweep_table(rows, temperature)
        lines += ["", f"## Every method at KL {ADOPTED_KL}, pools at T={temperature}", ""]
        lines += method_table(rows, ADOPTED_KL, temperature) + [""]
        lines += verdicts(rows, ADOPTED_KL, temperature) + [""]
    with open(os.path.join(args.out, "tables.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    if args.tables_only:
        return
    kl_figure(os.path.join(args.out, "kl.png"), rows)
    if any(k == ADOPTED_KL for k, _, _ in rows):
        routes_figure(os.path.join(args.out, "routes.png"), rows, ADOPTED_KL, args.root)
    print(f"wrote {args.out}/tables.md, kl.png, routes.png")


if __name__ == "__main__":
    main()
