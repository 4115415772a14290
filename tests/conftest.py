import os
import shutil
import sys

import pytest

# tests import the flat modules (model.py, vpo.py, ...) from the repository root
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

DEFINITION = (
    "definition: pins the paper's exact formula (e.g. vpo.set_scores' max over answers); an "
    "intended change to that formula is expected to fail it"
)


# The files that take longest, slowest first as measured in the full run (docs/RESULTS.md):
# `--dist loadfile --no-loadscope-reorder` hands files to the xdist workers in this order, so the
# short files, last, fill in while the other worker ends a long one
SLOWEST_FIRST = [
    "test_lab_experiment.py",
    "test_lab_ray.py",  # most of it waiting on the Ray cluster: early, beside a busy file
    "test_reproduce.py",
    "test_train.py",
    "test_one_writer.py",
    "test_tools_make_student.py",
    "test_lab_one_file_seeds.py",
    "test_full_disk.py",
    "test_distributed.py",
    "test_lab_exploration.py",
    "test_notebook.py",
]


def pytest_configure(config):
    config.addinivalue_line("markers", DEFINITION)


def pytest_collection_modifyitems(items):
    """The slowest files first; the others after them, in their own order (a stable sort)."""
    rank = {name: i for i, name in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


def pytest_terminal_summary(terminalreporter):
    """After failures, say which of them an intended change to a formula is expected to cause."""
    failed = terminalreporter.stats.get("failed", [])
    pinned = [r.nodeid.split("::")[-1] for r in failed if "definition" in r.keywords]
    if pinned:
        terminalreporter.write_line(
            f"{len(pinned)} of {len(failed)} failure(s) pin the paper's formula (marked "
            f"definition: {', '.join(pinned)}): an intended change to it is expected to fail "
            "them; "
            + (
                f"the other {len(failed) - len(pinned)} are not expected"
                if len(failed) > len(pinned)
                else "nothing else failed"
            )
        )


@pytest.fixture(scope="session", autouse=True)
def shared_warmstarts(tmp_path_factory):
    """tiny_runs.tiny()'s warm-start cache: one folder for the whole run, shared by the xdist
    workers (their base temp folders are siblings)."""
    import tiny_runs

    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    tiny_runs.WARMSTARTS = str(root / "shared-warmstarts")
    yield tiny_runs.WARMSTARTS
    tiny_runs.WARMSTARTS = None


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
