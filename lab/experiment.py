"""The headline experiment: does training for diversity make test-time search pay off more as the
budget grows? Many runs, compared: the lab's entry point (train.py trains one run).

    python lab/experiment.py                        # the default comparison, sized for a laptop CPU
    python lab/experiment.py --quick                # a minute's smoke test, numbers meaningless
    python lab/experiment.py --seeds 0 1 2          # mean, spread and intervals over seeds
    python lab/experiment.py --ablations            # also the ablations and baselines (ABLATIONS)
    python lab/experiment.py --set out_dir=out/h1 kl_coef=0 pool_n=60   # any train.DEFAULTS key
    python lab/experiment.py --report out/headline  # reprint (and rewrite) the report from results
    python lab/experiment.py --algos NEW --seeds 0 1 2 --against docs/figures/leaderboard

For each task (persona, code, the maze, the collinear control) and seed: one warm start (the maze's:
its committed base), every method from it, a pool of answers per held-out problem from every
checkpoint (warm start included), the optimum on code and the maze (lab/oracle.py), then, on code
problems no pool solved, an evolutionary search per checkpoint at equal budgets. A run's settings:
train.DEFAULTS <- configs/<task>.yaml (`--quick`: configs/tiny.yaml over it) <- --set <- its row in
VARIANTS <- algo, seed, out_dir; the evaluation's: config.EVALUATION's keys of the same config. Jobs
run in `--workers` processes (workers.py), each once what it needs is done (Headline below); with
`--ray [ADDRESS]` each runs as a task on a Ray cluster instead (ray_jobs.py).
Writes into out_dir: runs/, results/ (one small JSON per task, method and seed: what report.py
reads; commit them to merge seeds run in different sessions) and tables.py's report; warm starts go
to the cache every run shares (warmstart_dir, out/warmstart/). A finished run or result is reused
only while the code that made it is unchanged (lab/stored.py keeps what other code made in
earlier/ and takes it back when the code returns); --set overwrite=true redoes every run and result.
Ctrl-C (or a kill) at any time: the same command continues, reusing finished runs and evaluations,
resuming the rest; a second command on the same out_dir is refused while the first runs, naming it.
Deliberately left out: hyperparameter sweeps, more than one GPU.
"""

import argparse
import difflib
import json
import os
import subprocess
import sys
import time
from functools import partial

# the repository: configs/, the reference
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# so that `python lab/experiment.py` finds the reference and the lab package
sys.path.insert(0, HERE)

import numpy as np

import config
import evolve
import tracking
import train
from config import (
    ONE_LINE_ERRORS,
    ConfigError,
    make_task,
    parse_value,
    pick_device,
    settings_parser,
)
from lab import ray_jobs, report, tables
from lab.report import (
    read_record,
    training_summary,
    update_record,
    warm_start_answers,
    warm_start_row,
)
from lab.stored import (
    POOL_KEYS,
    SEARCH_KEYS,
    board_problems,
    check_against,
    file_sha256,
    keep_by_source,
    load_board,
    result_key,
    row_sources,
    run_status,
    same_key,
)
from lab.workers import (
    Job,
    Progress,
    default_workers,
    machine,
    oracle_job,
    pools_job,
    run_jobs,
    search_job,
    solved_job,
    steps_logged,
    warm_start_job,
)
from runfiles import EVAL_KEYS, lock_folder, read_source, writing
from warmstart import warmstart_path

TASKS = ["persona", "code", "maze", "persona_collinear"]  # each trains with configs/<task>.yaml
# the control's prompts and demonstrations are persona's (only its reward differs): one warm start
SHARED_WARMSTART = {"persona_collinear": "persona"}
ALGOS = ["grpo", "vpo"]
# Methods that are an algorithm of train.ADVANTAGES run with other settings, each at the value its
# paper gives (DAPO's clip-higher 0.28; the entropy bonus has no paper default: 0.01 is common).
VARIANTS = {
    # compute-matched GRPO: m times the prompts per step (run_config), as many answers as VPO
    "grpo_x3": ("grpo", {}),
    # both halves of Dr. GRPO
    "dr_grpo": ("grpo", {"scale_rewards": "none", "loss_norm": "constant"}),
    # clipping acts only from a batch's second update (the ratio is 1 at the first): vs grpo_2ep
    "grpo_2ep": ("grpo", {"epochs_per_batch": 2}),
    "grpo_clip_higher": ("grpo", {"clip_high": 0.28, "epochs_per_batch": 2}),
    "grpo_entropy": ("grpo", {"entropy_coef": 0.01}),
    # DAPO draws until P groups spread; verl's recipe gives up after 10 generation batches (of 3x
    # the prompts), here after 10 rounds of P, to bound the CPU cost (metrics.jsonl)
    "dapo": ("grpo", {"clip_high": 0.28, "epochs_per_batch": 2, "dynamic_sampling": 10}),
    # not the paper's: RL also on a quarter of parent-format prompts, to train the search's mutation
    "grpo_mutation": ("grpo", {"mutation_share": 0.25}),
    "vpo_mutation": ("vpo", {"mutation_share": 0.25}),
}
# parents are programs: no such rows on the persona tasks
CODE_ONLY = {"grpo_mutation", "vpo_mutation"}
ABLATIONS = ["multi_rlvr", "random_weights", "goal_conditioned", "vpo_loo", "max_at_k", "gdpo"]
ABLATIONS += ["maxrl", "rloo", *VARIANTS]
# outcome-based exploration (exploration.py): the paper's best historical method and batch
# exploration; lab/exploration.py runs all four beside GRPO and VPO
ABLATIONS += ["ucb_con", "batch_explore"]
# The exploration paper's open choices, each UCB-Con with one changed (lab/exploration.py measures
# them; not board rows): the bonus added before the z-score, and N counting this step's answers.
OPEN_CHOICES = {
    "ucb_con_before": ("ucb_con", {"explore_bonus_at": "before"}),
    "ucb_con_current": ("ucb_con", {"explore_count_current": True}),
}
# VPO with a per-answer credit (vpo_credit, vpo.py; not board rows): the unbiased reward-to-go and
# pass@k training's marginal, each beside VPO's set credit (RESULTS.md: "Credit inside VPO's set")
CREDIT_FORMS = {
    "vpo_togo": ("vpo", {"vpo_credit": "togo"}),
    "vpo_marginal": ("vpo", {"vpo_credit": "marginal"}),
}
# A historical exploration method counts outcomes per problem, so on a task that draws fresh
# problems every step it gets a finite training set visited this many times (its one difference).
HISTORICAL_EPOCHS = 10


def run_config(task_name, name, seed, out_dir, quick=False, overrides=None):
    """The train.py config of one run of method `name` (an algorithm, one of VARIANTS, OPEN_CHOICES
    or CREDIT_FORMS)."""
    base = train.resolve_config(os.path.join(HERE, "configs", f"{task_name}.yaml"))
    if quick:  # tiny.yaml's sizes over the task's file; a committed base keeps its own model
        model = base["model"] if base["warmstart_from"] else None
        base = train.resolve_config(os.path.join(HERE, "configs", "tiny.yaml"), base=base)
        base["model"] = model or base["model"]
    algo, variant = variant_of(name)
    if name == "grpo_x3":
        variant = {"prompts_per_step": base["prompts_per_step"] * base["answers_per_rollout"]}
    if historical(name) and not {**base, **(overrides or {})}["train_problems"]:
        visits = base["steps"] * base["prompts_per_step"]
        variant = {**variant, "train_problems": max(1, visits // HISTORICAL_EPOCHS)}
    spec = {
        **(overrides or {}),
        **variant,
        "algo": algo,
        "seed": seed,
        "out_dir": os.path.join(out_dir, "runs", f"{task_name}-{name}-s{seed}"),
        "quiet": True,
        "threads": 1,
    }
    return train.resolve_config(
        overrides=[f"{k}={json.dumps(v) if isinstance(v, dict) else v}" for k, v in spec.items()],
        base=base,
    )


def variant_of(name):
    """(algorithm, its settings) of method `name`: a plain algorithm has none."""
    return VARIANTS.get(name) or OPEN_CHOICES.get(name) or CREDIT_FORMS.get(name) or (name, {})


def historical(name):
    """Whether method `name` is a historical exploration method (it needs a finite training set)."""
    algo = variant_of(name)[0]
    return algo in train.ADVANTAGES and train.ADVANTAGES[algo].explores == "historical"


def own_keys(methods):
    """{method: the settings in which its runs may differ from the board's GRPO}: its variant's
    keys, grpo_x3's prompts per step, a historical exploration method's finite training set."""
    own = {a: set(variant_of(a)[1]) for a in methods + ["grpo"]}
    own["grpo_x3"] = {"prompts_per_step"}  # m times the prompts: its one difference
    for a in filter(historical, methods):  # run_config gives it a finite training set
        own[a].add("train_problems")
    return own


def code_state(root=HERE):
    """The commit, and the reference files that differ from it: "729e5e2 (edited: vpo.py)"."""

    def git(*args):
        return subprocess.run(["git", *args], capture_output=True, text=True, cwd=root).stdout

    try:
        commit = git("rev-parse", "--short", "HEAD").strip()
        edited = [
            line[3:] for line in git("status", "--porcelain", "--", ":(glob)*.py").splitlines()
        ]
    except OSError:
        return "unknown"
    if not commit:
        return "unknown"
    return f"{commit} (edited: {', '.join(edited)})" if edited else f"{commit} (as committed)"


# ---- The experiment ----


class Headline:
    """One headline experiment while it runs: every run's config (refused up front if its folder
    holds another run), the plan, then a method per event, storing what a finished job brought and
    queueing in `ready` what it made possible: warm_start_ready -> run_trained -> checkpoint_ready
    -> pools_scored -> problems_screened -> search_done (optimum_found beside them). What an earlier
    run of the same command left on disk is reused. Against a board (--against) only the new methods
    run, on the board's problems."""

    def __init__(
        self, tasks, methods, seeds, settings, out_dir, quick, overrides, progress, against=None
    ):
        self.tasks = tasks
        self.methods = methods
        self.seeds = seeds
        self.settings = settings  # the evaluation's, every task's alike (evaluation_settings)
        self.out_dir = out_dir
        self.progress = progress
        # a committed board's records
        self.board = load_board(against, tasks, seeds) if against else None
        self.configs = {
            (t, a, s): run_config(t, a, s, out_dir, quick, overrides)
            for t in tasks
            for a in methods
            for s in seeds
            if t == "code" or a not in CODE_ONLY
        }
        # a task's settings
        self.first = {(t, s): self.configs[(t, methods[0], s)] for t in tasks for s in seeds}
        # a run names its warm start: its task's committed base (the maze's), else the cached one
        # of its task and seed; another's is never taken
        self.warm_files = {}
        for t in tasks:
            for s in seeds:
                first = self.first[
                    (SHARED_WARMSTART[t] if SHARED_WARMSTART.get(t) in tasks else t, s)
                ]
                self.warm_files[t, s] = first["warmstart_from"] or warmstart_path(first)
        # the committed bases among them (configs/<task>.yaml's warmstart_from), hashed once
        self.bases = {
            key: {"path": path, "sha256": file_sha256(path)}
            for key, path in self.warm_files.items()
            if self.first[key]["warmstart_from"] and os.path.exists(path)
        }
        for (t, _, s), cfg in self.configs.items():
            cfg["warmstart_from"] = self.warm_files[t, s]
        if self.board:  # a method's own keys may differ from the board's runs, nothing else
            check_against(self.board, against, self.configs, settings, own_keys(methods))
        # the working tree's code behind each row, and what it makes of the results on disk
        self.sources = row_sources()
        self.overwrite = any(cfg["overwrite"] for cfg in self.configs.values())
        # the board's evaluation: its warm starts' pools, its optimum, its search problems
        searched = not self.board or "search" in self.board[("code", "grpo", seeds[0])]
        self.code_search = "code" in tasks and settings["evo_problems"] > 0 and searched
        self.keep_by_code()
        self.refuse_other_runs()
        # every job that may run, in one list: the estimate plans it, the events queue from it
        self.jobs = dict.fromkeys(self.job_list())
        # the code that runs, not what is checked out at the end
        self.stamp = {"commit": code_state(), "machine": machine()}
        self.ready = []  # the jobs whose inputs are done, waiting for a worker
        # (task, method, seed) -> (path, m, cfg): every checkpoint to evaluate
        self.checkpoints = {}
        self.pooled = set()  # the checkpoints whose pools are in their result files
        # seed -> its candidate search problems, those some pool solved, the screens still out
        self.screens = {}

    def refuse_other_runs(self):
        """Refuse a run folder that holds a run with other settings: before anything runs, not
        after an hour."""
        for cfg in self.configs.values():
            if run_status(cfg) == "other" and not cfg["overwrite"]:
                raise ConfigError(
                    f"{cfg['out_dir']} holds a run with other settings; choose another out_dir "
                    f"(--set out_dir=...) or --set overwrite=true"
                )

    def source(self, method):
        """The fingerprint of the code behind a row: a run's, a warm start's pools', the
        optimum's."""
        if warm_start_answers(method) is not None:
            return self.sources["warm"]
        return self.sources["optimum" if method == "optimum" else "run"]

    def keep_by_code(self):
        """Every run folder and result file made by other code than the working tree's moves to
        earlier/ beside it, and what this very code made comes back from there; a line per change
        says what happens."""
        rows = list(self.configs) + [
            (t, a, s)
            for t in self.tasks
            for s in self.seeds
            for a in self.evaluated(t, s) + (["optimum"] if self.has_optimum(t) else [])
        ]
        notes = {}
        for key in rows:
            made = read_record(self.out_dir, *key) or {}
            path = report.record_path(self.out_dir, *key)
            changed, restored = keep_by_source(path, made.get("source"), self.source(key[1]))
            if key in self.configs:
                run = self.configs[key]["out_dir"]
                changed, restored = keep_by_source(run, read_source(run), self.source(key[1]))
            doing = "training" if key in self.configs else "evaluating"
            if restored or changed is None or changed:
                notes.setdefault((tuple(changed or ()), restored, doing), []).append(key)
        for (changed, restored, doing), keys in notes.items():
            names = ", ".join("/".join(map(str, k)) for k in keys)
            it, was = ("it", "was") if len(keys) == 1 else ("them", "were")
            self.progress.say(
                f"{names}: made by this very code before (kept in earlier/): reusing {it}"
                if restored
                else f"{', '.join(changed)} changed since {names} {was} made: {doing} {it} again"
                if changed
                else f"{names} {was} made before results recorded their code: {doing} {it} again"
            )

    def record(self, key, **fields):
        """Store fields in key's result file with the code and machine that made them, and the
        committed base it started from (its hash: a base replaced under the same name shows)."""
        task, _, seed = key
        if (task, seed) in self.bases:
            fields["base"] = self.bases[task, seed]
        update_record(self.out_dir, *key, source=self.source(key[1]), **self.stamp, **fields)

    def plan(self):
        """Say what will run; plan every job at its expected seconds, minus what is on disk; say how
        long."""
        settings = self.settings
        progress = self.progress
        progress.say(
            f"running {len(self.methods)} method(s) ({', '.join(self.methods)}) on "
            f"{', '.join(self.tasks)}, seed(s) {', '.join(map(str, self.seeds))}: "
            f"{len(self.keys('train'))} training runs from {len(self.keys('warm'))} warm starts, "
            f"then pools of {settings['pool_n']} answers on {settings['pool_problems']} held-out "
            "problems each"
            + (
                f", then evolutionary search (budget {settings['evo_budget']}) on up to "
                f"{settings['evo_problems']} hard code problems per seed and checkpoint"
                if self.code_search
                else ""
            )
            + "."
        )
        for kind, key in self.jobs:  # less what is on disk: a cached warm start, a finished run
            if kind == "warm" and os.path.exists(self.warm_files[key]):
                continue
            if kind != "train":
                progress.plan(kind, key)
                continue
            cfg = self.configs[key]
            status = self.run_status(cfg)
            if status != "finished":
                steps_done = steps_logged(cfg["out_dir"]) if status == "unfinished" else 0
                progress.plan(kind, key, cfg, steps_done)
        where = (
            f"with {progress.workers} worker processes" if progress.workers else "in this process"
        )
        progress.say(
            f"writing to {self.out_dir}/ (runs/, results/, summary.md, figures) {where}; "
            "expected time about "
            f"{progress.seconds_left() / 60:.1f} min on this CPU ({progress.machine_note}; the "
            "progress lines below correct it as the runs show their pace)"
        )

    def job_list(self):
        """Every job the experiment may run, (kind, key) in the order the estimate plans them: per
        task and seed its warm start, the maze's optimum and every checkpoint's pools; the training
        runs; per seed code's optimum, then its screens and searches. The events queue their jobs
        from this list; what is on disk (a cached warm start, a finished run, a stored result) is
        skipped as they find it."""
        jobs = []
        for t in self.tasks:
            for s in self.seeds:
                if SHARED_WARMSTART.get(t) not in self.tasks:  # else it waits for the shared one
                    jobs.append(("warm", (t, s)))
                # the best any policy could reach (lab/oracle.py); a board holds its own
                if t == "maze" and not self.board:
                    jobs.append(("oracle", (t, "optimum", s)))
                trained = [a for a in self.methods if (t, a, s) in self.configs]
                jobs += [("pools", (t, a, s)) for a in self.evaluated(t, s) + trained]
        jobs += [("train", key) for key in self.configs]
        for s in self.seeds if "code" in self.tasks else []:
            if not self.board:
                jobs.append(("oracle", ("code", "optimum", s)))
            searched = self.evaluated("code", s)[:1] + self.methods if self.code_search else []
            for a in searched:
                if not self.board:  # a board's search problems need no screen
                    jobs.append(("screen", ("code", a, s)))
                jobs.append(("search", ("code", a, s)))
                # a set policy also searches writing m children per call
                if a != "warm_start" and train.answers_per_rollout(self.configs["code", a, s]) > 1:
                    jobs.append(("search_set", ("code", a, s)))
        return jobs

    def keys(self, kind, task=None, seed=None):
        """The keys of the listed jobs of `kind` (on a task, a seed), in the list's order."""
        return [
            key
            for k, key in self.jobs
            if k == kind and task in (None, key[0]) and seed in (None, key[-1])
        ]

    def start(self):
        """Queue the warm starts to train (one in the cache is ready at once) -> the queue."""
        # train it, or find it in the cache (or the task's committed base)
        for t, s in self.keys("warm"):
            cfg = dict(self.first[(t, s)], warmstart_from="")
            if os.path.exists(self.warm_files[t, s]):
                self.warm_start_ready(t, s, self.warm_files[t, s])
            elif self.warm_files[t, s] != warmstart_path(cfg):
                raise FileNotFoundError(
                    f"{t}'s base {self.warm_files[t, s]} is missing (configs/{t}.yaml's "
                    "warmstart_from; lab/maze_base.py makes the maze's)"
                )
            else:
                done = partial(self.warm_start_ready, t, s)
                self.queue("warm", (t, s), warm_start_job, (cfg,), done)
        return self.ready

    def warm_start_ready(self, task, seed, path):
        """For its task and each task sharing it: the warm start is evaluated (for one answer and
        for m), the optimum computed (code, the maze), every run from it trained, resumed or reused
        (runs are deterministic)."""
        for t in [task] + [u for u in self.tasks if SHARED_WARMSTART.get(u) == task]:
            warm_cfg = dict(self.first[(t, seed)], algo="warm_start", warmstart_from=path)
            m = warm_cfg["answers_per_rollout"]
            for name, answers in zip(self.evaluated(t, seed), (1, m)):
                self.checkpoint_ready((t, name, seed), path, answers, warm_cfg)
            # the best any policy could reach on these problems (code, maze)
            optimum = (t, "optimum", seed)
            if ("oracle", optimum) in self.jobs and not self.stored(
                "oracle", optimum, "pools", result_key(warm_cfg, self.settings, POOL_KEYS)
            ):
                args = (warm_cfg, self.settings, seed, m)
                done = partial(self.optimum_found, t, seed, warm_cfg)
                self.queue("oracle", optimum, oracle_job, args, done)
            for key in self.keys("train", t, seed):
                cfg = self.configs[key]
                status = self.run_status(cfg)
                if status == "finished":
                    self.progress.say(f"reusing finished run {cfg['out_dir']}")
                    show_finished(cfg)  # its curves beside those trained now (report_to)
                    self.run_trained(key, cfg["out_dir"])
                    continue
                cfg["resume"] = status == "unfinished"
                if cfg["resume"]:
                    self.progress.say(f"resuming unfinished run {cfg['out_dir']}")
                self.queue("train", key, train.train, (cfg,), partial(self.run_trained, key), cfg)

    def queue(self, kind, key, fn, args, done, cfg=None):
        """A job whose inputs are done: a worker runs fn(*args), then done(its result) runs here."""
        self.ready.append(Job(kind, key, fn, args, done, cfg))

    def run_status(self, cfg):
        """run_status, but --set overwrite=true trains every run again."""
        status = run_status(cfg)
        return "empty" if self.overwrite and status in ("finished", "unfinished") else status

    def evaluated(self, task, seed):
        """The warm start's rows: asked for one answer and for m (where the set methods start from;
        one row where m is 1); none against a board, which holds them."""
        m = self.first[(task, seed)]["answers_per_rollout"]
        return [] if self.board else list(dict.fromkeys(["warm_start", warm_start_row(m)]))

    def has_optimum(self, task):
        """Whether a task's rows include the optimum: code's with its search, the maze's always."""
        return task == "maze" or (task == "code" and self.code_search)

    def optimum_found(self, task, seed, warm_cfg, optimum):
        optimum["key"] = result_key(warm_cfg, self.settings, POOL_KEYS)
        self.record((task, "optimum", seed), m=warm_cfg["answers_per_rollout"], pools=optimum)

    def run_trained(self, key, run_dir):
        """A run finished (now or before): its training summary into its result file, final.pt
        evaluated."""
        cfg = self.configs[key]
        m = train.answers_per_rollout(cfg)
        with open(os.path.join(run_dir, "metrics.jsonl")) as f:
            self.record(key, m=m, training=training_summary([json.loads(line) for line in f]))
        self.checkpoint_ready(key, os.path.join(run_dir, "final.pt"), m, cfg)

    def checkpoint_ready(self, key, path, m, cfg):
        self.checkpoints[key] = (path, m, cfg)
        task, _, seed = key
        if self.stored("pools", key, "pools", result_key(cfg, self.settings, POOL_KEYS)):
            self.has_pools(key)
        else:
            args = (path, self.first[(task, seed)], self.settings, seed, m)
            self.queue("pools", key, pools_job, args, partial(self.pools_scored, key))

    def pools_scored(self, key, result):
        record, rewards = result
        path, m, cfg = self.checkpoints[key]
        record["key"] = result_key(cfg, self.settings, POOL_KEYS)
        # a few problems' reward vectors, for reward_vectors.png (redrawn from the result file)
        record["reward_vectors"] = rewards[:3].round(3).tolist()
        self.record(key, m=m, pools=record)
        self.has_pools(key)

    def has_pools(self, key):
        """Once a seed's code checkpoints all have pools, each pool screens the candidate search
        problems (held-out, >= evo_min_plausible plausible programs): the search takes those none
        solves, as the paper."""
        self.pooled.add(key)
        task, _, seed = key
        if self.board and task == "code" and self.code_search:  # the board's problems: no screen
            return self.queue_searches(key, board_problems(self.board, "code", seed, "search"))
        code = self.keys("screen", "code", seed)
        waiting = seed in self.screens or not self.pooled.issuperset(code)
        if task != "code" or not self.code_search or waiting:
            return
        cfg = self.first[("code", seed)]
        task_code = make_task("code", **cfg["task_options"])
        screen = self.settings["evo_screen"], self.settings["evo_min_plausible"], 20_000 + seed
        candidates = evolve.search_problems(task_code, "heldout", *screen)
        solved = np.zeros(len(candidates), dtype=bool)
        self.screens[seed] = {"candidates": candidates, "solved": solved, "left": len(code)}
        for k in code:
            path, m, _ = self.checkpoints[k]
            args = (path, cfg, candidates, self.settings, seed, m)
            self.queue("screen", k, solved_job, args, partial(self.problems_screened, seed))

    def problems_screened(self, seed, solved):
        """After the last screen, every code checkpoint searches the first evo_problems no pool
        solved."""
        screen = self.screens[seed]
        screen["solved"] |= solved
        screen["left"] -= 1
        if screen["left"]:
            return
        unsolved = [p for p, ok in zip(screen["candidates"], screen["solved"]) if not ok]
        hard = unsolved[: self.settings["evo_problems"]]
        self.progress.say(
            f"evolutionary search on {len(hard)} hard code problems (seed {seed}; "
            f"{int(screen['solved'].sum())} of {len(screen['candidates'])} candidates were solved "
            "by some pool)"
        )
        for key in self.keys("search", "code", seed):
            self.queue_searches(key, hard)

    def queue_searches(self, key, hard):
        """key's checkpoint searches `hard`, one child per call (a set policy: also m); unless
        stored already."""
        path, m, cfg = self.checkpoints[key]
        children = {"search": 1, "search_set": m}  # per call; only set policies list search_set
        for kind, per_call in [(k, n) for k, n in children.items() if (k, key) in self.jobs]:
            stored_key = result_key(cfg, self.settings, SEARCH_KEYS)
            stored_key.update(problems=[repr(p) for p in hard], per_call=per_call)
            if not hard:
                self.progress.drop(kind, key)
            elif not self.stored(kind, key, kind, stored_key):
                seed = key[2]
                args = (path, self.first[("code", seed)], hard, self.settings, seed, m, per_call)
                done = partial(self.search_done, kind, key, stored_key)
                self.queue(kind, key, search_job, args, done)

    def search_done(self, kind, key, stored_key, result):
        result["key"] = stored_key
        del result["runs"]  # per-problem details stay out of the small result file
        self.record(key, **{kind: result})

    def stored(self, kind, key, field, stored_key):
        """Does key's result file hold `field` made with these very settings (and code: see
        keep_by_code), no overwrite asked for? Then its job leaves the plan."""
        if not self.overwrite and same_key(
            (read_record(self.out_dir, *key) or {}).get(field, {}).get("key"), stored_key
        ):
            self.progress.drop(kind, key)
            return True
        return False

    def say_what_was_kept(self):
        status = [run_status(cfg) for cfg in self.configs.values()]
        print(
            f"\ninterrupted after {time.time() - self.progress.t0:.0f}s: kept "
            f"{status.count('finished')} finished run(s), {status.count('unfinished')} unfinished "
            "run(s) with their last checkpoints, the cached warm starts and every finished "
            f"evaluation in {self.out_dir}/; the same command continues from there",
            flush=True,
        )


def show_finished(cfg):
    """A finished run that the lab reuses instead of training it again: its whole metrics.jsonl to
    report_to's trackers, beside the runs trained now (nothing when report_to is none)."""
    if not config.trackers(cfg["report_to"]):
        return
    out_dir = cfg["out_dir"]
    shown = tracking.Tracking(cfg, out_dir, config.read_yaml(os.path.join(out_dir, "config.yaml")))
    shown.replay(os.path.join(out_dir, "metrics.jsonl"))
    shown.close()


def evaluation_settings(tasks, quick, overrides):
    """The evaluation keys (config.EVALUATION) the tasks' configs agree on: every method is measured
    alike."""
    found = {
        t: {k: run_config(t, "grpo", 0, "out", quick, overrides)[k] for k in EVAL_KEYS}
        for t in tasks
    }
    first = found[tasks[0]]
    for task_name, settings in found.items():
        for key in (k for k in EVAL_KEYS if settings[k] != first[k]):
            raise ConfigError(
                f"'{key}' is {first[key]!r} on {tasks[0]} and {settings[key]!r} on {task_name}: "
                f"the experiment measures every task alike"
            )
    return first


def against_records(board_dir, out_dir, tasks, methods, seeds):
    """The board's records of the tasks and seeds run here and this run's; a method already on the
    board is this run's as its own row, "<method> (yours)", beside the board's -> (records, this
    run's commits and machines, the new rows' names)."""

    def here(r):
        return r["task"] in tasks and r["seed"] in seeds

    board = [r for r in report.load_records([board_dir]) if here(r)]
    on_board = {r["method"] for r in board}
    mine = [r for r in report.load_records([out_dir]) if here(r) and r["method"] in methods]
    for r in mine:
        r["method"] = f"{r['method']} (yours)" if r["method"] in on_board else r["method"]
    made = {"commits": sorted({r.get("commit", "unknown") for r in mine})}
    made["machines"] = sorted({r.get("machine", "not recorded") for r in mine})
    return board + mine, made, [f"{m} (yours)" if m in on_board else m for m in methods]


def job_runner(ray, out_dir, workers, gpu_share, device):
    """-> (run_jobs, workers, cluster): the local pool's, or on a Ray cluster (ray: its address,
    "" for RAY_ADDRESS or a new local one) its own, every node checked before any job starts; it
    leaves the cluster when the jobs end."""
    if ray is None:
        if workers is None:
            workers = default_workers(pick_device(device or "auto"))
        return run_jobs, workers, None
    cluster = ray_jobs.connect(ray, out_dir, workers, gpu_share)
    return cluster.run_jobs, workers, cluster


QUICK_NOTE = (
    "SMOKE TEST (--quick): tiny models, pools and searches; the numbers and verdicts mean nothing"
)


def run_headline(
    overrides=None,
    quick=False,
    ablations=False,
    tasks=None,
    algos=None,
    seeds=None,
    workers=None,
    against=None,
    ray=None,
    gpu_share=None,
):
    overrides = dict(overrides or {})
    seeds = list(seeds) if seeds else [overrides.pop("seed")] if "seed" in overrides else [0]
    overrides.pop("seed", None)
    out_dir = overrides.pop("out_dir", "") or ("out/quick" if quick else "out/headline")
    with writing(out_dir):
        os.makedirs(out_dir, exist_ok=True)
    # one lab command per out_dir: a second is refused at once (each run's folder has its own lock,
    # taken by the worker that trains it); an error lets go of it as the command exits
    lock = lock_folder(out_dir)
    settings = evaluation_settings(tasks or list(TASKS), quick, overrides)
    run, workers, cluster = job_runner(ray, out_dir, workers, gpu_share, overrides.get("device"))
    methods = list(algos or ALGOS) + (ABLATIONS if ablations else [])
    progress = Progress(
        workers if cluster is None else workers or cluster.cpus(), quick, SHARED_WARMSTART
    )
    if lock.note:  # a lock taken over, or none to take
        progress.say(lock.note)
    if quick:
        progress.say(QUICK_NOTE)
    headline = Headline(
        tasks or list(TASKS), methods, seeds, settings, out_dir, quick, overrides, progress, against
    )
    if cluster and len(set(cluster.machines)) > 1:  # the nodes' numbers may differ in the last bit
        headline.stamp["machine"] = " + ".join(sorted(set(cluster.machines)))
    headline.plan()
    try:
        run(headline.start(), workers, progress)
    except KeyboardInterrupt:
        headline.say_what_was_kept()
        raise
    # the board's records of the tasks and seeds run here, so every interval pairs the same seeds
    if against:
        records, made, new_rows = against_records(against, out_dir, headline.tasks, methods, seeds)
    else:
        records = report.load_records([out_dir])
    results = report.merge(records, TASKS)
    results.update(settings=settings, quick=quick, wall_s=round(time.time() - progress.t0, 1))
    if against:  # the new methods' rows beside the board's; the code is this run's
        results.update(against=against, new_methods=new_rows, **made)
    paths = tables.write_report(out_dir, results, tables.figure_samples(records))
    # against a board the comparison fits a screen; summary.md adds what it means
    table = tables.against_table(results, header=True) if against else []
    print("\n" + ("\n".join(table) if against else tables.summary_markdown(results)))
    progress.say(
        "wrote " + ", ".join(paths) + (" (SMOKE TEST: the numbers mean nothing)" if quick else "")
    )
    lock.release()
    return results


def parser():
    # --set: train.DEFAULTS applied to every run (out_dir: the experiment's folder; overwrite=true:
    # every run and result made again); --help lists them
    description = __doc__.split("\n\n")[0].strip()
    declared = [(train.__file__, "DEFAULTS")]
    p = settings_parser(description, train.DEFAULTS, declared, config_file=False)
    p.add_argument("--quick", action="store_true", help="smoke-test size (numbers mean nothing)")
    p.add_argument("--ablations", action="store_true", help=f"also run {', '.join(ABLATIONS)}")
    p.add_argument("--tasks", nargs="*", metavar="TASK", help=f"only these (of {', '.join(TASKS)})")
    p.add_argument("--seeds", nargs="*", type=int, help="these seeds (mean and spread over them)")
    p.add_argument(
        "--algos",
        nargs="*",
        metavar="METHOD",
        help="these methods (default: grpo vpo; train.ADVANTAGES and VARIANTS)",
    )
    p.add_argument(
        "--workers",
        type=int,
        help="worker processes, one torch thread each (default: 2 on "
        "the CPU; on CUDA one per job that can run at once, up to 8, sharing the GPU; 0: every "
        "job in this process, one after another)",
    )
    p.add_argument(
        "--report",
        nargs="+",
        metavar="DIR",
        help="rewrite the report from DIR/results/ (several DIRs: merge their seeds)",
    )
    p.add_argument("--out", help="with --report: where the merged report goes (default: DIR)")
    p.add_argument(
        "--against",
        metavar="DIR",
        help="train and evaluate only --algos, on DIR's problems and "
        "settings, and rank them among DIR's result files (a committed leaderboard)",
    )
    add_ray_arguments(p)
    p.add_argument("--config", help=argparse.SUPPRESS)  # train.py's: one run, not the experiment
    return p


def add_ray_arguments(p):
    """--ray and --gpu-share, for every lab command that runs jobs (lab/ray_jobs.py)."""
    p.add_argument(
        "--ray",
        nargs="?",
        const="",
        metavar="ADDRESS",
        help="run every job as a task on the Ray cluster at ADDRESS (default: RAY_ADDRESS, else "
        "one started for this command on 127.0.0.1); out_dir must be on a filesystem every node "
        "sees",
    )
    p.add_argument(
        "--gpu-share",
        type=float,
        metavar="F",
        help="with --ray on a cluster with GPUs: the share of a GPU each warm start and training "
        "run asks for (default 1/8)",
    )


def known(names, choices, what):
    """Refuse a name not in `choices` in one line, with the closest one."""
    for name in names or []:
        if name not in choices:
            close = difflib.get_close_matches(name, choices, n=1, cutoff=0.5)
            hint = f"did you mean {close[0]}?" if close else f"one of {', '.join(choices)}"
            raise ConfigError(f"unknown {what} '{name}': {hint}")


def rewrite_report(dirs, out):
    """--report: the report of DIRs' result files, merged, into out (default: the first DIR)."""
    records = report.load_records(dirs)
    if not records:
        raise ConfigError(
            f"no result files under {', '.join(d + '/results/' for d in dirs)}; "
            "run the experiment first"
        )
    results = report.merge(records, TASKS)
    paths = tables.write_report(out or dirs[0], results, tables.figure_samples(records))
    print(tables.summary_markdown(results))
    print("wrote " + ", ".join(paths))


def checked_overrides(items, tasks, methods=(), per_task=None):
    """--set items -> {key: value}: each alone as config.py checks it (its key, type and range)
    against the config every task trains with, then all together under each of `methods`, as
    run_config builds its run (a setting may go with some algorithms only: outcome_reward), over
    per_task[task]: what a lab script sets on every run of a task (lab/exploration's sizes)."""
    overrides = {}
    for item in items:
        key, value = (part.strip() for part in item.split("=", 1)) if "=" in item else (item, "")
        for task_name in tasks:
            try:
                config.resolve(
                    train.DEFAULTS,
                    train.ADVANTAGES,
                    os.path.join(HERE, "configs", f"{task_name}.yaml"),
                    overrides=[item],
                    samplers=train.vpo.WEIGHT_SAMPLERS,
                )
            except ConfigError as e:
                raise ConfigError(f"--set {item} on task {task_name}: {e}") from None
        if key in ("task", "algo"):
            raise ConfigError(
                f"'{key}' is chosen by the experiment; use --tasks or --algos, "
                f"or python train.py --config for a single run"
            )
        overrides[key] = parse_value(value)
    for task_name in tasks:
        # the code-only rows are not run on other tasks (Headline's configs), so not checked there
        for name in [m for m in methods if task_name == "code" or m not in CODE_ONLY]:
            try:
                own = {**(per_task or {}).get(task_name, {}), **overrides}
                run_config(task_name, name, 0, "out/checked", overrides=own)
            except ConfigError as e:
                raise ConfigError(
                    f"--set {' '.join(items)} on task {task_name} for {name}: {e}"
                ) from None
    return overrides


def main(argv=None):
    args = parser().parse_args(argv)
    try:
        if args.config:
            raise ConfigError("--config trains one run: use python train.py --config ...")
        known(args.tasks, TASKS, "task")
        named = VARIANTS | OPEN_CHOICES | CREDIT_FORMS
        known(args.algos, sorted(train.ADVANTAGES) + sorted(named), "method")
        if args.report:
            return rewrite_report(args.report, args.out)
        methods = list(args.algos or ALGOS) + (ABLATIONS if args.ablations else [])
        overrides = checked_overrides(args.set, args.tasks or TASKS, methods)
        if args.against and (not args.algos or args.ablations):
            raise ConfigError(
                "--against trains only the new methods: name them with --algos (no --ablations)"
            )
        if args.against:
            overrides.setdefault("out_dir", "out/against")
        run_headline(
            overrides,
            quick=args.quick,
            ablations=args.ablations,
            tasks=args.tasks,
            algos=args.algos,
            seeds=args.seeds,
            workers=args.workers,
            against=args.against,
            ray=args.ray,
            gpu_share=args.gpu_share,
        )
    except KeyboardInterrupt:
        sys.exit(130)
    except ONE_LINE_ERRORS as e:  # a bad setting, a missing file, a diverged run; a bug raises
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
