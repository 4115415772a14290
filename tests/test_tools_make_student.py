"""The teaching kit: tools/make_student.py and the grading commands in docs/EXERCISES.md.

The student tree, with every exercise blanked, is built once a session. In it each exercise's
grading command must fail (every selected test with that exercise's NotImplementedError) and pass
once only that exercise's answer is back; no answer's key lines may be left anywhere in it; nothing
outside the blanked bodies and the README's marked answer may change. All pytest runs happen in
ONE subprocess (this file run as a script, see `_run_all`) so torch is imported once and the tree's
files compiled once (their bytecode, kept beside them during the runs, is removed after), with
tracebacks off and pytest's gc-heavy unraisable-exception plugin off: 10 runs of the graded tests
alone, not whole test files. Left out: timing; tests/test_layout.py checks the docs' layout.
"""

import ast
import difflib
import json
import os
import re
import shutil
import subprocess
import sys
import types
import warnings
from pathlib import Path

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
# noqa: E402
from make_student import (
    EXERCISES,
    INSTRUCTOR_ONLY,
    blank_source,
    blanks_by_file,
    body_span,
    build,
    grading_command,
    strip_answers,
    stub_line,
    tracked_files,
)

NOT_IMPLEMENTED = re.compile(r"NotImplementedError: exercise (\w+): see docs/EXERCISES\.md")
STUB = re.compile(r'[ \t]*raise NotImplementedError\("exercise \w+: see docs/EXERCISES\.md"\)\r?\n')


def _is_git_checkout():
    try:
        return subprocess.run(["git", "-C", ROOT, "rev-parse"], capture_output=True).returncode == 0
    except OSError:
        return False


needs_git = pytest.mark.skipif(not _is_git_checkout(), reason="make_student copies `git ls-files`")


# ----------------------------------------------------------------------------------------------
# blank_source on a made-up file: fast, and covers what the repository does not use yet

SOURCE = '''import os


class Box:
    def method(self, x):
        """Doc of a method."""
        # a hint that must go with the body
        y = x + 1

        return y  # trailing comment


def branchy(a, mode="one"):
    """Doc."""
    if mode == "one":
        return a
    if mode == 'two':
        # how to do two
        b = a * 2
        return b
    raise ValueError(mode)
'''


def test_blank_source_method_and_branch():
    new, spans = blank_source(SOURCE, [("Box.method", "m"), ("branchy[if mode == 'two']", "b")])
    assert new == SOURCE.replace(
        "        # a hint that must go with the body\n        y = x + 1\n\n        return y  # "
        "trailing comment\n",
        f"        {stub_line('m')}\n",
    ).replace(
        "        # how to do two\n        b = a * 2\n        return b\n",
        f"        {stub_line('b')}\n",
    )
    assert [s[:2] for s in spans] == [(7, 10), (18, 20)]
    namespace = {}
    exec(compile(new, "<student>", "exec"), namespace)  # our own test string, not model output
    assert namespace["branchy"](3) == 3 and namespace["Box"].method.__doc__ == "Doc of a method."
    for call in (lambda: namespace["Box"]().method(1), lambda: namespace["branchy"](3, "two")):
        with pytest.raises(NotImplementedError):
            call()


def test_blank_source_keeps_line_endings_and_skips_nested_targets():
    crlf = SOURCE.replace("\n", "\r\n")
    new, spans = blank_source(crlf, [("branchy", "whole"), ("branchy[if mode == 'two']", "part")])
    assert len(spans) == 1 and stub_line("part") not in new  # the branch went with the whole body
    assert new == crlf.split('    if mode == "one"')[0] + f"    {stub_line('whole')}\r\n"
    with pytest.raises(LookupError, match="no function or class 'nope'"):
        blank_source(SOURCE, [("Box.nope", "x")])
    with pytest.raises(LookupError, match="expected one `if mode == 3:`"):
        blank_source(SOURCE, [("branchy[if mode == 3]", "x")])


def test_strip_answers_empties_the_marked_block_of_a_blanked_exercise():
    text = "Intro.\n\n<!-- answer: vpo (a note) -->\n```python\nx = 1\ny = 2\n```\nAfter.\n"
    stripped, names = strip_answers(text, ["vpo", "grpo"])
    assert names == ["vpo"]
    assert stripped == text.replace("x = 1\ny = 2\n", "# exercise vpo: see docs/EXERCISES.md\n")
    assert strip_answers(text, ["grpo"]) == (text, [])  # vpo not blanked: the block stays
    for no_block in ("<!-- answer: vpo -->\nprose\n```\nx = 1\n```\n", "<!-- answer: vpo -->\n"):
        with pytest.raises(LookupError, match="no fenced code block right after"):
            strip_answers(no_block, ["vpo"])


def test_the_readmes_answer_is_marked():
    with open(os.path.join(ROOT, "README.md")) as f:
        assert strip_answers(f.read(), ["vpo"])[1] == ["vpo"]


# ----------------------------------------------------------------------------------------------
# The docs name the same commands and existing functions


def _doc(name):
    with open(os.path.join(ROOT, "docs", name)) as f:
        return f.read()


def test_exercises_doc_gives_every_grading_command():
    text = _doc("EXERCISES.md")
    for name in EXERCISES:
        assert grading_command(name) in text, name
        assert f"--exercise {name}" in text, name


def _defined_names(path):
    """'f', 'Class', 'Class.method' and module-level assignments of one of our source files."""
    with open(path) as f:
        tree = ast.parse(f.read())
    names = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.ClassDef):
            names |= {node.name} | {
                f"{node.name}.{n.name}" for n in node.body if isinstance(n, ast.FunctionDef)
            }
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


@pytest.mark.parametrize("doc", ["TOUR.md", "EXERCISES.md"])
def test_docs_point_at_functions_that_exist(doc):
    modules = {f[:-3] for f in os.listdir(ROOT) if f.endswith(".py")}
    refs = set(re.findall(r"`(\w+)\.(\w+(?:\.\w+)?)(?:\(\))?`", _doc(doc)))
    refs = {
        (m, n)
        for m, n in refs
        if m in modules and n not in ("py", "json", "jsonl", "md", "png", "pt")
    }
    assert len(refs) >= 5
    missing = sorted(
        f"{m}.{n}" for m, n in refs if n not in _defined_names(os.path.join(ROOT, m + ".py"))
    )
    assert not missing, f"{doc} names functions that do not exist: {missing}"


# ----------------------------------------------------------------------------------------------
# The student tree, file by file


@pytest.fixture(scope="session")
def student_tree(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("kit") / "student")
    build(out)
    return out


@needs_git
def test_non_graded_code_is_byte_identical(student_tree):
    files = tracked_files()
    written = {
        os.path.relpath(os.path.join(d, f), student_tree)
        for d, _, fs in os.walk(student_tree)
        for f in fs
    }
    assert written == set(files) and not set(INSTRUCTOR_ONLY) & written
    todo = blanks_by_file(EXERCISES)
    for rel in files:
        ref, stu = (Path(os.path.join(root, rel)).read_bytes() for root in (ROOT, student_tree))
        if rel.endswith(".md") and ref != stu:
            assert stu.decode() == strip_answers(ref.decode(), list(EXERCISES))[0], rel
            continue
        if rel not in todo:
            assert ref == stu, rel
            continue
        # every changed run of lines must lie inside a graded body and become one stub line
        ref_lines, stu_lines = ref.decode().splitlines(True), stu.decode().splitlines(True)
        tree = ast.parse(ref.decode())
        bodies = []
        for target, _ in todo[rel]:
            node = tree
            for part in target.split("[")[0].split("."):
                node = next(n for n in node.body if getattr(n, "name", None) == part)
            first = node.body[0].end_lineno if ast.get_docstring(node) else node.lineno
            bodies.append((first, node.end_lineno))  # what follows the docstring (or the def line)
        ops = [
            op
            for op in difflib.SequenceMatcher(
                None, ref_lines, stu_lines, autojunk=False
            ).get_opcodes()
            if op[0] != "equal"
        ]
        assert ops, rel
        for tag, i1, i2, j1, j2 in ops:
            assert tag == "replace" and j2 - j1 == 1, (rel, ref_lines[i1:i2], stu_lines[j1:j2])
            assert STUB.fullmatch(stu_lines[j1]), stu_lines[j1]
            assert any(lo < i1 + 1 and i2 <= hi for lo, hi in bodies), (rel, i1 + 1, i2)


@needs_git
def test_blanked_functions_keep_signature_and_docstring(student_tree):
    for rel, blanks in blanks_by_file(EXERCISES).items():
        trees = [
            ast.parse(Path(os.path.join(root, rel)).read_text()) for root in (ROOT, student_tree)
        ]
        for target, name in blanks:
            if "[" in target:
                continue  # a branch; covered by the runs below
            ref, stu = (
                [
                    n
                    for n in ast.walk(t)
                    if isinstance(n, ast.FunctionDef) and n.name == target.split(".")[-1]
                ][0]
                for t in trees
            )
            assert ast.dump(ref.args) == ast.dump(stu.args) and ast.get_docstring(
                ref
            ) == ast.get_docstring(stu)
            raise_stmt = stu.body[-1]
            assert len(stu.body) == 1 + (ast.get_docstring(stu) is not None)
            assert (
                isinstance(raise_stmt, ast.Raise)
                and raise_stmt.exc.func.id == "NotImplementedError"
            )
            assert raise_stmt.exc.args[0].value == f"exercise {name}: see docs/EXERCISES.md"


# ----------------------------------------------------------------------------------------------
# Running the grading commands in the tree with every exercise blanked, one answer back at a time


def enclosing(name):
    """The exercises whose blanked bodies hold one of `name`'s targets: sobol's branch lies inside
    weights' sample_weights. In the full tree `name` stands in for them (it is their smaller
    variant), so they are not blanked when `name` is graded."""
    mine = {spec.split("[")[0] for spec in EXERCISES[name]["blank"] if "[" in spec}
    return {other for other, ex in EXERCISES.items() if other != name and mine & set(ex["blank"])}


def trees(name):
    """The exercises blanked when `name` is graded: (without its answer, with it)."""
    blanked = [n for n in EXERCISES if n not in enclosing(name)]
    inside = {n for n in EXERCISES if name in enclosing(n)}  # weights' answer holds sobol's
    return blanked, [n for n in blanked if n != name and n not in inside]


def graded_sources(names):
    """{graded file: its text with the bodies of exercises `names` blanked} for every file any
    exercise blanks (the reference text where none of `names` blanks it)."""
    out = {}
    for rel in blanks_by_file(EXERCISES):
        text = Path(os.path.join(ROOT, rel)).read_text()
        blanks = blanks_by_file(names).get(rel, [])
        out[rel] = blank_source(text, blanks)[0] if blanks else text
    return out


@pytest.fixture(scope="session")
def runs(student_tree, tmp_path_factory):
    """Each exercise's grading command in the student tree with every exercise blanked ("blank:")
    and with its own answer back ("answer:"), all in ONE subprocess (torch imported once), which
    writes each job's graded files into the tree before running it and the full tree's after."""
    if not _is_git_checkout():
        pytest.skip("make_student copies `git ls-files`")
    tmp = tmp_path_factory.mktemp("kit-runs")
    full = graded_sources(list(EXERCISES))
    jobs = {}
    for name, ex in EXERCISES.items():
        blanked, answered = trees(name)
        args = ["-k", ex["k"], *ex["tests"]]
        jobs[f"answer:{name}"] = dict(args=args, files=graded_sources(answered))
        if blanked != list(EXERCISES):
            jobs[f"blank:{name}"] = dict(args=args, files=graded_sources(blanked))
    # one run, last, grades every other exercise blanked in the full tree: the tests their answer
    # runs selected (a -k expression would match a file's name too: test_grpo_ in test_grpo_vs_vpo)
    alone = [f"answer:{name}" for name in EXERCISES if trees(name)[0] == list(EXERCISES)]
    jobs["blank"] = dict(tests_of=alone, files=full)
    probes = [
        dict(module=spec.split(":")[0][:-3], target=spec.split(":")[1])
        for ex in EXERCISES.values()
        for spec in ex["blank"]
        if "[" not in spec
    ]
    sources = [p for p in tracked_files() if p.endswith(".py")]
    with open(tmp / "jobs.json", "w") as f:
        json.dump(
            dict(
                tree=student_tree,
                runs=jobs,
                probes=probes,
                sources=sources,
                full=full,
                behaviour=behaviour_probes(),
            ),
            f,
        )
    # the tree's bytecode and pytest's rewritten tests are cached, so compiled once rather than once
    # a job (the runner drops the cache of each file it rewrites), and removed after the runs
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    proc = subprocess.run(
        [sys.executable, os.path.abspath(__file__), str(tmp / "jobs.json"), str(tmp / "out.json")],
        cwd=tmp,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    for cache in Path(student_tree).rglob("__pycache__"):
        shutil.rmtree(cache)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    with open(tmp / "out.json") as f:
        return json.load(f)


@pytest.mark.parametrize("name", list(EXERCISES))
def test_each_grading_command_fails_blank_and_passes_with_only_its_answer(runs, name):
    """In the tree with every exercise blanked, the command selects tests that all fail with this
    exercise's NotImplementedError (they need no other exercise's function); with only this
    exercise's answer back, every one of them passes."""
    answer = runs["runs"][f"answer:{name}"]
    blank = runs["runs"].get(f"blank:{name}", runs["runs"]["blank"])
    selected = set(answer["selected"])  # the same command in the same files
    assert selected, f"exercise {name}: `{grading_command(name)}` selects no test"
    assert selected <= set(blank["selected"]) and selected <= set(blank["failed"]), sorted(
        selected - set(blank["failed"])
    )
    for test_id in selected:
        found = NOT_IMPLEMENTED.search(blank["failed"][test_id])
        assert found and found.group(1) == name, (test_id, blank["failed"][test_id])
    assert not answer["failed"] and set(answer["passed"]) == selected, answer["failed"]


def test_each_blanked_function_raises_not_implemented(runs):
    assert runs["probes"] and all(v == "NotImplementedError" for v in runs["probes"].values()), (
        runs["probes"]
    )


def _encoded(value):
    """A probe's argument or answer as JSON: tensors and arrays as nested lists with their kind."""
    import numpy as np
    import torch

    if isinstance(value, torch.Tensor):
        return {"tensor": value.tolist(), "dtype": str(value.dtype).removeprefix("torch.")}
    if isinstance(value, np.ndarray):
        return {"array": value.tolist()}
    return value


def behaviour_probes():
    """[(exercise, graded function, arguments, its answer)]: each graded function called by the
    reference on inputs like its tests' (random, so no other function matches by accident). The
    samplers (weights, sobol) are left out: their answers are random draws."""
    import numpy as np
    import torch

    import baselines
    import grpo
    import grpo_vs_vpo
    import metrics
    import vpo

    gen = torch.Generator().manual_seed(0)
    scores = torch.rand(3, 5, generator=gen, dtype=torch.float64)
    scores[1] = 0.5  # a group with nothing to learn
    rewards = torch.rand(2, 4, 3, 2, generator=gen, dtype=torch.float64)  # (P, G, m, D)
    weights = torch.rand(2, 7, 2, generator=gen, dtype=torch.float64)
    weights = weights / weights.sum(-1, keepdim=True)  # (P, N, D) on the simplex
    pool = np.random.default_rng(0).random((6, 3)).round(1)
    one = rewards[:, :, :1]
    calls = [
        ("grpo", "grpo.grpo_advantages", [scores], grpo.grpo_advantages(scores)),
        ("loo", "vpo.leave_one_out_advantages", [scores], vpo.leave_one_out_advantages(scores)),
        ("vpo", "vpo.set_scores", [rewards, weights], vpo.set_scores(rewards, weights)),
        ("vpo", "vpo.vpo_advantages", [rewards, weights], vpo.vpo_advantages(rewards, weights)),
        (
            "one_file",
            "grpo_vs_vpo.advantages",
            ["vpo", rewards, weights],
            grpo_vs_vpo.advantages("vpo", rewards, weights),
        ),
        (
            "one_file",
            "grpo_vs_vpo.advantages",
            ["grpo", one, weights],
            grpo_vs_vpo.advantages("grpo", one, weights),
        ),
        ("one_file", "grpo_vs_vpo.best_at_k", [scores, 2], grpo_vs_vpo.best_at_k(scores, 2)),
        ("at_k", "metrics.pass_at_k", [10, 3, 4], metrics.pass_at_k(10, 3, 4)),
        ("at_k", "metrics.max_at_k", [pool[:, 0].tolist(), 3], metrics.max_at_k(pool[:, 0], 3)),
        ("at_k", "baselines.best_rank_chances", [6, 3], baselines.best_rank_chances(6, 3)),
        ("pool", "metrics.reward_space_diversity", [pool], metrics.reward_space_diversity(pool)),
        ("pool", "metrics.pareto_fraction", [pool], metrics.pareto_fraction(pool)),
    ]
    return [(e, f, [_encoded(a) for a in args], _encoded(out)) for e, f, args, out in calls]


# The grading tests' own oracles, which compute an answer the slow way: {candidate: why it stays}
ORACLES = {
    "tests/test_metrics.py:brute_max_at_k": "every k-subset enumerated, exponential in n: the "
    "test of a large pool needs the exact formula",
    "tests/test_metrics.py:brute_best_at_k_by_order": "every ordering enumerated: exponential",
    "tests/test_metrics.py:comb_pass_at_k": "the closed form (d)'s text states, in exact "
    "fractions: the exercise asks for the product form, which the test of n = 1000 times",
}


def test_no_other_function_of_the_student_tree_returns_an_answer(runs):
    """Every top-level function of every .py file of the student tree (lab/, tools/, tests/ too)
    whose signature takes a graded function's arguments is called on them (a time limit each,
    with no process started or file removed) and none returns that function's answer; the graded
    functions themselves raise NotImplementedError there. The tests' brute-force oracles are the
    known exceptions (ORACLES)."""
    behaviour = runs["behaviour"]
    counts = {k: behaviour[k] for k in ("modules", "calls", "not_imported")}
    assert behaviour["modules"] >= 40 and behaviour["calls"] >= 100, counts
    assert not behaviour["not_imported"], counts  # a module torn by a timed-out call skips files
    found = {candidate for _, _, candidate in behaviour["matches"]}
    assert found <= set(ORACLES), sorted(m for m in behaviour["matches"] if m[2] not in ORACLES)
    assert found == set(ORACLES), f"ORACLES that return no answer any more: {set(ORACLES) - found}"


def test_the_enclosing_exercise_of_a_branch_is_the_whole_functions():
    assert enclosing("sobol") == {"weights"}
    assert all(not enclosing(name) for name in EXERCISES if name != "sobol")


# ----------------------------------------------------------------------------------------------
# No answer elsewhere in the student tree

# Each exercise's key lines, whitespace removed: the computation a student writes. Each must sit in
# that exercise's reference bodies (so the list follows the answers) and nowhere in the student
# tree, in any file (docs, notebooks, other modules, tests).
KEY_LINES = {
    "one_file": [  # robust to renamed arguments and constants (weights, EPS) of the one file
        '"pgmd,pnd->pgnm"',
        ".max(dim=-1).values.mean(dim=-1)",
        "scores.std(dim=1,keepdim=True,unbiased=False)",
        "math.comb(i,k-1)/math.comb(n,k)",
    ],
    "grpo": [
        "scores.std(dim=1,keepdim=True,unbiased=False)",
        "(scores-mean)/(group_std+eps)",
        "torch.where(group_std<eps",
    ],
    "vpo": [
        '"pgmd,pnd->pgnm"',
        ".max(dim=-1).values.mean(dim=-1)",
        "grpo_advantages(set_scores(rewards,weights)",
    ],
    "weights": [
        "rng.dirichlet(np.full(dim,alpha)",
        "torch.quasirandom.SobolEngine(",
        "edges[...,1:]-edges[...,:-1]",
    ],
    "sobol": ["torch.quasirandom.SobolEngine(", "edges[...,1:]-edges[...,:-1]"],
    "at_k": ["np.prod(1.0-k/np.arange(n-c+1,n+1", "num*(j+1)//(j+2-k)"],
    "pool": ["(g*(n-g))@gaps.sum(axis=1)", "(r[None,:,:]>=r[:,None,:]).all(axis=2)"],
    "loo": ["(scores.sum(dim=1,keepdim=True)-scores)/(G-1)"],
}


# Each answer by what it computes: other spellings of the same computation, as regular expressions
# over whitespace-squeezed text (any names, any library). A match anywhere in the student tree is a
# leak unless NOT_ANSWERS says why that text computes something else.
SET_SCORE = [  # the max over a set's answers under each weighting, then the mean over weightings
    r"\.(?:max|amax)\((?:(?:dim|axis)=)?-?\d\)(?:\.values|\[0\])?\.mean\(",
    r"(?:np|numpy|torch)\.(?:max|amax)\([^;]{1,80}?,(?:(?:dim|axis)=)?-?\d\)(?:\.values|\[0\])?"
    r"\.mean\(",
    r"[\"'](\w)(\w)(\w)(\w),\1(\w)\4(?:->|[\"'])",  # einsum "pgmd,pnd": answers under weightings
    r"@\w+(?:\[[^\]]*\])?\.(?:T|mT)\)\.(?:max|amax)\(",  # (w @ r.T).max(...)
    r"scalari[sz]ed\w*\.(?:max|amax)\(",  # the reduction that comes first, by the one file's name
]
Z_SCORE = [  # the group's population std, the z-score, the zeros of a flat group
    r"\.std\((?:dim=)?1,keepdim=True,(?:unbiased=False|correction=0)\)",
    r"\.std\(axis=1,keepdims=True\)",  # numpy's default std is the population's
    r"(?i)\((\w+)-\w*mean\w*\)/\((?!\w*mean)\w+\+\w*eps\w*\)",  # not MaxRL's (r - mean) / mean
    r"(?i)where\((?<!\w)\w*std\w*<\w*(?:eps|min_std)",
]
BEST_OF_K = [  # the chance that the i-th smallest is the best of k: C(i, k-1) / C(n, k)
    r"comb\(\w+,(\w+)-1\)/(?:math\.)?comb\(\w+,\1\)",
    r"C\(\w+(?:-1)?,\w+-[12]\)",  # in prose or a docstring: C(j, k-1), C(j-1, k-2) ...
    r"(?<!\w)\w++\*\(\w++\+1\)//\(\w++\+2-\w++\)",  # the exact recurrence of C(j, k-1) in j
]
SPELLINGS = {
    "one_file": SET_SCORE + Z_SCORE + BEST_OF_K,
    "grpo": Z_SCORE,
    "vpo": SET_SCORE + [r"grpo_advantages\((?:vpo\.)?set_scores\("],
    "weights": [
        r"SobolEngine\(",
        r"(?<!\w)(\w++)\[\.\.\.,1:\]-\1\[\.\.\.,:-1\]",
        r"dirichlet\(np\.full\(",
    ],
    "sobol": [r"SobolEngine\(", r"(?<!\w)(\w++)\[\.\.\.,1:\]-\1\[\.\.\.,:-1\]"],
    "at_k": BEST_OF_K + [r"prod\(1(?:\.0?)?-\w+/(?:np\.)?arange\("],
    "pool": [
        r"\((\w+)\*\((\w+)-\1\)\)@",  # each gap's pairs, g (n - g), times the gaps
        r"(?<!\w)(\w++)\[None(?:,:)*\]>=\1\[:,None(?:,:)?\]",  # every row against every row
        r"(?<!\w)(\w++)\[:,None(?:,:)?\]>=\1\[None(?:,:)*\]",
    ],
    "loo": [r"\((\w+)\.sum\([^)]*\)-\1\)/\(\w+-1\)"],  # (sum - x) / (G - 1), any names
}
# (file, squeezed text holding the match, why it computes something else than an answer)
NOT_ANSWERS = [
    (
        "evaluate.py",
        "float(scalar.max(-1).values.mean())",
        "the best answer of a rollout under the fixed mean, averaged: no weightings",
    ),
    (
        "tests/test_vpo.py",
        "generator=gen).max(-1).values.mean()",
        "the mean of a weighting's largest coordinate: how peaked Dirichlet(alpha) is",
    ),
    (
        "tests/test_vpo.py",
        "[...,:3].max(-1).values.mean().item()",
        "E_w[max(w1, w2, w3)], the Sobol test's integrand: weightings alone, no reward vectors",
    ),
    (
        "baselines.py",
        "std=rewards.std(dim=1,keepdim=True,unbiased=False)#(P,1,D)z=torch.where(std<eps",
        "GDPO's z-score of each reward component, its std clamped: another function, and (a)'s "
        "text names the population std itself",
    ),
    (
        "tests/test_baselines.py",
        "A_neg=(1-rho-C(n-c-1,k-1)/C(n-1,k-1))/sigma",
        "pass@k training's advantage of a failed sample (arXiv 2508.10751), not a best-of-k chance",
    ),
]
# Text that computes an exercise's answer in a file this kit does not own: the test warns while it
# is there and names an entry that no longer matches. (file, exercise, text, what to do)
TO_MEND = []


def _needle(pattern):
    """Text every match of `pattern` holds, for a plain search first ("" if none is listed): a
    pattern that starts with a name is slow on 30 MB of text."""
    plain = pattern.replace("\\", "")
    return next((n for n in ("[:,None", "[...,1:]-", "+1)//(", ".mean(") if n in plain), "")


def spelled_answers(root):
    """[(file, exercise, its squeezed text, start, end)] for every match of SPELLINGS or
    KEY_LINES in the files under root (a notebook's cells and outputs as a reader sees them)."""
    found = []
    for folder, _, files in os.walk(root):
        for file in files:
            text = _text_of(os.path.join(folder, file))
            if text is None:
                continue
            rel, squeezed = os.path.relpath(os.path.join(folder, file), root), _squeezed(text)
            spans = {}  # each pattern searched once, though several exercises share it
            for pattern in {p for ps in SPELLINGS.values() for p in ps}:
                if _needle(pattern) in squeezed:  # a plain search first: 30 MB of text
                    spans[pattern] = [m.span() for m in re.finditer(pattern, squeezed)]
            for name in EXERCISES:
                found += [
                    (rel, name, squeezed, start, end)
                    for pattern in SPELLINGS[name]
                    for start, end in spans.get(pattern, [])
                ]
                for key in KEY_LINES[name]:
                    found += [
                        (rel, name, squeezed, m.start(), m.end())
                        for m in re.finditer(re.escape(key), squeezed)
                    ]
    return found


def _within(squeezed, start, end, text):
    """Whether an occurrence of `text` in `squeezed` covers the span start:end."""
    at = squeezed.find(text)
    while at >= 0:
        if at <= start and end <= at + len(text):
            return True
        at = squeezed.find(text, at + 1)
    return False


def leaks(root):
    """-> (leaks, to mend, unused NOT_ANSWERS, mended TO_MEND): each a list of (file, exercise,
    the text around the match or the entry)."""
    found, used, mending = [], set(), set()
    for rel, name, squeezed, start, end in spelled_answers(root):
        why = [
            i
            for i, (f, text, _) in enumerate(NOT_ANSWERS)
            if f == rel and _within(squeezed, start, end, text)
        ]
        mend = [
            i
            for i, (f, n, text, _) in enumerate(TO_MEND)
            if f == rel and _within(squeezed, start, end, text)
        ]
        used |= set(why)
        mending |= set(mend)
        if not why and not mend:
            found.append((rel, name, squeezed[max(0, start - 40) : end + 20]))
    unused = [NOT_ANSWERS[i][:2] for i in range(len(NOT_ANSWERS)) if i not in used]
    to_mend = [TO_MEND[i] for i in sorted(mending)]
    mended = [TO_MEND[i][:3] for i in range(len(TO_MEND)) if i not in mending]
    return sorted(set(found)), to_mend, unused, mended


def _squeezed(text):
    return "".join(text.split())


def _text_of(path):
    """A file's text as a reader sees it (a notebook's cells and outputs), or None if binary."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return None
    if path.endswith(".ipynb"):
        cells = json.loads(text)["cells"]
        parts = ["".join(c["source"]) for c in cells]
        for cell in cells:
            for output in cell.get("outputs", []):
                parts.append("".join(output.get("text", "")))
                parts += ["".join(v) for k, v in output.get("data", {}).items() if "text" in k]
        text = "\n".join(parts)
    return text


def test_key_lines_are_the_answers():
    for name, keys in KEY_LINES.items():
        bodies = ""
        for rel, blanks in blanks_by_file([name]).items():
            lines = Path(os.path.join(ROOT, rel)).read_text().splitlines(True)
            tree = ast.parse("".join(lines))
            for target, _ in blanks:
                first, last, _ = body_span(tree, lines, target)
                bodies += "".join(lines[first - 1 : last])
        for key in keys:
            assert key in _squeezed(bodies), (name, key)
    assert set(KEY_LINES) == set(EXERCISES)


@needs_git
def test_no_answer_sits_anywhere_in_the_student_tree(student_tree):
    """No file of the student tree (docs, notebooks' cells and outputs, lab/, tools/, tests,
    docstrings and comments) spells out an answer: its key lines or another spelling of what it
    computes (SPELLINGS). Each exception says why it computes something else (NOT_ANSWERS) or
    waits for a change outside the kit (TO_MEND, a warning while it is there)."""
    found, to_mend, unused, mended = leaks(student_tree)
    assert not found, "answers in the student tree:\n" + "\n".join(map(str, found))
    assert not unused, f"NOT_ANSWERS entries that match nothing any more: {unused}"
    for rel, name, _, what in to_mend:
        warnings.warn(f"{rel} holds exercise {name}'s answer: {what}", stacklevel=1)
    if mended:
        warnings.warn(f"TO_MEND entries mended (remove them): {mended}", stacklevel=1)


def test_the_leak_check_finds_each_spelling_it_knows():
    """Each known spelling of an answer, written as the issue found it or as a student might, is
    found: the max then the mean in any library, an einsum of the same contraction, the chance of
    the i-th smallest, leave-one-out with any names, the population std's z-score."""
    cases = {
        "vpo": [
            "by_hand = (w @ r.T).max(axis=1).mean()",
            "R = torch.einsum('bkad,bwd->bkwa', rw, ws).amax(-1).mean(-1)",
            "x = np.max(q, axis=-1).mean()",
            "s = scalarized.max(dim=-1).values",
            "R = q.max(-1)[0].mean(-1)",
        ],
        "at_k": ["p = [math.comb(j, k - 1) / math.comb(G, k) for j in range(G)]", "C(j, k-1)"],
        "loo": ["others = (bonus.sum(dim=1, keepdim=True) - bonus) / (G - 1)"],
        "grpo": [
            "z = (r - group_mean) / (sd + EPS)",
            "s = x.std(1, keepdim=True, correction=0)",
            "torch.where(std < MIN_STD, 0.0, a)",
        ],
        "pool": ["n = (g * (n - g)) @ gaps.sum(axis=1)", "(rows[:, None] >= rows[None]).all(-1)"],
    }
    for name, texts in cases.items():
        for text in texts:
            squeezed = _squeezed(text)
            assert any(re.search(p, squeezed) for p in SPELLINGS[name]), (name, text)
    # and prose that states a method without its code is not flagged
    for text in [
        "R_g = (1/N) sum_n max_m w_n . r_gm",
        "a - b, its 95% interval",
        "the mean over the N weightings of the best answer under each",
    ]:
        squeezed = _squeezed(text)
        assert not [n for n, ps in SPELLINGS.items() for p in ps if re.search(p, squeezed)], text


# ----------------------------------------------------------------------------------------------
# The subprocess


class Recorder:
    """A pytest plugin keeping which tests a run selected, which passed and why each failed."""

    def __init__(self):
        self.selected, self.passed, self.failed = [], [], {}

    def pytest_collection_finish(self, session):
        self.selected = [item.nodeid for item in session.items]

    def pytest_runtest_logreport(self, report):
        if report.failed:
            crash = getattr(report.longrepr, "reprcrash", None)
            self.failed[report.nodeid] = crash.message if crash else str(report.longrepr)
        elif report.passed and report.when == "call":
            self.passed.append(report.nodeid)


def tree_modules(tree, modules, sources):
    """The names among `modules` ({name: module}) loaded from the tree's own source files,
    `sources` (paths relative to a tree; every tree holds the same). A package installed under the
    tree, as in a virtual environment inside the clone, is not the tree's: torch's modules, dropped
    and imported again, fail ("Only a single TORCH_LIBRARY can be used to register ...")."""
    own = {os.path.realpath(os.path.join(tree, rel)) for rel in sources}
    return sorted(
        name
        for name, module in modules.items()
        if os.path.realpath(getattr(module, "__file__", None) or "") in own
    )


def test_the_runner_drops_the_trees_modules_and_keeps_a_venv_inside_it(tmp_path):
    """A virtual environment inside the clone (`python -m venv .venv`, as many make one) puts
    torch's files under the tree; the runner drops only the tree's own modules between trees."""
    site = tmp_path / ".venv" / "lib" / "python3" / "site-packages"
    files = {
        "grpo": tmp_path / "grpo.py",
        "test_grpo": tmp_path / "tests" / "test_grpo.py",
        "torch._inductor_test": site / "torch" / "_inductor_test.py",
        "numpy": site / "numpy" / "__init__.py",
    }
    modules = {}
    for name, path in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")
        modules[name] = types.ModuleType(name)
        modules[name].__file__ = str(path)
    modules["builtin"] = types.ModuleType("builtin")  # no file at all
    sources = ["grpo.py", "tests/test_grpo.py", "vpo.py"]
    assert tree_modules(str(tmp_path), modules, sources) == ["grpo", "test_grpo"]


def _call_with_nones(module, target):
    """Call module.target with None for every required argument -> "returned" or the exception's
    name (anything but NotImplementedError is reported as a failure)."""
    import importlib
    import inspect

    fn = importlib.import_module(module)
    for part in target.split("."):
        fn = getattr(fn, part)
    required = [p for p in inspect.signature(fn).parameters.values() if p.default is p.empty]
    try:
        fn(*[None] * len(required))
        return "returned"
    except Exception as e:
        return type(e).__name__


def _decoded(value):
    import numpy as np
    import torch

    if isinstance(value, dict) and "tensor" in value:
        return torch.tensor(value["tensor"], dtype=getattr(torch, value["dtype"]))
    if isinstance(value, dict) and "array" in value:
        return np.array(value["array"])
    return value


def _same(got, expected):
    """Whether a candidate's result is the graded function's answer, to float precision."""
    import numpy as np
    import torch

    try:
        if isinstance(got, torch.Tensor):
            got = got.detach().double().numpy()
        got = np.asarray(got, dtype=float)
    except (TypeError, ValueError, RuntimeError):
        return False
    expected = np.asarray(_decoded(expected) if isinstance(expected, dict) else expected, float)
    return got.shape == expected.shape and bool(np.allclose(got, expected, rtol=1e-6, atol=1e-9))


def _imported(tree, rel):
    """The module of the tree's file `rel` (tests/ and tools/ are no packages: loaded by path)."""
    import importlib
    import importlib.util

    name = rel[:-3].replace("/", ".")
    if "/" not in rel or rel.startswith("lab/"):
        return importlib.import_module(name)
    spec = importlib.util.spec_from_file_location(
        "probed_" + name.replace(".", "_"), os.path.join(tree, rel)
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _candidates(module):
    """[(name, function, whether it takes n positional arguments)] for the module's own top-level
    functions but `main` and pytest's tests; one of no required argument (a report, `check()`) is
    no answer."""
    import inspect

    out = []
    for fname, fn in list(vars(module).items()):
        if not inspect.isfunction(fn) or fn.__module__ != module.__name__:
            continue
        if fname == "main" or fname.startswith("test_"):
            continue
        try:
            params = list(inspect.signature(fn).parameters.values())
        except (TypeError, ValueError):
            continue
        if any(p.kind == p.KEYWORD_ONLY and p.default is p.empty for p in params):
            continue
        positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        least = len([p for p in positional if p.default is p.empty])
        most = 10**6 if any(p.kind == p.VAR_POSITIONAL for p in params) else len(positional)
        out.append((fname, fn, lambda n, least=least, most=most: 1 <= least <= n <= most))
    return out


def _refuse_processes_and_removals():
    """Make starting a process and removing a file raise -> [(module, name, the original)]."""
    import shutil

    def refuse(*args, **kwargs):
        raise RuntimeError("the probe starts no process and removes no file")

    places = [(subprocess, "Popen"), (os, "system"), (os, "remove"), (os, "unlink")]
    places += [(os, "rmdir"), (shutil, "rmtree")]
    saved = [(module, name, getattr(module, name)) for module, name in places]
    for module, name, _ in saved:
        setattr(module, name, refuse)
    return saved


def _probe_behaviour(tree, sources, probes, seconds=0.25):
    """Import every .py file of the tree and call each top-level function whose signature takes a
    probe's arguments -> {"modules", "calls", "matches": [(exercise, graded, candidate)]}.

    Only the project's own files are imported. Each call runs under a timer, in a scratch folder,
    with starting a process and removing a file refused; `main` and pytest's test functions are
    not called."""
    import shutil
    import signal
    import tempfile

    def timeout(signum, frame):
        raise TimeoutError

    by_arguments = _probes_by_arguments(probes)
    scratch = tempfile.mkdtemp()  # before the patch: a first mkdtemp removes a probe file
    saved = _refuse_processes_and_removals()
    previous = signal.signal(signal.SIGALRM, timeout)
    home = os.getcwd()
    found = {"modules": 0, "calls": 0, "matches": [], "not_imported": []}
    try:
        os.chdir(scratch)
        for rel in sorted(sources):
            # 30 s: an import, on a busy machine; a file that does not import is no candidate
            imported, module = _under_timer(30.0, _imported, tree, rel)
            if not imported:
                found["not_imported"].append(f"{rel}: {type(module).__name__}")
                continue
            found["modules"] += 1
            _call_candidates(module, rel, by_arguments, seconds, found)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        for module, name, original in saved:
            setattr(module, name, original)
        os.chdir(home)
        shutil.rmtree(scratch, ignore_errors=True)
    return found


def _probes_by_arguments(probes):
    """Graded functions that take the same arguments (grpo's and loo's scores) share one call:
    {arguments as JSON: (decoded arguments, [(exercise, graded, expected)])}, decoded once (each
    call gets a deep copy)."""
    by_arguments = {}
    for exercise, graded, args, expected in probes:
        decoded = [_decoded(a) for a in args]
        expected = _decoded(expected) if isinstance(expected, dict) else expected
        by_arguments.setdefault(json.dumps(args), (decoded, []))[1].append(
            (exercise, graded, expected)
        )
    return by_arguments


def _under_timer(seconds, fn, *args):
    """fn(*args) with SIGALRM's handler raising after `seconds` -> (True, its value), or (False,
    the exception) for any exception it raises, the timer's included. The timer is stopped inside
    the inner try, and whatever escapes that (the timer firing just before it is stopped, on a
    machine that paused this process there) is caught by the outer one: a one-shot timer fires
    once, so nothing can escape it."""
    import signal

    try:
        signal.setitimer(signal.ITIMER_REAL, seconds)
        try:
            return True, fn(*args)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    except BaseException as e:  # noqa: BLE001
        return False, e


def _call_candidates(module, rel, by_arguments, seconds, found):
    """Call each candidate of `module` once per argument set it takes, under the timer; each
    answer it matches goes to found["matches"]."""
    import copy

    def compared(fn, args, answers):
        got = fn(*copy.deepcopy(args))
        return [_same(got, expected) for _, _, expected in answers]

    for fname, fn, takes in _candidates(module):
        for args, answers in by_arguments.values():
            if not takes(len(args)):
                continue
            found["calls"] += 1
            called, same = _under_timer(seconds, compared, fn, args, answers)
            if not called:  # any failure, the timer's included, is not the answer
                same = [False] * len(answers)
            for (exercise, graded, _), hit in zip(answers, same):
                if hit:
                    found["matches"].append([exercise, graded, f"{rel}:{fname}"])


def _load_once():
    """What every job imports, loaded once for all of them; hypothesis saves no examples and does
    not shrink (a blanked function fails on every input)."""
    import matplotlib
    import numpy  # noqa: F401  imported once here, kept across runs
    import torch  # noqa: F401

    # the probes' timer can fire inside a function's lazy import (maze.conflict_figure's), and a
    # module torn there breaks every later import of it: what they import lazily is loaded here
    matplotlib.use("Agg")
    import matplotlib.figure  # noqa: F401
    import matplotlib.lines  # noqa: F401
    import matplotlib.pyplot  # noqa: F401
    import matplotlib.ticker  # noqa: F401
    from hypothesis import Phase, settings

    settings.register_profile("student-kit", database=None, phases=[Phase.explicit, Phase.generate])
    settings.load_profile("student-kit")


def _run_all(jobs_path, out_path):
    """Run each job with pytest.main in this one process, then call each probe with None arguments.

    One tree serves every job: before each, its graded files get the job's text and the tree's
    modules are dropped (the next job's grpo.py is a different text under the same module name);
    at the end the tree gets back the full student text of its graded files.
    """
    import importlib.util
    import time

    _load_once()
    before, path = set(sys.modules), list(sys.path)
    with open(jobs_path) as f:
        jobs = json.load(f)
    tree = jobs["tree"]

    def enter(files):
        loaded = {name: sys.modules[name] for name in set(sys.modules) - before}
        for name in tree_modules(tree, loaded, jobs["sources"]):
            del sys.modules[name]
        sys.path[:] = path
        for rel, text in files.items():
            with open(os.path.join(tree, rel), "w") as f:
                f.write(text)
            # a text of the same size written within the same second would pass its cached
            # bytecode's check (size and mtime): the next import compiles it again
            cached = importlib.util.cache_from_source(os.path.join(tree, rel))
            for stale in Path(cached).parent.glob(Path(rel).stem + ".*"):
                stale.unlink()

    home, out = os.getcwd(), {"runs": {}, "probes": {}}
    quiet = ["--tb=no", "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "no:benchmark"]
    quiet += ["-p", "no:unraisableexception"]  # its gc.collect() five times a run: 1.3 s with torch
    try:
        for label, job in jobs["runs"].items():
            enter(job["files"])
            os.chdir(tree)
            recorder = Recorder()
            t0 = time.time()
            args = job.get("args") or sorted(
                {test for label in job["tests_of"] for test in out["runs"][label]["selected"]}
            )
            pytest.main(["-q", *quiet, f"--rootdir={tree}", *args], plugins=[recorder])
            os.chdir(home)
            out["runs"][label] = {**vars(recorder), "seconds": round(time.time() - t0, 1)}
        enter(jobs["full"])
        sys.path.insert(0, tree)
        for probe in jobs["probes"]:
            out["probes"][f"{probe['module']}.{probe['target']}"] = _call_with_nones(
                probe["module"], probe["target"]
            )
        out["behaviour"] = _probe_behaviour(tree, jobs["sources"], jobs["behaviour"])
    finally:
        os.chdir(home)
        enter(jobs["full"])
    with open(out_path, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    _run_all(*sys.argv[1:3])
