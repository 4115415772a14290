"""The result files and what they say. experiment.py stores one small JSON file per task, method and
seed (results/<task>-<method>-s<seed>.json, update_record), so that seeds can run in different
sessions; this file reads them back, merges them over seeds (`python lab/experiment.py --report
out/seed0 out/seed1 --out out/merged`) and decides the paper's claims from them alone (tables.py
writes the report).

A difference between methods comes with a 95% paired-bootstrap interval over problems and seeds
(the same held-out problems for every method of a seed), and every verdict follows one rule, stated
above `verdict`: an interval, never a point estimate, decides. At the end, what drives search: rank
correlations of a trained policy's properties with its search's solved share.
Deliberately left out: significance tests beyond the bootstrap, multiple-comparison corrections.
"""

import glob
import json
import operator
import os
import re

import numpy as np

from lab import oracle
from runfiles import write_json, writing

# maj@k's two curves only in result files written since evaluate.py reported them (merge keeps a
# curve that every seed's file holds)
CURVES = ("best_at_k", "heldout_weight_best_at_k", "pass_at_k", "maj_at_k", "maj_pass_at_k")
SCALARS = ("diversity", "distinct_answers", "pareto_fraction", "entropy", "wasted")
SCALARS += ("nonzero_answers", "tokens_generated", "mean_scalar", "set_score", "valid")


# ---- The result files ----


def warm_start_row(m):
    """The warm start's row when asked for m answers: "warm_start" for one, else "warm_start_m<m>"
    ("warm_start_m3" at the default m = 3)."""
    return "warm_start" if m == 1 else f"warm_start_m{m}"


def warm_start_answers(method):
    """The m of a warm start's row (warm_start_row's inverse: "warm_start" 1, "warm_start_m3" 3);
    None for any other row."""
    found = re.fullmatch(r"warm_start(?:_m(\d+))?", method)
    return None if found is None else int(found[1] or 1)


def untrained_row(method):
    """The rows no training made: the warm start's (for any m) and the optimum."""
    return method == "optimum" or warm_start_answers(method) is not None


def record_path(out_dir, task, method, seed):
    return os.path.join(out_dir, "results", f"{task}-{method}-s{seed}.json")


def read_record(out_dir, task, method, seed):
    try:
        with open(record_path(out_dir, task, method, seed)) as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError):
        return None


def update_record(out_dir, task, method, seed, **fields):
    """Merge fields into results/<task>-<method>-s<seed>.json (written whole, then renamed)."""
    path = record_path(out_dir, task, method, seed)
    record = read_record(out_dir, task, method, seed) or dict(task=task, method=method, seed=seed)
    record.update(fields)
    with writing(os.path.dirname(path)):
        os.makedirs(os.path.dirname(path), exist_ok=True)
    write_json(path, record)


def load_records(dirs):
    """Every result file under dir/results/ of each dir -> list of records (later dirs win on a
    clash)."""
    found = {}
    for d in dirs:
        for path in sorted(glob.glob(os.path.join(d, "results", "*.json"))):
            with open(path) as f:
                record = json.load(f)
            found[(record["task"], record["method"], record["seed"])] = record
    return list(found.values())


def training_summary(rows):
    """metrics.jsonl rows -> held-out evaluations, first and last 10 steps' means, a curve of <=
    ~100 points."""
    evals = [r for r in rows if r["kind"] == "eval"]
    steps = [r for r in rows if r["kind"] == "train"]
    keys = ("reward_scalar", "set_score", "entropy", "distinct_first_answers", "valid_answers")
    every = max(1, len(steps) // 100)
    logged = [k for k in ("step",) + keys if steps and k in steps[0]]
    heldout = [evals[0]["heldout_scalar"], evals[-1]["heldout_scalar"]] if evals else []
    return {
        "heldout_scalar": heldout,
        "first10": {k: float(np.mean([r[k] for r in steps[:10]])) for k in logged[1:]},
        "last10": {k: float(np.mean([r[k] for r in steps[-10:]])) for k in logged[1:]},
        "curve": {k: [round(r[k], 4) for r in steps[::every]] for k in logged},
    }


def merge(records, task_order=()):
    """Records -> results: tasks (in task_order, then by name) -> method (warm start first) ->
    entry: the mean over seeds, the spread (max - min), the per-seed values and the per-problem
    values."""
    results = {
        "seeds": sorted({r["seed"] for r in records}),
        "tasks": {},
        "commits": sorted({r.get("commit", "unknown") for r in records}),
        "machines": sorted({r.get("machine", "not recorded") for r in records}),
    }
    tasks = {t: i for i, t in enumerate(task_order)}

    def order(r):
        return tasks.get(r["task"], len(tasks)), r["task"], r["method"] != "warm_start", r["seed"]

    for r in sorted(records, key=order):
        results["tasks"].setdefault(r["task"], {}).setdefault(r["method"], []).append(r)
    for per_method in results["tasks"].values():
        for method, rows in per_method.items():
            pooled = [r for r in rows if "pools" in r]
            entry = {"seeds": [r["seed"] for r in pooled], "m": rows[0]["m"]}
            if pooled:
                pools = [r["pools"] for r in pooled]
                entry["ks"] = pools[0]["ks"]
                for metric in [c for c in CURVES if all(c in p for p in pools)]:
                    values = np.array([p[metric] for p in pools])
                    entry[metric] = values.mean(0).round(4).tolist()
                    entry[metric + "_spread"] = (values.max(0) - values.min(0)).round(4).tolist()
                    entry[metric + "_per_seed"] = values.round(4).tolist()
                for metric in SCALARS:
                    values = np.array([p.get(metric, np.nan) for p in pools], dtype=float)
                    entry[metric] = round(float(values.mean()), 4)
                    entry[metric + "_spread"] = round(float(values.max() - values.min()), 4)
                    entry[metric + "_per_seed"] = values.round(4).tolist()
                entry.update(maze_means(pools))
                if "routes" in pools[0]:  # the lowest seed's first pools' routes, to draw
                    drawn = len(pools[0]["routes"])
                    entry["routes"] = {
                        "seed": entry["seeds"][0],
                        "problems": pools[0]["problems"][:drawn],
                        "answers": pools[0]["routes"],
                    }
                if all("per_problem" in p for p in pools):
                    entry["per_problem"] = {
                        s: p["per_problem"] for s, p in zip(entry["seeds"], pools)
                    }
            for kind, name in (("search", "evolution"), ("search_set", "evolution_set")):
                searches = [(r["seed"], r[kind]) for r in rows if kind in r]
                if searches:
                    entry[name] = merge_searches(searches)
            entry["training"] = [r["training"] for r in rows if "training" in r]
            per_method[method] = entry
        add_gap_closed(per_method)
    return results


def maze_means(pools):
    """The maze's own measures (workers.maze_summary), each a mean over the seeds' pools."""
    entry = {}
    for key in ("objective_means", "route_families", "corner_coverage", "visit_map"):
        if all(key in p for p in pools):
            entry[key] = mean_of([p[key] for p in pools])
    if all("at_temperature_0.7" in p for p in pools):  # the pools sampled at 0.7
        cool = [p["at_temperature_0.7"] for p in pools]
        entry["at_temperature_0.7"] = {
            key: mean_of([c[key] for c in cool])
            for key in ("best_at_k", "heldout_weight_best_at_k", "corner_coverage")
        }
    return entry


def mean_of(values):
    """The mean over seeds of lists (element by element) or dicts (key by key)."""
    if isinstance(values[0], dict):
        return {k: round(float(np.mean([v[k] for v in values])), 4) for k in values[0]}
    return np.mean(values, axis=0).round(4).tolist()


def add_gap_closed(per_method):
    """Each method's share of the gap from the warm start (same m) to the "optimum" row closed, per
    seed, on its own objective (a single answer's mean reward, a set's set score) and on pass@n."""
    if "optimum" not in per_method:
        return
    opt = per_method["optimum"]
    best = {
        seed: {k: opt[k + "_per_seed"][i] for k in ("mean_scalar", "set_score", "pass_at_k")}
        for i, seed in enumerate(opt["seeds"])
    }
    for method, entry in per_method.items():
        if untrained_row(method) or "per_problem" not in entry:
            continue
        own = "set_score" if entry["m"] > 1 else "mean_scalar"
        warm = per_method.get(warm_start_row(entry["m"]), {})
        per_seed = {"objective": [], "pass": []}
        for i, seed in enumerate(entry["seeds"]):
            if seed not in best or seed not in warm.get("seeds", []):
                continue
            j = warm["seeds"].index(seed)
            value = entry[own + "_per_seed"][i] if own + "_per_seed" in entry else None
            per_seed["objective"].append(
                oracle.gap_closed(value, warm[own + "_per_seed"][j], best[seed][own])
            )
            passed = entry["pass_at_k_per_seed"][i][-1], warm["pass_at_k_per_seed"][j][-1]
            per_seed["pass"].append(oracle.gap_closed(*passed, best[seed]["pass_at_k"][-1]))
        if per_seed["objective"]:
            entry["gap_closed"] = {
                "objective_name": own,
                **{k: round(float(np.mean(v)), 3) for k, v in per_seed.items()},
                **{k + "_per_seed": [round(x, 3) for x in v] for k, v in per_seed.items()},
            }


def merge_searches(seeded):
    """(seed, search result) pairs of one method -> one entry. A solved problem's id is prefixed
    with its seed ("s1:(12, 30, ...)"): two seeds may draw the same problem, searched by different
    checkpoints."""
    searches = [s for _, s in seeded]
    out = {
        "searches": sum(s["searches"] for s in searches),
        "solved": sum(s["solved"] for s in searches),
        "budget": searches[0]["budget"],
        "solved_per_seed": [s["solved"] for s in searches],
        "solved_problems": [f"s{seed}:{p}" for seed, s in seeded for p in s["solved_problems"]],
    }
    # which of the searched problems each seed solved, in the searched order: a paired interval's
    if all("problems" in s.get("key", {}) for s in searches):
        out["per_problem"] = {}
        for seed, s in seeded:
            problems = s["key"]["problems"]
            out["per_problem"][seed] = problems, [int(p in s["solved_problems"]) for p in problems]
    if all("sampling_solved" in s for s in searches):
        out["sampling_solved"] = sum(s["sampling_solved"] for s in searches)
    weights = np.array([s["searches"] for s in searches], dtype=float)
    for curve in ("solved_curve", "sampling_curve"):
        if all(curve in s for s in searches):
            curves = np.array([s[curve] for s in searches]).T
            out[curve] = (curves @ weights / weights.sum()).tolist()
    if all("mutations" in s for s in searches):
        out["mutations"] = {
            c: sum(s["mutations"][c] for s in searches) for c in ("children", "invalid", "improved")
        }
        out["mutations_per_seed"] = [s["mutations"] for s in searches]
    return out


def solved_only(a, b):
    solved_a, solved_b = set(a["solved_problems"]), set(b["solved_problems"])
    return sorted(solved_a - solved_b), sorted(solved_b - solved_a)


# ---- Differences between two methods, with their interval ----


def paired(results, task, a, b, key):
    """(mean difference a - b, low, high) of a per-problem value (key: "best", "pass", ...) at the
    largest k, paired on the seeds both have; None when either method is missing."""
    per_method = results["tasks"].get(task, {})
    pa, pb = (per_method.get(method, {}).get("per_problem") for method in (a, b))
    seeds = [s for s in pa if s in pb] if pa and pb else []
    # a file from before a metric existed (maj@k) lacks its per-problem values: no interval
    if not seeds or any(key not in pa[s] or key not in pb[s] for s in seeds):
        return None
    return paired_bootstrap_interval(
        np.array([pa[s][key] for s in seeds]), np.array([pb[s][key] for s in seeds])
    )


# One rule for every verdict: a 95% interval decides, never a point estimate. A claim that a method
# has MORE of something (best@k, pass@k, diversity, search solved) is "yes" when the interval's low
# end is above zero, "no" when its high end is below zero, else "within noise". A claim of NO GAIN
# (the collinear control) is "yes" only when the whole interval lies inside +-NO_GAIN_MARGIN,
# declared before any run.
NO_GAIN_MARGIN = 0.02

# A method "did not train" when its rollouts' valid answers stayed below this share over its last 10
# RL steps on some seed: nearly every reward and advantage is zero, its checkpoint its warm start;
# it is shown apart, not ranked beside methods that trained.
DID_NOT_TRAIN_VALID = 0.05
UNTRAINED = " (did not train)"  # appended to such a method's name in tables and figures


def verdict(interval):
    """The verdict on a claim that a - b > 0, from the interval (mean, low, high) of a - b."""
    if interval is None:
        return "not measured"
    _, low, high = interval
    return "yes" if low > 0 else "no" if high < 0 else "within noise"


def no_gain_verdict(interval, margin=NO_GAIN_MARGIN):
    """The verdict on a claim that a - b is negligible: yes only when the interval lies in
    +-margin."""
    if interval is None:
        return "not measured"
    _, low, high = interval
    if -margin <= low and high <= margin:
        return f"yes (inside +-{margin})"
    return "no (VPO gains)" if low > 0 else "VPO loses" if high < 0 else "within noise"


def fmt_interval(interval):
    mean, low, high = interval
    return f"{mean:+.3f} [{low:+.3f}, {high:+.3f}]"


def shown_name(per_method, name):
    """A method's name as every table and figure shows it: UNTRAINED appended when it did not train
    (a set policy's search row, "vpo (m per call)", follows its method)."""
    # "vpo (yours) (m per call)"
    entry = per_method.get(name) or per_method.get(name.rsplit(" (", 1)[0], {})
    return name + UNTRAINED if did_not_train(entry) else name


def did_not_train(entry):
    last = [
        r["last10"]["valid_answers"]
        for r in entry.get("training", [])
        if "valid_answers" in r.get("last10", {})
    ]
    return bool(last) and min(last) < DID_NOT_TRAIN_VALID


def voting_policies(per_method):
    """The policies whose vote can be set against their diversity: files with maj@k and a
    diversity, and a method that trained (one that did not has no valid answer, so no vote)."""
    return {
        m: e
        for m, e in per_method.items()
        if "maj_at_k" in e and "diversity" in e and not did_not_train(e)
    }


def paired_diversity(results, task, a, b):
    """(interval of diversity a - b, what it resamples): over problems and seeds where every seed's
    record has per-problem diversities, else over seeds alone (records made before they were
    kept)."""
    ea, eb = (results["tasks"].get(task, {}).get(method, {}) for method in (a, b))
    seeds = [s for s in ea.get("seeds", []) if s in eb.get("seeds", [])]
    if not seeds:
        return None, ""
    pa, pb = ea.get("per_problem", {}), eb.get("per_problem", {})
    if all("diversity" in pa.get(s, {}) and "diversity" in pb.get(s, {}) for s in seeds):
        return paired_bootstrap_interval(
            [pa[s]["diversity"] for s in seeds], [pb[s]["diversity"] for s in seeds]
        ), "problems and seeds"
    va = [[ea["diversity_per_seed"][ea["seeds"].index(s)]] for s in seeds]
    vb = [[eb["diversity_per_seed"][eb["seeds"].index(s)]] for s in seeds]
    if not np.isfinite(va + vb).all():
        return None, ""
    return paired_bootstrap_interval(va, vb), f"{len(seeds)} seeds only"


SET_SEARCH_SUFFIX = " (m per call)"  # a set policy's search writing its m children per call


def named_searches(per_method):
    return {
        m + suffix: e[kind]
        for m, e in per_method.items()
        for kind, suffix in (("evolution", ""), ("evolution_set", SET_SEARCH_SUFFIX))
        if kind in e
    }


def paired_search(per_problem_a, per_problem_b):
    """Two searches' difference in solved share, paired on the seeds searched on the very same
    problems."""
    seeds = [
        s
        for s in per_problem_a
        if s in per_problem_b and per_problem_a[s][0] == per_problem_b[s][0]
    ]
    if not seeds or len({len(per_problem_a[s][0]) for s in seeds}) != 1:
        return None  # the bootstrap needs a (seeds, problems) array
    return paired_bootstrap_interval(
        np.array([per_problem_a[s][1] for s in seeds], dtype=float),
        np.array([per_problem_b[s][1] for s in seeds], dtype=float),
    )


def claim_best_at_k(results):
    tasks, out = results["tasks"], []
    for task, key, metric, what in (
        ("code", "best", "best_at_k", "code best@k"),
        ("persona", "w_best", "heldout_weight_best_at_k", "persona w-best@k"),
        ("maze", "best", "best_at_k", "maze best@k"),
        ("maze", "w_best", "heldout_weight_best_at_k", "maze w-best@k"),
    ):
        if "ks" not in tasks.get(task, {}).get("vpo", {}):
            continue
        k = tasks[task]["vpo"]["ks"][-1]
        parts = [
            f"vs {other} {fmt_interval(iv)} ({verdict(iv)})"
            for other in ("grpo", "grpo_x3", "warm_start")
            for iv in [paired(results, task, "vpo", other, key)]
            if iv
        ]
        if "grpo" in tasks[task]:
            d = [tasks[task]["vpo"][metric][i] - tasks[task]["grpo"][metric][i] for i in (0, -1)]
            parts.append(
                f"VPO - GRPO {d[0]:+.3f} at k = 1, {d[1]:+.3f} at k = {k} (point estimates)"
            )
        out.append(f"{what} at k = {k}: " + "; ".join(parts))
    return out


def claim_diversity(results):
    out = []
    for task, per_method in results["tasks"].items():
        if not all("diversity" in per_method.get(m, {}) for m in ("vpo", "grpo")):
            continue
        iv, basis = paired_diversity(results, task, "vpo", "grpo")
        g, v = per_method["grpo"]["diversity"], per_method["vpo"]["diversity"]
        w = per_method.get("warm_start", {}).get("diversity")
        ratio = f"{v / g:.2f}x" if g > 0 else "GRPO's is 0"
        out.append(
            f"{task}: VPO {v:.3f} vs GRPO {g:.3f} ({ratio})"
            + (f", warm start {w:.3f}" if w else "")
            + (f"; VPO - GRPO {fmt_interval(iv)} over {basis}" if iv else "")
            + f": {verdict(iv)}"
        )
    return out


def claim_pass_at_k(results):
    code = results["tasks"].get("code", {})
    if not {"vpo", "grpo"} <= code.keys():
        return []
    iv = paired(results, "code", "vpo", "grpo", "pass")
    return [
        f"pass@1 GRPO {code['grpo']['pass_at_k'][0]:.3f} vs VPO {code['vpo']['pass_at_k'][0]:.3f} "
        f"(point estimates); pass@{code['vpo']['ks'][-1]} VPO - GRPO {fmt_interval(iv)}: "
        f"{verdict(iv)}"
        if iv
        else "not measured"
    ]


def claim_search(results):
    searches = named_searches(results["tasks"].get("code", {}))
    if not searches:
        return []
    code = results["tasks"]["code"]
    out = [
        "solved (same-budget sampling in brackets): "
        + ", ".join(
            f"{shown_name(code, name)} {s['solved']}/{s['searches']}"
            + (f" ({s['sampling_solved']})" if "sampling_solved" in s else "")
            for name, s in searches.items()
        )
    ]
    # VPO writing one or its m children per call vs GRPO; then the pair RL also trained on parents
    pairs = [("vpo", "grpo"), ("vpo" + SET_SEARCH_SUFFIX, "grpo")]
    for name, other in pairs + [("vpo_mutation", "grpo_mutation")]:
        if name in searches and other in searches:
            a, g = searches[name], searches[other]
            both = "per_problem" in a and "per_problem" in g
            iv = paired_search(a["per_problem"], g["per_problem"]) if both else None
            only_a, only_g = solved_only(a, g)
            out.append(
                f"{name} - {other}, share solved {fmt_interval(iv) if iv else '(not paired)'}: "
                f"{verdict(iv)} (solved only by {name} {len(only_a)}, only by {other} "
                f"{len(only_g)})"
            )
    return out


def claim_control(results):
    return [
        f"w-best@k VPO - {other} {fmt_interval(iv)}: {no_gain_verdict(iv)}"
        for other in ("grpo", "grpo_x3")
        for iv in [paired(results, "persona_collinear", "vpo", other, "w_best")]
        if iv
    ]


def claim_rl_learns(results):
    out = []
    for task, per_method in results["tasks"].items():
        for method, e in per_method.items():
            g = e.get("gap_closed")
            if not g:
                continue

            def per_seed(key, g=g):
                return " ".join(f"{v:.2f}" for v in g[key + "_per_seed"])

            line = (
                f"{task} {method}: own objective ({g['objective_name']}) {g['objective']:.2f} "
                f"({per_seed('objective')}): "
                f"{'yes' if min(g['objective_per_seed']) >= 0.5 else 'no'} (target: half the gap "
                f"on every seed)"
            )
            # pass@k where some answer can pass (none on the maze: the optimum's is 0)
            passable = np.isfinite(g["pass"])
            line += f"; pass@{e['ks'][-1]} {g['pass']:.2f} ({per_seed('pass')})" if passable else ""
            warm = warm_start_row(e["m"])
            iv = paired(results, task, method, warm, "pass") if passable else None
            if g["pass"] < 0:
                line += f", RL made pass@{e['ks'][-1]} worse on average"
            if iv:
                line += f" (vs {warm} {fmt_interval(iv)}, {verdict(iv)})"
            line += f"; valid answers {e.get('valid', 0):.2f}" + (
                "; DID NOT TRAIN" if did_not_train(e) else ""
            )
            out.append(line)
    return out


# The paper's claims (and our precondition, RL learns), each with the function that decides it.
CLAIMS = [
    (
        "0. RL learns: share of the gap from the warm start to the optimum closed on held-out "
        "problems, on the method's own objective and on pass@k.",
        claim_rl_learns,
    ),
    (
        "1. VPO's best@k beats GRPO's (also compute-matched) and the warm start's at large k, by "
        "more as k grows.",
        claim_best_at_k,
    ),
    ("2. GRPO's reward-space diversity collapses relative to VPO's.", claim_diversity),
    ("3. On code GRPO may lead pass@1 and VPO overtakes as k grows.", claim_pass_at_k),
    ("4. VPO-driven evolutionary search solves more than GRPO-driven search.", claim_search),
    (
        f"5. No meaningful VPO gain on the collinear control (margin +-{NO_GAIN_MARGIN}).",
        claim_control,
    ),
]


def claims(results):
    """The paper's claims one by one, with this run's verdict and the numbers behind it."""
    return [
        f"**{claim}**\n"
        + "\n".join(f"   - {line}" for line in (decide(results) or ["not measured in this run"]))
        for claim, decide in CLAIMS
    ]


# ---- What drives search: which property of a policy goes with its search solving more ----

# (name, what it is): the properties of a trained code policy, per seed, set against its search's
# solved share
SEARCH_DRIVERS = (
    ("diversity", "reward-space diversity"),
    ("distinct_answers", "distinct answers"),
    ("best", "best@k of its pool"),
    ("invalid", "children invalid"),
    ("improved", "children better than their best parent"),
)


def search_points(results):
    """[(method, seed, {"solved": share, driver: value})], one point per seed of every trained code
    method's search writing one child per call. Left out: the warm start and the optimum, methods
    that did not train, and those trained on parent prompts too ("_mutation": a comparison of their
    own)."""
    points = []
    for method, e in results["tasks"].get("code", {}).items():
        ev = e.get("evolution", {})
        searched = "mutations_per_seed" in ev and "per_problem" in ev
        if (
            untrained_row(method)
            or did_not_train(e)
            or method.endswith("_mutation")
            or not searched
        ):
            continue
        for i, seed in enumerate(e["seeds"]):
            mutations = ev["mutations_per_seed"][i]
            children = max(1, mutations["children"])
            point = {
                "solved": float(np.mean(ev["per_problem"][seed][1])),
                "diversity": e["diversity_per_seed"][i],
                "distinct_answers": e["distinct_answers_per_seed"][i],
                "best": e["best_at_k_per_seed"][i][-1],
                "invalid": mutations["invalid"] / children,
                "improved": mutations["improved"] / children,
            }
            points.append((method, seed, point))
    return points


def paired_bootstrap_interval(a, b, num_resamples=10_000, level=0.95, seed=0):
    """(mean of a - b, low, high): a percentile bootstrap interval for the gap between two methods,
    from paired (seeds, problems) arrays; the seeds and, within each drawn seed, the problems are
    resampled."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.ndim != 2 or a.shape != b.shape or a.size == 0:
        raise ValueError(
            f"a and b must be (seeds, problems) arrays of one shape, got {a.shape} and {b.shape}"
        )
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError("a and b must be finite")
    if not 0 < level < 1 or operator.index(num_resamples) < 1:
        raise ValueError(
            f"need 0 < level < 1 and num_resamples >= 1, got {level} and {num_resamples}"
        )
    diff = a - b
    S, Q = diff.shape
    rng = np.random.default_rng(seed)
    stats = []
    for start in range(0, num_resamples, 1000):  # in chunks: (resamples, S, Q) indices stay small
        n = min(1000, num_resamples - start)
        seeds = rng.integers(0, S, size=(n, S))
        problems = rng.integers(0, Q, size=(n, S, Q))  # drawn anew inside every drawn seed
        stats.append(diff[seeds[..., None], problems].mean(axis=(1, 2)))
    low, high = np.quantile(np.concatenate(stats), [(1 - level) / 2, (1 + level) / 2])
    return float(diff.mean()), float(low), float(high)


def spearman(x, y) -> float:
    """Spearman's rank correlation (ties share their mean rank); nan when either side is
    constant."""

    def ranks(v):
        v = np.asarray(v, dtype=float)
        r = np.empty(len(v))
        r[v.argsort(kind="stable")] = np.arange(len(v))
        for value in np.unique(v):  # ties share the mean of their ranks
            r[v == value] = r[v == value].mean()
        return r

    rx, ry = ranks(x), ranks(y)
    if rx.std() == 0 or ry.std() == 0:
        return float("nan")
    return float(np.corrcoef(rx, ry)[0, 1])


def rank_correlation_interval(x, y, groups, num_resamples=2000, level=0.95, seed=0):
    """(rho, low, high): a bootstrap drawing the groups (methods), then each group's points
    (seeds)."""
    x, y, groups = np.asarray(x, dtype=float), np.asarray(y, dtype=float), np.asarray(groups)
    members = [np.flatnonzero(groups == g) for g in np.unique(groups)]
    rng = np.random.default_rng(seed)
    stats = []
    for _ in range(num_resamples):
        drawn = np.concatenate(
            [
                rng.choice(members[i], size=len(members[i]))
                for i in rng.integers(0, len(members), size=len(members))
            ]
        )
        stats.append(spearman(x[drawn], y[drawn]))
    stats = np.array(stats)
    low, high = (
        np.nanquantile(stats, [(1 - level) / 2, (1 + level) / 2])
        if np.isfinite(stats).any()
        else (np.nan,) * 2
    )
    return spearman(x, y), float(low), float(high)


def search_drivers(results):
    """[(driver, what it is, (rho, low, high))]: solved share's rank correlation with each property
    over search_points, bootstrapped over methods and their seeds."""
    points = search_points(results)
    if len({m for m, _, _ in points}) < 3:
        return []
    methods = [m for m, _, _ in points]
    solved = [p["solved"] for _, _, p in points]
    return [
        (name, what, rank_correlation_interval([p[name] for _, _, p in points], solved, methods))
        for name, what in SEARCH_DRIVERS
    ]
