"""
The code task: write a program in lang.py's tiny language from a few input->output examples.

The hidden program counts the thresholds above x, f(x) = (+ (< x t1) (+ (< x t2) ...)), on the
inputs 0..domain-1. The prompt shows one input in each region between thresholds ("3->2 8->1 12->0"
for two), which leaves threshold i anywhere in its gap (x_{i-1}, x_i]. Every other input is a hidden
test, one reward component each; "solved" means all pass. The plausible programs each pass a
different subset of the hidden tests and are equally likely the truth: different guesses beat one
guess repeated. A program that contradicts an example scores zero; a consistent one fails exactly
sum_i |t_i - t_i*| hidden tests, so the score leads a search toward the answer.

The defaults are the tests' small family; configs/code.yaml sets the results' (`window_share`,
`fixed_width`, `edits`: children as edits of the best parent, "2-5"); docs/RESULTS.md says why.

Deliberately left out: any other program family (docs/HISTORY.md), partial credit inside a test.
"""

import functools
import itertools
import math
import random
import re
from dataclasses import dataclass

import numpy as np

import lang
from tasks import ParentTask, checked_weights, format_goal, held_out, weighted_sum


# A program's outputs depend only on its text, and the same few thousand programs recur.
@functools.lru_cache(maxsize=2**15)
def domain_outputs(text, domain):
    """lang.run(text, 0..domain-1) as a tuple: the program's output at each input, None where it
    fails."""
    return tuple(lang.run(text, range(domain)))


@functools.lru_cache(maxsize=2**15)
def domain_targets(thresholds, domain):
    """The hidden program's output at each input 0..domain-1: how many thresholds lie above it."""
    return tuple(sum(x < t for t in thresholds) for x in range(domain))


@dataclass(eq=False)  # eq=False: a task is hashed by identity, as a plain class is
class CodeTask(ParentTask):
    """A problem is (t1, .., tk, x0, .., xk), x0 < t1 <= x1 < .. <= xk; a program is a tuple of k
    thresholds."""

    domain: int = 16  # the inputs 0..domain-1
    thresholds: int = 2  # k: the hidden program's thresholds
    noise: float = 0.2  # the share of demonstrations that ignore the examples
    # a habit (_habit), like a pretrained model's bias: RL has something to find
    early_switch: float = 0.8
    heldout_fraction: float = 0.25
    max_parents: int = 2  # parents a prompt shows at most
    # examples in a narrow window: pinned-down problems beside open ones
    window_share: float = 0.0
    # 07, not 7: a child is its parent but for one number, easy to copy
    fixed_width: bool = False
    # children written as edits, "2-5": the warm start copied whole programs badly
    edits: bool = False
    reward_weights: tuple = ()  # the fixed scalarization's weights (empty: the mean)

    def __post_init__(self):
        if not 1 <= self.thresholds <= 4 or not self.thresholds + 2 <= self.domain <= 100:
            raise ValueError(
                f"need 1 <= thresholds <= 4 and thresholds + 2 <= domain <= 100, "
                f"got {self.thresholds} and {self.domain}"
            )
        if not 0.0 <= self.window_share <= 1.0:
            raise ValueError(f"window_share must be in [0, 1], got {self.window_share}")
        self.k = self.thresholds
        self.DOMAIN = list(range(self.domain))
        self.dim = self.domain - (self.k + 1)  # every input but the k + 1 shown is a hidden test
        self.max_answer_tokens = len(self.program_text([self.domain - 1] * self.k)) + 3
        self.reward_weights = checked_weights(self.reward_weights, self.dim)  # None: the mean

    # ---- problems: the hidden program, its examples, its plausible programs ----------------------

    def problems(self, split, n, rng: random.Random):
        """n problems of a split: the shown inputs first, then each threshold uniformly in its
        gap."""
        out = []
        while len(out) < n:
            pool = self.DOMAIN
            if self.window_share and rng.random() < self.window_share:
                width = rng.randint(self.k + 1, self.domain)
                start = rng.randint(0, self.domain - width)
                pool = self.DOMAIN[start : start + width]
            xs = tuple(sorted(rng.sample(pool, self.k + 1)))
            problem = tuple(rng.randint(xs[i] + 1, xs[i + 1]) for i in range(self.k)) + xs
            if held_out(repr(problem), self.heldout_fraction) == (split == "heldout"):
                out.append(problem)
        return out

    def shown(self, problem):
        return problem[self.k :]

    def tests(self, problem):
        shown = set(self.shown(problem))
        return [x for x in self.DOMAIN if x not in shown]

    def target(self, problem, x):
        return sum(x < t for t in problem[: self.k])

    def prompt(self, problem, parents=None, goal=None):
        """The examples; with parents ((text, score) pairs, worst to best, as FunSearch lists them),
        each program followed by the hidden tests it passes, as OpenEvolve shows scores ("... from
        P1 :29 ; P2 :33")."""
        text = " ".join(f"{x}->{self.target(problem, x)}" for x in self.shown(problem))
        if parents:
            # one length for every score, like the programs with fixed_width
            width = len(str(self.dim))
            text += " from " + " ; ".join(
                f"{program} :{round(score * self.dim):0{width}d}" for program, score in parents
            )
        return text + (format_goal(goal) if goal is not None else "")

    def program_text(self, program):
        width = len(str(self.domain - 1)) if self.fixed_width else 1
        text = f"(< x {program[-1]:0{width}d})"
        for t in reversed(program[:-1]):
            text = f"(+ (< x {t:0{width}d}) {text})"
        return text

    def thresholds_of(self, text):
        """The numbers a program is compared with, read off the text (answers that do not parse
        too)."""
        return [int(v) for v in re.findall(r"\(< x (\d+)\)", text)]

    def _gaps(self, problem):
        """Each threshold's consistent values: (x_{i-1}, x_i] between the examples around it."""
        shown = self.shown(problem)
        return [range(shown[i] + 1, shown[i + 1] + 1) for i in range(self.k)]

    def hypotheses(self, problem):
        """Every program that agrees with the examples: each threshold anywhere in its gap."""
        return list(itertools.product(*self._gaps(problem)))

    def num_plausible(self, problem):
        """len(hypotheses(problem)) without listing them: the product of the gaps."""
        return int(np.prod(np.diff(self.shown(problem))))

    # ---- reward ----------------------------------------------------------------------------------

    def reward(self, problem, answer):
        """Any string -> (D,) per-test pass / fail; zero if it contradicts an example (else RL
        drifts from them)."""
        outputs = (
            domain_outputs(answer, self.domain)
            if isinstance(answer, str)
            else lang.run(answer, self.DOMAIN)
        )
        truth = domain_targets(problem[: self.k], self.domain)
        tests = self.tests(problem)
        if any(outputs[x] != truth[x] for x in self.shown(problem)):
            return np.zeros(len(tests), dtype=np.float32)
        return np.array([float(outputs[x] == truth[x]) for x in tests], dtype=np.float32)

    def scalarize(self, r):
        """The mean of the components or reward_weights' sum, as PersonaTask.scalarize."""
        return weighted_sum(r, self.reward_weights)

    def valid(self, problem, answer):
        """A program that parses and reproduces the prompt's examples."""
        shown = list(self.shown(problem))
        return lang.canonical(answer) is not None and all(
            o == self.target(problem, x) for o, x in zip(lang.run(answer, shown), shown)
        )

    def answer_key(self, answer):
        key = lang.canonical(answer)  # the same program spaced differently is a duplicate
        return key if key is not None else answer

    def outcome(self, problem, answer):
        """The program's output at every input of the domain ("x" where it fails): two programs
        that compute one function are one outcome, whatever their text."""
        outputs = domain_outputs(answer, self.domain) if isinstance(answer, str) else ()
        return ",".join("x" if o is None else str(o) for o in outputs)

    def solved(self, problem, reward):
        """Every hidden test passes."""
        return bool(np.all(np.asarray(reward) == 1.0))

    def vote_key(self, problem, answer):
        """A program that passes the shown examples votes with its outcome (its behaviour on the
        domain, as code generators cluster candidates); any other cannot vote. The vote sees no
        hidden test."""
        return self.outcome(problem, answer) if self.valid(problem, answer) else None

    # ---- demonstrations: what the warm start imitates
    # ---------------------------------------------

    def demonstration(self, problem, m, rng, parents=None):
        """m programs for the warm start, distinct where possible (repeats teach repeating): with
        the habit, or with parents the best parent mutated (with `edits`, written as the edit,
        '2-5')."""
        out, programs = [], []
        for _ in range(m):
            # a program that ignores the examples; with edits, a wild edit
            if rng.random() < self.noise:
                programs.append(
                    self.program_text(tuple(sorted(rng.sample(range(1, self.domain), self.k))))
                )
                out.append(
                    self.edit_text(
                        rng.randrange(self.k),
                        rng.choice([-1, 1]) * rng.randint(1, self.domain // 2),
                    )
                    if parents and self.edits
                    else programs[-1]
                )
                continue
            program = (
                self._mutate(parents[-1], problem, rng, avoid=programs)
                if parents
                else self._habit(problem, rng, avoid=programs)
            )
            programs.append(self.program_text(program))
            if parents and self.edits:
                moved = [i for i in range(self.k) if program[i] != parents[-1][i]] or [0]
                out.append(self.edit_text(moved[0], program[moved[0]] - parents[-1][moved[0]]))
            else:
                out.append(programs[-1])
        return out

    def _habit(self, problem, rng, avoid):
        """A consistent program (not in `avoid` if possible), each threshold right after its example
        with p = early_switch."""
        shown = self.shown(problem)
        gaps = self._gaps(problem)
        habit = [
            range(shown[i] + 1, shown[i] + 2) if rng.random() < self.early_switch else gaps[i]
            for i in range(self.k)
        ]
        return (
            self._pick(habit, rng, avoid)
            or self._pick(gaps, rng, avoid)
            or tuple(rng.choice(c) for c in habit)
        )

    def _pick(self, choices, rng, avoid):
        """A uniform draw from the product of `choices` avoiding `avoid`, or None; drawn, not listed
        (faster)."""
        if np.prod([len(c) for c in choices]) <= len(avoid):  # small: list it, it may be used up
            fresh = [p for p in itertools.product(*choices) if self.program_text(p) not in avoid]
            return rng.choice(fresh) if fresh else None
        while True:  # more programs than `avoid` holds: a fresh one exists
            program = tuple(rng.choice(c) for c in choices)
            if self.program_text(program) not in avoid:
                return program

    # ---- mutation: children of parents, as evolve.py asks the policy for them
    # ---------------------

    def demo_parents(self, problem, rng):
        """Consistent parents, worst to best; a second is half the time an edit of the first, as on
        islands."""

        def anyone():
            return tuple(rng.choice(c) for c in self._gaps(problem))

        parents = [anyone()]
        for _ in range(rng.randint(1, self.max_parents) - 1):
            parents.append(
                self._mutate(parents[0], problem, rng) if rng.random() < 0.5 else anyone()
            )
        return sorted(parents, key=lambda h: self.reward(problem, self.program_text(h)).mean())

    def scored(self, problem, programs):
        """Programs (hypotheses) -> the (text, score) pairs a prompt shows as parents."""
        texts = [self.program_text(p) for p in programs]
        return [(text, self.scalarize(self.reward(problem, text))) for text in texts]

    def _mutate(self, program, problem, rng, avoid=(), max_step=None):
        """Move one threshold, staying consistent, preferably out of `avoid`, by a log-uniform step
        of at most `max_step` (default: the hidden tests it fails, shown in the prompt: the truth is
        no farther)."""
        if max_step is None:  # as far as the tests the parent fails
            failed = 1 - self.scalarize(self.reward(problem, self.program_text(program)))
            max_step = max(1, round(self.dim * failed))
        now = list(program)
        options = [
            (i, v)
            for i, gap in enumerate(self._gaps(problem))
            for v in gap
            if v != now[i] and abs(v - now[i]) <= max_step
        ]
        if avoid:
            fresh = [
                (i, v)
                for i, v in options
                if self.program_text(now[:i] + [v] + now[i + 1 :]) not in avoid
            ]
            options = fresh or options
        if not options:
            return program
        # a size s with probability proportional to log(1 + 1/s) (log-uniform), then a move of that
        # size
        sizes = sorted({abs(v - now[i]) for i, v in options})
        size = rng.choices(sizes, weights=[math.log1p(1 / s) for s in sizes])[0]
        i, v = rng.choice([(i, v) for i, v in options if abs(v - now[i]) == size])
        return tuple(now[:i] + [v] + now[i + 1 :])

    def edit_text(self, i, step):
        """Threshold i (0-based) moved by `step`, as a child from parents is written with edits:
        '2-5'."""
        return f"{i + 1}{'+' if step > 0 else '-'}{abs(step)}"

    def child_program(self, answer, parents):
        """A policy's answer from parents -> the program it stands for: with edits, 'i+s' / 'i-s'
        moves the best parent's i-th threshold (1-based); a bad edit stays as written (and scores
        zero)."""
        match = (
            re.fullmatch(r"\s*(\d)\s*([+-])\s*(\d{1,3})\s*", answer)
            if self.edits and parents
            else None
        )
        if not match:
            return answer
        i, step = int(match[1]) - 1, int(match[3]) * (1 if match[2] == "+" else -1)
        thresholds = self.thresholds_of(parents[-1][0])
        if (
            len(thresholds) != self.k
            or not 0 <= i < self.k
            or not 0 <= thresholds[i] + step < self.domain
        ):
            return answer
        thresholds[i] += step
        return self.program_text(thresholds)
