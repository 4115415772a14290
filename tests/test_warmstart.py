"""The warm start's update captured as a CUDA graph (warmstart.CapturedSFT), checked where it can be
on the CPU: the fixed-shape update it records computes what sft_step computes, a batch too long for
its buffers runs eagerly, and only CUDA in float32 captures. tools/gpu_check.py checks the capture
itself. Then the warm start's cache (shared between algorithms, keyed by its settings and the task's
code, never holding a diverged model) and its curriculum."""

import copy
import os
import random
from pathlib import Path

import pytest
import torch
from tiny_runs import RUN, TINY, tiny

import train
import train as trainer
import warmstart
from config import make_task
from model import Tokenizer, build_model
from rollouts import max_completion_tokens
from train import resolve_config

CODE = ["task=code", "model=nano", "sft_batch=4", "block_size=224"]


def setup(overrides=()):
    cfg = train.resolve_config(overrides=CODE + list(overrides))
    task, tok = make_task("code", **cfg["task_options"]), Tokenizer(cfg["tokenizer"])
    torch.manual_seed(0)
    return cfg, task, tok, build_model(cfg["model"], cfg["block_size"], tok.vocab_size, "cpu")


def run_steps(model, cfg, task, tok, graph_shape, steps=6):
    """`steps` warm-start updates (mixed formats, parents) -> losses; graph_shape (prompt_len,
    completion_len) sends them through a CapturedSFT (eager on the CPU, though capture is on by
    default), None through sft_step alone."""
    opt, rng, losses = warmstart.sft_optimizer(model, cfg), random.Random(7), []
    graph = (
        warmstart.CapturedSFT(model, opt, cfg["sft_batch"], *graph_shape, tok.eos)
        if graph_shape
        else None
    )
    for step in range(steps):
        warmstart.set_lr(opt, cfg["sft_lr"] * (step + 1) / steps)
        demos = warmstart.padded_demos(task, tok, cfg, rng, "cpu", single_only=step < 2)
        loss, n = warmstart.sft_step(model, opt, demos, cfg["dtype"], graph=graph)
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
    fixed, graph = run_steps(
        twin, cfg, task, tok, (cfg["block_size"] - completion_len, completion_len)
    )
    assert graph.updates == 6  # every batch fitted the buffers: none ran the eager fallback
    assert fixed == pytest.approx(plain, rel=1e-5)
    for a, b in zip(model.parameters(), twin.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)  # padded sums round apart
    fresh = build_model(cfg["model"], cfg["block_size"], tok.vocab_size, "cpu")
    # it trained
    assert not any(torch.equal(a, b) for a, b in zip(model.parameters(), fresh.parameters()))


def test_a_batch_too_long_for_the_buffers_runs_eagerly_and_the_same():
    cfg, task, tok, model = setup()
    twin = copy.deepcopy(model)
    plain, _ = run_steps(model, cfg, task, tok, None, steps=3)
    # no demonstration is that short
    eager, graph = run_steps(twin, cfg, task, tok, (4, 4), steps=3)
    assert graph.updates == 0 and eager == plain
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), twin.parameters()))


def test_the_learning_rate_is_set_in_place_when_it_is_a_tensor():
    """A captured optimizer step reads the tensor it was recorded with: set_lr must fill it, not
    replace it."""
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


def test_warm_start_is_shared_between_algorithms(tmp_path):
    own = f"warmstart_dir={tmp_path}/ws"  # a cache of its own: the session's holds other runs'
    trainer.train(tiny(tmp_path, "algo=grpo", f"out_dir={tmp_path}/a", own))
    trainer.train(tiny(tmp_path, "algo=vpo", f"out_dir={tmp_path}/b", own))
    assert len(os.listdir(tmp_path / "ws")) == 1
    log = Path(tmp_path / "b" / "log.txt").read_text()
    assert "warm start: loaded cached" in log


def test_warm_start_depends_on_its_seed_not_on_the_process_history(tmp_path):
    """A worker of the headline experiment runs several jobs in turn: whatever it drew before must
    not change the warm start it trains (it once did: the initial weights came from the global
    RNG)."""
    from config import make_task
    from model import Tokenizer
    from warmstart import warm_start

    tok, task = Tokenizer(), make_task("persona")

    def weights(seed, name, history):
        torch.manual_seed(history)  # what earlier jobs in the same process left behind
        cfg = tiny(tmp_path, "sft_steps=3", f"seed={seed}", f"warmstart_dir={tmp_path}/{name}")
        model, _ = warm_start(cfg, task, tok, "cpu", lambda msg: None)
        return torch.cat([p.detach().flatten() for p in model.parameters()])

    assert torch.equal(weights(0, "a", history=1), weights(0, "b", history=2))
    assert not torch.equal(weights(0, "c", history=1), weights(1, "d", history=1))


def test_warm_start_key_follows_settings_and_task_code_not_trainer_text(tmp_path, monkeypatch):
    """Editing a comment in warmstart.py or train.py must not retrain the warm start, nor editing
    vpo.py's, grpo.py's or train.py's code; editing the task's data code must. The key reads the
    reference files of a copy of the tree (runfiles.HERE pointed at it), edited in place."""
    import runfiles

    root = os.path.dirname(TINY) + "/.."
    for name in os.listdir(root):
        if name.endswith(".py"):
            with open(os.path.join(root, name)) as src, open(tmp_path / name, "w") as dst:
                dst.write(src.read())
    monkeypatch.setattr(runfiles, "HERE", str(tmp_path))

    def key(*overrides):
        return warmstart.warmstart_path(train.resolve_config(overrides=list(overrides)))

    before = key()
    # lr is RL's
    assert key("sft_steps=7") != before and key("seed=1") != before and key("lr=0.5") == before
    for name in ("warmstart.py", "train.py"):  # e.g. a comment in warm_start
        with open(tmp_path / name, "a") as f:
            f.write("\n# a comment about warm_start\n")
    assert key() == before
    # an idea tried in vpo.py, grpo.py or train.py changes RL, not the warm start
    for name in ("vpo.py", "grpo.py", "train.py"):
        with open(tmp_path / name, "a") as f:
            f.write("\nIDEA = 2\n")
    assert key() == before
    # rewording rewards.py's docstrings and comments neither
    with open(tmp_path / "rewards.py") as f:
        source = f.read()
    with open(tmp_path / "rewards.py", "w") as f:
        f.write(
            source.replace(
                '"""A problem is a hidden program', '"""A problem: a hidden program', 1
            ).replace("\nimport itertools\n", "\n# reworded\nimport itertools\n", 1)
        )
    assert key() == before
    with open(tmp_path / "rewards.py", "a") as f:
        f.write("\nEXTRA = 1\n")
    assert key() != before


def test_single_answer_curriculum_batches():
    """The warm start's first phase shows only the plain 1-answer format; later phases mix in m."""
    import random

    from config import make_task
    from model import Tokenizer
    from warmstart import padded_demos

    tok, task = Tokenizer(), make_task("code")
    cfg = resolve_config(overrides=["task=code", "sft_parent_fraction=1.0"])
    rng = random.Random(0)

    def prompts(n, **kwargs):  # the prompts of one batch of n demonstrations, as text
        p, pm, _, _ = padded_demos(task, tok, dict(cfg, sft_batch=n), rng, "cpu", **kwargs)
        return [tok.decode(row[mask].tolist()) for row, mask in zip(p, pm)]

    for _ in range(20):
        assert all(
            t.startswith("<|bos|>1|") and " from " not in t for t in prompts(4, single_only=True)
        )
    mixed = [prompts(1)[0] for _ in range(40)]
    assert any(t.startswith("<|bos|>3|") for t in mixed) and all(" from " in t for t in mixed)


def test_diverged_warm_start_is_not_cached(tmp_path, capsys):
    ws = tmp_path / "ws"
    with pytest.raises(SystemExit) as exit_:
        trainer.main(
            [
                "--config",
                TINY,
                "--set",
                f"out_dir={tmp_path}/run",
                f"warmstart_dir={ws}",
                *RUN,
                "sft_lr=1e30",
                "sft_steps=5",
            ]
        )
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "warm start diverged" in err, err
    assert not [f for f in os.listdir(ws) if f.endswith(".pt")]
