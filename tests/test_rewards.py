"""The tasks: exact reward values, splits, demonstrations, and rollouts parsed from any string."""

import math
import random
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import lang
from model import Tokenizer
from codetask import CodeTask
from config import make_task
from rewards import PersonaTask
from rollouts import rollout_prompt, rollout_text, score_answers

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
    rows = np.array([control.reward(FAVS, "".join(rng.choice("abcdxyz") for _ in range(12)))
                     for _ in range(200)])
    corr = np.corrcoef(rows.T)
    assert corr[np.triu_indices(4, 1)].min() > 0.9
    conflicting = np.array([persona.reward(FAVS, "".join(rng.choice("abcdxyz") for _ in range(12)))
                            for _ in range(200)])
    assert np.corrcoef(conflicting.T)[np.triu_indices(4, 1)].max() < 0.2


def test_code_reward_per_test():
    problem = (4, 9, 2, 7, 12)  # f = (+ (< x 4) (< x 9)): 2 below 4, 1 on 4..8, 0 from 9; shown at 2, 7, 12
    assert code.dim == 13 and code.tests(problem) == [0, 1, 3, 4, 5, 6, 8, 9, 10, 11, 13, 14, 15]
    assert code.prompt(problem) == "2->2 7->1 12->0"
    assert code.program_text(problem[:2]) == "(+ (< x 4) (< x 9))"
    assert (code.reward(problem, "(+ (< x 4) (< x 9))") == 1).all()
    # first threshold 5 instead of 4: only x=4 differs; second 11 instead of 9: x=9 and 10 differ
    assert code.reward(problem, "(+ (< x 5) (< x 11))").tolist() == [1, 1, 1, 0, 1, 1, 1, 0, 0, 1, 1, 1, 1]
    assert code.reward(problem, "(if (< x 4) 2 (if (< x 9) 1 0))").all()  # any program that behaves so
    assert (code.reward(problem, "(/ 1 0)") == 0).all() and (code.reward(problem, "print(1)") == 0).all()


def test_code_programs_that_contradict_the_examples_score_zero_and_are_invalid():
    problem = (3, 9, 2, 7, 12)  # shown at 2, 7, 12
    # t1 = 2 differs from the truth (3) only at the shown input 2: no hidden test sees it, but it
    # contradicts the example 2->2, so it is not a solution
    assert (code.reward(problem, "(+ (< x 2) (< x 9))") == 0).all()
    assert (code.reward(problem, "(+ (< x 4) (< x 13))") == 0).all()
    assert not code.valid(problem, "(+ (< x 2) (< x 9))") and not code.valid(problem, "(+ x")
    assert code.valid(problem, "(+ (< x 4) (< x 8))")  # consistent, even if it fails some hidden tests


def test_code_hypotheses_agree_with_the_examples_and_include_the_truth():
    for problem in code.problems("train", 100, random.Random(0)):
        shown, hyps = code.shown(problem), code.hypotheses(problem)
        assert problem[:code.k] in hyps
        assert len(hyps) == np.prod(np.diff(shown))  # every threshold anywhere in its gap
        texts = [code.program_text(h) for h in hyps]
        assert len(set(texts)) == len(texts)
        for text in texts:
            assert lang.run(text, list(shown)) == [code.target(problem, x) for x in shown]


def test_code_hypotheses_have_many_distinct_pass_patterns():
    """The examples leave many plausible programs, and each passes a different subset of the hidden
    tests: far more corners than a set of m = 3 answers can cover."""
    counts = []
    for problem in code.problems("heldout", 300, random.Random(0)):
        patterns = {tuple(code.reward(problem, code.program_text(h))) for h in code.hypotheses(problem)}
        assert len(patterns) == len(code.hypotheses(problem))  # no two plausible programs behave alike
        counts.append(len(patterns))
    counts = np.array(counts)
    assert counts.max() >= 42 and counts.mean() > 12 and (counts >= 30).mean() > 0.1


def test_code_demonstrations_parse_agree_with_the_examples_and_mutate_the_best_parent():
    clean, rng = CodeTask(noise=0.0), random.Random(0)
    for problem in code.problems("train", 50, rng):
        hyps = {clean.program_text(h) for h in clean.hypotheses(problem)}
        assert set(clean.demonstration(problem, 6, rng)) <= hyps
        parents = clean.demo_parents(problem, rng)
        assert 1 <= len(parents) <= clean.max_parents and all(p in clean.hypotheses(problem) for p in parents)
        for child in clean.demonstration(problem, 3, rng, parents=parents):  # a one-part mutation
            assert child in hyps and (child != clean.program_text(parents[-1]) or len(hyps) == 1)
        for answer in code.demonstration(problem, 6, rng):  # noisy ones included: all parse and fit
            lang.parse(answer)
            assert len(answer) + 1 <= code.max_answer_tokens


@pytest.mark.parametrize("name", ["code"])
def test_code_prompts_fit_the_block_size_of_configs_code(name):
    """The longest prompt the evolutionary search writes (max_parents parents with their scores) plus m
    answers fits; a prompt one token longer would not (the block is not oversized by much)."""
    import train
    cfg = train.resolve_config(__file__.rsplit("/tests/", 1)[0] + f"/configs/{name}.yaml")
    task = make_task("code", **cfg["task_options"])
    longest = max(task.problems("heldout", 500, random.Random(0)), key=lambda p: len(task.prompt(p)))
    widest = task.program_text(tuple(task.domain - 1 for _ in range(task.k)))
    prompt = tok.encode(rollout_prompt(task, longest, 3, parents=[(widest, 1.0)] * task.max_parents))
    assert len(prompt) + cfg["answers_per_rollout"] * task.max_answer_tokens + 1 <= cfg["block_size"]


def test_parent_prompts_show_each_parents_score_as_hidden_tests_passed():
    problem = (4, 9, 2, 7, 12)
    worse, better = "(+ (< x 5) (< x 11))", "(+ (< x 4) (< x 10))"  # fail 3 and 1 of the 13 hidden tests
    parents = code.scored(problem, [(5, 11), (4, 10)])
    assert [p[0] for p in parents] == [worse, better] and [p[1] for p in parents] == pytest.approx([10 / 13, 12 / 13])
    assert code.prompt(problem, parents=parents) == f"2->2 7->1 12->0 from {worse} :10 ; {better} :12"
    assert rollout_prompt(code, problem, 1, parents=parents).startswith("<|bos|>1|2->2 7->1 12->0 from (+")


def test_splits_are_disjoint_and_fixed():
    for task in (persona, code, wide):
        train = set(task.problems("train", 300, random.Random(0)))
        held = set(task.problems("heldout", 100, random.Random(1)))
        assert train and held and not train & held
        # the problems come from the rng passed in: the same seed draws the same ones, another seed others
        assert task.problems("heldout", 5, random.Random(3)) == task.problems("heldout", 5, random.Random(3))
        assert task.problems("heldout", 5, random.Random(3)) != task.problems("heldout", 5, random.Random(4))
    # values checked by hand: the side is crc32(key) % 1000 < 250 (persona key: the letters, code: the tuple's
    # repr), the same on every machine whichever seed drew the problem
    assert persona.problems("heldout", 2, random.Random(3)) == [("s", "c", "t", "a"), ("g", "w", "p", "r")]  # 19, 45
    assert persona.problems("train", 2, random.Random(3)) == [("h", "s", "r", "e"), ("l", "t", "p", "u")]  # 458, 486
    assert code.problems("heldout", 2, random.Random(3)) == [(8, 14, 0, 13, 14), (7, 11, 3, 7, 11)]  # 197, 249
    assert code.problems("train", 2, random.Random(3)) == [(8, 9, 7, 8, 9), (10, 15, 9, 10, 15)]  # 547, 797


def test_demonstrations_are_valid_format():
    """Every demonstration passes task.valid (noise off: a noisy code demonstration ignores the examples
    on purpose), and task.valid turns down answers out of format."""
    rng = random.Random(0)
    for task in (persona, CodeTask(noise=0.0), CodeTask(thresholds=4, domain=40, window_share=0.5, noise=0.0)):
        for problem in task.problems("train", 20, rng):
            for answer in task.demonstration(problem, 3, rng):
                assert task.valid(problem, answer), (problem, answer)
            if hasattr(task, "demo_parents"):  # children of parents, as the search asks for them
                for answer in task.demonstration(problem, 3, rng, parents=task.demo_parents(problem, rng)):
                    assert task.valid(problem, answer), (problem, answer)
    for answer in ("", "a" * 13, "abc ", "Abc", "ab1", "abé", "a<|sep|>b"):  # answer_len 12, a..z only
        assert not persona.valid(FAVS, answer), answer
    assert persona.valid(FAVS, "a") and persona.valid(FAVS, "z" * 12)  # any letters: only reward reads FAVS
    problem = (4, 9, 2, 7, 12)  # examples 2->2 7->1 12->0: thresholds in 3..7 and 8..12
    assert code.valid(problem, "(+ (< x 4) (< x 9))") and code.valid(problem, "(+ (< x 3)  (< x 12))")
    # not a program, or one that contradicts an example (13 > 12: 12->1), or the bare edit the search applies
    for answer in ("", "(+ (< x 4) (< x 9)", "(+ (< x 4) (< x 9)))", "(+ (< x 4) (< x 13))", "(< x 9)", "x", "2-5"):
        assert not code.valid(problem, answer), answer
    problem = code.problems("train", 1, rng)[0]
    parents = code.demo_parents(problem, rng)
    scores = [code.reward(problem, code.program_text(p)).mean() for p in parents]
    assert scores == sorted(scores)  # worst to best


def test_score_answers_drops_duplicates_and_missing():
    rows = score_answers(persona, FAVS, ["aaaa", "aaaa", "bb"], 3)
    assert np.allclose(rows, [persona.reward(FAVS, "aaaa"), [0] * 4, persona.reward(FAVS, "bb")])
    rows = score_answers(persona, FAVS, ["aaaa"], 3)
    assert (rows[1:] == 0).all()
    # the same program spaced differently, or with a leading zero, is a duplicate
    rows = score_answers(code, (4, 9, 2, 7, 12), ["(+ (< x 4) (< x 9))", "(+  (< x 4)\n(< x 09))"], 2)
    assert rows[0].sum() == 13 and rows[1].sum() == 0


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
    for task, problem in ((persona, FAVS), (code, (4, 9, 2, 7, 12)), (wide, (3, 12, 25, 39, 0, 5, 20, 30, 39))):
        rows = score_answers(task, problem, answers, m)
        assert rows.shape == (m, task.dim) and np.isfinite(rows).all()
        assert ((rows >= 0) & (rows <= 1)).all()


def test_make_task_rejects_unknown():
    with pytest.raises(ValueError):
        make_task("chess")
    with pytest.raises(TypeError):
        make_task("persona", colour=3)
    with pytest.raises(TypeError):  # the earlier (if (< x t) a b) family is gone (commit b5f2386 has it)
        make_task("code", family="easy")


def test_code_demonstrations_have_the_habit_they_are_asked_for():
    problem = code.problems("train", 1, random.Random(5))[0]
    habit = CodeTask(noise=0.0, early_switch=1.0)
    shown, hyps = habit.shown(problem), habit.hypotheses(problem)
    early = {habit.program_text(h) for h in hyps if all(h[i] == shown[i] + 1 for i in range(habit.k))}
    rng = random.Random(0)
    assert {habit.demonstration(problem, 1, rng)[0] for _ in range(50)} == early
    open_minded = CodeTask(noise=0.0, early_switch=0.0)
    seen = {open_minded.demonstration(problem, 1, rng)[0] for _ in range(40 * len(hyps))}
    assert seen == {open_minded.program_text(h) for h in hyps}


def test_code_set_demonstrations_are_different_answers_where_the_examples_allow():
    """Asked for m answers, the demonstrator writes m different ones (repeats taught the warm start to repeat)."""
    clean, rng = CodeTask(noise=0.0), random.Random(0)
    for problem in clean.problems("train", 100, rng):
        demo = clean.demonstration(problem, 3, rng)
        assert len(set(demo)) == min(3, len(clean.hypotheses(problem)))
        parents = clean.demo_parents(problem, rng)
        children = clean.demonstration(problem, 3, rng, parents=parents)
        assert set(children) <= {clean.program_text(h) for h in clean.hypotheses(problem)}


@pytest.mark.parametrize("name", ["persona", "code"])
def test_one_scalarisation_for_numpy_and_torch(name):
    """Training, evaluation and search all score answers through task.scalarize: the mean of the components."""
    import torch
    task = make_task(name)
    r = np.arange(2 * 3 * task.dim, dtype=np.float32).reshape(2, 3, task.dim) / (6 * task.dim)
    assert np.allclose(task.scalarize(r), r.mean(-1))
    assert torch.allclose(task.scalarize(torch.from_numpy(r)), torch.from_numpy(r).mean(-1))


def test_the_default_code_family_draws_the_same_problems_and_rewards_as_before():
    """Checksums taken from the code before window_share, scored parents and num_plausible existed: old
    configs keep their problems and rewards."""
    import zlib
    task = CodeTask()
    ps = task.problems("train", 200, random.Random(0)) + task.problems("heldout", 100, random.Random(1))
    rows = [task.reward(p, task.program_text(h)) for p in ps[:100] for h in task.hypotheses(p)[:5]]
    rows += [task.reward(p, a) for p in ps for a in ("(+ (< x 5) (< x 9))", "(if (< x 4) 7 3)", "3")]
    assert zlib.crc32(repr(ps).encode()) == 2567656675
    assert zlib.crc32(np.stack(rows).astype(np.float32).tobytes()) == 2661656996


@pytest.mark.parametrize("task", [code, CodeTask(thresholds=3, domain=14, window_share=0.5),
                                  CodeTask(thresholds=4, domain=12)], ids=["count", "k3-window", "k4"])
def test_num_plausible_counts_the_hypotheses_and_they_agree_with_the_examples(task):
    sizes = []
    for problem in task.problems("train", 60, random.Random(1)):
        hyps, shown = task.hypotheses(problem), task.shown(problem)
        assert task.num_plausible(problem) == len(hyps) and problem[:len(problem) - len(shown)] in hyps
        assert all(lang.run(task.program_text(h), list(shown)) == [task.target(problem, x) for x in shown]
                   for h in hyps)
        sizes.append(len(hyps))
    assert len(set(sizes)) > 3  # problems of many sizes, not one


def test_window_share_mixes_pinned_down_and_wide_open_problems():
    def sizes(task):
        return np.array([task.num_plausible(p) for p in task.problems("heldout", 2000, random.Random(0))])
    mixed, uniform = sizes(wide), sizes(CodeTask(thresholds=4, domain=40))
    assert 0.15 < (mixed <= 30).mean() < 0.3 and (uniform <= 30).mean() < 0.05  # pools can solve these
    assert 0.06 < (mixed >= 2000).mean() < 0.15 and (uniform >= 2000).mean() > 0.12  # only search can
    assert mixed.max() > 5000
    for problem in wide.problems("heldout", 50, random.Random(2)):  # the split is the problem's hash alone
        assert problem not in set(wide.problems("train", 500, random.Random(3)))
        assert problem in wide.problems("heldout", 50, random.Random(2))


def test_code_task_refuses_a_bad_window_share():
    for options in ({"window_share": 1.5}, {"window_share": -0.1}):
        with pytest.raises(ValueError, match="window_share"):
            CodeTask(**options)


def test_mutation_demonstrations_move_one_threshold_no_farther_than_the_tests_it_fails():
    clean, rng = CodeTask(noise=0.0), random.Random(0)
    problem = (4, 9, 2, 7, 12)  # thresholds 4 in (2, 7] and 9 in (7, 12]
    near = [(5, 9)]  # fails 1 hidden test: every child moves one threshold by exactly one step
    seen = {c for _ in range(60) for c in clean.demonstration(problem, 1, rng, parents=near)}
    assert seen == {"(+ (< x 4) (< x 9))", "(+ (< x 6) (< x 9))", "(+ (< x 5) (< x 8))", "(+ (< x 5) (< x 10))"}
    far = [(7, 12)]  # fails 3 + 3: any consistent one-threshold move of up to 6 steps
    seen = {c for _ in range(200) for c in clean.demonstration(problem, 1, rng, parents=far)}
    assert len(seen) == 4 + 4 and "(+ (< x 3) (< x 12))" in seen
    clean_wide = CodeTask(thresholds=4, domain=40, window_share=0.5, noise=0.0)
    for problem in clean_wide.problems("train", 40, rng):
        parents = clean_wide.demo_parents(problem, rng)
        best = parents[-1]
        failed = round(clean_wide.dim * (1 - clean_wide.reward(problem, clean_wide.program_text(best)).mean()))
        children = clean_wide.demonstration(problem, 3, rng, parents=parents)
        assert len(set(children)) == len(children) or clean_wide.num_plausible(problem) <= 3
        for child in children:
            assert clean_wide.valid(problem, child)
            moved = [(a, b) for a, b in zip(best, clean_wide.thresholds(child)) if a != b]
            assert len(moved) == 1 and abs(moved[0][0] - moved[0][1]) <= max(1, failed) or \
                clean_wide.num_plausible(problem) == 1


def test_mutation_step_sizes_are_log_uniform_up_to_the_failed_tests():
    """A step of size s comes with probability log(1 + 1/s) / log(1 + bound): small steps stay likely
    however far the parent is (the step's size, not the threshold, is drawn first)."""
    clean, rng = CodeTask(thresholds=1, domain=40, noise=0.0), random.Random(0)
    problem = (39, 0, 39)  # one threshold in (0, 39], the truth at 39; shown inputs 0 and 39
    parent = (15,)  # fails 24 hidden tests (15..38): sizes 1..14 move down, 1..24 up
    sizes = Counter(abs(clean._mutate(parent, problem, rng)[0] - 15) for _ in range(20_000))
    assert max(sizes) == 24 and min(sizes) == 1
    for size in (1, 2, 5, 20):
        assert sizes[size] / 20_000 == pytest.approx(math.log1p(1 / size) / math.log1p(24), abs=0.01)


def test_edit_demonstrations_stand_for_one_threshold_moves_of_the_best_parent():
    clean = CodeTask(thresholds=3, domain=64, window_share=0.5, fixed_width=True, noise=0.0, edits=True)
    rng = random.Random(0)
    for problem in clean.problems("train", 40, rng):
        parents = clean.demo_parents(problem, rng)
        shown = clean.scored(problem, parents)  # as the prompt shows them, worst to best
        failed = round(clean.dim * (1 - shown[-1][1]))
        for edit in clean.demonstration(problem, 3, rng, parents=parents):
            i, step = int(edit[0]) - 1, int(edit[1:])  # '2-5': the second threshold down by 5
            child = clean.child_program(edit, shown)
            moved = [(a, b) for a, b in zip(parents[-1], clean.thresholds(child)) if a != b]
            assert clean.valid(problem, child) and moved == [(parents[-1][i], parents[-1][i] + step)] \
                and 1 <= abs(step) <= max(1, failed) or clean.num_plausible(problem) == 1


def test_child_program_applies_an_edit_to_the_best_parent_or_leaves_the_answer_as_written():
    edits, whole = CodeTask(edits=True), CodeTask()
    parents = [("(+ (< x 3) (< x 8))", 0.5), ("(+ (< x 5) (< x 11))", 0.7)]
    assert edits.child_program("2-2", parents) == "(+ (< x 5) (< x 9))"  # the last (best) parent's 11 - 2
    assert edits.child_program(" 1 + 10 ", parents) == "(+ (< x 15) (< x 11))"  # inconsistent, but a program
    for answer in ("3+1", "0-1", "1-6", "2+5", "2-", "(+ (< x 4) (< x 9))", ""):  # no 3rd / 0th threshold,
        assert edits.child_program(answer, parents) == answer                     # off the domain 0..15, ...
    assert edits.child_program("2-2", None) == "2-2" and whole.child_program("2-2", parents) == "2-2"
    assert edits.reward((4, 9, 2, 7, 12), "2-2").sum() == 0  # unresolved, an edit scores as no program


def test_fixed_width_programs_have_one_length_and_mean_what_they_did():
    padded, plain = CodeTask(thresholds=4, domain=40, fixed_width=True), CodeTask(thresholds=4, domain=40)
    problem = padded.problems("train", 1, random.Random(4))[0]
    assert padded.program_text((3, 12, 25, 39)) == "(+ (< x 03) (+ (< x 12) (+ (< x 25) (< x 39))))"
    assert plain.program_text((3, 12, 25, 39)) == "(+ (< x 3) (+ (< x 12) (+ (< x 25) (< x 39))))"
    shown = padded.shown(problem)
    programs = [problem[:4], tuple(x + 1 for x in shown[:4]), tuple(shown[1:])]  # the truth, all low, all high
    assert len({len(padded.program_text(p)) for p in programs}) == 1
    for p in programs:
        assert (padded.reward(problem, padded.program_text(p)) == plain.reward(problem, plain.program_text(p))).all()
        assert padded.answer_key(padded.program_text(p)) == plain.answer_key(plain.program_text(p))
    for p in programs:  # thresholds() reads back what program_text wrote, padded or not
        assert padded.thresholds(padded.program_text(p)) == plain.thresholds(plain.program_text(p)) == list(p)
    assert padded.thresholds("(+ (< x 03)") == [3]  # also off a program that does not parse


def _reference(problem, answer):
    """The code reward and validity as their definitions say, straight from the interpreter."""
    shown, tests = code.shown(problem), code.tests(problem)
    consistent = all(o == code.target(problem, x) for o, x in zip(lang.run(answer, shown), shown))
    passed = [float(o == code.target(problem, x)) for o, x in zip(lang.run(answer, tests), tests)]
    return (passed if consistent else [0.0] * code.dim), consistent and lang.canonical(answer) is not None


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 16), min_size=3, max_size=3), st.sampled_from(["+", "-", "/", "%", "min"]),
       st.integers(0, 3), st.integers(0, 2**32))
def test_code_reward_and_validity_are_their_definition_for_any_program_and_problem(ts, op, c, seed):
    """The same text on different problems scores as the interpreter, run on that problem's tests
    and examples, says (programs that fail on some inputs included): a check for any faster path
    reward or valid may take."""
    problems = code.problems("train", 3, random.Random(seed))
    answers = [f"(+ (< x {ts[0]}) (< x {ts[1]}))", f"({op} (< x {ts[2]}) {c})", f"(/ 2 (- x {ts[0]}))",
               code.program_text(problems[0][:2]), "(+ (< x 3)"]
    for problem in problems:
        for answer in answers:
            reward, valid = _reference(problem, answer)
            assert code.reward(problem, answer).tolist() == reward
            assert code.valid(problem, answer) == valid


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 10**6), st.text(alphabet="()<>+-*/%=x 0123456789", max_size=40), st.booleans())
def test_code_reward_kept_by_text_is_the_reward_run_afresh(seed, noise, as_program):
    """CodeTask.reward keeps each text's outputs (codetask.domain_outputs): the same vector as running
    the answer on this problem's inputs now, per the definition (0 on every test if it contradicts an
    example, else 1 where it matches the hidden program), asked twice, for programs and for noise."""
    task = make_task("code", domain=64, thresholds=3, window_share=0.5, fixed_width=True)
    rng = random.Random(seed)
    problem = task.problems("train", 1, rng)[0]
    answer = task.program_text(sorted(rng.sample(range(64), 3))) if as_program else noise
    tests, shown = task.tests(problem), list(task.shown(problem))
    outputs = lang.run(answer, tests + shown)
    if any(o != task.target(problem, x) for o, x in zip(outputs[len(tests):], shown)):
        expected = np.zeros(len(tests), dtype=np.float32)
    else:
        expected = np.array([float(o == task.target(problem, x)) for o, x in zip(outputs, tests)], dtype=np.float32)
    for _ in range(2):  # afresh, then from what was kept
        got = task.reward(problem, answer)
        assert got.dtype == np.float32 and np.array_equal(got, expected)
