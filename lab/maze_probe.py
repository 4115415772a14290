"""A probe (kept in history only, docs/RESULTS.md cites the commit): why the maze's warm start does
not arrive. Trains a warm start of configs/maze.yaml with `key=value` overrides (seed 0), samples 30
single answers on each of 40 TRAINING mazes (never held-out ones) and prints one JSON line: the
share of routes that arrive, moves into a wall per route, best@k under the mean, route families.
usage, from the repository root: python lab/maze_probe.py NAME [key=value ...]
variants by environment variable (each a change to the task's demonstrations or prompt):
  ANNOT=1 MAXTOK=75 (with tokenizer=numbers block_size=336): each move followed by the cell it
    reaches, two digits ("R01D11"; the reward reads the letters only);
  OPEN=1 (with ANNOT=1): then the open moves at that cell in lowercase; NOCELL=1: without the cell;
  CELLS=1: the prompt names every cell ("00S01.02#...");  EVAL_T=0.7: pools at that temperature."""

import os, random, sys, time, json

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import numpy as np, torch
import train, maze, search
from model import Tokenizer
from tasks import make_task
from warmstart import warm_start, warmstart_path

name, over = sys.argv[1], sys.argv[2:]
ANNOT = os.environ.get("ANNOT") == "1"
if ANNOT:  # each move followed by the cell it reaches, two digits (row, col)

    def annotate(mz, route):
        cell, out = mz.start, []
        for x in route:
            cell = maze.step(mz.rows, cell, x)
            out.append(x if os.environ.get("NOCELL") == "1" else f"{x}{cell[0]}{cell[1]}")
            if (
                os.environ.get("OPEN") == "1"
            ):  # then the open moves there, lowercase (walk skips them)
                out.append(
                    "".join(m.lower() for m in "UDLR" if maze.step(mz.rows, cell, m) != cell)
                )
        return "".join(out)

    def demonstration(self, problem, m, rng, parents=None):
        mz = maze.maze_of(problem)
        return [annotate(mz, maze.demonstrate(mz, rng, self.noise)) for _ in range(m)]

    def valid(self, problem, answer):
        import re

        return isinstance(answer, str) and re.fullmatch(r"([UDLR]\d\d){1,37}", answer) is not None

    maze.MazeTask.demonstration = demonstration
    maze.MazeTask.valid = valid
    _init = maze.MazeTask.__init__

    def init(self, *a, **k):
        _init(self, *a, **k)
        self.max_answer_tokens = int(os.environ.get("MAXTOK", 3 * 37 + 1))

    maze.MazeTask.__init__ = init
if os.environ.get("CELLS") == "1":  # the prompt names every cell: "00S01.02#..." (content lookup)

    def prompt(self, problem, parents=None, goal=None):
        mz = maze.maze_of(problem)
        return f"maze {mz.budget} " + "".join(
            f"{r}{c}{x}" for r, row in enumerate(mz.rows) for c, x in enumerate(row)
        )

    maze.MazeTask.prompt = prompt
cfg = train.resolve_config("configs/maze.yaml", over + [f"out_dir=out/maze_probe/{name}"])
cfg["warmstart_dir"] = cfg.get("warmstart_dir")
task = make_task(cfg["task"], **cfg["task_options"])
tok = Tokenizer(cfg["tokenizer"])
t0 = time.time()
model, path = warm_start(cfg, task, tok, "cpu", print)
t_warm = time.time() - t0
problems = task.problems("train", 40, random.Random(777))
if os.environ.get("EVAL_T"):  # sample the pools at another temperature (the authors': 0.7)
    _load = search.model_from_checkpoint
    search.model_from_checkpoint = lambda p: (
        lambda m, t, c, k: (m, t, dict(c, temperature=float(os.environ["EVAL_T"])), k)
    )(*_load(p))
res, rewards, answers = search.evaluate_checkpoint(path, problems, 30, seed=5, m=1, task=task)
# diagnosis: bumps, route lengths, what failing routes do
bumps = lens = 0
n = 0
short = []
fails = 0
dist_left = []
for p, pool in zip(problems, answers):
    mz = maze.maze_of(p)
    dist = maze.distances(mz.rows, mz.exit)
    for a in pool:
        cell = mz.start
        b = 0
        moves = [x for x in a if x in maze.MOVES][: mz.budget]
        for x in moves:
            nxt = maze.step(mz.rows, cell, x)
            b += nxt == cell
            cell = nxt
            if cell == mz.exit:
                break
        path, reached = maze.walk(mz, a)
        bumps += b
        lens += len(moves)
        n += 1
        if not reached:
            fails += 1
            short.append(mz.budget - len(moves))
            dist_left.append(dist.get(cell, 99))
out = dict(
    name=name,
    over=over,
    warm_s=round(t_warm),
    arrive=round(1 - fails / n, 3),
    bumps_per_route=round(bumps / n, 2),
    mean_len=round(lens / n, 1),
    fail_moves_left_median=float(np.median(short)) if short else 0,
    fail_dist_to_exit_median=float(np.median(dist_left)) if dist_left else 0,
    best=[round(x, 3) for x in res["best_at_k"]],
    ks=res.get("ks"),
)
fam = [maze.route_families(p, pool) for p, pool in zip(problems, answers)]
out["families"] = {k: round(float(np.mean([f[k] for f in fam])), 3) for k in fam[0]}
out["res_keys"] = sorted(res)[:30]
print(json.dumps(out))
os.makedirs("out/maze_probe", exist_ok=True)
open(f"out/maze_probe/{name}.json", "w").write(json.dumps(out) + "\n")
