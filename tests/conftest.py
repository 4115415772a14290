import os
import shutil
import sys

import pytest

# tests import the flat modules (model.py, vpo.py, ...) from the repository root
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


@pytest.fixture(scope="session")
def baseline(tmp_path_factory):
    """One uninterrupted tiny_runs.RUN with a fresh warm start; its cache is shared by the tests
    that interrupt, resume or misconfigure the same run (test_config.py, test_checkpoint.py,
    test_reproduce.py)."""
    from tiny_runs import config, read, weights

    from train import train

    root = tmp_path_factory.mktemp("baseline")
    ws = root / "ws"
    out = train(config(root / "run", ws))
    return dict(
        ws=ws,
        out=out,
        metrics=read(os.path.join(out, "metrics.jsonl")),
        final=weights(os.path.join(out, "final.pt")),
    )


@pytest.fixture
def runs(baseline, tmp_path):
    """Copies of the baseline run: finished/, unfinished/ (final.pt removed) and empty/."""
    shutil.copytree(baseline["out"], tmp_path / "finished")
    shutil.copytree(baseline["out"], tmp_path / "unfinished")
    os.remove(tmp_path / "unfinished" / "final.pt")
    os.makedirs(tmp_path / "empty")
    return tmp_path
