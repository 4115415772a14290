"""What the local pool promises after an interruption, checked on Ray: a --ray command (a local
cluster started for it) stopped mid-run by Ctrl-C to the driver, by Ctrl-C to its whole process
group (as a terminal sends it) and by kill -9 of the driver; then the same command. Each case prints
the first command's exit status and last line, whether any of its processes are left, and whether
the same command resumed the run with every step logged once. ~10 min on the 2-core VM.

    python tools/ray_interrupts.py

Deliberately left out: a cluster given by ADDRESS (the same code path after connect), several
machines.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STEPS = 150  # a run long enough to interrupt after its first checkpoint (a checkpoint every 2)


def command(out):
    return [sys.executable, "lab/experiment.py", "--quick", "--tasks", "code", "--algos", "vpo"] + [
        "--ray",
        "--set",
        f"out_dir={out}",
        f"steps={STEPS}",
        "ckpt_every=2",
        "eval_every=0",
    ]


def check(case):
    out = f"out/ray_interrupts/{case}"
    shutil.rmtree(os.path.join(ROOT, out), ignore_errors=True)
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
    run = os.path.join(ROOT, out, "runs", "code-vpo-s0")
    proc = subprocess.Popen(
        command(out),
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group, as at a terminal
        # Ctrl-C's default action even when started from a background job
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    while not os.path.exists(os.path.join(run, "ckpt.pt")) and proc.poll() is None:
        time.sleep(0.05)
    sent = time.time()
    if case == "ctrl_c_group":
        os.killpg(proc.pid, signal.SIGINT)
    else:
        proc.send_signal(signal.SIGKILL if case == "kill_9" else signal.SIGINT)
    text = proc.communicate(timeout=120)[0]
    last = [line for line in text.splitlines() if line.strip()][-1]
    print(f"{case}: exit {proc.returncode} {time.time() - sent:.1f} s after the signal: {last}")
    time.sleep(5)
    left = subprocess.run(["pgrep", "-s", str(proc.pid)], capture_output=True, text=True)
    print(f"  its processes left 5 s later: {len(left.stdout.split())}")
    again = subprocess.run(command(out), cwd=ROOT, env=env, capture_output=True, text=True)
    with open(os.path.join(run, "metrics.jsonl")) as f:
        steps = [json.loads(line)["step"] for line in f if '"train"' in line]
    with open(os.path.join(run, "log.txt")) as f:
        resumed = "resumed from step" in f.read()
    print(
        f"  the same command: exit {again.returncode}, resumed the run: {resumed}, every step "
        f"logged once: {steps == list(range(1, STEPS + 1))}"
    )


if __name__ == "__main__":
    for case in ("ctrl_c_driver", "ctrl_c_group", "kill_9"):
        check(case)
