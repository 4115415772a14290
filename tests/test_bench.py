"""lab/bench.py at a tiny size: every measurement runs and reports, the naive variants sample what the
optimised model samples, and the TRL comparison degrades to a message. No timing is asserted."""

import json
import os
import sys

import pytest
import torch

from lab import bench  # noqa: E402
import train  # noqa: E402
from model import pad_left  # noqa: E402

TINY = ["model=nano", "prompts_per_step=2", "group_size=2", "sft_batch=4", "answers_per_rollout=1"]


def test_every_measurement_runs_for_every_variant():
    cfg = train.resolve_config(overrides=TINY)
    results = bench.run_ours(cfg, "cpu", list(bench.VARIANTS), warmup=0, repeats=1, log=lambda msg: None)
    assert results.pop("_params") > 0
    assert set(results) == set(bench.VARIANTS)
    for r in results.values():
        for key in ("sample_s", "sample_tok_per_s", "step_s", "step_cpu_s", "step_sample_s"):
            assert r[key] > 0, key
    assert results["ours"]["sft_tok_per_s"] > 0 and results["ours"]["peak_rss_gib"] > 0
    assert all(0 <= r["step_reward_s"] < r["step_sample_s"] for r in results.values())  # rewards: within sampling
    text = bench.table(results, list(bench.VARIANTS))
    assert "RL step: s" in text and "naive" in text


def test_naive_variants_sample_the_same_tokens():
    cfg = train.resolve_config(overrides=TINY)
    model, tok, task = bench.setup(cfg, "cpu")
    model.eval()
    prompt, mask = pad_left([[tok.bos, 1, 2, tok.answer], [tok.bos, 3, tok.answer]], tok.eos)
    outs = [generate(model, prompt, mask, 3, 12, tok.eos, generator=torch.Generator().manual_seed(0))
            for generate, _ in bench.VARIANTS.values()]
    for out in outs[1:]:
        assert torch.equal(out["tokens"], outs[0]["tokens"]) and torch.equal(out["mask"], outs[0]["mask"])
        assert torch.allclose(out["logprobs"], outs[0]["logprobs"], atol=1e-5)
    p, pm = prompt.repeat_interleave(3, 0), mask.repeat_interleave(3, 0)
    scores = [score(model, p, pm, outs[0]["tokens"], outs[0]["mask"])[0] for _, score in bench.VARIANTS.values()]
    for other in scores[1:]:
        assert torch.allclose(other[outs[0]["mask"]], scores[0][outs[0]["mask"]], atol=1e-5)
    # and the swap is undone afterwards
    with bench.variant("naive"):
        assert bench.engine.generate is bench.GPT.generate
    assert bench.engine.generate is bench.VARIANTS["ours"][0]


def test_forced_length_never_stops_early():
    cfg = train.resolve_config(overrides=TINY)
    model, tok, task = bench.setup(cfg, "cpu")
    prompt, mask = pad_left([[tok.bos, 1, tok.answer]], tok.eos)
    with bench.variant("ours", force_length=True):
        out = bench.engine.generate(model.eval(), prompt, mask, 4, 9, tok.eos, generator=torch.Generator().manual_seed(0))
    assert out["tokens"].shape == (4, 9) and bool(out["mask"].all())


def test_main_writes_json_and_explains_a_missing_trl(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(bench, "trl_available", lambda: False)
    path = tmp_path / "bench.json"
    bench.main(["--set", *TINY, "--warmup", "0", "--repeats", "1", "--trl", "--no-sft", "--json", str(path)])
    out = capsys.readouterr().out
    assert "TRL is not installed" in out and "RL step: s" in out
    saved = json.loads(path.read_text())
    assert saved["trl_config"] and saved["results"]["ours"]["step_s"] > 0
    assert saved["results"]["ours"]["prompt_tokens"] == bench.TRL_PROMPT_TOKENS
    assert saved["results"]["ours"]["step_completion_width"] == bench.TRL_COMPLETION_TOKENS
    assert saved["machine"]["threads"] >= 1 and saved["machine"]["torch"] == torch.__version__


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without CUDA")
def test_cuda_without_cuda_is_a_clear_error(capsys):
    with pytest.raises(SystemExit) as e:
        bench.main(["--device", "cuda"])
    assert e.value.code == 2 and "CUDA is not available" in capsys.readouterr().err


def test_warm_start_timing_splits_the_phases_and_trains_what_warm_start_trains(tmp_path):
    """--warm-start-steps: each step counted in its phase (single-answer first), and the weights are
    those warmstart.warm_start makes with the same settings (the timing wraps the step, changes nothing)."""
    import warmstart
    from config import make_task
    from model import Tokenizer
    cfg = train.resolve_config(overrides=TINY + ["task=code", "sft_single_first=0.3"])
    r = bench.time_warm_start(cfg, "cpu", 20)
    assert (r["single_steps"], r["mixed_steps"]) == (6, 14) and r["single_ms"] > 0 and r["mixed_ms"] > 0
    model, _ = warmstart.warm_start({**cfg, "sft_steps": 20, "warmstart_dir": str(tmp_path)},
                                    make_task("code", **cfg["task_options"]), Tokenizer(cfg["tokenizer"]), "cpu",
                                    lambda msg: None)
    assert r["checksum"] == sum(float(p.detach().double().sum()) for p in model.parameters())
    assert warmstart.sft_step.__name__ == "sft_step"  # the wrapper is gone again


def test_profile_names_the_ops_and_rates_the_matmuls(tmp_path, capsys):
    """--profile: the ops of our sampling by CPU time, and each matmul kind's share and FLOP rate in
    sampling and in an RL step (written too)."""
    path = tmp_path / "profile.json"
    bench.main(["--trl-config", "--profile", "--set", "model=nano", "prompts_per_step=2", "group_size=2",
                "--json", str(path)])
    out = capsys.readouterr().out
    assert "aten::mm" in out and "RL step: aten::mm" in out
    rates = json.load(open(path))["matmuls"]
    assert set(rates["sampling"]) == set(rates["RL step"]) == {"aten::mm", "aten::baddbmm + aten::bmm"}
    assert all(0 < share < 1 and gflops > 0 for what in ("sampling", "RL step") for share, gflops in rates[what].values())
    assert rates["one 1024x1024x1024 matmul, GFLOP/s"] > 0
