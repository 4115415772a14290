"""Helpers for the tests that train configs/tiny.yaml (seconds on a CPU) with quiet=true and their
directories under pytest's tmp_path (test_config.py, test_checkpoint.py, test_warmstart.py,
test_train.py, test_reproduce.py). The runs that are compared byte for byte share one config, RUN,
and one cached warm start (the session fixture `baseline` in conftest.py), so they differ only in
how they were interrupted."""

import hashlib
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

import train as trainer
from runfiles import load_checkpoint
from train import resolve_config

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = os.path.join(ROOT, "configs", "tiny.yaml")
# evals at 0, 2, 4, ..., checkpoints at 3, 6, 9, 12
RUN = ["steps=12", "ckpt_every=3", "quiet=true"]
# One warm-start cache for the session's tiny() runs (conftest's shared_warmstarts sets it, in a
# folder every pytest-xdist worker sees): a few warm starts (one per task and settings, 4 s each
# here) serve every run instead of one each; the cache's lock lets two workers train one once.
# None (tiny_runs used without conftest): a fresh cache in each test's tmp_path.
WARMSTARTS = None


def tiny(tmp_path, *overrides):
    """tiny.yaml with out_dir tmp_path/run; its warm start from WARMSTARTS (a test about the warm
    start's own training names a warmstart_dir of its own in `overrides`)."""
    ws = WARMSTARTS or f"{tmp_path}/ws"
    return resolve_config(
        TINY, [f"out_dir={tmp_path}/run", f"warmstart_dir={ws}", "quiet=true", *overrides]
    )


def config(out_dir, ws, *overrides):
    return resolve_config(TINY, [f"out_dir={out_dir}", f"warmstart_dir={ws}", *RUN, *overrides])


def cli(out_dir, ws, *overrides):
    return [
        sys.executable,
        "train.py",
        "--config",
        TINY,
        "--set",
        f"out_dir={out_dir}",
        f"warmstart_dir={ws}",
        *RUN,
        *overrides,
    ]


def read(path):
    with open(path, "rb") as f:
        return f.read()


def weights(path):
    return load_checkpoint(str(path))["model"]


def same_weights(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def all_finite(state):
    return all(torch.isfinite(v).all() for v in state.values())


def snapshot(root):
    """Every file and folder under root with its size, mtime and content hash."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for d in dirnames:
            out[os.path.relpath(os.path.join(dirpath, d), root)] = "dir"
        for name in filenames:
            path = os.path.join(dirpath, name)
            st = os.stat(path)
            out[os.path.relpath(path, root)] = (
                st.st_size,
                st.st_mtime_ns,
                hashlib.sha1(read(path)).hexdigest(),
            )
    return out


class Killed(BaseException):
    """Stands in for SIGKILL in-process: nothing in train() catches a BaseException."""


def sigkill_when(runs, timeout=120):
    """runs: {process: ready()}. Poll them all (they start together, which saves interpreter
    start-up time), and SIGKILL each one as soon as its ready() holds."""
    deadline, waiting = time.time() + timeout, dict(runs)
    while waiting:
        for proc, ready in list(waiting.items()):
            if ready():
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                assert proc.returncode == -signal.SIGKILL
                del waiting[proc]
            elif proc.poll() is not None:
                pytest.fail(
                    f"run exited ({proc.returncode}) before its kill point: {proc.stderr.read()}"
                )
        if time.time() > deadline:
            for proc in waiting:
                proc.kill()
            pytest.fail("kill point never reached")
        time.sleep(0.005)


def popen(args):
    return subprocess.Popen(
        args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )


def refuses_in_one_line(runs, baseline, capsys, where, overrides, prepare, message):
    """train.py with a bad setting or folder: exit 2, one line naming it, nothing in `runs`
    changed."""
    out = runs / where
    if prepare:
        prepare(str(out / "ckpt.pt"))
    before = snapshot(runs)
    with pytest.raises(SystemExit) as exit_:
        trainer.main(
            [
                "--config",
                TINY,
                "--set",
                f"out_dir={out}",
                f"warmstart_dir={baseline['ws']}",
                *RUN,
                *overrides,
            ]
        )
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith("error: ") and message in err, err
    assert snapshot(runs) == before
