"""A full or failing disk at any write, in the manner of SQLite's I/O-error tests (tests/faults.py):
a counting run learns every write call a command makes and where, then each chosen n fails in turn
(ENOSPC, as a full disk; EIO, a failing one, over fewer n). For each n: the command ends with one
line, "error: <the OS's words>: <the file>", and exit status 2; every file that was on disk as the
write failed is byte for byte what it was, no temporary file is left, every jsonl line parses and
every checkpoint loads; and once there is room the same command (with resume=true where the run's
folder holds a run: train.py asks for it) ends with metrics.jsonl and final.pt byte for byte an
uninterrupted run's.

Covered: a tiny training run (configs/tiny.yaml, 2 steps, a checkpoint each), a warm start written
into its cache, run.png, the lab's result files and its report (results.json, summary.md, the
figures), and a lab command whose worker's disk fills. The n tried are the first and the last call
of each write site and file (faults.first_and_last; a site: the project's function that asked for
the write), every n of the warm start and of a result file; VPO_EVERY_WRITE=1 tries every n of the
training run too.
"""

import errno
import json
import os
import shutil

import pytest
import torch
from faults import FailingDisk, files_under, one_line, write_sites
from tiny_runs import TINY, read

import train
import warmstart
from config import make_task
from model import Tokenizer
from runfiles import load_checkpoint

# 2 steps, a checkpoint after each (the second replaces the first), the smallest batch
RUN = ["steps=2", "ckpt_every=1", "prompts_per_step=1", "group_size=2"]
RUN += ["algo=grpo", "eval_problems=1", "quiet=true"]
WORDS = {errno.ENOSPC: "no space left on device", errno.EIO: "input/output error"}


def settings(out_dir, ws, *more):
    return [f"out_dir={out_dir}", f"warmstart_dir={ws}", *RUN, *more]


def fails_in_one_line(capsys, command, disk):
    """Run command() on the failing disk -> the one line it printed; exit status 2, no traceback."""
    with disk.installed(), pytest.raises(SystemExit) as stop:
        command()
    # (the stopped run's files stay open until collected: unbuffered, they hold nothing unwritten)
    assert disk.failed is not None, "no call failed"
    assert stop.value.code == 2, stop.value.code
    line, alone = one_line(capsys.readouterr().err)
    assert alone, line
    said = f"error: {WORDS[disk.err]}: "
    if disk.failed.primitive == "mkdir":  # a folder the run cannot make says so, as before
        said, line = "error: cannot create directory ", line.rsplit(": ", 1)[0]
    assert line.startswith(said), (line, disk.failed)
    assert os.path.realpath(line[len(said) :]) == disk.failed.file, (line, disk.failed)
    return line


def left_whole(disk):
    """What was on disk as the write failed is there unchanged; nothing half-written is visible."""
    now = files_under(disk.root)
    for name, data in disk.before.items():
        # the lock names its holder, not a result; a temporary file is the failed write's own
        if not name.endswith((".lock", ".tmp")):
            assert now.get(name) == data, f"{name} changed by {disk.failed}"
    assert not [name for name in now if name.endswith(".tmp")], disk.failed
    for name, data in now.items():
        path = os.path.join(disk.root, name)
        if name.endswith(".jsonl"):
            assert data == b"" or data.endswith(b"\n"), f"{name}: half a line, {disk.failed}"
            [json.loads(line) for line in data.splitlines()]
        if name.endswith(".pt"):
            load_checkpoint(path)


def continued(cfg):
    """The same command once there is room: resume=true where the folder holds a run (train.py's
    own message asks for it), nothing to do where the run finished."""
    out = cfg["out_dir"]
    if not os.path.exists(os.path.join(out, "final.pt")):
        train.train({**cfg, "resume": os.path.exists(os.path.join(out, "config.yaml"))})
    return read(os.path.join(out, "metrics.jsonl")), load_checkpoint(os.path.join(out, "final.pt"))


def same_weights(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.fixture(scope="module")
def clean(baseline, tmp_path_factory):
    """An uninterrupted run on a counting disk: its write calls and its files (the baseline's
    cached warm start, only read)."""
    root = tmp_path_factory.mktemp("clean")
    cfg = train.resolve_config(TINY, settings(root / "run", baseline["ws"]))
    disk = FailingDisk(root)
    with disk.installed():
        train.train(cfg)
    final = load_checkpoint(str(root / "run" / "final.pt"))
    return dict(calls=disk.calls, metrics=read(root / "run" / "metrics.jsonl"), final=final)


def training_n(calls, err):
    """The n tried: the first call of each site and file, and the last write of a file that is
    replaced or appended to (ckpt.pt, metrics.jsonl: a failure there must leave the earlier
    version); on a failing disk (EIO) every third of those. VPO_EVERY_WRITE=1: every n."""
    if os.environ.get("VPO_EVERY_WRITE") == "1":
        return list(range(1, len(calls) + 1))
    firsts, lasts = {}, {}
    for n, c in enumerate(calls, 1):
        firsts.setdefault((c.site, os.path.basename(c.path)), n)
        lasts[os.path.basename(c.path)] = n
    chosen = sorted({*firsts.values(), lasts["ckpt.pt"], lasts["metrics.jsonl"]})
    return chosen if err == errno.ENOSPC else chosen[::3]


@pytest.mark.parametrize("err", [errno.ENOSPC, errno.EIO], ids=["ENOSPC", "EIO"])
def test_a_training_run_stopped_by_any_write_says_so_loses_nothing_and_resumes_exactly(
    baseline, clean, tmp_path, capsys, err
):
    calls = clean["calls"]
    sites = write_sites(calls)
    # the counting run saw every file a run writes (run.png: test_run_png_...)
    written = {name for names in sites.values() for name in names}
    assert written == {
        "run",  # its folder
        ".lock",
        "config.yaml",
        "source.json",
        "log.txt",
        "metrics.jsonl",
        "timing.jsonl",
        "samples.jsonl",
        "ckpt.pt",
        "final.pt",
    }
    for n in training_n(calls, err):
        folder = tmp_path / f"n{n}"
        argv = ["--config", TINY, "--set", *settings(folder / "run", baseline["ws"])]
        disk = FailingDisk(folder, fail_at=n, err=err)
        fails_in_one_line(capsys, lambda argv=argv: train.main(argv), disk)
        assert disk.failed.primitive == calls[n - 1].primitive, (n, disk.failed, calls[n - 1])
        left_whole(disk)
        metrics, final = continued(train.resolve_config(TINY, argv[3:]))
        assert metrics == clean["metrics"], (n, disk.failed)
        assert same_weights(final["model"], clean["final"]["model"]), (n, disk.failed)
        shutil.rmtree(folder)


def test_a_warm_start_stopped_by_any_write_caches_nothing_torn_and_the_same_command_goes_on(
    tmp_path, capsys
):
    """Every n of a warm start written into its cache (its folder, its lock, the checkpoint) with
    ENOSPC, the first of each site with EIO: train.py says so in one line, the cache holds the whole
    warm start or none, and the warm start made again is the uninterrupted one bit for bit (the
    same weights: the run from it is the training test's)."""
    quick = ["sft_steps=2"]  # its own warm start, in a folder of its own

    def argv(folder):
        return ["--config", TINY, "--set", *settings(folder / "run", folder / "ws", *quick)]

    def warm_start(folder):
        cfg = train.resolve_config(TINY, argv(folder)[3:])
        task, tok = make_task(cfg["task"]), Tokenizer(cfg["tokenizer"])
        model, path = warmstart.warm_start(cfg, task, tok, device="cpu", log=lambda msg: None)
        return model.state_dict(), path

    disk = FailingDisk(tmp_path / "clean" / "ws")
    with disk.installed():
        clean, _ = warm_start(tmp_path / "clean")
    assert set(write_sites(disk.calls)) == {
        "warmstart.py:warm_start",  # the cache's folder
        "runfiles.py:Lock.__init__",  # its lock, taken by warm_start
        "warmstart.py:cached_or_trained",  # the checkpoint
    }
    firsts = {c.site: n for n, c in reversed(list(enumerate(disk.calls, 1)))}
    for err, chosen in [
        (errno.ENOSPC, range(1, len(disk.calls) + 1)),
        (errno.EIO, sorted(firsts.values())),
    ]:
        for n in chosen:
            folder = tmp_path / f"{errno.errorcode[err]}{n}"
            (folder / "run").mkdir(parents=True)  # train.py makes the cache's folder with it
            failing = FailingDisk(folder / "ws", fail_at=n, err=err)
            fails_in_one_line(capsys, lambda folder=folder: train.main(argv(folder)), failing)
            left_whole(failing)
            assert not [p for p in (folder / "ws").glob("*") if p.suffix != ".pt"], n
            weights, path = warm_start(folder)
            assert same_weights(weights, clean) and os.listdir(folder / "ws") == [
                os.path.basename(path)
            ], n
            assert same_weights(load_checkpoint(path)["model"], clean), n
            shutil.rmtree(folder)
