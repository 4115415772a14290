"""The headline experiment's pictures (matplotlib, written as PNG files; no display needed).

best_at_k.png       best@k and held-out-weighting best@k against k, per task and algorithm
pass_at_k.png       pass@k against k on the code task
maj_at_k.png        maj@k (majority vote over outcomes) against k, and against each pool's diversity
reward_vectors.png  each row one sampled answer, each column one reward component, for a few
                    held-out problems: a collapsed policy shows the same row again and again
training.png        mean fixed reward, set score E_w[max w.r] and token entropy over RL steps
evolution.png       fraction of hard problems solved against candidates evaluated
leaderboard_figure  every method's value per seed (dots) and mean (bar), ranked, one panel per
                    leaderboard

Against a board (--against) the curves are the new methods' and the board's VPO, GRPO and warm
start only. Deliberately left out: interactive plots, styling beyond what makes the comparison
readable.
"""

import io
import os
import zlib

import matplotlib

matplotlib.use("Agg")  # files only: works on a headless machine
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

import maze  # noqa: E402
import runfiles  # noqa: E402
from lab.report import voting_policies, warm_start_answers  # noqa: E402

# One color per method, the same in every figure (tab20's twenty, then dark extras for new
# methods);
# a method run against a board ("vpo (yours)") is magenta, the optimum black.
COLORS = {
    "vpo": "#1f77b4",
    "vpo_loo": "#aec7e8",
    "grpo": "#d62728",
    "grpo_x3": "#ff9896",
    "multi_rlvr": "#ff7f0e",
    "grpo_mutation": "#ffbb78",
    "max_at_k": "#2ca02c",
    "dapo": "#98df8a",
    "random_weights": "#9467bd",
    "goal_conditioned": "#c5b0d5",
    "dr_grpo": "#8c564b",
    "grpo_2ep": "#c49c94",
    "grpo_clip_higher": "#e377c2",
    "grpo_entropy": "#f7b6d2",
    "warm_start": "#7f7f7f",
    "gdpo": "#bcbd22",
    "maxrl": "#dbdb8d",
    "rloo": "#17becf",
    "vpo_mutation": "#9edae5",
    "optimum": "black",
}
WARM_START_SET = "#c7c7c7"  # the warm start asked for m > 1 answers (warm_start_m3), any m
EXTRA = ["#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd", "#e6550d", "#31a354"]
SMOKE = "SMOKE TEST (--quick): the numbers mean nothing"


def color(method):
    """The method's color: its own, magenta for a row run against a board, else a stable extra
    one."""
    if method.endswith("(yours)") or " (yours)" in method:
        return "magenta"
    base = method.split(" (")[0]
    if warm_start_answers(base) not in (None, 1):
        return WARM_START_SET
    return COLORS.get(base) or EXTRA[zlib.crc32(base.encode()) % len(EXTRA)]


def _mark(fig, smoke):
    if smoke:
        fig.suptitle(SMOKE, color="red", fontsize=10, y=1.0)


def _save(fig, path, **layout):
    fig.tight_layout(**layout)
    fig.set_layout_engine(None)  # laid out: savefig need not draw it twice
    runfiles.save_figure(fig, path, dpi=110)
    plt.close(fig)
    return path


def _curves(ax, per_method, metric):
    """Every method's curve of `metric` against k, its band half the spread over seeds: solid for
    set methods (m > 1) and the warm start, dashed for single-answer ones."""
    for a, e in per_method.items():
        if metric not in e:
            continue
        values, spread = np.array(e[metric]), np.array(e[metric + "_spread"])
        style = "o-" if e["m"] > 1 or a == "warm_start" else "o--"
        width = 2 if a in ("grpo", "vpo") else 1.2
        ax.plot(e["ks"], values, style, color=color(a), label=a, ms=3, lw=width)
        if spread.any():
            low, high = values - spread / 2, values + spread / 2
            ax.fill_between(e["ks"], low, high, color=color(a), alpha=0.15)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("k (answers)")
    ax.grid(alpha=0.3)


def best_at_k(out_dir, results):
    tasks = results["tasks"]
    fig, axes = plt.subplots(len(tasks), 2, figsize=(10, 3.2 * len(tasks)), squeeze=False)
    for row, (t, per_algo) in enumerate(tasks.items()):
        _curves(axes[row][0], per_algo, "best_at_k")
        axes[row][0].set_title(f"{t}: best@k, fixed mean")
        _curves(axes[row][1], per_algo, "heldout_weight_best_at_k")
        axes[row][1].set_title(f"{t}: best@k, held-out weightings w.r")
        many = len(per_algo) >= 8
        axes[row][0].legend(fontsize=6 if many else 7, ncol=2 if many else 1)
    _mark(fig, results.get("quick"))
    return _save(fig, os.path.join(out_dir, "best_at_k.png"))


def pass_at_k(out_dir, results):
    if "code" not in results["tasks"]:
        return None
    fig, ax = plt.subplots(figsize=(5, 3.5))
    _curves(ax, results["tasks"]["code"], "pass_at_k")
    ax.set(ylabel="pass@k", title="code: pass@k (every hidden test passes)")
    ax.legend(fontsize=8)
    _mark(fig, results.get("quick"))
    return _save(fig, os.path.join(out_dir, "pass_at_k.png"))


def drawn_methods(samples, columns=4):
    """The methods reward_vectors draws: warm start, GRPO, VPO first, then the others sampled (a
    new method) by name, so one command draws the same columns in every process."""
    first = ("warm_start", "grpo", "vpo")
    methods = {k[1] for k in samples}
    ordered = [a for a in first if a in methods] + sorted(methods - set(first))
    return ordered[:columns]


def reward_vectors(out_dir, results, samples, problems_shown=3):
    """samples[(task, algo, seed)] = rewards (P, n, D) of a few problems' pools (result files keep
    them: tables.figure_samples)."""
    tasks = [t for t in results["tasks"] if any(k[0] == t for k in samples)]
    algos = drawn_methods(samples)
    if not tasks:
        return None
    fig, axes = plt.subplots(
        len(tasks), len(algos), figsize=(3.2 * len(algos), 3.4 * len(tasks)), squeeze=False
    )
    for row, t in enumerate(tasks):
        for col, a in enumerate(algos):
            ax = axes[row][col]
            # the lowest seed
            key = min((k for k in samples if k[0] == t and k[1] == a), default=None)
            if key is None:
                ax.axis("off")
                continue
            rewards = samples[key][:problems_shown]  # (p, n, D)
            blocks = []
            for r in rewards:
                order = np.lexsort(r.T[::-1])  # sort rows so that identical answers sit together
                blocks.append(r[order])
                blocks.append(np.full((1, r.shape[1]), np.nan))  # a gap between problems
            shown = np.concatenate(blocks[:-1])
            image = ax.imshow(shown, aspect="auto", vmin=0, vmax=1, interpolation="nearest")
            ax.set_title(f"{t}: {a}", fontsize=9)
            ax.set(xlabel="reward component", yticks=[])
        axes[row][0].set_ylabel(f"{problems_shown} problems x n answers")
        if any(ax.images for ax in axes[row]):  # every panel shares the scale 0..1
            fig.colorbar(image, ax=axes[row][-1], label="reward (0 to 1)")
    fig.suptitle(
        "Reward vectors of sampled answers (rows) on held-out problems"
        + (f"\n{SMOKE}" if results.get("quick") else ""),
        fontsize=10,
    )
    return _save(fig, os.path.join(out_dir, "reward_vectors.png"))


def training(out_dir, results):
    tasks = results["tasks"]
    panels = [("reward_scalar", "mean fixed reward"), ("set_score", "set score E_w[max w.r]")]
    panels.append(("entropy", "token entropy"))
    fig, axes = plt.subplots(
        len(tasks), len(panels), figsize=(4 * len(panels), 3 * len(tasks)), squeeze=False
    )
    for row, (t, per_algo) in enumerate(tasks.items()):
        for a, e in per_algo.items():
            # the first seed
            for curve in [r["curve"] for r in e.get("training", []) if r.get("curve")][:1]:
                steps = curve["step"]
                for col, (metric, title) in enumerate(panels):
                    values = np.array(curve[metric])
                    window = max(1, len(values) // 20)
                    smooth = np.convolve(values, np.ones(window) / window, mode="valid")
                    axes[row][col].plot(steps[window - 1 :], smooth, color=color(a), label=a)
                    axes[row][col].set_title(f"{t}: {title}", fontsize=9)
                    axes[row][col].set_xlabel("RL step")
                    axes[row][col].xaxis.set_major_locator(MaxNLocator(integer=True))
        if axes[row][0].get_legend_handles_labels()[0]:
            axes[row][0].legend(fontsize=8)
    _mark(fig, results.get("quick"))
    return _save(fig, os.path.join(out_dir, "training.png"))


def evolution(out_dir, results):
    """Solved against candidates: each policy's search (solid), a set policy writing its m children
    per call (dotted), and the same-budget sampling control (dashed, thin): search earns its keep
    above it."""
    code = results["tasks"].get("code", {})
    if not any("evolution" in e for e in code.values()):
        return None
    fig, ax = plt.subplots(figsize=(6, 4))
    for a, e in code.items():
        for name, style, what in (("evolution", "-", ""), ("evolution_set", ":", ", m per call")):
            ev = e.get(name)
            if not ev:
                continue
            curve, budget = ev["solved_curve"], range(1, len(ev["solved_curve"]) + 1)
            label = f"{a}{what} ({ev['solved']}/{ev['searches']})"
            ax.plot(budget, curve, style, color=color(a), lw=1.8, label=label)
            if name == "evolution" and "sampling_curve" in ev:
                label = f"{a}, sampling ({ev.get('sampling_solved', 0)}/{ev['searches']})"
                ax.plot(budget, ev["sampling_curve"], "--", color=color(a), lw=0.9, label=label)
    ax.set(xlabel="candidates evaluated", ylabel="fraction of searches solved")
    ax.set_title(
        "Evolutionary search vs same-budget sampling, hard held-out code problems", fontsize=9
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    _mark(fig, results.get("quick"))
    return _save(fig, os.path.join(out_dir, "evolution.png"))


def leaderboard_figure(rows, path, columns=3, smoke=False):
    """rows {board title: [(method, [value per seed])]} -> a PNG at path, a panel per board: methods
    ranked by mean as horizontal bars (15+ names stay readable), each seed a dot on its bar (a gap
    smaller than the seeds' scatter shows as one); one that did not train last, grey -> {title:
    [methods, top to bottom]}."""
    untrained = " (did not train)"  # report.UNTRAINED: such methods go last, in grey, unranked
    ranked = {
        t: sorted(entries, key=lambda e: (e[0].endswith(untrained), -float(np.mean(e[1]))))
        for t, entries in rows.items()
    }
    ncols = min(columns, len(ranked))
    nrows = -(-len(ranked) // ncols)
    height = 0.26 * max(len(e) for e in ranked.values()) + 1.0
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.4 * ncols, height * nrows), squeeze=False)
    for ax, (title, entries) in zip(axes.flat, ranked.items()):
        values = np.concatenate([np.asarray(v, dtype=float) for _, v in entries])
        pad = 0.08 * (values.max() - values.min()) + 1e-3
        left = values.min() - pad  # bars start at the panel's edge: small gaps must stay visible
        for y, (method, v) in enumerate(entries):
            shade = "0.75" if method.endswith(untrained) else color(method)
            ax.barh(y, np.mean(v) - left, left=left, height=0.6, color=shade, alpha=0.35)
            ax.plot(v, [y] * len(v), "o", color=shade, ms=3.5)
        ax.set_yticks(range(len(entries)), [m for m, _ in entries], fontsize=7)
        ax.invert_yaxis()  # best on top
        ax.set_xlim(left, values.max() + pad)
        ax.set_title(title, fontsize=8)
        ax.grid(axis="x", alpha=0.3)
    for ax in list(axes.flat)[len(ranked) :]:
        ax.axis("off")
    fig.text(0.5, 0.005, "bar: mean over seeds; dots: one seed each", ha="center", fontsize=7)
    _mark(fig, smoke)
    _save(fig, path, rect=(0, 0.02, 1, 1))
    return {t: [m for m, _ in entries] for t, entries in ranked.items()}


def search_drivers_figure(points, path, smoke=False):
    """points [(method, seed, {"solved", "diversity", "invalid", ...})] -> a PNG at path: a dot per
    method (mean over seeds), solved against diversity, colored by its invalid children: diversity
    or mutation skill?"""
    methods = sorted({m for m, _, _ in points})
    mean = {
        m: {
            k: float(np.mean([p[k] for n, _, p in points if n == m]))
            for k in ("solved", "diversity", "invalid")
        }
        for m in methods
    }
    fig, ax = plt.subplots(figsize=(6.4, 4.6))
    dots = ax.scatter(
        [mean[m]["diversity"] for m in methods],
        [mean[m]["solved"] for m in methods],
        c=[mean[m]["invalid"] for m in methods],
        cmap="viridis_r",
        s=40,
        vmin=0,
    )
    for m in methods:
        ax.annotate(
            m,
            (mean[m]["diversity"], mean[m]["solved"]),
            fontsize=7,
            xytext=(3, 3),
            textcoords="offset points",
        )
    fig.colorbar(dots, label="children invalid (share)")
    ax.set(
        xlabel="reward-space diversity of its pools",
        ylabel="search: share of hard problems solved",
        title="code: search solved against diversity (a dot per trained method, mean over seeds)",
    )
    ax.title.set_fontsize(9)
    ax.grid(alpha=0.3)
    _mark(fig, smoke)
    _save(fig, path)


def compared_only(results):
    """Against a board: the results with only the new methods and the board's rows they are
    compared with (tables.AGAINST), so a figure's curves stay readable; else the results as they
    are."""
    new = results.get("new_methods")
    if not new:
        return results
    keep = set(new) | {"vpo", "grpo", "warm_start"}
    return {
        **results,
        "tasks": {
            t: {m: e for m, e in per_method.items() if m in keep}
            for t, per_method in results["tasks"].items()
        },
    }


def maze_routes(out_dir, results):
    """routes.png: where each method's routes go (maze.conflict_figure): the mean visit map over
    every seed's pools, and the lowest seed's first mazes; the warm start, GRPO and VPO first."""
    per_method = {a: e for a, e in results["tasks"].get("maze", {}).items() if "routes" in e}
    if not per_method:
        return None
    order = ["warm_start", "grpo", "vpo"] + sorted(set(per_method) - {"warm_start", "grpo", "vpo"})
    shown = [a for a in order if a in per_method][:5]
    problems = [int(p) for p in per_method[shown[0]]["routes"]["problems"]]
    pools = {a: per_method[a]["routes"]["answers"] for a in shown}
    visits = {a: per_method[a].get("visit_map") for a in shown}
    picture = io.BytesIO()  # a PNG, written whole or not at all
    maze.conflict_figure(picture, pools, problems, visits_by_method=visits)
    path = os.path.join(out_dir, "routes.png")
    runfiles.write_file(path, picture.getvalue())
    return path


def _vote_against_diversity(ax, per_method):
    """Each policy's maj@n (largest k) against its pool's diversity, a labelled point per policy:
    whether the pools that differ most vote worst (one that did not train has no vote to show)."""
    for a, e in voting_policies(per_method).items():
        size = 40 if a in ("grpo", "vpo") else 16
        ax.scatter(e["diversity"], e["maj_at_k"][-1], color=color(a), s=size, zorder=3)
        ax.annotate(
            a,
            (e["diversity"], e["maj_at_k"][-1]),
            fontsize=5,
            alpha=0.8,
            xytext=(2, 2),
            textcoords="offset points",
        )
    ax.set_xlabel("pool diversity (mean pairwise L1 of reward vectors)")
    ax.grid(alpha=0.3)


def maj_at_k(out_dir, results):
    """maj@k against k, one row per task whose result files carry it; on code also maj-pass@k
    (the voted program passes every hidden test); and every policy's maj@n against its pool's
    diversity. None when no file has it."""
    voted = {t: e for t, e in results["tasks"].items() if any("maj_at_k" in x for x in e.values())}
    if not voted:
        return None
    fig, axes = plt.subplots(len(voted), 3, figsize=(15, 3.6 * len(voted)), squeeze=False)
    for row, (t, per_algo) in enumerate(voted.items()):
        _curves(axes[row][0], per_algo, "maj_at_k")
        axes[row][0].set_title(f"{t}: maj@k, the voted answer's fixed mean")
        axes[row][0].legend(fontsize=6 if len(per_algo) >= 8 else 7, ncol=2)
        if t == "code":
            _curves(axes[row][1], per_algo, "maj_pass_at_k")
            axes[row][1].set_title("code: maj-pass@k (the voted program passes every test)")
        else:  # best@k beside it: how far voting falls short of the best of the k
            _curves(axes[row][1], per_algo, "best_at_k")
            axes[row][1].set_title(f"{t}: best@k, fixed mean (for comparison)")
        _vote_against_diversity(axes[row][2], per_algo)
        axes[row][2].set_title(
            f"{t}: maj@{max(e['ks'][-1] for e in per_algo.values())} against "
            "diversity, a point per policy"
        )
    _mark(fig, results.get("quick"))
    return _save(fig, os.path.join(out_dir, "maj_at_k.png"))


def make_all(out_dir, results, samples):
    """Every figure of the report; one that has nothing to draw is removed (an earlier run's would
    show other results)."""
    results = compared_only(results)
    samples = {k: v for k, v in samples.items() if k[1] in results["tasks"].get(k[0], {})}
    paths = [
        best_at_k(out_dir, results),
        pass_at_k(out_dir, results),
        maj_at_k(out_dir, results),
        reward_vectors(out_dir, results, samples),
        training(out_dir, results),
        evolution(out_dir, results),
        maze_routes(out_dir, results),
    ]
    names = (
        "best_at_k",
        "pass_at_k",
        "maj_at_k",
        "reward_vectors",
        "training",
        "evolution",
        "routes",
    )
    for stale in (os.path.join(out_dir, f"{name}.png") for name in names):
        if stale not in paths and os.path.exists(stale):
            with runfiles.writing(stale):
                os.remove(stale)
    return [p for p in paths if p]
