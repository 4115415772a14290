"""lab/placement.py: where an answer sits, from its reward vector (hand-made words and routes),
the pools' shares, and the table's verdicts on pools made to differ."""

import os

import numpy as np
import pytest

from lab import placement
from rewards import PersonaTask

FAVORITES = ("a", "b", "c", "d")


@pytest.mark.parametrize(
    "word, place",
    [
        ("aaaaaaaaaaaa", "specialist"),  # all twelve letters for one persona
        ("aaaaaaaaabbb", "specialist"),  # 9 of 12: exactly SPECIALIST_SHARE
        ("aaaaaaaabbbb", "leaning"),  # 8 of 12
        ("aaaaaaaabbbx", "leaning"),  # 8 of the 11 that please: 0.727, the closest below 3/4
        ("aaaaabbbbccc", "compromise"),  # 5, 4 and 3 of 12: the top share 0.417
        ("aaaaabbbbxxx", "leaning"),  # 5 of the 9 that please: 0.556, the closest above 1/2
        ("aaaaaabbbbbb", "compromise"),  # 6 and 6: exactly COMPROMISE_SHARE
        ("aaabbbcccddd", "compromise"),
        ("aaaaaaaaaxyz", "specialist"),  # letters that please nobody do not count
        ("xyz", "none"),
        ("A1", "none"),  # invalid: the zero vector
    ],
)
def test_persona_places_from_the_tasks_own_reward(word, place):
    reward = PersonaTask().reward(FAVORITES, word)
    assert placement.answer_place("persona", reward) == place


@pytest.mark.parametrize(
    "reward, place",
    [
        ([1.0, 0.444, 0.0, 1.0], "specialist"),
        ([1.0, 0.0, 1.0, 0.5], "specialist"),
        ([1.0, 0.25, 0.11, 1.0], "compromise"),
        ([1.0, 0.0, 0.0, 1.0], "direct"),
        ([0.0, 0.0, 0.0, 0.0], "none"),
    ],
)
def test_maze_places(reward, place):
    assert placement.answer_place("maze", reward) == place


def test_bad_input_is_refused_in_one_line():
    with pytest.raises(ValueError, match="maze reward"):
        placement.answer_place("maze", [1.0, 0.0])
    with pytest.raises(ValueError, match="knows persona, maze"):
        placement.answer_place("code", [1.0])


def test_place_shares_count_each_pool():
    pools = np.array([[[1, 0, 0, 1], [1, 0, 0, 1], [1, 1, 0, 1], [0, 0, 0, 0]]], dtype=float)
    np.testing.assert_allclose(placement.place_shares("maze", pools), [[0.25, 0, 0.5, 0.25]])


def test_the_table_calls_a_difference_only_beyond_noise():
    """Three seeds of 40 persona pools: VPO's all specialists, vpo_loo's all compromises, and
    vpo_nostd's the same as VPO's: more, fewer, and within noise."""
    names = placement.PLACES["persona"]
    one = {p: np.eye(len(names))[names.index(p)] for p in names}
    shares = {}
    for s in range(3):
        shares["persona", "vpo", s] = np.tile(one["specialist"], (40, 1))
        shares["persona", "vpo_loo", s] = np.tile(one["compromise"], (40, 1))
        shares["persona", "vpo_nostd", s] = np.tile(one["specialist"], (40, 1))
    text = placement.table(shares)
    assert "| vpo - vpo_loo (3 seeds) | +1.000 [+1.000, +1.000] more | -1.000" in text
    assert "| vpo - vpo_nostd (3 seeds) | +0.000 [+0.000, +0.000] within noise" in text


def test_the_committed_board_keeps_three_problems_a_run():
    board = os.path.join(placement.HERE, "docs", "figures", "voting")
    shares = placement.main(["--committed", board])
    for task in placement.TASKS:
        for method in ("vpo", "vpo_loo"):
            for s in range(3):
                assert shares[task, method, s].shape == (3, 4)
                np.testing.assert_allclose(shares[task, method, s].sum(1), 1.0)


def test_missing_runs_and_pools_are_refused_in_one_line(tmp_path):
    with pytest.raises(SystemExit, match="no result files under"):
        placement.main(["--pools", str(tmp_path), "--dir", str(tmp_path / "pools")])
    with pytest.raises(SystemExit, match="run with --pools first"):
        placement.main(["--dir", str(tmp_path)])
