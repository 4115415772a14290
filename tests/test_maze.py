"""The maze task: the generator's invariants over a thousand seeds, the simulator and the reward on
hand-worked grids (expected vectors worked out by hand), the demonstrations, the exact optimum
against brute force, hostile answers and the picture. Leaves out training on the task (train.py's
tests run tasks end to end)."""

import itertools
import os
import random
from collections import deque

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import maze
from maze import Maze, MazeTask
from tasks import held_out

SEEDS = range(1000)

# 3 x 5, budget 10: gold (0,2) (0,3); diamond (2,0); lava (1,1) (2,2); bonus (2,1); exit (2,4)
GRID = Maze(("S.GG.", "#L#..", "DBL.E"), budget=10)


def bfs(rows, source, blocked=()):
    """A second, plain BFS, so the generator's checks do not test themselves."""
    dist, queue = {source: 0}, deque([source])
    while queue:
        r, c = queue.popleft()
        for nr, nc in ((r + 1, c), (r - 1, c), (r, c + 1), (r, c - 1)):
            ok = 0 <= nr < len(rows) and 0 <= nc < len(rows[0]) and rows[nr][nc] != "#"
            if ok and (nr, nc) not in dist and (nr, nc) not in blocked:
                dist[nr, nc] = dist[r, c] + 1
                queue.append((nr, nc))
    return dist


def manhattan(a, b):
    return abs(a[0] - b[0]) + abs(a[1] - b[1])


@pytest.fixture(scope="module")
def kept():
    return [(s, maze.generate(s)) for s in SEEDS if maze.generate(s) is not None]


def test_the_generator_keeps_most_seeds_and_rejects_some(kept):
    assert 0.8 * len(SEEDS) < len(kept) < len(SEEDS)


def test_generator_invariants_over_a_thousand_seeds(kept):
    for seed, m in kept:
        assert len(m.rows) == 9 and all(
            len(row) == 9 and set(row) <= set("#.SEGDLB") for row in m.rows
        )
        assert (m.start, m.exit) in [((0, 0), (8, 8)), ((0, 8), (8, 0))], seed
        assert {m.gold_corner, m.diamond_corner} == {(0, 0), (0, 8), (8, 0), (8, 8)} - {
            m.start,
            m.exit,
        }
        assert all(m.rows[r][c] != "#" for r, c in [(0, 0), (0, 8), (8, 0), (8, 8)])
        assert m.find("B") == [(4, 4)]
        d = {x: bfs(m.rows, x) for x in (m.start, m.gold_corner, m.diamond_corner)}
        s, e, g, dm = m.start, m.exit, m.gold_corner, m.diamond_corner
        assert m.budget == max(d[s][g] + d[g][e], d[s][dm] + d[dm][e]) + 7 <= maze.MAX_BUDGET
        assert d[s][g] + d[g][dm] + d[dm][e] > m.budget, seed  # gold first: no time for both
        assert d[s][dm] + d[dm][g] + d[g][e] > m.budget, seed  # diamond first neither
        for char, corner in (("G", g), ("D", dm)):
            found = m.find(char)
            assert 3 <= len(found) <= 5 and all(manhattan(x, corner) <= 2 for x in found)
        lava = m.find("L")
        assert 1 <= len(lava) <= 5 and all(2 <= r <= 6 and 2 <= c <= 6 for r, c in lava)
        assert bfs(m.rows, s, blocked=set(lava))[e] <= m.budget, seed  # a lava-free route fits
        assert all(x in d[s] for x in m.find("GDLB")), seed  # every item can be reached


def test_a_zone_holds_the_open_cells_near_its_corner():
    rows = ("S..#", ".#..", "....", "...E")
    assert sorted(maze.zone(rows, (0, 0))) == [(0, 1), (0, 2), (1, 0), (2, 0)]


# ---- the simulator and the reward, worked by hand ----------------------------------------------


def test_a_wall_or_the_edge_spends_the_move_and_the_agent_stays():
    assert maze.walk(GRID, "D") == ([(0, 0)], False)  # (1,0) is a wall
    assert maze.walk(GRID, "UL") == ([(0, 0), (0, 0)], False)  # off the grid
    assert maze.walk(GRID, "RRDR") == ([(0, 1), (0, 2), (0, 2), (0, 3)], False)


def test_the_exit_ends_the_route_and_what_follows_does_not_count():
    path, reached = maze.walk(GRID, "RRRRDDLLLL")
    assert reached and path[-1] == (2, 4) and len(path) == 6
    np.testing.assert_allclose(maze.route_reward(GRID, "RRRRDDLLLL"), [1, 1, 0, 1])


def test_only_the_budget_counts_and_other_characters_are_skipped():
    assert maze.walk(GRID, "RxRR r R\nDD")[1]  # 'x', ' ', 'r', newline skipped
    short = Maze(GRID.rows, budget=5)
    np.testing.assert_array_equal(maze.route_reward(short, "RRRRDD"), [0, 0, 0, 0])
    np.testing.assert_array_equal(maze.route_reward(GRID, ""), [0, 0, 0, 0])


@pytest.mark.parametrize(
    "route, expected",
    [
        ("RRRRDD", [1, 1, 0, 1]),  # both gold (2/2)^2, no lava
        ("RRDRRDD", [1, 1, 0, 1]),  # the same with a bump into (1,2)
        ("RRLRRRDD", [1, 1, 0, 1]),  # gold (0,2) entered twice, counted once
        ("RDDRRR", [1, 0, 0, 0]),  # both lava: (1 - 2/2)^2 = 0, x1.5 still 0
        ("RRLDDRRR", [1, 0.375, 0, 0]),  # gold (1/2)^2 x 1.5 = 0.375 (bonus at (2,1))
        ("RDLDLRRRR", [1, 0, 1, 0]),  # diamond (1/1)^2 x 1.5 = 1.5, clipped to 1
        ("RDDUURRRDD", [1, 1, 0, 0.375]),  # lava (1,1) twice = once: (1 - 1/2)^2 x 1.5 = 0.375
        ("RRLDDLRRRR", [1, 0.375, 1, 0]),  # a gold, then the diamond: 0.375 and 1.5 -> 1
        ("RDDUURRRD", [0, 0, 0, 0]),  # stops one short of the exit
    ],
)
def test_rewards_of_hand_worked_routes(route, expected):
    np.testing.assert_allclose(maze.route_reward(GRID, route), expected, rtol=1e-6)


def test_the_optimum_matches_brute_force_over_every_move_string():
    small = Maze(GRID.rows, budget=8)  # every arriving route fits in some string of exactly 8 moves
    brute = {
        tuple(maze.route_reward(small, "".join(s))) for s in itertools.product("UDLR", repeat=8)
    }
    brute.discard((0.0, 0.0, 0.0, 0.0))
    assert {tuple(v) for v in maze.achievable(small)} == brute
    assert {tuple(v) for v in maze.pareto_front(small)} == {(1, 1, 0, 1), (1, 0, 1, 0)}
    # with 10 moves one gold fits on the way to the diamond (the route "RRLDDLRRRR" above)
    assert {tuple(v) for v in maze.pareto_front(GRID)} == {(1, 1, 0, 1), (1, 0.375, 1, 0)}


# ---- the task's interface ----------------------------------------------------------------------


def test_problems_are_kept_seeds_on_their_side_of_the_split():
    task = MazeTask()
    for split in ("train", "heldout"):
        seeds = task.problems(split, 20, random.Random(0))
        assert len(seeds) == 20 and all(maze.generate(s) is not None for s in seeds)
        assert all(held_out(str(s), 0.25) == (split == "heldout") for s in seeds)


def test_the_prompt_is_the_budget_and_the_rows():
    task, seed = MazeTask(), MazeTask().problems("train", 1, random.Random(1))[0]
    m = maze.generate(seed)
    text = task.prompt(seed)
    assert text == f"maze {m.budget} " + "/".join(m.rows) and len(text) == 97
    assert task.prompt(seed, goal=[0.5, 0.5, 0, 0]) == text + " w4400"
    assert task.max_answer_tokens == maze.MAX_BUDGET + 1 and task.dim == 4


def test_valid_scalarize_and_answer_key():
    task = MazeTask(reward_weights=[0.4, 0.2, 0.2, 0.2])
    assert task.valid(GRID, "RRRRDD") and not task.valid(GRID, "") and not task.valid(GRID, "R x")
    assert task.valid(GRID, "R" * 11) and not task.valid(GRID, "R" * (maze.MAX_BUDGET + 1))
    assert not task.valid(GRID, None)
    r = np.array([[1, 1, 0, 0.5]], dtype=np.float32)
    np.testing.assert_allclose(task.scalarize(r), [0.7])
    np.testing.assert_allclose(task.scalarize(torch.tensor(r)).numpy(), [0.7])
    np.testing.assert_allclose(MazeTask().scalarize(r), [0.625])
    assert task.answer_key("R-R R") == "RRR" and task.answer_key(None) == ""
    assert task.answer_key("R" * 50) == "R" * maze.MAX_BUDGET


# ---- demonstrations and the optimum -------------------------------------------------------------


@pytest.mark.parametrize("noise", [0.25, 1.0])
def test_every_demonstration_reaches_the_exit_within_the_budget(noise):
    task, rng = MazeTask(noise=noise), random.Random(noise)
    for seed in task.problems("train", 150, rng):
        for answer in task.demonstration(seed, 3, rng):
            assert task.valid(seed, answer) and maze.walk(maze.generate(seed), answer)[1]


def test_demonstrations_vary_and_the_optimum_is_above_every_one():
    task, rng = MazeTask(), random.Random(2)
    seeds = task.problems("train", 6, rng)
    gaps = []
    for seed in seeds:
        front = maze.pareto_front(seed)
        demos = [a for _ in range(10) for a in task.demonstration(seed, 3, rng)]
        for r in (task.reward(seed, a) for a in demos):
            assert ((front >= r - 1e-6).all(1)).any()  # some optimal vector is at least as good
            gaps.append(front.mean(1).max() - r.mean())
        assert len({tuple(maze.walk(maze.generate(seed), a)[0]) for a in demos}) >= 5
    assert np.mean(gaps) > 0.05  # room for RL: the demonstrations are not already optimal


def test_route_families_counts_the_corners_the_walks_enter():
    seed = MazeTask().problems("train", 1, random.Random(3))[0]
    m, rng = maze.generate(seed), random.Random(0)
    gold = maze._route(m, [m.gold_corner], rng, [])
    diamond = maze._route(m, [m.diamond_corner], rng, [])
    shares = maze.route_families(seed, [gold, diamond, ""])
    assert shares["exit"] == pytest.approx(2 / 3)
    assert shares["gold"] == shares["diamond"] == shares["direct"] == pytest.approx(1 / 3)
    families = sum(shares[k] for k in maze.FAMILY_COLORS)
    assert families == pytest.approx(1)  # each walk one family


# ---- hostile answers and the picture -----------------------------------------------------------

JUNK = st.one_of(
    st.text(),
    st.text(alphabet="UDLRudlr \n#", max_size=300),
    st.none(),
    st.integers(),
    st.binary(),
    st.lists(st.text(max_size=3)),
)


@settings(max_examples=200, deadline=None)
@given(answer=JUNK)
def test_any_answer_gets_a_finite_reward_in_the_unit_box(answer):
    task = MazeTask()
    for problem in (GRID, 7):
        r = task.reward(problem, answer)
        assert r.shape == (4,) and r.dtype == np.float32
        assert np.isfinite(r).all() and (r >= 0).all() and (r <= 1).all()
        assert isinstance(task.valid(problem, answer), bool)
        task.answer_key(answer)
    assert task.reward(GRID, "R" * 10**6).sum() == 0


def test_the_conflict_picture_is_written(tmp_path):
    task, rng = MazeTask(), random.Random(4)
    seeds = task.problems("heldout", 3, rng)
    pools = {
        k: [task.demonstration(s, 6, rng) + ["", "LLLL"] for s in seeds] for k in ("GRPO", "VPO")
    }
    path = maze.conflict_figure(tmp_path / "routes.png", pools, seeds)
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_a_maze_run_draws_its_routes(tmp_path):
    """python train.py --config configs/maze.yaml ends with routes.png beside run.png."""
    from tiny_runs import tiny

    import figures
    from train import train

    # the smallest run that reaches the report: what it learned is not what is checked
    small = ["sft_steps=4", "steps=1", "eval_problems=2", "pool_n=6"]
    out = train(tiny(tmp_path, "task=maze", "block_size=224", *small))
    figures.report_run(out)
    assert os.path.getsize(os.path.join(out, "routes.png")) > 10_000
    assert os.path.getsize(os.path.join(out, "run.png")) > 10_000


# ---- navigation, the route's cells, the corners a pool covers, the turned map -------------------


def test_wall_moves_count_the_moves_that_stay():
    # GRID: S at (0, 0), a wall below it; up is off the grid
    assert maze.wall_moves(GRID, "RRRR") == 0
    assert maze.wall_moves(GRID, "DR") == 1  # into the wall below S
    assert maze.wall_moves(GRID, "UUL") == 3  # off the grid, three times
    assert maze.wall_moves(GRID, "RRRRDDDD") == 0  # the exit (2, 4) ends it: D past it is no move
    assert maze.wall_moves(GRID, "") == 0


@settings(max_examples=200, deadline=None)
@given(route=st.text(alphabet="UDLR", max_size=40), seed=st.sampled_from(range(50)))
def test_a_route_with_cells_scores_and_walks_as_its_letters(route, seed):
    """The encoding changes the text only: the reward of "R01D11" is the reward of "RD"."""
    problem = MazeTask().problems("train", 1, random.Random(seed))[0]
    m, task = maze.maze_of(problem), MazeTask(cells=True)
    written = maze.with_cells(m, route)
    assert len(written) == 3 * len(route)
    assert np.array_equal(task.reward(problem, written), MazeTask().reward(problem, route))
    assert maze.walk(m, written) == maze.walk(m, route)
    assert task.answer_key(written) == MazeTask().answer_key(route)
    assert task.valid(problem, written) == (1 <= len(route) <= maze.MAX_BUDGET)


def test_with_cells_writes_the_cell_each_move_reaches():
    assert maze.with_cells(GRID, "RDR") == "R01D11R11"  # right of (1, 1) is a wall: it stays
    assert maze.with_cells(GRID, "RRRD") == "R01R02R03D13"
    task = MazeTask(cells=True)
    assert task.valid(GRID, "R01D11") and not task.valid(
        GRID, "RD"
    )  # letters alone: not its format
    assert not MazeTask().valid(GRID, "R01")


def test_demonstrations_with_cells_are_the_same_walks():
    problem = MazeTask().problems("train", 1, random.Random(5))[0]
    bare = MazeTask().demonstration(problem, 3, random.Random(9))
    written = MazeTask(cells=True).demonstration(problem, 3, random.Random(9))
    assert [MazeTask().answer_key(w) for w in written] == bare


def test_the_maze_tokenizer_writes_a_move_and_its_cell_as_one_token():
    from model import Tokenizer

    tok = Tokenizer("maze")
    assert len(tok.encode("R34")) == 1 and len(tok.encode("R01D11U99L00")) == 4
    assert tok.encode("R34") != tok.encode("D34") and tok.encode("34") == Tokenizer(
        "numbers"
    ).encode("34")
    text = "<|bos|>3|maze 26 S..#/..<|answer|>R01D11<|sep|>L00<|eos|>"
    assert tok.decode(tok.encode(text)) == text
    assert tok.split_answers(tok.encode("R01D11<|sep|>L00<|eos|>")) == ["R01D11", "L00"]


def test_corner_coverage_of_hand_built_pools():
    problem = MazeTask().problems("train", 1, random.Random(3))[0]
    m, rng = maze.generate(problem), random.Random(0)
    gold = maze._route(m, [m.gold_corner], rng, [])
    diamond = maze._route(m, [m.diamond_corner], rng, [])
    stop_short = gold[: len(gold) // 2]  # enters no exit: covers nothing
    assert maze.corner_coverage(problem, [gold, gold]) == {"gold": True, "diamond": False}
    assert maze.corner_coverage(problem, [gold, diamond]) == {"gold": True, "diamond": True}
    assert maze.corner_coverage(problem, [stop_short, ""]) == {"gold": False, "diamond": False}


def test_every_maze_turns_to_one_layout_and_the_visit_map_counts_routes():
    for problem in MazeTask().problems("train", 40, random.Random(6)):
        m = maze.maze_of(problem)
        assert maze.canonical(m, m.start) == (0, 0)
        assert maze.canonical(m, m.exit) == (maze.SIZE - 1, maze.SIZE - 1)
        assert maze.canonical(m, m.gold_corner) == (0, maze.SIZE - 1)
        assert maze.canonical(m, m.diamond_corner) == (maze.SIZE - 1, 0)
    rng = random.Random(1)
    routes = [maze._route(m, [m.gold_corner], rng, []), ""]
    visits = maze.visit_map(problem, routes)
    assert visits[0, 0] == 1.0  # every route starts at S
    assert visits[0, maze.SIZE - 1] == 0.5  # one route of two reaches the gold corner
    assert visits[maze.SIZE - 1, 0] == 0.0 and visits.max() <= 1.0
