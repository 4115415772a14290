"""tools/wasted_answers.py counts what the README reports about VPO's wasted answer slots."""

import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools"))
from wasted_answers import wasted  # noqa: E402

from rewards import make_task  # noqa: E402


def test_repeats_and_zero_scores_are_counted_per_rollout():
    task = make_task("code")
    problem = task.problems("heldout", 1, random.Random(0))[0]
    good = task.hypotheses(problem)[0]
    from rewards import _program_text
    text = _program_text(*good)
    spaced = text.replace(" ", "  ")  # the same program: a repeat
    # rollout 1: good, its respaced copy, garbage; rollout 2: the same good answer again is NOT a
    # repeat (a new rollout), then two garbage answers (the second garbage repeats the first)
    pool = [text, spaced, "(((", text, "nope", "nope"]
    out = wasted(task, [problem], [pool], m=3)
    assert out == {"repeated": 2 / 6, "zero_score": 2 / 6}
