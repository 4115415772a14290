"""One writer per run (runfiles.Lock), between real processes: a second train.py on a running run is
refused at once, naming the first, and the first ends with every log line whole; a second lab
command on one out_dir is refused, and after a SIGKILL the same command resumes; two processes that
need one warm start train it once, the second waiting for the first and loading what it cached.
(After a SIGKILL of train.py the same command resumes and says it took over the dead process's
lock: tests/test_reproduce.py's test_sigkill_mid_run_and_during_warm_start_then_resume, whose
killed run this would repeat.)

Where a first process must still be running while a second acts, the test stops it (SIGSTOP to its
process group, a lab command's workers included) and lets it go on (SIGCONT) once the second is
done: short runs suffice, whatever the machine's speed. The first is always a process of its own
(it holds the lock, is stopped, killed); the other side (the command refused, the one that waits,
the one that takes over) runs in the test's own process, another pid than the first, without an
interpreter start (seconds of CPU each)."""

import fcntl
import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest
from tiny_runs import ROOT, TINY

import train as trainer
from lab import experiment

ENV = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")


def train_py(run, ws, *settings):
    command = [sys.executable, "train.py", "--config", TINY, "--set", f"out_dir={run}"]
    return command + [f"warmstart_dir={ws}", *settings]


def start(command):
    # stdout unread until the end: the first processes run quiet, so no pipe fills up. A process
    # group of its own, which pause() and go_on() signal whole
    return subprocess.Popen(
        command,
        cwd=ROOT,
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def pause(proc):
    """Stop the process and its children: it holds its locks, and stays mid-run, until go_on()."""
    os.killpg(proc.pid, signal.SIGSTOP)


def go_on(proc):
    os.killpg(proc.pid, signal.SIGCONT)


def finish(command, timeout=120):
    return subprocess.run(
        command, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=timeout
    )


def wait_for(ready, proc, timeout=120):
    """Poll until ready() holds while `proc` runs."""
    deadline = time.time() + timeout
    while not ready():
        if proc.poll() is not None:
            pytest.fail(f"the process ended ({proc.returncode}) too soon: {proc.stderr.read()}")
        if time.time() > deadline:
            pytest.fail("the process never got there")
        time.sleep(0.01)


def text_of(path):
    return path.read_text() if path.exists() else ""


def let_go(lock_file):
    """Whether no process holds `lock_file`'s flock (tried, and let go at once if taken)."""
    with open(lock_file) as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(f, fcntl.LOCK_UN)
        return True


def steps_logged_whole(run):
    """Every line of the run's jsonl files parses -> the training steps metrics.jsonl logged, in
    order (a resume cuts metrics.jsonl back to its checkpoint; timing.jsonl, wall-clock only, keeps
    a killed process's last lines, so a kill just after a step's timing line would count it
    twice)."""
    for name in ("metrics.jsonl", "samples.jsonl", "timing.jsonl"):
        for line in (run / name).read_text().splitlines():
            json.loads(line)
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return [r["step"] for r in records if r["kind"] == "train"]


@pytest.fixture
def processes():
    """The processes a test starts: none outlives it, nor do their children (a lab command's
    workers), stopped or not."""
    started = []
    yield started
    for proc in started:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_a_second_process_on_a_running_run_is_refused_naming_the_first(
    baseline, tmp_path, processes, capsys
):
    """The issue's scenario: the same command again, with and without resume=true, while the run
    trains (stopped once it has logged a step, so that it is mid-run while the seconds act); then
    the first goes on and ends with every step logged whole. The seconds run train.py's main in the
    test's own process: exit status 2 and one line on stderr, as the command's."""
    run = tmp_path / "run"
    command = train_py(run, baseline["ws"], "steps=20", "ckpt_every=5", "eval_every=0")
    first = start(command + ["quiet=true"])
    processes.append(first)
    wait_for(lambda: '"kind": "train"' in text_of(run / "metrics.jsonl"), first)
    pause(first)
    assert not (run / "final.pt").exists(), "the first run finished before it was stopped"
    capsys.readouterr()
    for more in ([], ["resume=true"]):
        with pytest.raises(SystemExit) as exit_:
            trainer.main(command[2:] + more)  # the command without `python`: train.py's main
        out, err = capsys.readouterr()
        assert exit_.value.code == 2 and err.count("\n") == 1 and not out, out + err
        assert err.startswith(f"error: {run} is in use by pid {first.pid} "), err
        assert err.endswith("wait for it to end, or choose another out_dir\n"), err
    assert first.poll() is None, "the first run ended before the second was refused"
    go_on(first)
    assert first.wait(timeout=300) == 0, first.stderr.read()
    assert steps_logged_whole(run) == list(range(1, 21))
    assert not (run / ".lock").exists()


def test_a_second_lab_command_on_one_out_dir_is_refused_and_a_killed_one_resumed(
    tmp_path, processes, capsys
):
    """The second command is refused while the first trains its run (stopped, its worker with it,
    once the run has a checkpoint); after kill -9 of the first its worker goes with it (the run's
    lock is let go) and the same command takes over the lock and resumes the run. The second and
    the resuming command run the lab's main in the test's own process, the resume with --workers 0
    (its jobs in that process: the pool is the first command's, whose worker the kill must take
    with it). The warm start comes from the repository's cache (out/warmstart), which the lab and
    train.py share."""
    out = tmp_path / "exp"
    command = [sys.executable, "lab/experiment.py", "--quick", "--tasks", "persona", "--algos"]
    # one worker process (each start costs seconds of CPU): the one the kill must take with it
    # 20 steps: the 18 left after the first checkpoint outlast the second the killed command's
    # worker takes to notice and end (with 4 left, it could finish the run)
    command += ["grpo", "--workers", "1", "--set", f"out_dir={out}", "steps=20"]
    first = start(command)
    processes.append(first)
    run = out / "runs" / "persona-grpo-s0"
    wait_for((run / "ckpt.pt").exists, first)
    pause(first)
    assert not (run / "final.pt").exists(), "the run finished before it was stopped"
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:
        experiment.main(command[2:])  # the command without `python`: the lab's main
    said, err = capsys.readouterr()
    assert exit_.value.code == 2 and err.count("\n") == 1, said + err
    assert err.startswith(f"error: {out} is in use by pid {first.pid} ") and not said
    first.send_signal(signal.SIGKILL)
    first.wait()
    go_on(first)  # the worker, stopped, sees its command gone only once it runs
    deadline = time.time() + 60
    while not let_go(run / ".lock"):
        assert time.time() < deadline, "the worker outlived its killed lab command"
        time.sleep(0.05)
    at = command.index("--workers")
    experiment.main(command[2:at] + ["--workers", "0"] + command[at + 2 :])
    said = capsys.readouterr().out
    assert f"took over the lock of pid {first.pid}, which no longer runs" in said
    assert "resuming unfinished run" in said and not (out / ".lock").exists()
    assert steps_logged_whole(run) == list(range(1, 21))


def test_two_processes_that_need_one_warm_start_train_it_once(tmp_path, processes):
    """The first is stopped while it trains the warm start (after its first step); the second (the
    test's own process) starts then, and waits for it until the first goes on (a thread of the
    test's lets it go on once the second has said that it waits)."""
    ws, a, b = tmp_path / "ws", tmp_path / "a", tmp_path / "b"
    settings = ("steps=2", "quiet=true")
    first = start(train_py(a, ws, *settings))
    processes.append(first)
    wait_for(lambda: "warm start 1/" in text_of(a / "log.txt"), first)
    pause(first)
    assert not list(ws.glob("*.pt")), "the first cached its warm start before it was stopped"

    second_done = threading.Event()

    def go_on_once_the_second_waits():
        # a second that never says it waits fails below, on its log
        while f"waiting for pid {first.pid} " not in text_of(b / "log.txt"):
            if second_done.wait(0.01):
                break
        go_on(first)

    watcher = threading.Thread(target=go_on_once_the_second_waits, daemon=True)
    watcher.start()
    try:
        trainer.main(train_py(b, ws, *settings)[2:])  # the command without `python`
    finally:
        second_done.set()
        watcher.join()
    assert first.wait(timeout=120) == 0, first.stderr.read()
    first_log, second_log = (a / "log.txt").read_text(), (b / "log.txt").read_text()
    assert "warm start: trained" in first_log
    assert f"waiting for pid {first.pid} " in second_log and "warm start: trained" not in second_log
    assert "warm start: loaded cached" in second_log
    assert [p.name for p in ws.iterdir()] == [next(ws.glob("*.pt")).name]  # no lock left behind
