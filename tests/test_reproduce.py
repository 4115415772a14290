"""Reproducibility across processes: the same config and seed, trained in two fresh Python
processes, writes the same bytes.

The first test runs two processes. The tests after it compare runs made inside one pytest process
(they share imports, caches and whatever global state a module keeps): the same seed gives the same
metrics.jsonl with a fresh or a cached warm start, and a run killed anywhere (a real SIGKILL, or a
simulated one at an exact point) and resumed ends byte for byte where the uninterrupted run did. In
the first test each run is its own `python train.py`, as the
experiment's worker processes and a rerun weeks later are, and the two processes differ in what must
not matter: their hash seed (the iteration order of sets and dicts of strings), the thread count
the environment asks for (a run sets its own, `threads`), and the folder they run in. Each trains
its own warm start (a short one, both of its phases), so the supervised phase is compared too. A
third run with another seed, trained meanwhile in the test's own process, must differ, so the
comparison can fail.

Same machine only: float32 CPU kernels differ between CPUs (torch's ATen dispatch level, AVX2 or
AVX-512; MKL's code path), and a run amplifies a difference in the last bit into other numbers: the
committed persona seed-1 files were made at c6e43db, and c6e43db on another CPU gives another warm
start. A byte-for-byte comparison with a stored file would fail on another machine.
"""

import gc
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from tiny_runs import Killed, cli, config, popen, read, same_weights, sigkill_when, weights

import runfiles
from config import ConfigError
from runfiles import load_checkpoint
from train import resolve_config, train

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = os.path.join(ROOT, "configs", "tiny.yaml")
# a short persona run of a set method (m = 3): evals at 0, 2, 4, checkpoints at 2 and 4, after a
# warm start of 20 steps (6 on the 1-answer format, then every format: sft_single_first); out_dir
# and warmstart_dir are relative, so every file (config.yaml, final.pt's warm_start path) is the
# same text
RUN = [
    "task=persona",
    "algo=vpo",
    "sft_steps=20",
    "steps=4",
    "ckpt_every=2",
    "quiet=true",
    "out_dir=run",
    "warmstart_dir=ws",
]
# every other file must be the same bytes (log.txt once its speeds are masked)
WALL_CLOCK = {"run/timing.jsonl"}


def start(cwd, seed=0, **env):
    os.makedirs(cwd)
    return subprocess.Popen(
        [
            sys.executable,
            os.path.join(ROOT, "train.py"),
            "--config",
            TINY,
            "--set",
            *RUN,
            f"seed={seed}",
        ],
        cwd=cwd,
        env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE", **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(proc):
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err


def files(root):
    """Every file under root -> its bytes (log.txt with its speeds and times masked)."""
    out = {}
    for dirpath, _, names in os.walk(root):
        for name in names:
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root).replace(os.sep, "/")
            with open(path, "rb") as f:
                out[rel] = f.read()
    out["run/log.txt"] = re.sub(
        rb"\d+ tok/s|ETA \S+|(done|trained) in \d+s", b"#", out["run/log.txt"]
    )
    return out


def test_two_processes_write_the_same_bytes_and_another_seed_does_not(tmp_path, monkeypatch):
    a = start(tmp_path / "a", PYTHONHASHSEED="1", OMP_NUM_THREADS="1")
    b = start(tmp_path / "b", PYTHONHASHSEED="2", OMP_NUM_THREADS="2", MKL_NUM_THREADS="2")
    # the other seed in this process, while the two run: one interpreter start fewer
    os.makedirs(tmp_path / "seed1")
    monkeypatch.chdir(tmp_path / "seed1")
    train(resolve_config(TINY, [*RUN, "seed=1"]))
    for proc in (a, b):
        finish(proc)
    first, second, third = files(tmp_path / "a"), files(tmp_path / "b"), files(tmp_path / "seed1")
    assert {
        "run/config.yaml",
        "run/metrics.jsonl",
        "run/samples.jsonl",
        "run/log.txt",
        "run/ckpt.pt",
        "run/final.pt",
    } <= set(first)
    # the warm start, cached
    assert sum(name.startswith("ws/warmstart-persona-") for name in first) == 1
    differ = sorted(
        name
        for name in set(first) | set(second)
        if name not in WALL_CLOCK and first.get(name) != second.get(name)
    )
    assert not differ, f"the same run in two processes wrote different bytes: {differ}"
    # the comparison can fail: another seed changes what the run learns and logs
    assert third["run/metrics.jsonl"] != first["run/metrics.jsonl"]
    assert third["run/samples.jsonl"] != first["run/samples.jsonl"]


# ----------------------------------------------------------------------------------------------
# In one process: kills and resumes, then the same seed with a cached warm start (`baseline`:
# conftest.py)


def test_sigkill_mid_run_and_during_warm_start_then_resume(baseline, tmp_path, capsys):
    """Two real SIGKILLs: a run with the warm start cached, killed once ckpt.pt exists (step 3) and
    step 4 is logged; and a run with a fresh cache, killed during its warm start. The first resumes,
    with the command's settings, in the test's own process, another process than the killed one:
    it says it took over the dead process's lock (runfiles.Lock; tests/test_one_writer.py holds the
    other tests of the lock between processes)."""
    mid, ws = tmp_path / "mid", baseline["ws"]
    warm, fresh_ws = tmp_path / "warm", tmp_path / "ws"
    killed = popen(cli(mid, ws))
    sigkill_when(
        {
            killed: lambda: (
                (mid / "ckpt.pt").exists()
                and b'"kind": "train", "step": 4,' in read(mid / "metrics.jsonl")
            ),
            popen(cli(warm, fresh_ws)): lambda: (
                (warm / "log.txt").exists() and b"warm start 1/" in read(warm / "log.txt")
            ),
        }
    )
    # mid-run: the resume drops what was logged after ckpt.pt and ends exactly where the baseline
    # did
    assert not (mid / "final.pt").exists(), "the run finished before it could be killed"
    assert (mid / ".lock").exists()
    # in-process: the same code, without another interpreter start (nor the report train.py's main
    # adds at the end); not quiet, to say what it did
    capsys.readouterr()
    train(config(mid, ws, "resume=true", "quiet=false"))
    took_over = f"took over the lock of pid {killed.pid}, which no longer runs"
    assert took_over in capsys.readouterr().out.splitlines()
    assert took_over in (mid / "log.txt").read_text() and not (mid / ".lock").exists()
    assert read(mid / "metrics.jsonl") == baseline["metrics"]
    for name in ("samples.jsonl", "timing.jsonl"):  # every line whole
        for line in read(mid / name).splitlines():
            json.loads(line)
    assert same_weights(weights(mid / "final.pt"), baseline["final"])
    # during the warm start: nothing half-trained was cached, and with no checkpoint yet the resume
    # starts the run again. steps may change on resume; 4 keeps this short, and a fresh warm start
    # + 4 steps must log exactly the baseline's first lines (through eval @ 4)
    assert not [f for f in os.listdir(fresh_ws) if f.endswith(".pt")]
    assert not (warm / "metrics.jsonl").exists()
    train(config(warm, fresh_ws, "resume=true", "steps=4"))
    text = read(warm / "metrics.jsonl")
    assert text.count(b"\n") == 7 and baseline["metrics"].startswith(text)
    assert same_weights(
        weights(next(fresh_ws.glob("*.pt"))), weights(next(baseline["ws"].glob("*.pt")))
    )


def _kill_at(point):
    """An atomic_save replacement that dies at one point, as a SIGKILL there would."""
    real, calls = runfiles.atomic_save, []

    def save(obj, path):
        calls.append(path)
        if point == "before the first checkpoint" and len(calls) == 1:
            raise Killed
        if point == "mid-write of the second checkpoint" and len(calls) == 2:
            with open(f"{path}.{os.getpid()}.tmp", "wb") as f:  # a torn temporary file stays behind
                f.write(b"PK\x03\x04 half a checkpoint")
            raise Killed
        if point == "before final.pt" and path.endswith("final.pt"):
            raise Killed
        real(obj, path)

    return save


def test_simulated_kills_at_exact_points_resume_exactly(baseline, tmp_path, monkeypatch):
    """One run killed three times where a SIGKILL is hard to aim, resumed after each kill."""
    out = tmp_path / "run"
    cfg = config(out, baseline["ws"])
    for point, ckpt_step in [
        ("before the first checkpoint", None),
        ("mid-write of the second checkpoint", 3),
        ("before final.pt", 12),
    ]:
        with monkeypatch.context() as patch:
            patch.setattr(runfiles, "atomic_save", _kill_at(point))
            try:
                train({**cfg, "resume": point != "before the first checkpoint"})
                pytest.fail(f"the run was not killed {point}")
            except Killed:
                pass
        gc.collect()  # close the killed run's files, as process exit would
        assert not (out / "final.pt").exists()
        if ckpt_step is None:
            assert not (out / "ckpt.pt").exists()
            with pytest.raises(ConfigError, match="holds an unfinished run"):
                train(cfg)  # a plain rerun must not silently clobber it
        else:
            assert load_checkpoint(str(out / "ckpt.pt"))["step"] == ckpt_step
    # the same directory, spelled differently
    train({**cfg, "resume": True, "out_dir": f"{out}/./"})
    assert read(out / "metrics.jsonl") == baseline["metrics"]
    assert same_weights(weights(out / "final.pt"), baseline["final"])


def test_same_seed_same_metrics_fresh_and_cached_warm_start(baseline, tmp_path):
    """The baseline trained its warm start; this rerun loads it from the cache. (A second fresh warm
    start is compared with the baseline in
    test_sigkill_mid_run_and_during_warm_start_then_resume.)"""
    assert (
        "warm start: loaded cached"
        not in Path(os.path.join(baseline["out"], "log.txt")).read_text()
    )
    cached = train(config(tmp_path / "cached", baseline["ws"]))
    assert "warm start: loaded cached" in Path(os.path.join(cached, "log.txt")).read_text()
    text = read(os.path.join(cached, "metrics.jsonl"))
    assert text == baseline["metrics"]
    assert b'"step_s"' not in text and b'"sample_s"' not in text  # wall-clock lives in timing.jsonl
    assert same_weights(weights(os.path.join(cached, "final.pt")), baseline["final"])
    assert read(os.path.join(cached, "timing.jsonl")) != read(
        os.path.join(baseline["out"], "timing.jsonl")
    )
