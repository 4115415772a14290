"""Tests for lang.py: exact semantics, every rejection path, and fuzzing.

The fuzz tests call parse/evaluate directly and require that nothing but
ProgramError ever escapes, so a bug cannot hide behind run()'s last-line
catch-all; that catch-all warns, and the warning is an error here.
"""

import itertools
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lang
from lang import (
    MAX_ABS,
    MAX_CHARS,
    MAX_DEPTH,
    MAX_NODES,
    MAX_STEPS,
    ProgramError,
    canonical,
    evaluate,
    parse,
    run,
    to_text,
)

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")

BINARY_OPS = sorted(lang.BINARY)
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def ev(text, x=0):
    return evaluate(parse(text), x)


def nested(depth, leaf="1"):
    """(+ 1 (+ 1 ... leaf)) with `depth` nested parentheses."""
    return "(+ 1 " * depth + leaf + ")" * depth


def balanced(op, n_leaves, leaf="9"):
    """A balanced tree of a binary op: 2*n_leaves - 1 nodes, depth ~log2."""
    if n_leaves == 1:
        return leaf
    half = n_leaves // 2
    return f"({op} {balanced(op, half, leaf)} {balanced(op, n_leaves - half, leaf)})"


def strict_run(text, inputs):
    """run() without the catch-all: only ProgramError may be swallowed."""
    try:
        node = parse(text)
    except ProgramError:
        return [None] * len(inputs)
    out = []
    for x in inputs:
        try:
            out.append(evaluate(node, x))
        except ProgramError:
            out.append(None)
    return out


def check_run_result(result, inputs):
    assert isinstance(result, list) and len(result) == len(inputs)
    for r in result:
        assert r is None or (type(r) is int and abs(r) <= MAX_ABS)


# ---------------------------------------------------------------- exact cases


@pytest.mark.parametrize(
    "text, x, want",
    [
        ("7", 0, 7),
        ("x", -5, -5),
        ("(+ x 3)", 4, 7),
        ("(- 0 3)", 0, -3),
        ("(* x x)", -6, 36),
        ("(min x 2)", 5, 2),
        ("(max x 2)", 5, 5),
        ("(^ 2 10)", 0, 1024),
        ("(^ x 0)", 0, 1),  # 0**0 == 1, as in Python
        ("(^ (- 0 2) 3)", 0, -8),
        ("(^ 1 1000000000)", 0, 1),  # trivial bases never overflow
        ("(^ (- 0 1) 999999999)", 0, -1),
        ("(^ 10 9)", 0, 10**9),
        ("(+ 1 (* 2 (- x 3)))", 10, 15),
        ("(- 1000000000 x)", 1000000000, 0),
    ],
)
def test_arithmetic(text, x, want):
    assert ev(text, x) == want


@pytest.mark.parametrize(
    "a, b",
    [(7, 2), (-7, 2), (7, -2), (-7, -2), (0, 3), (6, 3), (-6, 3), (1, MAX_ABS)],
)
def test_floor_division_and_modulo_match_python(a, b):
    # literals are non-negative, so feed signs in through x and (- 0 n)
    neg = lambda n: f"(- 0 {-n})" if n < 0 else str(n)  # noqa: E731
    assert ev(f"(/ x {neg(b)})", a) == a // b
    assert ev(f"(% x {neg(b)})", a) == a % b
    assert ev("(/ (- 0 7) 2)") == -4
    assert ev("(% (- 0 7) 2)") == 1


@pytest.mark.parametrize(
    "text, want",
    [
        ("(< 1 2)", 1),
        ("(< 2 2)", 0),
        ("(= 2 2)", 1),
        ("(= 2 3)", 0),
        ("(> 3 2)", 1),
        ("(> 2 3)", 0),
        ("(< (- 0 5) 0)", 1),
    ],
)
def test_comparisons(text, want):
    assert ev(text) == want


def test_if_picks_branch_and_skips_the_other():
    assert run("(if (< x 4) (+ x 3) 3)", [0, 3, 4, 100]) == [3, 6, 3, 3]
    assert ev("(if (- 0 2) 5 6)") == 5  # any non-zero is true
    assert ev("(if 1 5 (/ 1 0))") == 5
    assert ev("(if 0 (/ 1 0) 6)") == 6
    assert ev("(if 0 (^ 9 (^ 9 9)) 6)") == 6
    with pytest.raises(ProgramError):
        ev("(if 0 5 (/ 1 0))")


def test_canonical_spacing_and_leading_zeros():
    want = "(if (< x 4) (+ x 3) 3)"
    assert canonical(want) == want
    assert canonical("  (  if(< x 4)(+ x 3)   3 )  ") == want
    assert canonical("(if\n\t(<\tx\r\n4)\n  (+ x 3)\n  3)\n") == want
    assert canonical("(if (< x 004) (+ x 03) 3)") == want  # leading zeros dropped
    assert canonical("000") == "0"
    assert canonical("(+ x") is None
    assert canonical(None) is None
    assert to_text(parse(want)) == want
    assert parse(" x ") == "x" and parse("(+ 1 x)") == ("+", 1, "x")


def test_whitespace_tolerance():
    assert run("\n\t (+\n\tx\n\t1\n)\n", [1, 2]) == [2, 3]
    assert run("(+ x 1)", (1, 2)) == [2, 3]


def test_run_shapes():
    assert run("x", []) == []
    assert run("(/ 10 x)", [2, 0, -3]) == [5, None, -4]
    assert run("(+ x", [1, 2, 3]) == [None, None, None]
    assert run("x", [MAX_ABS, MAX_ABS + 1, 1.5, "3"]) == [MAX_ABS, None, None, None]
    assert run("(* x 2)", [True]) == [2]  # bool is an int, as in Python


def test_evaluate_accepts_integer_likes():
    np = pytest.importorskip("numpy")
    assert evaluate(parse("(+ x 1)"), np.int64(4)) == 5
    with pytest.raises(ProgramError):
        evaluate(parse("x"), np.float64(4.0))


# ---------------------------------------------------------------- rejections


@pytest.mark.parametrize(
    "text",
    ["(/ 1 0)", "(% 1 0)", "(/ x (- x x))", "(^ 2 (- 0 1))", "(^ 0 (- 0 1))"],
)
def test_runtime_faults(text):
    with pytest.raises(ProgramError):
        ev(text, 3)
    assert run(text, [3]) == [None]


@pytest.mark.parametrize(
    "text",
    [
        "(* 100000 100000)",
        "(+ 1000000000 1)",
        "(- 0 (+ 1000000000 1))",
        "(^ 10 10)",
        "(^ 2 30)",
        "(^ 2 1000000000)",
        "(^ 9 (^ 9 (^ 9 9)))",
        "(^ (^ (^ (^ 9 9) 9) 9) 9)",
        "(^ x (^ x (^ x (^ x x))))",
    ],
)
def test_magnitude_overflow_computed(text):
    assert run(text, [9]) == [None]
    with pytest.raises(ProgramError, match="magnitude|power"):
        ev(text, 9)


def test_magnitude_limit_literal():
    assert ev(str(MAX_ABS)) == MAX_ABS
    assert ev("(- 0 1000000000)") == -MAX_ABS
    for text in [str(MAX_ABS + 1), "(+ x 99999999999999999999)", "9" * 200]:
        with pytest.raises(ProgramError, match="magnitude"):
            parse(text)
        assert run(text, [0]) == [None]


def test_depth_limit():
    assert ev(nested(MAX_DEPTH)) == MAX_DEPTH + 1
    with pytest.raises(ProgramError, match="deeper"):
        parse(nested(MAX_DEPTH + 1))
    with pytest.raises(ProgramError):  # far too deep: rejected on length first
        parse("(" * 5000 + ")" * 5000)
    assert run("(" * 5000, [1]) == [None]
    assert run(nested(100), [1]) == [None]


def test_recursion_is_bounded_by_depth_not_by_text():
    """parse/evaluate of a max-depth program fits in a few dozen Python frames."""
    frames, f = 0, sys._getframe()
    while f is not None:
        frames, f = frames + 1, f.f_back
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(frames + MAX_DEPTH + 25)
    try:
        node = parse(nested(MAX_DEPTH))
        assert evaluate(node, 0) == MAX_DEPTH + 1
        with pytest.raises(ProgramError):
            parse(nested(MAX_DEPTH + 1))
    finally:
        sys.setrecursionlimit(old)


def test_node_limit():
    assert len(parse(balanced("+", 32, "1"))) == 3  # 63 nodes: fine
    exactly = "(if " + balanced("+", 32, "1")[3:-1] + " 1)"  # 64 nodes
    assert ev(exactly) == 16
    too_many = balanced("+", 33, "1")  # 65 nodes, yet short and shallow
    assert len(too_many) <= MAX_CHARS
    with pytest.raises(ProgramError, match="nodes"):
        parse(too_many)


def test_length_limit():
    padded = "x" + " " * (MAX_CHARS - 1)
    assert ev(padded, 4) == 4
    with pytest.raises(ProgramError, match="longer"):
        parse(padded + " ")
    assert run("x" * 10**6, [1]) == [None]


def test_step_limit_guards_hand_built_trees():
    # Parsed programs cannot reach MAX_STEPS (no loops); a shared-subtree DAG can.
    node = "x"
    for _ in range(10):
        node = ("+", node, node)  # 2**11 - 1 evaluations, depth 10
    assert MAX_STEPS < 2**11 - 1
    with pytest.raises(ProgramError, match="steps"):
        evaluate(node, 1)


def test_malformed_hand_built_nodes():
    for node in [("+", 1), ("?", 1, 2), ("if", 1, 2), [1], 1.5, True, None, "y"]:
        with pytest.raises(ProgramError):
            evaluate(node, 0)
    deep = 1
    for _ in range(MAX_DEPTH + 1):
        deep = ("+", 0, deep)
    with pytest.raises(ProgramError, match="deeper"):
        evaluate(deep, 0)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "\n\t",
        "()",
        "(x)",
        "(1)",
        "(+)",
        "(+ 1)",
        "(+ 1 2 3)",
        "(if 1 2)",
        "(if 1 2 3 4)",
        "(min 1)",
        "(- 3)",
        "(foo 1 2)",
        "(** 2 3)",
        "(// 7 2)",
        "(!= 1 2)",
        "(IF 1 2 3)",
        "(+ X 1)",
        "y",
        "-3",
        "(+ -3 1)",
        "+3",
        "1.5",
        "1e3",
        "0x10",
        "(+ 1_000 1)",
        "(+x 1)",
        "(+ 12x 1)",
        "(min1 2)",
        "(+ 1 2",
        "+ 1 2)",
        "(+ 1 2))",
        ")",
        "(+ (1 2) 3)",
        "((+ 1 2))",
        "(+ 1 2) 3",
        "x x",
        "(+ 1 2)(+ 1 2)",
        "1 2",
        "(+ 1 2);",
        "(+ 1 2) # comment",
        "[+ 1 2]",
        "(+ 1, 2)",
        "(+ '1' 2)",
        "(+ x \u0661)",
        "(+ x \uff11)",
        "(\uff0b 1 2)",
        "(+ x\u00a01)",
        "(+ x 1)\u200b",
        "\x00",
        "(+ x\x0b1)",
        "(+ x\x0c1)",
        "x\U0001f600",
        "__import__('os')",
        "if",
        "+",
        "min",
        "(x 1 2)",
        "(1 + 2)",
        "(+ 1 if)",
        "(if if 1 2)",
    ],
)
def test_parse_errors(text):
    with pytest.raises(ProgramError):
        parse(text)
    assert run(text, [0, 1]) == [None, None]
    assert canonical(text) is None


@pytest.mark.parametrize(
    "obj", [None, b"(+ 1 2)", bytearray(b"x"), 5, 1.5, True, ["x"], ("x",), {"x": 1}, object()]
)
def test_non_str_text(obj):
    with pytest.raises(ProgramError):
        parse(obj)
    assert run(obj, [1, 2]) == [None, None]
    assert canonical(obj) is None


def test_worst_case_programs_stay_bounded():
    """Max-node ^ and * trees only ever yield an int within MAX_ABS or None."""
    progs = [
        balanced("^", 32),
        balanced("*", 32),
        balanced("^", 32, "x"),
        balanced("*", 32, "x"),
        "(^ " * 12 + "9" + " 9)" * 12,
        "(^ 9 " * 12 + "9" + ")" * 12,
        "(* " * 12 + "x" + " x)" * 12,
    ]
    inputs = [-MAX_ABS, -2, -1, 0, 1, 2, 3, MAX_ABS]
    for p in progs:
        parse(p)  # all within the limits, so they must parse
        result = run(p, inputs)
        check_run_result(result, inputs)
        assert result == strict_run(p, inputs)
    assert run(balanced("^", 32), [0]) == [None]
    assert run(balanced("^", 32, "x"), [1]) == [1]


# ---------------------------------------------------------------- fuzzing

ALPHABET = "()+-*/%^<=>minaxif0123456789 \t\n"


@FUZZ
@given(st.text(max_size=300), st.lists(st.integers(-2 * MAX_ABS, 2 * MAX_ABS), max_size=4))
def test_fuzz_arbitrary_text(text, inputs):
    result = run(text, inputs)
    check_run_result(result, inputs)
    assert result == strict_run(text, inputs)


@FUZZ
@given(st.binary(max_size=300))
def test_fuzz_arbitrary_bytes(data):
    text = data.decode("utf-8", errors="replace")
    check_run_result(run(text, [0, 7]), [0, 7])
    assert run(data, [0]) == [None]  # raw bytes are never a program
    strict_run(text, [0, 7])


@FUZZ
@given(st.text(alphabet=ALPHABET, max_size=120), st.integers(-50, 50))
def test_fuzz_grammar_alphabet(text, x):
    """Text made of grammar characters reaches deep into the parser."""
    result = run(text, [x])
    check_run_result(result, [x])
    assert result == strict_run(text, [x])
    c = canonical(text)
    if c is not None:
        assert canonical(c) == c


# Valid programs: trees built as nodes, then printed with random spacing.
literals = st.one_of(st.integers(0, 10), st.integers(0, MAX_ABS))
trees = st.recursive(
    st.one_of(literals, st.just("x")),
    lambda kids: st.one_of(
        st.tuples(st.sampled_from(BINARY_OPS), kids, kids),
        st.tuples(st.just("if"), kids, kids, kids),
    ),
    max_leaves=12,
)
SEPS = st.sampled_from(["", " ", "  ", "\n", "\t", " \n "])


def render(node, seps):
    """Print a tree with separators drawn from an iterator ('' only next to a paren)."""
    if isinstance(node, tuple):
        parts = [node[0]] + [render(c, seps) for c in node[1:]]
        inner = "".join(p + (next(seps) or " ") for p in parts[:-1]) + parts[-1]
        return "(" + next(seps) + inner + next(seps) + ")"
    return str(node)


def count(node):
    return 1 + sum(count(c) for c in node[1:]) if isinstance(node, tuple) else 1


def depth(node):
    return 1 + max(depth(c) for c in node[1:]) if isinstance(node, tuple) else 0


def reference(node, x):
    """Independent oracle on unbounded ints; None for any fault."""
    if isinstance(node, int):
        return node
    if node == "x":
        return x
    op, *kids = node
    if op == "if":
        c = reference(kids[0], x)
        return None if c is None else reference(kids[1] if c else kids[2], x)
    a, b = (reference(k, x) for k in kids)
    if a is None or b is None:
        return None
    if op in ("/", "%") and b == 0 or op == "^" and b < 0:
        return None
    if op == "^" and abs(a) > 1 and b > 64:
        return None  # certainly above MAX_ABS; don't build it
    v = {
        "+": lambda: a + b,
        "-": lambda: a - b,
        "*": lambda: a * b,
        "/": lambda: a // b,
        "%": lambda: a % b,
        "^": lambda: a**b,
        "min": lambda: min(a, b),
        "max": lambda: max(a, b),
        "<": lambda: int(a < b),
        "=": lambda: int(a == b),
        ">": lambda: int(a > b),
    }[op]()
    return v if abs(v) <= MAX_ABS else None


valid_inputs = st.lists(st.one_of(st.integers(-12, 12), st.integers(-MAX_ABS, MAX_ABS)), max_size=5)


@FUZZ
@given(trees, st.data(), valid_inputs)
def test_valid_programs_roundtrip_and_agree(tree, data, inputs):
    if count(tree) > MAX_NODES or depth(tree) > MAX_DEPTH:
        return
    seps = itertools.cycle(data.draw(st.lists(SEPS, min_size=1, max_size=7)))
    text = render(tree, seps)
    if len(text) > MAX_CHARS:
        return
    node = parse(text)
    assert node == tree
    printed = to_text(node)
    assert canonical(text) == printed
    assert canonical(printed) == printed  # fixed point
    assert parse(printed) == node
    result = run(text, inputs)
    check_run_result(result, inputs)
    assert result == strict_run(text, inputs)
    assert result == [reference(tree, x) for x in inputs]


def tokens_of(text):
    return text.replace("(", " ( ").replace(")", " ) ").split()


@FUZZ
@given(trees, st.data())
def test_mutated_programs_never_crash(tree, data):
    text = to_text(tree)
    kind = data.draw(st.sampled_from(["del", "ins", "dup", "del_tok", "dup_tok", "swap_tok"]))
    if kind in ("del", "ins", "dup"):
        i = data.draw(st.integers(0, len(text)))
        if kind == "ins":
            ch = data.draw(st.one_of(st.sampled_from(ALPHABET), st.characters()))
            text = text[:i] + ch + text[i:]
        elif i < len(text):
            text = text[:i] + (text[i] * 2 if kind == "dup" else "") + text[i + 1 :]
    else:
        toks = tokens_of(text)
        i = data.draw(st.integers(0, len(toks) - 1))
        j = data.draw(st.integers(0, len(toks) - 1))
        if kind == "del_tok":
            del toks[i]
        elif kind == "dup_tok":
            toks.insert(i, toks[i])
        else:
            toks[i], toks[j] = toks[j], toks[i]
        text = " ".join(toks)
    inputs = [-3, 0, 5]
    result = run(text, inputs)
    check_run_result(result, inputs)
    assert result == strict_run(text, inputs)
    c = canonical(text)
    assert c is None or canonical(c) == c


def test_limits_are_the_documented_values():
    assert (MAX_CHARS, MAX_DEPTH, MAX_NODES, MAX_ABS, MAX_STEPS) == (256, 12, 64, 10**9, 1000)
