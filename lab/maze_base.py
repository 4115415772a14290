"""
The maze's base policy: a long supervised run on the maze's demonstrations (both formats, one
route and three, each move written with its cell), the maze's stand-in for the paper's pretrained
model. The maze's RL runs start from the file it writes (bases/maze.pt): a short warm start walks
into walls (docs/RESULTS.md), and reading them takes tens of thousands of steps, hours on a CPU.

    python lab/maze_base.py --out bases/maze.pt --workers 7 --set device=cuda   # one GPU: minutes
    python lab/maze_base.py --out bases/maze.pt --measure heldout --eval-mazes 200
    python lab/maze_base.py --out bases/maze.pt --diagnose     # wall moves by place in the route

Settings are configs/maze.yaml's with `--set key=value` on top (model, sft_steps, sft_batch,
sft_lr, ...). Every step's demonstrations come from their own seeded draw, so the same settings
give the same data whatever the number of `--workers` (processes that build batches while the
model trains). Every `--eval-every` steps it samples single routes on TRAINING mazes and logs
the navigation (arrive, moves into a wall per route, each family's share); held-out mazes are
measured once, on the file, by `--measure`. Writes OUT (the weights, loadable as `warmstart_from`)
and OUT with .json (provenance: commit, settings, steps, seconds, machine, the navigation curve).
Deliberately left out: resuming, several GPUs, any choice made on held-out mazes.
"""

import argparse
import json
import multiprocessing
import os
import platform
import random
import subprocess
import sys
import time
from collections import deque

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np
import torch

import maze
import runfiles
import train
from config import make_task
from lab.stored import file_sha256
from model import Tokenizer, build_model
from policy import Policy
from rollouts import max_completion_tokens, sample_rollouts
from warmstart import (
    CapturedSFT,
    demo_nll,
    padded_demos,
    set_lr,
    sft_lr_at,
    sft_optimizer,
    sft_update,
    use_graph,
    warmstart_source,
)

# the settings a base keeps from configs/maze.yaml; the RL settings there are not the base's
BASE_CONFIG = "configs/maze.yaml"
NAVIGATION_SEED = 777  # the training mazes the curve is read on (never held-out ones)

_worker = {}  # a data worker's task, tokenizer and settings, set once per process


def _init_worker(cfg):
    torch.set_num_threads(1)
    _worker["cfg"] = cfg
    _worker["task"] = make_task(cfg["task"], **cfg["task_options"])
    _worker["tok"] = Tokenizer(cfg["tokenizer"])


def demo_batch(step):
    """The demonstrations of one step, from a draw of their own (the same whoever builds them)."""
    cfg = _worker["cfg"]
    rng = random.Random(f"maze-base-{cfg['seed']}-{step}")
    single_only = step < cfg["sft_single_first"] * cfg["sft_steps"]
    tensors = padded_demos(_worker["task"], _worker["tok"], cfg, rng, "cpu", single_only)
    return [t.numpy() for t in tensors]


def batches(cfg, workers, prefetch=64):
    """Step -> batch for every step of the run, built by `workers` processes (0: this one)."""
    if workers == 0:
        _init_worker(cfg)
        for step in range(cfg["sft_steps"]):
            yield demo_batch(step)
        return
    with multiprocessing.get_context("spawn").Pool(workers, _init_worker, (cfg,)) as pool:
        pending = deque(
            pool.apply_async(demo_batch, (s,)) for s in range(min(prefetch, cfg["sft_steps"]))
        )
        for step in range(cfg["sft_steps"]):
            batch = pending.popleft().get()
            if step + prefetch < cfg["sft_steps"]:
                pending.append(pool.apply_async(demo_batch, (step + prefetch,)))
            yield batch


def navigation(model, tok, task, cfg, problems, answers_per_maze, device, seed=0):
    """Single routes at temperature 1 on `problems` -> arrive, wall moves per route, family shares,
    mean score (every route scored as written)."""
    model.eval()
    # one route a rollout, at temperature 1
    policy = Policy(model, tok, device=device, cuda_graph=cfg["cuda_graph"]).seeded(seed)
    out = sample_rollouts(policy, task, problems, answers_per_maze, as_written=True)
    model.train()
    pools = [[rollout[0] for rollout in group] for group in out["answers"]]
    rows = [maze.route_families(p, pool) for p, pool in zip(problems, pools)]
    summary = {k: round(float(np.mean([r[k] for r in rows])), 4) for k in rows[0]}
    summary["mean_score"] = round(float(task.scalarize(out["rewards"]).mean()), 4)
    return summary


def machine():
    """A line naming this machine: the GPU if one is used, else the CPU model and its cores."""
    if torch.cuda.is_available():
        return torch.cuda.get_device_name(0)
    try:
        with open("/proc/cpuinfo") as f:
            name = next(line.split(":", 1)[1].strip() for line in f if "model name" in line)
    except (OSError, StopIteration):
        name = platform.processor() or "unknown CPU"
    return f"{name}, {os.cpu_count()} cores"


def commit():
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True)
        dirty = subprocess.run(["git", "status", "--porcelain"], capture_output=True, text=True)
        return out.stdout.strip() + ("+uncommitted" if dirty.stdout.strip() else "")
    except OSError:
        return "unknown"


def train_base(cfg, out, workers, eval_every, eval_mazes, max_minutes, log=print):
    """The long supervised run; writes `out` and its .json and returns the provenance."""
    device = (
        cfg["device"] if cfg["device"] != "auto" else "cuda" if torch.cuda.is_available() else "cpu"
    )
    torch.set_num_threads(cfg["threads"])
    task = make_task(cfg["task"], **cfg["task_options"])
    tok = Tokenizer(cfg["tokenizer"])
    torch.manual_seed(cfg["seed"])
    model = build_model(cfg["model"], cfg["block_size"], tok.vocab_size, device)
    capture = use_graph(cfg, device)
    opt = sft_optimizer(model, cfg, capturable=capture)
    graph = None
    if capture:
        completion_len = max_completion_tokens(task, cfg["answers_per_rollout"])
        prompt_len = cfg["block_size"] - completion_len
        graph = CapturedSFT(model, opt, cfg["sft_batch"], prompt_len, completion_len, tok.eos)
    problems = task.problems("train", eval_mazes, random.Random(NAVIGATION_SEED))
    size = f"{cfg['model']} ({model.num_params():,} parameters)"
    log(f"base: {size} on {device}, {cfg['sft_steps']} steps of {cfg['sft_batch']}")
    curve = []
    t0 = time.time()
    step = 0
    for step, batch in enumerate(batches(cfg, workers)):
        set_lr(opt, sft_lr_at(cfg, step))
        p, pm, c, cm = (torch.from_numpy(x) for x in batch)
        if graph is not None and graph.fits(p, c):
            loss = graph(p, pm, c, cm)
        else:
            p, pm, c, cm = (t.to(device) for t in (p, pm, c, cm))
            logp, _ = model.score(p, pm, c, cm)
            loss = demo_nll(logp, cm)
            sft_update(model, opt, loss)
        done = step + 1
        timed_out = max_minutes and time.time() - t0 > 60 * max_minutes
        if done % eval_every == 0 or done == cfg["sft_steps"] or timed_out:
            point = {
                "step": done,
                "seconds": round(time.time() - t0),
                "loss": round(float(loss.detach()), 4),
            }
            point.update(navigation(model, tok, task, cfg, problems, 5, device))
            curve.append(point)
            log(json.dumps(point))
        if timed_out:
            log(f"base: stopped at step {done} of {cfg['sft_steps']} (--max-minutes {max_minutes})")
            break
    if not all(bool(torch.isfinite(p).all()) for p in model.parameters()):
        raise FloatingPointError("the base diverged (non-finite weights); nothing was written")
    provenance = {
        "steps": done,
        "seconds": round(time.time() - t0),
        "workers": workers,
        "navigation_on_training_mazes": curve,
    }
    return write_base(model, cfg, out, provenance, device, log)


def write_base(model, cfg, out, provenance, device, log=print):
    """The base's weights at `out` (a warm-start checkpoint) and its provenance beside it."""
    provenance = {
        **provenance,
        "command": "python " + " ".join(sys.argv),
        "commit": commit(),
        "planned_steps": cfg["sft_steps"],
        "machine": machine(),
        "device": device,
        "torch": str(torch.__version__),
        "settings": {k: cfg[k] for k in BASE_KEYS},
    }
    state = {k: v.cpu() for k, v in model.state_dict().items()}
    cfg_saved = dict(cfg, device="auto", warmstart_from="")
    checkpoint = {"model": state, "model_config": vars(model.cfg), "config": cfg_saved}
    checkpoint.update(source=warmstart_source(), provenance=provenance)
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    runfiles.atomic_save(checkpoint, out)
    provenance["sha256"] = file_sha256(out)
    with open(os.path.splitext(out)[0] + ".json", "w") as f:
        json.dump(provenance, f, indent=1)
    megabytes = os.path.getsize(out) / 1e6
    log(f"base: wrote {out} ({megabytes:.1f} MB, sha256 {provenance['sha256'][:12]})")
    return provenance


# what shapes a base: the settings the provenance records
BASE_KEYS = (
    "task", "task_options", "seed", "model", "block_size", "tokenizer", "sft_steps", "sft_batch",
    "sft_lr", "sft_single_first", "answers_per_rollout", "dtype",
)  # fmt: skip


def measure(path, split, mazes, answers_per_maze, seed=0):
    """A base file's navigation on `mazes` of a split (the issue's targets are on held-out ones)."""
    model, tok, cfg, _ = runfiles.model_from_checkpoint(path)
    task = make_task(cfg["task"], **cfg["task_options"])
    problems = task.problems(split, mazes, random.Random(NAVIGATION_SEED + 1))
    return navigation(model, tok, task, cfg, problems, answers_per_maze, "cpu", seed)


def diagnose(path, mazes=60, answers_per_maze=10):
    """Where a base's routes go wrong, on training mazes: the share of moves into a wall by the
    move's place in the route (rising: the model loses track of where it is), and the wall moves
    of the routes that arrive and of those that do not."""
    model, tok, cfg, _ = runfiles.model_from_checkpoint(path)
    task = make_task(cfg["task"], **cfg["task_options"])
    problems = task.problems("train", mazes, random.Random(NAVIGATION_SEED + 2))
    policy = Policy(model, tok).seeded(0)  # one route a rollout, temperature 1, on the CPU
    out = sample_rollouts(policy, task, problems, answers_per_maze)
    moves, bumps = np.zeros(10), np.zeros(10)
    arrived, failed = [], []
    for problem, group in zip(problems, out["answers"]):
        m = maze.maze_of(problem)
        for (answer,) in group:
            path_cells, reached = maze.walk(m, answer)
            for i, (before, after) in enumerate(zip([m.start] + path_cells, path_cells)):
                moves[i // 4] += 1
                bumps[i // 4] += before == after
            (arrived if reached else failed).append(maze.wall_moves(m, answer))
    rate = {
        f"moves {4 * i + 1}-{4 * i + 4}": round(b / n, 3)
        for i, (b, n) in enumerate(zip(bumps, moves))
        if n
    }
    return {
        "wall_move_share_by_place": rate,
        "wall_moves_of_arriving_routes": round(float(np.mean(arrived)), 3) if arrived else None,
        "wall_moves_of_failing_routes": round(float(np.mean(failed)), 3) if failed else None,
        "arrive": round(len(arrived) / (len(arrived) + len(failed)), 3),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="bases/maze.pt")
    parser.add_argument("--workers", type=int, default=1, help="processes building batches")
    parser.add_argument("--eval-every", type=int, default=5000, help="steps between curve points")
    parser.add_argument("--eval-mazes", type=int, default=100, help="training mazes, 5 routes each")
    parser.add_argument("--max-minutes", type=float, default=0, help="stop early (0: never)")
    parser.add_argument("--measure", metavar="SPLIT", help="measure OUT on SPLIT's mazes instead")
    parser.add_argument("--diagnose", action="store_true", help="where OUT's routes go wrong")
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    if args.diagnose:
        result = diagnose(args.out)
        print(json.dumps(result))
        return result
    if args.measure:
        result = measure(args.out, args.measure, args.eval_mazes, 5)
        print(json.dumps({"split": args.measure, "mazes": args.eval_mazes, **result}))
        return result
    # the committed base's length and batch (configs/maze.yaml gives its model and encoding)
    defaults = ["sft_steps=22000", "sft_batch=64", "warmstart_from="]
    cfg = train.resolve_config(BASE_CONFIG, defaults + args.set)
    return train_base(
        cfg, args.out, args.workers, args.eval_every, args.eval_mazes, args.max_minutes
    )


if __name__ == "__main__":
    main()
