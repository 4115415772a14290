"""lab/one_file_seeds.py: each predict-then-run experiment changes exactly one line of
grpo_vs_vpo.py into code that still parses, the tables pair seeds and problems as they should (on
made-up runs, in milliseconds), and in a student tree (tools/make_student.py) the command trains
that tree's own file, at a tiny size. Leaves out the full runs (docs/RESULTS.md has them); a file of
its own so that the test runner gives it another worker than tests/test_tools_make_student.py."""

import ast
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.append(
    os.path.join(ROOT, "lab")
)  # after the root: lab/exploration.py is not exploration.py

import one_file_seeds  # noqa: E402


@pytest.mark.parametrize("name", list(one_file_seeds.EXPERIMENTS))
def test_an_experiment_changes_one_line_of_the_file(name):
    with open(one_file_seeds.ONE_FILE) as f:
        before = f.read().splitlines()
    after = one_file_seeds.changed_source(name).splitlines()
    assert len(after) == len(before)
    assert sum(a != b for a, b in zip(before, after)) == 1
    ast.parse("\n".join(after))


def made_up_runs(vpo_gain):
    """Three seeds of 5 problems: VPO = GRPO + vpo_gain on w-best@30 everywhere."""
    runs = {}
    for seed in one_file_seeds.SEEDS:
        row = {"best@1": [0.5] * 5, "w-best@30": [0.7 + 0.01 * i for i in range(5)]}
        vpo = {"best@1": [0.4] * 5, "w-best@30": [x + vpo_gain for x in row["w-best@30"]]}
        models = {"warm start": row, "warm start m=3": row, "GRPO": row, "VPO": vpo}
        runs[seed] = {"seed": seed, "seconds": 100, "per_problem": models}
    return runs


def test_the_tables_give_the_gaps_and_their_verdicts():
    lines = one_file_seeds.table(made_up_runs(0.05), baseline=made_up_runs(0.0))
    text = "\n".join(lines)
    assert "| VPO - GRPO, w-best@30 | +0.050 [+0.050, +0.050] | yes |" in text
    assert "| VPO - warm start m, w-best@30 | +0.050 [+0.050, +0.050] | yes |" in text
    assert "| GRPO - VPO, best@1 | +0.100 [+0.100, +0.100] | yes |" in text
    assert "| VPO changed - VPO unchanged, w-best@30 | +0.050 [+0.050, +0.050] | yes |" in text
    assert (
        "| GRPO changed - GRPO unchanged, best@1 | +0.000 [+0.000, +0.000] | within noise |" in text
    )


# ----------------------------------------------------------------------------------------------
# Predict, then run: the experiments train the tree's own grpo_vs_vpo.py

# the one file at a size that runs in seconds: its numbers mean nothing, its text is what counts
TINY = ["WARM_STEPS=1", "WARM_BATCH=2", "RL_STEPS=1", "PROMPTS=1", "GROUP=2", "WEIGHTINGS=2"]
TINY += ["EVAL_PROBLEMS=1", "POOL=3", "KS=(1, 3)", "HELDOUT_WEIGHTINGS=2"]


@pytest.fixture(scope="module")
def student_tree(tmp_path_factory):
    """The student tree with every exercise blanked (tests/test_tools_make_student.py's too)."""
    try:
        subprocess.run(["git", "-C", ROOT, "rev-parse"], capture_output=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("make_student copies `git ls-files`")
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    from make_student import build

    out = str(tmp_path_factory.mktemp("kit") / "student")
    build(out)
    return out


def the_trees_command(tree):
    """The tree's own lab/one_file_seeds.py, loaded in this process: its file, runs and committed
    runs are the tree's (HERE), its imports the modules this process holds already (the same
    files, and none of their exercises runs here); the sys.path entry it adds is taken back."""
    where = tree / "lab" / "one_file_seeds.py"
    spec = importlib.util.spec_from_file_location("trees_one_file_seeds", where)
    command = importlib.util.module_from_spec(spec)
    path = list(sys.path)
    try:
        spec.loader.exec_module(command)
    finally:
        sys.path[:] = path
    assert Path(command.ONE_FILE) == tree / "grpo_vs_vpo.py"
    return command


def test_predict_then_run_trains_the_trees_own_file(student_tree, tmp_path, monkeypatch, capsys):
    """In the student tree, which carries the committed runs, `lab/one_file_seeds.py --experiment`
    (the tree's, run in this process) trains the tree's grpo_vs_vpo.py, each run a process of its
    own: blank, it fails in the student's function; answered, each run records the sha256 of the
    text it trained (the tree's file, the experiment's line changed) and a changed line changes the
    run; the committed runs are neither read nor written."""
    from one_file_seeds import changed_source, sha256, with_settings

    tree = Path(student_tree)
    one_file = tree / "grpo_vs_vpo.py"
    blank = one_file.read_text()
    committed = {p: p.read_bytes() for p in (tree / "docs/figures/one_file").rglob("*.*")}
    out = tmp_path / "runs"
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    command = the_trees_command(tree)

    def one_file_seeds(*args):
        command.main(["--seeds", "0", "--out", str(out), *args, "--set", *TINY])

    try:
        with pytest.raises(SystemExit, match="the run failed"):
            one_file_seeds("--experiment", "m1")
        assert "NotImplementedError: exercise one_file" in (out / "s0.log").read_text()

        one_file.write_text(Path(ROOT, "grpo_vs_vpo.py").read_text())  # the student's answer
        capsys.readouterr()
        one_file_seeds("--experiment", "m1")
        printed = capsys.readouterr().out
        assert "This tree's grpo_vs_vpo.py" in printed and "COMMITTED" not in printed
        text = one_file.read_text()
        base, m1 = (json.loads((out / sub / "s0.json").read_text()) for sub in (".", "m1"))
        assert base["source_sha256"] == sha256(with_settings(text, TINY))
        assert m1["source_sha256"] == sha256(with_settings(changed_source("m1", text), TINY))
        # the changed line (ANSWERS = 1) is what trained: the warm start is asked for 1, not 3
        assert "warm start m=1" in m1["per_problem"] and "warm start m=3" in base["per_problem"]
        assert base["tree"] == m1["tree"] == str(tree)
        assert committed == {
            p: p.read_bytes() for p in (tree / "docs/figures/one_file").rglob("*.*")
        }
    finally:
        one_file.write_text(blank)
