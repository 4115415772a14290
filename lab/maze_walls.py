"""A probe (history only; docs/RESULTS.md cites the commit): a maze checkpoint's routes on 40
TRAINING mazes (never held-out ones), the same draw as maze_probe.py: the share that arrive, moves
into a wall per route, best@k under the mean. usage: python lab/maze_walls.py CHECKPOINT..."""

import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import maze
import search
from tasks import make_task

task = make_task("maze")
problems = task.problems("train", 40, random.Random(777))
for path in sys.argv[1:]:
    result, rewards, answers = search.evaluate_checkpoint(path, problems, 30, seed=5, task=task)
    walls = routes = arrived = 0
    for problem, pool in zip(problems, answers):
        m = maze.maze_of(problem)
        for answer in pool:
            cell = m.start
            for letter in [x for x in answer if x in maze.MOVES][: m.budget]:
                after = maze.step(m.rows, cell, letter)
                walls += after == cell
                cell = after
                if cell == m.exit:
                    break
            routes += 1
            arrived += maze.walk(m, answer)[1]
    print(
        f"{path}: m {result['m']}, arrive {arrived / routes:.3f}, into a wall / route "
        f"{walls / routes:.2f}, best@k {[round(x, 3) for x in result['best_at_k']]}"
    )
