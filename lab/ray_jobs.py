"""The lab's jobs on a Ray cluster (`--ray [ADDRESS]`): the Jobs lab/workers.py's pool runs, each as
a Ray task with one CPU (and a share of a GPU for warm starts and training runs where the cluster
has GPUs), queued longest first, with the pool's plan, progress line and ETA, Ctrl-C and the same
command continuing, and the pool's errors. experiment.py and exploration.py pick it with --ray;
without it Ray is never imported.

The cluster: ADDRESS, else RAY_ADDRESS, else one started for the command on 127.0.0.1. Every node
must see the repository and out_dir at the same paths as the driver (a shared filesystem such as
NFS): a job reads and writes the run folders there, as a pool worker does. Before any job starts a
probe task on each node checks that it sees a file the driver just wrote in out_dir and runs the
same code (the *.py files of the repository and lab/), and the command refuses in one line if not.
A job whose node is lost runs again elsewhere (Ray's max_retries); a training run then resumes from
its last checkpoint (train.py's resume), so metrics.jsonl holds each step once. A job's own error
is not retried: it stops the command, as in the pool.
Deliberately left out: shipping the code or out_dir to the nodes (runtime_env working_dir, object
storage), Ray's autoscaler and dashboard, actors, and retrying a job's own error.
"""

import glob
import hashlib
import ipaddress
import logging
import os
import socket
import time
import uuid

import torch

from config import ConfigError
from lab.stored import run_status
from lab.workers import longest_first, machine

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_RETRIES = 3  # runs of a job after its node or worker process is lost
PROBE_TIMEOUT_S = 120.0  # for every node's storage check together
# a warm start's and a training run's share of a GPU, where the cluster has GPUs (--gpu-share):
# lab/workers.default_workers shares one GPU among up to 8 such jobs
GPU_SHARE = 1 / 8
GPU_KINDS = ("warm", "train")
# the environment the lab's own commands set, passed on to every job
PASSED_ENV = ("OMP_WAIT_POLICY", "PYTHONHASHSEED")
INSTALL = "pip install ray"


def is_loopback(address):
    """Whether a Ray address ("host:port") names this machine's loopback interface."""
    host = address.rsplit(":", 1)[0].strip("[]")
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def connect(address, out_dir, cap=None, gpu_share=None, say=print):
    """Join the Ray cluster at `address` (None or "": RAY_ADDRESS, else a local one started for this
    command on 127.0.0.1 with `cap` CPUs; "auto": the one `ray start` started on this machine),
    check that every node sees out_dir and runs this code -> a RayJobs."""
    if gpu_share is not None and not 0 <= gpu_share <= 1:
        raise ConfigError(f"--gpu-share {gpu_share:g}: a share of one GPU, from 0 to 1")
    address = address or os.environ.get("RAY_ADDRESS") or None
    if address is None or is_loopback(address):
        # Ray turns 127.0.0.1 into the machine's network address unless told it is alone
        os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    try:
        import ray
    except ImportError:
        raise ConfigError(f"--ray needs Ray, which is not installed here: {INSTALL}") from None

    if ray.is_initialized():  # this process joined a cluster before (a notebook, the tests)
        jobs = RayJobs(ray, gpu_share, owned=False)
        jobs.check_nodes(out_dir)
        say(f"running the jobs on the Ray cluster this process joined: {jobs.summary(out_dir)}")
        return jobs
    env = {k: os.environ[k] for k in PASSED_ENV if k in os.environ}
    # every node imports the lab from the same path as the driver (checked by the probe)
    env["PYTHONPATH"] = os.pathsep.join([ROOT, *filter(None, [os.environ.get("PYTHONPATH")])])
    options = dict(logging_level=logging.WARNING, runtime_env={"env_vars": env})
    try:
        if address is None:
            # "local": a new cluster, never one a `ray start` left on this machine
            ray.init(
                address="local",
                num_cpus=cap,
                include_dashboard=False,
                _node_ip_address="127.0.0.1",
                **options,
            )
        else:
            ray.init(address=address, **options)
    except (ConnectionError, ValueError, RuntimeError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ConfigError(f"--ray {address}: cannot join the Ray cluster ({first})") from None
    jobs = RayJobs(ray, gpu_share, owned=True)
    try:
        jobs.check_nodes(out_dir)
    except BaseException:
        jobs.close()
        raise
    where = f"the Ray cluster at {address}" if address else "a Ray cluster started on 127.0.0.1"
    say(f"running the jobs on {where}: {jobs.summary(out_dir)}")
    return jobs


class RayJobs:
    """A joined cluster: run_jobs, lab/workers.run_jobs on its CPUs; submit, one call as a
    concurrent.futures.Future (lab/exploration's measurements); close."""

    def __init__(self, ray, gpu_share, owned):
        self.ray = ray
        self.owned = owned  # joined by connect, so left by close
        self.gpus = ray.cluster_resources().get("GPU", 0.0)
        self.gpu_share = (GPU_SHARE if gpu_share is None else gpu_share) if self.gpus else 0.0
        self.nodes = []
        self.machines = []  # what each node's numbers depend on (workers.machine)
        self.task = ray.remote(run_job)
        self.options = dict(num_cpus=1, max_retries=MAX_RETRIES, retry_exceptions=False)

    def summary(self, out_dir):
        gpus = f", {self.gpus:g} GPUs ({self.gpu_share:g} of one per run)" if self.gpus else ""
        return (
            f"{len(self.nodes)} node(s), {self.cpus()} CPUs{gpus}; every node sees {out_dir}/ and "
            "runs this code"
        )

    def cpus(self):
        """The CPUs of the cluster's live nodes now (a node lost or added shows here)."""
        return int(self.ray.cluster_resources().get("CPU", 0)) or 1

    def check_nodes(self, out_dir):
        """One probe task on each live node: does it see the marker the driver wrote in out_dir,
        from the same working folder, and hold the same code? Refuse in one line if one does not."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        token = uuid.uuid4().hex
        marker = os.path.join(os.path.abspath(out_dir), f".ray_probe_{token}")
        write_marker(marker, token)
        self.nodes = [n for n in self.ray.nodes() if n["Alive"]]
        probe = self.ray.remote(probe_node)
        refs = {
            probe.options(
                num_cpus=0,
                scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False),
            ).remote(marker, token, os.getcwd()): n
            for n in self.nodes
        }
        here = code_hash()
        try:
            ready, _ = self.ray.wait(list(refs), num_returns=len(refs), timeout=PROBE_TIMEOUT_S)
            for ref, node in refs.items():
                name = f"node {node['NodeManagerAddress']} ({node['NodeManagerHostname']})"
                if ref not in ready:
                    raise ConfigError(f"{name} did not answer the storage check in time")
                try:
                    seen = self.ray.get(ref)
                except self.ray.exceptions.RayError as e:
                    raise ConfigError(f"{name} cannot run the lab: {first_line(e)}") from None
                if seen.get("missing"):
                    raise ConfigError(
                        f"{name} has no folder {seen['missing']}: every node needs the repository "
                        "and out_dir at the same path (a shared filesystem such as NFS)"
                    )
                if not seen["sees_out_dir"]:
                    raise ConfigError(
                        f"{name} cannot see {os.path.abspath(out_dir)}/: out_dir must be on a "
                        "filesystem every node shares (such as NFS), at the same path"
                    )
                if seen["code"] != here:
                    raise ConfigError(
                        f"{name} holds other code than this command's in {ROOT} (its *.py "
                        "files differ): results are tied to the code that made them"
                    )
                self.machines.append(seen["machine"])
        finally:
            os.remove(marker)

    def submit_job(self, job):
        num_gpus = self.gpu_share if job.kind in GPU_KINDS else 0.0
        # a retried training run resumes from its checkpoint: the attempt's token tells a retry
        # from a first run
        token = uuid.uuid4().hex if job.kind == "train" else None
        return self.task.options(num_gpus=num_gpus, **self.options).remote(
            job.fn, job.args, os.getcwd(), job.kind, token
        )

    def result(self, ref, what):
        """ref's value; a job's own error raised as it is (the pool's), a lost job in one line."""
        ray = self.ray
        try:
            return ray.get(ref)
        except ray.exceptions.RayTaskError as e:
            raise (e.cause if isinstance(e.cause, BaseException) else e) from None
        except ray.exceptions.RayError as e:
            raise ConfigError(
                f"{what} was lost {MAX_RETRIES + 1} times with its node or worker "
                f"({first_line(e)}); the same command continues it"
            ) from None

    def run_jobs(self, ready, workers, progress):
        """lab/workers.run_jobs on the cluster: at most as many jobs at once as the cluster has
        CPUs now (or `workers`, --workers), longest first; Ctrl-C (or an error) cancels the running
        ones and is raised again; then close."""
        running = {}  # ObjectRef -> (job, start time)
        try:
            while ready or running:
                ready.sort(key=longest_first)
                # the ETA follows the nodes that join or leave
                progress.workers = min(self.cpus(), workers or self.cpus())
                while ready and len(running) < progress.workers:
                    job = ready.pop(0)
                    running[self.submit_job(job)] = job, time.time()
                finished, _ = self.ray.wait(list(running), num_returns=1, timeout=2.0)
                for ref in finished:
                    job, t0 = running.pop(ref)
                    result = self.result(ref, f"{job.kind} {'/'.join(map(str, job.key))}")
                    progress.finish(job.kind, job.key, time.time() - t0)
                    job.done(result)
                progress.tick([(job.kind, job.key, job.cfg, t0) for job, t0 in running.values()])
        except BaseException:
            self.cancel(running)
            raise
        finally:
            self.close()

    def cancel(self, refs):
        """Stop these jobs now, mid-job: their run folders' locks go with their processes."""
        for ref in refs:
            self.ray.cancel(ref, force=True)

    def submit(self, fn, *args):
        """fn(*args) as a job -> a concurrent.futures.Future of its value."""
        options = self.task.options(**self.options)
        return options.remote(fn, args, os.getcwd(), "measure", None).future()

    def close(self):
        if self.owned:
            self.ray.shutdown()


def write_marker(path, token):
    with open(path, "w") as f:
        f.write(token)


def first_line(error):
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


# ---- What runs on the nodes ----


def code_hash(root=ROOT):
    """The *.py files of the repository's top level and lab/, hashed: the code a job runs."""
    digest = hashlib.sha1()
    for path in sorted(glob.glob(os.path.join(root, "*.py")) + glob.glob(f"{root}/lab/*.py")):
        with open(path, "rb") as f:
            digest.update(os.path.relpath(path, root).encode() + b"\0" + f.read())
    return digest.hexdigest()


def probe_node(marker, token, cwd):
    """On one node: does it have the command's working folder, see the driver's marker file and
    hold the same code? -> a dict."""
    if not os.path.isdir(cwd):
        return {"missing": cwd}
    try:
        with open(marker) as f:
            sees = f.read() == token
    except OSError:
        sees = False
    return {
        "sees_out_dir": sees,
        "code": code_hash(),
        "machine": machine(),
        "host": socket.gethostname(),
    }


def run_job(fn, args, cwd, kind, token):
    """A job in a Ray worker, as in a pool worker: from the command's working folder (the configs'
    paths are relative to it), one torch thread; a training run run again after its node was lost
    resumes from its last checkpoint."""
    os.chdir(cwd)
    torch.set_num_threads(1)
    if kind != "train":
        return fn(*args)
    cfg = attempt(args[0], token)
    try:
        return fn(cfg)
    finally:  # a lost attempt never gets here: its retry finds the token
        os.remove(os.path.join(cfg["out_dir"], ATTEMPT_FILE))


ATTEMPT_FILE = ".ray_attempt"  # in a run folder while a Ray task trains it: the attempt's token


def attempt(cfg, token):
    """cfg for this attempt at a training run: a retry of the same task (its token already in the
    run folder) resumes what the lost attempt left, as the same command would; a first attempt
    runs cfg as the experiment planned it."""
    path = os.path.join(cfg["out_dir"], ATTEMPT_FILE)
    try:
        with open(path) as f:
            retry = f.read() == token
    except OSError:
        retry = False
    if retry and run_status(cfg) == "unfinished":
        cfg = dict(cfg, resume=True)
    os.makedirs(cfg["out_dir"], exist_ok=True)
    with open(path, "w") as f:
        f.write(token)
    return cfg
