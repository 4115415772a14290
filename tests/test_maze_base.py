"""The maze's committed base (bases/maze.pt, made by lab/maze_base.py): it navigates on training
mazes, its provenance names how it was made, configs/maze.yaml starts from it, and the script that
makes it runs end to end at a tiny size. Leaves out the long run itself (minutes on a GPU)."""

import hashlib
import json
import os
import random
import sys

import maze
import train
from config import make_task
from policy import Policy
from rollouts import sample_rollouts
from runfiles import model_from_checkpoint

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BASE = os.path.join(ROOT, "bases", "maze.pt")
sys.path.append(
    os.path.join(ROOT, "lab")
)  # after the root: lab/exploration.py is not exploration.py


def test_the_base_navigates_training_mazes():
    """Single routes at temperature 1 on 12 training mazes: the issue's targets (85% arrive, at
    most 0.5 moves into a wall a route) hold here too, not only on the held-out mazes."""
    model, tok, cfg, _ = model_from_checkpoint(BASE)
    task = make_task(cfg["task"], **cfg["task_options"])
    problems = task.problems("train", 12, random.Random(2024))
    policy = Policy(model, tok).seeded(0)  # one route a rollout, temperature 1
    out = sample_rollouts(policy, task, problems, 6, as_written=True)
    pools = [[rollout[0] for rollout in group] for group in out["answers"]]
    rows = [maze.route_families(p, pool) for p, pool in zip(problems, pools)]
    arrive = sum(r["exit"] for r in rows) / len(rows)
    wall_moves = sum(r["wall_moves"] for r in rows) / len(rows)
    assert arrive >= 0.85 and wall_moves <= 0.5, (arrive, wall_moves)
    families = {k: sum(r[k] for r in rows) for k in ("gold", "diamond", "bonus", "direct")}
    assert min(families.values()) > 0  # every route family stays in its pools


def test_the_base_file_is_what_its_provenance_says():
    with open(os.path.join(ROOT, "bases", "maze.json")) as f:
        provenance = json.load(f)
    with open(BASE, "rb") as f:
        assert hashlib.sha256(f.read()).hexdigest() == provenance["sha256"]
    assert os.path.getsize(BASE) < 5e6
    for key in ("command", "commit", "steps", "seconds", "machine", "settings"):
        assert provenance[key]
    cfg = train.resolve_config(os.path.join(ROOT, "configs", "maze.yaml"))
    assert cfg["warmstart_from"] == "bases/maze.pt"
    for key in ("model", "tokenizer", "block_size", "task_options"):
        assert cfg[key] == provenance["settings"][key], key


def test_a_maze_base_is_made_loaded_and_measured(tmp_path):
    import maze_base

    out = str(tmp_path / "base.pt")
    provenance = maze_base.main(
        ["--out", out, "--eval-every", "3", "--eval-mazes", "2", "--set", "sft_steps=6",
         "sft_batch=4", "model=nano"]
    )  # fmt: skip
    assert [p["step"] for p in provenance["navigation_on_training_mazes"]] == [3, 6]
    with open(out.replace(".pt", ".json")) as f:
        assert json.load(f)["steps"] == 6
    cfg = train.resolve_config(
        os.path.join(ROOT, "configs", "maze.yaml"),
        [f"warmstart_from={out}", "model=nano", f"out_dir={tmp_path}/run", "steps=1"],
    )
    cfg.update(
        prompts_per_step=2, group_size=2, eval_every=0, eval_problems=1, pool_n=3, quiet=True
    )
    train.train(cfg)  # RL starts from the file, as a maze run starts from bases/maze.pt
    measured = maze_base.main(["--out", out, "--measure", "train", "--eval-mazes", "2"])
    assert 0 <= measured["exit"] <= 1


def test_a_base_of_another_size_is_refused_in_one_line(tmp_path):
    import pytest

    cfg = train.resolve_config(
        os.path.join(ROOT, "configs", "maze.yaml"), ["model=nano", f"out_dir={tmp_path}/run"]
    )
    with pytest.raises(ValueError, match="model, block_size, tokenizer must be the checkpoint's"):
        train.train(dict(cfg, quiet=True))
