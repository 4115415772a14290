"""tools/trl_compare.py without TRL installed (as CI runs): one line naming what is missing, and our
side of the comparison at TRL's shape (32-token prompts, every completion 48 tokens)."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tools import trl_compare  # noqa: E402


def test_without_trl_one_line_names_the_missing_packages(capsys, monkeypatch):
    monkeypatch.setattr(trl_compare, "NEEDED", ("trl", "no_such_package_here"))
    trl_compare.main([])
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and out[0].startswith("skipped:") and "no_such_package_here" in out[0]


def test_ours_runs_at_trls_shape():
    ours = trl_compare.time_ours("cpu", warmup=0, repeats=1)  # asserts the prompt and width
    assert ours["step_s"] > ours["sample_s"] > 0 and ours["params"] > 0
    # put back
    assert trl_compare.engine.generate.__name__ == "generate"
    assert trl_compare.engine.generate_static.__name__ == "generate_static"
