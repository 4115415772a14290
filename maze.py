"""
The maze task (the VPO paper's grid world): walk from S to the exit E within a step budget, picking
up gold (one corner), diamonds (the opposite corner) and the bonus cell B (the centre), off lava.
The reward vector [completion, gold, diamond, avoid_lava] in [0,1]^4 is zero unless the route
reaches the exit; g = (gold share)^2, d likewise, a = (1 - lava share)^2, each x1.5 (clipped to 1)
once B is visited ("convex_bonus"). The fixed scalarisation is the mean (or `reward_weights`).

A problem is a seed: `generate(seed)` builds the 9x9 maze or rejects the seed (None). The budget is
the longer corner route + 7, and a kept maze has no route within it through both corners, gold
first or diamond first (the authors check one order): you can never have both, a route must
choose. A stray tile of each can still fit (squared, it is worth little). Demonstrations know the
route families (gold, diamond, bonus, straight) but walk them imperfectly: shortest legs to the
landmark, not a sweep of every tile. `pareto_front` is the exact optimum; `draw_routes` the picture.

Deliberately left out: other grid sizes in the generator, moving hazards, partial credit for not
arriving, any use of `parents` (the search's mutation prompt).
"""

import functools
import random
from collections import Counter, deque
from dataclasses import dataclass
from itertools import islice

import numpy as np

from rewards import checked_weights, format_goal, heldout, weighted_sum

SIZE, CENTRE = 9, (4, 4)
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
        return cells(self.rows, chars)

    @functools.cached_property
    def start(self):
        return self.find("S")[0]

    @functools.cached_property
    def exit(self):
        return self.find("E")[0]

    @functools.cached_property
    def totals(self):
        return [len(self.find(x)) for x in "GDL"]


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
    dist, queue = {source: 0}, deque([source])
    while queue:
        cell = queue.popleft()
        for letter in MOVES:
            nxt = step(rows, cell, letter)
            if nxt not in dist and nxt not in blocked:
                dist[nxt] = dist[cell] + 1
                queue.append(nxt)
    return dist


def zone(rows, corner):
    """The open cells within Manhattan distance 2 of a corner, less S, E and the centre."""
    near = [(r, c) for r, c in cells(rows, ".GDLB") if abs(r - corner[0]) + abs(c - corner[1]) <= 2]
    return [x for x in near if x != CENTRE]


# ---- the generator ---------------------------------------------------------------------------


def _prim(rng):
    """A Prim's maze on cells: open a random frontier wall with exactly one open neighbour."""
    grid = [["#"] * SIZE for _ in range(SIZE)]
    r, c = rng.randrange(SIZE), rng.randrange(SIZE)
    grid[r][c] = "."
    frontier = _around((r, c))
    while frontier:
        r, c = frontier.pop(rng.randrange(len(frontier)))
        if grid[r][c] == "#" and sum(grid[a][b] == "." for a, b in _around((r, c))) == 1:
            grid[r][c] = "."
            frontier += [(a, b) for a, b in _around((r, c)) if grid[a][b] == "#"]
    walls = [w for w in cells(grid, "#") if sum(grid[a][b] == "." for a, b in _around(w)) >= 2]
    rng.shuffle(walls)  # loops: a maze with a single path would leave no route to choose
    for r, c in walls[: rng.randint(18, 28)]:
        grid[r][c] = "."
    return grid


def _around(cell):
    r, c = cell
    return [(r + a, c + b) for a, b in MOVES.values() if 0 <= r + a < SIZE and 0 <= c + b < SIZE]


@functools.lru_cache(maxsize=2**16)  # mazes recur across problems(), prompts and rewards
def generate(seed):
    """The maze of a seed, or None where the seed is rejected (the caller tries another)."""
    rng = random.Random(seed)
    grid, far = _prim(rng), SIZE - 1
    start, end = rng.choice([((0, 0), (far, far)), ((0, far), (far, 0))])
    corners = [(0, far - start[1]), (far, far - end[1])]
    rng.shuffle(corners)
    gold, diamond = corners
    for r, c in (start, end, gold, diamond, CENTRE):
        grid[r][c] = "."
    grid[start[0]][start[1]], grid[end[0]][end[1]] = "S", "E"
    d = {x: distances(grid, x) for x in (start, gold, diamond)}

    def dist(a, b):
        return d[a].get(b, FAR)

    via = [dist(start, x) + dist(x, end) for x in (gold, diamond)]
    budget = max(via) + 7
    both = min(dist(start, x) + dist(x, y) + dist(y, end) for x, y in (corners, corners[::-1]))
    if budget >= FAR or budget > MAX_BUDGET or both <= budget or CENTRE not in d[start]:
        return None
    zones = [zone(grid, x) for x in corners]
    if min(len(z) for z in zones) < 3:
        return None
    for z, char in zip(zones, "GD"):
        for r, c in rng.sample(z, rng.randint(3, min(5, len(z)))):
            grid[r][c] = char
    grid[CENTRE[0]][CENTRE[1]] = "B"
    free = [(r, c) for r, c in cells(grid, ".") if 2 <= r <= 6 and 2 <= c <= 6]
    lava = rng.sample(free, min(rng.randint(3, 5), len(free)))
    for r, c in lava:
        grid[r][c] = "L"
    if distances(grid, start, blocked=set(lava)).get(end, FAR) > budget:
        return None
    return Maze(tuple("".join(row) for row in grid), budget, gold, diamond)


def maze_of(problem):
    """A problem (a seed, or a hand-built Maze) -> its Maze."""
    if isinstance(problem, Maze):
        return problem
    maze = generate(int(problem))
    if maze is None:
        raise ValueError(f"seed {problem} makes no maze (the generator rejects it)")
    return maze


# ---- routes and rewards ----------------------------------------------------------------------


def walk(maze, answer):
    """A route -> (the cells it enters in order, whether it reached the exit). Only U/D/L/R count
    (any other character is skipped), only the first `budget` of them; the exit ends the route."""
    moves = (x for x in answer if x in MOVES) if isinstance(answer, str) else ()
    cell, path = maze.start, []
    for letter in islice(moves, maze.budget):  # lazily: a hostile answer may be megabytes long
        cell = step(maze.rows, cell, letter)
        path.append(cell)
        if cell == maze.exit:
            return path, True
    return path, False


def walk_key(maze, answer):
    """The walk an answer makes: the letters of the moves that moved the agent (no bumps)."""
    path, _ = walk(maze, answer)
    letter = {delta: x for x, delta in MOVES.items()}
    pairs = zip([maze.start] + path, path)
    return "".join(letter[(b[0] - a[0], b[1] - a[1])] for a, b in pairs if a != b)


def score(maze, gold, diamonds, lava, bonus):
    """Counts collected on an arriving route -> [completion, gold, diamond, avoid_lava]."""
    totals = maze.totals
    shares = [n / t if t else 0.0 for n, t in zip((gold, diamonds), totals)]
    shares.append(1 - lava / totals[2] if totals[2] else 1.0)
    boost = 1.5 if bonus else 1.0
    return np.array([1.0] + [min(1.0, s * s * boost) for s in shares], dtype=np.float32)


def route_reward(maze, answer):
    """Any answer -> its (4,) reward vector; zeros unless the route reaches the exit."""
    path, reached = walk(maze, answer)
    if not reached:
        return np.zeros(4, dtype=np.float32)
    # a tile counts once however often it is entered
    tiles = [maze.rows[r][c] for r, c in set(path)]
    return score(maze, *(tiles.count(x) for x in "GDL"), "B" in tiles)


def achievable(maze):
    """Every reward vector some arriving route within the budget earns: exact, a BFS over (cell,
    items collected) layer by layer in numpy (items are at most 16 tiles)."""
    items = maze.find("GDLB")
    cells = maze.find(".SEGDLB")
    index = {cell: i for i, cell in enumerate(cells)}
    nxt = np.array([[index[step(maze.rows, x, m)] for x in cells] for m in MOVES])
    bit = np.array([1 << items.index(x) if x in items else 0 for x in cells], dtype=np.int64)
    width, goal = 1 << len(items), index[maze.exit]
    seen = np.zeros(len(cells) * width, dtype=bool)
    layer, finals = np.array([index[maze.start] * width], dtype=np.int64), set()
    seen[layer] = True
    for _ in range(maze.budget):
        cell, mask = np.divmod(layer, width)
        states = [n * width + (mask | bit[n]) for n in (nxt[m][cell] for m in range(4))]
        states = np.unique(np.concatenate(states))
        arrived = states // width == goal  # the exit ends a route: nothing continues from it
        finals.update((states[arrived] % width).tolist())
        layer = states[~arrived & ~seen[states]]
        seen[layer] = True
    kinds = [maze.rows[r][c] for r, c in items]
    counted = [
        [sum(f >> i & 1 for i, k in enumerate(kinds) if k == x) for x in "GDLB"] for f in finals
    ]
    return np.unique(np.array([score(maze, *c) for c in counted]).reshape(-1, 4), axis=0)


def pareto_front(problem):
    """The undominated achievable reward vectors (P, 4): every weighting's best route and every
    best set of routes can be chosen from them."""
    v = achievable(maze_of(problem))
    dominated = [((v >= x).all(1) & (v > x).any(1)).any() for x in v]
    return v[~np.array(dominated, dtype=bool)]


# ---- demonstrations --------------------------------------------------------------------------


def _leg(maze, cell, target, rng, blocked):
    """The letters of a shortest path cell -> target, ties broken at random; None if none."""
    dist = distances(maze.rows, target, blocked=set(blocked) - {cell})
    if cell not in dist:
        return None
    letters = []
    while cell != target:
        options = [x for x in MOVES if dist.get(step(maze.rows, cell, x), FAR) == dist[cell] - 1]
        letters.append(rng.choice(options))
        cell = step(maze.rows, cell, letters[-1])
    return letters


def _route(maze, waypoints, rng, avoid):
    """Shortest legs through the waypoints to the exit (an int: that many random moves); None when a
    leg is impossible or the route passes the exit early."""
    cell, letters = maze.start, []
    for target in list(waypoints) + [maze.exit]:
        if isinstance(target, int):
            leg = [rng.choice("UDLR") for _ in range(target)]
        else:
            blocked = set(avoid) | ({maze.exit} if target != maze.exit else set())
            leg = _leg(maze, cell, target, rng, blocked)
            if leg is None:
                return None
        for x in leg:
            cell = step(maze.rows, cell, x)
            if cell == maze.exit and target != maze.exit:
                return None
        letters += leg
    return "".join(letters)


def _noisy(maze, family, waypoints, rng):
    """The family's waypoints with one flaw: a detour, a few random moves or a corner missed."""
    kind = rng.choice(["detour", "wander", "short"])
    if kind == "short" and family in ("gold", "diamond"):
        return [rng.choice(zone(maze.rows, waypoints[0]))]
    extra = rng.choice(maze.find(".GDLB")) if kind == "detour" else rng.randint(2, 4)
    at = rng.randint(0, len(waypoints))
    return waypoints[:at] + [extra] + waypoints[at:]


def demonstrate(maze, rng, noise):
    """A route of a family drawn at random, walked imperfectly; it always arrives within the budget
    (the last resort, the straight lava-free route, fits in every maze the generator keeps)."""
    family = rng.choice(["gold", "diamond", "bonus", "straight"])
    landmark = {"gold": maze.gold_corner, "diamond": maze.diamond_corner, "bonus": CENTRE}
    waypoints = [landmark[family]] if landmark.get(family) is not None else []
    avoid = maze.find("L") if rng.random() < 0.5 else []
    plans = [_noisy(maze, family, waypoints, rng)] if rng.random() < noise else []
    for plan, keep_off in [(p, avoid) for p in plans + [waypoints]] + [([], maze.find("L"))]:
        route = _route(maze, plan, rng, keep_off)
        if route is not None and len(route) <= maze.budget and walk(maze, route)[1]:
            return route
    raise AssertionError("unreachable: the generator keeps a lava-free route within the budget")


# ---- what routes a pool takes, and its picture ----------------------------------------------


def route_families(problem, answers):
    """The conflict as a number: the share of answers whose walk reaches the exit, enters the gold
    corner's zone, the diamond corner's zone, the bonus cell (walks that stop short count too)."""
    maze, shares = maze_of(problem), dict.fromkeys(["exit", "gold", "diamond", "bonus"], 0.0)
    zones = [
        set(zone(maze.rows, x)) if x else set() for x in (maze.gold_corner, maze.diamond_corner)
    ]
    for answer in answers:
        path, reached = walk(maze, answer)
        bonus = any(maze.rows[r][c] == "B" for r, c in path)
        for key, hit in zip(shares, [reached, zones[0] & set(path), zones[1] & set(path), bonus]):
            shares[key] += bool(hit) / len(answers)
    return shares


COLOURS = ["green", "black", "gold", "deepskyblue", "red", "purple"]  # of S, E, G, D, L, B


def draw_routes(ax, problem, answers):
    """The maze and the distinct walks of `answers` on a matplotlib axis: a line per walk, as wide
    as the number of answers taking it; walks that never reach the exit faint and dashed."""
    maze = maze_of(problem)
    walls = np.array([[x == "#" for x in row] for row in maze.rows], dtype=float)
    ax.imshow(walls, cmap="Greys", vmin=0, vmax=1.4)
    walks = Counter(walk_key(maze, a) for a in answers)
    for i, (key, count) in enumerate(walks.most_common()):
        path, reached = walk(maze, key)
        shift = 0.06 * (i % 5 - 2)  # side by side: routes that share a corridor stay visible
        rows, cols = np.array([maze.start] + path).T + shift
        width = 1 + 5 * count / max(walks.values())
        style = dict(alpha=0.7, linestyle="-") if reached else dict(alpha=0.3, linestyle="--")
        ax.plot(cols, rows, color=f"C{i % 10}", linewidth=width, **style)
    for char, marker, colour in zip("SEGDLB", "^XoDs*", COLOURS):  # on top of the routes
        for r, c in maze.find(char):
            ax.plot(
                c, r, marker=marker, color=colour, markersize=8, mec="white", ls="none", zorder=3
            )
    ax.set(xticks=[], yticks=[])


def route_figure(path, problems, pools_by_method):
    """A PNG, a row per maze and a column per method: pools_by_method = {method: [answers of each
    problem]}, e.g. {"GRPO": [...], "VPO": [...]}."""
    from matplotlib.figure import Figure  # only the picture needs matplotlib; no display needed

    methods = list(pools_by_method)
    fig = Figure(figsize=(2.6 * len(methods), 2.6 * len(problems)))
    axes = fig.subplots(len(problems), len(methods), squeeze=False)
    for i, problem in enumerate(problems):
        for j, method in enumerate(methods):
            draw_routes(axes[i][j], problem, pools_by_method[method][i])
            axes[0][j].set_title(method)
        axes[i][0].set_ylabel(f"maze {problem}" if not isinstance(problem, Maze) else "maze")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    return path


# ---- the task --------------------------------------------------------------------------------


class MazeTask:
    """The interface every task offers (rewards.PersonaTask): a problem is a generator seed."""

    def __init__(self, noise=0.25, heldout_fraction=0.25, reward_weights=()):
        self.dim = 4
        self.noise = noise  # the share of demonstrations with a flaw (detour, wander, stop short)
        self.heldout_fraction = heldout_fraction
        self.max_answer_tokens = MAX_BUDGET + 1  # every budget is <= MAX_BUDGET; + one end token
        self.reward_weights = checked_weights(reward_weights, self.dim)  # None: the mean

    def problems(self, split, n, rng: random.Random):
        """n seeds the generator keeps, on the requested side of the fixed hash split."""
        out = []
        while len(out) < n:
            seed = rng.randrange(2**31)
            side = heldout(str(seed), self.heldout_fraction) == (split == "heldout")
            if side and generate(seed) is not None:
                out.append(seed)
        return out

    def prompt(self, problem, parents=None, goal=None):
        """'maze 26 S..#...../...': the budget, then the rows joined by '/' (97 characters)."""
        maze = maze_of(problem)
        text = f"maze {maze.budget} " + "/".join(maze.rows)
        return text + (format_goal(goal) if goal is not None else "")

    def valid(self, problem, answer):
        """1..budget move letters (U, D, L, R)."""
        ok = isinstance(answer, str) and 1 <= len(answer) <= maze_of(problem).budget
        return ok and all(x in MOVES for x in answer)

    def reward(self, problem, answer):
        return route_reward(maze_of(problem), answer)

    def scalarize(self, r):
        return weighted_sum(r, self.reward_weights)

    def answer_key(self, answer, problem=None):
        """The moves that count (letters only, at most MAX_BUDGET); given the problem, the walk
        itself (walk_key), so routes that are the same walk are one answer."""
        if not isinstance(answer, str):
            return ""
        if problem is None:
            return "".join(x for x in answer if x in MOVES)[:MAX_BUDGET]
        return walk_key(maze_of(problem), answer)

    def demonstration(self, problem, m, rng, parents=None):
        """m routes, each from a family drawn independently (a set may repeat a family)."""
        maze = maze_of(problem)
        return [demonstrate(maze, rng, self.noise) for _ in range(m)]
