"""plots.py: the leaderboard figure is written and ranks the methods by their mean over seeds."""

from lab import plots


def test_leaderboard_figure_writes_a_png_and_ranks_by_mean(tmp_path):
    methods = [f"method_{i}" for i in range(16)] + ["grpo", "vpo"]
    rows = {"persona": [(m, [0.40 + 0.005 * i, 0.41 + 0.005 * i, 0.39 + 0.005 * i]) for i, m in enumerate(methods)],
            "code": [("grpo", [0.3, 0.2, 0.25]), ("vpo", [0.5, 0.45, 0.55]), ("warm_start", [0.46])]}
    path = tmp_path / "leaderboard.png"
    order = plots.leaderboard_figure(rows, str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000
    assert order["code"] == ["vpo", "warm_start", "grpo"]  # means .5, .46, .25
    assert order["persona"] == methods[::-1]
