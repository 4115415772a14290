"""A probe (history only): do the cells an annotated warm start writes (ANNOT=1 in maze_probe.py)
match where its moves go? usage: python lab/maze_probe_cells.py out/warmstart/<its file>.pt"""

import os, sys, random, re, json

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ["ANNOT"] = "1"
import numpy as np, maze, search
from tasks import make_task

path = sys.argv[1]
task = make_task("maze")
task.max_answer_tokens = 75
problems = task.problems("train", 20, random.Random(777))
res, rewards, answers = search.evaluate_checkpoint(path, problems, 10, seed=5, m=1, task=task)
stats = dict(moves=0, written_ok=0, written_free=0, bump=0, bump_written_as_moved=0)
for p, pool in zip(problems, answers):
    mz = maze.maze_of(p)
    for a in pool:
        cell = free = mz.start
        for x, r, c in re.findall(r"([UDLR])(\d)(\d)", a):
            nxt = maze.step(mz.rows, cell, x)
            want = (int(r), int(c))
            dr, dc = maze.MOVES[x]
            free_next = (cell[0] + dr, cell[1] + dc)
            stats["moves"] += 1
            stats["written_ok"] += want == nxt
            stats["written_free"] += want == free_next
            if nxt == cell:
                stats["bump"] += 1
                stats["bump_written_as_moved"] += want == free_next
            cell = nxt
            if cell == mz.exit:
                break
print(stats)
print(answers[0][:3])
for p, pool in list(zip(problems, answers))[:2]:
    mz = maze.maze_of(p)
    print("\n".join(mz.rows))
    for a in pool[:4]:
        cell = mz.start
        line = []
        for x, r, c in re.findall(r"([UDLR])(\d)(\d)", a):
            cell = maze.step(mz.rows, cell, x)
            line.append(
                f"{x}{r}{c}" + ("" if (int(r), int(c)) == cell else f"[{cell[0]}{cell[1]}]")
            )
        print(" ".join(line))
