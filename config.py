"""
Configuration that fails loudly, in one line, before anything is written: train.py's DEFAULTS <- a
YAML file <- --set key=value; an override may change a value but never its type (as in nanoGPT).
A student can skip this file. Left out: nested configs, environment variables, inheritance.
"""

import contextlib
import difflib
import math

import torch
import yaml

from model import PRESETS
from tasks import TASKS, make_task


class ConfigError(ValueError):
    pass


# How a finished run is measured (search.py, the lab): part of train.DEFAULTS, never what a run
# trains.
EVALUATION = dict(
    pool_n=30,  # answers per held-out problem; k counts answers, up to pool_n
    pool_problems=40,  # held-out problems per task and seed (the same for every method)
    heldout_weightings=64,  # weightings for w-best@k, from a seed no training run uses
    # searches per policy (the paper's case study: 32; 64 narrows the interval)
    evo_problems=64,
    # plausible programs a searched problem leaves: 10x the budget, no lucky sampler
    evo_min_plausible=2000,
    # candidate search problems the lab screens, keeping those no checkpoint's pool solves
    evo_screen=112,
    # candidates evaluated per search (the paper: 200 iterations of one program)
    evo_budget=200,
    evo_islands=5,  # OpenEvolve's default
    evo_migrate_every=50,  # candidates of a search between ring migrations
    evo_capacity=10,  # programs an island keeps, one per pass pattern, best first
    evo_explore=0.3,  # chance a parent is any program of its island instead of the best
    # sampling temperature of the search and of its control (OpenEvolve's)
    evo_temperature=0.7,
    evo_top_p=0.95,  # nucleus sampling, likewise (1.0: off)
    # children per call: 1 (OpenEvolve's iteration); a set policy also runs at m
    evo_children_per_call=1,
    evo_positions_per_call=60_000,  # memory cap: rows x tokens per sampler call
)


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
    return (
        "cuda"
        if torch.cuda.is_available()
        else "mps"
        if torch.backends.mps.is_available()
        else "cpu"
    )


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


def validate(cfg, algos, samplers):
    """Out-of-range values fail here, before anything is written or trained."""

    def need(cond, msg):
        if not cond:
            raise ConfigError(msg)

    for key, value in cfg.items():
        if isinstance(value, float):
            need(math.isfinite(value), f"{key} must be a finite number, got {value}")
    need(cfg["algo"] in algos, f"algo must be one of {sorted(algos)}, got '{cfg['algo']}'")
    need(cfg["task"] in TASKS, f"task must be one of {', '.join(TASKS)}, got '{cfg['task']}'")
    need(cfg["model"] in PRESETS, f"model must be one of {sorted(PRESETS)}, got '{cfg['model']}'")
    for key in ("lr", "sft_lr", "alpha", "clip", "max_grad_norm"):
        need(cfg[key] > 0, f"{key} must be > 0, got {cfg[key]}")
    for key in (
        "steps",
        "sft_steps",
        "eval_every",
        "ckpt_every",
        "kl_coef",
        "weight_decay",
        "threads",
        "peak_tflops",
        "temperature",
        "clip_high",
        "entropy_coef",
        "format_coef",
        "dynamic_sampling",
        "parent_replay",
    ):
        need(cfg[key] >= 0, f"{key} must be >= 0, got {cfg[key]}")
    for key in (
        "prompts_per_step",
        "sft_batch",
        "num_weights",
        "epochs_per_batch",
        "eval_problems",
        "block_size",
    ):
        need(cfg[key] >= 1, f"{key} must be >= 1, got {cfg[key]}")
    validate_evaluation(cfg)
    need(
        cfg["group_size"] >= 2,
        f"group_size must be >= 2 for group-normalised advantages, got {cfg['group_size']}",
    )
    need(
        cfg["answers_per_rollout"] >= 1,
        f"answers_per_rollout (m) must be >= 1, got {cfg['answers_per_rollout']}",
    )
    need(
        cfg["weight_sampler"] in samplers,
        f"weight_sampler must be one of {', '.join(samplers)} "
        f"(vpo.WEIGHT_SAMPLERS, beside vpo.sample_weights), got '{cfg['weight_sampler']}'",
    )
    need(
        cfg["weight_sampler"] != "sobol" or cfg["alpha"] == 1.0,
        "weight_sampler=sobol needs alpha=1",
    )
    need(0 < cfg["top_p"] <= 1, "top_p must be in (0, 1]")
    # k = G: one subset, every advantage 0
    need(
        1 <= cfg["max_k"] < cfg["group_size"] or cfg["algo"] != "max_at_k",
        f"max_k must be in 1..group_size-1={cfg['group_size'] - 1} for max_at_k, got "
        f"{cfg['max_k']}",
    )
    need(
        cfg["scale_rewards"] in ("group", "batch", "none"),
        f"scale_rewards must be group, batch or none, got '{cfg['scale_rewards']}'",
    )
    need(
        cfg["scale_rewards"] == "group" or cfg["algo"] not in NO_GROUP_STD,
        f"scale_rewards={cfg['scale_rewards']} does not apply to {cfg['algo']}: "
        f"{NO_GROUP_STD.get(cfg['algo'])}",
    )
    need(
        cfg["loss_norm"] in ("tokens", "constant"),
        f"loss_norm must be tokens or constant, got '{cfg['loss_norm']}'",
    )
    need(
        cfg["mutation_share"] == 0 or cfg["task"] == "code",
        "mutation_share > 0 needs the code task (parents are programs)",
    )
    need(
        cfg["parent_replay"] == 0 or cfg["task"] == "code",
        "parent_replay > 0 needs the code task (parents are programs)",
    )
    for key in ("mutation_share", "sft_parent_fraction", "sft_single_first"):
        need(0 <= cfg[key] <= 1, f"{key} must be in [0, 1]")
    need(cfg["device"] in ("auto", "cpu", "cuda", "mps"), "device must be auto, cpu, cuda or mps")
    need(cfg["dtype"] in ("float32", "bfloat16"), "dtype must be float32 or bfloat16")
    try:
        make_task(cfg["task"], **cfg["task_options"])
    except (TypeError, ValueError) as e:
        raise ConfigError(f"task_options for task '{cfg['task']}': {e}") from None
