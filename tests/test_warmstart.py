"""The warm start's update captured as a CUDA graph (warmstart.CapturedSFT), checked where it can be on
the CPU: the fixed-shape update it records computes what sft_step computes, a batch too long for its
buffers runs eagerly, and only CUDA in float32 captures. tools/gpu_check.py checks the capture itself."""

import copy
import random

import pytest
import torch

import train
import warmstart
from config import make_task
from model import Tokenizer
from rollouts import max_completion_tokens

CODE = ["task=code", "model=nano", "sft_batch=4", "block_size=224"]


def setup(overrides=()):
    cfg = train.resolve_config(overrides=CODE + list(overrides))
    task, tok = make_task("code", **cfg["task_options"]), Tokenizer(cfg["tokenizer"])
    torch.manual_seed(0)
    return cfg, task, tok, warmstart.build_model(cfg, tok, "cpu")


def run_steps(model, cfg, task, tok, graph_shape, steps=6):
    """`steps` warm-start updates (mixed formats, parents) -> losses; graph_shape (prompt_len,
    completion_len) sends them through a CapturedSFT (eager on the CPU, though capture is on by default),
    None through sft_step alone."""
    opt, rng, losses = warmstart.sft_optimizer(model, cfg), random.Random(7), []
    graph = warmstart.CapturedSFT(model, opt, cfg["sft_batch"], *graph_shape, tok.eos) \
        if graph_shape else None
    for step in range(steps):
        warmstart.set_lr(opt, cfg["sft_lr"] * (step + 1) / steps)
        loss, n = warmstart.sft_step(model, opt, task, tok, cfg, rng, "cpu", single_only=step < 2, graph=graph)
        assert n > 0
        losses.append(float(loss.detach()))
    return losses, graph


def test_fixed_shape_update_computes_what_sft_step_computes():
    """Padding every batch to the graph's buffers (prompts on the left, completions on the right)
    changes no loss and no update beyond float rounding."""
    cfg, task, tok, model = setup()
    twin = copy.deepcopy(model)
    completion_len = max_completion_tokens(task, cfg["answers_per_rollout"])
    plain, _ = run_steps(model, cfg, task, tok, None)
    fixed, graph = run_steps(twin, cfg, task, tok, (cfg["block_size"] - completion_len, completion_len))
    assert graph.updates == 6  # every batch fitted the buffers: none ran the eager fallback
    assert fixed == pytest.approx(plain, rel=1e-5)
    for a, b in zip(model.parameters(), twin.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)
    fresh = warmstart.build_model(cfg, tok, "cpu")
    assert not any(torch.equal(a, b) for a, b in zip(model.parameters(), fresh.parameters()))  # it trained


def test_a_batch_too_long_for_the_buffers_runs_eagerly_and_the_same():
    cfg, task, tok, model = setup()
    twin = copy.deepcopy(model)
    plain, _ = run_steps(model, cfg, task, tok, None, steps=3)
    eager, graph = run_steps(twin, cfg, task, tok, (4, 4), steps=3)  # no demonstration is that short
    assert graph.updates == 0 and eager == plain
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), twin.parameters()))


def test_the_learning_rate_is_set_in_place_when_it_is_a_tensor():
    """A captured optimizer step reads the tensor it was recorded with: set_lr must fill it, not replace it."""
    model = torch.nn.Linear(2, 2)
    lr = torch.tensor(1.0)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, foreach=False)
    warmstart.set_lr(opt, 0.25)
    assert opt.param_groups[0]["lr"] is lr and float(lr) == 0.25
    plain = torch.optim.AdamW(model.parameters(), lr=1.0)
    warmstart.set_lr(plain, 0.5)
    assert plain.param_groups[0]["lr"] == 0.5


def test_only_cuda_in_float32_with_cuda_graph_on_captures():
    cfg = train.resolve_config(overrides=CODE)
    assert warmstart.use_graph(cfg, "cuda") and warmstart.use_graph(cfg, "cuda:1")
    assert not warmstart.use_graph(cfg, "cpu")
    assert not warmstart.use_graph({**cfg, "cuda_graph": False}, "cuda")
    assert not warmstart.use_graph({**cfg, "dtype": "bfloat16"}, "cuda")
    assert not warmstart.use_graph({k: v for k, v in cfg.items() if k != "cuda_graph"}, "cuda")
