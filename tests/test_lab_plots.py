"""plots.py: the leaderboard figure is written and ranks the methods by their mean over seeds."""

import numpy as np

from lab import plots
from lab.report import warm_start_row


def test_leaderboard_figure_writes_a_png_and_ranks_by_mean(tmp_path):
    methods = [f"method_{i}" for i in range(16)] + ["grpo", "vpo"]
    rows = {
        "persona": [
            (m, [0.40 + 0.005 * i, 0.41 + 0.005 * i, 0.39 + 0.005 * i])
            for i, m in enumerate(methods)
        ],
        "code": [("grpo", [0.3, 0.2, 0.25]), ("vpo", [0.5, 0.45, 0.55]), ("warm_start", [0.46])],
    }
    path = tmp_path / "leaderboard.png"
    order = plots.leaderboard_figure(rows, str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000
    assert order["code"] == ["vpo", "warm_start", "grpo"]  # means .5, .46, .25
    assert order["persona"] == methods[::-1]


def test_every_method_has_its_own_color_in_every_figure():
    known = list(plots.COLORS) + [warm_start_row(3)]
    shades = [plots.color(m) for m in known] + [plots.color("vpo (yours)")]
    # no two methods share a color (the warm starts and optimum included)
    assert len(set(shades)) == len(shades)
    # the warm start asked for m answers has one color, whatever m
    assert plots.color(warm_start_row(4)) == plots.color(warm_start_row(3))
    # a method's search row keeps its color
    assert plots.color("vpo (m per call)") == plots.color("vpo")
    assert plots.color("my_new_method") == plots.color("my_new_method") and plots.color(
        "my_new_method"
    ) not in [plots.color(m) for m in known]


def test_a_smoke_runs_figures_say_so_in_their_title(tmp_path, monkeypatch):
    import matplotlib.figure

    titles = []
    real = matplotlib.figure.Figure.suptitle
    monkeypatch.setattr(
        matplotlib.figure.Figure,
        "suptitle",
        lambda fig, t, **kw: titles.append(t) or real(fig, t, **kw),
    )
    plots.leaderboard_figure(
        {"persona: w-best@6": [("vpo", [0.5]), ("grpo", [0.4])]},
        str(tmp_path / "a.png"),
        smoke=True,
    )
    assert titles and "SMOKE TEST" in titles[-1]
    titles.clear()
    plots.leaderboard_figure(
        {"persona: w-best@6": [("vpo", [0.5]), ("grpo", [0.4])]}, str(tmp_path / "b.png")
    )
    assert not titles


def test_against_a_board_the_curves_are_the_new_methods_and_the_boards_three(tmp_path, monkeypatch):
    """19 board curves under one legend hid the student's: only the new rows, the board's VPO,
    GRPO and warm start are drawn."""
    figures = []
    save = plots._save
    monkeypatch.setattr(plots, "_save", lambda fig, path: figures.append(fig) or save(fig, path))
    entry = {"ks": [1, 2], "m": 1, "best_at_k": [0.1, 0.2], "best_at_k_spread": [0.0, 0.0]}
    board = ["warm_start", "grpo", "vpo", "rloo", "max_at_k", "dapo"]
    results = {
        "tasks": {"persona": {m: entry for m in board + ["vpo (yours)"]}},
        "seeds": [0],
        "new_methods": ["vpo (yours)"],
    }
    plots.best_at_k(str(tmp_path), plots.compared_only(results))
    labels = figures[0].axes[0].get_legend_handles_labels()[1]
    assert sorted(labels) == ["grpo", "vpo", "vpo (yours)", "warm_start"]
    assert plots.compared_only({"tasks": {"persona": {"rloo": entry}}})["tasks"]["persona"]


def test_a_figure_with_nothing_to_draw_leaves_no_earlier_one_behind(tmp_path):
    (tmp_path / "reward_vectors.png").write_bytes(b"another run's pools")
    entry = {"ks": [1, 2], "m": 1, "best_at_k": [0.1, 0.2], "best_at_k_spread": [0.0, 0.0]}
    paths = plots.make_all(str(tmp_path), {"tasks": {"persona": {"vpo": entry}}}, {})
    assert not (tmp_path / "reward_vectors.png").exists() and len(paths) == 2


def test_the_reward_vectors_carry_their_color_scale(tmp_path, monkeypatch):
    figures = []
    save = plots._save
    monkeypatch.setattr(plots, "_save", lambda fig, path: figures.append(fig) or save(fig, path))
    rng = np.random.default_rng(0)
    samples = {("persona", a, 0): rng.random((3, 6, 4)) for a in ("grpo", "vpo")}
    assert plots.reward_vectors(str(tmp_path), {"tasks": {"persona": {}}}, samples)
    # the image panels and one color bar (0 to 1) beside them
    assert [ax.get_label() for ax in figures[0].axes].count("<colorbar>") == 1


def test_reward_vectors_draws_the_same_columns_in_every_process():
    """Warm start, GRPO, VPO, then the others by name: not in the order a set of strings iterates,
    which changes with the process's hash seed."""
    samples = {("persona", a, 0): None for a in ("zeta", "vpo", "alpha", "grpo", "warm_start")}
    assert plots.drawn_methods(samples) == ["warm_start", "grpo", "vpo", "alpha"]
    assert plots.drawn_methods({("code", "mine", 0): None, ("code", "vpo", 1): None}) == [
        "vpo",
        "mine",
    ]


def test_maj_at_k_is_drawn_only_for_tasks_whose_files_carry_it(tmp_path, monkeypatch):
    figures = []
    save = plots._save
    monkeypatch.setattr(plots, "_save", lambda fig, path: figures.append(fig) or save(fig, path))
    entry = {"ks": [1, 2], "m": 1, "best_at_k": [0.1, 0.2], "best_at_k_spread": [0.0, 0.0]}
    voted = dict(entry, maj_at_k=[0.1, 0.15], maj_at_k_spread=[0.0, 0.0], diversity=0.4)
    results = {"tasks": {"persona": {"vpo": entry}, "maze": {"vpo": voted, "grpo": entry}}}
    assert plots.maj_at_k(str(tmp_path), results) == str(tmp_path / "maj_at_k.png")
    titles = [ax.get_title() for ax in figures[0].axes]
    assert len(titles) == 3 and titles[0].startswith("maze: maj@k")  # persona has no maj row
    assert figures[0].axes[0].get_legend_handles_labels()[1] == ["vpo"]
    # the vote against diversity: one point, vpo's (grpo's file has no maj@k)
    points = figures[0].axes[2].collections
    assert len(points) == 1 and points[0].get_offsets().tolist() == [[0.4, 0.15]]
    assert plots.maj_at_k(str(tmp_path), {"tasks": {"persona": {"vpo": entry}}}) is None
