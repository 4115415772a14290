"""
The maze task (the VPO paper's grid world): walk from S to the exit E within a step budget, past
gold (one corner), diamonds (the opposite one), the bonus B (the center), off lava. The reward
[completion, gold, diamond, avoid_lava] in [0,1]^4 is zero unless the route arrives; g = (gold
share)^2, d likewise, a = (1 - lava share)^2, each x1.5 (clipped to 1) once B is visited. A problem
is a seed; `generate` keeps a maze only if no route within the budget (the longer corner route + 7)
passes both corners, gold first or diamond first (the authors check one order): a route must
choose (a stray tile of each may fit; squared, it is worth little). Demonstrations know the route
families but walk them imperfectly; `pareto_front` is the exact optimum, `conflict_figure` the
picture. Deliberately left out: other grid sizes, partial credit for not arriving, parents (the code
task's).
"""

import functools
import random
import re
from collections import Counter, defaultdict, deque
from dataclasses import dataclass
from itertools import groupby, islice

import numpy as np

from tasks import Task, checked_weights, format_goal, held_out, weighted_sum

SIZE = 9  # the grid's side: the paper's 9x9 (other sizes are left out)
CENTER = (4, 4)  # the bonus B's cell
MOVES = {"U": (-1, 0), "D": (1, 0), "L": (0, -1), "R": (0, 1)}
# the generator rejects longer budgets (rare): prompt, goal and 3 answers then fit 224 tokens
MAX_BUDGET = 37
FAR = 10**6  # the distance to an unreachable cell


@dataclass(frozen=True)
class Maze:
    """rows: a string per row (# wall, . open, S, E, G gold, D diamond, L lava, B bonus)."""

    rows: tuple
    budget: int
    gold_corner: tuple = None
    diamond_corner: tuple = None

    def find(self, chars):
        """The cells holding one of `chars`, row by row."""
        return cells(self.rows, chars)

    @functools.cached_property
    def start(self):
        """The cell of S."""
        return self.find("S")[0]

    @functools.cached_property
    def exit(self):
        """The cell of E."""
        return self.find("E")[0]


def cells(rows, chars):
    """The cells (row, col) holding one of `chars`, row by row."""
    return [(r, c) for r, row in enumerate(rows) for c, x in enumerate(row) if x in chars]


def step(rows, cell, letter):
    """One move; into a wall or off the grid the move is spent and the agent stays."""
    r, c = cell[0] + MOVES[letter][0], cell[1] + MOVES[letter][1]
    inside = 0 <= r < len(rows) and 0 <= c < len(rows[0])
    return (r, c) if inside and rows[r][c] != "#" else cell


def distances(rows, source, blocked=()):
    """Steps from `source` to every cell reachable without entering `blocked` (BFS)."""
    dist = {source: 0}
    queue = deque([source])
    while queue:
        cell = queue.popleft()
        for letter in MOVES:
            nxt = step(rows, cell, letter)
            if nxt not in dist and nxt not in blocked:
                dist[nxt] = dist[cell] + 1
                queue.append(nxt)
    return dist


def zone(rows, corner):
    """The open cells within Manhattan distance 2 of a corner, less S and E (the center is far)."""
    return [(r, c) for r, c in cells(rows, ".GDLB") if abs(r - corner[0]) + abs(c - corner[1]) <= 2]


OPEN = ["." * SIZE] * SIZE  # a grid without walls
# each cell's neighbours, walls or not: the candidates of Prim's frontier
AROUND = {x: sorted({step(OPEN, x, m) for m in MOVES} - {x}) for x in cells(OPEN, ".")}


def _prim(rng):
    """A Prim's maze on cells: open a random frontier wall with exactly one open neighbour."""
    grid = [["#"] * SIZE for _ in range(SIZE)]
    r, c = rng.randrange(SIZE), rng.randrange(SIZE)
    grid[r][c] = "."
    frontier = list(AROUND[r, c])
    while frontier:
        r, c = frontier.pop(rng.randrange(len(frontier)))
        if grid[r][c] == "#" and sum(grid[a][b] == "." for a, b in AROUND[r, c]) == 1:
            grid[r][c] = "."
            frontier += [(a, b) for a, b in AROUND[r, c] if grid[a][b] == "#"]
    walls = [w for w in cells(grid, "#") if sum(grid[a][b] == "." for a, b in AROUND[w]) >= 2]
    rng.shuffle(walls)  # loops: a maze with a single path would leave no route to choose
    for r, c in walls[: rng.randint(18, 28)]:
        grid[r][c] = "."
    return grid


@functools.lru_cache(maxsize=2**16)  # mazes recur across problems(), prompts and rewards
def generate(seed):
    """The maze of a seed, or None where the seed is rejected (the caller tries another)."""
    rng = random.Random(seed)
    grid = _prim(rng)
    last = SIZE - 1  # the last row's and column's index
    start, end = rng.choice([((0, 0), (last, last)), ((0, last), (last, 0))])
    corners = [(0, last - start[1]), (last, last - end[1])]
    rng.shuffle(corners)
    gold, diamond = corners
    for (r, c), char in zip((start, end, gold, diamond, CENTER), "SE..B"):
        grid[r][c] = char
    pairs = {(x, y): n for x in (start, gold, diamond) for y, n in distances(grid, x).items()}
    dist = defaultdict(lambda: FAR, pairs)  # FAR: cut off
    budget = max(dist[start, x] + dist[x, end] for x in corners) + 7
    both = min(dist[start, x] + dist[x, y] + dist[y, end] for x, y in (corners, corners[::-1]))
    if budget > MAX_BUDGET or both <= budget or dist[start, CENTER] >= FAR:
        return None
    zones = [zone(grid, x) for x in corners]
    if min(len(z) for z in zones) < 3:
        return None
    for z, char in zip(zones, "GD"):
        for r, c in rng.sample(z, rng.randint(3, min(5, len(z)))):
            grid[r][c] = char
    free = [(r, c) for r, c in cells(grid, ".") if 2 <= r <= 6 and 2 <= c <= 6]
    lava = rng.sample(free, min(rng.randint(3, 5), len(free)))
    for r, c in lava:
        grid[r][c] = "L"
    if distances(grid, start, blocked=set(lava)).get(end, FAR) > budget:
        return None
    return Maze(tuple("".join(row) for row in grid), budget, gold, diamond_corner=diamond)


def maze_of(problem):
    """A problem (a seed, or a hand-built Maze) -> its Maze."""
    maze = problem if isinstance(problem, Maze) else generate(int(problem))
    if maze is None:
        raise ValueError(f"seed {problem} makes no maze (the generator rejects it)")
    return maze


def walk(maze, answer):
    """A route -> (the cells it enters in order, whether it reached the exit). Only U/D/L/R count
    (any other character is skipped), only the first `budget` of them; the exit ends the route."""
    moves = (x for x in answer if x in MOVES) if isinstance(answer, str) else ()
    cell = maze.start
    path = []
    for letter in islice(moves, maze.budget):  # lazily: a hostile answer may be megabytes long
        cell = step(maze.rows, cell, letter)
        path.append(cell)
        if cell == maze.exit:
            return path, True
    return path, False


def wall_moves(maze, answer):
    """The moves of a route that go into a wall or off the grid (spent, the agent stays): a policy
    that reads the maze makes none; the demonstrations make one in ten routes, from their flaws."""
    return stays(maze, walk(maze, answer)[0])


def stays(maze, path):
    """The moves of a walk's path that left the agent where it was (wall_moves, from the path)."""
    return sum(after == before for before, after in zip([maze.start] + path[:-1], path))


def score(maze, gold, diamonds, lava, bonus):
    """Counts collected on an arriving route -> [completion, gold, diamond, avoid_lava]."""
    totals = [len(maze.find(x)) for x in "GDL"]
    shares = [n / t if t else 0.0 for n, t in zip((gold, diamonds), totals)]
    shares.append(1 - lava / totals[2] if totals[2] else 1.0)
    return np.array([1.0] + [min(1.0, s * s * (1.5 if bonus else 1)) for s in shares], np.float32)


def route_reward(maze, answer):
    """Any answer -> its (4,) reward vector: zeros unless it arrives; a tile counts once."""
    path, reached = walk(maze, answer)
    if not reached:
        return np.zeros(4, dtype=np.float32)
    tiles = [maze.rows[r][c] for r, c in set(path)]
    return score(maze, *(tiles.count(x) for x in "GDL"), "B" in tiles)


def achievable(maze):
    """Every reward vector some arriving route within the budget earns: exact, a BFS over (cell,
    items collected) layer by layer in numpy (items are at most 16 tiles)."""
    items = maze.find("GDLB")  # a state's mask has a bit per item tile
    places = maze.find(".SEGDLB")  # every cell the agent can stand on
    index = {cell: i for i, cell in enumerate(places)}
    nxt = np.array([[index[step(maze.rows, x, letter)] for x in places] for letter in MOVES])
    bit = np.array([1 << items.index(x) if x in items else 0 for x in places], dtype=np.int64)
    width = 1 << len(items)  # a state is place index * width + mask
    goal = index[maze.exit]
    seen = np.zeros(len(places) * width, dtype=bool)
    layer = np.array([index[maze.start] * width], dtype=np.int64)
    finals = set()  # the masks of the routes that arrived
    seen[layer] = True
    for _ in range(maze.budget):
        cell, mask = np.divmod(layer, width)
        states = [n * width + (mask | bit[n]) for n in (nxt[move][cell] for move in range(4))]
        states = np.unique(np.concatenate(states))
        arrived = states // width == goal  # the exit ends a route: nothing continues from it
        finals.update((states[arrived] % width).tolist())
        layer = states[~arrived & ~seen[states]]
        seen[layer] = True
    groups = [sum(1 << i for i, (r, c) in enumerate(items) if maze.rows[r][c] == x) for x in "GDLB"]
    vectors = [score(maze, *(bin(f & g).count("1") for g in groups)) for f in finals]
    return np.unique(np.array(vectors).reshape(-1, 4), axis=0)


def pareto_front(problem):
    """The undominated achievable reward vectors (P, 4): every weighting's best routes are here."""
    v = achievable(maze_of(problem))
    dominated = [((v >= x).all(1) & (v > x).any(1)).any() for x in v]
    return v[~np.array(dominated, dtype=bool)]


@functools.lru_cache(maxsize=4096)
def optimum_scalar(problem, weights=None):
    """The best fixed scalarization any route reaches (the mean, or the weighted sum `weights`)."""
    front = pareto_front(problem).astype(np.float64)
    return float(weighted_sum(front, list(weights) if weights else None).max())


def _leg(maze, cell, target, rng, blocked):
    """The letters of a shortest path cell -> target, ties broken at random; None if none."""
    dist = distances(maze.rows, target, blocked=set(blocked) - {cell})
    letters = []
    while cell in dist and cell != target:
        options = [x for x in MOVES if dist.get(step(maze.rows, cell, x), FAR) == dist[cell] - 1]
        letters.append(rng.choice(options))
        cell = step(maze.rows, cell, letters[-1])
    return letters if cell == target else None


def _route(maze, waypoints, rng, avoid):
    """Shortest legs through the waypoints to the exit (an int: that many random moves); None when a
    leg is impossible or the route passes the exit early."""
    cell = maze.start
    letters = []
    for target in list(waypoints) + [maze.exit]:
        if isinstance(target, int):  # a wander: that many random moves
            leg = [rng.choice("UDLR") for _ in range(target)]
        else:  # the exit may end only the last leg: blocked unless it is this leg's target
            exit_unless_target = {maze.exit} - {target}
            leg = _leg(maze, cell, target, rng=rng, blocked=set(avoid) | exit_unless_target)
        if leg is None:
            return None
        for x in leg:
            cell = step(maze.rows, cell, x)
            if cell == maze.exit and target != maze.exit:
                return None
        letters += leg
    return "".join(letters)


def demonstrate(maze, rng, noise):
    """A route of a family drawn at random, with probability `noise` one flaw (a detour, a few
    random moves, a corner missed). It always arrives within the budget: the last resort, the
    straight lava-free route, fits in every maze the generator keeps."""
    drawn = rng.choice(["gold", "diamond", "bonus", "straight"])
    corner = {"gold": maze.gold_corner, "diamond": maze.diamond_corner}.get(drawn)
    plan = [corner or CENTER] if drawn != "straight" else []
    plans = [plan]  # tried in order: a flawed plan goes in front
    lava = maze.find("L")
    at = rng.randint(0, len(plan))  # where a flaw goes in the plan
    if rng.random() < noise:
        flaw = rng.choice([rng.choice(maze.find(".GDLB")), rng.randint(2, 4)])  # an int: a wander
        flawed = plan[:at] + [flaw] + plan[at:]
        missed = [rng.choice(zone(maze.rows, corner))] if corner else flawed
        plans.insert(0, rng.choice([flawed, missed]))
    avoid = lava if rng.random() < 0.5 else []
    for waypoints, keep_off in [(p, avoid) for p in plans] + [([], lava)]:
        route = _route(maze, waypoints, rng, avoid=keep_off)
        if route is not None and len(route) <= maze.budget and walk(maze, route)[1]:
            return route
    raise AssertionError("unreachable: the generator keeps a lava-free route within the budget")


def with_cells(maze, route):
    """A route's letters, each followed by the cell the move reaches ("RD" -> "R01D11" from S at
    (0, 0)): the route carries its own position, the walk and the reward are unchanged."""
    cell = maze.start
    out = []
    for letter in route:
        cell = step(maze.rows, cell, letter)
        out.append(f"{letter}{cell[0]}{cell[1]}")
    return "".join(out)


def family(maze, path):
    """A walk's family: the one corner zone it enters, else "bonus" if it passes the center, else
    "direct" (a walk through both zones, which cannot arrive, is no corner's)."""
    corners = (("gold", maze.gold_corner), ("diamond", maze.diamond_corner))
    hits = [k for k, x in corners if x and set(zone(maze.rows, x)) & set(path)]
    return hits[0] if len(hits) == 1 else "bonus" if CENTER in path else "direct"


def route_families(problem, answers):
    """The conflict as numbers: the share of answers that arrive, their moves into a wall per
    answer, and the share of each family (walks that stop short count too)."""
    maze = maze_of(problem)
    walks = [walk(maze, answer) for answer in answers]
    names = [family(maze, path) for path, _ in walks]
    shares = {k: names.count(k) / len(answers) for k in FAMILY_COLORS}
    arrive = sum(reached for _, reached in walks) / len(answers)
    bumps = sum(stays(maze, path) for path, _ in walks) / len(answers)
    return {"exit": arrive, "wall_moves": bumps, **shares}


def corner_coverage(problem, answers):
    """Whether a pool holds an arriving route through each corner: {"gold": bool, "diamond": bool}.
    A pool that covers both can serve either trade-off; a collapsed one covers one or none."""
    maze = maze_of(problem)
    walks = [walk(maze, answer) for answer in answers]
    arrived = {family(maze, path) for path, reached in walks if reached}
    return {"gold": "gold" in arrived, "diamond": "diamond" in arrived}


def canonical(maze, cell, first="gold"):
    """A cell in the maze turned so that S is top left, E bottom right and the `first` corner (gold
    or diamond) top right, the other bottom left (a mirror, then a transpose): every maze's routes
    can then be laid on one map."""
    r, c = cell
    if maze.start[1] != 0:  # S top right: mirror left to right
        c = SIZE - 1 - c
    corner = maze.gold_corner if first == "gold" else maze.diamond_corner
    return (c, r) if corner[0] != 0 else (r, c)  # mirroring keeps rows: (0, 8) or (8, 0)


def favorite_corner(maze, walks):
    """The corner most of a pool's arriving walks pass: "gold" or "diamond" (gold on a tie)."""
    names = [family(maze, path) for path, reached in walks if reached]
    return "diamond" if names.count("diamond") > names.count("gold") else "gold"


def visit_map(problem, answers):
    """(SIZE, SIZE): the share of answers whose walk enters each cell, the maze turned so that S is
    top left, E bottom right and the pool's favorite corner top right. A pool that keeps to one
    corner leaves the bottom left empty; one that covers both fills both corners."""
    maze = maze_of(problem)
    walks = [walk(maze, answer) for answer in answers]
    first = favorite_corner(maze, walks)
    visits = np.zeros((SIZE, SIZE))
    for path, _ in walks:
        for r, c in {canonical(maze, x, first) for x in [maze.start] + path}:
            visits[r, c] += 1
    return visits / max(1, len(answers))


# a walk's color says its family: by the gold corner, the diamond corner, the bonus, or none
MARK_NAMES = ["start", "exit", "gold", "diamond", "lava", "bonus"]  # S E G D L B
MARK_COLORS = ["green", "black", "gold", "deepskyblue", "red", "purple"]
FAMILY_COLORS = {"gold": "darkorange", "diamond": "royalblue", "bonus": "purple", "direct": "grey"}


def family_walks(maze, answers):
    """{family: (its most common arriving walk, the share of answers that arrive by it)}."""
    walks = {}
    for answer in answers:
        path, reached = walk(maze, answer)
        if reached:  # one walk: the cells visited, a bump's repeat dropped
            visited = tuple(x for x, _ in groupby([maze.start] + path))
            walks.setdefault(family(maze, path), Counter())[visited] += 1
    return {k: (c.most_common(1)[0][0], c.total() / len(answers)) for k, c in walks.items()}


def draw_maze(ax, problem, answers):
    """One maze, walls in black, and each family's most common arriving walk drawn once, as wide as
    the share of answers that arrive by that family."""
    maze = maze_of(problem)
    ax.imshow([[float(x == "#") for x in row] for row in maze.rows], cmap="Greys", vmin=0, vmax=1)
    shares = family_walks(maze, answers)
    for i, (name, (visited, share)) in enumerate(sorted(shares.items(), key=lambda x: -x[1][1])):
        shift = 0.08 * (i - 1.5)  # side by side: families that share a corridor stay visible
        rows, cols = np.array(visited).T + shift
        ax.plot(
            cols,
            rows,
            color=FAMILY_COLORS[name],
            lw=1 + 10 * share,
            alpha=0.8,
            solid_capstyle="round",
        )
    for char, marker, color in zip("SEGDLB", "^XoDs*", MARK_COLORS):  # on top of the routes
        for r, c in maze.find(char):
            ax.plot(c, r, marker=marker, color=color, ms=7, mec="white", ls="none", zorder=3)
    arrive = sum(share for _, share in shares.values())
    words = [f"{k} {shares[k][1]:.0%}" for k in FAMILY_COLORS if k in shares]
    ax.set_xlabel(f"{arrive:.0%} arrive\n" + " ".join(words), fontsize=7)
    grid_lines(ax)


def grid_lines(ax):
    """Thin lines between the cells, and no ticks: a cell is a square you can count."""
    ax.set_xticks(np.arange(-0.5, SIZE), minor=True)
    ax.set_yticks(np.arange(-0.5, SIZE), minor=True)
    ax.grid(which="minor", color="0.8", lw=0.5)
    ax.tick_params(which="both", length=0)
    ax.set(xticks=[], yticks=[])


def draw_visits(ax, visits):
    """The share of routes entering each cell over many mazes, each turned by visit_map: S top left,
    E bottom right, the pool's favorite corner's zone top right (framed black), the other corner's
    bottom left (framed grey)."""
    ax.imshow(visits, cmap="magma_r", vmin=0, vmax=1)
    for corner, color in (((0, SIZE - 1), "black"), ((SIZE - 1, 0), "grey")):
        near = [x for x in cells(OPEN, ".") if abs(x[0] - corner[0]) + abs(x[1] - corner[1]) <= 2]
        rows, cols = np.array(near).T
        ax.plot(cols, rows, "s", ms=11, mfc="none", mec=color, mew=1.5)
    ax.plot(0, 0, "^", color="green", ms=8, mec="white")
    ax.plot(SIZE - 1, SIZE - 1, "X", color="black", ms=8, mec="white")
    grid_lines(ax)


def conflict_figure(path, pools_by_method, problems, shown=2, visits_by_method=None):
    """The README's picture, a column per method: on top where its routes go over every maze
    (draw_visits), below `shown` single mazes with each family's walk (draw_maze).
    pools_by_method = {method: [answers of each problem]}; visits_by_method: the top row's maps
    when they come from more mazes than `problems` (the lab's result files)."""
    from matplotlib.figure import Figure  # only the picture needs matplotlib; no display needed
    from matplotlib.lines import Line2D

    methods = list(pools_by_method)
    fig = Figure(figsize=(2.5 * len(methods), 2.9 * (1 + shown) + 0.6), layout="constrained")
    axes = fig.subplots(1 + shown, len(methods), squeeze=False)
    for j, method in enumerate(methods):
        pools = pools_by_method[method]
        visits = (visits_by_method or {}).get(method)
        if visits is None:
            visits = np.mean([visit_map(p, pool) for p, pool in zip(problems, pools)], 0)
        draw_visits(axes[0][j], np.asarray(visits))
        axes[0][j].set_title(method, fontsize=10)
        for i in range(shown):
            draw_maze(axes[1 + i][j], problems[i], pools[i])
    axes[0][0].set_ylabel(
        "all mazes: favorite corner top right,\nthe other bottom left", fontsize=8
    )
    marks = [Line2D([], [], marker=m, color=c, ls="none") for m, c in zip("^XoDs*", MARK_COLORS)]
    routes = [Line2D([], [], color=c, lw=3) for c in FAMILY_COLORS.values()]
    labels = MARK_NAMES + [f"via {k}" for k in FAMILY_COLORS]
    fig.legend(
        marks + routes, labels, loc="outside lower center", ncol=5, fontsize=8, frameon=False
    )
    fig.savefig(path, dpi=90)
    return path


class MazeTask(Task):
    """A problem is a generator seed; an answer is a route."""

    def __init__(self, noise=0.25, heldout_fraction=0.25, reward_weights=(), cells=False):
        self.dim = 4
        self.noise = noise  # the share of demonstrations with a flaw (detour, wander, stop short)
        self.heldout_fraction = heldout_fraction
        # routes write each move with the cell it reaches ("R01"), one token each (tokenizer maze)
        self.cells = cells
        # every budget is <= MAX_BUDGET; + one end token (a move is one token, or one byte)
        self.max_answer_tokens = MAX_BUDGET + 1
        self.reward_weights = checked_weights(reward_weights, self.dim)  # None: the mean

    def problems(self, split, n, rng: random.Random):
        """n seeds the generator keeps, on the requested side of the fixed hash split."""
        out = []
        while len(out) < n:
            seed = rng.randrange(2**31)
            on_side = held_out(str(seed), self.heldout_fraction) == (split == "heldout")
            if on_side and generate(seed):
                out.append(seed)
        return out

    def prompt(self, problem, parents=None, goal=None):
        """'maze 26 S..#...../...': the budget, then the rows joined by '/' (97 characters)."""
        text = f"maze {maze_of(problem).budget} " + "/".join(maze_of(problem).rows)
        return text + (format_goal(goal) if goal is not None else "")

    def valid(self, problem, answer):
        """1..MAX_BUDGET moves: letters (U, D, L, R), each followed by two digits where the task
        writes cells (the digits are the policy's own belief: only the letters are walked)."""
        move = r"[UDLR]\d\d" if self.cells else "[UDLR]"
        return isinstance(answer, str) and bool(re.fullmatch(f"({move}){{1,{MAX_BUDGET}}}", answer))

    def reward(self, problem, answer):
        return route_reward(maze_of(problem), answer)

    def scalarize(self, r):
        return weighted_sum(r, self.reward_weights)

    def answer_key(self, answer):
        """The moves that count: U/D/L/R only, at most MAX_BUDGET (answer_key sees no maze, so it
        cannot tell two spellings of one walk apart, e.g. a bump added)."""
        return (
            "".join(x for x in answer if x in MOVES)[:MAX_BUDGET] if isinstance(answer, str) else ""
        )

    def outcome(self, problem, answer):
        """What the reward is computed from: whether the route arrived and which item tiles (gold,
        diamond, lava, bonus) it entered, e.g. "arrived G13 D71 B44". Two routes through different
        corridors that collect the same tiles are one outcome."""
        maze = maze_of(problem)
        path, reached = walk(maze, answer)
        tiles = sorted((r, c) for r, c in set(path) if maze.rows[r][c] in "GDLB")
        names = [f"{maze.rows[r][c]}{r}{c}" for r, c in tiles]
        return " ".join(["arrived" if reached else "stopped", *names])

    def vote_key(self, problem, answer):
        """Every route votes with its outcome (the reward is a function of it)."""
        return self.outcome(problem, answer)

    def solved(self, problem, reward):
        """The route reaches the maze's exact optimum under the fixed scalarization."""
        best = optimum_scalar(problem, self.reward_weights and tuple(self.reward_weights))
        return float(self.scalarize(np.asarray(reward, dtype=np.float64))) >= best - 1e-6

    def demonstration(self, problem, m, rng, parents=None):
        """m routes, each from a family drawn independently (a set may repeat a family)."""
        maze = maze_of(problem)
        routes = [demonstrate(maze, rng, self.noise) for _ in range(m)]
        return [with_cells(maze, route) for route in routes] if self.cells else routes
