"""The tasks: exact reward values, splits, demonstrations, and rollouts parsed from any string."""

import random

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from model import Tokenizer
from rewards import CodeTask, PersonaTask, make_task
from rollouts import rollout_prompt, rollout_text, score_answers

persona = PersonaTask(num_personas=4, answer_len=12)
code = CodeTask()
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
    rows = np.array([control.reward(FAVS, "".join(rng.choice("abcdxyz") for _ in range(12)))
                     for _ in range(200)])
    corr = np.corrcoef(rows.T)
    assert corr[np.triu_indices(4, 1)].min() > 0.9
    conflicting = np.array([persona.reward(FAVS, "".join(rng.choice("abcdxyz") for _ in range(12)))
                            for _ in range(200)])
    assert np.corrcoef(conflicting.T)[np.triu_indices(4, 1)].max() < 0.2


def test_code_reward_per_test():
    problem = (4, ("plus", 3), ("const", 3), 1, 6)  # f = (if (< x 4) (+ x 3) 3), shown at 1 and 6
    assert code.tests(problem) == [0, 2, 3, 4, 5, 7, 8, 9]
    assert code.prompt(problem) == "1->4 6->3"
    assert (code.reward(problem, "(if (< x 4) (+ x 3) 3)") == 1).all()
    # threshold 5 instead of 4: only x=4 differs
    assert code.reward(problem, "(if (< x 5) (+ x 3) 3)").tolist() == [1, 1, 1, 0, 1, 1, 1, 1]
    assert code.reward(problem, "3").tolist() == [1, 0, 0, 1, 1, 1, 1, 1]  # f(0) = 0 + 3 = 3 too
    assert (code.reward(problem, "(/ 1 0)") == 0).all()
    assert (code.reward(problem, "print(1)") == 0).all()


def test_code_hypotheses_agree_with_examples_and_include_the_truth():
    rng = random.Random(0)
    for problem in code.problems("train", 50, rng):
        hyps = code.hypotheses(problem)
        assert problem[:3] in hyps
        t, a, b, x1, x2 = problem
        for h in hyps:
            from lang import run
            text = code.program_text(h)
            assert run(text, [x1, x2]) == [code.target(problem, x1), code.target(problem, x2)]


def test_splits_are_disjoint_and_fixed():
    for task in (persona, code):
        train = set(task.problems("train", 300, random.Random(0)))
        held = set(task.problems("heldout", 100, random.Random(1)))
        assert train and held and not train & held
        assert task.problems("heldout", 5, random.Random(3)) == task.problems("heldout", 5, random.Random(3))


def test_demonstrations_are_valid_format():
    rng = random.Random(0)
    for task in (persona, code):
        for problem in task.problems("train", 20, rng):
            for answer in task.demonstration(problem, 3, rng):
                assert isinstance(answer, str) and answer
    problem = code.problems("train", 1, rng)[0]
    parents = code.demo_parents(problem, rng)
    scores = [code.reward(problem, code.program_text(p)).mean() for p in parents]
    assert scores == sorted(scores)  # worst to best


def test_score_answers_drops_duplicates_and_missing():
    rows = score_answers(persona, FAVS, ["aaaa", "aaaa", "bb"], 3)
    assert np.allclose(rows, [persona.reward(FAVS, "aaaa"), [0] * 4, persona.reward(FAVS, "bb")])
    rows = score_answers(persona, FAVS, ["aaaa"], 3)
    assert (rows[1:] == 0).all()
    # the same program spaced differently is a duplicate
    problem = (4, ("plus", 3), ("const", 3), 1, 6)
    rows = score_answers(code, problem, ["(if (< x 4) (+ x 3) 3)", "(if  (< x 4)\n(+ x 3) 3)"], 2)
    assert rows[0].sum() == 8 and rows[1].sum() == 0


def test_prompt_and_completion_formats():
    assert rollout_prompt(persona, FAVS, 3) == "<|bos|>3|likes abcd<|answer|>"
    assert rollout_prompt(persona, FAVS, 1, goal=[0.5, 0.5, 0, 0]) == "<|bos|>1|likes abcd w4400<|answer|>"
    assert rollout_text(["ab", "cd"]) == "ab<|sep|>cd<|eos|>"


tok = Tokenizer()


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300), st.integers(1, 4))
def test_any_rollout_bytes_give_valid_rewards(raw, m):
    """Whatever the policy writes (any token ids), parsing and scoring never fail."""
    ids = list(raw) + [tok.sep, tok.eos][: raw[0] % 3 if raw else 0]
    answers = tok.split_answers(ids)
    for task, problem in ((persona, FAVS), (code, (4, ("plus", 3), ("const", 3), 1, 6))):
        rows = score_answers(task, problem, answers, m)
        assert rows.shape == (m, task.dim) and np.isfinite(rows).all()
        assert ((rows >= 0) & (rows <= 1)).all()


def test_make_task_rejects_unknown():
    with pytest.raises(ValueError):
        make_task("chess")
    with pytest.raises(TypeError):
        make_task("persona", colour=3)


def test_code_demonstrations_switch_early_as_often_as_asked():
    import random
    from rewards import CodeTask
    problem = (5, ("const", 1), ("const", 2), 0, 9)  # thresholds 1..9 all agree with the examples
    habit = CodeTask(noise=0.0, early_switch=1.0)
    assert set(habit.demonstration(problem, 50, random.Random(0))) == {"(if (< x 1) 1 2)"}
    open_minded = CodeTask(noise=0.0, early_switch=0.0)
    assert len(set(open_minded.demonstration(problem, 200, random.Random(0)))) == 9
