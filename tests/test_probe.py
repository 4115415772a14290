"""probes/probe_learning.py: a pool's numbers by hand, from a scripted policy, and its gaps closed."""

import os
import sys

import numpy as np
import pytest
import torch

from model import Tokenizer
from codetask import CodeTask
import train
from train import resolve_config

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "probes"))
from probe_learning import demo_numbers, gaps, placements, pool_numbers  # noqa: E402

PROBLEM = (4, 9, 2, 7, 12)  # f = (+ (< x 4) (< x 9)), shown at 2, 7, 12: t1 in 3..7, t2 in 8..12
RIGHT, CLOSE = "(+ (< x 4) (< x 9))", "(+ (< x 5) (< x 11))"  # CLOSE fails x = 4, 9, 10


def scripted(tok, answers):
    """Stands in for engine.generate: every rollout writes the same answers."""
    def generate(model, prompt, prompt_mask, num_samples, max_new_tokens, eos_id, **kwargs):
        tokens = torch.tensor([tok.encode("<|sep|>".join(answers) + "<|eos|>")] * (len(prompt) * num_samples))
        zeros = torch.zeros(tokens.shape)
        return dict(tokens=tokens, mask=torch.ones_like(tokens, dtype=torch.bool), logprobs=zeros, entropy=zeros)
    return generate


def test_pool_numbers_of_a_scripted_policy(monkeypatch):
    import engine
    task, tok = CodeTask(), Tokenizer()
    # every rollout: the truth, a repeat of it, an answer contradicting the example 7->1 (t2 = 7)
    monkeypatch.setattr(engine, "generate", scripted(tok, [RIGHT, RIGHT, "(+ (< x 4) (< x 7))"]))
    w = np.array([[1.0] + [0.0] * 12, [0.0] * 12 + [1.0]])
    out = pool_numbers(task, None, tok, resolve_config(overrides=["task=code"]), [PROBLEM], 6, 3, w)
    assert out["valid"] == pytest.approx(2 / 3) and out["repeats"] == pytest.approx(1 / 3)
    assert out["malformed"] == 0.0  # the invalid answer parses; it contradicts an example
    assert out["mean_reward"] == pytest.approx(2 / 3)  # the repeat scores as written, the invalid 0
    assert out["set_score"] == 1.0 and out["pass_at_k"] == pytest.approx([2 / 3, 14 / 15, 1.0, 1.0])
    assert out["valid_by_place"] == [1.0, 1.0, 0.0]  # the third place is the invalid one in every rollout
    assert out["misplaced"] == {"other gap": pytest.approx(1 / 6), "outside": 0.0}  # 2 of 12 thresholds
    assert out["in_gap_by_width"]["5-9"] == pytest.approx(5 / 6) and np.isnan(out["in_gap_by_width"]["1"])
    assert out["varied"] == {"after example": 0.0, "in gap": pytest.approx(5 / 6), "other gap": pytest.approx(1 / 6),
                             "outside": 0.0}
    monkeypatch.setattr(engine, "generate", scripted(tok, [CLOSE]))
    out = pool_numbers(task, None, tok, resolve_config(overrides=["task=code"]), [PROBLEM], 3, 1, w)
    assert out["valid"] == 1.0 and out["repeats"] == 0.0 and out["mean_reward"] == pytest.approx(10 / 13)
    assert out["pass_at_k"] == [0.0, 0.0, 0.0] and out["best_at_k"] == pytest.approx([10 / 13] * 3)
    monkeypatch.setattr(engine, "generate", scripted(tok, ["(+ (< x 4)"]))
    out = pool_numbers(task, None, tok, resolve_config(overrides=["task=code"]), [PROBLEM], 3, 1, w)
    assert out["malformed"] == 1.0 and out["valid"] == 0.0 and out["mean_reward"] == 0.0


def test_demo_numbers_score_the_demonstrator_like_a_policy():
    """The demonstrator's pool: without noise every demonstration agrees with the examples, the m answers
    of a set differ where the gaps allow, and each is scored by task.reward as written."""
    task = CodeTask(noise=0.0)
    w = np.full((4, task.dim), 1.0 / task.dim)
    out = demo_numbers(task, [PROBLEM], 6, 3, w)
    assert out["valid"] == 1.0 and out["repeats"] == 0.0 and out["valid_by_place"] == [1.0, 1.0, 1.0]
    # RIGHT's gaps (3..7, 8..12) leave 25 programs; every one passes a share of the 13 hidden tests
    plausible = [task.scalarize(task.reward(PROBLEM, task.program_text(h))) for h in task.hypotheses(PROBLEM)]
    assert min(plausible) <= out["mean_reward"] <= max(plausible) and out["best_at_k"][0] == pytest.approx(out["mean_reward"])
    noisy = demo_numbers(CodeTask(noise=1.0), [PROBLEM], 30, 3, w)  # every demonstration ignores the examples
    assert noisy["valid"] < 0.5


def test_gaps_are_shares_of_the_warm_starts_distance_to_the_optimum():
    warm = {"valid": 0.6, "mean_reward": 0.5, "set_score": 0.7, "best_at_k": [0.5, 0.8], "pass_at_k": [0.1, 0.3]}
    run = {"valid": 0.9, "mean_reward": 0.6, "set_score": 0.7, "best_at_k": [0.6, 0.9], "pass_at_k": [0.1, 0.2]}
    optimum = {"best_at_1": 0.9, "set_score": 0.9, "best_at_k": [0.9, 1.0], "pass_at_k": [0.2, 0.5]}
    out = gaps(run, warm, optimum)
    assert out["valid"] == pytest.approx(0.75) and out["mean_reward"] == pytest.approx(0.25)
    assert out["set_score"] == 0.0 and out["best_at_k"] == pytest.approx([0.25, 0.5])
    assert out["pass_at_k"] == pytest.approx([0.0, -0.5])


def test_search_ceiling_with_the_demonstrator_solves_what_sampling_does_not(monkeypatch):
    """probes/search_ceiling.py: with the task's own demonstrator as mutation operator, every search
    on a wide-gap problem finds the truth within the budget; sampling the demonstrator alone does not."""
    import random
    import search
    from search_ceiling import demonstrator_sampler
    task = CodeTask(thresholds=3, domain=64, window_share=0.5, fixed_width=True, noise=0.0)
    problems = search.search_problems(task, "train", 4, 2000, seed=0)
    monkeypatch.setattr(search, "_sample", demonstrator_sampler(task, random.Random(0)))
    out = search.run_searches(None, None, task, problems, 1, resolve_config(overrides=["task=code"]),
                              train.EVALUATION, 0, 1)
    assert out["solved"] == 4 and out["mutations"]["invalid"] == 0 and out["sampling_solved"] <= 1


def test_placements_tell_a_threshold_in_another_gap_from_one_outside_the_examples():
    task = CodeTask()  # PROBLEM's gaps: t1 in 3..7, t2 in 8..12 (both 5 wide); examples at 2, 7, 12
    assert placements(task, PROBLEM, RIGHT) == [(5, "in gap"), (5, "in gap")]
    assert placements(task, PROBLEM, "(+ (< x 3) (< x 8))") == [(5, "after example"), (5, "after example")]
    assert placements(task, PROBLEM, "(+ (< x 4) (< x 7))") == [(5, "in gap"), (5, "other gap")]  # t2 in t1's gap
    assert placements(task, PROBLEM, "(+ (< x 2) (< x 9))") == [(5, "outside"), (5, "in gap")]  # t1 at an example
    assert placements(task, PROBLEM, "(+ (< x 9) (< x 13))") == [(5, "other gap"), (5, "outside")]
    assert placements(task, PROBLEM, "(< x 4)") == [] and placements(task, PROBLEM, "(+ (< x 4)") == []
    assert placements(task, (3, 4, 2, 3, 12), "(+ (< x 3) (< x 9))") == [(1, "after example"), (9, "in gap")]
