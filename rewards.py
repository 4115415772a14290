"""
The toy tasks. Every answer gets a reward VECTOR in [0,1]^D; each task also fixes a scalarisation
(the mean of the components) that GRPO trains on and best@k reports.

1. PersonaTask — D personas each have a favourite letter, given in the prompt ("likes qxmz").
   An answer is a word of at most L lowercase letters. Persona d's score is
       r_d = sqrt( (c_d + overlap * sum_{e != d} c_e) / L )
   where c_d counts the letters persona d likes. Letters are a shared budget, so the personas
   conflict: no word pleases all. The square root is diminishing returns; it bends the Pareto
   front outwards, so every mix of letter counts is the best answer for SOME weighting of the
   personas (with linear scores only the D pure words would matter, and one 3-answer set would
   cover most of them). `overlap` near 1 makes the personas nearly collinear: the control task on
   which VPO should not help.

2. CodeTask — write a program in lang.py's tiny language from two examples. The hidden function
   is f(x) = (if (< x t) a b) on x in 0..9 with constants a != b (plus_pieces=True also allows
   x + k on either side: a richer family, but one a 4-layer model did not learn to infer from the
   examples within a CPU-sized warm start). The prompt shows one example on each side of the
   threshold ("2->5 7->3"), which fixes a and b but leaves the threshold anywhere in (x1, x2];
   the D = 8 hidden tests are the other inputs. Programs with different thresholds pass
   different subsets of the tests, so a set of different guesses is worth more than one guess
   repeated; wide gaps make hard problems. "Solved" means every test passes. The demonstrations
   favour one guess (switch right after the first example), like a pretrained model with a
   habit, so the warm start does not cover the other thresholds by chance.

Each task offers: problems(split, n, rng) for a train/held-out split (a fixed hash of the problem,
so the split never changes), prompt(problem, parents, goal), reward(problem, answer) -> (D,),
scalarize(r), demonstration(problem, m, rng) for the supervised warm start, and answer_key()
for deduplication. The code task's prompt can also carry parent programs, so the policy can serve
as the mutation operator of search.py's evolutionary search.

Warm-start demonstrations are deliberately imperfect (noise letters, programs that ignore the
examples): the warm start must be diverse but must not already sit on the Pareto front, otherwise
RL has nothing to show.

Deliberately left out: natural-language tasks, learned reward models, partial credit inside a
test case, anything loaded from disk.
"""

import math
import random
import zlib

import numpy as np

import lang

LETTERS = "abcdefghijklmnopqrstuvwxyz"


def _heldout(key: str, fraction: float) -> bool:
    """A fixed hash split: the same problem is on the same side on every machine and seed."""
    return (zlib.crc32(key.encode()) % 1000) < fraction * 1000


def format_goal(weights) -> str:
    """Goal-conditioned prompts carry the weighting as one digit per component (0..9)."""
    return " w" + "".join(str(min(9, int(round(9 * float(w))))) for w in weights)


# ----------------------------------------------------------------------------------------------

class PersonaTask:
    def __init__(self, num_personas=4, answer_len=12, overlap=0.0, noise=0.25, heldout_fraction=0.25):
        if not 1 <= num_personas <= 26:
            raise ValueError("num_personas must be in 1..26")
        if not 0.0 <= overlap <= 1.0:
            raise ValueError("overlap must be in [0, 1]")
        self.dim = num_personas
        self.answer_len = answer_len
        self.overlap = overlap
        # fraction of demonstration letters that please nobody. Measured (SFT, 300 steps, 2 seeds): at
        # 0.25 the warm start learns to copy the favourite letters within ~100 steps; at 0.5 the
        # signal is too weak and the warm start often never leaves the uniform-letter plateau
        self.noise = noise
        self.heldout_fraction = heldout_fraction
        self.max_answer_tokens = answer_len + 1  # room for one separator/end token

    def problems(self, split, n, rng: random.Random):
        """n problems (tuples of D distinct favourite letters) from 'train' or 'heldout'."""
        out = []
        while len(out) < n:
            favs = tuple(rng.sample(LETTERS, self.dim))
            if _heldout("".join(favs), self.heldout_fraction) == (split == "heldout"):
                out.append(favs)
        return out

    def prompt(self, problem, parents=None, goal=None):
        text = "likes " + "".join(problem)
        return text + (format_goal(goal) if goal is not None else "")

    def valid(self, answer):
        """A word of 1..L lowercase letters."""
        return isinstance(answer, str) and 1 <= len(answer) <= self.answer_len and all(c in LETTERS for c in answer)

    def reward(self, problem, answer):
        """Any string -> (D,) scores in [0,1]; zero vector unless it is valid."""
        if not self.valid(answer):
            return np.zeros(self.dim, dtype=np.float32)
        counts = np.array([answer.count(f) for f in problem], dtype=np.float64)
        share = (counts + self.overlap * (counts.sum() - counts)) / self.answer_len
        return np.sqrt(np.clip(share, 0.0, 1.0)).astype(np.float32)

    def scalarize(self, r):
        return float(np.mean(r))

    def answer_key(self, answer):
        return answer

    def _one_demo(self, problem, rng):
        letters = []
        for _ in range(self.answer_len):
            if rng.random() < self.noise:
                letters.append(rng.choice([c for c in LETTERS if c not in problem]))
            else:
                letters.append(rng.choice(problem))
        return "".join(letters)

    def demonstration(self, problem, m, rng, parents=None):
        return [self._one_demo(problem, rng) for _ in range(m)]


# ----------------------------------------------------------------------------------------------

def _piece_text(piece):
    kind, k = piece
    if kind == "const":
        return str(k)
    return "x" if k == 0 else f"(+ x {k})"


def _piece_value(piece, x):
    kind, k = piece
    return k if kind == "const" else x + k


def _program_text(t, a, b):
    return f"(if (< x {t}) {_piece_text(a)} {_piece_text(b)})"


CONST_PIECES = [("const", k) for k in range(10)]
PLUS_PIECES = [("plus", k) for k in range(5)]


class CodeTask:
    DOMAIN = list(range(10))

    def __init__(self, noise=0.2, heldout_fraction=0.25, max_parents=2, plus_pieces=False, early_switch=0.7):
        self.dim = len(self.DOMAIN) - 2  # every input but the two shown is a hidden test
        # the hidden family: each side of the threshold is a constant, or also x + k if plus_pieces
        self.pieces = CONST_PIECES + (PLUS_PIECES if plus_pieces else [])
        self.noise = noise  # fraction of demonstrations that ignore the examples
        # fraction of consistent demonstrations that switch right after the first example
        # (t = x1 + 1), the rest pick any consistent threshold. Measured with uniform thresholds
        # (early_switch=0): the warm start's pool of 30 already solved 97.5% of held-out problems, so
        # the corners were reached by chance and there was nothing left for RL or search to find
        self.early_switch = early_switch
        self.heldout_fraction = heldout_fraction
        self.max_parents = max_parents
        self.max_answer_tokens = 32

    # A problem is (t, A, B, x1, x2): f = (if (< x t) A B), shown at x1 < t <= x2.
    def problems(self, split, n, rng: random.Random):
        out = []
        while len(out) < n:
            t = rng.randint(1, 9)
            a, b = rng.choice(self.pieces), rng.choice(self.pieces)
            if a == b:
                continue
            x1, x2 = rng.randint(0, t - 1), rng.randint(t, 9)
            problem = (t, a, b, x1, x2)
            if _heldout(repr(problem), self.heldout_fraction) == (split == "heldout"):
                out.append(problem)
        return out

    def target(self, problem, x):
        t, a, b, _, _ = problem
        return _piece_value(a, x) if x < t else _piece_value(b, x)

    def tests(self, problem):
        _, _, _, x1, x2 = problem
        return [x for x in self.DOMAIN if x not in (x1, x2)]

    def prompt(self, problem, parents=None, goal=None):
        _, _, _, x1, x2 = problem
        text = f"{x1}->{self.target(problem, x1)} {x2}->{self.target(problem, x2)}"
        if parents:  # worst to best, as FunSearch lists them: the policy learns to vary the last
            text += " from " + " ; ".join(parents)
        return text + (format_goal(goal) if goal is not None else "")

    def reward(self, problem, answer):
        """Any string -> (D,) of per-test pass (1) / fail (0); lang.run never raises."""
        tests = self.tests(problem)
        outputs = lang.run(answer, tests)
        return np.array([float(o == self.target(problem, x)) for o, x in zip(outputs, tests)],
                        dtype=np.float32)

    def scalarize(self, r):
        return float(np.mean(r))

    def valid(self, answer):
        """A program that parses (it may still fail every test)."""
        return lang.canonical(answer) is not None

    def answer_key(self, answer):
        key = lang.canonical(answer)  # the same program spaced differently is a duplicate
        return key if key is not None else answer

    def hypotheses(self, problem):
        """Every program of the hidden family that agrees with both examples."""
        _, _, _, x1, x2 = problem
        y1, y2 = self.target(problem, x1), self.target(problem, x2)
        firsts = [p for p in self.pieces if _piece_value(p, x1) == y1]
        seconds = [p for p in self.pieces if _piece_value(p, x2) == y2]
        return [(t, a, b) for t in range(x1 + 1, x2 + 1) for a in firsts for b in seconds if a != b]

    def program_text(self, program):
        return _program_text(*program)

    def _random_program(self, rng):
        return (rng.randint(1, 9), rng.choice(self.pieces), rng.choice(self.pieces))

    def _mutate(self, program, problem, rng):
        """Change one part of a program (threshold, first or second piece), staying consistent."""
        options = [h for h in self.hypotheses(problem) if h != program and
                   sum(u != v for u, v in zip(h, program)) == 1]
        return rng.choice(options) if options else rng.choice(self.hypotheses(problem))

    def demonstration(self, problem, m, rng, parents=None):
        """m programs for the warm start. With parents (texts, worst to best), each demonstration is
        a one-part mutation of the best parent, which is what search.py needs from the policy."""
        out = []
        for _ in range(m):
            if rng.random() < self.noise:
                out.append(_program_text(*self._random_program(rng)))
            elif parents:
                out.append(_program_text(*self._mutate(parents[-1], problem, rng)))
            else:
                hypotheses = self.hypotheses(problem)
                if rng.random() < self.early_switch:
                    hypotheses = [h for h in hypotheses if h[0] == problem[3] + 1]
                out.append(_program_text(*rng.choice(hypotheses)))
        return out

    def demo_parents(self, problem, rng):
        """Parents for a warm-start demonstration: consistent programs sorted worst to best."""
        hyps = self.hypotheses(problem)
        parents = [rng.choice(hyps) for _ in range(rng.randint(1, self.max_parents))]
        return sorted(parents, key=lambda h: self.reward(problem, _program_text(*h)).mean())


# ----------------------------------------------------------------------------------------------
# Turning a sampled rollout into reward vectors

def score_answers(task, problem, answers, m):
    """The first m answers of a rollout -> (m, D) reward rows, zero for missing or repeated answers.

    A repeated answer adds nothing to a set's best-of-m, and Multi-RLVR's sum would otherwise pay
    the policy for writing the same thing twice. Answers past the m-th are ignored.
    """
    rows = np.zeros((m, task.dim), dtype=np.float32)
    seen = set()
    for j, answer in enumerate(answers[:m]):
        key = task.answer_key(answer)
        if key in seen:
            continue
        seen.add(key)
        rows[j] = task.reward(problem, answer)
    return rows


def make_task(name, **options):
    """Build a task from its config name; options are that task's constructor arguments."""
    if name == "persona":
        return PersonaTask(**options)
    if name == "persona_collinear":
        return PersonaTask(**{"overlap": 0.9, **options})
    if name == "code":
        return CodeTask(**options)
    raise ValueError(f"unknown task '{name}' (choose persona, persona_collinear or code)")


def rollout_prompt(task, problem, m, parents=None, goal=None):
    """The full prompt text. It states m, the number of answers wanted, so one warm-start model
    serves both the single-answer methods (m = 1) and the set methods (m > 1)."""
    return f"<|bos|>{m}|{task.prompt(problem, parents=parents, goal=goal)}<|answer|>"


def rollout_text(answers):
    """Answers -> the completion text the policy should write: a1<|sep|>a2<|sep|>a3<|eos|>."""
    return "<|sep|>".join(answers) + "<|eos|>"
