"""How many lab jobs can share one GPU before they slow each other: K training runs started at once
on the same GPU (K = 1, 2, 4, 8, ...), each its own process with one torch thread as a pool worker
or a Ray task runs it, and each run's median seconds a step (its timing.jsonl, the first steps left
out). Per K: the median run's step time, its slowdown against K = 1, and the steps a second of all K
together. Sharing pays while the aggregate grows; a run's own step time says when its neighbours
start to cost it (an earlier H100 run with 14 workers went slower than the VM's cores).
For lab/ray_jobs.py's --gpu-share: 1/K for the largest K before the slowdown passes --slower.

    python tools/gpu_share.py --out out/gpu_share       # on a lent GPU (no new K after 480 s)
    python tools/gpu_share.py --device cpu --ks 1 2 --steps 12 --out out/gpu_share_dry \
        --set sft_steps=20                                             # a dry run on the CPU

Writes OUT/gpu_share.json and prints a table. The runs share one warm start (trained first, its
time not counted). Deliberately left out: pools and searches (they run on the CPU), several GPUs,
MPS or MIG partitions, and the lab's full jobs (a run here is shortened to --steps).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def command(out, seed, args, steps):
    return [
        sys.executable,
        os.path.join(ROOT, "train.py"),
        "--config",
        os.path.join(ROOT, "configs", f"{args.task}.yaml"),
        "--set",
        f"algo={args.algo}",
        f"device={args.device}",
        f"steps={steps}",
        f"seed={seed}",
        f"out_dir={out}",
        f"warmstart_dir={os.path.join(args.out, 'warmstart')}",
        "eval_every=0",
        "ckpt_every=0",
        "quiet=true",
        "threads=1",
        "overwrite=true",
        *args.set,
    ]


def step_seconds(run_dir, skip):
    """A run's median seconds a step, its first `skip` steps (start-up, capture) left out."""
    with open(os.path.join(run_dir, "timing.jsonl")) as f:
        steps = [json.loads(line)["step_s"] for line in f][skip:]
    return statistics.median(steps)


def k_at_once(k, args, env):
    """K runs started at once -> {k, wall_s, step_s: each run's median, sorted}; None if one
    failed."""
    runs = [os.path.join(args.out, f"k{k}", f"run{i}") for i in range(k)]
    start = time.time()
    procs = [
        subprocess.Popen(command(r, i, args, args.steps), env=env, cwd=ROOT)
        for i, r in enumerate(runs)
    ]
    codes = [proc.wait() for proc in procs]
    if any(codes):
        print(f"K = {k}: a run failed ({codes}); stopping", flush=True)
        return None
    each = sorted(step_seconds(r, args.skip) for r in runs)
    return {"k": k, "wall_s": round(time.time() - start, 1), "step_s": each}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="out/gpu_share")
    p.add_argument("--device", default="cuda")
    p.add_argument("--task", default="persona")
    p.add_argument("--algo", default="vpo")
    p.add_argument("--ks", nargs="*", type=int, default=[1, 2, 4, 8, 12, 16])
    p.add_argument("--steps", type=int, default=60, help="RL steps a run")
    p.add_argument("--skip", type=int, default=5, help="first steps left out of a run's median")
    p.add_argument("--slower", type=float, default=1.25, help="the slowdown that counts as cost")
    p.add_argument("--budget-s", type=float, default=480.0, help="stop starting new K after this")
    p.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="train.py settings")
    args = p.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", OMP_NUM_THREADS="1")
    t0 = time.time()
    # the shared warm start, trained once (a 1-step run makes it)
    first = os.path.join(args.out, "warm")
    subprocess.run(command(first, 0, args, 1), env=env, check=True, cwd=ROOT)
    print(f"warm start ready ({time.time() - t0:.0f} s)", flush=True)
    found = {"device": args.device, "task": args.task, "algo": args.algo, "steps": args.steps}
    found["cpus"] = os.cpu_count()
    if args.device == "cuda":
        import torch

        found["gpu"] = torch.cuda.get_device_name(0)
    rows = []
    for k in args.ks:
        if time.time() - t0 > args.budget_s:
            print(f"budget spent: K = {k} and above not run", flush=True)
            break
        row = k_at_once(k, args, env)
        if row is None:
            break
        rows.append(row)
        each = row["step_s"]
        median = statistics.median(each)
        base = statistics.median(rows[0]["step_s"])
        print(
            f"K = {k}: median run {median:.3f} s a step ({median / base:.2f}x K = 1), "
            f"{k / median:.1f} steps a second together, wall {row['wall_s']:.0f} s",
            flush=True,
        )
    found["rows"] = rows
    with open(os.path.join(args.out, "gpu_share.json"), "w") as f:
        json.dump(found, f, indent=1)
    if not rows:
        return
    base = statistics.median(rows[0]["step_s"])
    print("\n| K runs at once | median s a step | slowdown | steps a second, all runs |")
    print("|---|---|---|---|")
    for row in rows:
        median = statistics.median(row["step_s"])
        print(f"| {row['k']} | {median:.3f} | {median / base:.2f}x | {row['k'] / median:.1f} |")
    free = [r["k"] for r in rows if statistics.median(r["step_s"]) <= args.slower * base]
    best = max(rows, key=lambda r: r["k"] / statistics.median(r["step_s"]))["k"]
    print(
        f"\nup to K = {max(free)} runs share the {args.device} within {args.slower:.2f}x of one "
        f"alone; the most steps a second at K = {best}"
    )


if __name__ == "__main__":
    main()
