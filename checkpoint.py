"""
Checkpoints and run folders: saving atomically, loading safely, resuming exactly.
A student can skip this file: train.py calls it to save and resume, search.py to load a policy.

- Saving writes a temporary file, fsyncs it, and renames it: a kill mid-write never leaves a torn
  checkpoint.
- Loading uses torch.load(weights_only=True): a checkpoint holds tensors, numbers, strings,
  lists, tuples and dicts, and nothing else is unpickled. A file that would run code when loaded
  (pickle can name any function to call) stops with one line and runs nothing, so a checkpoint a
  classmate shared is safe to evaluate.
- A run folder is never overwritten by accident: a finished run needs overwrite=true, an
  unfinished one resume=true (continue from the last checkpoint, byte-identical metrics) or
  overwrite=true.

Deliberately left out: sharded or asynchronous checkpoints, keeping more than the last one.
"""

import hashlib
import inspect
import json
import os

import torch
import yaml

from config import ConfigError
from model import GPT, GPTConfig, Tokenizer
from rollouts import rollout_prompt, rollout_text

# keys a resumed run may change without changing its results
RUN_ONLY_KEYS = ("resume", "overwrite", "quiet", "steps", "device", "threads", "peak_tflops", "out_dir")


def atomic_save(obj, path):
    """Write to a temporary file, then rename. The temporary name is per process, so two runs
    sharing a warm-start cache never mix writes."""
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())  # the bytes are on disk before the rename makes them the checkpoint
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def load_checkpoint(path):
    """A checkpoint of this trainer -> its dict, every tensor on the CPU (load_state_dict copies
    weights and optimizer state to the model's device; random-number states must stay CPU tensors);
    FileNotFoundError or a one-line RuntimeError."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"checkpoint not found: {path}")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # torch raises several types for truncated, foreign or unsafe files
        unsafe = [line for line in str(e).splitlines() if "global" in line.lower()]  # what it tried to call
        if unsafe:
            raise RuntimeError(f"checkpoint {path} holds more than weights and settings, nothing of it was run "
                               f"({unsafe[0].strip()[:120]})") from None
        first = (str(e).strip().splitlines() or [""])[0]  # one line: the error must fit on one
        raise RuntimeError(f"checkpoint {path} is unreadable or corrupt ({type(e).__name__}: {first})") from None
    if not isinstance(ckpt, dict) or not {"model", "model_config", "config"} <= ckpt.keys():
        raise RuntimeError(f"checkpoint {path} is not a checkpoint of this trainer (missing model/config)")
    return ckpt


def model_from_checkpoint(path, device="cpu"):
    """A saved run or warm start -> (model in eval mode, tokenizer, its config, m). m is the number
    of answers per rollout it was trained to write (1 for a warm start)."""
    ckpt = load_checkpoint(path)
    model = GPT(GPTConfig(**ckpt["model_config"])).to(device)
    model.load_state_dict(ckpt["model"])
    return model.eval(), Tokenizer(ckpt["config"]["tokenizer"]), ckpt["config"], ckpt.get("m", 1)


WARMSTART_VERSION = 1  # change it when train.warm_start trains differently, so no stale cache is reused


def warmstart_path(cfg):
    """Where the warm start of cfg is cached: named by a hash of what shapes it, its settings and the
    task's data code (rewards.py makes the demonstrations, rollouts.py formats them); not of the
    trainer's text, so editing a comment retrains nothing."""
    shaping = {k: cfg[k] for k in ("task", "task_options", "seed", "model", "block_size", "tokenizer",
                                   "sft_steps", "sft_batch", "sft_lr", "sft_parent_fraction", "sft_single_first",
                                   "answers_per_rollout", "dtype")}
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "rewards.py"), "rb") as f:
        shaping["rewards.py"] = hashlib.sha1(f.read()).hexdigest()
    shaping["formats"] = inspect.getsource(rollout_prompt) + inspect.getsource(rollout_text)
    shaping["version"] = WARMSTART_VERSION
    key = hashlib.sha1(json.dumps(shaping, sort_keys=True).encode()).hexdigest()[:12]
    return os.path.join(cfg["warmstart_dir"], f"warmstart-{cfg['task']}-{key}.pt")


def run_dir(cfg):
    return cfg["out_dir"] or os.path.join("out", f"{cfg['task']}-{cfg['algo']}-s{cfg['seed']}")


def prepare_out_dir(cfg):
    """Refuse to clobber results; create the folders now, not after minutes of warm start."""
    out_dir = run_dir(cfg)
    finished = os.path.exists(os.path.join(out_dir, "final.pt"))
    started = os.path.exists(os.path.join(out_dir, "metrics.jsonl"))
    if cfg["resume"]:
        if finished and not cfg["overwrite"]:
            raise ConfigError(f"{out_dir} already holds a finished run; nothing to resume")
        # a run killed before its first checkpoint has config.yaml only: train() starts it again
        if not any(os.path.exists(os.path.join(out_dir, f)) for f in ("ckpt.pt", "config.yaml")):
            raise ConfigError(f"resume=true but {out_dir}/ckpt.pt does not exist (no run to resume there)")
    elif finished and not cfg["overwrite"]:
        raise ConfigError(f"{out_dir} already holds a finished run; choose another out_dir or --set overwrite=true")
    elif started and not cfg["overwrite"]:
        raise ConfigError(f"{out_dir} holds an unfinished run; --set resume=true to continue it "
                          f"or overwrite=true to start again")
    for path in (out_dir, cfg["warmstart_dir"]):
        try:
            os.makedirs(path, exist_ok=True)
        except OSError as e:
            raise ConfigError(f"cannot create directory {path}: {e.strerror}") from None
    return out_dir


def write_config(cfg, out_dir):
    """config.yaml, written whole or not at all: a resume before the first ckpt.pt reads it back."""
    tmp = os.path.join(out_dir, f"config.yaml.{os.getpid()}.tmp")
    with open(tmp, "w") as f:
        yaml.safe_dump({**cfg, "out_dir": out_dir}, f, sort_keys=False)
    os.replace(tmp, os.path.join(out_dir, "config.yaml"))


def resume_point(cfg, out_dir):
    """The checkpoint to resume from (None: start afresh, also for a run killed before its first
    checkpoint), after checking that out_dir holds this same run."""
    ckpt_path, config_path = os.path.join(out_dir, "ckpt.pt"), os.path.join(out_dir, "config.yaml")
    resume = None
    if os.path.exists(ckpt_path):
        resume = load_checkpoint(ckpt_path)
        missing = {"optimizer", "rng", "generator", "torch_rng", "metrics_offset", "step"} - resume.keys()
        if missing:
            raise RuntimeError(f"checkpoint {ckpt_path} cannot be resumed: it lacks {sorted(missing)}")
        saved = resume["config"]
    else:
        try:
            with open(config_path) as f:
                saved = yaml.safe_load(f)
        except (OSError, yaml.YAMLError):
            saved = None
        if not isinstance(saved, dict):
            raise ConfigError(f"cannot resume {out_dir}: no ckpt.pt and {config_path} is unreadable")
    # out_dir may be spelled differently (./out/x vs out/x): the run was found there, it is this one
    changed = sorted(k for k in cfg if k not in RUN_ONLY_KEYS and saved.get(k) != cfg[k])
    if changed:
        raise ConfigError(f"cannot resume {out_dir}: config differs from the saved run in {changed}")
    logged = os.path.join(out_dir, "metrics.jsonl")
    if resume and (not os.path.exists(logged) or os.path.getsize(logged) < resume["metrics_offset"]):
        raise ConfigError(f"cannot resume {out_dir}: metrics.jsonl is missing or shorter than ckpt.pt expects")
    return resume


class RunFiles:
    """The files a run writes into out_dir: log.txt; metrics.jsonl, only what the seed determines (the
    same bytes on every rerun); timing.jsonl, the wall clock; samples.jsonl, rollouts to read; and
    the checkpoints. Only rank 0 writes: on the other ranks every call writes nowhere. A resumed run
    appends, after cutting metrics.jsonl back to where its checkpoint was taken."""

    def __init__(self, out_dir, lead, quiet, resume=None):
        self.out_dir, self.lead, self.quiet, self.mode = out_dir, lead, quiet, "a" if resume else "w"
        if lead and resume:
            with open(os.path.join(out_dir, "metrics.jsonl"), "r+") as f:
                f.truncate(resume["metrics_offset"])
        self.files = {}
        self.log_file = self._open("log.txt")

    def _open(self, name):  # on first use: a run killed in its warm start leaves no metrics.jsonl
        if name not in self.files:
            self.files[name] = open(os.path.join(self.out_dir, name) if self.lead else os.devnull, self.mode)
        return self.files[name]

    def log(self, msg):
        print(msg, file=self.log_file, flush=True)
        if self.lead and not self.quiet:
            print(msg, flush=True)

    def write(self, name, record):
        f = self._open(name)
        f.write(json.dumps(record) + "\n")
        f.flush()

    def save(self, name, state):
        """A checkpoint that remembers how much of metrics.jsonl it accounts for."""
        if self.lead:
            atomic_save({**state, "metrics_offset": self._open("metrics.jsonl").tell()}, os.path.join(self.out_dir, name))

    def close(self):
        for f in self.files.values():
            f.close()
