"""How a board's wall time would shrink with more nodes: its jobs at the seconds the committed run
logs measured, list-scheduled longest first on 1, 2, 4, ... workers (one job at a time each, as a
one-CPU Ray node; workers.schedule_left, the ETA's own schedule), beside the critical path, the
longest chain of jobs that wait for each other (warm start -> training run -> its pools -> the
seed's screens -> a search), which no number of nodes beats.

    python lab/scale_out.py                      # the voting board and the leaderboard (SPEED.md)
    python lab/scale_out.py --nodes 1 2 4 8 16

A job's seconds, in this order: its own line in the board's run log ("warm start code/0 ready
(623s)", "trained maze/vpo/1 (292s)"); a search's seconds in its result file (the search and its
sampling control); the longest a progress line saw it run (pools, screens, the optimum: a lower
bound); else the lab's first estimate (workers.Progress.expected, EXPECTED_S on the 2-core VM)
times the median ratio of logged to estimated seconds of the jobs of its kind and task.
The leaderboard was assembled from several commands, so its jobs' seconds come from every board
log at its settings (the voting run and the maze rows' run) and, for a method no log timed, from
that estimate; the output says how much of the board's seconds each source gives.
Deliberately left out: the time to start Ray and the workers, moving files between nodes, the
report at the end, and nodes with several CPUs (a node of c CPUs is c workers here).
"""

import argparse
import glob
import json
import os
import re
import statistics
import sys
from types import SimpleNamespace

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from lab import experiment, workers  # noqa: E402

FIGURES = os.path.join(ROOT, "docs", "figures")
VOTING = os.path.join(
    FIGURES, "voting"
)  # a whole board in one command: 3 methods, 3 tasks, 3 seeds
BOARD = os.path.join(FIGURES, "leaderboard")
BOARD_LOGS = [os.path.join(VOTING, "run.log"), os.path.join(BOARD, "against_maze_rows.log")]
ENDED = re.compile(r"\] (?:warm start (\S+) ready|trained (\S+)) \((\d+)s\)")
SEEN = re.compile(r"(warm|oracle|pools|screen|search_set|search) (\S+/\S+) (\d+)s of ~")
PLAN = re.compile(
    r"running \d+ method\(s\) \(([^)]*)\) on ([^,]+(?:, [a-z_]+)*), seed\(s\) ([\d, ]+)"
)


def key_of(name):
    """ "code/vpo/0" -> ("code", "vpo", 0); "code/0" -> ("code", 0)."""
    parts = name.split("/")
    return (*parts[:-1], int(parts[-1]))


def read_log(path):
    """A run log -> ({(kind, key): seconds} of the jobs it timed, {(kind, key): longest seen})."""
    ended, seen = {}, {}
    with open(path) as f:
        for line in f:
            for match in ENDED.finditer(line):
                warm, trained, seconds = match.groups()
                ended["warm" if warm else "train", key_of(warm or trained)] = float(seconds)
            for kind, name, seconds in SEEN.findall(line):
                job = kind, key_of(name)
                seen[job] = max(seen.get(job, 0.0), float(seconds))
    return ended, seen


def plan_of(path):
    """The methods, tasks and seeds a run log's plan line names."""
    with open(path) as f:
        match = PLAN.search(f.read(4000))
    methods, tasks, seeds = match.groups()
    return methods.split(", "), tasks.split(", "), [int(s) for s in seeds.split(", ")]


def board_jobs(methods, tasks, seeds, searched):
    """Every job of a board as experiment.Headline.job_list lists them for one command (no
    --against): per task and seed its warm start (not the maze's, a committed base; not the
    collinear control's, persona's), the maze's optimum, the pools of the warm start (one answer and
    m) and of every run; the runs; per code seed the optimum, a screen and a search per checkpoint,
    and a search writing m children per call for a set method. searched(method, seed): whether it
    searched."""
    jobs = []
    for t in tasks:
        for s in seeds:
            if t not in ("maze", "persona_collinear") or (
                t == "persona_collinear" and "persona" not in tasks
            ):
                jobs.append(("warm", (t, s)))
            if t == "maze":
                jobs.append(("oracle", (t, "optimum", s)))
            rows = ["warm_start", "warm_start_m3"] + [a for a in methods if runs_on(t, a)]
            jobs += [("pools", (t, a, s)) for a in rows]
    jobs += [("train", (t, a, s)) for t in tasks for a in methods if runs_on(t, a) for s in seeds]
    for s in seeds if "code" in tasks else []:
        jobs.append(("oracle", ("code", "optimum", s)))
        for a in ["warm_start"] + methods:
            if searched(a, s):
                jobs += [("screen", ("code", a, s)), ("search", ("code", a, s))]
                if a != "warm_start" and m_of("code", a) > 1:
                    jobs.append(("search_set", ("code", a, s)))
    return jobs


def runs_on(task, method):
    return task == "code" or method not in experiment.CODE_ONLY


def m_of(task, method):
    return experiment.train.answers_per_rollout(experiment.run_config(task, method, 0, "out"))


def estimate(kind, key):
    """The lab's first estimate of a job's seconds on the 2-core VM (workers.Progress.expected)."""
    cfg = experiment.run_config(key[0], key[1], key[-1], "out") if kind == "train" else None
    return workers.Progress.expected(SimpleNamespace(scale=1.0), kind, key, cfg)


def search_seconds(results, kind, key):
    """A search's seconds in its result file (the search and its sampling control), or None."""
    path = os.path.join(results, f"{key[0]}-{key[1]}-s{key[2]}.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        record = json.load(f).get(kind)
    if not record or "seconds" not in record:
        return None
    return record["seconds"] + record.get("sampling_seconds", 0.0)


def timed(jobs, logs, results, by_method=False):
    """{job: (seconds, source)}: a job's own logged seconds, its search record, the longest a
    progress line saw it, else (by_method: the median of its task and method's logged runs, over
    seeds, then) the lab's estimate."""
    ended, seen = {}, {}
    for path in logs:
        e, s = read_log(path)
        ended.update(e)
        for job, seconds in s.items():
            seen[job] = max(seen.get(job, 0.0), seconds)
    per_method, ratios = {}, {}
    for (kind, key), seconds in ended.items():
        per_method.setdefault((kind, key[:-1]), []).append(seconds)
        ratios.setdefault((kind, key[0]), []).append(seconds / estimate(kind, key))
    every = [r for rs in ratios.values() for r in rs] or [1.0]

    def rescaled(kind, key):
        """The estimate times how the logged jobs of its kind and task went against theirs (the
        ETA's own correction, Progress.speed)."""
        task = "persona" if key[0] == "persona_collinear" else key[0]
        return estimate(kind, key) * statistics.median(ratios.get((kind, task), every))

    out = {}
    for kind, key in jobs:
        job = kind, key
        same = per_method.get((kind, key[:-1])) if by_method else None
        if kind == "train" and by_method and key[0] == "persona_collinear" and not same:
            # the control trains persona's prompts and model: only its reward differs
            same = per_method.get((kind, ("persona", key[1])))
        if job in ended:
            out[job] = ended[job], "its log line"
        elif kind.startswith("search") and search_seconds(results, kind, key) is not None:
            out[job] = search_seconds(results, kind, key), "its result file"
        elif same:
            out[job] = statistics.median(same), "its method's log lines"
        elif job in seen:
            out[job] = max(seen[job], rescaled(*job)), "progress lines or estimate"
        else:
            out[job] = rescaled(*job), "the lab's estimate, rescaled"
    return out


def dependencies(jobs):
    """{job: [the jobs it waits for]} (workers._waits_for: the ETA's own rules)."""
    shared = experiment.SHARED_WARMSTART
    return {j: [o for o in jobs if o != j and workers._waits_for(j, o, shared)] for j in jobs}


def critical_path(seconds, needs):
    """The longest chain of jobs that wait for each other -> (its seconds, its jobs)."""
    best = {}

    def longest(job):
        if job not in best:
            before = max((longest(n) for n in needs[job]), default=(0.0, []))
            best[job] = (before[0] + seconds[job], before[1] + [job])
        return best[job]

    return max((longest(j) for j in seconds), key=lambda found: found[0])


def makespan(seconds, needs, nodes):
    """The board's wall time on `nodes` one-job workers, list-scheduled longest first."""
    return workers.schedule_left({}, {j: (s, needs[j]) for j, s in seconds.items()}, nodes)


def report(name, jobs, times, nodes, measured=None):
    seconds = {j: s for j, (s, _) in times.items()}
    needs = dependencies(jobs)
    path_s, path = critical_path(seconds, needs)
    total = sum(seconds.values())
    sources = {}
    for s, source in times.values():
        sources[source] = sources.get(source, 0.0) + s
    lines = [
        f"### {name}",
        "",
        f"{len(jobs)} jobs, {total:,.0f} job-seconds; their seconds from "
        + ", ".join(f"{source} {100 * s / total:.0f}%" for source, s in sources.items())
        + (f"; measured wall time with 2 workers: {measured:,.0f} s" if measured else ""),
        "",
        "| nodes | makespan (s) | speed-up over 1 | over the critical path |",
        "|---|---|---|---|",
    ]
    one = makespan(seconds, needs, 1)
    for n in nodes:
        span = makespan(seconds, needs, n)
        lines.append(f"| {n} | {span:,.0f} | {one / span:.2f}x | {span / path_s:.2f}x |")
    chain = " -> ".join(
        f"{k} {'/'.join(map(str, key))} ({seconds[k, key]:.0f} s)" for k, key in path
    )
    lines += ["", f"Critical path: {path_s:,.0f} s: {chain}.", ""]
    return "\n".join(lines)


def voting_board(nodes):
    """The voting run: one command, a whole board (its log names the methods, tasks and seeds)."""
    log = os.path.join(VOTING, "run.log")
    methods, tasks, seeds = plan_of(log)
    results = os.path.join(VOTING, "results")
    jobs = board_jobs(methods, tasks, seeds, lambda a, s: True)
    with open(log) as f:
        wall = float(re.search(r"wall time (\d+) s", f.read()).group(1))
    times = timed(jobs, [log], results)
    return report(
        f"One command's board (docs/figures/voting/run.log: {', '.join(methods)})",
        jobs,
        times,
        nodes,
        measured=wall,
    )


def leaderboard(nodes):
    """docs/figures/leaderboard as if run as one command: every row its result files hold."""
    results = os.path.join(BOARD, "results")
    rows = []
    for path in sorted(glob.glob(os.path.join(results, "*.json"))):
        with open(path) as f:
            rows.append(json.load(f))
    tasks = [t for t in experiment.TASKS if any(r["task"] == t for r in rows)]
    seeds = sorted({r["seed"] for r in rows})
    trained = {r["method"] for r in rows if "training" in r}
    methods = [m for m in dict.fromkeys(r["method"] for r in rows) if m in trained]
    searched = {(r["method"], r["seed"]) for r in rows if r["task"] == "code" and "search" in r}
    jobs = board_jobs(methods, tasks, seeds, lambda a, s: (a, s) in searched)
    times = timed(jobs, BOARD_LOGS, results, by_method=True)
    return report(f"The leaderboard ({len(methods)} trained methods)", jobs, times, nodes)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", nargs="*", type=int, default=[1, 2, 4, 8, 16, 32, 64])
    args = p.parse_args(argv)
    print(voting_board(args.nodes))
    print(leaderboard(args.nodes))


if __name__ == "__main__":
    main()
