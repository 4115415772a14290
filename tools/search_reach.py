"""
Does a policy's plain-prompt diversity reach the evolutionary search? Measured on TRAINING problems only.

search.evolve_many uses the policy twice: an empty island gets a plain task prompt (the seed of the
island), and every later candidate is a child the policy writes from parents as an edit of the best
one ("2-5": its 2nd threshold down by 5; CodeTask.child_program applies it). RL trains the plain prompt
only. VPO's plain samples are far more diverse than GRPO's, yet with the edit skill kept the two search
about equally well. This tool follows the diversity through the search, stage by stage:

  1. plain prompts: the plain samples the search drew, and 30 plain samples per problem at the search's
     temperature and top-p (one answer per call, as the search asks; a set policy also in its own m), and
     again at temperature 1.0 without top-p, as RL samples and pools are scored: distinct programs
     (lang.canonical), distinct values per threshold position, share valid, reward-space diversity;
  2. children: distinct child programs per search, distinct edit texts per distinct best parent, distinct
     threshold values tried per position, the share of children repeating a program the search had
     already evaluated (budget spent for nothing), invalid, better than the best parent; and, with the
     search's dynamics taken out, 30 children of the SAME fixed parents for every policy;
  3. islands: at the end of the search (its solve time, if solved) the distinct programs and pass
     patterns across the islands' populations, the distinct island bests, and how many distinct plain
     samples the islands were seeded from;
  4. the search's result: solved, candidates spent; with `--reps R`, also the solved counts of R - 1
     more search seeds on the same problems (the search's own noise).
Then, over the policy-seed pairs, the correlation of plain diversity with every children / islands
measure. `--seed-first K` also reruns each search with every island's first K calls on the plain prompt
(more budget spent seeding islands) and reports what that solves.

    OMP_WAIT_POLICY=PASSIVE python tools/search_reach.py --seeds 0 1 2 --seed-first 5 --reps 4   # ~3 CPU-minutes

The runs are out/p34/{grpo,vpo}-pr05-sS/final.pt and the warm start each was trained from; the problems
are search.py main's with --split train --search --seed S --set evo_problems=16 (search.search_problems
on "train"), and the search is search.evolve_many with search.SETTINGS, seed S, one child per call: the
same searches as docs/RESULTS.md's probe, so their solved counts must match it. Nothing in search.py is
changed: within `recording`, search._sample, search.Island and task.child_program are replaced by
recording wrappers, restored on exit.

Deliberately left out: held-out problems (this is for design), the same-budget sampling control (it
solves 0 of these problems for every policy), the persona task (no search).
"""

import argparse
import contextlib
import json
import os
import random
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import lang  # noqa: E402
import search  # noqa: E402
from checkpoint import load_checkpoint, model_from_checkpoint  # noqa: E402
from config import make_task  # noqa: E402
from metrics import reward_space_diversity  # noqa: E402

PROBE_N = 30  # plain samples per problem, and children per fixed parent pair


# ----------------------------------------------------------------------------------------------
# Recording a search without editing search.py

@contextlib.contextmanager
def recording(task, seed_first=0):
    """Within: every search._sample call is recorded (its rows: island, parents, answer as written, the
    program it stands for, reward), every search.Island kept, task.child_program's raw texts kept. With
    seed_first = K, an island's first K pick_parents calls return [] (the plain prompt). Restored on exit.
    Yields a dict: calls (one list of rows per sampler call), islands (in creation order)."""
    log = {"calls": [], "islands": []}
    pending, raw = [], {}  # islands that picked parents since the last call; id(parents) -> raw answers
    original_sample, original_island = search._sample, search.Island

    class RecordingIsland(original_island):
        def __init__(self, capacity):
            super().__init__(capacity)
            self.index, self.picks, self.first = len(log["islands"]), 0, None
            log["islands"].append(self)

        def add(self, text, reward, score):
            if self.first is None:
                self.first = text
            super().add(text, reward, score)

        def pick_parents(self, rng, explore):
            self.picks += 1
            pending.append(self)
            return [] if self.picks <= seed_first else super().pick_parents(rng, explore)

    def child_program(answer, parents):
        raw.setdefault(id(parents), []).append(answer)
        return original_island_child(answer, parents)

    def sample(model, tok, task_, problems, per_call, rollouts, cfg, settings, gen, device, parents=None):
        islands = pending[:] if len(pending) == len(problems) else [None] * len(problems)
        pending.clear()
        raw.clear()
        rewards, answers = original_sample(model, tok, task_, problems, per_call, rollouts, cfg, settings, gen,
                                           device, parents)
        rows = []
        for r, problem in enumerate(problems):
            shown = parents[r] if parents else None
            written = raw.get(id(shown), []) if shown else []
            rows.append({"island": islands[r].index if islands[r] is not None else None, "problem": problem,
                         "parents": shown or None, "answers": answers[r], "rewards": rewards[r],
                         "raw": written[0] if written else None})
        log["calls"].append(rows)
        return rewards, answers

    original_island_child = task.child_program
    search._sample, search.Island, task.child_program = sample, RecordingIsland, child_program
    try:
        yield log
    finally:
        search._sample, search.Island = original_sample, original_island
        del task.child_program  # the instance attribute; the class's method shows again


def candidates(task, log, num_problems, num_islands, budget):
    """The recorded rows of an evolve_many run -> per search, its candidates in the order evaluated,
    cut as evolve_many cuts them (at the budget, and after the first solution). One child per call."""
    out = [[] for _ in range(num_problems)]
    solved = [False] * num_problems
    for rows in log["calls"]:
        for row in rows:
            s, i = divmod(row["island"], num_islands)
            answer, reward = row["answers"][0][0], row["rewards"][0, 0]
            if solved[s] or len(out[s]) >= budget:
                continue
            parents = row["parents"]
            score = float(task.scalarize(reward))
            out[s].append({"island": i, "plain": parents is None, "answer": answer, "raw": row["raw"],
                           "parent": parents[-1][0] if parents else None,
                           "parent_score": parents[-1][1] if parents else None,
                           "score": score, "valid": task.valid(row["problem"], answer),
                           "solved": bool((reward >= 1.0).all()), "key": task.answer_key(answer)})
            solved[s] = solved[s] or out[s][-1]["solved"]
    return out


# ----------------------------------------------------------------------------------------------
# Metrics: small pure functions

def distinct_programs(answers):
    """Distinct programs (lang.canonical) among answers; what does not parse is not a program."""
    return len({c for c in map(lang.canonical, answers) if c is not None})


def values_per_position(task, answers):
    """Mean over the task's k threshold positions of the distinct values there, among answers that
    compare x with exactly k numbers (CodeTask.thresholds)."""
    rows = [t for t in map(task.thresholds, answers) if len(t) == task.k]
    return float(np.mean([len({t[i] for t in rows}) for i in range(task.k)])) if rows else 0.0


def share(flags):
    flags = list(flags)
    return float(np.mean(flags)) if flags else float("nan")


def plain_metrics(task, problem, answers, rewards=None):
    """A problem's plain samples -> their spread (rewards (n, D): also the reward-space diversity)."""
    out = {"n": len(answers), "distinct": distinct_programs(answers), "values": values_per_position(task, answers),
           "valid": share(task.valid(problem, a) for a in answers)}
    if rewards is not None:
        out["diversity"] = reward_space_diversity(rewards)
    return out


def edit_spread(children):
    """Children (dicts with parent, raw) -> (distinct edit texts per distinct best parent, the share of
    distinct edits among the children of parents edited more than once: 1.0 = never the same edit twice)."""
    by_parent = {}
    for c in children:
        by_parent.setdefault(c["parent"], []).append(c["raw"])
    per_parent = [len(set(edits)) for edits in by_parent.values()]
    repeated = [(len(set(e)), len(e)) for e in by_parent.values() if len(e) > 1]
    return (float(np.mean(per_parent)) if per_parent else 0.0,
            sum(d for d, _ in repeated) / sum(n for _, n in repeated) if repeated else float("nan"))


def children_metrics(task, cands):
    """One search's candidates -> its children's spread and waste (a child repeating any program the
    search evaluated before it, plain or child, is a duplicate)."""
    seen, duplicate = set(), []
    for c in cands:
        if not c["plain"]:
            duplicate.append(c["key"] in seen)
        seen.add(c["key"])
    children = [c for c in cands if not c["plain"]]
    per_parent, distinct_share = edit_spread(children)
    return {"children": len(children), "distinct": len({c["key"] for c in children}),
            "distinct_share": len({c["key"] for c in children}) / len(children) if children else float("nan"),
            "parents": len({c["parent"] for c in children}), "edits_per_parent": per_parent,
            "edit_distinct_share": distinct_share,
            "values": values_per_position(task, [c["answer"] for c in children]),
            "duplicate": share(duplicate), "invalid": share(not c["valid"] for c in children),
            "better": share(c["score"] > c["parent_score"] for c in children)}


def island_metrics(task, islands, cands):
    """A search's islands at its end -> distinct programs and pass patterns across their populations,
    distinct island bests, distinct seeds (first program of each island) and how many seeds were the
    island's own plain samples (not a neighbour's migrant)."""
    programs = [(text, reward) for island in islands for _, text, reward in island.programs]
    own_plain = {(c["island"], c["key"]) for c in cands if c["plain"]}
    seeds = [island.first for island in islands if island.first is not None]
    return {"programs": len({task.answer_key(t) for t, _ in programs}),
            "patterns": len({r.tobytes() for _, r in programs}),
            "bests": len({task.answer_key(island.best()[1]) for island in islands if island.best()}),
            "seeds": len({task.answer_key(t) for t in seeds}),
            "seeds_own_plain": sum((i, task.answer_key(island.first)) in own_plain
                                   for i, island in enumerate(islands) if island.first is not None)}


def mean_dicts(rows):
    """Per-key mean of dicts of numbers (NaNs, where a measure does not apply, left out)."""
    return {k: float(np.nanmean([r[k] for r in rows])) if any(not np.isnan(r[k]) for r in rows) else float("nan")
            for k in rows[0]}


def ranks(x):
    """Ranks with ties averaged (for Spearman's rho)."""
    x = np.asarray(x, dtype=float)
    order = np.argsort(x, kind="stable")
    r = np.empty(len(x))
    r[order] = np.arange(len(x))
    for v in np.unique(x):
        r[x == v] = r[x == v].mean()
    return r


def correlation(x, y, spearman=False):
    x, y = (ranks(x), ranks(y)) if spearman else (np.asarray(x, float), np.asarray(y, float))
    if x.std() == 0 or y.std() == 0:
        return float("nan")
    return float(np.corrcoef(x, y)[0, 1])


# ----------------------------------------------------------------------------------------------
# Running one policy

def plain_probe(model, tok, task, problems, cfg, settings, seed, m=1):
    """PROBE_N plain answers per problem at the search's temperature and top-p, m per call."""
    gen = torch.Generator().manual_seed(seed)
    rewards, answers = search._sample(model, tok, task, problems, m, PROBE_N // m, cfg, settings, gen, "cpu")
    out = []
    for p, problem in enumerate(problems):
        flat = [a for rollout in answers[p] for a in rollout]
        out.append(plain_metrics(task, problem, flat, rewards[p].reshape(len(flat), -1)))
    return mean_dicts(out)


def parent_probe(model, tok, task, problems, cfg, settings, seed):
    """PROBE_N children of one fixed parent pair per problem (task.demo_parents from `seed`: the same
    parents for every policy) -> the spread of the edits with the search's dynamics taken out. Each
    child is its own row (one rollout), so the recording keeps the edit as written."""
    rng = random.Random(seed)
    parents = [task.scored(problem, task.demo_parents(problem, rng)) for problem in problems]
    rows = [(p, problem) for p, problem in enumerate(problems) for _ in range(PROBE_N)]
    gen = torch.Generator().manual_seed(seed)
    with recording(task) as log:
        search._sample(model, tok, task, [problem for _, problem in rows], 1, 1, cfg, settings, gen, "cpu",
                       [list(parents[p]) for p, _ in rows])  # a list per row: the recording tells rows apart
    recorded = [row for call in log["calls"] for row in call]
    out = []
    for p, problem in enumerate(problems):
        mine = recorded[p * PROBE_N:(p + 1) * PROBE_N]
        programs = [row["answers"][0][0] for row in mine]
        best = parents[p][-1][1]
        out.append({"distinct": len({task.answer_key(a) for a in programs}),
                    "edits": len({row["raw"] for row in mine}),
                    "values": values_per_position(task, programs),
                    "invalid": share(not task.valid(problem, a) for a in programs),
                    "better": share(float(task.scalarize(row["rewards"][0, 0])) > best for row in mine)})
    return mean_dicts(out)


def run_search(model, tok, task, problems, cfg, settings, seed, seed_first=0):
    """search.evolve_many as search.py runs it (one child per call), recorded -> (runs, per-search metrics)."""
    with recording(task, seed_first) as log:
        runs = search.evolve_many(model, tok, task, problems, cfg, settings, seed, 1)
    k = settings["evo_islands"]
    cands = candidates(task, log, len(problems), k, settings["evo_budget"])
    per_search = []
    for s, (run, cs) in enumerate(zip(runs, cands)):
        assert len(cs) == run["candidates"], (len(cs), run["candidates"])  # the recording mirrors the search
        plain = [c for c in cs if c["plain"]]
        per_search.append({
            "solved": float(run["solved_at"] is not None), "candidates": run["candidates"],
            "plain": plain_metrics(task, problems[s], [c["answer"] for c in plain]),
            "children": children_metrics(task, cs),
            "islands": island_metrics(task, log["islands"][s * k:(s + 1) * k], cs)})
    return runs, per_search


# ----------------------------------------------------------------------------------------------
# One policy, the table, the correlations

def measure_policy(path, seed, settings, num_problems, seed_first, reps):
    """Every measure of one checkpoint on the seed's search problems -> a flat summary and per-search rows."""
    model, tok, cfg, m = model_from_checkpoint(path)
    task = make_task(cfg["task"], **cfg["task_options"])
    problems = search.search_problems(task, "train", num_problems, settings["evo_min_plausible"], seed)
    t0 = time.time()
    runs, per_search = run_search(model, tok, task, problems, cfg, settings, seed)
    summary = {"solved": sum(r["solved_at"] is not None for r in runs), "searches": len(runs),
               "candidates": float(np.mean([r["candidates"] for r in runs])),
               "search_seconds": time.time() - t0}
    for part in ("plain", "children", "islands"):
        summary.update({f"{part}.{k}": v for k, v in mean_dicts([s[part] for s in per_search]).items()})
    summary.update({f"plain30.{k}": v for k, v in
                    plain_probe(model, tok, task, problems, cfg, settings, seed + 2_000_003).items()})
    if m > 1:  # a set policy also in the format it was trained in (its pools' diversity)
        summary.update({f"plain30_m{m}.{k}": v for k, v in
                        plain_probe(model, tok, task, problems, cfg, settings, seed + 2_000_003, m).items()})
    # the same 30 at the temperature RL sampled and pools are scored at (1.0, no top-p): where the pool's diversity went
    unclipped = dict(settings, evo_temperature=float(cfg["temperature"]), evo_top_p=1.0)
    for mm in sorted({1, m}):
        summary.update({f"plain30_T1_m{mm}.{k}": v for k, v in
                        plain_probe(model, tok, task, problems, cfg, unclipped, seed + 2_000_003, mm).items()})
    summary.update({f"plain30_T1_own.{k}": summary[f"plain30_T1_m{m}.{k}"] for k in ("diversity", "distinct")})
    summary.update({f"fixed_parents.{k}": v for k, v in
                    parent_probe(model, tok, task, problems, cfg, settings, seed + 3_000_017).items()})
    # the search's own randomness: the same problems, other search seeds (rep 0 is the search above)
    solved = {0: [summary["solved"]]}
    for rep in range(1, reps):
        more, _ = run_search(model, tok, task, problems, cfg, settings, seed + 1000 * rep)
        solved[0].append(sum(r["solved_at"] is not None for r in more))
    for k in [seed_first] if seed_first else []:
        solved[k] = []
        for rep in range(reps):
            seeded, _ = run_search(model, tok, task, problems, cfg, settings, seed + 1000 * rep, k)
            solved[k].append(sum(r["solved_at"] is not None for r in seeded))
        summary["seeded.solved"] = solved[k][0]
        summary["seeded.solved_mean"] = float(np.mean(solved[k]))
    summary["solved_mean"] = float(np.mean(solved[0]))
    summary["solved_reps"] = {str(k): v for k, v in solved.items()}
    return summary, {"problems": [repr(p) for p in problems], "runs": [
        {k: r[k] for k in ("solved_at", "candidates", "mutations")} for r in runs], "per_search": per_search}


def policies_of_seed(runs_dir, algos, seed):
    """[(name, checkpoint)] for a seed: the warm start the runs were trained from, then each algo's run.
    Runs of one seed recorded under different warm-start file names must hold the same weights."""
    finals = [(algo, os.path.join(runs_dir, f"{algo}-pr05-s{seed}", "final.pt")) for algo in algos]
    warms = [load_checkpoint(path)["warm_start"] for _, path in finals]
    first = load_checkpoint(warms[0])["model"]
    for other in warms[1:]:
        weights = load_checkpoint(other)["model"]
        if other != warms[0] and any(not torch.equal(first[k], weights[k]) for k in first):
            raise SystemExit(f"error: seed {seed}'s runs start from different warm starts: {warms}")
    return [("warm", warms[0])] + finals


COLUMNS = {  # table: [(column header, summary key, format)]
    "plain prompts: 30 per problem (T 0.7 top-p 0.95 as the search; T 1.0 as RL and pools), and those the search drew": [
        ("solved", "solved", "{:.0f}"), ("T.7 m1 div.", "plain30.diversity", "{:.1f}"),
        ("T.7 m1 distinct", "plain30.distinct", "{:.1f}"), ("T.7 m1 values/pos", "plain30.values", "{:.1f}"),
        ("T.7 m1 valid", "plain30.valid", "{:.2f}"), ("T.7 m3 div.", "plain30_m3.diversity", "{:.1f}"),
        ("T.7 m3 distinct", "plain30_m3.distinct", "{:.1f}"), ("T1 m1 div.", "plain30_T1_m1.diversity", "{:.1f}"),
        ("T1 m1 distinct", "plain30_T1_m1.distinct", "{:.1f}"), ("T1 m3 div.", "plain30_T1_m3.diversity", "{:.1f}"),
        ("T1 m3 distinct", "plain30_T1_m3.distinct", "{:.1f}"), ("in search: n", "plain.n", "{:.1f}"),
        ("distinct", "plain.distinct", "{:.1f}"), ("values/pos", "plain.values", "{:.1f}"),
        ("valid", "plain.valid", "{:.2f}")],
    "children (per search; fixed parents: 30 children of the same parent pair for every policy)": [
        ("candidates", "candidates", "{:.0f}"), ("children", "children.children", "{:.0f}"),
        ("distinct", "children.distinct", "{:.1f}"), ("distinct share", "children.distinct_share", "{:.2f}"),
        ("edits/parent", "children.edits_per_parent", "{:.2f}"),
        ("edit distinct share (parents edited >1x)", "children.edit_distinct_share", "{:.2f}"),
        ("values/pos", "children.values", "{:.1f}"), ("duplicate", "children.duplicate", "{:.2f}"),
        ("invalid", "children.invalid", "{:.2f}"), ("better", "children.better", "{:.2f}"),
        ("fixed: distinct /30", "fixed_parents.distinct", "{:.1f}"), ("fixed: edits /30", "fixed_parents.edits", "{:.1f}"),
        ("fixed: values/pos", "fixed_parents.values", "{:.1f}"), ("fixed: invalid", "fixed_parents.invalid", "{:.2f}"),
        ("fixed: better", "fixed_parents.better", "{:.2f}")],
    "islands (5 per search, at its end or solve time) and seeding": [
        ("solved", "solved", "{:.0f}"), ("candidates", "candidates", "{:.0f}"),
        ("programs", "islands.programs", "{:.1f}"), ("pass patterns", "islands.patterns", "{:.1f}"),
        ("distinct bests", "islands.bests", "{:.2f}"), ("distinct seeds /5", "islands.seeds", "{:.2f}"),
        ("own plain seeds /5", "islands.seeds_own_plain", "{:.2f}"),
        ("solved, mean of reps", "solved_mean", "{:.1f}"), ("seeded K: solved", "seeded.solved", "{:.0f}"),
        ("seeded K: mean of reps", "seeded.solved_mean", "{:.1f}")],
}
PLAIN_X = [("own-format div. T1", "plain30_T1_own.diversity"), ("T.7 m1 div.", "plain30.diversity"),
           ("T.7 m1 distinct", "plain30.distinct"),
           ("plain distinct in search", "plain.distinct")]
REACH_Y = [("children distinct", "children.distinct"), ("children distinct share", "children.distinct_share"),
           ("edits/parent", "children.edits_per_parent"), ("edit distinct share", "children.edit_distinct_share"),
           ("children values/pos", "children.values"), ("children duplicate", "children.duplicate"),
           ("fixed-parent distinct", "fixed_parents.distinct"), ("island programs", "islands.programs"),
           ("island distinct bests", "islands.bests"), ("island distinct seeds", "islands.seeds"),
           ("solved, mean of reps", "solved_mean")]


def table(results, columns):
    """Markdown: a row per policy and seed, then each policy's mean over seeds."""
    head = "| policy | seed | " + " | ".join(h for h, _, _ in columns) + " |"
    lines = [head, "|" + "---|" * (len(columns) + 2)]

    def cell(value, fmt):
        return "" if value is None or np.isnan(value) else fmt.format(value)
    for name in dict.fromkeys(r["policy"] for r in results):
        mine = [r for r in results if r["policy"] == name]
        for r in mine:
            lines.append(f"| {name} | {r['seed']} | " + " | ".join(cell(r["summary"].get(k), f) for _, k, f in columns) + " |")
        means = [np.mean([r["summary"][k] for r in mine]) if all(k in r["summary"] for r in mine) else None
                 for _, k, _ in columns]
        lines.append(f"| **{name}** | mean | " + " | ".join(cell(v, f) for v, (_, _, f) in zip(means, columns)) + " |")
    return "\n".join(lines)


def correlations(results):
    """Over the policy-seed pairs: Pearson r and Spearman rho of each plain-diversity measure with each
    children / islands measure."""
    out = {}
    for xname, xkey in PLAIN_X:
        x = [r["summary"][xkey] for r in results]
        for yname, ykey in REACH_Y:
            y = [r["summary"][ykey] for r in results]
            out[f"{xname} ~ {yname}"] = {"pearson": correlation(x, y), "spearman": correlation(x, y, spearman=True)}
    return out


def main():
    parser = argparse.ArgumentParser(description="does plain-prompt diversity reach the search's children and "
                                                 "islands? (training problems only)")
    parser.add_argument("--runs-dir", default="out/p34", help="holds ALGO-pr05-sSEED/final.pt")
    parser.add_argument("--algos", nargs="+", default=["grpo", "vpo"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--problems", type=int, default=16, help="search problems per seed (training split)")
    parser.add_argument("--seed-first", type=int, default=0, metavar="K",
                        help="also rerun each search with every island's first K calls on the plain prompt")
    parser.add_argument("--reps", type=int, default=1,
                        help="search seeds per problem set (S, S+1000, ...): the solved counts' search noise")
    parser.add_argument("--json", default="out/reach/reach.json")
    args = parser.parse_args()
    settings = dict(search.SETTINGS)
    results = []
    for seed in args.seeds:
        for name, path in policies_of_seed(args.runs_dir, args.algos, seed):
            summary, detail = measure_policy(path, seed, settings, args.problems, args.seed_first, args.reps)
            results.append({"policy": name, "seed": seed, "checkpoint": path, "summary": summary, "detail": detail})
            print(f"seed {seed} {name:5s} solved {summary['solved']}/{summary['searches']}"
                  + (f", seeded K={args.seed_first}: {summary['seeded.solved']}" if args.seed_first else "")
                  + f" ({summary['search_seconds']:.0f} s search)", flush=True)
    corr = correlations(results)
    os.makedirs(os.path.dirname(args.json) or ".", exist_ok=True)
    with open(args.json, "w") as f:
        json.dump({"settings": settings, "seed_first": args.seed_first, "results": results, "correlations": corr},
                  f, indent=1, default=float)
    for title, columns in COLUMNS.items():
        print(f"\n### {title}" + (f" (K = {args.seed_first})" if "seeding" in title else "") + "\n")
        print(table(results, columns))
    print(f"\n### correlation over the {len(results)} policy-seed pairs: Pearson r / Spearman rho\n")
    print("| measure | " + " | ".join(x for x, _ in PLAIN_X) + " |")
    print("|" + "---|" * (len(PLAIN_X) + 1))
    for y, _ in REACH_Y:
        print(f"| {y} | " + " | ".join(f"{corr[f'{x} ~ {y}']['pearson']:+.2f} / {corr[f'{x} ~ {y}']['spearman']:+.2f}"
                                      for x, _ in PLAIN_X) + " |")

if __name__ == "__main__":
    main()
