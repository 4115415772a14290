"""
The project's words held to its result files: every interval README, docs/ and the notebook state,
and the verdict word beside it, checked by a test (tests/test_claims.py) in seconds.

    python lab/claims.py              # every claim recomputed, every interval and its source
    python lab/claims.py --untied     # also list the intervals no result file or report backs yet

An interval in the text is tied one of two ways:
- registered: a CLAIMS entry holds the sentence as written (the checked values in {braces}) and a
  function that recomputes them from committed result files (lab/report.paired and the like), with
  the command that wrote those files. The text must hold the sentence, and each braced value must
  equal the recomputed one as rounded in the text.
- quoted: the same three numbers (rounded as the text rounds them) stand in a file a report
  command wrote under docs/figures/ (summary.md, exploration.md, tables.md, a run's log). The tie is
  to the file, which its command rewrites from the result files; not to the sentence's meaning.
What neither ties is "untied"; UNTIED_ALLOWED in the test bounds how many each document may hold,
so the number can only fall.

Verdict words: after each interval, up to the end of its clause, a word that states a direction
("yes", "above", "leads", "no", "below", "within noise", ...) must agree with the interval's sign
(VERDICT_WORDS). One rule for every interval: above zero only when the low end is, below only when
the high end is, otherwise within noise. A word that claims an absence ("does nothing", "none",
"stops the ...") is never supported: an interval holding 0 shows no detectable effect (ABSENCE).

Deliberately left out: numbers without an interval (a point estimate is described, not judged
here), the meaning of a quoted number's sentence (a registered claim checks that), and rerunning
the reports themselves (minutes to hours: their commands are named instead).
"""

import argparse
import functools
import glob
import json
import os
import re
import sys
from collections.abc import Callable
from decimal import ROUND_HALF_UP, Decimal
from typing import NamedTuple

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np

from lab import report
from lab.report import paired_bootstrap_interval

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEEDS = (0, 1, 2)
FIGURES = os.path.join(HERE, "docs", "figures")
# the documents whose words are checked: README, every page of docs/ and the notebook's markdown
DOCUMENTS = (
    "README.md",
    *sorted(f"docs/{n}" for n in os.listdir(os.path.join(HERE, "docs")) if n.endswith(".md")),
    "notebooks/maze.ipynb",
)

NUMBER = r"[+-]?\d+(?:\.\d+)?"
# "+0.068 [+0.052, +0.083]": an estimate and its 95% interval
INTERVAL = re.compile(rf"({NUMBER}) \[({NUMBER}), ({NUMBER})\]")

# A word after an interval says which way it points; each must agree with the interval's sign.
VERDICT_WORDS = {
    "within noise": "within noise",
    "no detectable": "within noise",
    "yes": "above",
    "above": "above",
    "leads": "above",
    "beats": "above",
    "below": "below",
    # "no" alone ends its clause ("..., no;"); "no method", "no-gain" are other words
    "no": "below",
}
# the words, longest first, each as a whole word
# Words that claim an absence: an interval holding 0 shows no detectable effect, never none.
ABSENCE = re.compile(r"\b(does nothing|do nothing|no effect|stops the|none)\b")
# A cause stands only on an experiment that changed it; the README, where a reader takes a cause as
# found, names none, so a causal connective there is refused (RESULTS keeps causes by experiments).
CAUSAL = re.compile(
    r"\b(because|on purpose|hurt by|due to|thanks to|which is why|caused by)\b", re.I
)
CAUSAL_REFUSED = ("README.md",)
WORDS = sorted((w for w in VERDICT_WORDS if w != "no"), key=len, reverse=True)
VERDICT_PATTERN = re.compile(r"\b(" + "|".join(map(re.escape, WORDS)) + r")\b|\b(no)(?=[,;.)]|$)")
# A clause ends at a full stop, a semicolon, a table cell, a bracket or a parenthesis: a verdict
# word after it belongs to another number. (A decimal point is never followed by a space.)
CLAUSE_END = re.compile(r"\.(?=\s|$)|[;|()\[\]]")


# ---- The documents ----


def read_document(path):
    """A document's text with every run of whitespace made one space (a sentence wraps anywhere);
    a notebook's: its markdown cells, one after another."""
    with open(os.path.join(HERE, path)) as f:
        text = f.read()
    if path.endswith(".ipynb"):
        cells = json.loads(text)["cells"]
        text = "\n\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    return " ".join(text.split())


def decimals(number_text):
    return len(number_text.split(".")[1]) if "." in number_text else 0


def shown(value, like):
    """`value` written as `like` writes its number: the same decimals, the same sign convention."""
    places = decimals(like)
    sign = "+" if like[0] in "+-" else ""
    return f"{value:{sign}.{places}f}"


def same_as_written(values, written):
    """Whether the numbers `values` round to the strings `written` (as the text rounds them)."""
    return all(shown(v, w).lstrip("+") == w.lstrip("+") for v, w in zip(values, written))


def verdict_of(low, high):
    return "above" if low > 0 else "below" if high < 0 else "within noise"


def supported(written):
    """The verdicts an interval as written supports: an end written as zero ("+0.000") may be a
    rounded positive or negative number, so it supports both readings."""
    _, low, high = map(float, written)
    if low == 0 or high == 0:
        side = "above" if high > 0 else "below"
        return {side, "within noise"} if low != high else {"within noise"}
    return {verdict_of(low, high)}


def stated_verdict(before, after):
    """The verdict word of an interval: right after it in its clause, or, for an interval in
    parentheses, right before them ("within noise (+0.004 [-0.025, +0.035])"); None if neither."""
    end = CLAUSE_END.search(after)
    clause = after[: end.start()] if end else after
    found = VERDICT_PATTERN.search(clause)
    right_before_an_interval = end and INTERVAL.match(after[end.end() :])
    if found and right_before_an_interval and not clause[found.end() :].strip():
        found = None  # "..., its best@1 within noise (+0.004 [...])": the next interval's word
    if found is None and before.endswith("("):
        # the last words before the parenthesis, back to the start of their clause
        found = VERDICT_PATTERN.search(CLAUSE_END.split(before[:-1])[-1][-40:])
    return (found[1] or found[2]) if found else None


# ---- Where an interval can come from: the committed result files, through the lab's readers ----


@functools.cache
def board(*folders):
    """The merged result files of committed folders (lab/report.merge; a later folder's file wins
    on a clash, as --against reads a board), read once."""
    return report.merge(report.load_records([os.path.join(FIGURES, f) for f in folders]))


def gap(folder, task, a, b, key, against=None):
    """a - b of a per-problem value at the largest k, paired over problems and seeds (against: a
    board folder whose files fill in, as `--against` compares)."""
    interval = report.paired(board(*filter(None, [against, folder])), task, a, b, key)
    if interval is None:
        raise LookupError(f"{folder}: no paired {key} for {task} {a} - {b}")
    return interval


def search_gap(folder, task, a, b):
    """a - b of the share of hard problems each search solved, paired over problems and seeds
    (lab/report.paired_search)."""
    searches = report.named_searches(board(folder)["tasks"][task])
    return report.paired_search(searches[a]["per_problem"], searches[b]["per_problem"])


def unsolved_change(folder, task, method, start="start", against=None, minus_grpo=False):
    """lab/exploration's transfer: the change of distinct outcomes on never-solved training problems
    (end - start), or (minus_grpo) that change minus GRPO's on the problems neither solved."""
    from lab import exploration

    found, _ = exploration.load(
        os.path.join(FIGURES, folder), [task], SEEDS, against and os.path.join(FIGURES, against)
    )
    rows = exploration.measured_pairs(found, task, method, SEEDS, start=start)
    if not minus_grpo:
        return exploration.unsolved_interval(rows)
    grpo_rows = exploration.measured_pairs(found, task, "grpo", SEEDS)
    return exploration.against_grpo_interval(rows, grpo_rows)


@functools.cache
def one_file_runs(folder):
    from lab.one_file_seeds import load

    return load(os.path.join(FIGURES, folder))


def one_file_gap(a, b, metric):
    """grpo_vs_vpo.py's seeds 0-2 (docs/figures/one_file): a - b of `metric`, paired."""
    from lab.one_file_seeds import column

    runs = one_file_runs("one_file")
    x, y = ([column(runs[s]["per_problem"], n)[metric] for s in sorted(runs)] for n in (a, b))
    return paired_bootstrap_interval(np.array(x), np.array(y))


def corner_share(folder, task, method):
    """The share of a method's held-out maze pools that cover both corners, over seeds."""
    return board(folder)["tasks"][task][method]["maze"]["both_corners"]


def entry(folder, task, method):
    return board(folder)["tasks"][task][method]


def at_k(folder, task, curve, methods, i=-1):
    """Each method's mean over seeds of a curve (best_at_k, pass_at_k, ...) at its i-th k."""
    return [entry(folder, task, m)[curve][i] for m in methods]


def solved_searches(folder, task, methods):
    searches = report.named_searches(board(folder)["tasks"][task])
    return [searches[m]["solved"] for m in methods]


# ---- The registry: sentences as written, and what recomputes them ----


class Claim(NamedTuple):
    doc: str  # the document the sentence stands in
    text: str  # the sentence as written, its checked values in {braces}
    values: Callable  # () -> one value per brace: an (estimate, low, high) or a number
    command: str  # the command that wrote the result files the values come from


HEADLINE = (
    "python lab/experiment.py --seeds 0 1 2 --algos grpo vpo grpo_x3 --set out_dir=out/headline"
)
ONE_FILE = "python lab/one_file_seeds.py --out docs/figures/one_file (its table: --report)"
VOTING = "python lab/experiment.py --ablations --seeds 0 1 2 --set out_dir=out/voting"
# the outcome-only runs lend the graded runs' VPO and starts, and are compared with their own GRPO
AGAINST_GRPO = dict(against="exploration", minus_grpo=True)
EXPLORATION = "python lab/exploration.py (docs/RESULTS.md names each folder's command)"

CLAIMS = [
    Claim(
        "README.md",
        "on w-best@30 VPO - GRPO {+0.068 [+0.052, +0.083]} and VPO - the warm start asked for 3 "
        "answers {+0.072 [+0.056, +0.093]}; on best@1 GRPO - VPO {+0.108 [+0.089, +0.127]}",
        lambda: [
            one_file_gap("VPO", "GRPO", "w-best@30"),
            one_file_gap("VPO", "warm start m", "w-best@30"),
            one_file_gap("GRPO", "VPO", "best@1"),
        ],
        ONE_FILE,
    ),
    Claim(
        "README.md",
        "code best@30: {+0.038 [+0.018, +0.057]}, yes (against grpo_x3 {+0.025 [+0.012, +0.039]})",
        lambda: [
            gap("headline", "code", "vpo", "grpo", "best"),
            gap("headline", "code", "vpo", "grpo_x3", "best"),
        ],
        HEADLINE,
    ),
    Claim(
        "README.md",
        "persona, held-out weightings: {+0.021 [+0.014, +0.028]}, yes",
        lambda: [gap("headline", "persona", "vpo", "grpo", "w_best")],
        HEADLINE,
    ),
    Claim(
        "README.md",
        "GRPO's diversity collapses: code {+10.1 [+7.7, +12.4]}, persona {+0.40 [+0.34, +0.47]}, "
        "yes",
        lambda: [
            gap("headline", "code", "vpo", "grpo", "diversity"),
            gap("headline", "persona", "vpo", "grpo", "diversity"),
        ],
        HEADLINE,
    ),
    Claim(
        "README.md",
        "no gain on the collinear control: {+0.005 [-0.007, +0.023]}, within noise",
        lambda: [gap("headline", "persona_collinear", "vpo", "grpo", "w_best")],
        HEADLINE,
    ),
    Claim(
        "README.md",
        "maze, held-out weightings: {+0.095 [+0.082, +0.109]}, yes",
        lambda: [gap("headline", "maze", "vpo", "grpo", "w_best")],
        HEADLINE,
    ),
    Claim(
        "README.md",
        "pass@30 on code: {+0.075 [-0.017, +0.183]}, within noise. Search with plain-prompt RL: "
        "{-0.135 [-0.245, -0.031]}, no; when RL also trains the edit format: {+0.198 [+0.104, "
        "+0.286]}, yes",
        lambda: [
            gap("headline", "code", "vpo", "grpo", "pass"),
            search_gap("headline", "code", "vpo", "grpo"),
            search_gap("leaderboard", "code", "vpo_mutation", "grpo_mutation"),
        ],
        HEADLINE,
    ),
    Claim(
        "README.md",
        "code's graded score (share of hidden tests) {-0.031 [-0.063, -0.005]}, no; its "
        "correctness (maj-pass@30) {+0.007 [+0.000, +0.025]}, within noise, every policy near the "
        "floor; persona {-0.048 [-0.059, -0.036]}, no; the maze {-0.008 [-0.041, +0.025]}, within "
        "noise",
        lambda: [
            gap("voting", "code", "vpo", "grpo", "maj"),
            gap("voting", "code", "vpo", "grpo", "maj_pass"),
            gap("voting", "persona", "vpo", "grpo", "maj"),
            gap("voting", "maze", "vpo", "grpo", "maj"),
        ],
        VOTING,
    ),
    Claim(
        "README.md",
        "| persona: w-best@30 | vpo_max_at_k | 4 of 18 | 0.531 | {-0.016 [-0.021, -0.010]} no | "
        "{+0.007 [-0.002, +0.016]} within noise | {+0.010 [+0.003, +0.017]} yes |",
        lambda: [
            gap("against_vpo_max_at_k", "persona", "vpo_max_at_k", m, "w_best", "leaderboard")
            for m in ("vpo", "grpo", "warm_start")
        ],
        "python lab/experiment.py --algos vpo_max_at_k --seeds 0 1 2 --against "
        "docs/figures/leaderboard (docs/RESULTS.md, 'A new method against the committed "
        "leaderboard')",
    ),
    Claim(
        "README.md",
        "among 8 changed by {-0.90 [-1.40, -0.54]} on code and {-3.18 [-3.74, -2.06]} on the maze",
        lambda: [
            unsolved_change("exploration_outcome", "code", "grpo", against="exploration"),
            unsolved_change("exploration_outcome", "maze", "grpo", against="exploration"),
        ],
        EXPLORATION,
    ),
    Claim(
        "README.md",
        "UCB-Con's change minus GRPO's is {+2.44 [+2.04, +2.91]} on code; on the maze {-0.02 "
        "[-1.41, +0.57]}, no detectable effect",
        lambda: [
            unsolved_change("exploration_outcome", "code", "ucb_con", **AGAINST_GRPO),
            unsolved_change("exploration_outcome", "maze", "ucb_con", **AGAINST_GRPO),
        ],
        EXPLORATION,
    ),
    Claim(
        "README.md",
        "keeps its never-solved code problems' diversity against the start asked for sets ({+0.18 "
        "[+0.03, +0.32]})",
        lambda: [unsolved_change("exploration", "code", "vpo", "start_sets")],
        EXPLORATION,
    ),
]


# the README's headline table, a row a claim: warm start, GRPO, grpo_x3, VPO (and the optimum)
FOUR = ("warm_start", "grpo", "grpo_x3", "vpo")
HEADLINE_TABLE = [
    Claim(
        "README.md",
        "| code, best@1 | {0.613} | {0.792} | **{0.812}** | {0.701} | {0.876} |",
        lambda: at_k("headline", "code", "best_at_k", FOUR + ("optimum",), 0),
        HEADLINE,
    ),
    Claim(
        "README.md",
        "| code, best@30 | {0.898} | {0.898} | {0.912} | **{0.936}** | {0.974} |",
        lambda: at_k("headline", "code", "best_at_k", FOUR + ("optimum",)),
        HEADLINE,
    ),
    Claim(
        "README.md",
        "| code, pass@30 | {0.075} | {0.083} | {0.083} | **{0.158}** | {0.260} |",
        lambda: at_k("headline", "code", "pass_at_k", FOUR + ("optimum",)),
        HEADLINE,
    ),
    Claim(
        "README.md",
        "| code, gap to the optimum closed (own objective) | | {0.68} | **{0.76}** | {0.56} | |",
        lambda: [entry("headline", "code", m)["gap_closed"]["objective"] for m in FOUR[1:]],
        HEADLINE,
    ),
    Claim(
        "README.md",
        "| code, reward-space diversity | {17.9} | {6.0} | {5.6} | **{16.1}** | |",
        lambda: [entry("headline", "code", m)["diversity"] for m in FOUR],
        HEADLINE,
    ),
    Claim(
        "README.md",
        "| code, search solved of 192 | {125} | {161} | **{167}** | {135} (3 children a call: "
        "{159}) |",
        lambda: solved_searches("headline", "code", FOUR + ("vpo (m per call)",)),
        HEADLINE,
    ),
    Claim(
        "README.md",
        "| persona, best@30 under held-out weightings | {0.522} | {0.528} | {0.524} | "
        "**{0.550}** |",
        lambda: at_k("headline", "persona", "heldout_weight_best_at_k", FOUR),
        HEADLINE,
    ),
    Claim(
        "README.md",
        "| persona, best@30 (fixed mean) | {0.471} | {0.492} | **{0.498}** | {0.486} |",
        lambda: at_k("headline", "persona", "best_at_k", FOUR),
        HEADLINE,
    ),
    Claim(
        "README.md",
        "| persona, diversity | {0.788} | {0.411} | {0.208} | **{0.815}** |",
        lambda: [entry("headline", "persona", m)["diversity"] for m in FOUR],
        HEADLINE,
    ),
    Claim(
        "README.md",
        "| control, best@30 under held-out weightings | {0.934} | {0.957} | **{0.963}** | "
        "{0.962} |",
        lambda: at_k("headline", "persona_collinear", "heldout_weight_best_at_k", FOUR),
        HEADLINE,
    ),
    Claim(
        "README.md",
        "| {0.720} | {0.738} | {0.735} | **{0.747}** | {0.751} |",
        lambda: at_k("headline", "maze", "best_at_k", FOUR + ("optimum",)),
        HEADLINE,
    ),
    Claim(
        "README.md",
        "| maze, best@30 under held-out weightings | {0.788} | {0.755} | {0.734} | **{0.850}** | "
        "{0.873} |",
        lambda: at_k("headline", "maze", "heldout_weight_best_at_k", FOUR + ("optimum",)),
        HEADLINE,
    ),
    Claim(
        "README.md",
        "| maze, pools covering both corners | {1.00} | {0.36} | {0.17} | {0.95} |",
        lambda: [entry("headline", "maze", m)["corner_coverage"]["both"] for m in FOUR],
        HEADLINE,
    ),
]
CLAIMS += HEADLINE_TABLE


def unbraced(text):
    return text.replace("{", "").replace("}", "")


def braced_values(text):
    """The written values of a claim's text: per brace, the list of its numbers as strings."""
    return [re.findall(NUMBER, inside) for inside in re.findall(r"\{([^}]*)\}", text)]


def check_claim(claim, documents):
    """What is wrong with one registered claim -> a list of lines (empty: text and files agree)."""
    where = f"{claim.doc}: '{unbraced(claim.text)[:90]}'"
    text = documents[claim.doc]
    if unbraced(claim.text) not in text:
        # the words as registered with any numbers in the braces: a changed number is named
        parts = re.split(r"\{[^}]*\}", claim.text)
        shapes = [re.sub(NUMBER, lambda _: "@", b) for b in re.findall(r"\{([^}]*)\}", claim.text)]
        shapes = ["(" + re.escape(shape).replace("@", NUMBER) + ")" for shape in shapes]
        pattern = re.escape(parts[0]) + "".join(
            shape + re.escape(part) for shape, part in zip(shapes, parts[1:])
        )
        found = re.search(pattern, text)
        if found is None:
            return [f"{where}: the sentence is not in the document (changed or moved?)"]
        claim = claim._replace(
            text=re.sub(r"\{[^}]*\}", "{}", claim.text).format(
                *(f"{{{g}}}" for g in found.groups())
            )
        )
        where = f"{claim.doc}: '{unbraced(claim.text)[:90]}'"
    try:
        values = claim.values()
    except (LookupError, KeyError, OSError) as e:
        return [f"{where}: its result files are missing ({e}); rerun `{claim.command}`"]
    problems = []
    for written, value in zip(braced_values(claim.text), values):
        value = list(value) if isinstance(value, tuple | list) else [value]
        if len(value) != len(written) or not same_as_written(value, written):
            recomputed = ", ".join(shown(v, w) for v, w in zip(value, written))
            problems.append(
                f"{where}: the text says {' '.join(written)}, the result files {recomputed} "
                f"(`{claim.command}`)"
            )
    return problems


# ---- Every interval of every document ----


@functools.cache
def reported_intervals():
    """Every interval a report command wrote under docs/figures/, rounded to 0-3 decimals ->
    {(estimate, low, high) as strings without a plus sign: the files}."""
    found = {}
    for path in sorted(glob.glob(os.path.join(FIGURES, "**", "*"), recursive=True)):
        if not path.endswith((".md", ".log", ".txt")):
            continue
        with open(path, errors="replace") as f:
            for match in INTERVAL.finditer(" ".join(f.read().split())):
                places = min(decimals(x) for x in match.groups())
                for d in range(places + 1):
                    # a report's "1.565" reads "1.57" to a person and "1.56" to Python: both
                    for key in (rounded(match.groups(), d, "half_up"), rounded(match.groups(), d)):
                        found.setdefault(key, set()).add(os.path.relpath(path, HERE))
                        # "(The column reads the report's a - b with its sign turned.)"
                        turned = tuple(negated(x) for x in (key[0], key[2], key[1]))
                        found.setdefault(turned, set()).add(os.path.relpath(path, HERE) + " (-)")
    return found


def rounded(numbers, places, mode="float"):
    """Three numbers as strings without a plus sign, at `places` decimals: as Python's format
    rounds the float, or ("half_up") as a person rounds the written digits."""
    if mode == "half_up":
        step = Decimal(1).scaleb(-places)
        return tuple(str(Decimal(x.lstrip("+")).quantize(step, ROUND_HALF_UP)) for x in numbers)
    return tuple(f"{float(x):.{places}f}" for x in numbers)


def negated(written):
    return written[1:] if written.startswith("-") else "-" + written


def quoted_from(written):
    """The report files holding the interval `written` (three strings) as the text rounds it."""
    return sorted(reported_intervals().get(tuple(w.lstrip("+") for w in written), ()))


class Interval(NamedTuple):
    doc: str
    written: tuple  # the three numbers as the text writes them
    context: str  # the words around it
    tie: str  # "registered", "quoted: <file>" or "untied"
    verdict_word: str | None  # the direction word after it, if any
    problem: str | None  # a verdict word its interval does not support


def intervals(doc, text):
    """Every interval of a document with its tie and its verdict word's check."""
    registered = set()
    for claim in CLAIMS:
        if claim.doc == doc and unbraced(claim.text) in text:
            registered |= {tuple(w) for w in braced_values(claim.text) if len(w) == 3}
    out = []
    for match in INTERVAL.finditer(text):
        written = match.groups()
        if written in registered:
            tie = "registered"
        else:
            files = quoted_from(written)
            tie = f"quoted: {files[0]}" if files else "untied"
        context = text[max(0, match.start() - 70) : match.end() + 50]
        word = stated_verdict(text[: match.start()].rstrip(), text[match.end() :])
        problem = None
        absent = ABSENCE.search(CLAUSE_END.split(text[match.end() :], maxsplit=1)[0])
        if absent:
            problem = f"'{absent[1]}' claims an absence; the interval can show no detectable effect"
        if word is not None:
            said, holds = VERDICT_WORDS[word], supported(written)
            if said not in holds:
                problem = f"'{word}' says {said}, the interval {' '.join(written)} is {holds}"
        out.append(Interval(doc, written, context, tie, word, problem))
    return out


def documents():
    return {doc: read_document(doc) for doc in DOCUMENTS}


def check(show_untied=False):
    """Every claim and interval -> (lines to print, the problems, untied counts per document)."""
    docs = documents()
    problems = [p for claim in CLAIMS for p in check_claim(claim, docs)]
    lines, untied = [], {}
    for doc, text in docs.items():
        if doc in CAUSAL_REFUSED:
            problems += [
                f"{doc}: '...{text[max(0, m.start() - 70) : m.end() + 40]}...': '{m[1]}' states a "
                "cause; move it to docs/RESULTS.md beside the experiment that changed that cause"
                for m in CAUSAL.finditer(text)
            ]
        found = intervals(doc, text)
        ties = [i.tie.split(":")[0] for i in found]
        untied[doc] = ties.count("untied")
        counts = ", ".join(f"{ties.count(t)} {t}" for t in ("registered", "quoted", "untied"))
        lines.append(f"{doc}: {len(found)} intervals: {counts}")
        for i in found:
            if i.problem:
                problems.append(f"{doc}: '...{i.context}...': {i.problem}")
            if show_untied and i.tie == "untied":
                lines.append(f"  untied: ...{i.context}...")
    return lines, problems, untied


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].strip())
    parser.add_argument("--untied", action="store_true", help="list every untied interval")
    args = parser.parse_args(argv)
    lines, problems, _ = check(args.untied)
    print("\n".join(lines))
    print(f"\n{len(CLAIMS)} registered claims; {len(problems)} problems")
    print("\n".join(problems))
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
