"""
Train a small GPT policy with GRPO, VPO or one of VPO's ablations, on a vector-reward task.

    python train.py --config configs/persona.yaml --set algo=vpo seed=1
    python train.py                      # the headline experiment (see experiment.py)

One file, read top to bottom: the hyperparameters (every one visible below, each with a comment),
config loading that fails loudly, the supervised warm start, the RL loop, checkpoints and logs.

Phase 1, warm start: supervised training on the task's demonstrations, in the single-answer format
(prompt says "1|") and the m-answer format ("3|"). It is cached by a hash of everything that
shapes it, so GRPO and VPO runs of the same task and seed start from the SAME weights.
Phase 2, RL: each step samples `prompts_per_step` training problems, G rollouts each, scores every
answer with the task's reward vector, turns rewards into one advantage per rollout with the chosen
algorithm (ADVANTAGES below), and takes `epochs_per_batch` clipped policy-gradient steps.

Why the logged loss reads ~0: with one update per batch the ratio is exactly 1 and advantages are
z-normalised per group, so the loss averages to about zero while its gradient is not zero. Read
reward, grad norm and clip fraction instead.

What we simplified, and why:
- No value model, no GAE (GRPO-style group baselines need none).
- Sampling and training share one model in one process; no separate inference server.
- The "old" log-probs are those recorded while sampling (at temperature 1 without top-k/top-p
  they are exactly the policy's); with other sampling settings the ratio is off-policy by design.
- Problems are regenerated each step from a seeded RNG rather than read from a dataset.
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # OpenMP busy-waiting made CPU runs far slower

import argparse
import copy
import difflib
import hashlib
import inspect
import json
import math
import random
import sys
import time

import numpy as np
import torch
import yaml

import grpo
import vpo
from model import GPT, GPTConfig, PRESETS, Tokenizer, pad_left, pad_right
from rewards import make_task, rollout_prompt, rollout_text, score_answers

# ----------------------------------------------------------------------------------------------
# Hyperparameters. A config file and --set key=value may change them, never add to them.
DEFAULTS = dict(
    # what to train
    task="persona",            # persona | persona_collinear | code
    task_options={},           # constructor arguments of the task (see rewards.py)
    algo="vpo",                # grpo | vpo | multi_rlvr | random_weights | goal_conditioned | vpo_loo
    seed=0,
    # model
    model="cpu",               # size preset from model.PRESETS
    block_size=192,            # longest prompt + completion, in tokens
    tokenizer="bytes",         # bytes (offline) or a tiktoken encoding name
    # warm start (supervised)
    sft_steps=600,
    sft_batch=64,
    sft_lr=3e-3,
    sft_parent_fraction=0.3,   # code task: share of demonstrations whose prompt carries parents
    sft_single_first=0.3,      # share of the warm start spent on the plain 1-answer format first
    # RL
    steps=150,
    prompts_per_step=8,        # P: prompt groups per step
    group_size=8,              # G: rollouts per prompt
    answers_per_rollout=3,     # m: answers in one rollout for set methods (vpo, multi_rlvr, vpo_loo)
    num_weights=100,           # N: weightings per group for VPO's score
    alpha=1.0,                 # Dirichlet concentration of the weightings
    weight_sampler="dirichlet",  # dirichlet | sobol
    lr=3e-4,
    weight_decay=0.0,
    clip=0.2,                  # PPO ratio clip
    kl_coef=0.0,               # k3 KL to the warm-start policy; 0 skips the reference forward
    epochs_per_batch=1,        # policy updates per batch of rollouts (ratio != 1 after the first)
    max_grad_norm=1.0,
    temperature=1.0,
    top_k=0,                   # 0: off
    top_p=1.0,                 # 1.0: off
    # logging and evaluation
    eval_every=25,             # steps between held-out evaluations (0: only at the end)
    eval_problems=32,          # held-out problems per evaluation
    ckpt_every=25,
    out_dir="",                # "" -> out/<task>-<algo>-s<seed>
    warmstart_dir="out/warmstart",
    warmstart_from="",         # a warm-start checkpoint to start from instead of training/caching one
    device="auto",             # auto | cpu | cuda | mps
    threads=1,                 # torch CPU threads; measured: 2 threads were no faster than 1 here
    dtype="float32",           # float32 | bfloat16 (autocast; CUDA or CPU)
    compile=False,             # torch.compile the scoring forward (measured on CPU: slower; for GPUs)
    peak_tflops=0.0,           # the device's peak, to log model-FLOPs utilisation (0: not logged)
    overwrite=False,           # allow writing into an out_dir that already holds a run
    resume=False,              # continue the unfinished run in out_dir from its last checkpoint
    quiet=False,
)



class ConfigError(ValueError):
    pass


def _check_type(key, value, default):
    if isinstance(default, bool):
        ok = isinstance(value, bool)
    elif isinstance(default, float):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif isinstance(default, int):
        ok = isinstance(value, int) and not isinstance(value, bool)
    else:
        ok = isinstance(value, type(default))
    if not ok:
        raise ConfigError(f"config key '{key}' must be {type(default).__name__}, got {value!r}")
    return float(value) if isinstance(default, float) else value


def parse_value(text):
    """'3' -> 3, '1e-3' -> 0.001 (YAML 1.1 would keep it a string), 'true' -> True, '{a: 1}' -> dict."""
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    try:
        return yaml.safe_load(text) if text != "" else ""
    except yaml.YAMLError:
        return text


def resolve_config(path=None, overrides=(), base=None):
    """DEFAULTS <- YAML file <- key=value overrides; unknown keys and wrong types raise ConfigError."""
    cfg = dict(base or DEFAULTS)
    updates = []
    if path:
        try:
            with open(path) as f:
                loaded = yaml.safe_load(f) or {}
        except OSError as e:
            raise ConfigError(f"cannot read config file {path}: {e.strerror}") from None
        except yaml.YAMLError as e:
            raise ConfigError(f"config file {path} is not valid YAML: {str(e).splitlines()[0]}") from None
        if not isinstance(loaded, dict):
            raise ConfigError(f"config file {path} must hold a mapping of key: value")
        updates += list(loaded.items())
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"override '{item}' must look like key=value")
        key, text = item.split("=", 1)
        updates.append((key.strip(), parse_value(text)))
    for key, value in updates:
        if key not in DEFAULTS:
            hint = difflib.get_close_matches(key, DEFAULTS, n=1)
            raise ConfigError(f"unknown config key '{key}'" + (f" (did you mean '{hint[0]}'?)" if hint else ""))
        if isinstance(DEFAULTS[key], str) and isinstance(value, (int, float)) and not isinstance(value, bool):
            value = str(value)  # --set out_dir=123 is a path, not a number
        if isinstance(DEFAULTS[key], float) and isinstance(value, str):
            try:
                value = float(value)  # "1e-3" in a YAML file is a string to YAML 1.1
            except ValueError:
                pass
        cfg[key] = _check_type(key, value, DEFAULTS[key])
    validate(cfg)
    return cfg


def validate(cfg):
    """Out-of-range values fail here, before anything is written or trained."""
    def need(cond, msg):
        if not cond:
            raise ConfigError(msg)
    for key, value in cfg.items():
        if isinstance(value, float):
            need(math.isfinite(value), f"{key} must be a finite number, got {value}")
    need(cfg["algo"] in ADVANTAGES, f"algo must be one of {sorted(ADVANTAGES)}, got '{cfg['algo']}'")
    need(cfg["task"] in ("persona", "persona_collinear", "code"), f"unknown task '{cfg['task']}'")
    need(cfg["model"] in PRESETS, f"model must be one of {sorted(PRESETS)}, got '{cfg['model']}'")
    for key in ("lr", "sft_lr"):
        need(cfg[key] > 0, f"{key} must be > 0, got {cfg[key]}")
    for key in ("steps", "sft_steps", "eval_every", "ckpt_every", "kl_coef", "weight_decay", "threads", "peak_tflops"):
        need(cfg[key] >= 0, f"{key} must be >= 0, got {cfg[key]}")
    for key in ("prompts_per_step", "sft_batch", "num_weights", "epochs_per_batch", "eval_problems", "block_size"):
        need(cfg[key] >= 1, f"{key} must be >= 1, got {cfg[key]}")
    need(cfg["group_size"] >= 2, f"group_size must be >= 2 for group-normalised advantages, got {cfg['group_size']}")
    need(cfg["answers_per_rollout"] >= 1, f"answers_per_rollout (m) must be >= 1, got {cfg['answers_per_rollout']}")
    need(cfg["alpha"] > 0, f"alpha must be > 0, got {cfg['alpha']}")
    need(cfg["weight_sampler"] in ("dirichlet", "sobol"), f"weight_sampler must be dirichlet or sobol")
    need(cfg["weight_sampler"] != "sobol" or cfg["alpha"] == 1.0, "weight_sampler=sobol needs alpha=1")
    need(0 < cfg["clip"], f"clip must be > 0, got {cfg['clip']}")
    need(cfg["temperature"] >= 0, f"temperature must be >= 0")
    need(0 < cfg["top_p"] <= 1, f"top_p must be in (0, 1]")
    need(cfg["max_grad_norm"] > 0, "max_grad_norm must be > 0")
    need(0 <= cfg["sft_parent_fraction"] <= 1, "sft_parent_fraction must be in [0, 1]")
    need(0 <= cfg["sft_single_first"] <= 1, "sft_single_first must be in [0, 1]")
    need(cfg["device"] in ("auto", "cpu", "cuda", "mps"), "device must be auto, cpu, cuda or mps")
    need(cfg["dtype"] in ("float32", "bfloat16"), "dtype must be float32 or bfloat16")
    try:
        make_task(cfg["task"], **cfg["task_options"])
    except (TypeError, ValueError) as e:
        raise ConfigError(f"task_options for task '{cfg['task']}': {e}") from None


# ----------------------------------------------------------------------------------------------
# Advantages: one function per algorithm, registered by name. Each gets the batch's reward
# vectors (P, G, M, D), their fixed scalarisation (P, G, M) and the group weightings (P, N, D),
# and returns one advantage per rollout (P, G). To try a new idea, add a function and a line.

def grpo_advantage(rewards, scalar, weights):
    return grpo.grpo_advantages(scalar[:, :, 0])


def vpo_advantage(rewards, scalar, weights):
    return vpo.vpo_advantages(rewards, weights)


def multi_rlvr_advantage(rewards, scalar, weights):
    return grpo.grpo_advantages(vpo.multi_rlvr_scores(scalar))


def random_weight_advantage(rewards, scalar, weights):
    return grpo.grpo_advantages(vpo.random_weight_scores(rewards[:, :, 0], weights[:, 0]))


def vpo_loo_advantage(rewards, scalar, weights):
    return vpo.leave_one_out_advantages(vpo.set_scores(rewards, weights))


# name -> (advantage function, whether its rollouts hold a SET of m answers)
ADVANTAGES = {
    "grpo": (grpo_advantage, False),
    "vpo": (vpo_advantage, True),
    "multi_rlvr": (multi_rlvr_advantage, True),
    "random_weights": (random_weight_advantage, False),
    "goal_conditioned": (random_weight_advantage, False),  # same score; the weighting is also in the prompt
    "vpo_loo": (vpo_loo_advantage, True),  # VPO's set score with a leave-one-out baseline, not z-norm
}
SET_ALGOS = {name for name, (_, uses_sets) in ADVANTAGES.items() if uses_sets}


def answers_per_rollout(cfg):
    return cfg["answers_per_rollout"] if cfg["algo"] in SET_ALGOS else 1


# ----------------------------------------------------------------------------------------------
# Setup helpers

def pick_device(name):
    if name != "auto":
        if name == "cuda" and not torch.cuda.is_available():
            raise ConfigError("device=cuda but CUDA is not available")
        if name == "mps" and not torch.backends.mps.is_available():
            raise ConfigError("device=mps but MPS is not available")
        return name
    if torch.cuda.is_available():
        return "cuda"
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return "mps"
    return "cpu"


def seed_everything(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def build_model(cfg, tok, device):
    mcfg = GPTConfig(vocab_size=tok.vocab_size, block_size=cfg["block_size"], **PRESETS[cfg["model"]])
    return GPT(mcfg).to(device)


def autocast(cfg, device):
    if cfg["dtype"] == "bfloat16":
        return torch.autocast(device_type="cuda" if device == "cuda" else "cpu", dtype=torch.bfloat16)
    return torch.autocast(device_type="cpu", enabled=False)


def atomic_save(obj, path):
    """Write to a temporary file, then rename: a kill mid-write never leaves a torn checkpoint.
    The temporary name is per process, so two runs sharing a warm-start cache never mix writes."""
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


def load_checkpoint(path, device="cpu"):
    if not os.path.exists(path):
        raise FileNotFoundError(f"checkpoint not found: {path}")
    try:
        ckpt = torch.load(path, map_location=device, weights_only=False)
    except Exception as e:  # torch raises several types for truncated or foreign files
        first = (str(e).strip().splitlines() or [""])[0]  # one line: the error must fit on one
        raise RuntimeError(f"checkpoint {path} is unreadable or corrupt ({type(e).__name__}: {first})") from None
    if not isinstance(ckpt, dict) or not {"model", "model_config", "config"} <= ckpt.keys():
        raise RuntimeError(f"checkpoint {path} is not a checkpoint of this trainer (missing model/config)")
    return ckpt


def model_from_checkpoint(path, device="cpu"):
    """A saved run or warm start -> (model in eval mode, tokenizer, its config dict)."""
    ckpt = load_checkpoint(path, device)
    tok = Tokenizer(ckpt["config"]["tokenizer"])
    model = GPT(GPTConfig(**ckpt["model_config"])).to(device)
    model.load_state_dict(ckpt["model"])
    model.eval()
    return model, tok, ckpt["config"]


# ----------------------------------------------------------------------------------------------
# Sampling rollouts: shared by training, evaluation and search

def sample_rollouts(model, tok, task, problems, m, group_size, cfg, generator, device,
                    parents=None, goals=None):
    """Sample `group_size` rollouts of m answers for each problem and score them.

    Returns dict with prompt/completion tensors for the update, rewards (P, G, m, D) float tensor,
    answers (P lists of G lists of m strings), entropy (B, T), and the token count.
    """
    prompts = [tok.encode(rollout_prompt(task, p, m, parents=parents[i] if parents else None,
                                         goal=goals[i] if goals is not None else None))
               for i, p in enumerate(problems)]
    prompt_ids, prompt_mask = pad_left(prompts, tok.eos, device)
    out = model.generate(prompt_ids, prompt_mask, group_size, m * task.max_answer_tokens + 1, tok.eos,
                         temperature=cfg["temperature"], top_k=cfg["top_k"] or None,
                         top_p=cfg["top_p"] if cfg["top_p"] < 1 else None, generator=generator)
    tokens = out["tokens"].cpu()
    P, G = len(problems), group_size
    rewards = np.zeros((P, G, m, task.dim), dtype=np.float32)
    answers = []
    for i, problem in enumerate(problems):
        row = []
        for g in range(G):
            b = i * G + g
            texts = tok.split_answers(tokens[b][out["mask"][b].cpu()].tolist())
            rewards[i, g] = score_answers(task, problem, texts, m)
            row.append(texts[:m] + [""] * (m - len(texts[:m])))
        answers.append(row)
    return dict(problem=problems[0], prompt=prompt_ids.repeat_interleave(G, 0), prompt_mask=prompt_mask.repeat_interleave(G, 0),
                completion=out["tokens"], completion_mask=out["mask"], old_logprobs=out["logprobs"],
                entropy=out["entropy"], rewards=torch.tensor(rewards), answers=answers,
                num_tokens=int(out["mask"].sum()))


# ----------------------------------------------------------------------------------------------
# Phase 1: supervised warm start

def warmstart_key(cfg):
    shaping = {k: cfg[k] for k in ("task", "task_options", "seed", "model", "block_size", "tokenizer",
                                   "sft_steps", "sft_batch", "sft_lr", "sft_parent_fraction", "sft_single_first",
                                   "answers_per_rollout", "dtype")}
    # the demonstrations come from rewards.py (and lang.py), the training loop from the functions
    # below: editing either must not reuse a stale cache
    here = os.path.dirname(os.path.abspath(__file__))
    for name in ("rewards.py", "lang.py"):
        with open(os.path.join(here, name), "rb") as f:
            shaping[name] = hashlib.sha1(f.read()).hexdigest()
    for fn in (demo_batch, sft_step, warm_start):
        shaping[fn.__name__] = hashlib.sha1(inspect.getsource(fn).encode()).hexdigest()
    return hashlib.sha1(json.dumps(shaping, sort_keys=True).encode()).hexdigest()[:12]


def demo_batch(task, tok, cfg, rng, batch, single_only=False):
    """A batch of demonstrations in one format: single answer (1|) or m answers (m|), with or
    without parents. One format per batch keeps padding (wasted compute) small."""
    m = 1 if single_only or rng.random() < 0.5 else cfg["answers_per_rollout"]
    with_parents = not single_only and hasattr(task, "demo_parents") and rng.random() < cfg["sft_parent_fraction"]
    prompts, completions = [], []
    for _ in range(batch):
        problem = task.problems("train", 1, rng)[0]
        parents = task.demo_parents(problem, rng) if with_parents else None
        answers = task.demonstration(problem, m, rng, parents=parents)
        parent_texts = [task.program_text(p) for p in parents] if parents else None
        prompts.append(tok.encode(rollout_prompt(task, problem, m, parents=parent_texts)))
        completions.append(tok.encode(rollout_text(answers)))
    return prompts, completions


def sft_step(model, opt, task, tok, cfg, rng, device, single_only=False):
    """One supervised step on a fresh batch of demonstrations -> (loss, completion tokens)."""
    prompts, completions = demo_batch(task, tok, cfg, rng, cfg["sft_batch"], single_only)
    p, pm = pad_left(prompts, tok.eos, device)
    c, cm = pad_right(completions, tok.eos, device)
    with autocast(cfg, device):
        logp, _ = model.score(p, pm, c, cm)
    loss = -(logp * cm).sum() / cm.sum()  # cross-entropy on the completion tokens only
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    return loss, int(cm.sum())


def warm_start(cfg, task, tok, device, log):
    path = cfg["warmstart_from"] or \
        os.path.join(cfg["warmstart_dir"], f"warmstart-{cfg['task']}-{warmstart_key(cfg)}.pt")
    # the initial weights come from the seed alone, not from whatever this process drew before (a
    # worker of `python train.py` runs several jobs in turn; without this, a warm start's weights
    # depended on which jobs its worker had run, so two invocations trained different warm starts)
    torch.manual_seed(cfg["seed"])
    model = build_model(cfg, tok, device)
    if cfg["warmstart_from"] or os.path.exists(path):  # a missing warmstart_from fails loudly here
        model.load_state_dict(load_checkpoint(path, device)["model"])
        log(f"warm start: loaded cached {path}")
        return model, path
    rng = random.Random(cfg["seed"] + 1000)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg["sft_lr"], weight_decay=0.0)
    model.train()
    t0, tokens = time.time(), 0
    for step in range(cfg["sft_steps"]):
        lr = cfg["sft_lr"] * min(1.0, (step + 1) / 50) * 0.5 * (1 + math.cos(math.pi * step / cfg["sft_steps"]))
        for group in opt.param_groups:
            group["lr"] = lr
        # a curriculum: the copy-from-the-prompt skill forms on the plain 1-answer format and then
        # transfers; measured on code (450 steps, seed 0), mixing all formats from step 1 left 0-2% of
        # sampled programs consistent with the examples, 30% single-format first gave 25-31%
        single_only = step < cfg["sft_single_first"] * cfg["sft_steps"]
        loss, n = sft_step(model, opt, task, tok, cfg, rng, device, single_only)
        tokens += n
        if step % 100 == 0 or step == cfg["sft_steps"] - 1:
            log(f"warm start {step + 1}/{cfg['sft_steps']}: loss {loss.item():.3f}, "
                f"{tokens / (time.time() - t0):.0f} tok/s")
    # never cache a diverged warm start: every later run with this config would load it
    finite = all(bool(torch.isfinite(p).all()) for p in model.parameters())
    if not finite or (cfg["sft_steps"] and not torch.isfinite(loss)):
        raise FloatingPointError(f"warm start diverged: non-finite loss or weights with sft_lr={cfg['sft_lr']}; "
                                 f"nothing was cached")
    os.makedirs(cfg["warmstart_dir"], exist_ok=True)
    atomic_save({"model": model.state_dict(), "model_config": vars(model.cfg), "config": cfg}, path)
    return model, path


# ----------------------------------------------------------------------------------------------
# Phase 2: RL

def evaluate_heldout(model, tok, task, cfg, m, device, seed):
    """A quick held-out look during training: one rollout per problem, mean fixed scalar reward."""
    problems = task.problems("heldout", cfg["eval_problems"], random.Random(seed))
    gen = torch.Generator(device=device).manual_seed(seed)
    model.eval()
    batch = sample_rollouts(model, tok, task, problems, m, 2, cfg, gen, device)
    r = batch["rewards"]  # (P, 2, m, D)
    valid = r.sum(-1) > 0
    scalar = r.mean(-1)
    best = scalar.max(-1).values  # best answer of each rollout
    return {"heldout_scalar": float(scalar[valid].mean()) if valid.any() else 0.0,
            "heldout_best_in_rollout": float(best.mean()),
            "heldout_valid": float(valid.float().mean())}


def rl_step(model, ref_model, opt, tok, task, cfg, m, rng, generator, device, scorer=None, rank=0, world=1):
    P, G = cfg["prompts_per_step"], cfg["group_size"]
    problems = task.problems("train", P, rng)
    # one weighting per group for the single-answer weighted ablations, N for the set methods
    weights = vpo.sample_weights(P, cfg["num_weights"] if cfg["algo"] in SET_ALGOS else 1, task.dim,
                                 cfg["alpha"], cfg["weight_sampler"], generator)  # (P, N, D)
    # under torchrun every rank draws the same global batch and keeps its share of the groups;
    # a group never spans ranks, so group-normalised advantages need no communication
    problems, weights, P = problems[rank::world], weights[rank::world], P // world
    goals = weights[:, 0].tolist() if cfg["algo"] == "goal_conditioned" else None
    t0 = time.time()
    model.eval()
    try:
        batch = sample_rollouts(model, tok, task, problems, m, G, cfg, generator, device, goals=goals)
    except RuntimeError as e:  # torch.multinomial refuses inf/nan probabilities: the policy diverged
        if "nan" not in str(e).lower():
            raise
        raise FloatingPointError("non-finite logits while sampling: the last update diverged (lr too high?); "
                                 "stopping, the last checkpoint is kept") from None
    t_sample = time.time() - t0

    rewards = batch["rewards"]  # (P, G, m, D)
    scalar = rewards.mean(-1)  # (P, G, m): the fixed scalarisation of every answer
    adv = ADVANTAGES[cfg["algo"]][0](rewards, scalar, weights)  # (P, G)
    adv_flat = adv.reshape(-1).to(device)
    ref_logprobs = None
    if ref_model is not None:
        with torch.no_grad():
            ref_logprobs, _ = ref_model.score(batch["prompt"], batch["prompt_mask"], batch["completion"],
                                              batch["completion_mask"])
    model.train()
    scorer = scorer or model.score
    # the loss averages over the GLOBAL batch's tokens: DDP averages gradients over ranks, so each
    # rank's token mean is reweighted by its share of the tokens
    token_share = 1.0
    if world > 1:
        global_tokens = torch.tensor(float(batch["num_tokens"]), device=device)
        torch.distributed.all_reduce(global_tokens)
        token_share = batch["num_tokens"] * world / float(global_tokens)
    for _ in range(cfg["epochs_per_batch"]):
        with autocast(cfg, device):
            logprobs, _ = scorer(batch["prompt"], batch["prompt_mask"], batch["completion"],
                                 batch["completion_mask"])
        loss, stats = grpo.policy_loss(logprobs.float(), batch["old_logprobs"], adv_flat, batch["completion_mask"],
                                       cfg["clip"], ref_logprobs, cfg["kl_coef"])
        loss = loss * token_share
        if not torch.isfinite(loss):
            raise FloatingPointError(f"non-finite loss ({loss.item()}); stopping before it reaches the weights")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg["max_grad_norm"])
        if not torch.isfinite(grad_norm):
            raise FloatingPointError("non-finite gradient norm; stopping before it reaches the weights")
        try:
            opt.step()
        except RuntimeError as e:  # e.g. lr=1e40 overflows float32 inside AdamW
            if "overflow" not in str(e):
                raise
            raise FloatingPointError(f"optimizer step overflowed with lr={cfg['lr']}; stopping, "
                                     f"the last checkpoint is kept") from None
        if not torch.stack([torch.isfinite(p).all() for p in model.parameters()]).all():  # one sync
            raise FloatingPointError(f"non-finite weights after the optimizer step (lr={cfg['lr']}); stopping, "
                                     f"the last checkpoint is kept")

    valid = rewards.sum(-1) > 0  # (P, G, m) answers that parsed and were not repeats
    set_score = vpo.set_scores(rewards, weights if cfg["algo"] in SET_ALGOS else
                               vpo.sample_weights(P, 32, task.dim, generator=generator))
    distinct = np.mean([len({task.answer_key(a) for row in group for a in row[:1]}) / G
                        for group in batch["answers"]])
    mask = batch["completion_mask"].float()
    metrics = {
        "loss": loss.item(), **stats, "grad_norm": float(grad_norm),
        "reward_scalar": float(scalar[valid].mean()) if valid.any() else 0.0,
        "reward_per_component": [round(float(x), 4) for x in rewards.reshape(-1, task.dim)[valid.reshape(-1)].mean(0)]
        if valid.any() else [0.0] * task.dim,
        "set_score": float(set_score.mean()),
        "valid_answers": float(valid.float().mean()),
        "adv_mean": float(adv.mean()), "adv_std": float(adv.std()),
        "zero_std_groups": float((adv.abs().sum(1) == 0).float().mean()),
        "entropy": float((batch["entropy"] * mask).sum() / mask.sum()),
        "distinct_first_answers": float(distinct),
        "tokens": batch["num_tokens"], "sample_s": t_sample, "step_s": time.time() - t0,
    }
    if world > 1:
        metrics = reduce_metrics(metrics, world, device)
    return metrics, batch


# ----------------------------------------------------------------------------------------------
# Several processes (torchrun --nproc_per_node=N train.py ...): each rank samples and scores its
# share of the prompt groups, gradients are all-reduced by DistributedDataParallel, metrics are
# averaged (token counts summed), and rank 0 alone writes files.

class Scorer(torch.nn.Module):
    """model.score as a forward(), because DistributedDataParallel hooks into forward()."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, prompt, prompt_mask, completion, completion_mask):
        return self.model.score(prompt, prompt_mask, completion, completion_mask)


def init_distributed(device):
    """(rank, world, device) from torchrun's environment; (0, 1, device) when run plainly."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1:
        return 0, 1, device
    torch.distributed.init_process_group("nccl" if device == "cuda" else "gloo")
    if device == "cuda":
        device = f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}"
        torch.cuda.set_device(device)
    return torch.distributed.get_rank(), world, device


def reduce_metrics(metrics, world, device):
    """Average every number over ranks; token counts are summed."""
    keys = [k for k, v in metrics.items() if isinstance(v, (int, float))]
    flat = [float(metrics[k]) for k in keys] + [float(x) for x in metrics["reward_per_component"]]
    values = torch.tensor(flat, dtype=torch.float64, device=device)
    torch.distributed.all_reduce(values)
    values = (values / world).tolist()
    out = dict(metrics)
    for k, v in zip(keys, values):
        out[k] = v * world if k == "tokens" else v
    out["tokens"] = int(round(out["tokens"]))
    out["reward_per_component"] = [round(v, 4) for v in values[len(keys):]]
    return out


RUN_ONLY_KEYS = ("resume", "overwrite", "quiet", "steps", "device", "threads", "peak_tflops")  # may differ on --resume


def checkpoint_state(model, opt, cfg, step, rng, generator, metrics_file):
    """Everything a resumed run needs to continue exactly as if it had never stopped."""
    return {"model": model.state_dict(), "model_config": vars(model.cfg), "config": cfg, "step": step,
            "optimizer": opt.state_dict(), "rng": rng.getstate(), "generator": generator.get_state(),
            "torch_rng": torch.get_rng_state(), "metrics_offset": metrics_file.tell()}


def run_dir(cfg):
    return cfg["out_dir"] or os.path.join("out", f"{cfg['task']}-{cfg['algo']}-s{cfg['seed']}")


def prepare_out_dir(cfg):
    """Refuse to clobber results: a finished run needs overwrite, an unfinished one resume or overwrite."""
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
    for path in (out_dir, cfg["warmstart_dir"]):  # fail now, not after minutes of warm start
        try:
            os.makedirs(path, exist_ok=True)
        except OSError as e:
            raise ConfigError(f"cannot create directory {path}: {e.strerror}") from None
    return out_dir


def train(cfg):
    device = pick_device(cfg["device"])  # before prepare_out_dir: a bad device writes nothing
    rank, world, device = init_distributed(device)
    lead = rank == 0  # the only rank that writes files
    if device.startswith("cuda"):  # TF32 matmuls: ~free speed on Ampere and later, fine for RL
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    if cfg["prompts_per_step"] % world:
        raise ConfigError(f"prompts_per_step={cfg['prompts_per_step']} must be a multiple of the {world} ranks")
    out_dir = prepare_out_dir(cfg) if lead else run_dir(cfg)
    if cfg["threads"]:
        torch.set_num_threads(cfg["threads"])
    seed_everything(cfg["seed"])
    resume = None
    if cfg["resume"]:
        ckpt_path, config_path = os.path.join(out_dir, "ckpt.pt"), os.path.join(out_dir, "config.yaml")
        if os.path.exists(ckpt_path):
            resume = load_checkpoint(ckpt_path, device)
            missing = {"optimizer", "rng", "generator", "torch_rng", "metrics_offset", "step"} - resume.keys()
            if missing:
                raise RuntimeError(f"checkpoint {ckpt_path} cannot be resumed: it lacks {sorted(missing)}")
            saved = resume["config"]
        else:  # killed before its first checkpoint: check it is the same run, then start it again
            try:
                with open(config_path) as f:
                    saved = yaml.safe_load(f)
            except (OSError, yaml.YAMLError):
                saved = None
            if not isinstance(saved, dict):
                raise ConfigError(f"cannot resume {out_dir}: no ckpt.pt and {config_path} is unreadable")
        # out_dir may be spelled differently (./out/x vs out/x): the run was found there, it is this one
        changed = sorted(k for k in cfg if k not in RUN_ONLY_KEYS and k != "out_dir" and saved.get(k) != cfg[k])
        if changed:
            raise ConfigError(f"cannot resume {out_dir}: config differs from the saved run in {changed}")
        logged = os.path.join(out_dir, "metrics.jsonl")
        if lead and resume and (not os.path.exists(logged) or os.path.getsize(logged) < resume["metrics_offset"]):
            raise ConfigError(f"cannot resume {out_dir}: metrics.jsonl is missing or shorter than ckpt.pt expects")
    mode = "a" if resume else "w"

    def output(name, mode):
        return open(os.path.join(out_dir, name), mode) if lead else open(os.devnull, "w")

    if lead:
        tmp = os.path.join(out_dir, f"config.yaml.{os.getpid()}.tmp")
        with open(tmp, "w") as f:  # written whole or not at all: a resume before ckpt.pt reads it back
            yaml.safe_dump({**cfg, "out_dir": out_dir}, f, sort_keys=False)
        os.replace(tmp, os.path.join(out_dir, "config.yaml"))
    log_file = output("log.txt", mode)

    def log(msg):
        print(msg, file=log_file, flush=True)
        if not cfg["quiet"] and lead:
            print(msg, flush=True)

    task = make_task(cfg["task"], **cfg["task_options"])
    tok = Tokenizer(cfg["tokenizer"])
    m = answers_per_rollout(cfg)
    log(f"task {cfg['task']} (D={task.dim}), algo {cfg['algo']} (m={m}), device {device}, "
        f"threads {torch.get_num_threads()}, out_dir {out_dir}")

    if world > 1 and not lead:
        torch.distributed.barrier()  # rank 0 trains and caches the warm start; the others load it
    model, warm_path = warm_start(cfg, task, tok, device, log)
    if world > 1 and lead:
        torch.distributed.barrier()
    scorer = Scorer(model)
    if world > 1:
        scorer = torch.nn.parallel.DistributedDataParallel(scorer)
    if cfg["compile"]:
        scorer = torch.compile(scorer)
    log(f"model: {model.num_params() / 1e6:.2f}M parameters")
    ref_model = None
    if cfg["kl_coef"] > 0:
        ref_model = copy.deepcopy(model).eval()  # the frozen warm start
        for p in ref_model.parameters():
            p.requires_grad_(False)
    fused = device.startswith("cuda")  # one kernel for the whole update instead of one per tensor
    opt = torch.optim.AdamW(model.parameters(), lr=cfg["lr"], weight_decay=cfg["weight_decay"],
                            betas=(0.9, 0.99), fused=fused)
    rng = random.Random(cfg["seed"])
    generator = torch.Generator(device=device).manual_seed(cfg["seed"])
    metrics_path = os.path.join(out_dir, "metrics.jsonl")
    first_step = 1
    if resume:
        model.load_state_dict(resume["model"])
        opt.load_state_dict(resume["optimizer"])
        rng.setstate(resume["rng"])
        generator.set_state(resume["generator"])
        torch.set_rng_state(resume["torch_rng"])
        first_step = resume["step"] + 1
        if lead:
            with open(metrics_path, "r+") as f:  # drop what was logged after the checkpoint: it is redone
                f.truncate(resume["metrics_offset"])
        log(f"resumed from step {resume['step']}")
    # metrics.jsonl holds only what the seed determines (byte-identical across reruns); wall-clock
    # figures go to timing.jsonl
    metrics_file = output("metrics.jsonl", "a" if resume else "w")
    timing_file = output("timing.jsonl", mode)
    samples_file = output("samples.jsonl", mode)
    eval_seed = 12345  # the same held-out problems at every evaluation and in every run

    def evaluate(step):
        if not lead:  # evaluation is rank 0's alone: no collective calls inside it
            return {"heldout_scalar": float("nan")}
        ev = evaluate_heldout(model, tok, task, cfg, m, device, eval_seed)
        metrics_file.write(json.dumps({"kind": "eval", "step": step, **ev}) + "\n")
        metrics_file.flush()
        log(f"eval @ {step}: held-out scalar {ev['heldout_scalar']:.3f}, best-in-rollout "
            f"{ev['heldout_best_in_rollout']:.3f}, valid {ev['heldout_valid']:.2f}")
        return ev

    if not resume:
        evaluate(0)
    t_start = time.time()
    for step in range(first_step, cfg["steps"] + 1):
        metrics, batch = rl_step(model, ref_model, opt, tok, task, cfg, m, rng, generator, device,
                                 scorer, rank, world)
        timing = {"step": step, "sample_s": metrics.pop("sample_s"), "step_s": metrics.pop("step_s")}
        timing["tokens_per_s"] = metrics["tokens"] / timing["step_s"]
        if cfg["peak_tflops"] > 0:  # ~2N FLOPs per sampled token, 6N per trained token (attention ignored)
            flops = (2 + 6 * cfg["epochs_per_batch"]) * model.num_params() * metrics["tokens"]
            timing["mfu"] = flops / timing["step_s"] / (cfg["peak_tflops"] * 1e12)
        metrics_file.write(json.dumps({"kind": "train", "step": step, **metrics}) + "\n")
        metrics_file.flush()
        timing_file.write(json.dumps(timing) + "\n")
        done_steps = step - first_step + 1
        eta = (time.time() - t_start) / done_steps * (cfg["steps"] - step)
        log(f"step {step}/{cfg['steps']} | reward {metrics['reward_scalar']:.3f} set {metrics['set_score']:.3f} "
            f"| adv std {metrics['adv_std']:.2f} zero-std {metrics['zero_std_groups']:.2f} "
            f"| ent {metrics['entropy']:.3f} distinct {metrics['distinct_first_answers']:.2f} "
            f"| clip {metrics['clip_frac']:.3f} kl {metrics['kl']:.4f} gnorm {metrics['grad_norm']:.2f} "
            f"| {timing['tokens_per_s']:.0f} tok/s" + (f" mfu {timing['mfu']:.1%}" if "mfu" in timing else "")
            + f" | ETA {eta:.0f}s")
        if step % 25 == 0 or step == cfg["steps"]:
            samples_file.write(json.dumps({"step": step, "prompt": rollout_prompt(task, batch["problem"], m),
                                           "answers": batch["answers"][0][:4],
                                           "rewards": batch["rewards"][0, :4].tolist()}) + "\n")
            samples_file.flush()
        if cfg["eval_every"] and step % cfg["eval_every"] == 0 and step != cfg["steps"]:
            evaluate(step)
        if cfg["ckpt_every"] and step % cfg["ckpt_every"] == 0 and lead:
            atomic_save(checkpoint_state(model, opt, cfg, step, rng, generator, metrics_file),
                        os.path.join(out_dir, "ckpt.pt"))
    last_eval = evaluate(cfg["steps"])
    if world > 1:  # DDP keeps replicas identical; check it rather than trust it
        checksum = torch.tensor([sum(float(p.detach().double().sum()) for p in model.parameters())] * 2,
                                dtype=torch.float64)
        checksum[1] *= -1
        torch.distributed.all_reduce(checksum, op=torch.distributed.ReduceOp.MAX)
        log(f"ranks in sync: {bool(checksum[0] == -checksum[1])} (parameter checksum {float(checksum[0]):.6f})")
    if lead:
        final = checkpoint_state(model, opt, cfg, cfg["steps"], rng, generator, metrics_file)
        atomic_save({**final, "warm_start": warm_path}, os.path.join(out_dir, "final.pt"))
    log(f"done in {time.time() - t_start:.0f}s: held-out scalar {last_eval['heldout_scalar']:.3f}")
    for f in (metrics_file, timing_file, samples_file, log_file):
        f.close()
    if world > 1:
        torch.distributed.destroy_process_group()
    return out_dir


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", help="YAML file of overrides to the defaults at the top of train.py; "
                                         "without it, the headline experiment runs (experiment.py)")
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="override config keys")
    parser.add_argument("--quick", action="store_true", help="headline experiment at smoke-test size")
    parser.add_argument("--ablations", action="store_true", help="headline experiment with the ablations")
    parser.add_argument("--tasks", nargs="*", help="headline experiment on these tasks only")
    parser.add_argument("--seeds", nargs="*", type=int, help="headline experiment over these seeds (mean and spread)")
    parser.add_argument("--algos", nargs="*", help="headline experiment with these algorithms (default: grpo vpo)")
    args = parser.parse_args(argv)
    try:
        if args.config:
            train(resolve_config(args.config, args.set))
        else:
            import experiment
            unknown = sorted(set(args.tasks or []) - set(experiment.TASKS))
            if unknown:
                raise ConfigError(f"unknown task(s) {unknown} for --tasks (choose from {sorted(experiment.TASKS)})")
            overrides = {}
            for item in args.set:  # checked against DEFAULTS now, applied to every run of the experiment
                resolve_config(overrides=[item])
                key, value = item.split("=", 1)
                if key.strip() in ("task", "algo"):
                    raise ConfigError(f"'{key.strip()}' is chosen by the headline experiment; use --tasks, "
                                      f"--ablations, or --config for a single run")
                overrides[key.strip()] = parse_value(value)
            if args.seeds:
                overrides["seeds"] = args.seeds
            unknown = sorted(set(args.algos or []) - set(ADVANTAGES) - {"grpo_x3"})
            if unknown:
                raise ConfigError(f"unknown algorithm(s) {unknown} for --algos (choose from {sorted(ADVANTAGES)} or grpo_x3)")
            experiment.run_headline(overrides, quick=args.quick, ablations=args.ablations, tasks=args.tasks,
                                    algos=args.algos)
    except (ConfigError, FileNotFoundError, RuntimeError, FloatingPointError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)  # ValueError: e.g. a prompt longer than block_size
        sys.exit(2)


if __name__ == "__main__":
    main()
