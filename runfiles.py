"""
A run's folder and its checkpoints: the folder checked before anything is trained (never clobber
a result), one writer per folder (Lock: a second process on a running run is refused, naming the
first), config.yaml, the log and the jsonl files, atomic checkpoint saves, safe loads
(weights_only: a shared checkpoint runs no code), the checks a resume needs, and the fingerprint of
the code behind a result (source.json: a hash per reference file; the lab reuses a result only while
the working tree's is the same). Every write of the project goes through the few functions under
"Writes that leave every file whole": a full or failing disk stops a command with one line (config.
WriteError), and each file stays as it was or becomes the new one whole. What goes into the files
is train.py's business. A student can skip this file. Left out: sharded or asynchronous
checkpoints, keeping more than the last one, locks on Windows (no fcntl: a line says the folder is
not locked), an fsync of the folder after a rename (a power cut may undo the rename, never tear a
file).
"""

import ast
import atexit
import contextlib
import hashlib
import io
import json
import os
import socket
import sys
import time

import torch
import yaml

import distributed
import tracking
from config import EVALUATION, ConfigError, WriteError, trackers
from model import GPT, GPTConfig, Tokenizer
from rollouts import rollout_prompt

try:
    import fcntl
except ImportError:  # Windows: folders go unlocked, and the run says so
    fcntl = None

# keys that never change what a run computes (cuda_graph: the same tokens by a faster path;
# report_to: where its numbers are also shown)
RESULT_NEUTRAL_KEYS = (
    "resume",
    "overwrite",
    "quiet",
    "device",
    "threads",
    "peak_tflops",
    "out_dir",
    "warmstart_dir",
    "cuda_graph",
    "report_to",
    "report_dir",
)
EVAL_KEYS = tuple(EVALUATION)
# a resumed run may also train for more steps, and be measured otherwise
RUN_ONLY_KEYS = RESULT_NEUTRAL_KEYS + EVAL_KEYS + ("steps",)
HERE = os.path.dirname(os.path.abspath(__file__))  # the reference files
# reference files whose code never changes a result (tracking.py shows what metrics.jsonl holds):
# an edit of one leaves every run and result of the lab reusable
RESULT_NEUTRAL_FILES = ("tracking.py",)
SOURCE_FILE = "source.json"  # a run folder's fingerprint of the code that trained it


# ---- The code behind a result: a short hash per reference file ----


def code_without_prose(source):
    """Python source -> its syntax tree without docstrings (ast.dump drops comments and layout):
    rewording or reformatting changes no fingerprint."""
    tree = ast.parse(source)
    documented = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    for node in ast.walk(tree):
        if isinstance(node, documented) and ast.get_docstring(node, clean=False) is not None:
            node.body = node.body[1:] or [ast.Pass()]
    return ast.dump(tree)


_PARSED = {}  # (file, mtime, size) -> (its imports, its hash): a file is parsed once per version


def parsed(name):
    """A reference file -> (the file names it imports, a short hash of its code without prose)."""
    stat = os.stat(os.path.join(HERE, name))
    key = (name, stat.st_mtime_ns, stat.st_size)
    if key not in _PARSED:
        with open(os.path.join(HERE, name)) as f:
            source = f.read()
        imports = []
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                imports += [f"{alias.name.split('.')[0]}.py" for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                imports.append(f"{node.module.split('.')[0]}.py")
        code = code_without_prose(source).encode()
        _PARSED[key] = imports, hashlib.sha1(code).hexdigest()[:10]
    return _PARSED[key]


def project_imports(module):
    """The reference files `module` imports, directly or through others, itself included -> sorted
    file names (only this folder's files count: torch, the lab and RESULT_NEUTRAL_FILES are not
    followed)."""
    found, todo = set(), [f"{module}.py"]
    while todo:
        name = todo.pop()
        known = name in found or name in RESULT_NEUTRAL_FILES
        if not known and os.path.exists(os.path.join(HERE, name)):
            found.add(name)
            todo += parsed(name)[0]
    return sorted(found)


def source_fingerprint(*modules):
    """{file name: a short hash of its code without prose} of `modules` and every reference file
    they import."""
    files = set().union(*(project_imports(m) for m in modules))
    return {name: parsed(name)[1] for name in sorted(files)}


def changed_files(made_by, now):
    """The files whose code differs between two fingerprints (a file in one only among them)."""
    return sorted(f for f in made_by.keys() | now.keys() if made_by.get(f) != now.get(f))


def read_source(run_dir):
    """The fingerprint a run folder recorded; None for a run made before runs recorded one."""
    try:
        with open(os.path.join(run_dir, SOURCE_FILE)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


# ---- Writes that leave every file whole: a full or failing disk stops a command in one line ----


@contextlib.contextmanager
def writing(path):
    """Any OSError of the block -> WriteError naming `path`: the one line a command prints."""
    try:
        yield
    except WriteError:
        raise
    except OSError as e:
        raise WriteError(e.errno, e.strerror, path) from e


def write_file(path, data):
    """`data` (bytes or str) becomes the whole file at `path`, or nothing changes there: it goes to
    a per-process temporary file beside it (two processes never mix writes), onto the disk (fsync),
    then is renamed over it. A failure removes the temporary file and raises WriteError."""
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with writing(path):
            with open(tmp, "wb") as f:
                f.write(data.encode() if isinstance(data, str) else data)
                f.flush()
                # the bytes are on disk before the rename makes them the file
                os.fsync(f.fileno())
            os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            with contextlib.suppress(OSError):
                os.remove(tmp)


def write_json(path, obj, **dump_options):
    """json.dump's text as the whole file at `path` (write_file)."""
    write_file(path, json.dumps(obj, **dump_options))


def atomic_save(obj, path):
    """torch.save, whole or not at all (write_file). torch serializes into memory first: on a full
    disk its own writer fails with a RuntimeError ("unexpected pos") that names no cause, while a
    plain write says ENOSPC and the file."""
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    write_file(path, buffer.getbuffer())


def save_figure(fig, path, **savefig_options):
    """A matplotlib figure as the whole file at `path` (write_file), its format from the suffix."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format=os.path.splitext(path)[1][1:], **savefig_options)
    write_file(path, buffer.getvalue())


def open_lines(path, mode):
    """A file that append_line writes lines to: unbuffered ("w" starts it empty, "a" goes on)."""
    with writing(path):
        return open(path, mode + "b", buffering=0)  # noqa: SIM115 (its owner closes it)


def append_line(file, text):
    """`text` and a newline at the end of `file` (open_lines), whole or not at all: a failed write
    cuts the file back to where it was, so a reader never meets half a line."""
    data = (text + "\n").encode()
    start = file.tell()
    with writing(file.name):
        try:
            done = 0
            while done < len(data):  # a write may take part of the line (a disk nearly full)
                done += file.write(data[done:])
        except OSError:
            with contextlib.suppress(OSError):  # a disk that fails this too keeps the torn line
                file.truncate(start)
                file.seek(start)
            raise


def load_checkpoint(path):
    """A checkpoint of this trainer -> its dict on the CPU; FileNotFoundError, or a ConfigError
    that says what is wrong with the file."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"checkpoint not found: {path}")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # torch raises several types for truncated, foreign or unsafe files
        # what it tried to call
        unsafe = [line for line in str(e).splitlines() if "global" in line.lower()]
        if unsafe:
            raise ConfigError(
                f"checkpoint {path} holds more than weights and settings, nothing of it was run "
                f"({unsafe[0].strip()[:120]})"
            ) from None
        first = (str(e).strip().splitlines() or [""])[0]
        raise ConfigError(
            f"checkpoint {path} is unreadable or corrupt ({type(e).__name__}: {first})"
        ) from None
    if not isinstance(ckpt, dict) or not {"model", "model_config", "config"} <= ckpt.keys():
        raise ConfigError(
            f"checkpoint {path} is not a checkpoint of this trainer (missing model/config)"
        )
    return ckpt


def model_from_checkpoint(path, device="cpu"):
    """A saved run or warm start -> (model in eval mode, tokenizer, config, m: its answers per
    rollout)."""
    saved = load_checkpoint(path)
    model, tok = model_from_saved(saved, device)
    return model, tok, saved["config"], saved.get("m", 1)


def model_from_saved(saved, device="cpu"):
    """A loaded checkpoint (load_checkpoint) -> (its model in eval mode, its tokenizer)."""
    model = GPT(GPTConfig(**saved["model_config"])).to(device)
    model.load_state_dict(saved["model"])
    return model.eval(), Tokenizer(saved["config"]["tokenizer"])


# ---- One writer per folder: a lock file, taken before the first write and held to the end ----

LOCK_FILE = ".lock"  # in a folder being written: its writer's pid, host, start and command
_HELD = {}  # a lock file's real path -> the Lock this process holds on it


class FolderInUse(ConfigError):
    """Another running process holds the folder's lock: one line and exit 2, as a wrong setting."""


def same_file(file, path):
    """Is the open `file` still the file at `path` (not removed, nor replaced)?"""
    try:
        return os.path.samestat(os.fstat(file.fileno()), os.stat(path))
    except FileNotFoundError:
        return False


def lock_record(file):
    """What a lock file says of its holder -> {pid, host, since, command}; {} if it says nothing."""
    file.seek(0)
    try:
        record = json.loads(file.read())
    except ValueError:
        return {}
    return record if isinstance(record, dict) else {}


def holder_of(file):
    """The process that holds `file`'s lock, in words: its pid, host, command and start."""
    for _ in range(40):  # a holder that has just taken it writes its name a moment later
        record = lock_record(file)
        try:
            os.kill(record["pid"], 0)  # signal 0 only asks whether the process exists
        except (KeyError, TypeError, ProcessLookupError):
            time.sleep(0.05)
            continue
        except PermissionError:  # another user's
            pass
        return "pid {pid} on {host} ({command}, since {since})".format(**record)
    return "another process"


class Lock:
    """One writer at a time (as git's index.lock): an exclusive fcntl.flock on `path`, a file that
    names its holder. The kernel lets go of a flock when its holder dies (kill -9 included), so a
    lock left behind is taken over, never cleaned by hand, and `note` says so; release() removes
    the file while still holding it, and a taker checks that what it locked is still the file. A
    process that stops on an exception lets go as it exits, or as it takes the same lock again.
    wait: None refuses a held lock (FolderInUse); else a function told in a line whom it waits for,
    then the lock is waited for. `what`: the thing locked, as a message names it."""

    def __init__(self, path, what, wait=None):
        self.path, self.file, self.note, self.pid = path, None, None, os.getpid()
        if fcntl is None:
            self.note = f"{what} is not locked: no fcntl here, so a second process is not refused"
            return
        earlier = _HELD.get(os.path.realpath(path))
        if earlier:  # taken by an earlier run in this process that stopped on an exception
            earlier.release()
        while self.file is None:
            with writing(path):
                file = open(path, "a+")  # noqa: SIM115 (held until release)
            try:
                fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if wait is None:
                    holder = holder_of(file)
                    file.close()
                    raise FolderInUse(
                        f"{what} is in use by {holder}: wait for it to end, or choose another "
                        "out_dir"
                    ) from None
                wait(f"waiting for {holder_of(file)}, which is writing {what}")
                fcntl.flock(file, fcntl.LOCK_EX)
            except OSError as e:  # a filesystem without locks (some network ones)
                file.close()
                self.note = f"{what} is not locked ({e.strerror}): a second process is not refused"
                return
            if same_file(file, path):
                self.file = file
            else:  # its holder removed it as it let go: lock the file there now
                file.close()
        before = lock_record(self.file)
        if before.get("pid") not in (None, self.pid):  # released cleanly, it would be gone
            self.note = f"took over the lock of pid {before['pid']}, which no longer runs"
        command = " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:])
        command = command if len(command) <= 80 else command[:77] + "..."
        since = time.strftime("%Y-%m-%d %H:%M")
        me = {"pid": self.pid, "host": socket.gethostname(), "since": since, "command": command}
        try:
            with writing(path):
                self.file.truncate(0)
                self.file.write(json.dumps(me) + "\n")
                self.file.flush()
        except WriteError:  # let go as release() does: no lock file is left behind
            with contextlib.suppress(OSError):
                os.remove(path)
            self.file.close()
            raise
        _HELD[os.path.realpath(path)] = self

    def release(self):
        """Remove the file, then let go of it (a process waiting on it locks the next one)."""
        if self.file is None:
            return
        _HELD.pop(os.path.realpath(self.path), None)
        # a forked child shares its parent's lock: only the process that took it removes the file
        if self.pid == os.getpid() and same_file(self.file, self.path):
            os.remove(self.path)
        self.file.close()
        self.file = None


@atexit.register
def release_held_locks():
    """On any exit but a kill, the next run finds no lock to take over."""
    for lock in list(_HELD.values()):
        lock.release()


def lock_folder(folder, wait=None):
    """The Lock of a folder one process writes (a run's, the lab's out_dir)."""
    return Lock(os.path.join(folder, LOCK_FILE), folder, wait=wait)


def run_dir(cfg):
    return cfg["out_dir"] or os.path.join("out", f"{cfg['task']}-{cfg['algo']}-s{cfg['seed']}")


def prepare_out_dir(cfg):
    """Refuse to clobber results; create the folders now, not after minutes of warm start."""
    out_dir = run_dir(cfg)
    finished = os.path.exists(os.path.join(out_dir, "final.pt"))
    started = os.path.exists(os.path.join(out_dir, "metrics.jsonl"))
    if cfg["resume"]:
        if finished and not cfg["overwrite"]:
            raise ConfigError(f"{out_dir} already holds a finished run; nothing to resume")
        # a run killed before its first checkpoint has config.yaml only: train() starts it again
        if not any(os.path.exists(os.path.join(out_dir, f)) for f in ("ckpt.pt", "config.yaml")):
            raise ConfigError(
                f"resume=true but {out_dir}/ckpt.pt does not exist (no run to resume there)"
            )
    elif finished and not cfg["overwrite"]:
        raise ConfigError(
            f"{out_dir} already holds a finished run; choose another out_dir or --set "
            "overwrite=true"
        )
    elif started and not cfg["overwrite"]:
        raise ConfigError(
            f"{out_dir} holds an unfinished run; --set resume=true to continue it "
            f"or overwrite=true to start again"
        )
    for path in (out_dir, cfg["warmstart_dir"]):
        try:
            os.makedirs(path, exist_ok=True)
        except OSError as e:
            raise ConfigError(f"cannot create directory {path}: {e.strerror}") from None
    return out_dir


def write_config(cfg, out_dir):
    """config.yaml, written whole or not at all: a resume before the first ckpt.pt reads it back.
    -> the settings written."""
    written = {**{k: v for k, v in cfg.items() if k not in EVAL_KEYS}, "out_dir": out_dir}
    write_file(os.path.join(out_dir, "config.yaml"), yaml.safe_dump(written, sort_keys=False))
    return written


def resume_point(cfg, out_dir, source):
    """The checkpoint to resume from, once out_dir is checked to hold this run, trained by this
    code (`source`), so far (None: start afresh)."""
    ckpt_path, config_path = os.path.join(out_dir, "ckpt.pt"), os.path.join(out_dir, "config.yaml")
    resume = None
    if os.path.exists(ckpt_path):
        resume = load_checkpoint(ckpt_path)
        missing = {
            "optimizer",
            "rng",
            "generator",
            "torch_rng",
            "metrics_offset",
            "step",
        } - resume.keys()
        if missing:
            raise ConfigError(
                f"checkpoint {ckpt_path} cannot be resumed: it lacks {sorted(missing)}"
            )
        saved = resume["config"]
    else:
        try:
            with open(config_path) as f:
                saved = yaml.safe_load(f)
        except (OSError, yaml.YAMLError):
            saved = None
        if not isinstance(saved, dict):
            raise ConfigError(
                f"cannot resume {out_dir}: no ckpt.pt and {config_path} is unreadable"
            )
    # out_dir may be spelled differently (./out/x vs out/x): the run was found there, it is this one
    changed = sorted(k for k in cfg if k not in RUN_ONLY_KEYS and saved.get(k) != cfg[k])
    if changed:
        raise ConfigError(
            f"cannot resume {out_dir}: config differs from the saved run in {changed}"
        )
    # a run from before runs recorded their code is resumed as before
    edited = changed_files(read_source(out_dir) or source, source)
    if edited:
        raise ConfigError(
            f"cannot resume {out_dir}: {', '.join(edited)} changed since it started; "
            "overwrite=true trains it again"
        )
    logged = os.path.join(out_dir, "metrics.jsonl")
    if resume and (
        not os.path.exists(logged) or os.path.getsize(logged) < resume["metrics_offset"]
    ):
        raise ConfigError(
            f"cannot resume {out_dir}: metrics.jsonl is missing or shorter than ckpt.pt expects"
        )
    return resume


class RunFiles:
    """A run's folder: config.yaml, source.json, log.txt, metrics.jsonl (only what the seed
    determines), timing.jsonl, samples.jsonl and the checkpoints; resume cuts metrics.jsonl back to
    the checkpoint. Rank 0 writes, holding the folder's lock until close(), and feeds metrics.jsonl
    to the trackers report_to asks for (tracking.py)."""

    def __init__(self, cfg, lead=True):
        self.lead, self.quiet = lead, cfg["quiet"]
        out_dir = run_dir(cfg)
        # rank 0 alone writes, so it alone holds the folder's lock, from before its checks (a folder
        # in use is refused as such, whatever it holds; a new one is locked once made) to close()
        self.lock = lock_folder(out_dir) if lead and os.path.isdir(out_dir) else None
        try:
            self.out_dir = prepare_out_dir(cfg) if lead else out_dir
            self.lock = self.lock or (lock_folder(out_dir) if lead else None)
            # a run's code: train.py and every reference file it imports
            source = source_fingerprint("train")
            self.resume = resume_point(cfg, self.out_dir, source) if cfg["resume"] else None
        except BaseException:
            if self.lock:
                self.lock.release()
            raise
        self.mode = "a" if self.resume else "w"
        if lead:
            written = write_config(cfg, self.out_dir)
            write_json(os.path.join(self.out_dir, SOURCE_FILE), source, indent=0, sort_keys=True)
        metrics = os.path.join(self.out_dir, "metrics.jsonl")
        if lead and self.resume:
            with writing(metrics):
                os.truncate(metrics, self.resume["metrics_offset"])
        self.files = {}
        self.log_file = self._open("log.txt")
        self.t_start, self.first_step = time.time(), 1
        if self.lock and self.lock.note:  # a lock taken over, or none to take
            self.log(self.lock.note)
        self.tracking = None  # off by default: report_to's trackers
        if lead and trackers(cfg["report_to"]):
            try:
                self.tracking = tracking.Tracking(cfg, self.out_dir, written)
                if self.resume:  # the curves so far, then the steps to come
                    self.tracking.replay(metrics)
            except BaseException:
                self.close()
                raise
            self.log(f"curves: {self.tracking.where}; to watch them: {self.tracking.view}")

    def _open(self, name):  # on first use: a run killed in its warm start leaves no metrics.jsonl
        if name not in self.files:
            # held open for the run, closed by close(): each line is on disk as it is written
            path = os.path.join(self.out_dir, name) if self.lead else os.devnull
            self.files[name] = open_lines(path, self.mode)
        return self.files[name]

    def start_steps(self, first):
        """The first step this process trains; the ETA counts from now."""
        self.t_start, self.first_step = time.time(), first
        return first

    def eta(self, step, steps):
        """Seconds left, at this process's pace so far."""
        return (time.time() - self.t_start) / (step - self.first_step + 1) * (steps - step)

    def log(self, msg):
        append_line(self.log_file, msg)
        if self.lead and not self.quiet:
            print(msg, flush=True)

    def write(self, name, record):
        append_line(self._open(name), json.dumps(record))
        if self.tracking and name == "metrics.jsonl":
            self.tracking.log(record)

    def save(self, name, state):
        """A checkpoint that remembers how much of metrics.jsonl it accounts for."""
        if self.lead:
            metrics = self._open("metrics.jsonl")
            # the lines it accounts for are on disk before it is
            with writing(metrics.name):
                os.fsync(metrics.fileno())
            atomic_save(
                {**state, "metrics_offset": metrics.tell()}, os.path.join(self.out_dir, name)
            )

    def close(self):
        for f in self.files.values():
            f.close()
        if self.tracking:
            self.tracking.close()
        if self.lock:
            self.lock.release()


# ---- A training run's (train.Run) logs and state, saved and restored ---------------------------


def log_step(files, run, step, metrics, batch):
    """metrics.jsonl, timing.jsonl, the console line and, every 25 steps, a few rollouts."""
    cfg = run.cfg
    # under torchrun, the whole batch's: each metric's mean over the ranks (alone: as it is)
    metrics = distributed.reduce_metrics(metrics, run.world, run.policy.device)
    timing = {"step": step, "sample_s": metrics.pop("sample_s"), "step_s": metrics.pop("step_s")}
    timing["tokens_per_s"] = metrics["tokens"] / timing["step_s"]
    if cfg["peak_tflops"] > 0:  # ~2N FLOPs per sampled token, 6N per trained token
        num_params = run.policy.model.num_params()
        flops = (2 + 6 * cfg["epochs_per_batch"]) * num_params * metrics["tokens"]
        timing["mfu"] = flops / timing["step_s"] / (cfg["peak_tflops"] * 1e12)
    files.write("metrics.jsonl", {"kind": "train", "step": step, **metrics})
    files.write("timing.jsonl", timing)
    files.log(
        f"step {step}/{cfg['steps']} | reward {metrics['reward_scalar']:.3f} "
        f"set {metrics['set_score']:.3f} | adv std {metrics['adv_std']:.2f} "
        f"zero-std {metrics['zero_std_groups']:.2f} | ent {metrics['entropy']:.3f} "
        f"distinct {metrics['distinct_first_answers']:.2f} | clip {metrics['clip_frac']:.3f} "
        f"kl {metrics['kl']:.4f} gnorm {metrics['grad_norm']:.2f} "
        f"| {timing['tokens_per_s']:.0f} tok/s"
        + (f" mfu {timing['mfu']:.1%}" if "mfu" in timing else "")
        + f" | ETA {files.eta(step, cfg['steps']):.0f}s"
    )
    if step % 25 == 0 or step == cfg["steps"]:
        m = run.policy.answers_per_rollout
        prompt = rollout_prompt(run.task, batch["problems"][0], m)
        answers = batch["answers"][0][:4]
        rewards = batch["rewards"][0, :4].tolist()
        sample = {"step": step, "prompt": prompt, "answers": answers, "rewards": rewards}
        files.write("samples.jsonl", sample)


def run_state(run, step):
    """Everything a resumed train.Run needs to continue as if it had never stopped."""
    return {
        "model": run.policy.model.state_dict(),
        "model_config": vars(run.policy.model.cfg),
        "config": run.cfg,
        "m": run.policy.answers_per_rollout,
        "step": step,
        "optimizer": run.opt.state_dict(),
        "rng": run.rng.getstate(),
        "generator": run.policy.generator.get_state(),
        "torch_rng": torch.get_rng_state(),
        # a finite training set's place in its epoch, and the outcomes counted so far
        **({"train_set": run.train_set.state_dict()} if run.train_set else {}),
        **({"history": run.history.state_dict()} if run.history else {}),
    }


def restore(run, files):
    """Load the run folder's resume checkpoint (if any) into `run` -> the first step to train."""
    state = files.resume
    if not state:
        return files.start_steps(1)
    run.policy.model.load_state_dict(state["model"])
    run.opt.load_state_dict(state["optimizer"])
    run.rng.setstate(state["rng"])
    run.policy.generator.set_state(state["generator"])
    torch.set_rng_state(state["torch_rng"])
    if run.train_set:
        run.train_set.load_state_dict(state["train_set"])
        run.history.load_state_dict(state["history"])
    files.log(f"resumed from step {state['step']}")
    return files.start_steps(state["step"] + 1)
