"""The report an experiment writes into its folder, from report.merge's results: results.json,
summary.md (a table per task, the paper's claims with this run's verdicts, the leaderboards, the
search's mutations and drivers, the training dynamics) and the figures.
Deliberately left out: deciding anything (report.py's intervals and verdicts), drawing (plots.py).
"""

import os

import numpy as np

import runfiles
from lab import plots
from lab.report import (
    UNTRAINED,
    claims,
    fmt_interval,
    named_searches,
    paired,
    paired_search,
    search_drivers,
    search_points,
    shown_name,
    spearman,
    untrained_row,
    verdict,
    voting_policies,
)

SMOKE = (
    "SMOKE TEST (--quick): tiny models, pools and searches; "
    "the numbers and verdicts below mean nothing."
)


def summary_markdown(results):
    """summary.md, its sections in the order of the module docstring; against a board (--against)
    only the new methods' comparison and what it means."""
    lines = [f"**{SMOKE}**", ""] if results.get("quick") else []
    lines += provenance(results)
    if results.get("new_methods"):
        return "\n".join(lines + against_table(results) + against_meaning(results)) + "\n"
    for task, per_method in results["tasks"].items():
        lines += task_table(task, per_method, multi=len(results["seeds"]) > 1)
    lines += maze_table(results, multi=len(results["seeds"]) > 1)
    lines.append(
        "best@k: fixed scalarization (mean of components); w-best@k: averaged over held-out "
        "random weightings; ± is half the spread (max - min) over seeds; diversity: mean pairwise "
        "L1 between the pool's reward vectors, every answer scored as written; distinct: distinct "
        "answers in a pool; wasted: share of a pool's answers that repeat an earlier answer of "
        "their own rollout or are invalid; evo solved: searches that found a program passing "
        "every test within the budget, on problems no checkpoint's pool solved (per seed in "
        "brackets)."
    )
    lines += ["", "## The paper's claims, this run's verdicts", ""] + claims(results) + [""]
    lines += ["## Leaderboard", ""] + leaderboard_table(results) + voting_table(results)
    return (
        "\n".join(
            lines + mutation_table(results) + drivers_table(results) + training_table(results)
        )
        + "\n"
    )


def provenance(results):
    """The opening line: seeds, the code (a commit and the files edited since), time, machine."""
    return [
        f"Seeds {results['seeds']}, code: commit(s) {', '.join(results['commits'])}"
        + (f", wall time {results['wall_s']:.0f} s" if results.get("wall_s") else "")
        + f". Machine(s): {' | '.join(results.get('machines', []))} (a seed reproduces bit for bit "
        "only on the machine that ran it). Held-out problems; k counts answers.",
        "",
    ]


def task_table(task, per_method, multi):
    """One task's table: a row per method with pools, best@k / w-best@k (pass@k and the search on
    code) at k = 1, the middle k and n, maj@k there too where the result files carry it (on code
    also the share of voted answers that pass), then diversity, distinct answers and wasted
    answers."""
    pooled = {m: e for m, e in per_method.items() if "ks" in e}
    if not pooled:
        return []
    ks = next(iter(pooled.values()))["ks"]
    show = [i for i, k in enumerate(ks) if k in (1, ks[len(ks) // 2], ks[-1])]
    head = ["method"] + [f"best@{ks[i]}" for i in show] + [f"w-best@{ks[i]}" for i in show]
    voted = any("maj_at_k" in e for e in pooled.values())
    if task == "code":
        head += [f"pass@{ks[i]}" for i in show] + ["evo solved"]
    if voted:
        head += [f"maj@{ks[i]}" for i in show]
        head += [f"maj-pass@{ks[i]}" for i in show] if task == "code" else []
    head += ["diversity", "distinct", "wasted"]
    lines = [f"### {task}", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for a, e in pooled.items():

        def fmt(metric, i, e=e):
            if metric not in e:
                return "-"
            spread = f" ±{e[metric + '_spread'][i] / 2:.3f}" if multi else ""
            return f"{e[metric][i]:.3f}{spread}"

        row = [shown_name(per_method, a)] + [
            fmt(metric, i) for metric in ("best_at_k", "heldout_weight_best_at_k") for i in show
        ]
        if task == "code":
            row += [fmt("pass_at_k", i) for i in show]
            ev = e.get("evolution")
            per_seed = f" ({' '.join(map(str, ev['solved_per_seed']))})" if ev and multi else ""
            row.append(f"{ev['solved']}/{ev['searches']}{per_seed}" if ev else "-")
        if voted:
            row += [fmt("maj_at_k", i) for i in show]
            row += [fmt("maj_pass_at_k", i) for i in show] if task == "code" else []
        row += [
            f"{e[k]:.{d}f}" if np.isfinite(e[k]) else "-"
            for k, d in (("diversity", 3), ("distinct_answers", 1), ("wasted", 2))
        ]
        lines.append("| " + " | ".join(row) + " |")
    return lines + [""]


# What each task's leaderboards rank by, at the largest k: (per-problem key, curve, name). Code has
# three: best@k, pass@k (low even for the optimum) and the search (hard problems solved).
# maj@k (the answer whose outcome most of the k share, scored as written) has a board only where the
# result files carry it: on code also maj-pass, whether the voted program passes every hidden test.
LEADERBOARDS = {
    "persona": [("w_best", "heldout_weight_best_at_k", "w-best"), ("maj", "maj_at_k", "maj")],
    "code": [
        ("best", "best_at_k", "best"),
        ("pass", "pass_at_k", "pass"),
        ("maj", "maj_at_k", "maj"),
        ("maj_pass", "maj_pass_at_k", "maj-pass"),
        ("search", None, "search"),
    ],
    "persona_collinear": [("w_best", "heldout_weight_best_at_k", "w-best")],
    "maze": [
        ("best", "best_at_k", "best"),
        ("w_best", "heldout_weight_best_at_k", "w-best"),
        ("maj", "maj_at_k", "maj"),
    ],
}

# The paper's maze (Qwen3-4B): best@30 under the mean, and reward-space diversity
PAPER_MAZE = {
    "grpo": (0.432, 0.003),
    "multi_rlvr": (0.436, None),
    "max_at_k": (0.577, None),
    "vpo": (0.593, 1.01),
}


def maze_table(results, multi):
    """The maze beside the paper: best@n under the mean, w-best@n, the share of routes that
    arrive, each objective's mean, and the share of routes through each corner's zone and the
    bonus (the conflict as numbers)."""
    per_method = {m: e for m, e in results["tasks"].get("maze", {}).items() if "ks" in e}
    if not per_method:
        return []
    n = next(iter(per_method.values()))["ks"][-1]
    head = [
        "method", f"best@{n}", f"w-best@{n}", "arrive", "gold", "diamond", "avoid lava",
        "via gold", "via diamond", "via bonus", "both corners", "diversity",
        f"at T=0.7: best@{n} / w-best@{n} / both corners", "paper best@30 / diversity",
    ]  # fmt: skip
    lines = ["### The maze beside the paper", "| " + " | ".join(head) + " |"]
    lines.append("|" + "---|" * len(head))
    for a, e in per_method.items():

        def spread(key, e=e):
            return f" ±{e[key + '_spread'][-1] / 2:.3f}" if multi else ""

        objectives = e.get("objective_means", [None] * 4)
        families = e.get("route_families", {})
        paper = PAPER_MAZE.get(a)
        row = [
            shown_name(per_method, a),
            f"{e['best_at_k'][-1]:.3f}{spread('best_at_k')}",
            f"{e['heldout_weight_best_at_k'][-1]:.3f}{spread('heldout_weight_best_at_k')}"
            if "heldout_weight_best_at_k" in e
            else "-",
            f"{e['nonzero_answers']:.2f}" if a != "optimum" else "1",
            *[f"{x:.3f}" if x is not None else "-" for x in objectives[1:]],
            *[f"{families[k]:.2f}" if k in families else "-" for k in ("gold", "diamond", "bonus")],
            f"{e['corner_coverage']['both']:.2f}" if "corner_coverage" in e else "-",
            f"{e['diversity']:.3f}" if np.isfinite(e.get("diversity", np.nan)) else "-",
            cooler(e.get("at_temperature_0.7")),
            f"{paper[0]:.3f} / {paper[1] if paper[1] is not None else '-'}" if paper else "",
        ]
        lines.append("| " + " | ".join(row) + " |")
    return lines + [
        "",
        "arrive: share of the pools' routes that reach the exit (all else scores 0); gold, "
        "diamond, avoid lava: each objective's mean over every answer; via: share of routes "
        "passing a corner's zone (or the bonus cell); both corners: share of mazes whose pool "
        "holds an arriving route through each corner. The paper's numbers are Qwen3-4B's on its "
        "own 9x9 mazes, the same design; here a 4-layer GPT from its base (bases/maze.pt).",
        "",
    ]


def cooler(cool):
    """The maze's pools sampled at 0.7 (the VPO authors' evaluation), in one cell."""
    if not cool:
        return "-"
    both = cool["corner_coverage"]["both"]
    best, w_best = cool["best_at_k"][-1], cool["heldout_weight_best_at_k"][-1]
    return f"{best:.3f} / {w_best:.3f} / {both:.2f}"


def leaderboards(results, others=("vpo", "grpo")):
    """[(title, [(method, [value per seed], its interval against each of `others`)])], one board per
    task and metric of LEADERBOARDS, unranked; an interval is None against itself or without
    per-problem values."""
    boards = []
    for task, per_method in results["tasks"].items():
        for key, curve, name in LEADERBOARDS.get(task, [("best", "best_at_k", "best")]):
            if key == "search":
                searched = {
                    m: s["per_problem"]
                    for m, s in named_searches(per_method).items()
                    if "per_problem" in s
                }
                rows = [
                    (
                        shown_name(per_method, m),
                        [float(np.mean(solved)) for _, solved in pp.values()],
                        *(
                            paired_search(pp, searched[o]) if o in searched and o != m else None
                            for o in others
                        ),
                    )
                    for m, pp in searched.items()
                ]
                if rows:
                    n = sorted({len(p) for pp in searched.values() for p, _ in pp.values()})
                    title = f"{task}: search, share of {'/'.join(map(str, n))} hard problems solved"
                    boards.append((title, rows))
                continue
            entries = [(m, e) for m, e in per_method.items() if curve + "_per_seed" in e]
            if not entries:
                continue
            k = entries[0][1]["ks"][-1]
            rows = [
                (
                    shown_name(per_method, m),
                    [v[-1] for v in e[curve + "_per_seed"]],
                    *(paired(results, task, m, o, key) if o != m else None for o in others),
                )
                for m, e in entries
            ]
            boards.append((f"{task}: {name}@{k}", rows))
    return boards


def leaderboard_rows(results):
    return {title: [(m, values) for m, values, *_ in rows] for title, rows in leaderboards(results)}


def leaderboard_table(results):
    """Every board's methods ranked, with their differences from VPO and GRPO and 95% intervals (a
    gap whose interval holds 0 is not a gap); methods that did not train last, unranked."""
    lines = []
    head = ["", "| method | mean (per seed) | - VPO [95%] | - GRPO [95%] |", "|---|---|---|---|"]
    for title, rows in leaderboards(results):
        lines += [f"#### {title}, ranked", *head]
        for method, values, *intervals in sorted(
            rows, key=lambda r: (r[0].endswith(UNTRAINED), -np.mean(r[1]))
        ):
            cells = " | ".join(fmt_interval(iv) if iv else "" for iv in intervals)
            per_seed = " ".join(f"{v:.3f}" for v in values)
            lines.append(f"| {method} | {np.mean(values):.3f} ({per_seed}) | {cells} |")
        lines.append("")
    return lines


def rank_correlation(x, y, num_resamples=10_000, level=0.95, seed=0):
    """Paired values, one pair per policy -> Spearman's rank correlation (report.spearman)
    and a percentile bootstrap interval that draws policies with replacement: (rho, low, high).
    Draws whose ranks are all tied have no correlation and are left out. None with fewer than 4
    policies or with every value of x or of y tied (e.g. a smoke test's untrained pools)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(x) < 4 or len(set(x)) == 1 or len(set(y)) == 1:
        return None
    rng = np.random.default_rng(seed)
    drawn = [rng.integers(0, len(x), len(x)) for _ in range(num_resamples)]
    rhos = [spearman(x[i], y[i]) for i in drawn]  # nan where all tied
    low, high = np.nanquantile(rhos, [(1 - level) / 2, (1 + level) / 2])
    return spearman(x, y), float(low), float(high)


def voting_table(results):
    """Whether voting favours the collapsed policies: over the policies of a task whose files
    carry maj@k (every one, then the trained methods alone: the untrained starts are both diverse
    and weak), the rank correlation of a pool's diversity with its maj@n, and with its vote's gain
    over one answer (maj@n - maj@1). A method that did not train is left out of both: its pools
    hold no valid answer, so it has no vote to rank."""
    lines = []
    for task, per_method in results["tasks"].items():
        voted = voting_policies(per_method)
        trained = {m: e for m, e in voted.items() if not untrained_row(m)}
        for label, group in (("every policy", voted), ("trained methods", trained)):
            if len(group) < 4 or (group is trained and len(trained) == len(voted)):
                continue  # too few to rank, or the same policies again
            if not lines:
                lines = [
                    "#### Does a diverse pool vote worse? Rank correlation over the policies "
                    "(bootstrap over policies, 95%)",
                    "",
                    "| task | policies | diversity with maj@n | diversity with maj@n - maj@1 |",
                    "|---|---|---|---|",
                ]
            diversity = [e["diversity"] for e in group.values()]
            top = [e["maj_at_k"][-1] for e in group.values()]
            gain = [e["maj_at_k"][-1] - e["maj_at_k"][0] for e in group.values()]
            n = next(iter(group.values()))["ks"][-1]
            cells = [rank_correlation(diversity, v) for v in (top, gain)]
            cells = [fmt_interval(c) if c else "- (all tied)" for c in cells]
            lines.append(f"| {task} (n = {n}) | {len(group)}, {label} | {cells[0]} | {cells[1]} |")
    return lines + [""] if lines else []


def mutation_table(results):
    """The policy as a mutation operator: shares of its children invalid and better than their best
    parent."""
    rows = [
        (a, e["evolution"]["mutations"])
        for a, e in results["tasks"].get("code", {}).items()
        if "mutations" in e.get("evolution", {})
    ]
    if not rows:
        return []
    lines = [
        "Evolutionary search, the policy as mutation operator (children written from parents):",
        "",
        "| method | children | invalid | better than their best parent |",
        "|---|---|---|---|",
    ]
    for a, mu in rows:
        n = max(1, mu["children"])
        shares = f"{mu['invalid'] / n:.2f} | {mu['improved'] / n:.3f}"
        lines.append(f"| {a} | {mu['children']} | {shares} |")
    return lines + [""]


def training_table(results):
    lines = [
        "Training, per seed: held-out scalar = mean fixed reward of valid answers on the held-out "
        "problems of train.evaluate_heldout (warm start -> end); entropy, distinct first "
        "answers per group and set score (under 32 fixed weightings in every run; result files of "
        "set methods from before that rule hold it under their own weightings) averaged over the "
        "first and last 10 RL steps. Each run's metrics.jsonl also logs clip_frac, the share of "
        "tokens whose loss the clip changes (as TRL and veRL count it; 0 with one update per "
        "batch), and ratio_outside_clip, the share whose ratio leaves the clip range whatever the "
        "advantage's sign.",
        "",
        "| task | method | held-out scalar | token entropy | distinct first answers | set score |",
        "|---|---|---|---|---|---|",
    ]

    def change(pairs):  # [(first, last) of each seed] -> "first / first -> last / last"
        return " -> ".join(" / ".join(f"{v:.2f}" for v in ends) for ends in zip(*pairs))

    for t, per_method in results["tasks"].items():
        for a, e in per_method.items():
            runs = [r for r in e.get("training", []) if r.get("first10")]
            if not runs:
                continue
            cells = [change([r["heldout_scalar"] for r in runs])]
            for k in ("entropy", "distinct_first_answers", "set_score"):
                cells.append(change([(r["first10"][k], r["last10"][k]) for r in runs]))
            lines.append(f"| {t} | {a} | " + " | ".join(cells) + " |")
    return lines


def figure_samples(records):
    """{(task, method, seed): a few problems' pools (P, n, D)} of the records that kept them."""
    return {
        (r["task"], r["method"], r["seed"]): np.array(r["pools"]["reward_vectors"])
        for r in records
        if "reward_vectors" in r.get("pools", {})
    }


def write_report(out_dir, results, samples=None):
    with runfiles.writing(out_dir):
        os.makedirs(out_dir, exist_ok=True)
    paths = [os.path.join(out_dir, "results.json"), os.path.join(out_dir, "summary.md")]
    runfiles.write_json(paths[0], results, indent=1)
    runfiles.write_file(paths[1], summary_markdown(results))
    paths += plots.make_all(out_dir, results, samples or {})
    rows = leaderboard_rows(results)
    if rows:
        paths.append(os.path.join(out_dir, "leaderboard.png"))
        plots.leaderboard_figure(rows, paths[-1], smoke=results.get("quick", False))
    points = search_points(results)
    if search_drivers(results):
        paths.append(os.path.join(out_dir, "search_drivers.png"))
        plots.search_drivers_figure(points, paths[-1], smoke=results.get("quick", False))
    return paths


def drivers_table(results):
    drivers = search_drivers(results)
    if not drivers:
        return []
    points = search_points(results)
    lines = [
        "What drives search (code): Spearman's rank correlation of a policy's search solved "
        f"share with its properties, over {len({m for m, _, _ in points})} trained methods x "
        f"their seeds ({len(points)} points; the warm start, methods that did not train and the "
        "rows trained on parent prompts left out), 95% bootstrap over methods and their seeds; "
        "figure: search_drivers.png.",
        "",
        "| property | rank correlation with search solved [95%] |",
        "|---|---|",
    ]
    lines += [f"| {what} | {fmt_interval(iv)} |" for _, what, iv in drivers]
    return lines + [""]


AGAINST = ("vpo", "grpo", "warm_start")  # the board's rows each new method is compared with


def against_rows(results):
    """[(board title, new method, rank among the trained, mean, intervals against AGAINST)]."""
    new, out = results.get("new_methods", []), []
    for title, rows in leaderboards(results, others=AGAINST):
        ranked = [
            r[0] for r in sorted(rows, key=lambda r: -np.mean(r[1])) if not r[0].endswith(UNTRAINED)
        ]
        for method, values, *intervals in rows:
            if any(method == n or method.startswith(n + " (") for n in new):
                rank = (
                    f"{ranked.index(method) + 1} of {len(ranked)}"
                    if method in ranked
                    else "unranked"
                )
                out.append((title, method, rank, float(np.mean(values)), intervals))
    return out


def against_table(results, header=False):
    """Each new method (--against) on every board it joined: rank among trained methods, mean,
    difference from the board's VPO, GRPO and warm start (paired 95% interval, verdict); header: the
    smoke warning."""
    new = results.get("new_methods", [])
    lines = [f"**{SMOKE}**", ""] if results.get("quick") and header else []
    lines += [
        f"## {', '.join(new)} against the board in {results.get('against')}",
        "",
        f"Tasks {', '.join(results['tasks'])}, seeds {results['seeds']}; yes: the interval is "
        "above 0, no: below 0, within noise: it holds 0.",
        "",
        "| board | method | rank | mean | - VPO [95%] | - GRPO [95%] | - warm start [95%] |",
        "|---|---|---|---|---|---|---|",
    ]
    for title, method, rank, mean, intervals in against_rows(results):
        cells = [f"{fmt_interval(iv)} {verdict(iv)}" if iv else "" for iv in intervals]
        lines.append(f"| {title} | {method} | {rank} | {mean:.3f} | " + " | ".join(cells) + " |")
    return lines + [""]


# how each verdict reads in words, against one of the board's rows
IN_WORDS = {"yes": "better than", "no": "worse than", "within noise": "not distinguishable from"}


def listed(names):
    return ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else names[0]


def against_meaning(results):
    """The table in words: per board and new method, which of the board's rows it beats, trails or
    cannot be told from; then what the words rest on."""
    names = {"vpo": "VPO", "grpo": "GRPO", "warm_start": "warm start"}
    lines = ["What it means:", ""]
    for title, method, _, _, intervals in against_rows(results):
        by_verdict = {}
        for other, iv in zip(AGAINST, intervals):
            if iv:
                by_verdict.setdefault(IN_WORDS[verdict(iv)], []).append(names[other])
        parts = [f"{words} the board's {listed(o)}" for words, o in by_verdict.items()]
        lines.append(f"- {title}, {method}: " + ("; ".join(parts) or "not measured") + ".")
    return lines + [
        "",
        "Better or worse: the paired 95% interval (the same held-out problems and seeds) lies "
        "wholly above or below 0; not distinguishable: it holds 0, and more seeds or problems "
        "would be needed to tell. Only your methods were trained here; the board's rows are its "
        f"result files, and its own tables and claims are in {results.get('against')}/summary.md.",
        "",
    ]
