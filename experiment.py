"""
The headline experiment: does training for diversity make test-time search pay off more as the
budget grows? `python train.py` without --config hands over to this file.

    python experiment.py                        # the default comparison, sized for a laptop CPU
    python experiment.py --quick                # a smoke-test size: a minute, numbers meaningless
    python experiment.py --seeds 0 1 2          # mean, spread and intervals over seeds
    python experiment.py --ablations            # also the ablations and baselines (ABLATIONS below)
    python experiment.py --tasks code --algos grpo vpo grpo_x3
    python experiment.py --set out_dir=out/h1 kl_coef=0 pool_n=60   # train.py keys and search.SETTINGS keys
    python experiment.py --report out/headline  # reprint (and rewrite) the report from result files

For each task (persona, code, and the collinear control) and seed: one warm start, then every
method from it; then every checkpoint (warm start included) samples a pool of answers per
held-out problem; then, on code problems that no checkpoint's pool solved, an evolutionary search
per checkpoint at equal budgets. Where each setting lives:
- a run's training settings: train.DEFAULTS <- configs/<task>.yaml <- --set <- the method's row in
  VARIANTS (documented there) <- algo, seed, out_dir. `--quick` lays configs/tiny.yaml over the task file.
- the evaluation and search settings: search.SETTINGS (QUICK below shrinks them for --quick).
Jobs run in `--workers` processes with one torch thread each (on a 2-core VM two 1-thread processes
beat one 2-thread process); a job starts as soon as what it needs is done, longest first.

Writes into out_dir: runs/ (each training run's folder), warmstart/, results/ (one small JSON per task,
method and seed: what report.py reads; commit these to merge seeds run in different sessions), and
report.py's results.json, summary.md and figures. Interrupt it (Ctrl-C) at any time: the same command
continues, reusing finished runs and evaluations and resuming unfinished runs from their checkpoints.

Deliberately left out: hyperparameter sweeps, anything that needs a GPU.
"""

import argparse
import heapq
import json
import os
import platform
import random
import signal
import subprocess
import sys
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from multiprocessing import get_context

import numpy as np
import torch
import yaml

import oracle
import report
import search
import train
import warmstart
from checkpoint import RESULT_NEUTRAL_KEYS, model_from_checkpoint
from config import ConfigError, make_task, parse_value
from model import Tokenizer
from warmstart import warmstart_path

HERE = os.path.dirname(os.path.abspath(__file__))
TASKS = ["persona", "code", "persona_collinear"]  # each trains with configs/<task>.yaml
# The control's prompts and demonstrations are the persona task's (only the reward differs), so it
# starts from the persona warm start instead of training its own.
SHARED_WARMSTART = {"persona_collinear": "persona"}
ALGOS = ["grpo", "vpo"]
# Methods that are an algorithm of train.ADVANTAGES run with other settings, each at the value its
# paper gives (DAPO: clip-higher 0.28, dynamic sampling until P groups spread; the entropy bonus has
# no paper default: 0.01, a common value, not tuned).
# grpo_x3 is compute-matched GRPO: m times the task's prompts per step (run_config fills it in).
VARIANTS = {
    "grpo_x3": ("grpo", {}),  # GRPO given m times the prompts per step: as many answers per step as VPO
    "dr_grpo": ("grpo", {"std_norm": False, "loss_norm": "constant"}),  # both halves of Dr. GRPO
    # clipping acts only from a batch's second update on (the ratio is 1 at the first), so clip-higher
    # is compared with GRPO at the same two updates per batch, not with one-update GRPO
    "grpo_2ep": ("grpo", {"epochs_per_batch": 2}),
    "grpo_clip_higher": ("grpo", {"clip_high": 0.28, "epochs_per_batch": 2}),
    "grpo_entropy": ("grpo", {"entropy_coef": 0.01}),
    # DAPO draws until P groups spread; verl's recipe gives up after 10 generation batches (of 3x the
    # prompts), here after 10 rounds of P, to bound the CPU cost (metrics.jsonl: flat_groups_kept)
    "dapo": ("grpo", {"clip_high": 0.28, "epochs_per_batch": 2, "dynamic_sampling": 10}),
    # not the paper's: RL also on a quarter of parent-format prompts (the search's), so the mutation
    # skill is trained rather than only eroded (code only; an earlier headline trained this way)
    "grpo_mutation": ("grpo", {"mutation_share": 0.25}),
    "vpo_mutation": ("vpo", {"mutation_share": 0.25}),
}
CODE_ONLY = {"grpo_mutation", "vpo_mutation"}  # parents are programs: no such rows on the persona tasks
ABLATIONS = ["multi_rlvr", "random_weights", "goal_conditioned", "vpo_loo", "max_at_k", "gdpo", "maxrl", *VARIANTS]
# --quick: the evaluation and search at a smoke-test size (training sizes: configs/tiny.yaml)
QUICK = dict(pool_n=6, pool_problems=6, evo_problems=2, evo_screen=6, evo_budget=12)
# Seconds one job took on the 2-core VM this was built on (one torch thread, two workers, other
# processes sharing the machine: an upper side), for the first estimate: persona at configs/persona.yaml,
# code at configs/code.yaml (the nano model; seed 0 of the code leaderboard at 400 RL steps, two workers:
# GRPO-family 114-166 s, set methods 227-257 s; warm start 12,000 steps ~370 s beside a probe); training
# jobs at each task file's steps x prompts_per_step, EXPECTED_STEPS. The progress lines then rescale by
# how fast the finished jobs go.
EXPECTED_S = {("warm", "persona"): 60, ("warm", "code"): 370, ("train", "persona"): 55,
              ("train", "persona", "set"): 180, ("train", "code"): 120, ("train", "code", "set"): 240,
              ("pools", "persona"): 2, ("pools", "code"): 3, ("screen", "code"): 10, ("search", "code"): 20,
              ("search_set", "code"): 15, ("oracle", "code"): 60}
EXPECTED_STEPS = {"persona": 250 * 8, "code": 400 * 16}  # steps x prompts_per_step behind EXPECTED_S
QUICK_SCALE = 0.04  # a --quick job takes about this share of its headline time


def run_config(task_name, name, seed, out_dir, quick=False, overrides=None):
    """The train.py config of one run of method `name` (an algorithm or one of VARIANTS)."""
    files = [os.path.join(HERE, "configs", f"{task_name}.yaml")] + ([os.path.join(HERE, "configs", "tiny.yaml")]
                                                                      if quick else [])
    base = train.resolve_config(files[0])
    for path in files[1:]:
        base = train.resolve_config(path, base=base)
    algo, variant = VARIANTS.get(name, (name, {}))
    if name == "grpo_x3":
        variant = {"prompts_per_step": base["prompts_per_step"] * base["answers_per_rollout"]}
    spec = {**(overrides or {}), **variant, "algo": algo, "seed": seed,
            "out_dir": os.path.join(out_dir, "runs", f"{task_name}-{name}-s{seed}"),
            "warmstart_dir": os.path.join(out_dir, "warmstart"), "quiet": True, "threads": 1}
    return train.resolve_config(overrides=[f"{k}={json.dumps(v) if isinstance(v, dict) else v}"
                                           for k, v in spec.items()], base=base)


# ----------------------------------------------------------------------------------------------
# The jobs, each run in a worker process

def _worker_init():
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle: it stops the workers
    torch.set_num_threads(1)


def _warm_start_job(cfg):
    t0 = time.time()
    _, path = warmstart.warm_start(cfg, make_task(cfg["task"], **cfg["task_options"]), Tokenizer(cfg["tokenizer"]),
                               "cpu", lambda msg: None)
    return path, time.time() - t0


def _train_job(cfg):
    t0 = time.time()
    out = train.train(cfg)
    return out, time.time() - t0


def _pools_job(path, cfg, settings, seed, m):
    """Pools of pool_n answers on the held-out problems of `seed` -> (record, rewards)."""
    task = make_task(cfg["task"], **cfg["task_options"])
    problems = task.problems("heldout", settings["pool_problems"], random.Random(seed))
    result, rewards, answers = search.evaluate_checkpoint(path, problems, settings["pool_n"], seed=seed, m=m,
                                                          task=task,
                                                          num_heldout_weights=settings["heldout_weightings"])
    result["problems"] = [repr(p) for p in problems]
    return result, rewards


def _solved_job(path, cfg, problems, settings, seed, m):
    """Which problems a checkpoint's pool solves (some answer passes every test)."""
    _, rewards, _ = search.evaluate_checkpoint(path, problems, settings["pool_n"], seed=seed, m=m,
                                               task=make_task(cfg["task"], **cfg["task_options"]))
    return (rewards >= 1.0).all(-1).any(-1)  # (problems,)


def _search_job(path, cfg, problems, settings, seed, m, children_per_call):
    """search.run_searches for one checkpoint: a search per problem and the same-budget sampling control."""
    model, tok, _, _ = model_from_checkpoint(path)
    task = make_task(cfg["task"], **cfg["task_options"])
    return search.run_searches(model, tok, task, problems, m, cfg, settings, seed, children_per_call)


def _oracle_job(cfg, settings, seed, m):
    """The best values any policy could reach on the pools' problems (oracle.code_oracle) -> a record
    shaped like a pool's, for the "optimum" row and the gap-closed columns."""
    task = make_task(cfg["task"], **cfg["task_options"])
    problems = task.problems("heldout", settings["pool_problems"], random.Random(seed))
    ks = search.k_grid(settings["pool_n"])
    weights = search.heldout_weights(task.dim, settings["heldout_weightings"], seed)
    best = oracle.mean_oracle(task, problems, ks, weights, m=m)
    return {"ks": ks, "best_at_k": best["best_at_k"], "pass_at_k": best["pass_at_k"], "mean_scalar": best["best_at_1"],
            "set_score": best["set_score"], "valid": 1.0, "set_score_upper": best["set_score_upper"],
            "problems": [repr(p) for p in problems], "plausible": best["hypotheses"]}


# ----------------------------------------------------------------------------------------------
# What is already on disk

def run_status(cfg):
    """What cfg's run folder holds: "finished" (this very run, done), "unfinished" (this run, to
    resume), "other" (a run with other settings: refuse to touch it), or "empty"."""
    try:
        with open(os.path.join(cfg["out_dir"], "config.yaml")) as f:
            saved = yaml.safe_load(f)
    except (OSError, yaml.YAMLError):
        saved = None
    if not isinstance(saved, dict):
        return "empty"
    saved = with_defaults(saved)  # a key added to DEFAULTS after that run reads as its default value
    # a cached warm start's file name is the hash of everything that shaped it, so a run copied into
    # another output folder (with its warm start) still counts as the same run
    same = all(saved.get(k) == v for k, v in cfg.items() if k not in RESULT_NEUTRAL_KEYS + ("warmstart_from",)) and \
        os.path.basename(str(saved.get("warmstart_from"))) == os.path.basename(str(cfg["warmstart_from"]))
    if not same:
        return "other"
    return "finished" if os.path.exists(os.path.join(cfg["out_dir"], "final.pt")) else "unfinished"


def finished(cfg):
    return run_status(cfg) == "finished"


def result_key(cfg, settings, keys):
    """What a stored evaluation depends on: the run's settings and the evaluation's."""
    return {"run": {k: v for k, v in sorted(cfg.items()) if k not in RESULT_NEUTRAL_KEYS + ("warmstart_dir",)},
            "settings": {k: settings[k] for k in keys}}


def with_defaults(run_settings):
    """A run's settings with every train.DEFAULTS key it lacks at its default: a key added to DEFAULTS
    later, at its default, changes nothing that was run or evaluated."""
    return {**train.DEFAULTS, **run_settings}


# Settings that were removed, at the only value they ever took: a stored key holding one still matches.
RETIRED_SETTINGS = {"evo_seeds": 1}  # searches per problem, never more than one


def same_key(stored, key):
    """A stored evaluation's key == `key`, a run setting missing from either reading as its default."""
    if not isinstance(stored, dict) or not isinstance(stored.get("run"), dict):
        return False
    settings = {k: v for k, v in stored.get("settings", {}).items() if RETIRED_SETTINGS.get(k, object()) != v}
    return {**stored, "run": with_defaults(stored["run"]), "settings": settings} == \
        {**key, "run": with_defaults(key["run"])}


def git_commit():
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=HERE).stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def machine():
    """What the numbers depend on besides the commit: float32 CPU kernels round differently on
    different processors (AVX2 vs AVX-512, MKL's code path), and RL grows a last-bit difference in
    the warm start into a different policy, so a seed reproduces bit for bit only on one machine."""
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
               platform.processor()) if os.path.exists("/proc/cpuinfo") else platform.processor()
    return f"{cpu}; torch {torch.__version__}; kernels {torch.backends.cpu.get_cpu_capability()}"


def update_record(out_dir, task, method, seed, **fields):
    """Merge fields into results/<task>-<method>-s<seed>.json (written whole, then renamed)."""
    path = report.record_path(out_dir, task, method, seed)
    record = read_record(out_dir, task, method, seed) or {"task": task, "method": method, "seed": seed}
    record.update(fields)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "w") as f:
        json.dump(record, f)
    os.replace(path + ".tmp", path)


def read_record(out_dir, task, method, seed):
    try:
        with open(report.record_path(out_dir, task, method, seed)) as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError):
        return None


# ----------------------------------------------------------------------------------------------
# Telling the user what is happening

class Progress:
    """The plan up front, a line with an ETA every `every` seconds. Every job the experiment will run
    is in `pending` from the start (plan), at the seconds EXPECTED_S gives it. The ETA (seconds_left)
    replays the rest of the run on the workers (schedule_left): a running training run goes on at the
    step rate it has shown (job_left), every other job takes its expected seconds times how much
    slower or faster the jobs of its kind have gone on this machine (speed)."""

    def __init__(self, workers, quick, every=30.0):
        self.t0, self.last, self.every, self.workers = time.time(), time.time(), every, workers
        self.scale = QUICK_SCALE if quick else 1.0
        self.pending, self.done, self.ratios, self.first_step = {}, [], {}, {}

    def expected(self, kind, key, cfg=None):
        family = _family(kind, key)[1]  # persona_collinear's prompts are persona's
        uses_sets = kind == "train" and cfg and cfg["algo"] in train.SET_ALGOS
        kind_key = (kind, family, "set") if uses_sets else (kind, family)
        base = EXPECTED_S.get(kind_key, EXPECTED_S.get((kind, "code"), 10))
        if kind == "train" and cfg:
            base *= cfg["steps"] * cfg["prompts_per_step"] / EXPECTED_STEPS[family]
        return base * self.scale

    def plan(self, kind, key, cfg=None, steps_done=0):
        """A job the experiment expects to run (steps_done: the steps of an unfinished run on disk)."""
        share = steps_done / max(1, cfg["steps"]) if cfg else 0.0
        self.pending[(kind, key)] = self.expected(kind, key, cfg) * (1 - share)
        self.first_step[(kind, key)] = steps_done

    def drop(self, kind, key):
        """A planned job that will not run (its result was on disk)."""
        self.pending.pop((kind, key), None)

    def finish(self, kind, key, seconds):
        expected = self.pending.pop((kind, key), None)
        if expected:
            self.ratios.setdefault(_family(kind, key), []).append(seconds / expected)
        self.done.append((kind, key))

    def speed(self, job, measured):
        """How many times its expected seconds a job takes on this machine: the median over the finished
        and `measured` (running) jobs of its kind and task family; failing those, over every job; else 1."""
        same = self.ratios.get(_family(*job), []) + measured.get(_family(*job), [])
        every = [r for ratios in (*self.ratios.values(), *measured.values()) for r in ratios]
        return float(np.median(same or every or [1.0]))

    def seconds_left(self, running=(), now=None):
        """The ETA. running: (kind, key, cfg, start time) of the jobs in the workers now."""
        now = time.time() if now is None else now
        left, measured = {}, {}
        for kind, key, cfg, t0 in running:  # training runs that have shown their pace first
            if kind == "train" and (kind, key) in self.pending:
                steps = _steps_logged(cfg["out_dir"])
                done = steps - self.first_step.get((kind, key), 0)
                if job_shown_pace(now - t0, done):
                    left[(kind, key)] = job_left(now - t0, done, cfg["steps"] - steps, 0.0)
                    measured.setdefault(_family(kind, key), []).append(
                        (now - t0 + left[(kind, key)]) / self.pending[(kind, key)])
        for kind, key, cfg, t0 in running:  # the rest at their expected seconds, rescaled
            if (kind, key) not in left:
                left[(kind, key)] = job_left(now - t0, None, 0, self.pending.get((kind, key), 0.0) *
                                             self.speed((kind, key), measured))
        waiting = {job: (seconds * self.speed(job, measured), [o for o in self.pending if _waits_for(job, o)])
                   for job, seconds in self.pending.items() if job not in left}
        return schedule_left(left, waiting, self.workers)

    def say(self, msg):
        print(f"[{time.time() - self.t0:6.0f}s] {msg}", flush=True)

    def tick(self, running, force=False):
        """running: (kind, key, cfg, start time) of the jobs in the workers now."""
        if not force and time.time() - self.last < self.every:
            return
        self.last = now = time.time()
        parts = []
        for kind, key, cfg, t0 in running:
            name = "/".join(map(str, key))
            if kind == "train":
                parts.append(f"train {name} step {_steps_logged(cfg['out_dir'])}/{cfg['steps']}")
            else:
                parts.append(f"{kind} {name} {now - t0:.0f}s of ~{self.pending.get((kind, key), 0.0):.0f}s planned")
        self.say(f"{len(self.done)} jobs done, {len(self.pending) - len(running)} waiting; running: "
                 f"{', '.join(parts) or '-'}; about {self.seconds_left(running, now) / 60:.1f} min left")


MIN_PACE_S, MIN_PACE_STEPS = 30.0, 10  # a run's pace counts once it is this far past its start-up


def job_shown_pace(seconds, steps):
    """Has a training run shown its step rate: MIN_PACE_STEPS steps in at least MIN_PACE_S seconds, enough
    that loading it and its first evaluation are a small part of its time so far?"""
    return steps is not None and steps >= MIN_PACE_STEPS and seconds >= MIN_PACE_S


def job_left(seconds, steps, steps_left, expected):
    """Seconds a running job has left, `seconds` after it started. A training run that has shown its
    pace (`steps` done in `seconds`) goes on at it for its `steps_left`; any other job takes `expected`
    seconds in all, or, once past that, another tenth of its time so far."""
    if job_shown_pace(seconds, steps):
        return steps_left * seconds / steps
    return max(expected - seconds, 0.1 * seconds)


def schedule_left(running, waiting, workers):
    """Seconds until the last job ends, if the workers go on as run_headline's loop has them: each running
    job ends after the seconds it has left (running: {job: seconds}); a free worker takes the longest
    waiting job whose prerequisites have ended (waiting: {job: (seconds, [jobs it waits for])}; one in
    neither dict has ended already). This list schedule follows the critical path, a long run and what
    waits for it while the other workers idle, which the seconds left over the workers miss."""
    ends = dict(running)  # job -> when it ends, in seconds from now
    free = list(running.values()) + [0.0] * max(0, workers - len(running))  # when each worker is free
    heapq.heapify(free)
    left = dict(waiting)
    while left:
        t = heapq.heappop(free)
        ready = [job for job, (_, needs) in left.items() if not any(n in left or ends.get(n, 0.0) > t for n in needs)]
        if not ready and any(end > t for end in ends.values()):
            heapq.heappush(free, min(end for end in ends.values() if end > t))  # idle until the next job ends
            continue
        job = max(ready or left, key=lambda j: left[j][0])  # (ready is empty only on a cycle of prerequisites)
        ends[job] = t + left.pop(job)[0]
        heapq.heappush(free, ends[job])
    return max(ends.values(), default=0.0)


def _family(kind, key):
    """The jobs whose speed on this machine a job's is read from: its kind on the code task or on persona's
    prompts (GRPO's and VPO's code runs alike, the persona tasks alike)."""
    return kind, "code" if key[0] == "code" else "persona"


def _waits_for(job, other):
    """Does job wait for other (both (kind, key))? The stages of one seed: its warm start -> the runs from
    it, the oracle and the warm start's pools -> each run's pools -> the screen of the code checkpoints
    (every code pool) -> the code searches (every screen)."""
    (kind, key), (other_kind, other_key) = job, other
    if key[-1] != other_key[-1]:  # another seed
        return False
    if other_kind == "warm":
        return kind in ("train", "oracle", "pools") and SHARED_WARMSTART.get(key[0], key[0]) == other_key[0]
    return (other_kind == "train" and kind == "pools" and key == other_key) or \
        (other_kind == "pools" and kind == "screen" and other_key[0] == key[0]) or \
        (other_kind == "screen" and kind in ("search", "search_set"))


def _steps_logged(run_dir):
    """The last RL step a run has logged (timing.jsonl gets a line per step; a resumed run appends to
    it, so its last line, not its length): 0 before the first."""
    try:
        with open(os.path.join(run_dir, "timing.jsonl"), "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - 4096))
            lines = f.read().split(b"\n")[:-1]  # a line still being written has no newline yet
        return json.loads(lines[-1])["step"] if lines else 0
    except (OSError, ValueError, KeyError):
        return 0


def plan_jobs(progress, configs, first, tasks, seeds, methods, settings):
    """Every job the experiment will run, at its expected seconds, minus what is already on disk."""
    for t in tasks:
        for s in seeds:
            if SHARED_WARMSTART.get(t) not in tasks and not os.path.exists(warmstart_path(dict(first[(t, s)],
                                                                                              warmstart_from=""))):
                progress.plan("warm", (t, s))
            for a in ["warm_start", "warm_start_m3"] + [a for a in methods if (t, a, s) in configs]:
                progress.plan("pools", (t, a, s))
    for key, cfg in configs.items():
        status = run_status(cfg)
        if status != "finished":
            progress.plan("train", key, cfg, _steps_logged(cfg["out_dir"]) if status == "unfinished" else 0)
    if "code" in tasks and settings["evo_problems"]:
        for s in seeds:
            progress.plan("oracle", ("code", "optimum", s))
            for a in ["warm_start"] + methods:
                progress.plan("screen", ("code", a, s))
                progress.plan("search", ("code", a, s))
                if a != "warm_start" and train.answers_per_rollout(configs[("code", a, s)]) > 1:
                    progress.plan("search_set", ("code", a, s))


# ----------------------------------------------------------------------------------------------
# The experiment

def run_headline(overrides=None, quick=False, ablations=False, tasks=None, algos=None, seeds=None, workers=2,
                 settings_overrides=None):
    overrides = dict(overrides or {})
    settings = {**search.SETTINGS, **(QUICK if quick else {}), **(settings_overrides or {})}
    seeds = list(seeds) if seeds else [overrides.pop("seed")] if "seed" in overrides else [0]
    overrides.pop("seed", None)
    out_dir = overrides.pop("out_dir", "") or ("out/quick" if quick else "out/headline")
    tasks = tasks or list(TASKS)
    methods = list(algos or ALGOS) + (ABLATIONS if ablations else [])
    configs = {(t, a, s): run_config(t, a, s, out_dir, quick, overrides) for t in tasks for a in methods for s in seeds
               if t == "code" or a not in CODE_ONLY}
    first = {(t, s): configs[(t, methods[0], s)] for t in tasks for s in seeds}  # a task's settings
    for (t, a, s), cfg in configs.items():  # every run names its warm start (its file name is the hash of what
        # shaped it), so a run trained from another warm start is never taken for this one
        cfg["warmstart_from"] = warmstart_path(first[(SHARED_WARMSTART[t] if SHARED_WARMSTART.get(t) in tasks else t, s)])
    for cfg in configs.values():  # refuse before anything runs, not after an hour
        if run_status(cfg) == "other" and not cfg["overwrite"]:
            raise ConfigError(f"{cfg['out_dir']} holds a run with other settings; choose another out_dir "
                              f"(--set out_dir=...) or --set overwrite=true")
    os.makedirs(out_dir, exist_ok=True)
    stamp = {"commit": git_commit(), "machine": machine()}  # the code that runs, not what is checked out at the end
    progress = Progress(workers, quick)
    code_search = "code" in tasks and settings["evo_problems"] > 0
    progress.say(f"running {len(methods)} method(s) ({', '.join(methods)}) on {', '.join(tasks)}, seed(s) "
                 f"{', '.join(map(str, seeds))}: {len(configs)} training runs from "
                 f"{len([t for t in tasks if SHARED_WARMSTART.get(t) not in tasks]) * len(seeds)} warm starts, then "
                 f"pools of {settings['pool_n']} answers on {settings['pool_problems']} held-out problems each"
                 + (f", then evolutionary search (budget {settings['evo_budget']}) on up to {settings['evo_problems']} "
                    f"hard code problems per seed and checkpoint" if code_search else "") + ".")
    plan_jobs(progress, configs, first, tasks, seeds, methods, settings)
    progress.say(f"writing to {out_dir}/ (runs/, results/, summary.md, figures) with {workers} worker processes; "
                 f"expected time about {progress.seconds_left() / 60:.1f} min (measured on a 2-core VM; the progress "
                 f"lines below correct it for this machine)")

    ready, running = [], {}
    order = {"warm": 0, "train": 1, "oracle": 2, "pools": 2, "screen": 3, "search": 4, "search_set": 5}

    def add(kind, key, fn, *args, cfg=None):
        long_first = (order[kind], -(kind == "train" and configs[key]["algo"] in train.SET_ALGOS), -(key[0] == "code"))
        ready.append((long_first, kind, key, fn, args, cfg))

    warm, checkpoints, pools, screens, samples = {}, {}, {}, {}, {}
    pool_keys = ("pool_n", "pool_problems", "heldout_weightings")
    search_keys = ("evo_budget", "evo_islands", "evo_migrate_every", "evo_capacity", "evo_explore", "evo_temperature",
                   "evo_top_p")

    def checkpoint_ready(task, method, seed, path, m, cfg):
        checkpoints[(task, method, seed)] = (path, m, cfg)
        record = read_record(out_dir, task, method, seed)
        key = dict(result_key(cfg, settings, pool_keys), m=m)
        if record and same_key(record.get("pools", {}).get("key"), key):
            progress.drop("pools", (task, method, seed))
            pools[(task, method, seed)] = record["pools"]
            pools_done(task, method, seed)
        else:
            add("pools", (task, method, seed), _pools_job, path, first[(task, seed)], settings, seed, m)

    def warm_ready(t, s, path):
        for u in [t] + [u for u in tasks if SHARED_WARMSTART.get(u) == t]:
            warm[(u, s)] = path
            warm_cfg = dict(first[(u, s)], algo="warm_start", warmstart_from=path)
            checkpoint_ready(u, "warm_start", s, path, 1, warm_cfg)
            # the warm start asked for a set of m answers: where the set methods start from
            checkpoint_ready(u, "warm_start_m3", s, path, warm_cfg["answers_per_rollout"], warm_cfg)
            if u == "code":  # the best any policy could reach on these problems
                record = read_record(out_dir, u, "optimum", s)
                if record and same_key(record.get("pools", {}).get("key"), result_key(warm_cfg, settings, pool_keys)):
                    progress.drop("oracle", (u, "optimum", s))
                else:
                    add("oracle", (u, "optimum", s), _oracle_job, warm_cfg, settings, s, warm_cfg["answers_per_rollout"])
            for a in [a for a in methods if (u, a, s) in configs]:
                cfg = configs[(u, a, s)]
                status = run_status(cfg)
                if status == "finished":  # runs are deterministic: an identical finished run is reused
                    progress.say(f"reusing finished run {cfg['out_dir']}")
                    run_ready((u, a, s), cfg["out_dir"])
                    continue
                cfg["resume"] = status == "unfinished"
                if cfg["resume"]:
                    progress.say(f"resuming unfinished run {cfg['out_dir']}")
                add("train", (u, a, s), _train_job, cfg, cfg=cfg)

    def run_ready(key, run_dir):
        cfg = configs[key]
        with open(os.path.join(run_dir, "metrics.jsonl")) as f:
            update_record(out_dir, *key, m=train.answers_per_rollout(cfg), **stamp,
                          training=report.training_summary([json.loads(line) for line in f]))
        checkpoint_ready(*key, os.path.join(run_dir, "final.pt"), train.answers_per_rollout(cfg), cfg)

    def pools_done(task, method, seed):
        if task == "code" and code_search and all(("code", a, seed) in pools for a in ["warm_start"] + methods):
            code_seed_evaluated(seed)

    def code_seed_evaluated(s):
        """Every code checkpoint of seed s has its pool: screen the candidate search problems (held-out,
        at least evo_min_plausible plausible programs) with every checkpoint's pool; search those none
        solves, as the paper chose its problems."""
        if s in screens:
            return
        keys = [("code", a, s) for a in ["warm_start"] + methods]
        candidates = search.search_problems(make_task("code", **first[("code", s)]["task_options"]), "heldout",
                                            settings["evo_screen"], settings["evo_min_plausible"], 20_000 + s)
        screens[s] = {"candidates": candidates, "solved": np.zeros(len(candidates), dtype=bool), "left": len(keys)}
        for k in keys:
            add("screen", k, _solved_job, checkpoints[k][0], first[("code", s)], candidates, settings, s,
                checkpoints[k][1])

    def start_search(s):
        screen = screens[s]
        hard = screen["hard"] = [p for p, ok in zip(screen["candidates"], screen["solved"]) if not ok][
            :settings["evo_problems"]]
        if not hard:
            for a in ["warm_start"] + methods:
                progress.drop("search", ("code", a, s))
                progress.drop("search_set", ("code", a, s))
        progress.say(f"evolutionary search on {len(hard)} hard code problems (seed {s}; {int(screen['solved'].sum())} "
                     f"of {len(screen['candidates'])} candidates were solved by some pool)")
        for a in (["warm_start"] + methods if hard else []):
            path, m, cfg = checkpoints[("code", a, s)]
            record = read_record(out_dir, "code", a, s) or {}
            for kind, per_call in (("search", 1), ("search_set", m)) if m > 1 else (("search", 1),):
                key = dict(result_key(cfg, settings, search_keys), problems=[repr(p) for p in hard], per_call=per_call)
                if not same_key(record.get(kind, {}).get("key"), key):
                    add(kind, ("code", a, s), _search_job, path, first[("code", s)], hard, settings, s, m, per_call)
                else:
                    progress.drop(kind, ("code", a, s))

    def handle(kind, key, result, seconds):
        name = "/".join(map(str, key))
        progress.finish(kind, key, seconds)
        if kind == "warm":
            progress.say(f"warm start {name} ready ({seconds:.0f}s)")
            warm_ready(*key, result[0])
        elif kind == "train":
            progress.say(f"trained {name} ({seconds:.0f}s)")
            run_ready(key, result[0])
        elif kind == "pools":
            record, rewards = result
            path, m, cfg = checkpoints[key]
            record["key"] = result_key(cfg, settings, pool_keys)
            update_record(out_dir, *key, m=m, **stamp, pools=record)
            pools[key], samples[key] = record, rewards
            pools_done(*key)
        elif kind == "screen":
            screen = screens[key[2]]
            screen["solved"] |= result
            screen["left"] -= 1
            if not screen["left"]:
                start_search(key[2])
        elif kind == "oracle":
            result["key"] = result_key(dict(first[(key[0], key[2])], algo="warm_start",
                                            warmstart_from=warm[(key[0], key[2])]), settings, pool_keys)
            update_record(out_dir, *key, m=first[(key[0], key[2])]["answers_per_rollout"], **stamp, pools=result)
        else:  # a search, one child per call or (search_set) a set policy's m
            path, m, cfg = checkpoints[key]
            result["key"] = dict(result_key(cfg, settings, search_keys),
                                 problems=[repr(p) for p in screens[key[2]]["hard"]], per_call=result["children_per_call"])
            del result["runs"]  # per-problem details stay out of the small result file
            update_record(out_dir, *key, **{kind: result})

    for t in tasks:  # a task whose warm start another task trains waits for it (SHARED_WARMSTART)
        if SHARED_WARMSTART.get(t) not in tasks:
            for s in seeds:
                cfg = dict(first[(t, s)], warmstart_from="")  # train it, or find it in the cache
                if os.path.exists(warmstart_path(cfg)):
                    warm_ready(t, s, warmstart_path(cfg))
                else:
                    add("warm", (t, s), _warm_start_job, cfg)
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn"), initializer=_worker_init)
    try:
        while ready or running:
            ready.sort(key=lambda job: job[0])
            while ready and len(running) < workers:
                _, kind, key, fn, args, cfg = ready.pop(0)
                running[pool.submit(fn, *args)] = (kind, key, cfg, time.time())
            done, _ = wait(running, timeout=2.0, return_when=FIRST_COMPLETED)
            for future in done:
                kind, key, cfg, t0 = running.pop(future)
                handle(kind, key, future.result(), time.time() - t0)
            progress.tick(list(running.values()))
    except KeyboardInterrupt:
        for process in list(getattr(pool, "_processes", {}).values()):  # stop the workers now, mid-job
            process.terminate()
        pool.shutdown(wait=False, cancel_futures=True)
        kept = [c for c in configs.values() if run_status(c) == "finished"]
        unfinished = [c for c in configs.values() if run_status(c) == "unfinished"]
        print(f"\ninterrupted after {time.time() - progress.t0:.0f}s: kept {len(kept)} finished run(s), "
              f"{len(unfinished)} unfinished run(s) with their last checkpoints, the cached warm starts and every "
              f"finished evaluation in {out_dir}/; the same command continues from there", flush=True)
        raise
    pool.shutdown()
    results = report.merge(report.load_records([out_dir]), TASKS)
    results.update(settings=settings, quick=quick, wall_s=round(time.time() - progress.t0, 1))
    paths = report.write_report(out_dir, results, samples)
    print("\n" + report.summary_markdown(results))
    progress.say("wrote " + ", ".join(paths))
    return results


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].strip())
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                        help="train.py keys applied to every run, or search.SETTINGS keys (out_dir: the experiment's folder)")
    parser.add_argument("--quick", action="store_true", help="smoke-test size (numbers mean nothing)")
    parser.add_argument("--ablations", action="store_true", help=f"also run {', '.join(ABLATIONS)}")
    parser.add_argument("--tasks", nargs="*", help=f"only these tasks (of {', '.join(TASKS)})")
    parser.add_argument("--seeds", nargs="*", type=int, help="these seeds (mean and spread over them)")
    parser.add_argument("--algos", nargs="*", help="these methods (default: grpo vpo)")
    parser.add_argument("--workers", type=int, default=2, help="worker processes, one torch thread each")
    parser.add_argument("--report", nargs="+", metavar="DIR", help="rewrite the report from DIR/results/ (several "
                        "DIRs: merge their seeds)")
    parser.add_argument("--out", help="with --report: where the merged report goes (default: the first DIR)")
    parser.add_argument("--config", help=argparse.SUPPRESS)  # train.py's: one run, not the experiment
    args = parser.parse_args(argv)
    try:
        if args.config:
            raise ConfigError("--config trains one run: use python train.py --config ...")
        if args.report:
            records = report.load_records(args.report)
            if not records:
                raise ConfigError(f"no result files under {', '.join(d + '/results/' for d in args.report)}; "
                                  f"run the experiment first")
            results = report.merge(records, TASKS)
            paths = report.write_report(args.out or args.report[0], results)
            print(report.summary_markdown(results))
            print("wrote " + ", ".join(paths))
            return
        unknown = sorted(set(args.tasks or []) - set(TASKS))
        if unknown:
            raise ConfigError(f"unknown task(s) {unknown} for --tasks (choose from {TASKS})")
        unknown = sorted(set(args.algos or []) - set(train.ADVANTAGES) - set(VARIANTS))
        if unknown:
            raise ConfigError(f"unknown method(s) {unknown} for --algos (choose from "
                              f"{sorted(train.ADVANTAGES) + sorted(VARIANTS)})")
        overrides, settings = {}, {}
        for item in args.set:  # search settings, or train.py keys checked against DEFAULTS now
            key, value = (part.strip() for part in item.split("=", 1)) if "=" in item else (item, "")
            if key in search.SETTINGS:
                settings.update([search.parse_setting(item)])
                continue
            for task_name in args.tasks or TASKS:  # checked now, against the config each task trains with
                try:
                    train.resolve_config(os.path.join(HERE, "configs", f"{task_name}.yaml"), overrides=[item])
                except ConfigError as e:
                    raise ConfigError(f"--set {item} on task {task_name}: {e}") from None
            if key in ("task", "algo"):
                raise ConfigError(f"'{key}' is chosen by the experiment; use --tasks or --algos, "
                                  f"or python train.py --config for a single run")
            overrides[key] = parse_value(value)
        run_headline(overrides, quick=args.quick, ablations=args.ablations, tasks=args.tasks, algos=args.algos,
                     seeds=args.seeds, workers=args.workers, settings_overrides=settings)
    except KeyboardInterrupt:
        sys.exit(130)
    except (ConfigError, FileNotFoundError, RuntimeError, FloatingPointError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
