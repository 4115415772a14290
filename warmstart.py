"""
The supervised warm start, every RL run's start: cross-entropy on demonstrations in every format RL
and search use (one answer "1|", m answers "3|", parents to edit), cached under a hash of what
shapes it, so GRPO and VPO runs of one task and seed start from the SAME weights; one process
trains a warm start, and another that needs it meanwhile waits, then loads it. A student can skip
this file. Deliberately left out: pretrained weights, packing, a validation loss (RL evaluates step
0).
"""

import hashlib
import json
import math
import os
import random
import time

import torch

import engine
import runfiles
from config import ConfigError
from model import autocast, build_model, pad_left, pad_right
from rollouts import max_completion_tokens, rollout_prompt, rollout_text
from tasks import ParentTask


def sft_optimizer(model, cfg, capturable=False):
    """The warm start's AdamW (lr set every step); capturable: for a CUDA graph (lr a GPU
    tensor)."""
    if capturable:
        lr = torch.tensor(cfg["sft_lr"], device=next(model.parameters()).device)
        return torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0, capturable=True)
    return torch.optim.AdamW(model.parameters(), lr=cfg["sft_lr"], weight_decay=0.0)


def set_lr(opt, lr):
    """The learning rate of every group of `opt`, a float or a tensor (a capturable optimizer's)."""
    for group in opt.param_groups:
        if torch.is_tensor(group["lr"]):
            group["lr"].fill_(lr)  # in place: a captured graph reads this very tensor
        else:
            group["lr"] = lr


def padded_demos(task, tok, cfg, rng, device, single_only=False, parents_only=False):
    """sft_batch demonstrations in one format (less padding) -> padded prompt, mask, completion,
    mask."""
    m = 1 if single_only or rng.random() < 0.5 else cfg["answers_per_rollout"]
    with_parents = parents_only or (
        not single_only
        and isinstance(task, ParentTask)
        and rng.random() < cfg["sft_parent_fraction"]
    )
    prompts, completions = [], []
    for _ in range(cfg["sft_batch"]):
        problem = task.problems("train", 1, rng)[0]
        parents = task.demo_parents(problem, rng) if with_parents else None
        answers = task.demonstration(problem, m, rng, parents=parents)
        # with their scores, as search shows them
        shown = task.scored(problem, parents) if parents else None
        prompts.append(tok.encode(rollout_prompt(task, problem, m, parents=shown)))
        completions.append(tok.encode(rollout_text(answers)))
    return (*pad_left(prompts, tok.eos, device), *pad_right(completions, tok.eos, device))


def demo_nll(logp, completion_mask):
    """The warm start's loss: cross-entropy on the completion tokens only."""
    return -(logp * completion_mask).sum() / completion_mask.sum()


def replay_loss(model, demos, dtype, device):
    """The warm start's loss on `demos` under the policy: RL's parent replay (RL's plain prompts
    make a small model forget the parent format: docs/RESULTS.md). Unwrapped: its gradient adds to
    DDP's."""
    prompt, prompt_mask, completion, completion_mask = demos
    with autocast(dtype, device):
        logp, _ = engine.score(
            model,
            prompt,
            prompt_mask,
            completion=completion,
            completion_mask=completion_mask,
            share_prompt=False,
        )
    return demo_nll(logp.float(), completion_mask)


def sft_step(model, opt, demos, dtype, graph=None):
    """One supervised step on a batch of demonstrations (padded_demos) -> (loss, tokens); graph: a
    CapturedSFT, used when the batch fits it (the batch then stays on the CPU until the graph
    copies it)."""
    if graph is not None and graph.fits(demos[0], demos[2]):
        return graph(*demos), int(demos[3].sum())
    device = next(model.parameters()).device
    prompt, prompt_mask, completion, completion_mask = (t.to(device) for t in demos)
    with autocast(dtype, str(device)):
        logp, _ = model.score(prompt, prompt_mask, completion, completion_mask=completion_mask)
    loss = demo_nll(logp, completion_mask)
    sft_update(model, opt, loss)
    return loss, int(completion_mask.sum())


def sft_update(model, opt, loss):
    """The warm start's gradient step (eager or inside a CUDA graph): backward, clip at 1, AdamW."""
    opt.zero_grad(set_to_none=True)  # in a graph: its backward writes the gradients afresh
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()


class CapturedSFT:
    """sft_step's update as one CUDA graph replay (one launch, not hundreds), on fixed-shape
    buffers: the same loss up to float rounding. WARMUP eager updates first; off CUDA it runs
    eagerly."""

    WARMUP = 2  # eager updates on a side stream before the capture (CUDA graphs need them)

    def __init__(self, model, opt, batch, prompt_len, completion_len, pad_id, capture=True):
        device = next(model.parameters()).device
        self.model = model
        self.opt = opt
        self.pad_id = pad_id
        self.capture = capture and device.type == "cuda"
        self.prompt = torch.full((batch, prompt_len), pad_id, dtype=torch.long, device=device)
        self.prompt_mask = torch.zeros(batch, prompt_len, dtype=torch.bool, device=device)
        self.completion = torch.full(
            (batch, completion_len), pad_id, dtype=torch.long, device=device
        )
        self.completion_mask = torch.zeros(batch, completion_len, dtype=torch.bool, device=device)
        self.loss = torch.zeros((), device=device)
        self.updates = 0
        self.replay = None  # the captured update, once recorded

    def fits(self, prompt, completion):
        return (
            prompt.size(0) == self.prompt.size(0)
            and prompt.size(1) <= self.prompt.size(1)
            and completion.size(1) <= self.completion.size(1)
        )

    def update(self):
        """The step: reads only the buffers, writes the weights, the optimizer's state and
        self.loss."""
        logp, _ = self.model.score(
            self.prompt,
            self.prompt_mask,
            self.completion,
            completion_mask=self.completion_mask,
            check=False,
        )
        loss = demo_nll(logp, self.completion_mask)
        sft_update(self.model, self.opt, loss)
        self.loss.copy_(loss.detach())

    def __call__(self, prompt, prompt_mask, completion, completion_mask):
        """One update on a batch (CPU tensors, fits()) -> the loss, a tensor on the device."""
        for buf, src, left in (
            (self.prompt, prompt, True),
            (self.prompt_mask, prompt_mask, True),
            (self.completion, completion, False),
            (self.completion_mask, completion_mask, False),
        ):
            host = torch.full(
                buf.shape, self.pad_id if buf.dtype == torch.long else 0, dtype=buf.dtype
            )
            width = src.size(1)  # prompts stay left-padded, completions right-padded
            (host[:, host.size(1) - width :] if left else host[:, :width]).copy_(src)
            # pinned: the copy does not wait for the GPU
            buf.copy_(host.pin_memory() if buf.is_cuda else host, non_blocking=buf.is_cuda)
        self.updates += 1
        if not self.capture:
            self.update()
        elif self.replay is not None:
            self.replay()
        elif self.updates <= self.WARMUP:
            engine.on_side_stream(self.update)
        else:
            # runs this update, then records it for the next
            self.replay = engine.captured(self.update)
        return self.loss


def warmstart_source():
    """The code that shapes a warm start: this file, what it imports and every task's data code."""
    return runfiles.source_fingerprint("warmstart", "rewards", "codetask", "maze")


def warmstart_path(cfg):
    """The cache path: a hash of the settings and of the code that shapes a warm start (this file
    and every reference file it imports: the task's, the formats', the model's; not vpo.py's)."""
    shaping = {
        k: cfg[k]
        for k in (
            "task",
            "task_options",
            "seed",
            "model",
            "block_size",
            "tokenizer",
            "sft_steps",
            "sft_batch",
            "sft_lr",
            "sft_parent_fraction",
            "sft_single_first",
            "answers_per_rollout",
            "dtype",
        )
    }
    shaping["code"] = warmstart_source()
    key = hashlib.sha1(json.dumps(shaping, sort_keys=True).encode()).hexdigest()[:12]
    return os.path.join(cfg["warmstart_dir"], f"warmstart-{cfg['task']}-{key}.pt")


def use_graph(cfg, device):
    """CUDA-graph the warm start: on CUDA with cuda_graph, in float32 (bf16 autocast keeps a
    cache). .get: checkpoints older than the setting."""
    on_cuda = str(device).startswith("cuda")
    return bool(cfg.get("cuda_graph", False)) and on_cuda and cfg["dtype"] == "float32"


def sft_lr_at(cfg, step):
    """The warm start's learning rate at `step`: 50 steps of linear warm-up, then a cosine to 0."""
    warmup = min(1.0, (step + 1) / 50)
    return cfg["sft_lr"] * warmup * 0.5 * (1 + math.cos(math.pi * step / cfg["sft_steps"]))


def warm_start(cfg, task, tok, device, log):
    """(model, path): loaded from warmstart_from or the cache, else trained and cached; while one
    process trains a warm start, another that needs it waits on its lock, then loads it."""
    path = cfg["warmstart_from"] or warmstart_path(cfg)
    lock = None
    if not cfg["warmstart_from"] and not os.path.exists(path):
        with runfiles.writing(cfg["warmstart_dir"]):
            os.makedirs(cfg["warmstart_dir"], exist_ok=True)
        lock = runfiles.Lock(f"{path}.lock", path, wait=log)
        if lock.note:
            log(f"warm start: {lock.note}")
    try:
        saved = None  # the cached or given warm start (a missing warmstart_from fails loudly here)
        if cfg["warmstart_from"] or os.path.exists(path):  # another process may have cached it
            saved = runfiles.load_checkpoint(path)
        # the initial weights come from the seed alone, not from what this process drew before
        torch.manual_seed(cfg["seed"])
        model = build_model(cfg["model"], cfg["block_size"], tok.vocab_size, device=device)
        if saved is None:
            train_and_cache(model, cfg, task, tok=tok, log=log, path=path)
            return model, path
        if saved["model_config"] != vars(model.cfg):
            raise ConfigError(
                f"{path} holds a model of {saved['model_config']}, the settings ask for "
                f"{vars(model.cfg)} (model, block_size, tokenizer must be the checkpoint's)"
            )
        model.load_state_dict(saved["model"])
        log(f"warm start: loaded cached {path}")
        return model, path
    finally:
        if lock:
            lock.release()


def train_and_cache(model, cfg, task, tok, log, path):
    """supervised_steps, then the warm start saved at `path` for every run that needs it."""
    t0 = time.time()
    supervised_steps(model, cfg, task, tok=tok, log=log)
    state = {"model": model.state_dict(), "model_config": vars(model.cfg), "config": cfg}
    runfiles.atomic_save({**state, "source": warmstart_source()}, path)
    log(
        f"warm start: trained in {time.time() - t0:.0f}s, cached in {path} (runs with this task, "
        "seed and warm-start settings load it)"
    )


def supervised_steps(model, cfg, task, tok, log):
    """cfg["sft_steps"] supervised steps on fresh demonstrations, as one CUDA graph replay each
    where use_graph says; FloatingPointError if the loss or the weights end non-finite."""
    device = str(next(model.parameters()).device)
    rng = random.Random(cfg["seed"] + 1000)
    capture = use_graph(cfg, device)
    opt = sft_optimizer(model, cfg, capturable=capture)
    graph = None
    if capture:
        completion_len = max_completion_tokens(task, cfg["answers_per_rollout"])
        # a batch that does not fit runs eagerly
        prompt_len = max(1, cfg["block_size"] - completion_len)
        graph = CapturedSFT(
            model,
            opt,
            cfg["sft_batch"],
            prompt_len=prompt_len,
            completion_len=completion_len,
            pad_id=tok.eos,
        )
    model.train()
    t0 = time.time()
    tokens = 0
    for step in range(cfg["sft_steps"]):
        set_lr(opt, sft_lr_at(cfg, step))
        # a curriculum: copying from the prompt forms on the 1-answer format, then transfers
        # (docs/RESULTS.md)
        single_only = step < cfg["sft_single_first"] * cfg["sft_steps"]
        # with a graph the batch is made on the CPU: the graph copies it into its own buffers
        demos = padded_demos(
            task, tok, cfg, rng=rng, device="cpu" if graph else device, single_only=single_only
        )
        loss, n = sft_step(model, opt, demos, dtype=cfg["dtype"], graph=graph)
        tokens += n
        if step % 100 == 0 or step == cfg["sft_steps"] - 1:
            log(
                f"warm start {step + 1}/{cfg['sft_steps']}: loss {loss.item():.3f}, "
                f"{tokens / (time.time() - t0):.0f} tok/s"
            )
    # never cache a diverged warm start: every later run with this config would load it
    if not all(bool(torch.isfinite(p).all()) for p in model.parameters()) or (
        cfg["sft_steps"] and not torch.isfinite(loss)
    ):
        raise FloatingPointError(
            f"warm start diverged: non-finite loss or weights with sft_lr={cfg['sft_lr']}; "
            "nothing was cached"
        )
