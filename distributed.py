"""
The process a run trains in (device, threads, seeds), and several with `torchrun --standalone
--nproc_per_node=N train.py ...`: every rank keeps its share of the same global batch of groups (so
advantages need no communication), DDP averages the gradients, each loss is weighted by its share of
the tokens (the single-process token mean), rank 0 writes. A student can skip this file.
Deliberately left out: tensor or pipeline parallelism, sharded optimizers (the models are tiny).
"""

import contextlib
import os
import random

import numpy as np
import torch

import engine
from config import ConfigError, pick_device
from model import autocast


def start_process(cfg):
    """Device, torchrun rank and world, threads and seeds -> (device, rank, world)."""
    # before any folder is made: a bad device writes nothing
    rank, world, device = init(cfg["device"])
    if device.startswith("cuda"):  # TF32 matmuls: ~free speed on Ampere and later, fine for RL
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    if cfg["prompts_per_step"] % world:
        raise ConfigError(
            f"prompts_per_step={cfg['prompts_per_step']} must be a multiple of the {world} ranks"
        )
    if cfg["threads"]:
        torch.set_num_threads(cfg["threads"])
    random.seed(cfg["seed"])
    np.random.seed(cfg["seed"])
    torch.manual_seed(cfg["seed"])
    return device, rank, world


class Scorer(torch.nn.Module):
    """engine.score as a forward(), which DDP and torch.compile hook into, under the run's
    autocast (model.autocast: bf16 or nothing)."""

    def __init__(self, model, dtype="float32"):
        super().__init__()
        self.model = model
        self.dtype = dtype

    def forward(self, prompt, prompt_mask, completion, completion_mask):
        device = str(prompt.device)
        with autocast(self.dtype, device):
            return engine.score(
                self.model,
                prompt,
                prompt_mask,
                completion=completion,
                completion_mask=completion_mask,
            )


def init(name):
    """The device setting -> (rank, world, device) from torchrun's environment; (0, 1, device)
    alone."""
    device = pick_device(name)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1:
        return 0, 1, device
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    gpus = torch.cuda.device_count() if device == "cuda" else 0
    if device == "cuda" and local_rank >= gpus:
        raise SystemExit(
            f"torchrun started more processes per node than there are GPUs ({gpus}): "
            f"use --nproc_per_node={gpus}, or --set device=cpu"
        )
    torch.distributed.init_process_group("nccl" if device == "cuda" else "gloo")
    if device == "cuda":
        device = f"cuda:{local_rank}"
        torch.cuda.set_device(device)
    return torch.distributed.get_rank(), world, device


def scorer(model, world, compile=False, dtype="float32"):
    """engine.score of `model` as a module: DDP-wrapped under torchrun, torch.compiled if asked."""
    module = Scorer(model, dtype)
    wrapped = torch.nn.parallel.DistributedDataParallel(module) if world > 1 else module
    return torch.compile(wrapped) if compile else wrapped


@contextlib.contextmanager
def lead_first(rank, world):
    """Rank 0 runs the block first (e.g. caches the warm start); the others wait, then run it."""
    if rank:
        torch.distributed.barrier()
    yield
    if world > 1 and not rank:
        torch.distributed.barrier()


def token_share(num_tokens, world, device):
    """This rank's loss weight: its completion tokens over the global mean per rank (1 alone)."""
    if world == 1:
        return 1.0
    total = torch.tensor(float(num_tokens), device=device)
    torch.distributed.all_reduce(total)
    return num_tokens * world / float(total)


def reduce_metrics(metrics, world, device):
    """Average every number over ranks; token counts are summed."""
    if world == 1:
        return metrics
    keys = [k for k, v in metrics.items() if isinstance(v, (int, float))]
    flat = [float(metrics[k]) for k in keys] + [float(x) for x in metrics["reward_per_component"]]
    values = torch.tensor(flat, dtype=torch.float64, device=device)
    torch.distributed.all_reduce(values)
    values = (values / world).tolist()
    out = dict(metrics)
    for k, v in zip(keys, values):
        out[k] = v * world if k == "tokens" else v
    out["tokens"] = int(round(out["tokens"]))
    out["reward_per_component"] = [round(v, 4) for v in values[len(keys) :]]
    return out


def replicas_in_sync(model, world, device):
    """DDP keeps replicas identical; check it rather than trust it -> (in sync, checksum)."""
    total = sum(float(p.detach().double().sum()) for p in model.parameters())
    checksum = torch.tensor([total, -total], dtype=torch.float64, device=device)
    torch.distributed.all_reduce(checksum, op=torch.distributed.ReduceOp.MAX)
    return bool(checksum[0] == -checksum[1]), float(checksum[0])


def finish(world):
    """Tear down together: a rank exiting while another still works races gloo's threads at exit."""
    if world > 1:
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()
