"""
Build the student version of this repository: every tracked file copied unchanged, except that
the BODY of each graded function becomes `raise NotImplementedError("exercise NAME: ...")`.
Signatures and docstrings stay, so the student knows what to write; the tests stay, so they grade.

    python tools/make_student.py OUT_DIR                          # every exercise
    python tools/make_student.py OUT_DIR --exercise grpo vpo      # only these
    python tools/make_student.py --list                           # names and grading commands

The exercises are described in docs/EXERCISES.md. EXERCISES below is the one place that says
which functions each exercise blanks and which tests grade it; tests/test_tools_make_student.py
imports it and checks, in the tree with every exercise blanked, that each grading command fails
there and passes once only its exercise's answer is back, that no answer is left elsewhere in the
tree, and that nothing else in the tree changes.

An answer written out in a text file (the README's three lines of VPO) sits after a line
`<!-- answer: NAME -->`: when exercise NAME is blanked, the fenced code block after that line keeps
its fences and holds only a comment naming the exercise.

How: Python's `ast` module parses OUR source files (never model output) only to find line numbers;
the lines of a body are then replaced as text, so every other byte of the file stays identical.
A target is "file.py:function", "file.py:Class.method", or "file.py:function[if CONDITION]" for
one branch of a function (CONDITION written as ast.unparse prints it). A target inside a body that
is already blanked is skipped. The instructor files (this script, tests/test_tools_make_student.py)
are not copied: the student tree is not a git checkout and would not need them.
"""

import argparse
import ast
import io
import os
import re
import shutil
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# name -> blank: the targets to blank; tests + k: the grading command
#   pytest <tests> -k "<k>"
# which selects tests that need this exercise's functions and no other exercise's: in the tree with
# every exercise blanked, each selected test fails with this exercise's NotImplementedError, and
# the command passes once this exercise's answer is back (tests/test_tools_make_student.py).
EXERCISES = {
    "one_file": dict(
        blank=["grpo_vs_vpo.py:advantages", "grpo_vs_vpo.py:best_at_k"],
        tests=["tests/test_grpo_vs_vpo.py"],
        k="advantages_by_hand or advantages_of_one_answer or best_at_k_by_hand or tiny_run",
    ),
    "grpo": dict(blank=["grpo.py:grpo_advantages"], tests=["tests/test_grpo.py"], k="test_grpo_"),
    "vpo": dict(
        blank=["vpo.py:set_scores", "vpo.py:vpo_advantages"],
        tests=["tests/test_vpo.py"],
        k="set_score or vpo_advantages_are",
    ),
    "weights": dict(
        blank=["vpo.py:sample_weights"],
        tests=["tests/test_vpo.py"],
        k="sample_weights or sobol or dirichlet_alpha",
    ),
    "sobol": dict(
        blank=["vpo.py:sample_weights[if sampler == 'sobol']"],
        tests=["tests/test_vpo.py"],
        k="sobol or sample_weights_rejects",
    ),
    "at_k": dict(
        # best_rank_chances: baselines' Max@K weighs ranks with the same chances as max_at_k
        blank=["metrics.py:pass_at_k", "metrics.py:max_at_k", "baselines.py:best_rank_chances"],
        tests=["tests/test_metrics.py"],
        k="(pass_at_k or max_at_k or best_at_k) and not mismatched_weights",
    ),
    "pool": dict(
        blank=["metrics.py:reward_space_diversity", "metrics.py:pareto_fraction"],
        tests=["tests/test_metrics.py"],
        k="reward_space_diversity or pareto_fraction",
    ),
    "loo": dict(
        blank=["vpo.py:leave_one_out_advantages"], tests=["tests/test_vpo.py"], k="leave_one_out"
    ),
}
INSTRUCTOR_ONLY = ("tools/make_student.py", "tests/test_tools_make_student.py")


def grading_command(name):
    ex = EXERCISES[name]
    return f'pytest {" ".join(ex["tests"])} -k "{ex["k"]}"'


def stub_line(name):
    return f'raise NotImplementedError("exercise {name}: see docs/EXERCISES.md")'


# ----------------------------------------------------------------------------------------------
# Finding a body and replacing its lines


def _lookup(tree, qualname, where):
    """'Class.method' -> the FunctionDef, searching each level's direct children only."""
    node = tree
    for part in qualname.split("."):
        found = [
            n
            for n in node.body
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            and n.name == part
        ]
        if not found:
            raise LookupError(f"{where}: no function or class '{part}' (looking for {qualname})")
        node = found[-1]  # the last definition wins, as at runtime
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        raise LookupError(f"{where}: {qualname} is not a function")
    return node


def body_span(tree, lines, target):
    """target 'fn', 'Class.fn' or 'fn[if COND]' -> (first, last, indent): the 1-based lines of the
    body to replace and the indentation of its first statement.

    A function keeps its docstring; comment and blank lines just above the first replaced
    statement go with the body (they may hold the answer).
    """
    qualname, _, branch = target.partition("[")
    node = _lookup(tree, qualname, target)
    if branch:
        cond = branch.removesuffix("]").removeprefix("if ").strip()
        ifs = [n for n in ast.walk(node) if isinstance(n, ast.If) and ast.unparse(n.test) == cond]
        if len(ifs) != 1:
            raise LookupError(
                f"{target}: expected one `if {cond}:` in {qualname}, found {len(ifs)}"
            )
        header, stmts = ifs[0].test.end_lineno, ifs[0].body
    else:
        header, stmts = node.lineno, node.body
        first = stmts[0]
        if (
            isinstance(first, ast.Expr)
            and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str)
        ):
            header, stmts = first.end_lineno, stmts[1:]  # keep the docstring
        if not stmts:
            raise LookupError(f"{target}: the function has nothing but a docstring to blank")
    first, last = stmts[0].lineno, stmts[-1].end_lineno
    if first <= header:
        raise LookupError(
            f"{target}: the body starts on the line of its header; put it on its own line"
        )
    while first - 1 > header and (
        lines[first - 2].strip() == "" or lines[first - 2].lstrip().startswith("#")
    ):
        first -= 1
    while lines[first - 1].strip() == "":  # blank lines after the header or docstring stay
        first += 1
    statement = lines[stmts[0].lineno - 1]
    return first, last, statement[: len(statement) - len(statement.lstrip())]


def blank_source(text, blanks):
    """Source text, [(target, exercise name)] -> the text with those bodies replaced by the stub.

    Returns (new_text, spans) where spans lists (first, last, line) per replaced body: 1-based lines
    of the original, and the one line that replaced them. Everything outside the spans is unchanged.
    """
    # splits exactly where Python's tokenizer does
    lines = io.StringIO(text, newline="").readlines()
    tree = ast.parse(text)
    spans = sorted((*body_span(tree, lines, target), name) for target, name in blanks)
    kept = []
    for span in spans:  # a span inside a kept span is already gone
        if kept and span[0] <= kept[-1][1]:
            if span[1] > kept[-1][1]:
                raise LookupError(f"bodies overlap at lines {span[0]}-{span[1]}")
            continue
        kept.append(span)
    out, spans_out, pos = [], [], 1
    for first, last, indent, name in kept:
        out += lines[pos - 1 : first - 1]
        # "" at the end of a file without one
        newline = lines[last - 1][len(lines[last - 1].rstrip("\r\n")) :]
        stub = indent + stub_line(name) + newline
        out.append(stub)
        spans_out.append((first, last, stub))
        pos = last + 1
    out += lines[pos - 1 :]
    return "".join(out), spans_out


# ----------------------------------------------------------------------------------------------
# Answers written out in text files

ANSWER_MARKER = re.compile(r"^\s*<!-- answer: (\w+)\b.*-->\s*$")


def strip_answers(text, names):
    """A text file's text -> (the text with the code block after each `<!-- answer: NAME -->` of an
    exercise in `names` replaced by one comment line, the names stripped)."""
    lines = io.StringIO(text, newline="").readlines()
    out, stripped, i = [], [], 0
    while i < len(lines):
        out.append(lines[i])
        marker = ANSWER_MARKER.match(lines[i])
        i += 1
        if not marker or marker.group(1) not in names:
            continue
        # the block opens on the next line that is not blank: a marker never reaches further
        opening = next((j for j in range(i, len(lines)) if lines[j].strip()), len(lines))
        closing = next(
            (j for j in range(opening + 1, len(lines)) if lines[j].strip() == "```"), None
        )
        if not lines[opening:] or not lines[opening].startswith("```") or closing is None:
            raise LookupError(f"no fenced code block right after '{lines[i - 1].strip()}'")
        newline = lines[opening][len(lines[opening].rstrip("\r\n")) :]
        out += lines[i : opening + 1]
        out.append(f"# exercise {marker.group(1)}: see docs/EXERCISES.md{newline}")
        out.append(lines[closing])
        stripped.append(marker.group(1))
        i = closing + 1
    return "".join(out), stripped


# ----------------------------------------------------------------------------------------------
# The whole tree


def tracked_files(root=ROOT):
    try:
        out = subprocess.run(
            ["git", "-C", root, "ls-files", "-z"], capture_output=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        raise SystemExit(f"error: {root} must be a git checkout with git installed ({e})") from None
    return [
        p
        for p in out.decode().split("\0")
        if p
        and p not in INSTRUCTOR_ONLY
        # a tracked file deleted in the work tree is skipped
        and os.path.isfile(os.path.join(root, p))
    ]


def blanks_by_file(names):
    """Exercise names -> {file: [(target, exercise name), ...]}."""
    out = {}
    for name in names:
        for spec in EXERCISES[name]["blank"]:
            path, _, target = spec.partition(":")
            out.setdefault(path, []).append((target, name))
    return out


def build(out_dir, names=None, root=ROOT):
    """Write the student tree for the given exercises (default all) into out_dir; return {file:
    spans}, a span ("answer", name) for a text file's stripped block."""
    names = names or list(EXERCISES)
    unknown = [n for n in names if n not in EXERCISES]
    if unknown:
        raise SystemExit(f"error: unknown exercise(s) {unknown}; choose from {list(EXERCISES)}")
    if os.path.exists(out_dir) and os.listdir(out_dir):
        raise SystemExit(f"error: {out_dir} exists and is not empty")
    files = tracked_files(root)
    todo = blanks_by_file(names)
    missing = sorted(set(todo) - set(files))
    if missing:
        raise SystemExit(f"error: graded file(s) {missing} are not tracked in {root}")
    changed = {}
    for rel in files:
        try:
            copy_file(root, out_dir, rel, names, todo, changed)
        except OSError as e:  # a full disk: one line, as for any other error here
            words = os.strerror(e.errno) if e.errno else str(e)
            raise SystemExit(
                f"error: {words[0].lower()}{words[1:]}: {os.path.join(out_dir, rel)} (the student "
                f"tree is incomplete: remove {out_dir}, make room and run again)"
            ) from None
    return changed


def copy_file(root, out_dir, rel, names, todo, changed):
    """One tracked file into the student tree: copied, or with its answers blanked (`changed`)."""
    src, dst = os.path.join(root, rel), os.path.join(out_dir, rel)
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    if rel.endswith(".md"):
        with open(src, "rb") as f:
            text = f.read().decode("utf-8")
        try:
            new, stripped = strip_answers(text, names)
        except LookupError as e:
            raise SystemExit(f"error: {rel}: {e}") from None
        if stripped:
            with open(dst, "wb") as f:
                f.write(new.encode("utf-8"))
            changed[rel] = [("answer", name) for name in stripped]
            return
    if rel not in todo:
        shutil.copy2(src, dst)
        return
    with open(src, "rb") as f:
        text = f.read().decode("utf-8")
    try:
        new, spans = blank_source(text, todo[rel])
    except LookupError as e:
        raise SystemExit(f"error: {rel}: {e}") from None
    with open(dst, "wb") as f:
        f.write(new.encode("utf-8"))
    shutil.copymode(src, dst)
    changed[rel] = spans


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.strip().split("\n\n")[0])
    parser.add_argument(
        "out_dir", nargs="?", help="where to write the student tree (must be empty or new)"
    )
    parser.add_argument(
        "--exercise",
        nargs="+",
        choices=list(EXERCISES),
        metavar="NAME",
        help=f"exercises to blank (default: all of {', '.join(EXERCISES)})",
    )
    parser.add_argument(
        "--list", action="store_true", help="print each exercise's targets and grading command"
    )
    args = parser.parse_args(argv)
    if args.list:
        for name, ex in EXERCISES.items():
            print(f"{name:8s} {', '.join(ex['blank'])}\n         {grading_command(name)}")
        return
    if not args.out_dir:
        parser.error("OUT_DIR is required")
    changed = build(args.out_dir, args.exercise)
    for rel, spans in changed.items():
        for span in spans:
            if span[0] == "answer":
                print(f"{rel}: the code block after '<!-- answer: {span[1]} -->' -> a comment")
            else:
                print(f"{rel}:{span[0]}-{span[1]} -> {span[2].strip()}")
    print(f"student tree written to {args.out_dir}; exercises: docs/EXERCISES.md")


if __name__ == "__main__":
    main()
