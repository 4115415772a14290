"""One writer per run (runfiles.Lock), between real processes: a second train.py on a running run is
refused at once, naming the first, and the first ends with every log line whole; after a SIGKILL
the same command resumes and says it took over the dead process's lock; a second lab command on one
out_dir is refused, and after a SIGKILL the same command resumes; two processes that need one warm
start train it once, the second waiting for the first and loading what it cached."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from tiny_runs import ROOT, TINY

ENV = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")


def train_py(run, ws, *settings):
    command = [sys.executable, "train.py", "--config", TINY, "--set", f"out_dir={run}"]
    return command + [f"warmstart_dir={ws}", *settings]


def start(command):
    # stdout unread until the end: the first processes run quiet, so no pipe fills up
    return subprocess.Popen(
        command, cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def finish(command, timeout=120):
    return subprocess.run(
        command, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=timeout
    )


def wait_for(ready, proc, timeout=120):
    """Poll until ready() holds while `proc` runs."""
    deadline = time.time() + timeout
    while not ready():
        if proc.poll() is not None:
            pytest.fail(
                f"the first process ended ({proc.returncode}) too soon: {proc.stderr.read()}"
            )
        if time.time() > deadline:
            pytest.fail("the first process never got there")
        time.sleep(0.05)


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
    """The processes a test starts: none outlives it."""
    started = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_second_process_on_a_running_run_is_refused_naming_the_first(
    baseline, tmp_path, processes
):
    """The issue's scenario: the same command again, with and without resume=true, while the run
    trains."""
    run = tmp_path / "run"
    command = train_py(run, baseline["ws"], "steps=200", "ckpt_every=10", "eval_every=0")
    first = start(command + ["quiet=true"])
    processes.append(first)
    wait_for(lambda: (run / "metrics.jsonl").exists(), first)
    seconds = [start(command + more) for more in ([], ["resume=true"])]  # together: it saves time
    processes.extend(seconds)
    for second in seconds:
        out, err = second.communicate(timeout=60)
        assert second.returncode == 2 and err.count("\n") == 1 and not out, out + err
        assert err.startswith(f"error: {run} is in use by pid {first.pid} "), err
        assert err.endswith("wait for it to end, or choose another out_dir\n"), err
    assert first.poll() is None, "the first run ended before the second was refused"
    assert first.wait(timeout=300) == 0, first.stderr.read()
    assert steps_logged_whole(run) == list(range(1, 201))
    assert not (run / ".lock").exists()


def test_after_sigkill_the_same_command_resumes_and_says_it_took_over(
    baseline, tmp_path, processes
):
    run = tmp_path / "run"
    command = train_py(run, baseline["ws"], "steps=40", "ckpt_every=10", "eval_every=0")
    first = start(command + ["quiet=true"])
    processes.append(first)
    wait_for(lambda: (run / "ckpt.pt").exists(), first)
    first.send_signal(signal.SIGKILL)
    assert first.wait() == -signal.SIGKILL
    assert (run / ".lock").exists() and not (run / "final.pt").exists()
    again = finish(command + ["resume=true"])
    assert again.returncode == 0, again.stderr
    took_over = f"took over the lock of pid {first.pid}, which no longer runs"
    assert took_over in again.stdout.splitlines()
    assert took_over in (run / "log.txt").read_text()
    assert steps_logged_whole(run) == list(range(1, 41)) and not (run / ".lock").exists()


def test_a_second_lab_command_on_one_out_dir_is_refused_and_a_killed_one_resumed(
    tmp_path, processes
):
    """The second command is refused while the first trains its run; after kill -9 of the first
    (its worker goes with it) the same command takes over the lock and resumes the run."""
    out = tmp_path / "exp"
    command = [sys.executable, "lab/experiment.py", "--quick", "--tasks", "persona", "--algos"]
    command += ["grpo", "--set", f"out_dir={out}", f"warmstart_dir={tmp_path}/ws", "steps=200"]
    first = start(command)
    processes.append(first)
    ckpt = out / "runs" / "persona-grpo-s0" / "ckpt.pt"
    wait_for(ckpt.exists, first)
    second = finish(command)
    assert second.returncode == 2 and second.stderr.count("\n") == 1, second.stdout + second.stderr
    assert (
        second.stderr.startswith(f"error: {out} is in use by pid {first.pid} ")
        and not second.stdout
    )
    first.send_signal(signal.SIGKILL)
    first.wait()
    third = finish(command, timeout=300)
    assert third.returncode == 0, third.stdout + third.stderr
    assert f"took over the lock of pid {first.pid}, which no longer runs" in third.stdout
    assert "resuming unfinished run" in third.stdout and not (out / ".lock").exists()


def test_two_processes_that_need_one_warm_start_train_it_once(tmp_path, processes):
    """The second starts once the first is training the warm start (600 steps: seconds) and waits
    for it."""
    ws, a, b = tmp_path / "ws", tmp_path / "a", tmp_path / "b"
    settings = ("sft_steps=600", "steps=2", "quiet=true")
    first = start(train_py(a, ws, *settings))
    processes.append(first)
    wait_for(
        lambda: (a / "log.txt").exists() and "warm start 1/" in (a / "log.txt").read_text(), first
    )
    second = finish(train_py(b, ws, *settings))
    assert second.returncode == 0 and first.wait(timeout=120) == 0, second.stderr
    first_log, second_log = (a / "log.txt").read_text(), (b / "log.txt").read_text()
    assert "warm start: trained" in first_log
    assert f"waiting for pid {first.pid} " in second_log and "warm start: trained" not in second_log
    assert "warm start: loaded cached" in second_log
    assert [p.name for p in ws.iterdir()] == [next(ws.glob("*.pt")).name]  # no lock left behind
