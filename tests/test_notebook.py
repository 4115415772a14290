"""notebooks/maze.ipynb runs top to bottom (tiny parameters, a few seconds of training) and shows
its figures; the committed copy holds one full run's outputs and no error. Leaves out the full run
itself (about 10 minutes: tools/run_notebook.py makes it)."""

import os
import sys

import nbformat

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOTEBOOK = os.path.join(ROOT, "notebooks", "maze.ipynb")
sys.path.insert(0, os.path.join(ROOT, "tools"))


def outputs(nb, kind):
    return [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if kind(o)]


def is_figure(output):
    return "image/png" in output.get("data", {})


def test_the_notebook_runs_top_to_bottom_and_draws_its_figures(tmp_path):
    from run_notebook import run

    tiny = {"RL_STEPS": 2, "EVAL_MAZES": 3, "POOL": 6}
    nb = run(NOTEBOOK, str(tmp_path / "maze.ipynb"), tiny, timeout=300)  # fails on a cell's error
    assert len(outputs(nb, is_figure)) >= 3  # the maze, where the routes go, best@k
    text = "".join(o.get("text", "") for o in outputs(nb, lambda o: o.output_type == "stream"))
    assert "vpo.set_scores" in text and "VPO - GRPO at best@6" in text


def test_the_committed_notebook_holds_a_full_run():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    assert not outputs(nb, lambda o: o.output_type == "error")
    assert len(outputs(nb, is_figure)) >= 3, (
        "run: python tools/run_notebook.py notebooks/maze.ipynb"
    )
    parameters = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    assert "RL_STEPS = 2\n" not in parameters.source  # never a tiny run's outputs
    assert os.path.getsize(NOTEBOOK) < 2e6
