"""lab/one_file_seeds.py: each predict-then-run experiment changes exactly one line of
grpo_vs_vpo.py into code that still parses, and the tables pair seeds and problems as they should
(on made-up runs, in milliseconds). Leaves out the runs themselves (docs/RESULTS.md has them)."""

import ast
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "lab"))

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
