"""A full or failing disk at any write, in the manner of SQLite's I/O-error tests (tests/faults.py):
a counting run learns every write call a command makes and where, then each chosen n fails in turn
(ENOSPC, as a full disk; EIO, a failing one, over fewer n). For each n: the command ends with one
line, "error: <the OS's words>: <the file>", and exit status 2; every file that was on disk as the
write failed is byte for byte what it was, no temporary file or lock is left, every jsonl line
parses and every checkpoint loads; and once there is room the same command (with resume=true where
the run's folder holds a run: train.py's own message asks for it) ends with metrics.jsonl and
final.pt byte for byte an uninterrupted run's (metrics.jsonl holds no timing: it is exact).

The write calls (faults.py): open for writing, write, flush, fsync, rename/replace, truncate, mkdir.
The write sites covered, 14 (a site: the project function that asked for the write): a training
run's 8 (runfiles: prepare_out_dir, Lock.__init__, write_config, RunFiles.__init__ (source.json and
the resume's cut of metrics.jsonl), RunFiles._open, .log, .write, .save: the folder, its lock,
config.yaml, source.json, log.txt, metrics.jsonl, timing.jsonl, samples.jsonl, ckpt.pt, final.pt),
the warm start's 2 (warm_start's folder, train_and_cache's checkpoint), figures.run_figure
(run.png), the lab's report.update_record (a result file), tables.write_report (results.json,
summary.md) and plots._save (every figure of the report), and a lab worker's run. Every n of
runfiles.write_file, append_line, update_record and a warm start; of a training run (54 calls), the
first call of each site and file and the last write of ckpt.pt and metrics.jsonl (18 n; EIO: 6);
VPO_EVERY_WRITE=1 tries all 54 with both errors, and runs the lab end to end (two commands).
"""

import errno
import json
import os
import shutil
import subprocess
import sys
import time

import faults
import matplotlib.figure
import pytest
import torch
from faults import FailingDisk, files_under, one_line, write_sites
from tiny_runs import ROOT, TINY, read

import figures
import runfiles
import train
import warmstart
from config import WriteError, make_task
from lab import experiment, report, tables, workers
from lab.workers import Job
from model import Tokenizer
from runfiles import load_checkpoint

# 2 steps, a checkpoint after each (the second replaces the first), the smallest batch
RUN = ["steps=2", "ckpt_every=1", "prompts_per_step=1", "group_size=2"]
RUN += ["algo=grpo", "eval_problems=1", "quiet=true"]
BOARD = os.path.join(ROOT, "tests", "fixtures", "board")  # a committed board's result files
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
        folder.mkdir()
        argv = ["--config", TINY, "--set", *settings(folder / "run", baseline["ws"])]
        disk = FailingDisk(folder, fail_at=n, err=err)
        fails_in_one_line(capsys, lambda argv=argv: train.main(argv), disk)
        assert disk.failed.primitive == calls[n - 1].primitive, (n, disk.failed, calls[n - 1])
        left_whole(disk)
        metrics, final = continued(train.resolve_config(TINY, argv[3:]))
        assert metrics == clean["metrics"], (n, disk.failed)
        assert same_weights(final["model"], clean["final"]["model"]), (n, disk.failed)
        shutil.rmtree(folder)


def test_a_resume_stopped_by_a_full_disk_as_it_cuts_metrics_back_says_so_and_resumes_again(
    baseline, clean, tmp_path, capsys
):
    """The resume's own writes: a run stopped before final.pt resumes on a disk that fails as the
    resume cuts metrics.jsonl back to its checkpoint, and at its first write after that."""
    stopped = tmp_path / "stopped"
    stopped.mkdir()
    argv = ["--config", TINY, "--set", *settings(stopped / "run", baseline["ws"])]
    final_open = max(n for n, c in enumerate(clean["calls"], 1) if c.path.endswith("final.pt"))
    disk = FailingDisk(stopped, fail_at=final_open - 4)  # final.pt's first call
    fails_in_one_line(capsys, lambda: train.main(argv), disk)
    counting = FailingDisk(tmp_path / "count")
    shutil.copytree(stopped, tmp_path / "count")
    with counting.installed():
        train.train(
            train.resolve_config(
                TINY, [*settings(tmp_path / "count" / "run", baseline["ws"], "resume=true")]
            )
        )
    cut = next(n for n, c in enumerate(counting.calls, 1) if c.primitive == "truncate")
    for n in (cut, cut + 1):
        folder = tmp_path / f"resume{n}"
        shutil.copytree(stopped, folder)
        argv = ["--config", TINY, "--set", *settings(folder / "run", baseline["ws"], "resume=true")]
        disk = FailingDisk(folder, fail_at=n)
        fails_in_one_line(capsys, lambda argv=argv: train.main(argv), disk)
        left_whole(disk)
        metrics, final = continued(train.resolve_config(TINY, argv[3:]))
        assert metrics == clean["metrics"], (n, disk.failed)
        assert same_weights(final["model"], clean["final"]["model"]), (n, disk.failed)


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
        "warmstart.py:train_and_cache",  # the checkpoint
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


def failing_calls(disk, command):
    """command() on the failing disk -> the WriteError it raised (a command's main prints it as
    the line fails_in_one_line checks)."""
    with disk.installed(), pytest.raises(WriteError) as stop:
        command()
    assert os.path.realpath(stop.value.filename) == disk.failed.file, (stop.value, disk.failed)
    assert str(stop.value) == f"{WORDS[disk.err]}: {stop.value.filename}"
    return stop.value


def test_every_write_of_a_file_a_line_and_a_result_file_leaves_the_old_or_the_new(tmp_path):
    """runfiles.write_file (every whole file: checkpoints, config.yaml, the figures), append_line
    (every jsonl line and log line) and report.update_record (the lab's result file per task,
    method and seed): every n, ENOSPC and EIO, over an earlier version of the file."""

    def whole_file(folder, old=False):
        runfiles.write_file(str(folder / "f.bin"), b"old" if old else b"new" * 1000)

    def line(folder, old=False):
        file = runfiles.open_lines(str(folder / "m.jsonl"), "w" if old else "a")
        runfiles.append_line(file, json.dumps({"step": 1} if old else {"step": 2, "x": "y" * 99}))
        file.close()

    def record(folder, old=False):
        report.update_record(str(folder), "persona", "grpo", 0, training={"old": old})

    for write in (whole_file, line, record):
        (tmp_path / "clean").mkdir()
        write(tmp_path / "clean", old=True)
        write(tmp_path / "clean")
        clean = files_under(tmp_path / "clean")
        counting = FailingDisk(tmp_path / "count")
        (tmp_path / "count").mkdir()
        write(tmp_path / "count", old=True)
        with counting.installed():
            write(tmp_path / "count")
        assert counting.calls and files_under(tmp_path / "count") == clean
        for err in (errno.ENOSPC, errno.EIO):
            for n in range(1, len(counting.calls) + 1):
                folder = tmp_path / f"{write.__name__}-{errno.errorcode[err]}{n}"
                folder.mkdir()
                write(folder, old=True)
                disk = FailingDisk(folder, fail_at=n, err=err)
                failing_calls(disk, lambda folder=folder, write=write: write(folder))
                left_whole(disk)
                write(folder)
                assert files_under(folder) == clean, (write.__name__, n, disk.failed)
        shutil.rmtree(tmp_path / "clean")
        shutil.rmtree(tmp_path / "count")


def test_run_png_fails_in_one_line_and_keeps_the_earlier_picture(tmp_path, monkeypatch):
    """figures.run_figure, train.py's run.png, on a full disk as it replaces an earlier one (drawn
    without rendering: its writes are write_file's, every n of which the test above fails)."""
    quick_figures(monkeypatch)
    rows = [("this run", {"ks": [1, 2], "best_at_k": [0.1, 0.2]})]
    rows[0][1]["heldout_weight_best_at_k"] = [0.1, 0.15]
    logged = [{"kind": "train", "step": 1, "reward_scalar": 0.1, "set_score": 0.2}]
    cfg = {"task": "persona", "algo": "grpo", "seed": 0}
    path = str(tmp_path / "run.png")
    runfiles.write_file(path, b"an earlier picture")
    counting = FailingDisk(tmp_path)
    with counting.installed():
        figures.run_figure(path, cfg, logged, rows)
    runfiles.write_file(path, b"an earlier picture")
    disk = FailingDisk(tmp_path, fail_at=len(counting.calls))  # the rename over the earlier one
    failing_calls(disk, lambda: figures.run_figure(path, cfg, logged, rows))
    assert disk.failed.site == "figures.py:run_figure"
    left_whole(disk)


def quick_figures(monkeypatch):
    """matplotlib without its rendering (seconds a figure on a busy 2-core VM): a figure's bytes are
    its axes' titles, written through the same save_figure and write_file calls."""

    def savefig(fig, file, **options):
        file.write(repr([ax.get_title() for ax in fig.axes]).encode())

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", savefig)
    monkeypatch.setattr(matplotlib.figure.Figure, "tight_layout", lambda fig, **options: None)


def test_the_lab_report_is_old_or_new_at_each_write_site(tmp_path, monkeypatch):
    """tables.write_report over an earlier report (results.json, summary.md, the figures) fails at
    the first write of each file and at its last write (ENOSPC; EIO at each site's first): the error
    names the file, every file is the earlier or the new one whole, and written again the
    report is the uninterrupted one byte for byte (its figures drawn without rendering)."""
    quick_figures(monkeypatch)
    records = [r for r in report.load_records([BOARD]) if r["task"] == "persona"]
    samples = tables.figure_samples(records)
    new = report.merge(records, experiment.TASKS)
    old = report.merge([r for r in records if r["method"] != "vpo"], experiment.TASKS)

    def write(folder, results):
        tables.write_report(str(folder), results, samples)

    write(tmp_path / "old", old)
    shutil.copytree(tmp_path / "old", tmp_path / "count")
    counting = FailingDisk(tmp_path / "count")
    with counting.installed():
        write(tmp_path / "count", new)
    clean = files_under(tmp_path / "count")
    calls = counting.calls
    sites = write_sites(calls)
    assert set(sites) == {"lab/tables.py:write_report", "lab/plots.py:_save"}, sites
    firsts, site_firsts = {}, {}
    for n, c in enumerate(calls, 1):
        firsts.setdefault((c.site, os.path.basename(c.path)), n)
        site_firsts.setdefault(c.site, n)
    for err, chosen in [
        (errno.ENOSPC, sorted({*firsts.values(), len(calls)})),
        (errno.EIO, sorted(site_firsts.values())),
    ]:
        for n in chosen:
            folder = tmp_path / f"{errno.errorcode[err]}{n}"
            shutil.copytree(tmp_path / "old", folder)
            disk = FailingDisk(folder, fail_at=n, err=err)
            failing_calls(disk, lambda folder=folder: write(folder, new))
            left_whole(disk)
            write(folder, new)
            assert files_under(folder) == clean, (n, disk.failed)


class Quiet:
    """lab.workers.Progress's calls, saying nothing."""

    def finish(self, *args):
        pass

    def tick(self, *args):
        pass


def test_a_worker_whose_disk_fills_stops_the_others_and_what_finished_is_stored(tmp_path):
    """lab.workers.run_jobs on two spawned workers: one job returns, the next finds the disk full
    two seconds in while a third (a minute's sleep) runs on the other worker. The WriteError comes
    back with its file, the finished job's result was handed on (stored, in the lab), and the
    running job is stopped at once rather than waited for."""
    handed_on = []
    ready = [
        Job("pools", ("persona", "grpo", 0), faults.job_returns, ("grpo",), handed_on.append),
        Job("pools", ("persona", "vpo", 0), faults.job_on_full_disk, (str(tmp_path), 2.0), None),
        Job("pools", ("persona", "dapo", 0), time.sleep, (60,), handed_on.append),
    ]
    t0 = time.time()
    with pytest.raises(WriteError) as stop:
        workers.run_jobs(ready, 2, Quiet())
    assert str(stop.value) == f"no space left on device: {tmp_path / 'result.json'}"
    assert handed_on == ["grpo"] and time.time() - t0 < 40
    assert os.listdir(tmp_path) == []


def test_the_lab_command_says_a_full_disk_in_one_line(monkeypatch, capsys):
    def full(*args, **kwargs):
        raise WriteError(errno.ENOSPC, "No space left on device", "out/quick/results/x.json")

    monkeypatch.setattr(experiment, "run_headline", full)
    with pytest.raises(SystemExit) as stop:
        experiment.main(["--quick", "--tasks", "persona"])
    line, alone = one_line(capsys.readouterr().err)
    assert stop.value.code == 2 and alone
    assert line == "error: no space left on device: out/quick/results/x.json"


LONG = os.environ.get("VPO_EVERY_WRITE") != "1"


@pytest.mark.skipif(
    LONG, reason="two lab commands, ~2 min each on a busy 2-core VM: VPO_EVERY_WRITE=1"
)
def test_a_lab_worker_whose_disk_fills_stops_the_command_in_one_line_and_it_goes_on(tmp_path):
    """python lab/experiment.py with two workers: the one training VPO finds the disk full as it
    writes final.pt (tests/fixtures/full_disk/sitecustomize.py fails that write in every process).
    The command stops with that one line and exit 2, what finished is stored, and the same command,
    once there is room, resumes VPO from its checkpoint and finishes."""
    out = tmp_path / "lab"
    command = [sys.executable, os.path.join(ROOT, "lab", "experiment.py"), "--quick"]
    command += ["--tasks", "persona", "--algos", "grpo", "vpo", "--workers", "2", "--set"]
    command += [f"out_dir={out}", f"warmstart_dir={tmp_path / 'ws'}", "steps=2", "eval_every=0"]
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
    env["PYTHONPATH"] = os.path.join(ROOT, "tests", "fixtures", "full_disk")
    vpo = out / "runs" / "persona-vpo-s0"
    env["VPO_FULL_DISK"] = f"{out}:{os.path.join('runs', 'persona-vpo-s0', 'final.pt')}"
    full = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    line, alone = one_line(full.stderr)
    assert full.returncode == 2 and alone, full.stdout + full.stderr
    assert line == f"error: no space left on device: {vpo / 'final.pt'}"
    assert (vpo / "ckpt.pt").exists() and not (vpo / "final.pt").exists()
    for path in out.rglob("*"):
        assert not path.name.endswith(".tmp"), path
        if path.suffix == ".jsonl":
            [json.loads(line) for line in path.read_text().splitlines()]
        if path.suffix == ".json":
            json.loads(path.read_text())
    stored = {p.name for p in (out / "results").glob("*.json")}
    finished = [p.parent.name for p in (out / "runs").glob("*/final.pt")]

    del env["VPO_FULL_DISK"]
    again = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"resuming unfinished run {vpo}" in again.stdout
    for name in finished:  # a run that finished before the disk filled is not trained again
        assert f"reusing finished run {out / 'runs' / name}" in again.stdout
    steps = [json.loads(line)["step"] for line in (vpo / "metrics.jsonl").read_text().splitlines()]
    assert steps == [0, 1, 2, 2]  # each step once: eval 0, train 1 and 2, the final eval
    assert stored <= {p.name for p in (out / "results").glob("*.json")}
    assert (out / "results" / "persona-vpo-s0.json").exists() and (out / "summary.md").exists()
