"""The quick experiment on a local Ray cluster of 1 and of 2 one-CPU nodes on this machine (and the
local pool with as many workers), one run each, side by side: what a second node buys, and what
Ray costs over the pool. Every node binds 127.0.0.1; the head holds no CPU (the driver attaches
there, as on a real cluster's head).

    python tools/ray_nodes.py        # 4 runs of the quick experiment (~15 min on the 2-core VM)
    python tools/ray_nodes.py --nodes 2 --experiment --quick --tasks persona

Prints a line per run with its wall time (the whole command: starting Ray's driver, the probe, the
jobs, the report). Each run writes out/ray_nodes/ afresh.
Deliberately left out: several machines (this is one machine's cores, split into nodes).
"""

import argparse
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(argv, extra):
    command = [sys.executable, "lab/experiment.py", *argv, *extra]
    command += ["--set", "out_dir=out/ray_nodes", "warmstart_dir=out/ray_nodes/warmstart"]
    command += ["overwrite=true"]
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", PYTHONHASHSEED="0")
    start = time.time()
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"{' '.join(command)} failed:\n{done.stderr[-2000:]}")
    return time.time() - start


def on_cluster(n, argv):
    """The experiment on a fresh local cluster of n one-CPU nodes -> its wall seconds."""
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # before ray: every node on 127.0.0.1
    from ray.cluster_utils import Cluster

    node = dict(node_ip_address="127.0.0.1", object_store_memory=80 * 2**20)
    cluster = Cluster(
        initialize_head=True, head_node_args=dict(num_cpus=0, include_dashboard=False, **node)
    )
    try:
        for _ in range(n):
            cluster.add_node(num_cpus=1, **node)
        cluster.wait_for_nodes()
        return run(argv, ["--ray", cluster.address])
    finally:
        cluster.shutdown()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", nargs="*", type=int, default=[1, 2])
    p.add_argument("--experiment", nargs=argparse.REMAINDER, default=["--quick"])
    args = p.parse_args()
    for n in args.nodes:
        pool = run(args.experiment, ["--workers", str(n)])
        print(f"local pool, {n} worker(s): {pool:.0f} s", flush=True)
        ray = on_cluster(n, args.experiment)
        print(f"Ray, {n} one-CPU node(s): {ray:.0f} s ({ray / pool:.2f}x the pool)", flush=True)


if __name__ == "__main__":
    main()
