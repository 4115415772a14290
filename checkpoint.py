"""
Checkpoints and run folders: atomic saves, safe loads (weights_only: a shared checkpoint runs no
code), exact resumes, a run's logs, and the optimizer step that stops before a non-finite number is
saved. A student can skip this file. Left out: sharded or asynchronous checkpoints, keeping more
than the last one.
"""

import json
import os
import random
import time

import numpy as np
import torch
import yaml

import vpo
from config import EVALUATION, ConfigError
from model import GPT, GPTConfig, Tokenizer
from rollouts import rollout_prompt, sample_rollouts

# keys that never change what a run computes (cuda_graph: the same tokens by a faster path)
RESULT_NEUTRAL_KEYS = (
    "resume",
    "overwrite",
    "quiet",
    "device",
    "threads",
    "peak_tflops",
    "out_dir",
    "warmstart_dir",
    "cuda_graph",
)
EVAL_KEYS = tuple(EVALUATION)
# a resumed run may also train for more steps, and be measured otherwise
RUN_ONLY_KEYS = RESULT_NEUTRAL_KEYS + EVAL_KEYS + ("steps",)


def atomic_save(obj, path):
    """torch.save via a per-process temporary file: two runs sharing a warm-start cache never mix
    writes."""
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "wb") as f:
            torch.save(obj, f)
            f.flush()
            # the bytes are on disk before the rename makes them the checkpoint
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def load_checkpoint(path):
    """A checkpoint of this trainer -> its dict on the CPU; FileNotFoundError or a one-line
    RuntimeError."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"checkpoint not found: {path}")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # torch raises several types for truncated, foreign or unsafe files
        # what it tried to call
        unsafe = [line for line in str(e).splitlines() if "global" in line.lower()]
        if unsafe:
            raise RuntimeError(
                f"checkpoint {path} holds more than weights and settings, nothing of it was run "
                f"({unsafe[0].strip()[:120]})"
            ) from None
        first = (str(e).strip().splitlines() or [""])[0]
        raise RuntimeError(
            f"checkpoint {path} is unreadable or corrupt ({type(e).__name__}: {first})"
        ) from None
    if not isinstance(ckpt, dict) or not {"model", "model_config", "config"} <= ckpt.keys():
        raise RuntimeError(
            f"checkpoint {path} is not a checkpoint of this trainer (missing model/config)"
        )
    return ckpt


def model_from_checkpoint(path, device="cpu"):
    """A saved run or warm start -> (model in eval mode, tokenizer, config, m: its answers per
    rollout)."""
    ckpt = load_checkpoint(path)
    model = GPT(GPTConfig(**ckpt["model_config"])).to(device)
    model.load_state_dict(ckpt["model"])
    return model.eval(), Tokenizer(ckpt["config"]["tokenizer"]), ckpt["config"], ckpt.get("m", 1)


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
            raise ConfigError(
                f"resume=true but {out_dir}/ckpt.pt does not exist (no run to resume there)"
            )
    elif finished and not cfg["overwrite"]:
        raise ConfigError(
            f"{out_dir} already holds a finished run; choose another out_dir or --set "
            "overwrite=true"
        )
    elif started and not cfg["overwrite"]:
        raise ConfigError(
            f"{out_dir} holds an unfinished run; --set resume=true to continue it "
            f"or overwrite=true to start again"
        )
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
        yaml.safe_dump(
            {**{k: v for k, v in cfg.items() if k not in EVAL_KEYS}, "out_dir": out_dir},
            f,
            sort_keys=False,
        )
    os.replace(tmp, os.path.join(out_dir, "config.yaml"))


def resume_point(cfg, out_dir):
    """The checkpoint to resume from, once out_dir is checked to hold this run (None: start
    afresh)."""
    ckpt_path, config_path = os.path.join(out_dir, "ckpt.pt"), os.path.join(out_dir, "config.yaml")
    resume = None
    if os.path.exists(ckpt_path):
        resume = load_checkpoint(ckpt_path)
        missing = {
            "optimizer",
            "rng",
            "generator",
            "torch_rng",
            "metrics_offset",
            "step",
        } - resume.keys()
        if missing:
            raise RuntimeError(
                f"checkpoint {ckpt_path} cannot be resumed: it lacks {sorted(missing)}"
            )
        saved = resume["config"]
    else:
        try:
            with open(config_path) as f:
                saved = yaml.safe_load(f)
        except (OSError, yaml.YAMLError):
            saved = None
        if not isinstance(saved, dict):
            raise ConfigError(
                f"cannot resume {out_dir}: no ckpt.pt and {config_path} is unreadable"
            )
    # out_dir may be spelled differently (./out/x vs out/x): the run was found there, it is this one
    changed = sorted(k for k in cfg if k not in RUN_ONLY_KEYS and saved.get(k) != cfg[k])
    if changed:
        raise ConfigError(
            f"cannot resume {out_dir}: config differs from the saved run in {changed}"
        )
    logged = os.path.join(out_dir, "metrics.jsonl")
    if resume and (
        not os.path.exists(logged) or os.path.getsize(logged) < resume["metrics_offset"]
    ):
        raise ConfigError(
            f"cannot resume {out_dir}: metrics.jsonl is missing or shorter than ckpt.pt expects"
        )
    return resume


def run_state(run, step):
    """Everything a resumed run needs to continue as if it had never stopped (`run` is a
    train.Run)."""
    return {
        "model": run.model.state_dict(),
        "model_config": vars(run.model.cfg),
        "config": run.cfg,
        "m": run.m,
        "step": step,
        "optimizer": run.opt.state_dict(),
        "rng": run.rng.getstate(),
        "generator": run.generator.get_state(),
        "torch_rng": torch.get_rng_state(),
    }


def guarded_step(run, loss):
    """backward, clip, optimizer step; stop at the first non-finite number, before it reaches a
    checkpoint."""

    def stop(what):
        raise FloatingPointError(
            f"{what} (lr={run.cfg['lr']}); stopping, the last checkpoint is kept"
        )

    if not torch.isfinite(loss):
        stop(f"non-finite loss ({loss.item()})")
    run.opt.zero_grad(set_to_none=True)
    loss.backward()
    grad_norm = torch.nn.utils.clip_grad_norm_(run.model.parameters(), run.cfg["max_grad_norm"])
    if not torch.isfinite(grad_norm):
        stop("non-finite gradient norm")
    run.opt.step()
    if not torch.stack([torch.isfinite(p).all() for p in run.model.parameters()]).all():  # one sync
        stop("non-finite weights after the optimizer step")
    return float(grad_norm)


def step_metrics(run, batch, rewards, scalar, weights, adv, set_algo):
    """What explains a step (CleanRL-style); set_score under 32 fixed weightings, so runs
    compare."""
    task, P, G = run.task, len(batch["answers"]), run.cfg["group_size"]
    valid = rewards.sum(-1) > 0  # (P, G, m) answers that parsed and were not repeats
    # their own generator: logging never draws from the training stream
    fixed = vpo.sample_weights(1, 32, task.dim, generator=torch.Generator().manual_seed(0)).expand(
        P, -1, -1
    )
    own = {"set_score_train": float(vpo.set_scores(rewards, weights).mean())} if set_algo else {}
    distinct = np.mean(
        [len({task.answer_key(row[0]) for row in group}) / G for group in batch["answers"]]
    )
    mask = batch["completion_mask"].float()
    return {
        "reward_scalar": float(scalar[valid].mean()) if valid.any() else 0.0,
        "reward_per_component": [
            round(float(x), 4) for x in rewards.reshape(-1, task.dim)[valid.reshape(-1)].mean(0)
        ]
        if valid.any()
        else [0.0] * task.dim,
        "set_score": float(vpo.set_scores(rewards, fixed).mean()),
        **own,
        "valid_answers": float(valid.float().mean()),
        "adv_mean": float(adv.mean()),
        "adv_std": float(adv.std()),
        "zero_std_groups": float((adv.abs().sum(1) == 0).float().mean()),
        "entropy": float((batch["entropy"] * mask).sum() / mask.sum()),
        "distinct_first_answers": float(distinct),
    }


def evaluate_heldout(run, files, step, seed=12345):
    """A quick held-out look (two rollouts per problem, the same every time) to metrics.jsonl; rank
    0 only."""
    if run.rank:
        return {"heldout_scalar": float("nan")}
    problems = run.task.problems("heldout", run.cfg["eval_problems"], random.Random(seed))
    run.model.eval()
    batch = sample_rollouts(
        run.model,
        run.tok,
        run.task,
        problems,
        run.m,
        2,
        run.cfg,
        torch.Generator(device=run.device).manual_seed(seed),
        run.device,
    )
    valid = batch["rewards"].sum(-1) > 0  # (P, 2, m)
    scalar = run.task.scalarize(batch["rewards"])
    ev = {
        "heldout_scalar": float(scalar[valid].mean()) if valid.any() else 0.0,
        "heldout_best_in_rollout": float(scalar.max(-1).values.mean()),
        "heldout_valid": float(valid.float().mean()),
    }
    files.write("metrics.jsonl", {"kind": "eval", "step": step, **ev})
    files.log(
        f"eval @ {step}: held-out scalar {ev['heldout_scalar']:.3f}, best-in-rollout "
        f"{ev['heldout_best_in_rollout']:.3f}, valid {ev['heldout_valid']:.2f}"
    )
    return ev


class RunFiles:
    """A run's folder: config.yaml, log.txt, metrics.jsonl (only what the seed determines),
    timing.jsonl, samples.jsonl and the checkpoints; resume cuts metrics.jsonl back to the
    checkpoint. Rank 0 writes."""

    def __init__(self, cfg, lead=True):
        self.lead, self.quiet = lead, cfg["quiet"]
        self.out_dir = prepare_out_dir(cfg) if lead else run_dir(cfg)
        self.resume = resume_point(cfg, self.out_dir) if cfg["resume"] else None
        self.mode = "a" if self.resume else "w"
        if lead:
            write_config(cfg, self.out_dir)
        if lead and self.resume:
            with open(os.path.join(self.out_dir, "metrics.jsonl"), "r+") as f:
                f.truncate(self.resume["metrics_offset"])
        self.files = {}
        self.log_file = self._open("log.txt")
        self.t_start, self.first_step = time.time(), 1

    def _open(self, name):  # on first use: a run killed in its warm start leaves no metrics.jsonl
        if name not in self.files:
            # held open for the run, closed by close(): a step's lines are flushed as it ends
            path = os.path.join(self.out_dir, name) if self.lead else os.devnull
            self.files[name] = open(path, self.mode)  # noqa: SIM115
        return self.files[name]

    def restore(self, run):
        """Load the resume checkpoint (if any) into `run` -> the first step still to train."""
        if self.resume:
            run.model.load_state_dict(self.resume["model"])
            run.opt.load_state_dict(self.resume["optimizer"])
            run.rng.setstate(self.resume["rng"])
            run.generator.set_state(self.resume["generator"])
            torch.set_rng_state(self.resume["torch_rng"])
            self.log(f"resumed from step {self.resume['step']}")
            self.first_step = self.resume["step"] + 1
        self.t_start = time.time()  # the ETA counts from here
        return self.first_step

    def log(self, msg):
        print(msg, file=self.log_file, flush=True)
        if self.lead and not self.quiet:
            print(msg, flush=True)

    def write(self, name, record):
        f = self._open(name)
        f.write(json.dumps(record) + "\n")
        f.flush()

    def log_step(self, run, step, metrics, batch):
        """One RL step's metrics, timing, log line, and every 25 steps a few rollouts
        (samples.jsonl)."""
        cfg = run.cfg
        timing = {
            "step": step,
            "sample_s": metrics.pop("sample_s"),
            "step_s": metrics.pop("step_s"),
        }
        timing["tokens_per_s"] = metrics["tokens"] / timing["step_s"]
        # ~2N FLOPs per sampled token, 6N per trained token (attention ignored)
        if cfg["peak_tflops"] > 0:
            flops = (2 + 6 * cfg["epochs_per_batch"]) * run.model.num_params() * metrics["tokens"]
            timing["mfu"] = flops / timing["step_s"] / (cfg["peak_tflops"] * 1e12)
        self.write("metrics.jsonl", {"kind": "train", "step": step, **metrics})
        self.write("timing.jsonl", timing)
        eta = (time.time() - self.t_start) / (step - self.first_step + 1) * (cfg["steps"] - step)
        self.log(
            f"step {step}/{cfg['steps']} | reward {metrics['reward_scalar']:.3f} set "
            f"{metrics['set_score']:.3f} "
            f"| adv std {metrics['adv_std']:.2f} zero-std {metrics['zero_std_groups']:.2f} "
            f"| ent {metrics['entropy']:.3f} distinct {metrics['distinct_first_answers']:.2f} "
            f"| clip {metrics['clip_frac']:.3f} kl {metrics['kl']:.4f} gnorm "
            f"{metrics['grad_norm']:.2f} "
            f"| {timing['tokens_per_s']:.0f} tok/s"
            + (f" mfu {timing['mfu']:.1%}" if "mfu" in timing else "")
            + f" | ETA {eta:.0f}s"
        )
        if step % 25 == 0 or step == cfg["steps"]:
            self.write(
                "samples.jsonl",
                {
                    "step": step,
                    "prompt": rollout_prompt(run.task, batch["problems"][0], run.m),
                    "answers": batch["answers"][0][:4],
                    "rewards": batch["rewards"][0, :4].tolist(),
                },
            )

    def save(self, name, state):
        """A checkpoint that remembers how much of metrics.jsonl it accounts for."""
        if self.lead:
            atomic_save(
                {**state, "metrics_offset": self._open("metrics.jsonl").tell()},
                os.path.join(self.out_dir, name),
            )

    def close(self):
        for f in self.files.values():
            f.close()
