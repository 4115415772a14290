"""
What a task is: the `Task` protocol every task declares, the optional part a task declares when its
prompts can show parent programs to improve (`ParentTask`, the code task's), and what tasks share (a
fixed held-out split, reward weights, a weighting written into a prompt).

A task hands out problems, writes a problem's prompt, scores any answer with a reward VECTOR in
[0,1]^D, collapses reward vectors to the one number GRPO trains on (`scalarize`), and writes the
imperfect demonstrations the warm start imitates. The three tasks: rewards.PersonaTask,
codetask.CodeTask, maze.MazeTask; config.make_task builds one from its config name.

Deliberately left out: abstract base classes with registration, natural-language tasks, learned
reward models, anything loaded from disk.
"""

import random
import zlib
from typing import Protocol, runtime_checkable

import numpy as np


class Task(Protocol):
    """What training, evaluation and search ask of a task. A problem is any hashable value."""

    dim: int  # D: the reward vector's components
    max_answer_tokens: int  # the longest answer, with its separator or end token

    def problems(self, split: str, n: int, rng: random.Random) -> list:
        """n problems of 'train' or 'heldout' (held_out below decides the side)."""

    def prompt(self, problem, parents=None, goal=None) -> str:
        """The prompt's text; goal: a weighting to write into it (format_goal)."""

    def reward(self, problem, answer: str) -> np.ndarray:
        """Any string -> (D,) in [0,1]; zeros unless the answer is valid."""

    def scalarize(self, r):
        """Reward vectors (..., D) -> (...): the fixed scalarization GRPO trains on and best@k
        reports."""

    def valid(self, problem, answer: str) -> bool:
        """Whether the answer is well formed for this problem."""

    def answer_key(self, answer: str) -> str:
        """Two answers with one key are the same answer (a repeat scores zero in training)."""

    def demonstration(self, problem, m: int, rng: random.Random, parents=None) -> list:
        """m answers for the warm start to imitate: diverse, imperfect."""

    def outcome(self, problem, answer: str) -> str:
        """What the verifier sees of an answer, coarser than its text: two answers with one outcome
        earn the same reward for the same reason (outcome-based exploration counts these)."""

    def solved(self, problem, reward) -> bool:
        """Whether a reward vector (D,) reaches the problem's best: every hidden test passed, or
        the task's exact optimum under its fixed scalarization."""

    def vote_key(self, problem, answer: str):
        """What an answer votes with in maj@k (metrics.majority_at_k), or None: it cannot vote."""


@runtime_checkable
class ParentTask(Task, Protocol):
    """A task whose prompt can show parent programs with their scores, so the policy serves as the
    evolutionary search's mutation operator (evolve.py). Callers test `isinstance(task,
    ParentTask)` once."""

    def num_plausible(self, problem) -> int:
        """How many programs agree with the problem's examples (the search's hard problems)."""

    def demo_parents(self, problem, rng: random.Random) -> list:
        """Parents for a demonstration or a training prompt, worst to best."""

    def scored(self, problem, programs) -> list:
        """Programs -> the (text, score) pairs a prompt shows as parents."""

    def child_program(self, answer: str, parents) -> str:
        """An answer written from parents -> the program it stands for (an edit names a parent)."""


class TrainingSet:
    """A finite training set: `size` problems drawn once, visited in epochs, each epoch in a fresh
    random order, so every problem is seen once an epoch (train.py's `train_problems`)."""

    def __init__(self, task, size, rng: random.Random):
        self.problems = task.problems("train", size, rng)
        self.rng = rng
        self.order = []  # the positions of this epoch's problems still to come, last first
        self.epoch = 0

    def next(self, n):
        """The next n problems; a new epoch starts, in a new order, when this one runs out."""
        out = []
        while len(out) < n:
            if not self.order:
                self.order = list(range(len(self.problems)))
                self.rng.shuffle(self.order)
                self.epoch += 1
            out.append(self.problems[self.order.pop()])
        return out

    def state_dict(self):
        return {"order": list(self.order), "epoch": self.epoch}

    def load_state_dict(self, state):
        self.order = list(state["order"])
        self.epoch = state["epoch"]


def held_out(key: str, fraction: float) -> bool:
    """A fixed hash split: the same problem is on the same side on every machine and seed."""
    return (zlib.crc32(key.encode()) % 1000) < fraction * 1000


def checked_weights(weights, dim):
    """A task's `reward_weights` option -> None (the mean) or D non-negative floats summing to 1,
    else ValueError."""
    if weights is None or len(weights) == 0:
        return None
    w = [float(x) for x in weights]
    if len(w) != dim:
        raise ValueError(
            f"reward_weights needs {dim} numbers (one per reward component), got {len(w)}"
        )
    if min(w) < 0 or not np.isfinite(w).all():
        raise ValueError(f"reward_weights must be finite and non-negative, got {w}")
    if abs(sum(w) - 1.0) > 1e-6:
        raise ValueError(f"reward_weights must sum to 1, got {sum(w):.6g}")
    return w


def weighted_sum(r, weights):
    """Reward vectors (..., D), numpy or torch -> (...): the mean when `weights` is None, else the
    weighted sum."""
    if weights is None:
        return r.mean(-1)
    return r @ (
        r.new_tensor(weights) if hasattr(r, "new_tensor") else np.asarray(weights, dtype=r.dtype)
    )


def format_goal(weights) -> str:
    """Goal-conditioned prompts carry the weighting as one digit per component (0..9)."""
    return " w" + "".join(str(min(9, int(round(9 * float(w))))) for w in weights)
