"""rollouts.py: prompts and completions in the policy's format, and rollouts (any token ids the
policy can write) split into answers and scored: hand-made cases, then hostile model output, 3,000
generated rollouts per task through the training path (token ids -> Tokenizer.split_answers ->
rollouts.score_answers), a thousand answers in one rollout, and any string handed to the rewards and
the interpreter."""

import random
import re
import sys
import time
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lang
from codetask import CodeTask
from config import make_task
from model import Tokenizer
from rewards import PersonaTask
from rollouts import rollout_prompt, rollout_text, score_answers

TOK = Tokenizer()
TASKS = ("persona", "persona_collinear", "code")


persona = PersonaTask(num_personas=4, answer_len=12)


code = CodeTask()  # the default family: f = (+ (< x t1) (< x t2)) on 0..15 from three examples


# a larger family: four thresholds on 0..39, half the problems' examples in a narrow window
wide = CodeTask(thresholds=4, domain=40, window_share=0.5)


FAVS = ("a", "b", "c", "d")


tok = Tokenizer()


@pytest.mark.parametrize("name", ["code"])
def test_code_prompts_fit_the_block_size_of_configs_code(name):
    """The longest prompt the evolutionary search writes (max_parents parents with their scores)
    plus m answers fits; a prompt one token longer would not (the block is not oversized by
    much)."""
    import train

    cfg = train.resolve_config(__file__.rsplit("/tests/", 1)[0] + f"/configs/{name}.yaml")
    task = make_task("code", **cfg["task_options"])
    longest = max(
        task.problems("heldout", 500, random.Random(0)), key=lambda p: len(task.prompt(p))
    )
    widest = task.program_text(tuple(task.domain - 1 for _ in range(task.k)))
    prompt = tok.encode(
        rollout_prompt(task, longest, 3, parents=[(widest, 1.0)] * task.max_parents)
    )
    assert (
        len(prompt) + cfg["answers_per_rollout"] * task.max_answer_tokens + 1 <= cfg["block_size"]
    )


def test_parent_prompts_show_each_parents_score_as_hidden_tests_passed():
    problem = (4, 9, 2, 7, 12)
    # fail 3 and 1 of the 13 hidden tests
    worse, better = "(+ (< x 5) (< x 11))", "(+ (< x 4) (< x 10))"
    parents = code.scored(problem, [(5, 11), (4, 10)])
    assert [p[0] for p in parents] == [worse, better] and [p[1] for p in parents] == pytest.approx(
        [10 / 13, 12 / 13]
    )
    assert (
        code.prompt(problem, parents=parents) == f"2->2 7->1 12->0 from {worse} :10 ; {better} :12"
    )
    assert rollout_prompt(code, problem, 1, parents=parents).startswith(
        "<|bos|>1|2->2 7->1 12->0 from (+"
    )


def test_score_answers_drops_duplicates_and_missing():
    rows = score_answers(persona, FAVS, ["aaaa", "aaaa", "bb"], 3)
    assert np.allclose(rows, [persona.reward(FAVS, "aaaa"), [0] * 4, persona.reward(FAVS, "bb")])
    rows = score_answers(persona, FAVS, ["aaaa"], 3)
    assert (rows[1:] == 0).all()
    # the same program spaced differently, or with a leading zero, is a duplicate
    rows = score_answers(
        code, (4, 9, 2, 7, 12), ["(+ (< x 4) (< x 9))", "(+  (< x 4)\n(< x 09))"], 2
    )
    assert rows[0].sum() == 13 and rows[1].sum() == 0


def test_prompt_and_completion_formats():
    assert rollout_prompt(persona, FAVS, 3) == "<|bos|>3|likes abcd<|answer|>"
    assert (
        rollout_prompt(persona, FAVS, 1, goal=[0.5, 0.5, 0, 0])
        == "<|bos|>1|likes abcd w4400<|answer|>"
    )
    assert rollout_text(["ab", "cd"]) == "ab<|sep|>cd<|eos|>"


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300), st.integers(1, 4))
def test_any_rollout_bytes_give_valid_rewards(raw, m):
    """Whatever the policy writes (any token ids), parsing and scoring never fail."""
    ids = list(raw) + [tok.sep, tok.eos][: raw[0] % 3 if raw else 0]
    answers = tok.split_answers(ids)
    for task, problem in (
        (persona, FAVS),
        (code, (4, 9, 2, 7, 12)),
        (wide, (3, 12, 25, 39, 0, 5, 20, 30, 39)),
    ):
        rows = score_answers(task, problem, answers, m)
        assert rows.shape == (m, task.dim) and np.isfinite(rows).all()
        assert ((rows >= 0) & (rows <= 1)).all()


# ----------------------------------------------------------------------------------------------
# Hostile model output: generated rollouts, every one checked against an independent statement of
# its score

CODE_ATOMS = [
    "(",
    ")",
    "(",
    ")",
    "x",
    "x",
    "0",
    "1",
    "3",
    "9",
    "007",
    "999999999",
    "1000000000",
    "9" * 60,
    "+",
    "-",
    "*",
    "/",
    "%",
    "min",
    "max",
    "^",
    "<",
    "=",
    ">",
    "if",
    " ",
    "  ",
    "\n",
    "\t",
    "\r",
    "\x0b",
    "\x00",
    "-1",
    "1.5",
    "1e9",
    "x1",
    "+x",
    "١",
    "１",
    "ｘ",
    "é",
    "🙂",
    "\u200b",
    "\ufeff",
    "\ufffd",
    "\ud800",
    "<|sep|>",
    "<|eos|>",
    "<|bos|>",
    "<|answer|>",
    "eval",
    "exec",
    "__import__('os')",
    "lambda",
    "print(1)",
    ";",
    "'",
    '"',
    "\\",
    "True",
    "None",
]


HOSTILE_PROGRAMS = [
    "",
    " ",
    "\n",
    "()",
    "(",
    ")",
    ")(",
    "(x)",
    "(+)",
    "(+ x)",
    "(+ x 1 2)",
    "(if x x)",
    "((+ x 1))",
    "(/ x 0)",
    "(% x 0)",
    "(/ 1 (- x x))",
    "(% (+ x 1) (- x x))",
    "(/ (- 0 7) 2)",
    "(* 999999999 999999999)",
    "(+ 1000000000 1)",
    "1000000001",
    "9" * 250,
    "9" * 300,
    "(^ 2 30)",
    "(^ 2 29)",
    "(^ 0 0)",
    "(^ 1 999999999)",
    "(^ (- 0 1) 999999999)",
    "(^ x (- 0 1))",
    "(^ 2 (^ 2 (^ 2 (^ 2 2))))",
    "(^ 9 (^ 9 (^ 9 9)))",
    "(^ (^ (^ 9 9) 9) 9)",
    "(+ 1 " * 12 + "x" + ")" * 12,
    "(+ 1 " * 13 + "x" + ")" * 13,
    "(" * 300,
    ")" * 300,
    "(+ 1 " * 60 + "x" + ")" * 60,
    "(if 1 " * 11 + "x" + " 0)" * 11,
    "(if x x x)" * 30,
    "(* x (* x (* x (* x (* x (* x (* x (* x (* x (* x 9))))))))))",
    "__import__('os').system('touch /tmp/pwned')",
    "eval('1+1')",
    "exec('x=1')",
    "lambda x: x",
    "while True: pass",
    "(+ x ١)",
    "(+ x １)",
    "(+ ｘ 1)",
    "(+ x 1)\u200b",
    "\ufeff(+ x 1)",
    "x" * 300,
    "(+ x 1)" + " " * 300,
]


GIANT_STRINGS = [
    "a" * 10**6,
    "(" * 10**6,
    ")" * 10**5,
    "9" * 10**5,
    "(+ 1 " * 20000 + "x" + ")" * 20000,
    "(^ 9 " * 5000 + "9" + ")" * 5000,
]


MAX_ROLLOUT = 512  # token ids: more than any block_size lets the policy write
PERSONA_ATOMS = [
    "A",
    "Z",
    " ",
    "\n",
    "\t",
    "0",
    "9",
    "-",
    "'",
    "é",
    "ß",
    "ａ",
    "ı",
    "\u0301",
    "🙂",
    "\x00",
    "\ud800",
    "\ufffd",
    "<|sep|>",
    "<|eos|>",
    "<|bos|>",
    "<|answer|>",
    "likes",
    ".",
    "\x7f",
]


BINARY_OPS = ["+", "-", "*", "/", "%", "min", "max", "^", "<", "=", ">"]


def _pieces(text):
    return re.findall(r"\(|\)|[^\s()]+|\s+", text)


def mutate_program(text, rng):
    """Grammar-aware damage to a program: token edits, wrapping, deep nesting, cuts, random
    chars."""
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
            toks = [
                "(",
                rng.choice(BINARY_OPS),
                " ",
                *toks,
                " ",
                rng.choice(["x", "0", "1", "(- x x)"]),
                ")",
            ]
        elif op == 5:  # nest: around MAX_DEPTH, sometimes far beyond it
            k = rng.choice([rng.randint(1, 14), rng.randint(15, 100)])
            toks = ["(+ 1 "] * k + toks + [")"] * k
        elif op == 6:
            toks = toks[: rng.randrange(len(toks) + 1)]
        elif op == 7:  # any code point, including surrogates and control characters
            s = "".join(toks)
            i = rng.randrange(len(s) + 1)
            toks = _pieces(s[:i] + chr(rng.randrange(0x110000)) + s[i:])
        else:  # a literal becomes huge, zero, or an expression that divides by zero
            ints = [i for i, t in enumerate(toks) if t.isdigit()]
            if ints:
                toks[rng.choice(ints)] = rng.choice(
                    [
                        "0",
                        "999999999",
                        "1" + "0" * rng.randint(9, 200),
                        "(/ 1 (- x x))",
                        "(^ 9 (^ 9 9))",
                    ]
                )
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
            w = w[: rng.randrange(len(w) + 1)]
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
            pool += [
                "".join(rng.choice(problem) for _ in range(rng.randint(1, task.answer_len)))
                for _ in range(20)
            ]
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
    """Token ids the policy could emit: random ids, random text, or mutated answers joined by
    <|sep|>."""
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
    # zero unless it parses; per-test values are test_codetask.py's business
    if task_name == "code":
        return np.zeros(task.dim) if lang.canonical(answer) is None else None
    if not re.fullmatch(f"[a-z]{{1,{task.answer_len}}}", answer):
        return np.zeros(task.dim)
    counts = np.array([answer.count(f) for f in problem], dtype=np.float64)
    return np.sqrt(
        np.minimum(1.0, (counts + task.overlap * (counts.sum() - counts)) / task.answer_len)
    )


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
    assert not rows[len(answers) :].any()  # missing answers score zero


_AUDIT = {"on": False, "events": []}


def _audit(event, args):
    if _AUDIT["on"] and event in ("exec", "compile"):  # builtins eval/exec/compile raise these
        _AUDIT["events"].append(event)


sys.addaudithook(_audit)  # cannot be removed; it does nothing unless a test switches it on


@pytest.mark.parametrize(
    "family", [("persona", "persona_collinear"), ("code",)], ids=["persona", "code"]
)
def test_three_thousand_hostile_rollouts(family):
    """3,000 rollouts per task; the two persona tasks score the same generated rollouts."""
    tasks = {name: make_task(name) for name in family}
    task_name, task = family[0], tasks[family[0]]
    rng = random.Random(f"fuzz-{task_name}")
    problems = task.problems("train", 16, rng)
    _AUDIT["on"] = True
    eval("1")  # a self-check: the hook does see eval
    _AUDIT["on"] = False
    assert "exec" in _AUDIT["events"]
    _AUDIT["events"].clear()
    n, worst, t_all = 3_000, 0.0, time.perf_counter()
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
    assert not _AUDIT["events"], (
        f"Python eval/exec/compile ran while scoring: {_AUDIT['events'][:5]}"
    )
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
    strings = [
        "",
        "\ud800",
        "\udfff(+ x 1)",
        "\x00" * 10,
        "(+ x 1)" + "\x00",
        *GIANT_STRINGS,
        *HOSTILE_PROGRAMS,
        *PERSONA_ATOMS,
    ]
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
