"""What an experiment finds on disk: a run folder's status, the keys a stored evaluation carries (so
the same command reuses it instead of running it again), the code that made each result, and a
committed leaderboard that a new method is compared against without rerunning it (`python
lab/experiment.py --algos NEW --against DIR`).

A run folder and a result file are reused only while the code that made them is the working tree's
(a fingerprint per file, runfiles.source_fingerprint: comments, formatting and docstrings aside).
What other code made moves to earlier/ beside it, named by a hash of that code, and comes back when
the code does: a student's second idea gets its own results, and going back to the first gets the
first's from the cache.

A board's result files (docs/figures/leaderboard/results/*.json) hold what a comparison needs: every
run's and evaluation's settings (the keys), each pool's held-out problems, each seed's search
problems. A new run takes the board's search problems instead of screening its own (a screen depends
on every compared checkpoint's pools), and is refused, naming the setting, when one that changes
results differs. Deliberately left out: comparing the warm starts' weights (rebuilt from the seed,
they differ in the last bits on another processor, which the intervals are for), boards made before
result files recorded their keys.
"""

import ast
import difflib
import hashlib
import json
import os
import random
import shutil

import yaml

import train
from config import ConfigError, make_task
from lab import report
from runfiles import (
    EVAL_KEYS,
    RESULT_NEUTRAL_KEYS,
    changed_files,
    source_fingerprint,
    writing,
)
from warmstart import warmstart_source

# the settings a stored pool was made with
POOL_KEYS = ("pool_n", "pool_problems", "heldout_weightings")
# and a stored search
SEARCH_KEYS = (
    "evo_budget",
    "evo_islands",
    "evo_migrate_every",
    "evo_capacity",
    "evo_explore",
    "evo_temperature",
    "evo_top_p",
)
# Settings that were removed, at the only value they ever took: a stored key holding one still
# matches.
RETIRED_SETTINGS = {"evo_seeds": 1}  # searches per problem, never more than one


def file_sha256(path):
    """A file's sha256 in hex: what names a committed base (bases/maze.pt) beside its path."""
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def run_status(cfg):
    """What cfg's run folder holds: "finished" (this very run), "unfinished" (this run, to resume),
    "other" (a run with other settings: refuse to touch it), or "empty"."""
    try:
        with open(os.path.join(cfg["out_dir"], "config.yaml")) as f:
            saved = yaml.safe_load(f)
    except (OSError, yaml.YAMLError):
        saved = None
    if not isinstance(saved, dict):
        return "empty"
    # a key added to DEFAULTS after that run reads as its default value
    saved = with_defaults(saved)
    # a run copied elsewhere with its warm start (named by a hash of what shaped it) is still the
    # same run
    same = all(
        saved.get(k) == v
        for k, v in cfg.items()
        if k not in RESULT_NEUTRAL_KEYS + EVAL_KEYS + ("warmstart_from",)
    ) and os.path.basename(str(saved.get("warmstart_from"))) == os.path.basename(
        str(cfg["warmstart_from"])
    )
    if not same:
        return "other"
    return "finished" if os.path.exists(os.path.join(cfg["out_dir"], "final.pt")) else "unfinished"


# ---- The code behind a result ----


def row_sources():
    """The working tree's fingerprints: a training run's (train.py imports every reference file), a
    warm start's pools' and searches' (its training's code, evaluate.py's and evolve.py's) and the
    optimum's (evaluate.py's and evolve.py's)."""
    evaluation = source_fingerprint("evaluate", "evolve")
    run = source_fingerprint("train")
    return {"run": run, "warm": {**warmstart_source(), **evaluation}, "optimum": evaluation}


def source_hash(source):
    """A fingerprint's short name, for what it keys on disk."""
    if not source:
        return "unrecorded"
    return hashlib.sha1(json.dumps(source, sort_keys=True).encode()).hexdigest()[:8]


def keep_by_source(path, made_by, now):
    """The run folder or result file at `path` was made by the code `made_by`: if that is not `now`,
    it moves to earlier/ beside it under its code's hash; what `now` made comes back from there if
    it was kept -> (the files that changed: [] if none or nothing was there, None if its code was
    not recorded; whether one came back)."""
    earlier = os.path.join(os.path.dirname(path), "earlier")
    stem, ext = os.path.splitext(os.path.basename(path))

    def kept(source):
        return os.path.join(earlier, f"{stem}-{source_hash(source)}{ext}")

    changed = []
    if os.path.exists(path):
        if made_by == now:
            return [], False
        changed = changed_files(made_by, now) if made_by else None
        with writing(kept(made_by)):
            os.makedirs(earlier, exist_ok=True)
            if os.path.isdir(kept(made_by)):  # kept twice (only an unrecorded one can be): latest
                shutil.rmtree(kept(made_by))
            os.replace(path, kept(made_by))
    if os.path.exists(kept(now)):
        with writing(path):
            os.replace(kept(now), path)
        return changed, True
    return changed, False


def result_key(cfg, settings, keys):
    neutral = RESULT_NEUTRAL_KEYS + EVAL_KEYS + ("warmstart_dir",)
    run = {k: v for k, v in sorted(cfg.items()) if k not in neutral}
    return {"run": run, "settings": {k: settings[k] for k in keys}}


def with_defaults(run_settings):
    """A run's settings, a key added to train.DEFAULTS after the run at its default (it changed
    nothing), a renamed key under its new name (std_norm true/false is scale_rewards group/none)."""
    settings = dict(run_settings)
    if "std_norm" in settings:
        settings["scale_rewards"] = "group" if settings.pop("std_norm") else "none"
    return {**train.DEFAULTS, **settings}


def same_key(stored, key):
    """A stored evaluation's key == `key`, a run setting missing from either reading as its
    default."""
    if not isinstance(stored, dict) or not isinstance(stored.get("run"), dict):
        return False
    kept = stored.get("settings", {}).items()
    settings = {k: v for k, v in kept if RETIRED_SETTINGS.get(k, object()) != v}
    ours = {**key, "run": with_defaults(key["run"])}
    return {**stored, "run": with_defaults(stored["run"]), "settings": settings} == ours


# ---- A committed board to compare against ----


def load_board(board_dir, tasks, seeds):
    """{(task, method, seed): record} of the board; a missing folder, or a task or seed it lacks, is
    a one-line error."""
    if not os.path.isdir(os.path.join(board_dir, "results")):
        parent = os.path.dirname(os.path.normpath(board_dir)) or "."
        boards = [
            os.path.join(parent, d)
            for d in (sorted(os.listdir(parent)) if os.path.isdir(parent) else [])
            if os.path.isdir(os.path.join(parent, d, "results"))
        ]
        close = difflib.get_close_matches(os.path.normpath(board_dir), boards, n=1, cutoff=0.5)
        what = "is no board (no results/ in it)" if os.path.isdir(board_dir) else "no such folder"
        raise ConfigError(
            f"--against {board_dir}: {what}" + (f"; did you mean {close[0]}?" if close else "")
        )
    board = {(r["task"], r["method"], r["seed"]): r for r in report.load_records([board_dir])}
    for task in tasks:
        for seed in seeds:
            if (task, "grpo", seed) not in board:
                raise ConfigError(
                    f"--against {board_dir}: the board has no GRPO result for {task} seed {seed}"
                )
    return board


def check_against(board, board_dir, configs, settings, method_keys):
    """Refuse, in one line naming the key, the first setting in which `configs` ({(task, method,
    seed): train config}) or `settings` differ from the board's, but each method's own keys
    (`method_keys[method]`)."""
    for (task, method, seed), cfg in sorted(configs.items()):
        ref = board[(task, "grpo", seed)]
        theirs, ours = ref["pools"]["key"]["run"], result_key(cfg, settings, POOL_KEYS)["run"]
        theirs, ours = with_defaults(theirs), with_defaults(ours)
        mine = method_keys[method] | method_keys["grpo"] | {"algo", "warmstart_from"}
        mine |= set(RESULT_NEUTRAL_KEYS + EVAL_KEYS)
        differ = [k for k in train.DEFAULTS if k not in mine and theirs.get(k) != ours.get(k)]
        for key in sorted(differ):
            raise ConfigError(
                f"--against {board_dir}: {task} seed {seed}: '{key}' is {ours[key]!r} here and "
                f"{theirs[key]!r} on the board; compare with the board's settings"
            )
        # the pools' problems, drawn as workers.pools_job draws them
        task_code = make_task(cfg["task"], **cfg["task_options"])
        drawn = task_code.problems("heldout", settings["pool_problems"], random.Random(seed))
        if [repr(p) for p in drawn] != ref["pools"]["problems"]:
            raise ConfigError(
                f"--against {board_dir}: {task} seed {seed}: the held-out problems differ from the "
                f"board's (the task's code changed since the board was made)"
            )
        fields = [("pools", POOL_KEYS)] + ([("search", SEARCH_KEYS)] if "search" in ref else [])
        for field, keys in fields:
            stored = ref[field]["key"]["settings"]
            for key in (k for k in keys if stored.get(k) != settings[k]):
                raise ConfigError(
                    f"--against {board_dir}: {task} seed {seed}: evaluation setting '{key}' is "
                    f"{settings[key]!r} here and {stored.get(key)!r} on the board"
                )


def board_problems(board, task, seed, field):
    """The board's problems, as tuples, from its GRPO result file: the held-out pools' (field
    "pools") or a seed's search problems ("search")."""
    record = board[(task, "grpo", seed)][field]
    return [
        ast.literal_eval(p)
        for p in (record["key"]["problems"] if field == "search" else record["problems"])
    ]
