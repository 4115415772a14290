"""evaluate.py and evolve.py (search.py's command line runs them): the pooled evaluation and the
evolutionary search, on hand-made pools and a tiny model."""

import random

import numpy as np
import pytest
import torch

from codetask import CodeTask
from evaluate import k_grid, pool_metrics
from evolve import (
    Island,
    evolve_many,
    run_searches,
    sampling_control,
    search_problems,
    solved_curve,
)
from model import GPT, PRESETS, GPTConfig, Tokenizer
from policy import Policy
from rewards import PersonaTask
from train import EVALUATION as SETTINGS
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


def test_pool_metrics_vote_among_programs_that_pass_the_examples():
    """maj@k on a code pool by hand: three copies of one wrong function (two spellings) outvote two
    right programs, and five programs that contradict an example never vote."""
    task = CodeTask()
    problem = task.problems("heldout", 1, random.Random(5))[0]
    t1, t2 = problem[:2]
    wrong = t2 + 1 if t2 + 1 <= problem[4] else t2 - 1  # another threshold inside its gap
    assert wrong > problem[3] and task.valid(problem, task.program_text((t1, wrong)))
    answers = [
        task.program_text((t1, wrong)),
        task.program_text((t1, wrong)),
        f"(+ (< x {wrong}) (< x {t1}))",  # the same function, written the other way round
        task.program_text((t1, t2)),
        task.program_text((t1, t2)),
    ] + ["(< x 0)"] * 5  # outputs 0 at the first example, whose answer is 2: no vote
    rewards = np.stack([task.reward(problem, a) for a in answers])[None]  # (1, 10, D)
    weights = np.eye(task.dim)[:2]
    ks = [1, 10]
    plain = pool_metrics(task, rewards, [answers], ks, weights)
    out = pool_metrics(task, rewards, [answers], ks, weights, problems=[problem])
    scalar = task.scalarize(rewards[0])
    # k=1 picks one answer uniformly; k=10 picks the wrong function, which fails one hidden test
    assert out["maj_at_k"] == pytest.approx([scalar.mean(), scalar[0]], abs=1e-4)
    assert scalar[0] == pytest.approx(1 - 1 / task.dim) and scalar[3] == 1.0
    assert out["maj_pass_at_k"] == pytest.approx([0.2, 0.0]) and out["maj_at_k_se"] == [0, 0]
    assert out["per_problem"]["maj"] == [round(float(scalar[0]), 4)]
    # the metrics that were there before are untouched by the vote
    kept = {key: out[key] for key in plain}
    kept["per_problem"] = {key: out["per_problem"][key] for key in plain["per_problem"]}
    assert kept == plain and set(out) - set(plain) == {"maj_at_k", "maj_at_k_se", "maj_pass_at_k"}


def test_island_keeps_one_program_per_behavior_and_the_best():
    island = Island(capacity=2)
    island.add("(if (< x 3) 1 2)", np.array([1.0, 0.0]), 0.5)
    island.add("(if  (< x 3) 1 2)", np.array([1.0, 0.0]), 0.5)  # same behavior: not a new program
    assert len(island.programs) == 1
    island.add("(if (< x 4) 1 2)", np.array([1.0, 1.0]), 1.0)
    # worse than both, capacity 2: dropped
    island.add("(if (< x 5) 1 2)", np.array([0.0, 0.0]), 0.0)
    assert [p[1] for p in island.programs] == ["(if (< x 4) 1 2)", "(if (< x 3) 1 2)"]
    parents = island.pick_parents(random.Random(0), explore=0.0)
    # worst to best, with scores
    assert parents == [("(if (< x 3) 1 2)", 0.5), ("(if (< x 4) 1 2)", 1.0)]


def code_policy(tok, m, model=None, overrides=()):
    """A code run's policy (its sampling settings, seeded) asking for m answers a rollout; model
    None: engine.generate is a stand-in that never reads it."""
    cfg = resolve_config(overrides=["task=code", *overrides])
    return Policy.from_config(model, tok, cfg, "cpu", answers_per_rollout=m)


def evolve(policy, task, problem, budget, num_islands, seed=0):
    """One search: evolve_many on one problem, with SETTINGS but this budget and these islands;
    each call asks the policy for its m children."""
    settings = dict(SETTINGS, evo_budget=budget, evo_islands=num_islands)
    return evolve_many(policy, task, [problem], settings, seed)[0]


def test_evolve_respects_the_budget_and_reports():
    torch.manual_seed(0)
    tok = Tokenizer()
    model = GPT(GPTConfig(vocab_size=tok.vocab_size, block_size=192, **PRESETS["nano"])).eval()
    task = CodeTask()
    problem = task.problems("heldout", 1, random.Random(0))[0]
    result = evolve(code_policy(tok, 3, model), task, problem, budget=10, num_islands=2, seed=0)
    # an untrained model solves nothing
    assert result["solved_at"] is None and result["candidates"] == 10


def test_solved_curve():
    runs = [{"solved_at": 2}, {"solved_at": None}, {"solved_at": 4}, {"solved_at": 1}]
    assert solved_curve(runs, 5) == pytest.approx([0.25, 0.5, 0.5, 0.75, 0.75])


class Scripted:
    """Stands in for engine.generate: every rollout writes the same given answers, and the prompts
    it was asked to complete are recorded."""

    def __init__(self, tok, answers):
        self.tok, self.answers, self.prompts = tok, answers, []

    def __call__(self, model, prompt, prompt_mask, num_samples, max_new_tokens, decoding, **kwargs):
        self.prompts += [self.tok.decode(p[m]) for p, m in zip(prompt, prompt_mask)]
        ids = self.tok.encode("<|sep|>".join(self.answers) + "<|eos|>")
        tokens = torch.tensor([ids] * (len(prompt) * num_samples))
        zeros = torch.zeros(tokens.shape)
        return dict(
            tokens=tokens,
            mask=torch.ones_like(tokens, dtype=torch.bool),
            logprobs=zeros,
            entropy=zeros,
        )


def test_pool_metrics_score_a_repeat_like_its_first_copy_and_count_it_wasted(monkeypatch):
    import engine
    from evaluate import sample_pools

    task, tok = PersonaTask(num_personas=2, answer_len=4), Tokenizer()
    problem = ("a", "b")
    fake = Scripted(tok, ["aabb", "aabb", "Z!"])  # a set with a repeat and an invalid answer
    monkeypatch.setattr(engine, "generate", fake)
    cfg = resolve_config(overrides=["task=persona"])
    policy = Policy.from_config(None, tok, cfg, "cpu", answers_per_rollout=3)
    rewards, answers, wasted, _, _ = sample_pools(policy, task, [problem], 6, seed=0)
    first = task.reward(problem, "aabb")
    assert first.sum() > 0
    # as written
    assert np.array_equal(rewards[0, 0], first) and np.array_equal(rewards[0, 1], first)
    assert not rewards[0, 2].any()  # invalid: zero
    assert wasted[0].tolist() == [False, True, True] * 2
    # training's scoring still zeroes the repeat: that is part of the method
    from rollouts import score_answers

    assert not score_answers(task, problem, ["aabb", "aabb", "Z!"], 3)[1].any()
    out = pool_metrics(task, rewards, answers, [1, 6], np.eye(2), wasted)
    assert out["wasted"] == pytest.approx(2 / 3)
    # the diversity of the pool as scored: rows (r, r, 0) twice; no zero row for the repeat
    r = np.abs(first).sum()
    # 4 copies of r, 2 zero rows: 8 of 15 pairs differ, by |r|
    assert out["diversity"] == pytest.approx(8 * r / 15)


def test_goal_conditioned_pools_carry_a_weighting_in_every_prompt(monkeypatch):
    import engine
    from evaluate import sample_pools

    task, tok = PersonaTask(num_personas=2, answer_len=4), Tokenizer()
    fake = Scripted(tok, ["ab"])
    monkeypatch.setattr(engine, "generate", fake)
    cfg = resolve_config(overrides=["task=persona", "algo=goal_conditioned"])
    policy = Policy.from_config(None, tok, cfg, "cpu", answers_per_rollout=1)
    assert policy.goal_conditioned  # the goal_conditioned baseline's policy
    problems = [("a", "b"), ("c", "d")]
    rewards, *_ = sample_pools(policy, task, problems, 5, seed=0)
    assert rewards.shape == (2, 5, 2) and len(fake.prompts) == 10
    assert all(" w" in p for p in fake.prompts)  # every rollout's prompt holds a weighting
    goals = {p.split(" w")[1][:2] for p in fake.prompts}
    assert len(goals) > 3  # one per rollout, not one per pool
    fake.prompts.clear()
    plain = Policy.from_config(None, tok, dict(cfg, algo="grpo"), "cpu", answers_per_rollout=1)
    sample_pools(plain, task, problems, 5, seed=0)
    assert fake.prompts and not any(" w" in p for p in fake.prompts)  # other methods' carry none


class PerRow(Scripted):
    """Like Scripted, but each rollout's answers come from answers(prompt text, sample index)."""

    def __call__(self, model, prompt, prompt_mask, num_samples, max_new_tokens, decoding, **kwargs):
        self.num_samples = num_samples
        texts = [self.tok.decode(p[m]) for p, m in zip(prompt, prompt_mask)]
        self.prompts += texts
        rows = [
            self.tok.encode("<|sep|>".join(self.answers(t, g)) + "<|eos|>")
            for t in texts
            for g in range(num_samples)
        ]
        width = max(map(len, rows))
        tokens = torch.tensor([r + [self.tok.eos] * (width - len(r)) for r in rows])
        mask = torch.tensor([[j < len(r) for j in range(width)] for r in rows])
        zeros = torch.zeros(tokens.shape)
        return dict(tokens=tokens, mask=mask, logprobs=zeros, entropy=zeros)


PROBLEM = (4, 9, 2, 7, 12)  # f = (+ (< x 4) (< x 9)), shown at 2, 7, 12: 13 hidden tests
# pass 13, 10, 12
TRUTH, WORSE, BETTER = "(+ (< x 4) (< x 9))", "(+ (< x 5) (< x 11))", "(+ (< x 4) (< x 10))"


def test_evolve_counts_invalid_and_improving_children(monkeypatch):
    import engine

    task, tok = CodeTask(), Tokenizer()
    rounds = [Scripted(tok, [WORSE, WORSE, "Z!"]), Scripted(tok, ["Z!", BETTER, TRUTH])]
    calls = iter(rounds)
    monkeypatch.setattr(engine, "generate", lambda *a, **k: next(calls)(*a, **k))
    result = evolve(code_policy(tok, 3), task, PROBLEM, budget=12, num_islands=2, seed=0)
    # round 1: no parents, 6 candidates; round 2, island 1: invalid, better than WORSE, the truth
    # (solved);
    # island 2's children are never counted: the search stopped at its solution
    assert result["mutations"] == {"children": 3, "invalid": 1, "improved": 2}
    assert result["solved_at"] == 9 and result["candidates"] == 9 and result["best"] == TRUTH
    assert (
        "from" not in rounds[0].prompts[0] and f"from {WORSE} :10<|answer|>" in rounds[1].prompts[0]
    )


def test_a_childs_prompt_shows_its_parents_with_their_scores(monkeypatch):
    import engine

    task, tok = CodeTask(), Tokenizer()
    rounds = [Scripted(tok, [WORSE]), Scripted(tok, [BETTER]), Scripted(tok, ["Z!"])]
    calls = iter(rounds)
    monkeypatch.setattr(engine, "generate", lambda *a, **k: next(calls)(*a, **k))
    evolve(code_policy(tok, 1), task, PROBLEM, budget=6, num_islands=2, seed=0)
    # both islands hold WORSE (10 of 13 hidden tests) and BETTER (12): shown worst to best, with
    # scores
    assert (
        rounds[2].prompts
        == [f"<|bos|>1|2->2 7->1 12->0 from {WORSE} :10 ; {BETTER} :12<|answer|>"] * 2
    )


def test_children_written_as_edits_are_the_best_parents_programs_with_one_threshold_replaced(
    monkeypatch,
):
    import engine

    task, tok = CodeTask(edits=True), Tokenizer()
    # round 1 (plain prompts) writes WORSE = (5, 11); then edits of the best parent, one threshold
    # each: 2-1 gives (5, 10), 1-1 gives (4, 10) = BETTER, 2-1 gives (4, 9) = TRUTH
    rounds = [
        Scripted(tok, [WORSE]),
        Scripted(tok, ["2-1"]),
        Scripted(tok, ["1-1"]),
        Scripted(tok, ["2-1"]),
    ]
    calls = iter(rounds)
    monkeypatch.setattr(engine, "generate", lambda *a, **k: next(calls)(*a, **k))
    # the best is always the parent
    settings = dict(SETTINGS, evo_budget=20, evo_islands=1, evo_explore=0.0)
    result = evolve_many(code_policy(tok, 1), task, [PROBLEM], settings, seed=0)[0]
    assert result["solved_at"] == 4 and result["best"] == TRUTH
    assert result["mutations"] == {"children": 3, "invalid": 0, "improved": 3}
    assert rounds[3].prompts[0].endswith(f"; {BETTER} :12<|answer|>")


def test_an_edit_naming_no_threshold_of_the_parent_is_an_invalid_child(monkeypatch):
    import engine

    task, tok = CodeTask(edits=True), Tokenizer()
    rounds = [Scripted(tok, [WORSE]), Scripted(tok, ["3-1"]), Scripted(tok, [TRUTH])]
    calls = iter(rounds)
    monkeypatch.setattr(engine, "generate", lambda *a, **k: next(calls)(*a, **k))
    result = evolve(code_policy(tok, 1), task, PROBLEM, budget=3, num_islands=1, seed=0)
    # WORSE has no third threshold: the child stays "3-1", which is no program; a whole program is
    # still read as itself
    assert (
        result["mutations"] == {"children": 2, "invalid": 1, "improved": 1}
        and result["solved_at"] == 3
    )


def test_a_search_stops_counting_at_the_budget(monkeypatch):
    import engine

    task, tok = CodeTask(), Tokenizer()
    fake = Scripted(tok, [WORSE, "Z!", BETTER])
    monkeypatch.setattr(engine, "generate", fake)
    result = evolve(code_policy(tok, 3), task, PROBLEM, budget=10, num_islands=2, seed=0)
    # 2 rounds of 2 islands x 3 children = 12 written; the 11th and 12th are not counted
    assert len(fake.prompts) == 4 and result["candidates"] == 10 and result["solved_at"] is None
    # round 2 (parents: BETTER, the best of round 1): island 1 writes WORSE, Z!, BETTER, island 2
    # only WORSE
    assert result["mutations"] == {"children": 4, "invalid": 1, "improved": 0}


def test_the_sampling_control_spends_exactly_the_budget(monkeypatch):
    import engine

    task, tok = CodeTask(), Tokenizer()
    # the same examples, t1 = 5: TRUTH fails it, "(+ (< x 5) (< x 9))" solves it
    other = (5, 9, 2, 7, 12)
    late = PerRow(tok, lambda prompt, g: [WORSE, WORSE, TRUTH] if g == 2 else [WORSE] * 3)
    monkeypatch.setattr(engine, "generate", late)
    settings = dict(SETTINGS, evo_budget=7)
    sets_of_3, single_answers = code_policy(tok, 3), code_policy(tok, 1)
    # budget 7 in rollouts of 3: 3 rollouts, 9 answers written, the first 7 looked at
    assert sampling_control(sets_of_3, task, [PROBLEM, other], settings, seed=0) == [None, None]
    assert late.num_samples == 3
    on_time = PerRow(tok, lambda prompt, g: [TRUTH, WORSE, WORSE] if g == 2 else [WORSE] * 3)
    monkeypatch.setattr(engine, "generate", on_time)
    assert sampling_control(sets_of_3, task, [PROBLEM, other], settings, seed=0) == [7, None]
    single = PerRow(tok, lambda prompt, g: [TRUTH] if g == 6 else [WORSE])
    monkeypatch.setattr(engine, "generate", single)
    assert sampling_control(single_answers, task, [PROBLEM], settings, seed=0) == [7]
    # plain task prompts
    assert single.num_samples == 7 and all("from" not in p for p in single.prompts)


def test_run_searches_reports_search_and_control_side_by_side(monkeypatch):
    import engine

    task, tok = CodeTask(), Tokenizer()
    other = (3, 11, 2, 7, 12)  # the same examples: only PROBLEM's truth is written, from parents
    fake = PerRow(tok, lambda prompt, g: [TRUTH] if " from " in prompt else [WORSE])
    monkeypatch.setattr(engine, "generate", fake)
    settings = dict(SETTINGS, evo_budget=8, evo_islands=2)
    out = run_searches(code_policy(tok, 1), task, [PROBLEM, other], settings, 0, 1)
    assert (
        out["searches"] == 2
        and out["budget"] == 8
        and out["solved"] == 1
        and out["sampling_solved"] == 0
    )
    assert out["solved_problems"] == [repr(PROBLEM)] and len(out["solved_curve"]) == 8
    # 2 seeds, then the first child solves
    assert out["solved_curve"][1] == 0 and out["solved_curve"][2] == 0.5
    assert [r["candidates"] for r in out["runs"]] == [3, 8] and out["sampling_curve"] == [0.0] * 8
    # the other search's children: 6 from parents, none invalid, none better (all WORSE from a WORSE
    # parent)
    assert out["mutations"] == {"children": 1 + 6, "invalid": 0, "improved": 1}
    with pytest.raises(ValueError, match="children_per_call"):  # neither 1 nor the policy's m
        run_searches(code_policy(tok, 3), task, [PROBLEM], settings, seed=0, children_per_call=2)
    with pytest.raises(TypeError, match="shows no parents"):  # nothing to search with
        run_searches(code_policy(tok, 1), PersonaTask(), [("a", "b")], settings, 0, 1)


def parsed_command_line(monkeypatch, search_module, argv):
    """The arguments search_module.main parses from `argv`, stopped before it runs anything."""
    import argparse

    class Parsed(Exception):
        pass

    parse_args = argparse.ArgumentParser.parse_args

    def parse_and_stop(parser, *args, **kwargs):
        raise Parsed(parse_args(parser, *args, **kwargs))

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_and_stop)
    monkeypatch.setattr("sys.argv", argv)
    with pytest.raises(Parsed) as parsed:
        search_module.main()
    return parsed.value.args[0]


def test_the_evaluation_settings_have_one_home(monkeypatch):
    """config.EVALUATION (merged into train.DEFAULTS) is the one place a value is written:
    the evaluation's function defaults and search.py's command-line defaults follow it (a default
    written out as a number, even at today's value, would not), and the run folder leaves exactly
    these keys out."""
    import importlib
    import inspect

    import config
    import evaluate
    import evolve
    import figures
    import search
    import train
    from runfiles import EVAL_KEYS

    assert tuple(config.EVALUATION) == EVAL_KEYS and set(EVAL_KEYS) <= set(train.DEFAULTS)
    assert (
        SETTINGS["evo_budget"] == 200
        and SETTINGS["evo_problems"] == 64
        and SETTINGS["pool_n"] == 30
    )
    assert SETTINGS["evo_temperature"] == 0.7 and SETTINGS["evo_top_p"] == 0.95
    # no second table, in the command line or the modules it runs
    assert not any(
        isinstance(value, dict) and "pool_n" in value and value is not config.EVALUATION
        for module in (search, evaluate, evolve, figures)
        for value in vars(module).values()
    )
    for key, value in (
        ("pool_n", 1030),
        ("pool_problems", 1040),
        ("evo_children_per_call", 1001),
        ("heldout_weightings", 1064),
    ):
        monkeypatch.setitem(config.EVALUATION, key, value)
    edited_evaluate = importlib.reload(evaluate)
    edited = importlib.reload(search)  # after evaluate: it imports evaluate's functions
    try:
        # None: read from config.EVALUATION when called, never written out as a number
        for function in (edited_evaluate.evaluate_checkpoint, edited_evaluate.evaluate_policy):
            weightings = inspect.signature(function).parameters["num_heldout_weights"]
            assert weightings.default is None, function.__name__
        # evaluate_checkpoint hands its None on to evaluate_policy, which reads the setting
        source = inspect.getsource(edited_evaluate.evaluate_policy)
        assert 'EVALUATION["heldout_weightings"]' in source
        args = parsed_command_line(monkeypatch, edited, ["search.py", "--checkpoints", "ckpt.pt"])
        # --n, --problems and --children-per-call default to the settings as --set leaves them
        assert (args.n, args.problems, args.children_per_call) == (None, None, None)
    finally:
        monkeypatch.undo()
        importlib.reload(evaluate)
        importlib.reload(search)


def test_search_problems_refuse_a_size_the_family_never_reaches():
    from codetask import CodeTask
    from evolve import search_problems

    small = CodeTask()  # at most 7 x 8 = 56 plausible programs
    with pytest.raises(ValueError, match="evo_min_plausible"):
        search_problems(small, "heldout", 4, 57, seed=0, max_draws=2000)
    big = search_problems(small, "heldout", 4, 30, seed=0)
    assert len(big) == 4 and all(small.num_plausible(p) >= 30 for p in big)


def test_only_a_task_that_shows_parents_is_searched():
    """The persona task has no programs to mutate: one clear line, before any problem is drawn."""
    with pytest.raises(ValueError, match="shows no parents"):
        search_problems(PersonaTask(), "heldout", 1, min_plausible=1, seed=0)
    assert len(search_problems(CodeTask(), "heldout", 2, min_plausible=1, seed=0)) == 2
