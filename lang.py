"""A tiny integer language that the policy writes programs in, for the code task.

Model output is hostile (RL will exploit any crash or hang), so it is parsed and interpreted by hand
under hard limits; eval/exec/compile/ast are never used. Grammar (s-expressions, fixed arity):

    expr := INT | 'x' | '(' OP expr expr ')' | '(' 'if' expr expr expr ')'
    OP   := + - * / % min max ^ < = >

INT: non-negative decimal ("007" is 7); / and % as Python's // and % (a zero divisor is an error);
^ power (no negative exponent); < = > give 1 or 0; `if` evaluates only the branch taken. "(+x 1)"
and "12x" are errors, not guesses. A node is an int, 'x', or a tuple (op, child, ...).
Deliberately left out: loops, recursion, variables other than x, negative literals, strings, floats.
"""

import operator
import re
import warnings

MAX_CHARS = 256  # program text length; checked before tokenizing, so parsing is linear in it
MAX_DEPTH = 12  # nested parentheses; also bounds Python recursion in parse and evaluate
MAX_NODES = 64  # literals, x and applications together; keeps answers short and runs cheap
MAX_ABS = 10**9  # largest |value| of any literal, input or intermediate; keeps ints machine-sized
# node evaluations per input; unreachable today (no loops), a guard if the language grows
MAX_STEPS = 1000


class ProgramError(ValueError):
    """The program text is invalid, or it faulted while running."""


def _floordiv(a, b):
    if b == 0:
        raise ProgramError("division by zero")
    return a // b


def _mod(a, b):
    if b == 0:
        raise ProgramError("modulo by zero")
    return a % b


def _pow(a, b):
    if b < 0:
        raise ProgramError("negative exponent")
    # decided before computing: |a| >= 2 and b >= MAX_ABS.bit_length() must overflow
    if abs(a) >= 2 and b >= MAX_ABS.bit_length():
        raise ProgramError("power too large")
    return a**b


BINARY = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": _floordiv,
    "%": _mod,
    "min": min,
    "max": max,
    "^": _pow,
    "<": lambda a, b: int(a < b),
    "=": lambda a, b: int(a == b),
    ">": lambda a, b: int(a > b),
}
ARITY = {**{op: 2 for op in BINARY}, "if": 3}


def _check(value):
    if abs(value) > MAX_ABS:
        raise ProgramError(f"magnitude above {MAX_ABS}")
    return value


def _tokenize(text):
    """Split into '(', ')', words and ints: a word ends at whitespace or a parenthesis. Linear in
    the text."""
    tokens = []
    for w in re.findall(r"[()]|[^ \t\n\r()]+", text):
        if w.isascii() and w.isdigit():  # isdigit alone accepts e.g. fullwidth digits
            tokens.append(_check(int(w)))
        elif w in ARITY or w in ("x", "(", ")"):
            tokens.append(w)
        else:
            raise ProgramError(f"unknown token {w[:20]!r}")
    return tokens


def parse(text):
    """Parse program text into a node tree; ProgramError if anything is wrong."""
    if not isinstance(text, str):
        raise ProgramError(f"program must be str, not {type(text).__name__}")
    if len(text) > MAX_CHARS:
        raise ProgramError(f"program longer than {MAX_CHARS} characters")
    tokens = _tokenize(text)
    if not tokens:
        raise ProgramError("empty program")
    pos = nodes = 0

    def expr(depth):
        nonlocal pos, nodes
        if pos >= len(tokens):
            raise ProgramError("unexpected end of program")
        tok = tokens[pos]
        pos += 1
        nodes += 1
        if nodes > MAX_NODES:
            raise ProgramError(f"more than {MAX_NODES} nodes")
        if type(tok) is int or tok == "x":
            return tok
        if tok != "(":
            raise ProgramError(f"unexpected {tok!r}")
        # Checked before descending, so recursion never exceeds MAX_DEPTH + 1.
        if depth >= MAX_DEPTH:
            raise ProgramError(f"nested deeper than {MAX_DEPTH}")
        head = tokens[pos] if pos < len(tokens) else None
        if not isinstance(head, str) or head not in ARITY:
            raise ProgramError(f"expected an operator, got {head!r}")
        pos += 1
        children = []  # a plain loop, not a generator: one Python frame per level
        for _ in range(ARITY[head]):
            children.append(expr(depth + 1))
        if pos >= len(tokens) or tokens[pos] != ")":
            raise ProgramError(f"{head!r} takes exactly {ARITY[head]} arguments")
        pos += 1
        return (head, *children)

    node = expr(0)
    if pos != len(tokens):
        raise ProgramError("trailing text after the program")
    return node


def _input(x):
    try:
        x = operator.index(x)  # accepts numpy/torch integers, rejects floats
    except TypeError:
        raise ProgramError(f"input must be an integer, not {type(x).__name__}") from None
    return _check(x)


def evaluate(node, x):
    """Value of a parsed program at x; ProgramError on any runtime fault."""
    x = _input(x)
    steps = 0

    # Depth is re-checked because evaluate may be handed a tree parse did not build.
    def ev(n, depth):
        nonlocal steps
        steps += 1
        if steps > MAX_STEPS:
            raise ProgramError(f"more than {MAX_STEPS} steps")
        if depth > MAX_DEPTH:
            raise ProgramError(f"nested deeper than {MAX_DEPTH}")
        if type(n) is int:
            return _check(n)
        if n == "x":
            return x
        if type(n) is tuple and len(n) == 4 and n[0] == "if":
            return ev(n[2], depth + 1) if ev(n[1], depth + 1) != 0 else ev(n[3], depth + 1)
        if type(n) is tuple and len(n) == 3 and n[0] in BINARY:
            return _check(BINARY[n[0]](ev(n[1], depth + 1), ev(n[2], depth + 1)))
        raise ProgramError(f"malformed node {str(n)[:40]!r}")

    return ev(node, 0)


def _attempt(fn, *args):
    """fn(*args), or None when the program is at fault."""
    try:
        return fn(*args)
    except ProgramError:
        return None
    # an interpreter bug costs one reward, not a run; tests turn the warning into an error
    except Exception as exc:
        warnings.warn(f"lang internal error: {exc!r}", RuntimeWarning, stacklevel=2)
        return None


def compiled(node):
    """A parsed tree -> a function of x with evaluate's results, without the guards (most of run()'s
    time) it cannot trip."""
    if type(node) is int:
        return lambda x: node
    if node == "x":
        return lambda x: x
    if node[0] == "if":  # only the branch taken runs, as in evaluate
        cond, then, other = (compiled(n) for n in node[1:])
        return lambda x: then(x) if cond(x) != 0 else other(x)
    op, left, right = BINARY[node[0]], compiled(node[1]), compiled(node[2])
    return lambda x: _check(op(left(x), right(x)))


def run(text, inputs):
    """Parse once, evaluate on each input; None per failed input. Never raises on text."""
    inputs = list(inputs)
    node = _attempt(parse, text)
    if node is None:
        return [None] * len(inputs)
    program = compiled(node)

    def checked(x):
        return program(_input(x))

    return [_attempt(checked, x) for x in inputs]


def to_text(node):
    """Print a node tree with single spaces and no padding inside parentheses."""
    if isinstance(node, tuple):
        return "(" + " ".join([node[0]] + [to_text(c) for c in node[1:]]) + ")"
    return str(node)


def canonical(text):
    """One spelling per program (spacing and leading zeros normalized), or None."""
    node = _attempt(parse, text)
    return None if node is None else to_text(node)
