"""search.py: the pooled evaluation and the evolutionary search, on hand-made pools and a tiny model."""

import random

import numpy as np
import pytest
import torch

from model import GPT, GPTConfig, PRESETS, Tokenizer
from rewards import CodeTask, PersonaTask
from search import Island, evolve, k_grid, pool_metrics, solved_curve
from train import resolve_config


def test_k_grid():
    assert k_grid(30) == [1, 2, 4, 8, 16, 30]
    assert k_grid(16) == [1, 2, 4, 8, 16]
    assert k_grid(1) == [1]


def test_pool_metrics_on_a_collapsed_and_a_spread_pool():
    task = PersonaTask(num_personas=2, answer_len=4)
    collapsed = np.tile([[0.5, 0.5]], (4, 1))
    spread = np.array([[1.0, 0.0], [0.0, 1.0], [0.7, 0.7], [0.5, 0.5]])
    rewards = np.stack([collapsed, spread])  # (P=2, n=4, D=2)
    answers = [["ab"] * 4, ["aaaa", "bbbb", "aabb", "ab"]]
    weights = np.array([[1.0, 0.0], [0.0, 1.0]])
    out = pool_metrics(task, rewards, answers, [1, 4], weights)
    # fixed mean: collapsed pool .5 at every k; spread pool mean .55 at k=1, max .7 at k=4
    assert np.allclose(out["best_at_k"], [(0.5 + 0.55) / 2, (0.5 + 0.7) / 2])
    # held-out weightings (1,0) and (0,1): the spread pool reaches 1 for both at k=4
    assert np.allclose(out["heldout_weight_best_at_k"][1], (0.5 + 1.0) / 2)
    assert out["diversity"] > 0 and out["distinct_answers"] == (1 + 4) / 2
    assert out["pass_at_k"] == [0.0, 0.0]


def test_island_keeps_one_program_per_behaviour_and_the_best():
    island = Island(capacity=2)
    island.add("(if (< x 3) 1 2)", np.array([1.0, 0.0]))
    island.add("(if  (< x 3) 1 2)", np.array([1.0, 0.0]))  # same behaviour: not a new program
    assert len(island.programs) == 1
    island.add("(if (< x 4) 1 2)", np.array([1.0, 1.0]))
    island.add("(if (< x 5) 1 2)", np.array([0.0, 0.0]))  # worse than both, capacity 2: dropped
    assert [p[1] for p in island.programs] == ["(if (< x 4) 1 2)", "(if (< x 3) 1 2)"]
    parents = island.pick_parents(random.Random(0), explore=0.0)
    assert parents[-1] == "(if (< x 4) 1 2)"  # worst to best: the best is last


def test_evolve_respects_the_budget_and_reports():
    torch.manual_seed(0)
    tok = Tokenizer()
    model = GPT(GPTConfig(vocab_size=tok.vocab_size, block_size=192, **PRESETS["nano"])).eval()
    task = CodeTask()
    cfg = resolve_config(overrides=["task=code"])
    problem = task.problems("heldout", 1, random.Random(0))[0]
    result = evolve(model, tok, task, problem, 3, cfg, budget=10, num_islands=2, seed=0)
    assert result["history"][-1][0] == 10
    assert result["solved_at"] is None or 1 <= result["solved_at"] <= 10


def test_solved_curve():
    runs = [{"solved_at": 2}, {"solved_at": None}, {"solved_at": 4}, {"solved_at": 1}]
    assert solved_curve(runs, 5) == pytest.approx([0.25, 0.5, 0.5, 0.75, 0.75])


class Scripted:
    """Stands in for engine.generate: every rollout writes the same given answers, and the prompts
    it was asked to complete are recorded."""

    def __init__(self, tok, answers):
        self.tok, self.answers, self.prompts = tok, answers, []

    def __call__(self, model, prompt, prompt_mask, num_samples, max_new_tokens, eos_id, **kwargs):
        self.prompts += [self.tok.decode(p[m]) for p, m in zip(prompt, prompt_mask)]
        ids = self.tok.encode("<|sep|>".join(self.answers) + "<|eos|>")
        tokens = torch.tensor([ids] * (len(prompt) * num_samples))
        zeros = torch.zeros(tokens.shape)
        return dict(tokens=tokens, mask=torch.ones_like(tokens, dtype=torch.bool), logprobs=zeros, entropy=zeros)


def test_pool_metrics_score_a_repeat_like_its_first_copy_and_count_it_wasted(monkeypatch):
    import engine
    from search import sample_pools
    task, tok = PersonaTask(num_personas=2, answer_len=4), Tokenizer()
    problem = ("a", "b")
    fake = Scripted(tok, ["aabb", "aabb", "Z!"])  # a set with a repeat and an invalid answer
    monkeypatch.setattr(engine, "generate", fake)
    cfg = resolve_config(overrides=["task=persona"])
    rewards, answers, wasted, _, _ = sample_pools(None, tok, task, [problem], 6, 3, cfg, seed=0)
    first = task.reward(problem, "aabb")
    assert first.sum() > 0
    assert np.array_equal(rewards[0, 0], first) and np.array_equal(rewards[0, 1], first)  # as written
    assert not rewards[0, 2].any()  # invalid: zero
    assert wasted[0].tolist() == [False, True, True] * 2
    # training's scoring still zeroes the repeat: that is part of the method
    from rollouts import score_answers
    assert not score_answers(task, problem, ["aabb", "aabb", "Z!"], 3)[1].any()
    out = pool_metrics(task, rewards, answers, [1, 6], np.eye(2), wasted)
    assert out["wasted"] == pytest.approx(2 / 3)
    # the diversity of the pool as scored: rows (r, r, 0) twice; no zero row for the repeat
    r = np.abs(first).sum()
    assert out["diversity"] == pytest.approx(8 * r / 15)  # 4 copies of r, 2 zero rows: 8 of 15 pairs differ, by |r|


def test_goal_conditioned_pools_carry_a_weighting_in_every_prompt(monkeypatch):
    import engine
    from search import sample_pools
    task, tok = PersonaTask(num_personas=2, answer_len=4), Tokenizer()
    fake = Scripted(tok, ["ab"])
    monkeypatch.setattr(engine, "generate", fake)
    cfg = resolve_config(overrides=["task=persona", "algo=goal_conditioned"])
    problems = [("a", "b"), ("c", "d")]
    rewards, *_ = sample_pools(None, tok, task, problems, 5, 1, cfg, seed=0, goal_conditioned=True)
    assert rewards.shape == (2, 5, 2) and len(fake.prompts) == 10
    assert all(" w" in p for p in fake.prompts)  # every rollout's prompt holds a weighting
    goals = {p.split(" w")[1][:2] for p in fake.prompts}
    assert len(goals) > 3  # one per rollout, not one per pool
    fake.prompts.clear()
    sample_pools(None, tok, task, problems, 5, 1, cfg, seed=0)
    assert not any(" w" in p for p in fake.prompts)  # other methods' prompts carry none


def test_evolve_counts_invalid_and_improving_children(monkeypatch):
    import engine
    task, tok = CodeTask(), Tokenizer()
    problem = task.problems("heldout", 1, random.Random(0))[0]
    truth = task.program_text(problem[:task.k])
    worse = next(task.program_text(h) for h in task.hypotheses(problem) if task.program_text(h) != truth)
    assert task.reward(problem, worse).mean() < 1.0
    rounds = [Scripted(tok, [worse, worse, "Z!"]), Scripted(tok, [truth, "Z!", worse])]
    calls = iter(rounds)
    monkeypatch.setattr(engine, "generate", lambda *a, **k: next(calls)(*a, **k))
    cfg = resolve_config(overrides=["task=code"])
    result = evolve(None, tok, task, problem, 3, cfg, budget=12, num_islands=2, seed=0)
    # round 1 has no parents; round 2's 2 islands x 3 children: 2 invalid, 2 beat their best parent
    assert result["mutations"] == {"children": 6, "invalid": 2, "improved": 2}
    assert result["solved_at"] == 7
