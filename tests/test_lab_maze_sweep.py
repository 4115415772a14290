"""lab/maze_sweep.py on a --quick maze experiment, smaller still (two RL steps, pools on two
mazes) and run in this process without its own report and figures, which the sweep does not read:
the sweep's tables name every method with its seeds and paired intervals, and the figures are
written. Leaves out the real sweep (docs/RESULTS.md has it)."""

import os
import sys

import pytest

from lab import experiment

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.append(
    os.path.join(ROOT, "lab")
)  # after the root: lab/exploration.py is not exploration.py


def test_the_sweep_reads_an_experiments_result_files(tmp_path, monkeypatch):
    import maze_sweep

    monkeypatch.setattr(experiment.tables, "write_report", lambda *args, **kwargs: [])
    monkeypatch.setattr(experiment.tables, "summary_markdown", lambda results: "")
    out_dir = tmp_path / "maze_kl0.001"
    smaller = ["steps=2", "pool_problems=2", "eval_problems=1"]
    smaller += [f"warmstart_dir={tmp_path / 'warmstart'}"]  # not the repository's out/
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(ROOT)  # where the experiment command runs: configs/ and bases/ are relative
        experiment.main(
            [
                "--quick",
                "--tasks",
                "maze",
                "--seeds",
                "0",
                "--algos",
                "grpo",
                "vpo",
                "--workers",
                "0",
            ]
            + ["--set", f"out_dir={out_dir}", *smaller]
        )
    rows = maze_sweep.load([str(out_dir)])
    assert {m for _, m, _ in rows} >= {"grpo", "vpo", "warm_start", "optimum"}
    figures = tmp_path / "figures"
    maze_sweep.main([str(out_dir), "--out", str(figures), "--root", ROOT])
    tables = (figures / "tables.md").read_text()
    assert "| 0.001 | VPO | 1 |" in tables and "VPO - GRPO: best@30" in tables
    assert "pools at T=0.7" in tables
    for name in ("kl.png", "routes.png"):
        assert os.path.getsize(figures / name) > 10_000


def test_the_warm_start_asked_for_m_answers_is_named_and_ordered_by_its_m():
    import maze_sweep

    from lab.report import warm_start_row

    assert maze_sweep.name_of(warm_start_row(3)) == "base, 3 answers"
    assert maze_sweep.name_of(warm_start_row(5)) == "base, 5 answers"
    assert maze_sweep.name_of("warm_start") == "base" and maze_sweep.name_of("vpo") == "VPO"
    present = {"vpo", warm_start_row(5), "optimum", "warm_start", warm_start_row(3), "rloo"}
    order = ["warm_start", "warm_start_m3", "warm_start_m5", "vpo", "optimum"]
    assert maze_sweep.table_order(present) == order
