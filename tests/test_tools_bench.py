"""tools/bench.py at a tiny size: every measurement runs and reports, the warm-start timing trains
what warm_start trains, and the runs' step times are read back. No timing is asserted."""

import json
import os
import sys

import pytest
import torch

sys.path.insert(
    0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools")
)
import bench  # noqa: E402

import train  # noqa: E402

TINY = ["model=nano", "prompts_per_step=2", "group_size=2", "sft_batch=4", "answers_per_rollout=1"]


def test_every_measurement_runs():
    r = bench.measure(train.resolve_config(overrides=TINY), "cpu", warmup=0, repeats=1)
    for key in (
        "params",
        "sample_s",
        "sample_tok_per_s",
        "step_s",
        "step_cpu_s",
        "step_sample_s",
        "sft_tok_per_s",
        "peak_rss_gib",
    ):
        assert r[key] > 0, key
    assert 0 < r["step_sample_s"] < r["step_s"] and "RL step: s" in bench.table(r)


def test_main_writes_json(tmp_path, capsys):
    path = tmp_path / "bench.json"
    bench.main(["--set", *TINY, "--warmup", "0", "--repeats", "1", "--json", str(path)])
    assert "RL step: s" in capsys.readouterr().out
    saved = json.loads(path.read_text())
    assert saved["results"]["step_s"] > 0 and saved["results"]["completion_tokens"] > 0
    assert saved["machine"]["threads"] >= 1 and saved["machine"]["torch"] == torch.__version__


@pytest.mark.skipif(
    torch.cuda.is_available(), reason="checks the message on a machine without CUDA"
)
def test_cuda_without_cuda_is_a_clear_error(capsys):
    with pytest.raises(SystemExit) as e:
        bench.main(["--device", "cuda"])
    assert e.value.code == 2 and "CUDA is not available" in capsys.readouterr().err


def test_warm_start_timing_splits_the_phases_and_trains_what_warm_start_trains(tmp_path):
    """--warm-start-steps: each step counted in its phase (single-answer first), and the weights are
    those warmstart.warm_start makes with the same settings (the timing wraps the step, changes
    nothing)."""
    import warmstart
    from config import make_task
    from model import Tokenizer

    cfg = train.resolve_config(overrides=TINY + ["task=code", "sft_single_first=0.3"])
    r = bench.time_warm_start(cfg, "cpu", 20)
    assert (
        (r["single_steps"], r["mixed_steps"]) == (6, 14)
        and r["single_ms"] > 0
        and r["mixed_ms"] > 0
    )
    model, _ = warmstart.warm_start(
        {**cfg, "sft_steps": 20, "warmstart_dir": str(tmp_path)},
        make_task("code", **cfg["task_options"]),
        Tokenizer(cfg["tokenizer"]),
        "cpu",
        lambda msg: None,
    )
    assert r["checksum"] == sum(float(p.detach().double().sum()) for p in model.parameters())
    # the wrappers are gone again
    assert warmstart.sft_step.__name__ == "sft_step"
    assert warmstart.padded_demos.__name__ == "padded_demos"


def test_the_naive_variants_sample_what_engine_generate_samples():
    """--naive times the same samples without a trick: each sample's own prompt copy, or no KV
    cache."""
    import engine
    from model import GPT, PRESETS, Decoding, GPTConfig, Tokenizer, pad_left

    tok = Tokenizer()
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=tok.vocab_size, block_size=64, **PRESETS["nano"])).eval()
    prompt, prompt_mask = pad_left([[tok.bos, 10, 11, tok.answer], [tok.bos, 7, tok.answer]], 0)
    samples = {}
    for name, sampler in [("fast", engine.generate)] + [
        (n, v[0]) for n, v in bench.VARIANTS.items()
    ]:
        decoding = Decoding(tok.eos, generator=torch.Generator().manual_seed(1))
        samples[name] = sampler(model, prompt, prompt_mask, 3, 12, decoding)["tokens"]
    assert samples["fast"].shape == (6, 12)
    assert all(torch.equal(tokens, samples["fast"]) for tokens in samples.values())


def test_step_times_reads_each_runs_timing(tmp_path, capsys):
    """--step-times (tools/gpu_speed.sh's summary of its runs): steps and medians, or that a run has
    none."""
    run = tmp_path / "runs" / "code-vpo-s0"
    run.mkdir(parents=True)
    (run / "timing.jsonl").write_text(
        "".join(
            json.dumps({"step": i, "step_s": s, "sample_s": s / 2}) + "\n"
            for i, s in enumerate([0.1, 0.3, 0.2])
        )
    )
    bench.main(["--step-times", str(run / "timing.jsonl"), str(tmp_path / "cut" / "timing.jsonl")])
    assert capsys.readouterr().out.splitlines() == [
        "code-vpo-s0: 3 steps, median 0.200 s a step (sampling 0.100 s)",
        "cut: no steps timed",
    ]
