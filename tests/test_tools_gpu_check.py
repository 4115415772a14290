"""tools/gpu_check.py runs where a GPU is lent, rarely: dry-run its checks on the CPU here so that
the script cannot rot between loans (CPU against CPU: every comparison must come out exact).
Here the timings mean nothing: the captured sampler's check draws each sampler's tokens once, not
timed 5 times more, and the generate and captured sampler checks' model is the nano preset, not the
cpu one (the same code, cheaper)."""

import os
import sys

import pytest
import torch

sys.path.insert(
    0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools")
)
import gpu_check  # noqa: E402

from model import PRESETS  # noqa: E402


def untimed(monkeypatch):
    """gpu_check.timed reports 0 s without calling: its timed call repeats the draw just checked
    (timed itself runs in the warm-start check below)."""
    calls = []
    monkeypatch.setattr(gpu_check, "timed", lambda fn, times: calls.append(fn) or 0.0)
    return calls


def test_score_and_generate_checks_pass_on_the_cpu(monkeypatch):
    monkeypatch.setattr(gpu_check, "DEVICE", "cpu")
    monkeypatch.setattr(gpu_check, "SCORE_PRESETS", ("nano",))
    monkeypatch.setattr(gpu_check, "PRESETS", {**PRESETS, "cpu": PRESETS["nano"]})
    results = []
    gpu_check.check_score(results)
    gpu_check.check_generate(results)
    assert len(results) == 2 + 6 and all(r["ok"] for r in results), results
    float32 = results[0]
    # the same device twice
    assert float32["max_logprob_diff"] == 0.0 and float32["grad_rel_diff"] < 1e-6


def test_the_captured_sampler_check_passes_on_the_cpu(monkeypatch):
    """On the CPU generate_static runs its step eagerly (no graph to capture): the same tokens."""
    monkeypatch.setattr(gpu_check, "DEVICE", "cpu")
    monkeypatch.setattr(gpu_check, "PRESETS", {**PRESETS, "cpu": PRESETS["nano"]})
    timed = untimed(monkeypatch)
    results = []
    gpu_check.check_graph(results)
    assert len(timed) == 2 * 3  # each sampler of each preset
    assert len(results) == 2 and all(r["ok"] and r["token_agreement"] == 1.0 for r in results), (
        results
    )


def test_a_broken_scorer_fails_the_check(monkeypatch):
    """The check can fail: a scorer that is off by a little on one device is caught."""
    monkeypatch.setattr(gpu_check, "DEVICE", "cpu")
    monkeypatch.setattr(gpu_check, "SCORE_PRESETS", ("nano",))
    real = gpu_check.scored
    calls = []

    def off_on_the_second_model(model, batch, bf16=False):
        logp, ent, grads = real(model, batch, bf16)
        calls.append(1)
        return (logp + 1e-3, ent, grads) if len(calls) == 2 else (logp, ent, grads)

    monkeypatch.setattr(gpu_check, "scored", off_on_the_second_model)
    results = []
    gpu_check.check_score(results)
    assert not results[0]["ok"] and results[0]["max_logprob_diff"] > 5e-4


@pytest.mark.skipif(
    torch.cuda.is_available(), reason="checks the message on a machine without CUDA"
)
def test_without_cuda_it_says_so(monkeypatch):
    monkeypatch.setattr("sys.argv", ["gpu_check.py", "--out", "/tmp/unused"])
    with pytest.raises(SystemExit, match="no CUDA device"):
        gpu_check.main()


def test_the_captured_warm_start_check_passes_on_the_cpu(monkeypatch):
    """On the CPU the fixed-shape update runs eagerly: it passes, within float rounding of the eager
    step."""
    monkeypatch.setattr(gpu_check, "DEVICE", "cpu")
    results = []
    gpu_check.check_sft(results, steps=12)
    assert len(results) == 1 and results[0]["ok"] and results[0]["loss_rel_diff"] < 1e-5, results
