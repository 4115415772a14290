"""lab/exploration.py: the sampling curve and the transfer summary by hand, and the whole command on
a --quick run made smaller still (the code task: a tiny warm start shared by the file's commands,
two steps per method, held-out pools on two problems, and no report of lab/experiment.py's own,
which exploration.md does not read)."""

import json
import math
import os
import random

import pytest
import torch

from config import ConfigError
from lab import experiment, exploration


def test_sampling_curve_by_hand():
    per_problem = [
        {"outcomes": ["a", "a", "b", "c"], "solved": [False, False, True, False]},
        {"outcomes": ["x", "y", "y", "y"], "solved": [False, False, False, False]},
    ]
    curve = exploration.sampling_curve(per_problem, [1, 2, 3, 4])
    assert curve["solved_share"] == [0.0, 0.0, 0.5, 0.5]
    assert curve["distinct"] == [1.0, 1.5, 2.0, 2.5]
    # the problems not solved within k: both up to 2, then only the second
    assert curve["distinct_unsolved"] == [1.0, 1.5, 2.0, 2.0]


def test_transfer_summary_by_hand():
    per_problem = [
        {"outcomes": ["a", "a", "b"], "solved": [True, True, False], "entropy": [0.1, 0.3, 1.0]},
        {"outcomes": ["x", "x", "x"], "solved": [False, False, False], "entropy": [0.5, None, 0.5]},
    ]
    got = exploration.transfer_summary(per_problem)
    assert got["distinct"] == [2, 1]
    assert math.isclose(got["entropy"]["correct"], 0.2)
    assert math.isclose(got["entropy"]["incorrect"], (1.0 + 0.5 + 0.5) / 3)
    assert got["answers"] == {"correct": 2, "incorrect": 3}


@pytest.fixture(scope="module")
def smaller(tmp_path_factory):
    """--set's for every command here: the sizes, and one warm-start cache."""
    warm_starts = tmp_path_factory.mktemp("warmstart")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(experiment.tables, "write_report", lambda *args, **kwargs: [])
        patch.setattr(experiment.tables, "summary_markdown", lambda results: "")
        yield ["steps=2", "sft_steps=10", "pool_problems=2", "eval_problems=1"] + [
            f"warmstart_dir={warm_starts}"
        ]


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory, smaller):
    """One quick experiment on code, every method, shared by the tests below."""
    out = tmp_path_factory.mktemp("quick") / "exploration"
    # every job in this process: a worker's start costs seconds of CPU
    argv = ["--quick", "--seeds", "0", "--tasks", "code", "--workers", "0", "--out", str(out)]
    exploration.main(argv + ["--set", *smaller])
    return out


def test_quick_run_writes_every_measurement_and_the_report(quick_run):
    out = quick_run
    for method in [*exploration.STARTS, *exploration.METHODS]:
        with open(out / "exploration" / f"code-{method}-s0.json") as f:
            measured = json.load(f)
        assert len(measured["problems"]) == exploration.QUICK_SIZES["train_problems"]
    start = json.loads((out / "exploration" / "code-start-s0.json").read_text())
    share = start["curve"]["solved_share"]
    assert share == sorted(share)  # solved at least once never goes back
    sets = json.loads((out / "exploration" / "code-start_sets-s0.json").read_text())
    assert start["answers_a_call"] == 1 and sets["answers_a_call"] > 1
    report = (out / "exploration.md").read_text()
    assert "RL as a sampling process" in report and "the transfer" in report
    measured = [label for label, method, _ in exploration.ROWS if method in exploration.METHODS]
    assert all(f"| {label} |" in report for label in measured)
    # the open choices run only when named: no row of theirs in the default run's report
    assert not any(f"| {name} |" in report for name in exploration.OPEN_CHOICES)
    assert "#### code: VPO - grpo_x3, the same answers per training problem" in report
    assert (out / "exploration.png").stat().st_size > 0


def test_methods_trains_and_measures_only_those_beside_another_folder(quick_run, smaller, tmp_path):
    """--methods trains and measures only those; --against lends the other folder's starting
    point (measured there, not again here) and its other methods, marked as its own."""
    out = tmp_path / "subset"
    argv = ["--quick", "--seeds", "0", "--tasks", "code", "--workers", "0", "--out", str(out)]
    argv += ["--methods", "ucb_con", "--set", "explore_coef=1.0", *smaller]
    argv += ["--against", str(quick_run)]
    exploration.main(argv)
    measured = sorted(p.name for p in (out / "exploration").glob("*.json"))
    assert measured == ["code-ucb_con-s0.json"]
    assert sorted(p.name for p in (out / "runs").iterdir()) == ["code-ucb_con-s0"]
    report = (out / "exploration.md").read_text()
    assert "| ucb_con |" in report and "| grpo |" not in report
    assert f"| grpo ({quick_run}'s) |" in report and f"| vpo ({quick_run}'s) |" in report


def test_pooled_interval_weighs_every_problem_the_same():
    """Seeds with different numbers of problems: the centre is the mean over all problems; equal
    differences give a point; the interval holds the centre."""
    assert exploration.pooled_interval([[]]) is None
    assert exploration.pooled_interval([[2.0, 2.0], [2.0]]) == (2.0, 2.0, 2.0)
    mean, low, high = exploration.pooled_interval([[1.0, 1.0], [3.0]])
    assert mean == pytest.approx(5 / 3) and 1.0 <= low <= mean <= high <= 3.0


def test_the_open_choices_are_ucb_con_with_one_setting_changed(tmp_path):
    plain = experiment.run_config("code", "ucb_con", 0, str(tmp_path))
    for name, key, value in (
        ("ucb_con_before", "explore_bonus_at", "before"),
        ("ucb_con_current", "explore_count_current", True),
    ):
        cfg = experiment.run_config("code", name, 0, str(tmp_path))
        assert {k for k in cfg if cfg[k] != plain[k]} == {key, "out_dir"} and cfg[key] == value
        assert cfg["out_dir"].endswith(f"code-{name}-s0") and cfg["algo"] == "ucb_con"
    # measured beside the seven when named, never a board row
    assert not set(experiment.OPEN_CHOICES) & set(experiment.ABLATIONS)
    assert set(experiment.OPEN_CHOICES) == set(exploration.OPEN_CHOICES)


def test_a_screened_sets_problems_are_read_from_the_runs_checkpoint(tmp_path):
    settings = {"train_problems": 3, "train_screen_answers": 2}
    cfg = experiment.run_config("code", "grpo", 0, str(tmp_path), overrides=settings)
    os.makedirs(cfg["out_dir"])
    torch.save({"train_set": {"positions": [4, 1, 70]}}, os.path.join(cfg["out_dir"], "final.pt"))
    task, problems = exploration.training_problems(cfg)
    drawn = exploration.candidates(task, random.Random(0), 71)
    assert problems == [drawn[4], drawn[1], drawn[70]]


def test_a_run_is_compared_only_with_a_start_of_its_own_problems():
    start = {"problems": ["p", "q"]}
    found = {("code", "vpo", 0): {"problems": ["p", "q"]}, ("code", "start", 0): start}
    assert exploration.measured_pairs(found, "code", "vpo", [0, 1]) == [
        (found["code", "vpo", 0], start)
    ]
    # e.g. a screened set lent by --against from another screen
    found["code", "vpo", 1] = {"problems": ["p", "r"]}
    found["code", "start", 1] = start
    with pytest.raises(ConfigError, match="seed 1: .*different training problems"):
        exploration.measured_pairs(found, "code", "vpo", [0, 1])


def test_the_open_choices_table_is_each_choice_minus_ucb_con_by_hand():
    def measured(solved, distinct, end):
        return {
            "problems": ["p", "q", "r"],
            "solved": solved,
            "distinct": distinct,
            "transfer": {"distinct": end},
        }

    found = {}
    for seed in (0, 1):
        found["code", "start", seed] = {
            "problems": ["p", "q", "r"],
            "transfer": {"distinct": [4, 4, 4]},
        }
        found["code", "ucb_con", seed] = measured([1, 0, 0], [3, 3, 3], [2, 3, 3])
        found["code", "ucb_con_before", seed] = measured([1, 0, 1], [5, 5, 5], [2, 6, 5])
    lines = exploration.open_choices_table(found, "code", [0, 1])
    row = lines[-2].split(" | ")
    assert row[0] == "| ucb_con_before" and len(lines) == 6  # ucb_con_current not measured: no row
    assert row[1].startswith("+0.333") and row[2] == "+2.000 [+2.000, +2.000]"
    # the transfer on q, the one problem neither solved: (6 - 4) - (3 - 4)
    assert row[3] == "+3.000 [+3.000, +3.000]"
    assert row[4] == "-" and row[5] == "- |"  # no result files given: no held-out cells
    assert exploration.open_choices_table({}, "code", [0, 1]) == []


def test_settings_are_checked_over_the_sizes_this_lab_gives_every_run():
    """train_screen_answers needs a finite set: lab/exploration's sizes give one, --set need not."""
    items = ["outcome_reward=true", "format_coef=0", "train_screen_answers=8"]
    with pytest.raises(ConfigError, match="screens a finite training set"):
        experiment.checked_overrides(items, ["code"], ["grpo"])
    sizes = {"code": exploration.overrides("code", quick=False)}
    got = experiment.checked_overrides(items, ["code"], ["grpo", "ucb_con"], per_task=sizes)
    assert got == {"outcome_reward": True, "format_coef": 0, "train_screen_answers": 8}
