"""rewards.py: the persona task's exact reward values, the tasks' splits and demonstrations, and one
scalarization for numpy and torch. The code task is codetask.py's (test_codetask.py); rollouts
parsed from any string are rollouts.py's (test_rollouts.py)."""

import random

import numpy as np
import pytest

from codetask import CodeTask
from config import make_task
from rewards import PersonaTask

persona = PersonaTask(num_personas=4, answer_len=12)


code = CodeTask()  # the default family: f = (+ (< x t1) (< x t2)) on 0..15 from three examples


# a larger family: four thresholds on 0..39, half the problems' examples in a narrow window
wide = CodeTask(thresholds=4, domain=40, window_share=0.5)


FAVS = ("a", "b", "c", "d")


def test_persona_exact_values():
    assert np.allclose(persona.reward(FAVS, "a" * 12), [1, 0, 0, 0])
    assert np.allclose(persona.reward(FAVS, "aaabbbcccddd"), [0.5] * 4)  # sqrt(3/12)
    assert np.allclose(persona.reward(FAVS, "aaa"), [0.5, 0, 0, 0])  # short answers are allowed
    # 9 a's and 3 b's: sqrt(.75), sqrt(.25)
    assert np.allclose(persona.reward(FAVS, "aaaaaaaaabbb"), [np.sqrt(0.75), 0.5, 0, 0])


def test_persona_conflict_and_curved_front():
    # no answer pleases all: the four components can't all reach 1
    assert persona.reward(FAVS, "abcdabcdabcd").sum() < 4
    # diminishing returns: a 50/50 mix beats both pure answers under the (.5,.5,0,0) weighting
    w = np.array([0.5, 0.5, 0, 0])
    assert w @ persona.reward(FAVS, "aaaaaabbbbbb") > w @ persona.reward(FAVS, "a" * 12)


@pytest.mark.parametrize("answer", ["", "A" * 5, "a" * 13, "ab c", "abc\n", "ü", "a<|sep|>"])
def test_persona_invalid_answers_get_zero(answer):
    assert (persona.reward(FAVS, answer) == 0).all()


def test_collinear_control_is_nearly_collinear():
    control = make_task("persona_collinear")
    rng = random.Random(0)
    rows = np.array(
        [
            control.reward(FAVS, "".join(rng.choice("abcdxyz") for _ in range(12)))
            for _ in range(200)
        ]
    )
    corr = np.corrcoef(rows.T)
    assert corr[np.triu_indices(4, 1)].min() > 0.9
    conflicting = np.array(
        [
            persona.reward(FAVS, "".join(rng.choice("abcdxyz") for _ in range(12)))
            for _ in range(200)
        ]
    )
    assert np.corrcoef(conflicting.T)[np.triu_indices(4, 1)].max() < 0.2


def test_splits_are_disjoint_and_fixed():
    for task in (persona, code, wide):
        train = set(task.problems("train", 300, random.Random(0)))
        held = set(task.problems("heldout", 100, random.Random(1)))
        assert train and held and not train & held
        # the problems come from the rng passed in: the same seed draws the same ones, another seed
        # others
        assert task.problems("heldout", 5, random.Random(3)) == task.problems(
            "heldout", 5, random.Random(3)
        )
        assert task.problems("heldout", 5, random.Random(3)) != task.problems(
            "heldout", 5, random.Random(4)
        )
    # values checked by hand: the side is crc32(key) % 1000 < 250 (persona key: the letters, code:
    # the tuple's
    # repr), the same on every machine whichever seed drew the problem
    # 19, 45
    assert persona.problems("heldout", 2, random.Random(3)) == [
        ("s", "c", "t", "a"),
        ("g", "w", "p", "r"),
    ]
    # 458, 486
    assert persona.problems("train", 2, random.Random(3)) == [
        ("h", "s", "r", "e"),
        ("l", "t", "p", "u"),
    ]
    # 197, 249
    assert code.problems("heldout", 2, random.Random(3)) == [(8, 14, 0, 13, 14), (7, 11, 3, 7, 11)]
    # 547, 797
    assert code.problems("train", 2, random.Random(3)) == [(8, 9, 7, 8, 9), (10, 15, 9, 10, 15)]


def test_demonstrations_are_valid_format():
    """Every demonstration passes task.valid (noise off: a noisy code demonstration ignores the
    examples on purpose), and task.valid turns down answers out of format."""
    rng = random.Random(0)
    for task in (
        persona,
        CodeTask(noise=0.0),
        CodeTask(thresholds=4, domain=40, window_share=0.5, noise=0.0),
    ):
        for problem in task.problems("train", 20, rng):
            for answer in task.demonstration(problem, 3, rng):
                assert task.valid(problem, answer), (problem, answer)
            if hasattr(task, "demo_parents"):  # children of parents, as the search asks for them
                for answer in task.demonstration(
                    problem, 3, rng, parents=task.demo_parents(problem, rng)
                ):
                    assert task.valid(problem, answer), (problem, answer)
    # answer_len 12, a..z only
    for answer in ("", "a" * 13, "abc ", "Abc", "ab1", "abé", "a<|sep|>b"):
        assert not persona.valid(FAVS, answer), answer
    # any letters: only reward reads FAVS
    assert persona.valid(FAVS, "a") and persona.valid(FAVS, "z" * 12)
    problem = (4, 9, 2, 7, 12)  # examples 2->2 7->1 12->0: thresholds in 3..7 and 8..12
    assert code.valid(problem, "(+ (< x 4) (< x 9))") and code.valid(
        problem, "(+ (< x 3)  (< x 12))"
    )
    # not a program, or one that contradicts an example (13 > 12: 12->1), or the bare edit the
    # search applies
    for answer in (
        "",
        "(+ (< x 4) (< x 9)",
        "(+ (< x 4) (< x 9)))",
        "(+ (< x 4) (< x 13))",
        "(< x 9)",
        "x",
        "2-5",
    ):
        assert not code.valid(problem, answer), answer
    problem = code.problems("train", 1, rng)[0]
    parents = code.demo_parents(problem, rng)
    scores = [code.reward(problem, code.program_text(p)).mean() for p in parents]
    assert scores == sorted(scores)  # worst to best


@pytest.mark.parametrize("name", ["persona", "code"])
def test_one_scalarization_for_numpy_and_torch(name):
    """Training, evaluation and search all score answers through task.scalarize: the mean of the
    components."""
    import torch

    task = make_task(name)
    r = np.arange(2 * 3 * task.dim, dtype=np.float32).reshape(2, 3, task.dim) / (6 * task.dim)
    assert np.allclose(task.scalarize(r), r.mean(-1))
    assert torch.allclose(task.scalarize(torch.from_numpy(r)), torch.from_numpy(r).mean(-1))
