"""notebooks/maze.ipynb runs top to bottom (tiny parameters, a few seconds of training) and shows
its figures; the committed copy holds one full run's outputs and no error; tools/notebook_seeds.py
pools the per-maze results its runs write. Leaves out the full run itself (about 10 minutes on 2
cores: tools/run_notebook.py makes it)."""

import os
import sys

import nbformat

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOTEBOOK = os.path.join(ROOT, "notebooks", "maze.ipynb")
sys.path.insert(0, os.path.join(ROOT, "tools"))
# TRAIN_YOURS: the last cell's optional run too; one RL step each (a step of the maze's batch is
# seconds here) and two mazes, the fewest a paired interval resamples
TINY = {"RL_STEPS": 1, "EVAL_MAZES": 2, "POOL": 6, "TRAIN_YOURS": True}


def outputs(nb, kind):
    return [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if kind(o)]


def is_figure(output):
    return "image/png" in output.get("data", {})


def test_the_notebook_runs_top_to_bottom_and_draws_its_figures(tmp_path):
    from run_notebook import run

    nb = run(NOTEBOOK, str(tmp_path / "maze.ipynb"), TINY, timeout=300)  # fails on a cell's error
    assert len(outputs(nb, is_figure)) >= 3  # the maze, where the routes go, best@k
    text = "".join(o.get("text", "") for o in outputs(nb, lambda o: o.output_type == "stream"))
    assert "vpo.set_scores" in text and "both corners" in text
    for line in ("VPO - GRPO best@6", "VPO - GRPO w-best@6", "yours - VPO w-best@6"):
        assert line in text, line


def test_the_committed_notebook_holds_a_full_run():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    assert not outputs(nb, lambda o: o.output_type == "error")
    assert len(outputs(nb, is_figure)) >= 3, (
        "run: python tools/run_notebook.py notebooks/maze.ipynb"
    )
    parameters = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    assert f"RL_STEPS = {TINY['RL_STEPS']}\n" not in parameters.source  # never a tiny run's outputs
    assert os.path.getsize(NOTEBOOK) < 2e6


def test_notebook_seeds_pools_every_maze_of_every_seed():
    from notebook_seeds import pooled

    def run(seed, vpo_best):
        per_maze = {
            "GRPO": {"best": [0.5, 0.5], "w_best": [0.6, 0.6], "both_corners": [0.0, 1.0]},
            "VPO": {"best": vpo_best, "w_best": [0.8, 0.8], "both_corners": [1.0, 1.0]},
        }
        return {"seed": seed, "rl_steps": 300, "pool": 30, "per_maze": per_maze}

    lines = pooled([run(0, [0.5, 0.7]), run(1, [0.7, 0.7])])
    assert lines[0] == "2 seeds (0, 1), 2 mazes each, 300 RL steps"
    assert (
        "| VPO | 0.650 | 0.800 | 1.000 |" in lines and "| GRPO | 0.500 | 0.600 | 0.500 |" in lines
    )
    # a constant gap has no spread: the interval is the gap itself
    assert "VPO - GRPO w-best@30: +0.200 [+0.200, +0.200]" in lines
