"""
Configuration that fails loudly, in one line, before anything is written: train.py's DEFAULTS <- a
YAML file <- --set key=value; an override may change a value but never its type (as in nanoGPT).
It also builds a task from its name (make_task). A student can skip this file.
Left out: nested configs, environment variables, inheritance.
"""

import argparse
import contextlib
import difflib
import importlib.util
import math
import os
import sys
import tokenize

import torch
import yaml

from codetask import CodeTask
from maze import MazeTask
from model import PRESETS, SequenceTooLong, Tokenizer
from rewards import PersonaTask

# ---- Tasks by their config name: every task the project ships. A new task: write its class
# (tasks.py says what it offers), add a line here.
# name -> (class, the options that make this task of it)
TASKS = {
    "persona": (PersonaTask, {}),
    # the control: personas that like each other's letters, nearly collinear rewards
    "persona_collinear": (PersonaTask, {"overlap": 0.9}),
    "code": (CodeTask, {}),
    # the VPO paper's own task: a route must choose the gold or the diamond corner
    "maze": (MazeTask, {}),
}


def make_task(name, **options):
    """Build a task from its config name; options are that task's constructor arguments."""
    if name not in TASKS:
        raise ValueError(f"unknown task '{name}' (choose {', '.join(TASKS)})")
    cls, preset = TASKS[name]
    return cls(**{**preset, **options})


class ConfigError(ValueError):
    """A setting, or a file a setting names (a checkpoint), that cannot be used."""


class WriteError(OSError):
    """A write the disk refused (full, read-only, failing), raised by runfiles' writes once every
    file they touched is as it was: the OS's words for its errno and the file, in one line."""

    def __str__(self):
        words = os.strerror(self.errno) if self.errno else (self.strerror or "write failed")
        return f"{words[0].lower()}{words[1:]}: {self.filename}"


# What a command reports in one line (exit 2) instead of a traceback: a bad setting, a missing file,
# a run whose numbers went non-finite (its checkpoints stay), a sequence longer than block_size, a
# write the disk refused (what was written before stays whole). Any other exception is a bug in the
# code, and its traceback shows where it is.
ONE_LINE_ERRORS = (ConfigError, FileNotFoundError, FloatingPointError, SequenceTooLong, WriteError)


# How a finished run is measured (evaluate.py, evolve.py, the lab): part of train.DEFAULTS, never
# what a run trains. Each line's comment is its reason (`--help` prints them).
EVALUATION = dict(
    pool_n=30,  # answers per held-out problem; k counts answers, up to pool_n
    pool_problems=40,  # held-out problems per task and seed (the same for every method)
    heldout_weightings=64,  # weightings for w-best@k, from a seed no training run uses
    evo_problems=64,  # searches per policy (the paper's case study: 32; 64 narrows the interval)
    evo_min_plausible=2000,  # programs a searched problem leaves: 10x the budget, no lucky guess
    evo_screen=112,  # candidate search problems the lab screens for those no pool solves
    evo_budget=200,  # candidates evaluated per search (the paper: 200 iterations of one program)
    evo_islands=5,  # islands per search (OpenEvolve's default)
    evo_migrate_every=50,  # candidates of a search between ring migrations
    evo_capacity=10,  # programs an island keeps, one per pass pattern, best first
    evo_explore=0.3,  # chance a parent is any program of its island instead of the best
    evo_temperature=0.7,  # sampling temperature of the search and of its control (OpenEvolve's)
    evo_top_p=0.95,  # nucleus sampling of the search and its control (1.0: off)
    evo_children_per_call=1,  # children per call: 1 (OpenEvolve's); a set policy also runs at m
    evo_positions_per_call=60_000,  # memory cap: rows x tokens per sampler call
)


def declared_reasons(path, name):
    """{key: reason}: the trailing comment of each `key=value,  # reason` line of the `name =
    dict(...)` statement in the Python file `path`, where every setting is declared once."""
    with open(path, "rb") as f:
        tokens = [t for t in tokenize.tokenize(f.readline) if t.type != tokenize.NL]
    start = next(i for i, t in enumerate(tokens) if t.string == name and t.start[1] == 0)
    reasons = {}
    depth = 0
    key = None  # the NAME token of the setting on the current line
    for i, t in enumerate(tokens[start:], start):
        if t.type == tokenize.OP and t.string in "([{":
            depth += 1
        elif t.type == tokenize.OP and t.string in ")]}":
            depth -= 1
            if depth == 0:
                return reasons
        elif depth == 1 and t.type == tokenize.NAME and tokens[i + 1].string == "=":
            key = t
        elif depth == 1 and t.type == tokenize.COMMENT and key and key.start[0] == t.start[0]:
            reasons[key.string] = t.string.lstrip("#").strip()
    return reasons


def settings_parser(description, defaults, declared_in=(), config_file=True):
    """The command line train.py, search.py and lab/experiment.py share: --config (a YAML file of
    settings) and --set key=value, with a --help that lists every setting of `defaults`, its
    default and its reason, read where it is declared (`declared_in`: (file, dict name) pairs; this
    file's EVALUATION always)."""
    reasons = declared_reasons(__file__, "EVALUATION")
    for path, name in declared_in:
        reasons.update(declared_reasons(path, name))
    shown = {k: f"{k}={v}" if v != "" else f'{k}=""' for k, v in defaults.items()}
    width = max(map(len, shown.values()))
    listing = "\n".join(f"  {shown[k]:<{width}}  {reasons.get(k, '')}" for k in defaults)
    parser = argparse.ArgumentParser(
        description=description,
        epilog=f"settings (--set key=value), their defaults and why:\n{listing}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    if config_file:
        parser.add_argument("--config", help="a YAML file of the settings that differ (configs/)")
    parser.add_argument(
        "--set",
        nargs="*",
        action="extend",
        default=[],
        metavar="KEY=VALUE",
        help="change settings (listed below); --set may repeat, every item counts",
    )
    return parser


def parse_value(text):
    """'3' -> 3, '1e-3' -> 0.001 (YAML 1.1 would keep it a string), 'true' -> True, '{a: 1}' ->
    dict."""
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    try:
        return yaml.safe_load(text) if text != "" else ""
    except yaml.YAMLError:
        return text


def _checked(key, value, default):
    """value converted to default's type where that is lossless, else ConfigError."""
    if isinstance(default, str) and isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)  # --set out_dir=123 is a path, not a number
    if isinstance(default, float) and isinstance(value, str):
        # "1e-3" in a YAML file is a string to YAML 1.1
        with contextlib.suppress(ValueError):
            value = float(value)
    kind = (int, float) if isinstance(default, float) else type(default)
    # a bool is an int to Python, but a setting's True is never a number
    if not isinstance(value, kind) or (isinstance(value, bool) and not isinstance(default, bool)):
        raise ConfigError(f"config key '{key}' must be {type(default).__name__}, got {value!r}")
    return float(value) if isinstance(default, float) else value


def read_yaml(path):
    """A YAML file of key: value -> dict, or ConfigError in one line."""
    try:
        with open(path) as f:
            loaded = yaml.safe_load(f) or {}
    except OSError as e:
        raise ConfigError(f"cannot read config file {path}: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise ConfigError(
            f"config file {path} is not valid YAML: {str(e).splitlines()[0]}"
        ) from None
    if not isinstance(loaded, dict):
        raise ConfigError(f"config file {path} must hold a mapping of key: value")
    return loaded


def resolve(defaults, algos, path=None, overrides=(), base=None, samplers=()):
    """defaults (or base) <- YAML file <- key=value overrides, checked; `algos`: train.py's
    algorithm names, `samplers`: vpo.WEIGHT_SAMPLERS (passed in: a warm start's code, which
    imports this file, never depends on vpo.py)."""
    cfg = dict(base or defaults)
    updates = list(read_yaml(path).items()) if path else []
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"override '{item}' must look like key=value")
        key, text = item.split("=", 1)
        updates.append((key.strip(), parse_value(text)))
    for key, value in updates:
        if key not in defaults:
            hint = difflib.get_close_matches(key, defaults, n=1)
            raise ConfigError(
                f"unknown config key '{key}'" + (f" (did you mean '{hint[0]}'?)" if hint else "")
            )
        cfg[key] = _checked(key, value, defaults[key])
    if algos is None:  # the evaluation settings alone (search.py's --set)
        validate_evaluation(cfg)
    else:
        validate(cfg, algos, samplers)
    return cfg


def resolve_evaluation(overrides=()):
    """EVALUATION <- key=value overrides of its keys, checked as every config key is."""
    return resolve(EVALUATION, None, overrides=overrides)


def pick_device(name):
    """auto -> cuda, mps or cpu, whichever this machine has; a named device it lacks is a
    ConfigError."""
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device=cuda but CUDA is not available")
    if name == "mps" and not torch.backends.mps.is_available():
        raise ConfigError("device=mps but MPS is not available")
    if name != "auto":
        return name
    if torch.cuda.is_available():
        return "cuda"
    return "mps" if torch.backends.mps.is_available() else "cpu"


# Algorithms whose advantage divides by no group std, so scale_rewards is refused, not ignored.
NO_GROUP_STD = {
    "gdpo": "its per-component std division is the method (without it: dr_grpo, rescaled per "
    "batch)",
    "maxrl": "it divides by the group's mean, not its std",  # MaxRL's estimator
    "vpo_loo": "its leave-one-out baseline divides by nothing",
    "rloo": "its leave-one-out baseline divides by nothing",
}


def validate_evaluation(cfg):
    """The evaluation and search settings' ranges (EVALUATION's keys)."""
    for key in ("pool_n", "pool_problems", "heldout_weightings"):
        if cfg[key] < 1:
            raise ConfigError(f"{key} must be >= 1, got {cfg[key]}")
    for key in (k for k in EVALUATION if k.startswith("evo_")):
        if cfg[key] < 0:
            raise ConfigError(f"{key} must be >= 0, got {cfg[key]}")
    if not 0 < cfg["evo_top_p"] <= 1:
        raise ConfigError("evo_top_p must be in (0, 1]")


def need(condition, message):
    if not condition:
        raise ConfigError(message)


def validate(cfg, algos, samplers):
    """Out-of-range values fail here, before anything is written or trained."""
    for key, value in cfg.items():
        if isinstance(value, float):
            need(math.isfinite(value), f"{key} must be a finite number, got {value}")
    for key in ("lr", "sft_lr", "alpha", "clip", "max_grad_norm"):
        need(cfg[key] > 0, f"{key} must be > 0, got {cfg[key]}")
    non_negative = ("steps", "sft_steps", "eval_every", "ckpt_every", "kl_coef", "weight_decay")
    non_negative += ("threads", "peak_tflops", "temperature", "clip_high", "entropy_coef")
    non_negative += ("format_coef", "dynamic_sampling", "parent_replay", "train_problems")
    non_negative += ("explore_coef",)
    for key in non_negative:
        need(cfg[key] >= 0, f"{key} must be >= 0, got {cfg[key]}")
    at_least_one = ("prompts_per_step", "sft_batch", "num_weights", "epochs_per_batch")
    at_least_one += ("eval_problems", "block_size")
    for key in at_least_one:
        need(cfg[key] >= 1, f"{key} must be >= 1, got {cfg[key]}")
    for key in ("mutation_share", "sft_parent_fraction", "sft_single_first"):
        need(0 <= cfg[key] <= 1, f"{key} must be in [0, 1]")
    need(0 < cfg["top_p"] <= 1, "top_p must be in (0, 1]")
    G = cfg["group_size"]
    need(G >= 2, f"group_size must be >= 2 for group-normalized advantages, got {G}")
    m = cfg["answers_per_rollout"]
    need(m >= 1, f"answers_per_rollout (m) must be >= 1, got {m}")
    # k = G: one subset, every advantage 0
    k_fits = 1 <= cfg["max_k"] < G or cfg["algo"] != "max_at_k"
    need(k_fits, f"max_k must be in 1..group_size-1={G - 1} for max_at_k, got {cfg['max_k']}")
    validate_evaluation(cfg)
    validate_choices(cfg, algos, samplers)


# Settings that name one of a few choices
CHOICES = {
    "scale_rewards": ("group", "batch", "none"),
    "loss_norm": ("tokens", "constant"),
    "device": ("auto", "cpu", "cuda", "mps"),
    "dtype": ("float32", "bfloat16"),
}


# report_to's trackers -> the package each needs (tracking.py imports it, and only when asked)
TRACKER_PACKAGES = {"tensorboard": "tensorboard", "trackio": "trackio"}


def trackers(report_to):
    """report_to -> the trackers named, once each: "none" -> [], "tensorboard,trackio" -> both."""
    names = [name.strip() for name in report_to.split(",")]
    return list(dict.fromkeys(name for name in names if name not in ("", "none")))


def installed(package):
    """Whether `package` can be imported, found without importing it."""
    if package in sys.modules:  # None there is Python's mark of an import that fails
        return sys.modules[package] is not None
    return importlib.util.find_spec(package) is not None


def validate_choices(cfg, algos, samplers):
    """Names that must be known, and settings that only go together."""
    need(cfg["algo"] in algos, f"algo must be one of {sorted(algos)}, got '{cfg['algo']}'")
    need(cfg["task"] in TASKS, f"task must be one of {', '.join(TASKS)}, got '{cfg['task']}'")
    need(cfg["model"] in PRESETS, f"model must be one of {sorted(PRESETS)}, got '{cfg['model']}'")
    for key, names in CHOICES.items():
        listed = f"{', '.join(names[:-1])} or {names[-1]}"
        need(cfg[key] in names, f"{key} must be {listed}, got '{cfg[key]}'")
    for name in trackers(cfg["report_to"]):
        need(
            name in TRACKER_PACKAGES,
            "report_to must be none, tensorboard, trackio or both comma-separated, got "
            f"'{cfg['report_to']}'",
        )
        package = TRACKER_PACKAGES[name]
        need(installed(package), f"report_to={name} needs its package: pip install {package}")
    need(
        cfg["weight_sampler"] in samplers,
        f"weight_sampler must be one of {', '.join(samplers)} "
        f"(vpo.WEIGHT_SAMPLERS, beside vpo.sample_weights), got '{cfg['weight_sampler']}'",
    )
    sobol = cfg["weight_sampler"] == "sobol"
    need(not sobol or cfg["alpha"] == 1.0, "weight_sampler=sobol needs alpha=1")
    explores = algos[cfg["algo"]].explores
    need(
        explores != "historical" or cfg["train_problems"] > 0,
        f"algo {cfg['algo']} needs a finite training set (--set train_problems=N): its bonus "
        "counts how often each outcome was sampled on a problem, and fresh problems are never seen "
        "twice",
    )
    need(
        not explores or not cfg["dynamic_sampling"],
        f"dynamic_sampling does not go with {cfg['algo']}: its advantage reads outcomes the "
        "resampling does not count",
    )
    why = NO_GROUP_STD.get(cfg["algo"])
    std = cfg["scale_rewards"]
    need(std == "group" or not why, f"scale_rewards={std} does not apply to {cfg['algo']}: {why}")
    for key in ("mutation_share", "parent_replay"):
        only_code = cfg[key] == 0 or cfg["task"] == "code"
        need(only_code, f"{key} > 0 needs the code task (parents are programs)")
    cells = cfg["task"] == "maze" and cfg["task_options"].get("cells", False)
    need(
        not cells or cfg["tokenizer"] == "maze",
        "the maze's routes with cells (task_options cells: true) need tokenizer=maze: a move and "
        "the cell it reaches are one token",
    )
    try:
        make_task(cfg["task"], **cfg["task_options"])
    except (TypeError, ValueError) as e:
        raise ConfigError(f"task_options for task '{cfg['task']}': {e}") from None
    try:
        Tokenizer(cfg["tokenizer"])  # a tiktoken encoding needs a download
    except RuntimeError as e:
        raise ConfigError(str(e)) from None
