"""Two CPU processes with the gloo backend: replicas stay identical and metrics are reduced."""

import os
import subprocess
import sys

import pytest
import torch.distributed as dist
import torch.multiprocessing as mp

from distributed import reduce_metrics

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# the second case adds parent_replay's loss, computed outside the DDP wrapper, to the same backward
@pytest.mark.parametrize("extra", [[], ["task=code", "parent_replay=0.5"]])
def test_torchrun_two_ranks_stay_in_sync(tmp_path, extra):
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node=2",
            "train.py",
            "--config",
            "configs/tiny.yaml",
            "--set",
            f"out_dir={tmp_path}/run",
            f"warmstart_dir={tmp_path}/ws",
            "quiet=true",
            "threads=1",
            "device=cpu",
            *extra,
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    # the ranks' own messages (a C++ abort prints one line) come before the launcher's long report
    assert result.returncode == 0, result.stderr[:3000] + "\n...\n" + result.stderr[-1000:]
    log = (tmp_path / "run" / "log.txt").read_text()
    assert "ranks in sync: True" in log
    lines = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    assert sum('"train"' in line for line in lines) == 4  # one writer: no duplicated lines
    assert (tmp_path / "run" / "final.pt").exists()


def _reduce_worker(rank, world, port, out):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    local = {
        "reward_scalar": 0.2 + 0.4 * rank,
        "tokens": 100 + 10 * rank,
        "reward_per_component": [rank, 1.0],
        "clip_frac": 0.0,
    }
    reduced = reduce_metrics(local, world, "cpu")
    out[rank] = reduced
    dist.destroy_process_group()


def test_metrics_are_averaged_and_tokens_summed():
    with mp.Manager() as manager:
        out = manager.dict()
        port = 29500 + os.getpid() % 1000
        mp.spawn(_reduce_worker, args=(2, port, out), nprocs=2, join=True)
        results = dict(out)
    for rank in (0, 1):
        r = results[rank]
        assert abs(r["reward_scalar"] - 0.4) < 1e-9  # mean of .2 and .6
        assert r["tokens"] == 210  # summed
        assert r["reward_per_component"] == [0.5, 1.0]
