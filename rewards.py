"""
The persona tasks: a reward VECTOR in [0,1]^D per answer, and a fixed scalarization (the mean) that
GRPO trains on and best@k reports. tasks.py says what every task offers; this is the simplest one.

PersonaTask: D personas each have a favorite letter, given in the prompt ("likes qxmz"). An answer
is a word of at most L lowercase letters, and persona d scores it
    r_d = sqrt( (c_d + overlap * sum_{e != d} c_e) / L )
where c_d counts the letters persona d likes. Letters are a shared budget, so no word pleases all.
The square root bends the Pareto front outwards, so every mix of letter counts is the best answer
for SOME weighting (with linear scores only the D pure words would matter). `overlap` near 1 makes
the personas nearly collinear: the control task (persona_collinear), on which VPO should not help.

Warm-start demonstrations are deliberately imperfect (noise letters): diverse, but not already on
the Pareto front, or RL has nothing to show.

Deliberately left out: parents (only the code task shows them), natural-language tasks, learned
reward models, anything loaded from disk.
"""

import random

import numpy as np

from tasks import Task, checked_weights, format_goal, held_out, weighted_sum

LETTERS = "abcdefghijklmnopqrstuvwxyz"


class PersonaTask(Task):
    """D personas, each with a favorite letter; an answer is one word."""

    def __init__(
        self,
        num_personas=4,
        answer_len=12,
        overlap=0.0,
        noise=0.25,
        heldout_fraction=0.25,
        reward_weights=(),
    ):
        if not 1 <= num_personas <= 26:
            raise ValueError("num_personas must be in 1..26")
        if not 0.0 <= overlap <= 1.0:
            raise ValueError("overlap must be in [0, 1]")
        self.dim = num_personas
        self.answer_len = answer_len
        self.overlap = overlap
        # share of demonstration letters that please nobody (why 0.25: docs/RESULTS.md)
        self.noise = noise
        self.heldout_fraction = heldout_fraction
        self.max_answer_tokens = answer_len + 1  # room for one separator/end token
        self.reward_weights = checked_weights(reward_weights, self.dim)  # None: the mean

    def problems(self, split, n, rng: random.Random):
        """n problems (tuples of D distinct favorite letters) from 'train' or 'heldout'."""
        out = []
        while len(out) < n:
            favs = tuple(rng.sample(LETTERS, self.dim))
            if held_out("".join(favs), self.heldout_fraction) == (split == "heldout"):
                out.append(favs)
        return out

    def prompt(self, problem, parents=None, goal=None):
        text = "likes " + "".join(problem)
        return text + (format_goal(goal) if goal is not None else "")

    def valid(self, problem, answer):
        """A word of 1..L lowercase letters."""
        return (
            isinstance(answer, str)
            and 1 <= len(answer) <= self.answer_len
            and all(c in LETTERS for c in answer)
        )

    def reward(self, problem, answer):
        """Any string -> (D,) scores in [0,1]; zero vector unless it is valid."""
        if not self.valid(problem, answer):
            return np.zeros(self.dim, dtype=np.float32)
        counts = np.array([answer.count(f) for f in problem], dtype=np.float64)
        share = (counts + self.overlap * (counts.sum() - counts)) / self.answer_len
        return np.sqrt(np.clip(share, 0.0, 1.0)).astype(np.float32)

    def scalarize(self, r):
        """The fixed scalarization GRPO trains on and best@k reports (weighted_sum). Every caller
        goes through here."""
        return weighted_sum(r, self.reward_weights)

    def answer_key(self, answer):
        return answer

    def outcome(self, problem, answer):
        """How many of each persona's favorite letter the word holds ("3,4,5,0"): all the reward
        reads of it. Invalid words are one outcome."""
        if not self.valid(problem, answer):
            return "invalid"
        return ",".join(str(answer.count(f)) for f in problem)

    def vote_key(self, problem, answer):
        """A valid word votes with its outcome (its favorite-letter counts); invalid ones cannot."""
        return self.outcome(problem, answer) if self.valid(problem, answer) else None

    def solved(self, problem, reward):
        """The word reaches the best fixed scalarization any word can (optimum_scalar)."""
        best = self.optimum_scalar()
        return float(self.scalarize(np.asarray(reward, dtype=np.float64))) >= best - 1e-6

    def optimum_scalar(self):
        """The best fixed scalarization of any word, the same for every problem. A longer word never
        scores less, so the best uses all L letters; then persona d's score depends on its own count
        alone, concavely, and giving each letter in turn to the persona it raises most is exact."""
        weights = self.reward_weights or [1.0 / self.dim] * self.dim

        def score(count):  # persona d's score with `count` of its letters, the rest others'
            share = (count + self.overlap * (self.answer_len - count)) / self.answer_len
            return np.sqrt(min(1.0, share))

        counts = [0] * self.dim
        for _ in range(self.answer_len):
            gains = [w * (score(c + 1) - score(c)) for w, c in zip(weights, counts)]
            counts[int(np.argmax(gains))] += 1
        return float(sum(w * score(c) for w, c in zip(weights, counts)))

    def demonstration(self, problem, m, rng, parents=None):
        """m words for the warm start: each letter a favorite, or with probability `noise` one
        nobody likes."""
        nobody = [c for c in LETTERS if c not in problem]

        def letter():
            return rng.choice(nobody) if rng.random() < self.noise else rng.choice(problem)

        return ["".join(letter() for _ in range(self.answer_len)) for _ in range(m)]
