"""What an experiment finds on disk: a run folder's status, the keys a stored evaluation carries (so
the same command reuses it instead of running it again), and a committed leaderboard that a new
method is compared against without rerunning it (`python lab/experiment.py --algos NEW --against
DIR`).

A board's result files (docs/figures/leaderboard/results/*.json) hold what a comparison needs: every
run's and evaluation's settings (the keys), each pool's held-out problems, each seed's search
problems. A new run takes the board's search problems instead of screening its own (a screen depends
on every compared checkpoint's pools), and is refused, naming the setting, when one that changes
results differs. Deliberately left out: comparing the warm starts' weights (rebuilt from the seed,
they differ in the last bits on another processor, which the intervals are for), boards made before
result files recorded their keys.
"""

import ast
import os
import random

import yaml

import train
from config import ConfigError
from lab import report
from runfiles import EVAL_KEYS, RESULT_NEUTRAL_KEYS
from tasks import make_task

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


def result_key(cfg, settings, keys):
    return {
        "run": {
            k: v
            for k, v in sorted(cfg.items())
            if k not in RESULT_NEUTRAL_KEYS + EVAL_KEYS + ("warmstart_dir",)
        },
        "settings": {k: settings[k] for k in keys},
    }


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
    settings = {
        k: v
        for k, v in stored.get("settings", {}).items()
        if RETIRED_SETTINGS.get(k, object()) != v
    }
    return {**stored, "run": with_defaults(stored["run"]), "settings": settings} == {
        **key,
        "run": with_defaults(key["run"]),
    }


# ---- A committed board to compare against ----


def load_board(board_dir, tasks, seeds):
    """{(task, method, seed): record} of the board; a task or seed it lacks is a one-line error."""
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
        for key in sorted(
            k
            for k in train.DEFAULTS
            if k not in mine
            and k not in RESULT_NEUTRAL_KEYS + EVAL_KEYS
            and theirs.get(k) != ours.get(k)
        ):
            raise ConfigError(
                f"--against {board_dir}: {task} seed {seed}: '{key}' is {ours[key]!r} here and "
                f"{theirs[key]!r} on the board; compare with the board's settings"
            )
        # the pools' problems, drawn as workers.pools_job draws them
        task_code = make_task(cfg["task"], **cfg["task_options"])
        if [
            repr(p)
            for p in task_code.problems("heldout", settings["pool_problems"], random.Random(seed))
        ] != ref["pools"]["problems"]:
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
