"""Robustness: hostile model output, bad configuration, kills, determinism and numerics.

Every run here is configs/tiny.yaml (seconds on a CPU) with quiet=true and its directories under
pytest's tmp_path. The runs that are compared byte for byte share one config, RUN, and one cached
warm start (the module fixture `baseline`), so they differ only in how they were interrupted.
"""

import gc
import hashlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
import warnings

import numpy as np
import pytest
import torch

import checkpoint
import engine
import grpo
import lang
import rollouts
import train as trainer
import warmstart
import vpo
from checkpoint import load_checkpoint
from model import Tokenizer
from config import make_task
from rollouts import score_answers
from train import ConfigError, resolve_config, train

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = os.path.join(ROOT, "configs", "tiny.yaml")
RUN = ["steps=12", "ckpt_every=3", "quiet=true"]  # evals at 0, 2, 4, ..., checkpoints at 3, 6, 9, 12
TOK = Tokenizer()
TASKS = ("persona", "persona_collinear", "code")


# ----------------------------------------------------------------------------------------------
# Helpers

def config(out_dir, ws, *overrides):
    return resolve_config(TINY, [f"out_dir={out_dir}", f"warmstart_dir={ws}", *RUN, *overrides])


def cli(out_dir, ws, *overrides):
    return [sys.executable, "train.py", "--config", TINY, "--set", f"out_dir={out_dir}", f"warmstart_dir={ws}",
            *RUN, *overrides]


def read(path):
    with open(path, "rb") as f:
        return f.read()


def weights(path):
    return load_checkpoint(str(path))["model"]


def same_weights(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def all_finite(state):
    return all(torch.isfinite(v).all() for v in state.values())


def snapshot(root):
    """Every file and folder under root with its size, mtime and content hash."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for d in dirnames:
            out[os.path.relpath(os.path.join(dirpath, d), root)] = "dir"
        for name in filenames:
            path = os.path.join(dirpath, name)
            st = os.stat(path)
            out[os.path.relpath(path, root)] = (st.st_size, st.st_mtime_ns, hashlib.sha1(read(path)).hexdigest())
    return out


class Killed(BaseException):
    """Stands in for SIGKILL in-process: nothing in train() catches a BaseException."""


def sigkill_when(runs, timeout=120):
    """runs: {process: ready()}. Poll them all (they start together, which saves interpreter start-up
    time), and SIGKILL each one as soon as its ready() holds."""
    deadline, waiting = time.time() + timeout, dict(runs)
    while waiting:
        for proc, ready in list(waiting.items()):
            if ready():
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                assert proc.returncode == -signal.SIGKILL
                del waiting[proc]
            elif proc.poll() is not None:
                pytest.fail(f"run exited ({proc.returncode}) before its kill point: {proc.stderr.read()}")
        if time.time() > deadline:
            for proc in waiting:
                proc.kill()
            pytest.fail("kill point never reached")
        time.sleep(0.005)


def popen(args):
    return subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
    """One uninterrupted RUN with a fresh warm start; its cache is shared by the tests below."""
    root = tmp_path_factory.mktemp("baseline")
    ws = root / "ws"
    out = train(config(root / "run", ws))
    return dict(ws=ws, out=out, metrics=read(os.path.join(out, "metrics.jsonl")),
                final=weights(os.path.join(out, "final.pt")))


# ----------------------------------------------------------------------------------------------
# 1. Hostile model output: 10,000 generated rollouts per task through the training path
#    (token ids -> Tokenizer.split_answers -> rewards.score_answers).

CODE_ATOMS = ["(", ")", "(", ")", "x", "x", "0", "1", "3", "9", "007", "999999999", "1000000000", "9" * 60,
              "+", "-", "*", "/", "%", "min", "max", "^", "<", "=", ">", "if", " ", "  ", "\n", "\t", "\r",
              "\x0b", "\x00", "-1", "1.5", "1e9", "x1", "+x", "١", "１", "ｘ", "é", "🙂", "\u200b", "\ufeff",
              "\ufffd", "\ud800", "<|sep|>", "<|eos|>", "<|bos|>", "<|answer|>", "eval", "exec",
              "__import__('os')", "lambda", "print(1)", ";", "'", '"', "\\", "True", "None"]
HOSTILE_PROGRAMS = [
    "", " ", "\n", "()", "(", ")", ")(", "(x)", "(+)", "(+ x)", "(+ x 1 2)", "(if x x)", "((+ x 1))",
    "(/ x 0)", "(% x 0)", "(/ 1 (- x x))", "(% (+ x 1) (- x x))", "(/ (- 0 7) 2)",
    "(* 999999999 999999999)", "(+ 1000000000 1)", "1000000001", "9" * 250, "9" * 300,
    "(^ 2 30)", "(^ 2 29)", "(^ 0 0)", "(^ 1 999999999)", "(^ (- 0 1) 999999999)", "(^ x (- 0 1))",
    "(^ 2 (^ 2 (^ 2 (^ 2 2))))", "(^ 9 (^ 9 (^ 9 9)))", "(^ (^ (^ 9 9) 9) 9)",
    "(+ 1 " * 12 + "x" + ")" * 12, "(+ 1 " * 13 + "x" + ")" * 13, "(" * 300, ")" * 300,
    "(+ 1 " * 60 + "x" + ")" * 60, "(if 1 " * 11 + "x" + " 0)" * 11, "(if x x x)" * 30,
    "(* x (* x (* x (* x (* x (* x (* x (* x (* x (* x 9))))))))))",
    "__import__('os').system('touch /tmp/pwned')", "eval('1+1')", "exec('x=1')", "lambda x: x",
    "while True: pass", "(+ x ١)", "(+ x １)", "(+ ｘ 1)", "(+ x 1)\u200b", "\ufeff(+ x 1)",
    "x" * 300, "(+ x 1)" + " " * 300,
]
GIANT_STRINGS = ["a" * 10**6, "(" * 10**6, ")" * 10**5, "9" * 10**5, "(+ 1 " * 20000 + "x" + ")" * 20000,
                 "(^ 9 " * 5000 + "9" + ")" * 5000]
MAX_ROLLOUT = 512  # token ids: more than any block_size lets the policy write
PERSONA_ATOMS = ["A", "Z", " ", "\n", "\t", "0", "9", "-", "'", "é", "ß", "ａ", "ı", "\u0301", "🙂", "\x00",
                 "\ud800", "\ufffd", "<|sep|>", "<|eos|>", "<|bos|>", "<|answer|>", "likes", ".", "\x7f"]
BINARY_OPS = ["+", "-", "*", "/", "%", "min", "max", "^", "<", "=", ">"]


def _pieces(text):
    return re.findall(r"\(|\)|[^\s()]+|\s+", text)


def mutate_program(text, rng):
    """Grammar-aware damage to a program: token edits, wrapping, deep nesting, cuts, random chars."""
    toks = _pieces(text)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(9)
        if op == 0 and toks:
            del toks[rng.randrange(len(toks))]
        elif op == 1:
            toks.insert(rng.randrange(len(toks) + 1), rng.choice(CODE_ATOMS))
        elif op == 2 and toks:
            toks[rng.randrange(len(toks))] = rng.choice(CODE_ATOMS)
        elif op == 3 and len(toks) > 1:
            i, j = rng.randrange(len(toks)), rng.randrange(len(toks))
            toks[i], toks[j] = toks[j], toks[i]
        elif op == 4:  # wrap in a valid operator: stays a program
            toks = ["(", rng.choice(BINARY_OPS), " ", *toks, " ", rng.choice(["x", "0", "1", "(- x x)"]), ")"]
        elif op == 5:  # nest: around MAX_DEPTH, sometimes far beyond it
            k = rng.choice([rng.randint(1, 14), rng.randint(15, 100)])
            toks = ["(+ 1 "] * k + toks + [")"] * k
        elif op == 6:
            toks = toks[:rng.randrange(len(toks) + 1)]
        elif op == 7:  # any code point, including surrogates and control characters
            s = "".join(toks)
            i = rng.randrange(len(s) + 1)
            toks = _pieces(s[:i] + chr(rng.randrange(0x110000)) + s[i:])
        else:  # a literal becomes huge, zero, or an expression that divides by zero
            ints = [i for i, t in enumerate(toks) if t.isdigit()]
            if ints:
                toks[rng.choice(ints)] = rng.choice(["0", "999999999", "1" + "0" * rng.randint(9, 200),
                                                     "(/ 1 (- x x))", "(^ 9 (^ 9 9))"])
    return "".join(toks)


def mutate_word(word, rng):
    """Damage to a persona answer: wrong case, foreign characters, too long, empty, doubled."""
    w = list(word)
    for _ in range(rng.randint(1, 3)):
        op = rng.randrange(7)
        if op == 0 and w:
            i = rng.randrange(len(w))
            w[i] = w[i].upper()
        elif op == 1:
            w.insert(rng.randrange(len(w) + 1), rng.choice(PERSONA_ATOMS))
        elif op == 2:
            w += [rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(1, 30))]
        elif op == 3:
            w = w[:rng.randrange(len(w) + 1)]
        elif op == 4:
            w = w + w
        elif op == 5:
            w.insert(rng.randrange(len(w) + 1), chr(rng.randrange(0x110000)))
        elif w:
            del w[rng.randrange(len(w))]
    return "".join(w)


_VALID = {}


def valid_answers(task, problem):
    """Answers in the task's format (demonstrations, and for code every consistent program)."""
    key = (type(task).__name__, problem)
    if key not in _VALID:
        rng = random.Random(repr(problem))
        pool = task.demonstration(problem, 40, rng)
        if hasattr(task, "hypotheses"):
            pool += [task.program_text(h) for h in task.hypotheses(problem)]
        else:
            pool += ["".join(rng.choice(problem) for _ in range(rng.randint(1, task.answer_len)))
                     for _ in range(20)]
        _VALID[key] = pool
    return _VALID[key]


def random_answer(task_name, task, problem, rng):
    r = rng.random()
    valid = rng.choice(valid_answers(task, problem))
    if r < 0.2:
        return valid  # some answers must score, or the checks below would only ever see zeros
    if task_name == "code":
        if r < 0.3:
            return rng.choice(HOSTILE_PROGRAMS)
        return mutate_program(valid if r < 0.8 else rng.choice(HOSTILE_PROGRAMS), rng)
    return mutate_word(valid, rng)


def random_rollout(task_name, task, problem, rng):
    """Token ids the policy could emit: random ids, random text, or mutated answers joined by <|sep|>."""
    r = rng.random()
    if r < 0.2:  # any token id: random bytes with special tokens sprinkled in
        ids = list(rng.randbytes(rng.randint(0, 150)))
        for _ in range(rng.randint(0, 4)):
            ids.insert(rng.randint(0, len(ids)), rng.randrange(256, TOK.vocab_size))
        return ids
    if r < 0.3:  # random bytes as text (invalid UTF-8 decodes with replacement characters)
        return TOK.encode(rng.randbytes(rng.randint(0, 150)).decode("utf-8", "replace"))
    if r < 0.35:  # random code points
        return TOK.encode("".join(chr(rng.randrange(0x110000)) for _ in range(rng.randint(0, 60))))
    n = rng.choice([1, 1, 2, 3, 3, 4, 8])
    answers = [random_answer(task_name, task, problem, rng) for _ in range(n)]
    if rng.random() < 0.2:
        answers.append(answers[0])  # a repeat must score zero
    if rng.random() < 0.1:
        rng.shuffle(answers)
    text = "<|sep|>".join(answers)
    if rng.random() < 0.7:
        text += "<|eos|>" + rng.choice(["", "junk", "<|sep|>aaaa", "(+ x 1)"])
    return TOK.encode(text)[:MAX_ROLLOUT]  # cut anywhere, as max_new_tokens cuts the policy off


def expected_row(task_name, task, problem, answer):
    """An independent statement of what an answer must score (zeros where it must)."""
    if task_name == "code":  # zero unless it parses; per-test values are test_rewards.py's business
        return np.zeros(task.dim) if lang.canonical(answer) is None else None
    if not re.fullmatch(f"[a-z]{{1,{task.answer_len}}}", answer):
        return np.zeros(task.dim)
    counts = np.array([answer.count(f) for f in problem], dtype=np.float64)
    return np.sqrt(np.minimum(1.0, (counts + task.overlap * (counts.sum() - counts)) / task.answer_len))


def check_rows(task_name, task, problem, answers, m, rows):
    assert rows.shape == (m, task.dim) and rows.dtype == np.float32
    assert np.isfinite(rows).all() and (rows >= 0).all() and (rows <= 1).all()
    seen = set()
    for j, answer in enumerate(answers[:m]):
        key = task.answer_key(answer)
        want = np.zeros(task.dim) if key in seen else expected_row(task_name, task, problem, answer)
        seen.add(key)
        if want is None:  # a program that parses: every test passes or fails
            assert set(rows[j].tolist()) <= {0.0, 1.0}, (answer, rows[j])
        else:
            assert np.abs(rows[j] - want).max() <= 1e-6, (answer, rows[j], want)
    assert not rows[len(answers):].any()  # missing answers score zero


_AUDIT = {"on": False, "events": []}


def _audit(event, args):
    if _AUDIT["on"] and event in ("exec", "compile"):  # builtins eval/exec/compile raise these
        _AUDIT["events"].append(event)


sys.addaudithook(_audit)  # cannot be removed; it does nothing unless a test switches it on


@pytest.mark.parametrize("family", [("persona", "persona_collinear"), ("code",)], ids=["persona", "code"])
def test_ten_thousand_hostile_rollouts(family):
    """10,000 rollouts per task; the two persona tasks score the same generated rollouts."""
    tasks = {name: make_task(name) for name in family}
    task_name, task = family[0], tasks[family[0]]
    rng = random.Random(f"fuzz-{task_name}")
    problems = task.problems("train", 16, rng)
    _AUDIT["on"] = True
    eval("1")  # a self-check: the hook does see eval
    _AUDIT["on"] = False
    assert "exec" in _AUDIT["events"]
    _AUDIT["events"].clear()
    n, worst, t_all = 10_000, 0.0, time.perf_counter()
    scored = dict.fromkeys(tasks, 0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # includes lang's "internal error" RuntimeWarning
        for i in range(n):
            problem = problems[i % len(problems)]
            ids = random_rollout(task_name, task, problem, rng)
            m = rng.choice([1, 2, 3])
            for name, each in tasks.items():
                _AUDIT["on"] = True
                t0 = time.perf_counter()
                answers = TOK.split_answers(ids)
                rows = score_answers(each, problem, answers, m)
                worst = max(worst, time.perf_counter() - t0)
                _AUDIT["on"] = False
                check_rows(name, each, problem, answers, m, rows)
                scored[name] += bool(rows.any())
    elapsed = time.perf_counter() - t_all
    assert not _AUDIT["events"], f"Python eval/exec/compile ran while scoring: {_AUDIT['events'][:5]}"
    assert worst < 0.5, f"one rollout took {worst:.3f}s to score"
    assert elapsed < 60
    for name in tasks:  # the generator reaches both scoring and failing answers
        assert 0.05 * n < scored[name] < 0.95 * n, (name, scored[name])


@pytest.mark.parametrize("task_name", TASKS)
def test_a_thousand_answers_in_one_rollout(task_name):
    task = make_task(task_name)
    rng = random.Random(1)
    problem = task.problems("train", 1, rng)[0]
    answers = []
    while len(answers) < 1000:
        answer = random_answer(task_name, task, problem, rng)
        if "<|" not in answer:  # special-token text would split or end the rollout early
            answers.append(answer)
    ids = TOK.encode("<|sep|>".join(answers) + "<|eos|>")
    split = TOK.split_answers(ids)
    assert len(split) == 1000
    t0 = time.perf_counter()
    for m in (1, 3, 1000):
        rows = score_answers(task, problem, split, m)
        check_rows(task_name, task, problem, split, m, rows)
    assert time.perf_counter() - t0 < 10


@pytest.mark.parametrize("task_name", TASKS)
def test_any_string_reward_direct(task_name):
    """The reward functions and the interpreter take any str, including ones no tokenizer yields."""
    task = make_task(task_name)
    problem = task.problems("train", 1, random.Random(2))[0]
    strings = ["", "\ud800", "\udfff(+ x 1)", "\x00" * 10, "(+ x 1)" + "\x00", *GIANT_STRINGS,
               *HOSTILE_PROGRAMS, *PERSONA_ATOMS]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for s in strings:
            r = task.reward(problem, s)
            assert r.shape == (task.dim,) and np.isfinite(r).all() and ((r >= 0) & (r <= 1)).all()
            want = expected_row(task_name, task, problem, s)
            assert want is None or np.allclose(r, want)
            assert len(lang.run(s, range(10))) == 10
    for not_text in (None, 3, b"(+ x 1)", ["x"]):
        assert lang.run(not_text, [1, 2]) == [None, None]


# ----------------------------------------------------------------------------------------------
# 2. Bad configuration, end to end: exit 2, one line on stderr, nothing in out_dir modified.
#    (tests/test_config.py covers resolve_config's messages in-process.)

@pytest.fixture
def runs(baseline, tmp_path):
    """Copies of the baseline run: finished/, unfinished/ (final.pt removed) and empty/."""
    shutil.copytree(baseline["out"], tmp_path / "finished")
    shutil.copytree(baseline["out"], tmp_path / "unfinished")
    os.remove(tmp_path / "unfinished" / "final.pt")
    os.makedirs(tmp_path / "empty")
    return tmp_path


def corrupt(path):
    data = read(path)
    with open(path, "wb") as f:
        f.write(data[: len(data) // 2])


def foreign(path):
    torch.save({"weights": torch.zeros(3)}, path)


BAD = [  # (out_dir under runs, extra overrides, prepare the dir, expected text in the one error line)
    ("fresh", ["group_size=two"], None, "config key 'group_size' must be int"),
    ("fresh", ["lr=-0.001"], None, "lr must be > 0"),
    ("fresh", ["group_size=1"], None, "group_size must be >= 2"),
    ("fresh", ["answers_per_rollout=0"], None, "answers_per_rollout (m) must be >= 1"),
    ("fresh", ["alpha=0"], None, "alpha must be > 0"),
    ("fresh", ["alpha=-2"], None, "alpha must be > 0"),
    ("fresh", ["task_options={noise: 0.5, colour: 3}"], None, "task_options for task 'persona'"),
    ("empty", ["resume=true"], None, "ckpt.pt does not exist"),
    ("unfinished", ["resume=true"], corrupt, "is unreadable or corrupt"),
    ("unfinished", ["resume=true"], foreign, "is not a checkpoint of this trainer"),
    ("unfinished", ["resume=true"], lambda p: os.remove(os.path.join(os.path.dirname(p), "metrics.jsonl")),
     "metrics.jsonl is missing"),
    ("finished", [], None, "already holds a finished run; choose another out_dir"),
    ("finished", ["resume=true"], None, "already holds a finished run; nothing to resume"),
    ("unfinished", [], None, "holds an unfinished run; --set resume=true"),
    ("unfinished", ["resume=true", "lr=0.5"], None, "config differs from the saved run in ['lr']"),
    ("unfinished", ["resume=true", "algo=grpo", "seed=3"], None, "in ['algo', 'seed']"),
    ("afile", [], lambda p: open(os.path.dirname(p), "w").close(), "cannot create directory"),
]


@pytest.mark.parametrize("where, overrides, prepare, message", BAD, ids=[b[3][:40] for b in BAD])
def test_bad_configuration_one_line_exit_2(runs, baseline, capsys, where, overrides, prepare, message):
    out = runs / where
    if prepare:
        prepare(str(out / "ckpt.pt"))
    before = snapshot(runs)
    with pytest.raises(SystemExit) as exit_:
        trainer.main(["--config", TINY, "--set", f"out_dir={out}", f"warmstart_dir={baseline['ws']}", *RUN,
                      *overrides])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith("error: ") and message in err, err
    assert snapshot(runs) == before


def test_unknown_key_in_config_file(tmp_path, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text("task: persona\nlrr: 0.1\n")
    with pytest.raises(SystemExit) as exit_:
        trainer.main(["--config", str(path), "--set", f"out_dir={tmp_path}/run"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith("error: unknown config key 'lrr'"), err
    assert not (tmp_path / "run").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_unavailable_device_writes_nothing(tmp_path):
    with pytest.raises(ConfigError, match="CUDA is not available"):
        train(config(tmp_path / "run", tmp_path / "ws", "device=cuda"))
    assert not (tmp_path / "run").exists()


def test_bad_configuration_subprocess(runs, baseline):
    """The real command line, two at once (each start costs seconds of CPU): a range error on a
    fresh out_dir, and a resume of an unfinished run with a changed config."""
    cases = [(runs / "fresh", ["answers_per_rollout=0"], "error: answers_per_rollout (m) must be >= 1, got 0"),
             (runs / "unfinished", ["resume=true", "group_size=8"],
              "config differs from the saved run in ['group_size']")]
    before = snapshot(runs)
    procs = [popen(cli(out, baseline["ws"], *overrides)) for out, overrides, _ in cases]
    for proc, (out, _, message) in zip(procs, cases):
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 2, err
        assert len(err.splitlines()) == 1 and err.startswith("error: ") and message in err, err
    assert snapshot(runs) == before
    assert not (runs / "fresh").exists()


# ----------------------------------------------------------------------------------------------
# 3. Kills: atomic checkpoints, and resume gives the uninterrupted run byte for byte.

def test_sigkill_mid_run_and_during_warm_start_then_resume(baseline, tmp_path):
    """Two real SIGKILLs: a run with the warm start cached, killed once ckpt.pt exists (step 3) and
    step 4 is logged; and a run with a fresh cache, killed during its warm start."""
    mid, ws = tmp_path / "mid", baseline["ws"]
    warm, fresh_ws = tmp_path / "warm", tmp_path / "ws"
    sigkill_when({
        popen(cli(mid, ws)): lambda: (mid / "ckpt.pt").exists()
        and b'"kind": "train", "step": 4,' in read(mid / "metrics.jsonl"),
        popen(cli(warm, fresh_ws)): lambda: (warm / "log.txt").exists() and b"warm start 1/" in read(warm / "log.txt"),
    })
    # mid-run: the resume drops what was logged after ckpt.pt and ends exactly where the baseline did
    assert not (mid / "final.pt").exists(), "the run finished before it could be killed"
    train(config(mid, ws, "resume=true"))  # in-process: the same code, without another interpreter start
    assert read(mid / "metrics.jsonl") == baseline["metrics"]
    assert same_weights(weights(mid / "final.pt"), baseline["final"])
    # during the warm start: nothing half-trained was cached, and with no checkpoint yet the resume
    # starts the run again. steps may change on resume; 4 keeps this short, and a fresh warm start
    # + 4 steps must log exactly the baseline's first lines (through eval @ 4)
    assert not [f for f in os.listdir(fresh_ws) if f.endswith(".pt")]
    assert not (warm / "metrics.jsonl").exists()
    train(config(warm, fresh_ws, "resume=true", "steps=4"))
    text = read(warm / "metrics.jsonl")
    assert text.count(b"\n") == 7 and baseline["metrics"].startswith(text)
    assert same_weights(weights(next(fresh_ws.glob("*.pt"))), weights(next(baseline["ws"].glob("*.pt"))))


def _kill_at(point):
    """An atomic_save replacement that dies at one point, as a SIGKILL there would."""
    real, calls = checkpoint.atomic_save, []

    def save(obj, path):
        calls.append(path)
        if point == "before the first checkpoint" and len(calls) == 1:
            raise Killed
        if point == "mid-write of the second checkpoint" and len(calls) == 2:
            with open(f"{path}.{os.getpid()}.tmp", "wb") as f:  # a torn temporary file stays behind
                f.write(b"PK\x03\x04 half a checkpoint")
            raise Killed
        if point == "before final.pt" and path.endswith("final.pt"):
            raise Killed
        real(obj, path)
    return save


def test_simulated_kills_at_exact_points_resume_exactly(baseline, tmp_path, monkeypatch):
    """One run killed three times where a SIGKILL is hard to aim, resumed after each kill."""
    out = tmp_path / "run"
    cfg = config(out, baseline["ws"])
    for point, ckpt_step in [("before the first checkpoint", None), ("mid-write of the second checkpoint", 3),
                             ("before final.pt", 12)]:
        with monkeypatch.context() as patch:
            patch.setattr(checkpoint, "atomic_save", _kill_at(point))
            try:
                train({**cfg, "resume": point != "before the first checkpoint"})
                pytest.fail(f"the run was not killed {point}")
            except Killed:
                pass
        gc.collect()  # close the killed run's files, as process exit would
        assert not (out / "final.pt").exists()
        if ckpt_step is None:
            assert not (out / "ckpt.pt").exists()
            with pytest.raises(ConfigError, match="holds an unfinished run"):
                train(cfg)  # a plain rerun must not silently clobber it
        else:
            assert load_checkpoint(str(out / "ckpt.pt"))["step"] == ckpt_step
    train({**cfg, "resume": True, "out_dir": f"{out}/./"})  # the same directory, spelled differently
    assert read(out / "metrics.jsonl") == baseline["metrics"]
    assert same_weights(weights(out / "final.pt"), baseline["final"])


def test_atomic_save_never_leaves_a_torn_file(tmp_path, monkeypatch):
    path = str(tmp_path / "ckpt.pt")
    checkpoint.atomic_save({"model": {"w": torch.ones(2)}, "model_config": {}, "config": {}}, path)
    good = read(path)

    def dies_mid_write(obj, f, *args, **kwargs):
        f.write(b"PK\x03\x04 partial")
        raise Killed

    monkeypatch.setattr(torch, "save", dies_mid_write)
    with pytest.raises(Killed):
        checkpoint.atomic_save({"model": {"w": torch.zeros(2)}}, path)
    assert read(path) == good and os.listdir(tmp_path) == ["ckpt.pt"]
    assert torch.equal(load_checkpoint(path)["model"]["w"], torch.ones(2))


# ----------------------------------------------------------------------------------------------
# 4. Determinism: metrics.jsonl is byte-identical for the same config and seed.

def test_same_seed_same_metrics_fresh_and_cached_warm_start(baseline, tmp_path):
    """The baseline trained its warm start; this rerun loads it from the cache. (A second fresh warm
    start is compared with the baseline in test_sigkill_mid_run_and_during_warm_start_then_resume.)"""
    assert "warm start: loaded cached" not in open(os.path.join(baseline["out"], "log.txt")).read()
    cached = train(config(tmp_path / "cached", baseline["ws"]))
    assert "warm start: loaded cached" in open(os.path.join(cached, "log.txt")).read()
    text = read(os.path.join(cached, "metrics.jsonl"))
    assert text == baseline["metrics"]
    assert b'"step_s"' not in text and b'"sample_s"' not in text  # wall-clock lives in timing.jsonl
    assert same_weights(weights(os.path.join(cached, "final.pt")), baseline["final"])
    assert read(os.path.join(cached, "timing.jsonl")) != read(os.path.join(baseline["out"], "timing.jsonl"))


# ----------------------------------------------------------------------------------------------
# 5. Numerics: no NaN or inf reaches the weights; a non-finite loss stops the run cleanly.

def _advantage_fns():
    for name, entry in trainer.ADVANTAGES.items():
        yield name, entry[0] if isinstance(entry, tuple) else entry


@pytest.mark.parametrize("case", ["all zero", "all equal", "some groups equal", "one answer nonzero"])
def test_advantages_are_finite_and_zero_for_zero_variance_groups(case):
    P, G, M, D = 3, 4, 3, 4
    rewards = torch.zeros(P, G, M, D)
    if case == "all equal":
        rewards[:] = 0.5
    elif case == "some groups equal":
        rewards[0] = 0.7
        rewards[1] = torch.rand(G, M, D, generator=torch.Generator().manual_seed(0))
    elif case == "one answer nonzero":
        rewards[0, 0, 0] = 1.0
    weights_ = vpo.sample_weights(P, 16, D, generator=torch.Generator().manual_seed(0))
    flat = {"all zero": (0, 1, 2), "all equal": (0, 1, 2), "some groups equal": (0, 2),
            "one answer nonzero": (1, 2)}[case]  # groups whose rollouts all score the same
    for name, fn in _advantage_fns():
        adv = fn(rewards, rewards.mean(-1), weights_, resolve_config())
        assert adv.shape == (P, G) and torch.isfinite(adv).all(), name
        assert adv[list(flat)].abs().max() < 1e-6, (name, case, adv)


def _empty_generate(real):
    def generate(model, prompt, prompt_mask, num_samples, max_new_tokens, eos_id, **kwargs):
        out = real(model, prompt, prompt_mask, num_samples, 1, eos_id, **kwargs)
        out["tokens"][:] = eos_id  # every completion is just <|eos|>: one empty answer
        return out
    return generate


@pytest.mark.parametrize("task_name, mode", [("persona", "empty answers"), ("persona", "constant rewards"),
                                             ("persona", "random policy"), ("code", "random policy")])
def test_rl_step_keeps_weights_finite(monkeypatch, task_name, mode):
    """Every algorithm, on batches whose groups carry no signal (or, from a random policy, little)."""
    for algo, _ in _advantage_fns():
        cfg = resolve_config(TINY, ["quiet=true", f"algo={algo}", f"task={task_name}"])
        task, tok = make_task(task_name), Tokenizer()
        torch.manual_seed(0)
        model = warmstart.build_model(cfg, tok, "cpu")
        opt = torch.optim.AdamW(model.parameters(), lr=cfg["lr"], weight_decay=cfg["weight_decay"],
                                betas=(0.9, 0.99))
        before = {k: v.clone() for k, v in model.state_dict().items()}
        with monkeypatch.context() as patch:
            if mode == "empty answers":
                patch.setattr(engine, "generate", _empty_generate(engine.generate))
            elif mode == "constant rewards":
                patch.setattr(rollouts, "score_answers", lambda task, problem, answers, m, as_written=False, memo=None:
                              np.full((m, task.dim), 0.5, dtype=np.float32))
            run = trainer.Run(cfg, task, tok, model, opt, trainer.distributed.Scorer(model),
                              rng=random.Random(0), generator=torch.Generator().manual_seed(0))
            metrics, batch = trainer.rl_step(run)
        json.dumps(metrics, allow_nan=False)  # raises on NaN or inf
        assert all_finite(model.state_dict()), algo
        if mode != "random policy":  # no signal: zero advantages, zero gradient, weights unchanged
            assert metrics["zero_std_groups"] == 1.0 and metrics["grad_norm"] == 0.0, (algo, metrics)
            assert same_weights(model.state_dict(), before), algo


def _check_stopped_cleanly(out, last_step):
    assert not (out / "final.pt").exists()
    ckpt = load_checkpoint(str(out / "ckpt.pt"))
    assert ckpt["step"] == last_step and all_finite(ckpt["model"])
    text = (out / "metrics.jsonl").read_text()
    assert "NaN" not in text and "Infinity" not in text


def test_absurd_lr_stops_with_exit_2_and_keeps_last_checkpoint(baseline, tmp_path, capsys):
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as exit_:
        trainer.main(["--config", TINY, "--set", f"out_dir={out}", f"warmstart_dir={baseline['ws']}", *RUN,
                      "lr=1e30", "ckpt_every=1"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "non-finite" in err and "last checkpoint is kept" in err, err
    _check_stopped_cleanly(out, last_step=1)


@pytest.mark.parametrize("fault", ["nan loss", "inf weights after step"])
def test_non_finite_stops_before_it_reaches_a_checkpoint(baseline, tmp_path, monkeypatch, fault):
    out = tmp_path / "run"
    calls = []
    if fault == "nan loss":
        real = grpo.policy_loss

        def policy_loss(*args, **kwargs):
            loss, stats = real(*args, **kwargs)
            calls.append(1)
            return (loss * float("nan") if len(calls) == 7 else loss), stats
        monkeypatch.setattr(grpo, "policy_loss", policy_loss)
    else:
        real = torch.optim.AdamW.step

        def step(self, *args, **kwargs):
            result = real(self, *args, **kwargs)
            calls.append(1)
            if len(calls) == 7:
                self.param_groups[0]["params"][0].data[0, 0] = float("inf")
            return result
        monkeypatch.setattr(torch.optim.AdamW, "step", step)
    with pytest.raises(FloatingPointError, match="non-finite"):
        train(config(out, baseline["ws"]))
    _check_stopped_cleanly(out, last_step=6)  # step 7 failed; ckpt.pt is still step 6's


def test_diverged_warm_start_is_not_cached(tmp_path, capsys):
    ws = tmp_path / "ws"
    with pytest.raises(SystemExit) as exit_:
        trainer.main(["--config", TINY, "--set", f"out_dir={tmp_path}/run", f"warmstart_dir={ws}", *RUN,
                      "sft_lr=1e30", "sft_steps=5"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "warm start diverged" in err, err
    assert not [f for f in os.listdir(ws) if f.endswith(".pt")]
