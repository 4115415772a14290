"""How long does the test suite take on this machine, and what would that be on the 2-core VM the
lab's times were measured on? Runs the README's test command once, with the machine's yardstick
(lab/workers.forward_seconds: one forward of the cpu preset on one thread) measured just before and
just after, and prints the wall time, the CPU the command and its children used, the CPU the whole
machine used meanwhile (Ray's daemons are nobody's children: only /proc/stat sees them) and the
wall time scaled to that VM (REFERENCE_FORWARD_S) by the faster of the two yardsticks. A benchmark,
not a test: nothing here asserts a time. CPU VMs differ up to 2.5x in speed, so compare the scaled
time, or run two commits' suites one after the other on one machine.

    python tools/suite_time.py                       # the README's command, as CI runs it
    python tools/suite_time.py --json out/suite.json -- tests/test_grpo.py   # arguments for pytest

Deliberately left out: per-test times (pytest's --durations gives them) and anything but Linux's
/proc/stat for the machine's CPU (elsewhere that line is left out).
"""

import argparse
import json
import os
import resource
import shlex
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # the reference, then the lab package

from lab.workers import REFERENCE_FORWARD_S, forward_seconds  # noqa: E402


def readme_test_command(readme):
    """The README's test command: from `python -m pytest` on its first line that runs it, without
    the comment (the quick start's line installs the test packages first)."""
    for line in readme.splitlines():
        if "python -m pytest" in line:
            return shlex.split(line[line.index("python -m pytest") :].split("#")[0])
    raise ValueError("the README names no `python -m pytest` command")


def machine_busy_seconds():
    """CPU seconds the whole machine has spent busy since boot (user, nice, system, irq, softirq;
    not the time the hypervisor stole), or None where there is no /proc/stat."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except OSError:
        return None
    busy = fields[0] + fields[1] + fields[2] + fields[5] + fields[6]
    return busy / os.sysconf("SC_CLK_TCK")


def yardstick(repeats=3):
    """The median of `repeats` measurements of forward_seconds, half a second each."""
    return statistics.median(forward_seconds(0.5) for _ in range(repeats))


def scaled_to_reference(wall_s, forward_s):
    """Seconds on the reference VM, if the suite slows with the machine as the forward does."""
    return wall_s * REFERENCE_FORWARD_S / forward_s


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--json", metavar="FILE", help="also write the measurements to FILE")
    p.add_argument("pytest_args", nargs="*", help="after --: arguments that replace the README's")
    args = p.parse_args(argv)
    if args.pytest_args:
        pytest_args = args.pytest_args
    else:
        with open(os.path.join(ROOT, "README.md")) as f:
            pytest_args = readme_test_command(f.read())[3:]  # after `python -m pytest`
    command = [sys.executable, "-m", "pytest", *pytest_args]  # the python running this script
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")  # as .ci/run sets it
    before = yardstick()
    busy0 = machine_busy_seconds()
    children0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.time()
    returncode = subprocess.run(command, cwd=ROOT, env=env).returncode
    wall = time.time() - t0
    children, busy1 = resource.getrusage(resource.RUSAGE_CHILDREN), machine_busy_seconds()
    after = yardstick()
    cpu = (children.ru_utime - children0.ru_utime) + (children.ru_stime - children0.ru_stime)
    forward = min(before, after)  # the machine at its faster: the scaled time errs long
    result = {
        "command": shlex.join(command[1:]),
        "returncode": returncode,
        "wall_s": round(wall, 1),
        "cpu_s": round(cpu, 1),
        "machine_busy_s": None if busy0 is None else round(busy1 - busy0, 1),
        "cpus": os.cpu_count(),
        "forward_ms_before_after": [round(1000 * before, 1), round(1000 * after, 1)],
        "reference_forward_ms": 1000 * REFERENCE_FORWARD_S,
        "wall_s_scaled_to_reference": round(scaled_to_reference(wall, forward), 1),
    }
    for key, value in result.items():
        print(f"{key}: {value}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return returncode


if __name__ == "__main__":
    sys.exit(main())
