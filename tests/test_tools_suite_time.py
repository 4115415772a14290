"""tools/suite_time.py: the command it times is the one the README prints and CI runs."""

import os

from tools import suite_time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_the_timed_command_is_the_readmes_and_ci_runs_the_same():
    with open(os.path.join(ROOT, "README.md")) as f:
        command = suite_time.readme_test_command(f.read())
    assert command[:3] == ["python", "-m", "pytest"] and "#" not in command
    with open(os.path.join(ROOT, ".ci", "run")) as f:
        ci = [line.split("#")[0].split() for line in f if "-m pytest" in line]
    assert ci == [["python3", *command[1:]]]


def test_the_scaled_time_is_the_wall_time_at_the_reference_forward():
    reference = suite_time.REFERENCE_FORWARD_S
    assert suite_time.scaled_to_reference(300.0, 2 * reference) == 150.0
    assert suite_time.scaled_to_reference(300.0, reference) == 300.0
