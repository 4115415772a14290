"""Two CPU processes with the gloo backend: replicas stay identical and metrics are reduced.

The torchrun runs: ONE launch of two ranks runs this file as a script, which trains each case of
RUNS in turn (train.train, as train.py's command line does, without the held-out report rank 0 makes
after it), so the launcher, the rendezvous and `import train` are paid once; the cases share the
process group (torchrun's store serves one). Held-out evals at the first and last step only.
The warm start is 40 SFT steps, not 80: enough for persona answers that earn a gradient (16 are
not), and rank 0 still trains and caches it while rank 1 waits, then loads it."""

import json
import os
import subprocess
import sys

import pytest
import torch.distributed as dist
import torch.multiprocessing as mp

from distributed import reduce_metrics

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COMMON = ["quiet=true", "threads=1", "device=cpu", "sft_steps=40", "eval_every=0"]
# the second case adds parent_replay's loss, computed outside the DDP wrapper, to the same backward:
# that loss moves the weights at every step, so its warm start needs no answers that score
RUNS = {"extra0": [], "extra1": ["task=code", "parent_replay=0.5", "sft_steps=4"]}


@pytest.fixture(scope="module")
def torchrun(tmp_path_factory):
    """The folder that holds one run per case of RUNS, all trained by one torchrun launch."""
    root = tmp_path_factory.mktemp("torchrun")
    # the ranks import this file's modules from the repository, as pytest's conftest.py lets it
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE", "PYTHONPATH": ROOT}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node=2",
            os.path.abspath(__file__),
            str(root),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    # the ranks' own messages (a C++ abort prints one line) come before the launcher's long report
    assert result.returncode == 0, result.stderr[:3000] + "\n...\n" + result.stderr[-1000:]
    return root


@pytest.mark.parametrize("case", list(RUNS))
def test_torchrun_two_ranks_stay_in_sync(torchrun, case):
    run = torchrun / case / "run"
    log = (run / "log.txt").read_text()
    assert "ranks in sync: True" in log
    lines = (run / "metrics.jsonl").read_text().splitlines()
    train = [json.loads(line) for line in lines if '"train"' in line]
    assert len(train) == 4  # one writer: no duplicated lines
    # the updates moved the weights: a replica left behind would have shown
    assert any(m["grad_norm"] > 0 for m in train), train
    if "parent_replay=0.5" in RUNS[case]:
        assert all(m["replay_loss"] > 0 for m in train), train
    assert (run / "final.pt").exists()


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
        # forked, not spawned: the workers start without importing torch again
        mp.start_processes(
            _reduce_worker, args=(2, port, out), nprocs=2, join=True, start_method="fork"
        )
        results = dict(out)
    for rank in (0, 1):
        r = results[rank]
        assert abs(r["reward_scalar"] - 0.4) < 1e-9  # mean of .2 and .6
        assert r["tokens"] == 210  # summed
        assert r["reward_per_component"] == [0.5, 1.0]


if __name__ == "__main__":  # one rank of the torchrun launch above: every case in turn
    import train

    # a second init_process_group after destroy_process_group waits forever on torchrun's store:
    # the first case's group stays for the next, and the last case destroys it as train.py does
    init, destroy = dist.init_process_group, dist.destroy_process_group
    dist.init_process_group = lambda *a, **k: None if dist.is_initialized() else init(*a, **k)
    root = sys.argv[1]
    for i, (case, extra) in enumerate(RUNS.items()):
        dist.destroy_process_group = destroy if i == len(RUNS) - 1 else lambda *a, **k: None
        out = os.path.join(root, case)
        settings = [f"out_dir={out}/run", f"warmstart_dir={out}/ws", *COMMON, *extra]
        train.train(train.resolve_config("configs/tiny.yaml", settings))
