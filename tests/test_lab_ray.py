"""lab/ray_jobs.py with the real Ray: a local cluster on 127.0.0.1 (a head node without CPUs, where
the driver attaches, and two nodes of one CPU each) runs a slice of the quick experiment, and its
result files are byte for byte the local pool's (lab/same_results.differences); a node lost
mid-run and the experiment still ends with the same files, the run resumed from its checkpoint with
each step logged once; a job's own error stops the command in one line; a node that cannot see
out_dir is refused before any job starts; without Ray, --ray is one line naming the pip command.
The same slice with --workers 0 (every job in the command's own process) writes the same files too.
One cluster serves the module (starting one takes ~20 s on the 2-core VM)."""

import contextlib
import json
import os
import signal
import sys
import threading
import time

import pytest
import yaml

from config import ConfigError, make_task
from lab import experiment, ray_jobs
from lab.same_results import differences
from lab.workers import Job

# the slice of `lab/experiment.py --quick` every run here makes: persona's warm start (shortened),
# one GRPO run of 6 steps (a checkpoint every 2: a node can be lost mid-run) and the pools of all
# three, on two held-out problems
SLICE = dict(tasks=["persona"], algos=["grpo"], quick=True)
SETTINGS = {"out_dir": "out", "warmstart_dir": "out/warmstart", "sft_steps": 20, "steps": 6}
SETTINGS.update(ckpt_every=2, eval_every=3, eval_problems=2, pool_problems=2)
RUN = os.path.join("out", "runs", "persona-grpo-s0")


@pytest.fixture(scope="module", autouse=True)
def no_report():
    """The report and its figures are drawn from the result files compared here: not drawn."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(experiment.tables, "write_report", lambda *args, **kwargs: [])
        patch.setattr(experiment.tables, "summary_markdown", lambda results: "")
        yield


def test_without_ray_the_command_says_which_pip_command_in_one_line(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    with pytest.raises(ConfigError, match="pip install ray"):
        ray_jobs.connect(None, str(tmp_path))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    # before ray is imported: every node stays on 127.0.0.1 (ray_jobs.connect sets the same)
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    pytest.importorskip("ray", reason="Ray is not installed (pip install ray)")
    from ray.cluster_utils import Cluster

    saved = {k: os.environ.get(k) for k in ("PYTHONHASHSEED", "OMP_WAIT_POLICY")}
    # the nodes' workers inherit these, as the local pool's do (lab/same_results.quick_run's)
    os.environ.update(PYTHONHASHSEED="0", OMP_WAIT_POLICY="PASSIVE")
    node = dict(node_ip_address="127.0.0.1", object_store_memory=80 * 2**20)
    # a lost node is noticed in about 3 s rather than Ray's default 30
    system = {"health_check_period_ms": 1000, "health_check_failure_threshold": 3}
    cluster = Cluster(
        initialize_head=True,
        head_node_args=dict(num_cpus=0, include_dashboard=False, _system_config=system, **node),
    )
    workers = [cluster.add_node(num_cpus=1, **node) for _ in range(2)]
    cluster.wait_for_nodes()
    # joined once: every command here reuses the connection and its warm worker processes
    joined = ray_jobs.connect(cluster.address, str(tmp_path_factory.mktemp("probe")))
    yield cluster, workers
    joined.close()
    cluster.shutdown()
    for key, value in saved.items():
        os.environ.pop(key, None) if value is None else os.environ.__setitem__(key, value)


@pytest.fixture(scope="module")
def local_run(tmp_path_factory):
    """The slice through the local pool of two worker processes: the files to match."""
    os.environ.update(PYTHONHASHSEED="0", OMP_WAIT_POLICY="PASSIVE")
    where = tmp_path_factory.mktemp("local")
    here = os.getcwd()
    os.chdir(where)  # the same relative out_dir on every side: configs name it
    try:
        experiment.run_headline(dict(SETTINGS), workers=2, **SLICE)
    finally:
        os.chdir(here)
    return where / "out"


def run_on_ray(cluster, where, monkeypatch, during=None):
    """The slice on the cluster, from `where`; during(): run in a thread meanwhile."""
    monkeypatch.chdir(where)
    thread = threading.Thread(target=during, daemon=True) if during else None
    if thread:
        thread.start()
    experiment.run_headline(dict(SETTINGS), ray=cluster.address, **SLICE)
    if thread:
        thread.join(timeout=5)
    return where / "out"


def test_the_slice_on_two_nodes_writes_the_local_pools_files(
    cluster, local_run, tmp_path, monkeypatch
):
    out = run_on_ray(cluster[0], tmp_path, monkeypatch)
    assert differences(str(local_run), str(out)) == []
    assert not os.path.exists(os.path.join(out, "runs", "persona-grpo-s0", ray_jobs.ATTEMPT_FILE))


def test_workers_0_runs_the_slice_in_this_process_and_writes_the_pools_files(
    local_run, tmp_path, monkeypatch
):
    """--workers 0: every job in the command's own process, one after another: the same files."""
    monkeypatch.chdir(tmp_path)
    experiment.run_headline(dict(SETTINGS), workers=0, **SLICE)
    assert differences(str(local_run), str(tmp_path / "out")) == []


def test_a_jobs_own_error_stops_the_command_with_it(cluster, tmp_path, monkeypatch):
    class Progress:  # what run_jobs tells it, unused here
        workers = 2

        def finish(self, *args):
            pass

        def tick(self, running):
            pass

    monkeypatch.chdir(tmp_path)
    jobs = ray_jobs.connect(cluster[0].address, str(tmp_path), say=lambda msg: None)
    job = Job("oracle", ("nowhere", "optimum", 0), make_task, ("nowhere",), lambda result: None)
    try:
        # not retried: the same error, raised as the pool raises it (main prints it in a line)
        with pytest.raises(ValueError, match="unknown task 'nowhere'"):
            jobs.run_jobs([job], None, Progress())
    finally:
        jobs.close()


def test_a_node_that_cannot_see_out_dir_is_refused_before_any_job(cluster, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    # the driver's marker written nowhere the nodes look: as out_dir on a disk of the driver's own
    monkeypatch.setattr(ray_jobs, "write_marker", lambda path, token: open(path, "w").close())
    with pytest.raises(ConfigError, match=r"cannot see .*: out_dir must be on a filesystem"):
        experiment.run_headline(dict(SETTINGS), ray=cluster[0].address, **SLICE)
    assert not (tmp_path / "out" / "runs").exists()  # nothing ran
    # on the node itself: a missing working folder, a marker it cannot read
    probe = ray_jobs.probe_node
    assert probe("/nowhere/marker", "t", "/nowhere") == {"missing": "/nowhere"}
    assert not probe(str(tmp_path / "absent"), "t", str(tmp_path))["sees_out_dir"]


def test_a_node_lost_mid_run_and_the_experiment_ends_with_the_same_files(
    cluster, local_run, tmp_path, monkeypatch
):
    ray_cluster, workers = cluster
    run = tmp_path / RUN
    lost = []

    def lose_the_training_node():
        """Once the run has a checkpoint, stop its worker where it is (the run folder's lock names
        the worker's pid), remove the node that runs it (the node's raylet is the worker's parent)
        and kill the worker with it, as a machine that goes away takes every process along."""
        end = time.time() + 120
        while time.time() < end and not (run / "ckpt.pt").exists():
            time.sleep(0.01)
        worker = holder(run / ".lock")
        os.kill(worker, signal.SIGSTOP)  # mid-run however slowly this thread gets here
        lost.append(json.loads((run / "timing.jsonl").read_text().splitlines()[-1])["step"])
        raylets = {w.all_processes["raylet"][0].process.pid: w for w in workers}
        pid = worker
        while pid not in raylets:  # up from the worker to its node's raylet
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        ray_cluster.remove_node(raylets[pid], allow_graceful=False)
        with contextlib.suppress(ProcessLookupError):
            os.kill(worker, signal.SIGKILL)

    out = run_on_ray(ray_cluster, tmp_path, monkeypatch, during=lose_the_training_node)
    assert lost and lost[0] < SETTINGS["steps"]  # lost mid-run, after a checkpoint
    assert "resumed from step" in (run / "log.txt").read_text()
    logged = (run / "metrics.jsonl").read_text().splitlines()
    steps = [json.loads(line)["step"] for line in logged if '"train"' in line]
    assert steps == list(range(1, SETTINGS["steps"] + 1))  # every step once
    # config.yaml says that the run was resumed, as after Ctrl-C and the same command (resume is
    # one of the settings that never change a result); every other file is the local pool's
    config = "runs/persona-grpo-s0/config.yaml"
    assert differences(str(local_run), str(out)) == [f"differs: {config}"]
    resumed, fresh = (yaml.safe_load((d / config).read_text()) for d in (out, local_run))
    assert resumed.pop("resume") and not fresh.pop("resume")
    assert resumed == fresh


def holder(lock_file):
    """The pid a run folder's lock names (its holder writes it a moment after taking it)."""
    for _ in range(100):
        try:
            return json.loads(lock_file.read_text())["pid"]
        except (OSError, ValueError, KeyError):
            time.sleep(0.05)
    raise AssertionError(f"{lock_file} names no holder")
