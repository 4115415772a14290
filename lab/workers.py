"""How the headline experiment's jobs run: the jobs (each a function run in a worker process), the
pool of worker processes that runs them (run_jobs), and the progress line with its ETA (Progress).
experiment.py decides which jobs there are and what each finished one leads to.

Workers are processes with one torch thread each: on a 2-core VM two 1-thread processes beat one
2-thread process. A queued job starts once a worker is free, longest first (longest_first). With
CUDA, warm starts and training runs share the GPU (default_workers): at this model size Python and
kernel launches bound a run, not the GPU.
A worker ends when its lab command does, even by kill -9. Deliberately left out: retrying a failed
job (its error stops the experiment; the same command then reuses everything finished), more than
one machine or GPU (lab/ray_jobs.py runs the same Jobs on a Ray cluster).
"""

import heapq
import json
import os
import platform
import random
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from multiprocessing import get_context
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch

import evaluate
import evolve
import maze
import train
import warmstart
from config import make_task, pick_device
from lab import oracle
from model import GPT, PRESETS, GPTConfig, Tokenizer

# ---- The jobs, each run in a worker process (a training run's job is train.train itself) ----


def warm_start_job(cfg):
    # on the runs' device (CUDA where there is one); pools and searches stay on the CPU with the
    # rewards
    _, path = warmstart.warm_start(
        cfg,
        make_task(cfg["task"], **cfg["task_options"]),
        Tokenizer(cfg["tokenizer"]),
        pick_device(cfg["device"]),
        lambda msg: None,
    )
    return path


def pools_job(path, cfg, settings, seed, m):
    """Pools of pool_n answers on the held-out problems of `seed` -> (record, rewards)."""
    task = make_task(cfg["task"], **cfg["task_options"])
    problems = task.problems("heldout", settings["pool_problems"], random.Random(seed))
    n = settings["pool_n"]
    weightings = settings["heldout_weightings"]
    result, rewards, answers = evaluate.evaluate_checkpoint(
        path, task, problems, n, seed=seed, m=m, num_heldout_weights=weightings
    )
    result["problems"] = [repr(p) for p in problems]
    if cfg["task"] == "maze":  # the conflict as numbers, and a few pools' routes to draw
        result.update(maze_summary(problems, rewards, answers))
        # the authors' evaluation samples at 0.7: the same pools' measures at that temperature
        cool_policy, _ = evaluate.load_policy(path, m, temperature=MAZE_EVAL_TEMPERATURE)
        cool, cool_rewards, cool_answers = evaluate.evaluate_policy(
            cool_policy, task, problems, n, seed, num_heldout_weights=weightings
        )
        kept = ("ks", "best_at_k", "heldout_weight_best_at_k", "diversity", "per_problem")
        summary = maze_summary(problems, cool_rewards, cool_answers, drawn=0)
        result["at_temperature_0.7"] = {**{k: cool[k] for k in kept}, **summary}
    return result, rewards


MAZE_EVAL_TEMPERATURE = 0.7  # the VPO authors' evaluation samples the maze's pools at 0.7


def maze_summary(problems, rewards, answers, drawn=3):
    """Each objective's mean over the pools, the share of routes that arrive, that walk into a wall
    and that pass each corner's zone and the bonus (maze.route_families), the share of pools that
    hold an arriving route through each corner (per maze too, for paired intervals), and the first
    `drawn` pools' routes."""
    families = [maze.route_families(p, pool) for p, pool in zip(problems, answers)]
    covered = [maze.corner_coverage(p, pool) for p, pool in zip(problems, answers)]
    both = [float(c["gold"] and c["diamond"]) for c in covered]
    return {
        "objective_means": rewards.reshape(-1, rewards.shape[-1]).mean(0).round(4).tolist(),
        "route_families": {
            k: round(float(np.mean([f[k] for f in families])), 4) for k in families[0]
        },
        "corner_coverage": {
            "gold": float(np.mean([c["gold"] for c in covered])),
            "diamond": float(np.mean([c["diamond"] for c in covered])),
            "both": float(np.mean(both)),
        },
        "per_maze": {"both_corners": both, "arrive": [round(f["exit"], 4) for f in families]},
        # Where the routes go, each maze turned by its pool's favorite corner: the picture's top
        # row. Older result files hold "visits" instead, each maze turned by its gold corner.
        "visit_map": np.mean([maze.visit_map(p, pool) for p, pool in zip(problems, answers)], 0)
        .round(4)
        .tolist(),
        "routes": answers[:drawn],
    }


def solved_job(path, cfg, problems, settings, seed, m):
    """Which problems a checkpoint's pool solves (some answer passes every test)."""
    task = make_task(cfg["task"], **cfg["task_options"])
    _, rewards, _ = evaluate.evaluate_checkpoint(
        path, task, problems, settings["pool_n"], seed=seed, m=m
    )
    return (rewards >= 1.0).all(-1).any(-1)  # (problems,)


def search_job(path, cfg, problems, settings, seed, m, children_per_call):
    """evolve.run_searches for one checkpoint: a search per problem and the same-budget sampling
    control."""
    policy, _ = evaluate.load_policy(path, m)
    task = make_task(cfg["task"], **cfg["task_options"])
    return evolve.run_searches(policy, task, problems, settings, seed, children_per_call)


def oracle_job(cfg, settings, seed, m):
    """The best any policy could reach on the pools' problems -> a record shaped like a pool's
    ("optimum")."""
    task = make_task(cfg["task"], **cfg["task_options"])
    problems = task.problems("heldout", settings["pool_problems"], random.Random(seed))
    ks = evaluate.k_grid(settings["pool_n"])
    weights = evaluate.heldout_weights(task.dim, settings["heldout_weightings"], seed)
    best = oracle.mean_oracle(task, problems, ks, weights, m=m)
    return {
        "ks": ks,
        "best_at_k": best["best_at_k"],
        "pass_at_k": best["pass_at_k"],
        **({"heldout_weight_best_at_k": best["w_best_at_k"]} if "w_best_at_k" in best else {}),
        "mean_scalar": best["best_at_1"],
        "set_score": best["set_score"],
        "valid": 1.0,
        "set_score_upper": best["set_score_upper"],
        "problems": [repr(p) for p in problems],
        "plausible": best["hypotheses"],
    }


def machine():
    """What the numbers depend on besides the commit: float32 kernels round differently on different
    processors (AVX2 vs AVX-512), and RL grows a last-bit difference into a different policy."""
    info = Path("/proc/cpuinfo").read_text() if os.path.exists("/proc/cpuinfo") else ""
    names = [line.split(":", 1)[1].strip() for line in info.splitlines() if "model name" in line]
    cpu = names[0] if names else platform.processor()
    return f"{cpu}; torch {torch.__version__}; kernels {torch.backends.cpu.get_cpu_capability()}"


# ---- The pool ----


class Job(NamedTuple):
    kind: str  # "warm", "train", "oracle", "pools", "screen", "search" or "search_set"
    key: tuple  # (task, seed) of a warm start, else (task, method, seed)
    fn: Callable  # runs in a worker: fn(*args)
    args: tuple
    done: Callable  # runs here with fn's result, and may queue the jobs that waited for it
    cfg: dict = None  # a training run's config: the progress line reads its steps from its folder


STAGES = {"warm": 0, "train": 1, "oracle": 2, "pools": 2, "screen": 3, "search": 4, "search_set": 5}


def longest_first(job):
    """By stage, then a set method's training run before a single-answer one, then code before
    persona."""
    return (
        STAGES[job.kind],
        -(job.kind == "train" and job.cfg["algo"] in train.SET_ALGOS),
        -(job.key[0] == "code"),
    )


def default_workers(device):
    """2 on the CPU (a 2-core laptop-class machine); on CUDA one per job that can run at once (6
    training runs, then pools), bounded by the cores: each worker's rewards and kernel launches take
    one."""
    return min(8, os.cpu_count() or 1) if device == "cuda" else 2


def _worker_init():
    # Ctrl-C is the parent's to handle: it stops the workers
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    torch.set_num_threads(1)
    threading.Thread(target=_exit_with, args=(os.getppid(),), daemon=True).start()


def _exit_with(parent):
    """End this worker once its lab command is gone (kill -9 leaves it no Ctrl-C to pass on): its
    run's folder lock goes with it, and the same command resumes the run."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(1)


class InThisProcess:
    """--workers 0: each job runs here as it is submitted, with one torch thread as in a worker.
    Nothing to start (a worker's start imports torch: seconds of CPU), and a debugger or a profiler
    sees the jobs; Ctrl-C stops the job mid-way, as it stops a worker."""

    def submit(self, fn, *args):
        future, threads = Future(), torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            future.set_result(fn(*args))
        except Exception as e:  # a job's error, as a worker's future carries it
            future.set_exception(e)
        finally:
            torch.set_num_threads(threads)
        return future

    def shutdown(self, wait=True, cancel_futures=False):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def worker_pool(workers):
    """`workers` processes, started as a job needs one; 0: the jobs run in this process."""
    if workers == 0:
        return InThisProcess()
    return ProcessPoolExecutor(
        max_workers=workers, mp_context=get_context("spawn"), initializer=_worker_init
    )


def run_jobs(ready, workers, progress):
    """Run the Jobs in `ready` on `workers` processes until none is left or running (a finished
    job's `done` may queue more). Ctrl-C, or a job's error (a full disk: config.WriteError), stops
    every worker at once, mid-job, and is raised again once the jobs that ended with it are done
    (their results stored): a stopped run keeps its last checkpoint, and the same command goes on
    from there."""
    pool = worker_pool(workers)
    running = {}  # future -> (job, start time)
    try:
        while ready or running:
            ready.sort(key=longest_first)
            while ready and len(running) < max(workers, 1):
                job = ready.pop(0)
                running[pool.submit(job.fn, *job.args)] = job, time.time()
            finished, _ = wait(running, timeout=2.0, return_when=FIRST_COMPLETED)
            failed = []
            for future in finished:
                job, t0 = running.pop(future)
                if future.exception() is not None:
                    failed.append(future.exception())
                    continue
                progress.finish(job.kind, job.key, time.time() - t0)
                job.done(future.result())
            if failed:
                raise failed[0]
            progress.tick([(job.kind, job.key, job.cfg, t0) for job, t0 in running.values()])
    except BaseException:
        # stop the workers now, mid-job
        for process in list(getattr(pool, "_processes", {}).values()):
            process.terminate()
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()


# ---- Telling the user what is happening ----

# Seconds one job takes at configs/<task>.yaml on a 2-core AVX-512 VM (one torch thread, both
# workers busy; docs/RESULTS.md), the first estimate; training at EXPECTED_STEPS (steps x
# prompts_per_step), a second update per batch adding half. The progress lines rescale by how fast
# the jobs go here.
EXPECTED_S = {
    ("warm", "persona"): 55,
    ("warm", "code"): 220,
    ("train", "persona"): 33,
    ("train", "persona", "set"): 90,
    ("train", "code"): 63,
    ("train", "code", "set"): 225,
    ("pools", "persona"): 2,
    ("pools", "code"): 3,
    ("screen", "code"): 10,
    ("search", "code"): 20,
    ("search_set", "code"): 15,
    ("oracle", "code"): 60,
    ("warm", "maze"): 140,  # only without its base (bases/maze.pt): a short warm start
    ("train", "maze"): 50,
    ("train", "maze", "set"): 190,
    ("pools", "maze"): 10,  # two pools a checkpoint: at temperature 1.0 and 0.7
    ("oracle", "maze"): 3,
}
# steps x prompts_per_step behind EXPECTED_S
EXPECTED_STEPS = {"persona": 250 * 8, "code": 400 * 16, "maze": 300 * 8}
QUICK_SCALE = 0.04  # a --quick job takes about this share of its headline time
# the fastest forward_seconds() on the 2-core VM EXPECTED_S was measured on (docs/SPEED.md)
REFERENCE_FORWARD_S = 0.0127


def forward_seconds(budget_s=1.0):
    """The fastest of the calls that fit in `budget_s` seconds of one forward of the cpu preset
    (16 rows of 48 tokens, one thread): how fast this machine runs the model the lab trains."""
    with torch.random.fork_rng(devices=[]):  # the lab's own random draws stay as they were
        model = GPT(GPTConfig(**PRESETS["cpu"])).eval()
    idx = torch.randint(0, 256, (16, 48), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(idx, dtype=torch.bool)
    positions = torch.arange(48).expand(16, -1)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the lab's workers run
    fastest = float("inf")
    end = time.perf_counter() + budget_s
    with torch.no_grad():
        while time.perf_counter() < end:
            t0 = time.perf_counter()
            model(idx, mask, positions)
            fastest = min(fastest, time.perf_counter() - t0)
    torch.set_num_threads(threads)
    return fastest


def machine_scale(budget_s=1.0):
    """(how many times EXPECTED_S a job takes on this CPU, a note saying why) before any job has
    run: a second of the model's own forward here against the VM the times were measured on."""
    seconds = forward_seconds(budget_s)
    scale = seconds / REFERENCE_FORWARD_S
    return scale, (
        f"{scale:.1f}x the times measured on a 2-core VM: a forward of the model takes "
        f"{1000 * seconds:.1f} ms here, {1000 * REFERENCE_FORWARD_S:.1f} ms there"
    )


class Progress:
    """The plan up front, then a line with an ETA every `every` seconds. Every job is in `pending`
    from the start (plan) at its EXPECTED_S seconds. The ETA (seconds_left) replays the rest on the
    workers (schedule_left): a running training run goes on at its shown step rate (job_left), any
    other job takes its expected seconds times how its kind has gone here (speed). shared_warmstart:
    experiment's."""

    def __init__(self, workers, quick, shared_warmstart, every=30.0):
        self.t0 = time.time()
        self.last = time.time()  # when the last progress line was printed
        self.every = every  # seconds between progress lines
        self.workers = workers  # 0: the jobs run in this process
        # a --quick run's estimate needs no precision: a fifth of the second a full run measures
        machine, self.machine_note = machine_scale(0.2 if quick else 1.0)
        self.scale = (QUICK_SCALE if quick else 1.0) * machine
        self.shared_warmstart = shared_warmstart
        self.pending = {}
        self.done = []
        self.ratios = {}
        self.first_step = {}

    def expected(self, kind, key, cfg=None):
        family = _family(kind, key)[1]  # persona_collinear's prompts are persona's
        uses_sets = kind == "train" and cfg and cfg["algo"] in train.SET_ALGOS
        kind_key = (kind, family, "set") if uses_sets else (kind, family)
        base = EXPECTED_S.get(kind_key, EXPECTED_S.get((kind, "code"), 10))
        if kind == "train" and cfg:
            base *= cfg["steps"] * cfg["prompts_per_step"] / EXPECTED_STEPS[family]
            base *= 1 + 0.5 * (cfg.get("epochs_per_batch", 1) - 1)
        return base * self.scale

    def plan(self, kind, key, cfg=None, steps_done=0):
        """A job the experiment expects to run (steps_done: the steps of an unfinished run on
        disk)."""
        share = steps_done / max(1, cfg["steps"]) if cfg else 0.0
        self.pending[(kind, key)] = self.expected(kind, key, cfg) * (1 - share)
        self.first_step[(kind, key)] = steps_done

    def drop(self, kind, key):
        self.pending.pop((kind, key), None)

    def finish(self, kind, key, seconds):
        """A job ended after `seconds`: its speed counts from now on; a warm start or a run says
        so."""
        expected = self.pending.pop((kind, key), None)
        if expected:
            self.ratios.setdefault(_family(kind, key), []).append(seconds / expected)
        self.done.append((kind, key))
        if kind == "warm":
            self.say(f"warm start {'/'.join(map(str, key))} ready ({seconds:.0f}s)")
        elif kind == "train":
            self.say(f"trained {'/'.join(map(str, key))} ({seconds:.0f}s)")

    def speed(self, job, measured):
        """How many times its expected seconds a job takes on this machine: the median over the
        finished and `measured` (running) jobs of its kind and task family; failing those, over
        every job; else 1."""
        same = self.ratios.get(_family(*job), []) + measured.get(_family(*job), [])
        every = [r for ratios in (*self.ratios.values(), *measured.values()) for r in ratios]
        return float(np.median(same or every or [1.0]))

    def seconds_left(self, running=(), now=None):
        """The ETA. running: (kind, key, cfg, start time) of the jobs in the workers now."""
        now = time.time() if now is None else now
        left, measured = {}, {}
        for kind, key, cfg, t0 in running:  # training runs that have shown their pace first
            if kind == "train" and (kind, key) in self.pending:
                steps = steps_logged(cfg["out_dir"])
                done = steps - self.first_step.get((kind, key), 0)
                if job_shown_pace(now - t0, done):
                    left[(kind, key)] = job_left(now - t0, done, cfg["steps"] - steps, 0.0)
                    measured.setdefault(_family(kind, key), []).append(
                        (now - t0 + left[(kind, key)]) / self.pending[(kind, key)]
                    )
        for kind, key, _, t0 in running:  # past its plan: this machine is at least this slow
            expected = self.pending.get((kind, key), 0.0)
            if (kind, key) not in left and 0 < expected < now - t0:
                measured.setdefault(_family(kind, key), []).append((now - t0) / expected)
        for kind, key, _, t0 in running:  # the rest at their expected seconds, rescaled
            if (kind, key) not in left:
                left[(kind, key)] = job_left(
                    now - t0,
                    None,
                    0,
                    self.pending.get((kind, key), 0.0) * self.speed((kind, key), measured),
                )
        waiting = {
            job: (
                seconds * self.speed(job, measured),
                [o for o in self.pending if _waits_for(job, o, self.shared_warmstart)],
            )
            for job, seconds in self.pending.items()
            if job not in left
        }
        return schedule_left(left, waiting, max(self.workers, 1))  # --workers 0: one at a time

    def say(self, msg):
        print(f"[{time.time() - self.t0:6.0f}s] {msg}", flush=True)

    def tick(self, running):
        if time.time() - self.last < self.every:
            return
        self.last = now = time.time()
        parts = []
        for kind, key, cfg, t0 in running:
            name = "/".join(map(str, key))
            if kind == "train":
                parts.append(f"train {name} step {steps_logged(cfg['out_dir'])}/{cfg['steps']}")
            else:
                parts.append(
                    f"{kind} {name} {now - t0:.0f}s of ~{self.pending.get((kind, key), 0.0):.0f}s "
                    "planned"
                )
        self.say(
            f"{len(self.done)} jobs done, {len(self.pending) - len(running)} waiting; running: "
            f"{', '.join(parts) or '-'}; about {self.seconds_left(running, now) / 60:.1f} min left"
        )


MIN_PACE_S, MIN_PACE_STEPS = 30.0, 10  # a run's pace counts once it is this far past its start-up


def job_shown_pace(seconds, steps):
    """Has a run shown its step rate: enough steps and seconds that its start-up is a small part of
    them?"""
    return steps is not None and steps >= MIN_PACE_STEPS and seconds >= MIN_PACE_S


def job_left(seconds, steps, steps_left, expected):
    """Seconds a running job has left, `seconds` after its start: a run that has shown its pace goes
    on at it for `steps_left`; any other job takes `expected` seconds, or once past them a tenth of
    its time so far."""
    if job_shown_pace(seconds, steps):
        return steps_left * seconds / steps
    return max(expected - seconds, 0.1 * seconds)


def schedule_left(running, waiting, workers):
    """Seconds until the last job ends, if the workers go on as run_jobs has them: a running job
    ends after its seconds left (running: {job: seconds}); a free worker takes the longest waiting
    job whose prerequisites have ended (waiting: {job: (seconds, [prerequisites])}; a job in neither
    has ended). This list schedule follows the critical path (a long run, what waits for it, idle
    workers), which seconds/workers misses."""
    ends = dict(running)  # job -> when it ends, in seconds from now
    # when each worker is free
    free = list(running.values()) + [0.0] * max(0, workers - len(running))
    heapq.heapify(free)
    left = dict(waiting)
    while left:
        t = heapq.heappop(free)
        ready = [
            job
            for job, (_, needs) in left.items()
            if not any(n in left or ends.get(n, 0.0) > t for n in needs)
        ]
        if not ready and any(end > t for end in ends.values()):
            # idle until the next job ends
            heapq.heappush(free, min(end for end in ends.values() if end > t))
            continue
        # (ready is empty only on a cycle of prerequisites)
        job = max(ready or left, key=lambda j: left[j][0])
        ends[job] = t + left.pop(job)[0]
        heapq.heappush(free, ends[job])
    return max(ends.values(), default=0.0)


def _family(kind, key):
    """The jobs a job's speed here is read from: its kind on code, on the maze or on persona's
    prompts (either persona task)."""
    return kind, key[0] if key[0] in ("code", "maze") else "persona"


def _waits_for(job, other, shared_warmstart):
    """Does job wait for other (both (kind, key))? A seed's stages: its warm start (or
    shared_warmstart's)
    -> its runs, the oracle, its pools -> each run's pools -> the code screens (every code pool) ->
    searches."""
    (kind, key), (other_kind, other_key) = job, other
    if key[-1] != other_key[-1]:  # another seed
        return False
    if other_kind == "warm":
        return (
            kind in ("train", "oracle", "pools")
            and shared_warmstart.get(key[0], key[0]) == other_key[0]
        )
    return (
        (other_kind == "train" and kind == "pools" and key == other_key)
        or (other_kind == "pools" and kind == "screen" and other_key[0] == key[0])
        or (other_kind == "screen" and kind in ("search", "search_set"))
    )


def steps_logged(run_dir):
    """The last RL step a run has logged (timing.jsonl gets a line per step; a resumed run appends
    to it, so its last line, not its length): 0 before the first."""
    try:
        with open(os.path.join(run_dir, "timing.jsonl"), "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - 4096))
            lines = f.read().split(b"\n")[:-1]  # a line still being written has no newline yet
        return json.loads(lines[-1])["step"] if lines else 0
    except (OSError, ValueError, KeyError):
        return 0
