"""codetask.py: the code task's exact rewards per hidden test, its hypotheses, its demonstrations
(sets, mutations, edits of the best parent) and its problem families."""

import math
import random
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lang
from codetask import CodeTask
from config import make_task

code = CodeTask()  # the default family: f = (+ (< x t1) (< x t2)) on 0..15 from three examples


# a larger family: four thresholds on 0..39, half the problems' examples in a narrow window
wide = CodeTask(thresholds=4, domain=40, window_share=0.5)


def test_code_reward_per_test():
    # f = (+ (< x 4) (< x 9)): 2 below 4, 1 on 4..8, 0 from 9; shown at 2, 7, 12
    problem = (4, 9, 2, 7, 12)
    assert code.dim == 13 and code.tests(problem) == [0, 1, 3, 4, 5, 6, 8, 9, 10, 11, 13, 14, 15]
    assert code.prompt(problem) == "2->2 7->1 12->0"
    assert code.program_text(problem[:2]) == "(+ (< x 4) (< x 9))"
    assert (code.reward(problem, "(+ (< x 4) (< x 9))") == 1).all()
    # first threshold 5 instead of 4: only x=4 differs; second 11 instead of 9: x=9 and 10 differ
    assert code.reward(problem, "(+ (< x 5) (< x 11))").tolist() == [
        1,
        1,
        1,
        0,
        1,
        1,
        1,
        0,
        0,
        1,
        1,
        1,
        1,
    ]
    # any program that behaves so
    assert code.reward(problem, "(if (< x 4) 2 (if (< x 9) 1 0))").all()
    assert (code.reward(problem, "(/ 1 0)") == 0).all() and (
        code.reward(problem, "print(1)") == 0
    ).all()


def test_code_programs_that_contradict_the_examples_score_zero_and_are_invalid():
    problem = (3, 9, 2, 7, 12)  # shown at 2, 7, 12
    # t1 = 2 differs from the truth (3) only at the shown input 2: no hidden test sees it, but it
    # contradicts the example 2->2, so it is not a solution
    assert (code.reward(problem, "(+ (< x 2) (< x 9))") == 0).all()
    assert (code.reward(problem, "(+ (< x 4) (< x 13))") == 0).all()
    assert not code.valid(problem, "(+ (< x 2) (< x 9))") and not code.valid(problem, "(+ x")
    # consistent, even if it fails some hidden tests
    assert code.valid(problem, "(+ (< x 4) (< x 8))")


def test_code_hypotheses_agree_with_the_examples_and_include_the_truth():
    for problem in code.problems("train", 100, random.Random(0)):
        shown, hyps = code.shown(problem), code.hypotheses(problem)
        assert problem[: code.k] in hyps
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
        patterns = {
            tuple(code.reward(problem, code.program_text(h))) for h in code.hypotheses(problem)
        }
        # no two plausible programs behave alike
        assert len(patterns) == len(code.hypotheses(problem))
        counts.append(len(patterns))
    counts = np.array(counts)
    assert counts.max() >= 42 and counts.mean() > 12 and (counts >= 30).mean() > 0.1


def test_code_demonstrations_parse_agree_with_the_examples_and_mutate_the_best_parent():
    clean, rng = CodeTask(noise=0.0), random.Random(0)
    for problem in code.problems("train", 50, rng):
        hyps = {clean.program_text(h) for h in clean.hypotheses(problem)}
        assert set(clean.demonstration(problem, 6, rng)) <= hyps
        parents = clean.demo_parents(problem, rng)
        assert 1 <= len(parents) <= clean.max_parents and all(
            p in clean.hypotheses(problem) for p in parents
        )
        for child in clean.demonstration(problem, 3, rng, parents=parents):  # a one-part mutation
            assert child in hyps and (child != clean.program_text(parents[-1]) or len(hyps) == 1)
        for answer in code.demonstration(problem, 6, rng):  # noisy ones included: all parse and fit
            lang.parse(answer)
            assert len(answer) + 1 <= code.max_answer_tokens


def test_code_demonstrations_have_the_habit_they_are_asked_for():
    problem = code.problems("train", 1, random.Random(5))[0]
    habit = CodeTask(noise=0.0, early_switch=1.0)
    shown, hyps = habit.shown(problem), habit.hypotheses(problem)
    early = {
        habit.program_text(h) for h in hyps if all(h[i] == shown[i] + 1 for i in range(habit.k))
    }
    rng = random.Random(0)
    assert {habit.demonstration(problem, 1, rng)[0] for _ in range(50)} == early
    open_minded = CodeTask(noise=0.0, early_switch=0.0)
    seen = {open_minded.demonstration(problem, 1, rng)[0] for _ in range(40 * len(hyps))}
    assert seen == {open_minded.program_text(h) for h in hyps}


def test_code_set_demonstrations_are_different_answers_where_the_examples_allow():
    """Asked for m answers, the demonstrator writes m different ones (repeats taught the warm start
    to repeat)."""
    clean, rng = CodeTask(noise=0.0), random.Random(0)
    for problem in clean.problems("train", 100, rng):
        demo = clean.demonstration(problem, 3, rng)
        assert len(set(demo)) == min(3, len(clean.hypotheses(problem)))
        parents = clean.demo_parents(problem, rng)
        children = clean.demonstration(problem, 3, rng, parents=parents)
        assert set(children) <= {clean.program_text(h) for h in clean.hypotheses(problem)}


def test_the_default_code_family_draws_the_same_problems_and_rewards_as_before():
    """Checksums taken from the code before window_share, scored parents and num_plausible existed:
    old configs keep their problems and rewards."""
    import zlib

    task = CodeTask()
    ps = task.problems("train", 200, random.Random(0)) + task.problems(
        "heldout", 100, random.Random(1)
    )
    rows = [task.reward(p, task.program_text(h)) for p in ps[:100] for h in task.hypotheses(p)[:5]]
    rows += [
        task.reward(p, a) for p in ps for a in ("(+ (< x 5) (< x 9))", "(if (< x 4) 7 3)", "3")
    ]
    assert zlib.crc32(repr(ps).encode()) == 2567656675
    assert zlib.crc32(np.stack(rows).astype(np.float32).tobytes()) == 2661656996


@pytest.mark.parametrize(
    "task",
    [code, CodeTask(thresholds=3, domain=14, window_share=0.5), CodeTask(thresholds=4, domain=12)],
    ids=["count", "k3-window", "k4"],
)
def test_num_plausible_counts_the_hypotheses_and_they_agree_with_the_examples(task):
    sizes = []
    for problem in task.problems("train", 60, random.Random(1)):
        hyps, shown = task.hypotheses(problem), task.shown(problem)
        assert (
            task.num_plausible(problem) == len(hyps)
            and problem[: len(problem) - len(shown)] in hyps
        )
        assert all(
            lang.run(task.program_text(h), list(shown)) == [task.target(problem, x) for x in shown]
            for h in hyps
        )
        sizes.append(len(hyps))
    assert len(set(sizes)) > 3  # problems of many sizes, not one


def test_window_share_mixes_pinned_down_and_wide_open_problems():
    def sizes(task):
        return np.array(
            [task.num_plausible(p) for p in task.problems("heldout", 2000, random.Random(0))]
        )

    mixed, uniform = sizes(wide), sizes(CodeTask(thresholds=4, domain=40))
    # pools can solve these
    assert 0.15 < (mixed <= 30).mean() < 0.3 and (uniform <= 30).mean() < 0.05
    # only search can
    assert 0.06 < (mixed >= 2000).mean() < 0.15 and (uniform >= 2000).mean() > 0.12
    assert mixed.max() > 5000
    # the split is the problem's hash alone
    for problem in wide.problems("heldout", 50, random.Random(2)):
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
    assert seen == {
        "(+ (< x 4) (< x 9))",
        "(+ (< x 6) (< x 9))",
        "(+ (< x 5) (< x 8))",
        "(+ (< x 5) (< x 10))",
    }
    far = [(7, 12)]  # fails 3 + 3: any consistent one-threshold move of up to 6 steps
    seen = {c for _ in range(200) for c in clean.demonstration(problem, 1, rng, parents=far)}
    assert len(seen) == 4 + 4 and "(+ (< x 3) (< x 12))" in seen
    clean_wide = CodeTask(thresholds=4, domain=40, window_share=0.5, noise=0.0)
    for problem in clean_wide.problems("train", 40, rng):
        parents = clean_wide.demo_parents(problem, rng)
        best = parents[-1]
        failed = round(
            clean_wide.dim * (1 - clean_wide.reward(problem, clean_wide.program_text(best)).mean())
        )
        children = clean_wide.demonstration(problem, 3, rng, parents=parents)
        assert len(set(children)) == len(children) or clean_wide.num_plausible(problem) <= 3
        for child in children:
            assert clean_wide.valid(problem, child)
            moved = [(a, b) for a, b in zip(best, clean_wide.thresholds_of(child)) if a != b]
            assert (
                len(moved) == 1
                and abs(moved[0][0] - moved[0][1]) <= max(1, failed)
                or clean_wide.num_plausible(problem) == 1
            )


def test_mutation_step_sizes_are_log_uniform_up_to_the_failed_tests():
    """A step of size s comes with probability log(1 + 1/s) / log(1 + bound): small steps stay
    likely however far the parent is (the step's size, not the threshold, is drawn first)."""
    clean, rng = CodeTask(thresholds=1, domain=40, noise=0.0), random.Random(0)
    problem = (39, 0, 39)  # one threshold in (0, 39], the truth at 39; shown inputs 0 and 39
    parent = (15,)  # fails 24 hidden tests (15..38): sizes 1..14 move down, 1..24 up
    sizes = Counter(abs(clean._mutate(parent, problem, rng)[0] - 15) for _ in range(20_000))
    assert max(sizes) == 24 and min(sizes) == 1
    for size in (1, 2, 5, 20):
        assert sizes[size] / 20_000 == pytest.approx(
            math.log1p(1 / size) / math.log1p(24), abs=0.01
        )


def test_edit_demonstrations_stand_for_one_threshold_moves_of_the_best_parent():
    clean = CodeTask(
        thresholds=3, domain=64, window_share=0.5, fixed_width=True, noise=0.0, edits=True
    )
    rng = random.Random(0)
    for problem in clean.problems("train", 40, rng):
        parents = clean.demo_parents(problem, rng)
        shown = clean.scored(problem, parents)  # as the prompt shows them, worst to best
        failed = round(clean.dim * (1 - shown[-1][1]))
        for edit in clean.demonstration(problem, 3, rng, parents=parents):
            i, step = int(edit[0]) - 1, int(edit[1:])  # '2-5': the second threshold down by 5
            child = clean.child_program(edit, shown)
            moved = [(a, b) for a, b in zip(parents[-1], clean.thresholds_of(child)) if a != b]
            assert (
                clean.valid(problem, child)
                and moved == [(parents[-1][i], parents[-1][i] + step)]
                and 1 <= abs(step) <= max(1, failed)
                or clean.num_plausible(problem) == 1
            )


def test_child_program_applies_an_edit_to_the_best_parent_or_leaves_the_answer_as_written():
    edits, whole = CodeTask(edits=True), CodeTask()
    parents = [("(+ (< x 3) (< x 8))", 0.5), ("(+ (< x 5) (< x 11))", 0.7)]
    # the last (best) parent's 11 - 2
    assert edits.child_program("2-2", parents) == "(+ (< x 5) (< x 9))"
    # inconsistent, but a program
    assert edits.child_program(" 1 + 10 ", parents) == "(+ (< x 15) (< x 11))"
    # no 3rd / 0th threshold,
    for answer in ("3+1", "0-1", "1-6", "2+5", "2-", "(+ (< x 4) (< x 9))", ""):
        # off the domain 0..15, ...
        assert edits.child_program(answer, parents) == answer
    assert (
        edits.child_program("2-2", None) == "2-2" and whole.child_program("2-2", parents) == "2-2"
    )
    # unresolved, an edit scores as no program
    assert edits.reward((4, 9, 2, 7, 12), "2-2").sum() == 0


def test_fixed_width_programs_have_one_length_and_mean_what_they_did():
    padded, plain = (
        CodeTask(thresholds=4, domain=40, fixed_width=True),
        CodeTask(thresholds=4, domain=40),
    )
    problem = padded.problems("train", 1, random.Random(4))[0]
    assert padded.program_text((3, 12, 25, 39)) == "(+ (< x 03) (+ (< x 12) (+ (< x 25) (< x 39))))"
    assert plain.program_text((3, 12, 25, 39)) == "(+ (< x 3) (+ (< x 12) (+ (< x 25) (< x 39))))"
    shown = padded.shown(problem)
    # the truth, all low, all high
    programs = [problem[:4], tuple(x + 1 for x in shown[:4]), tuple(shown[1:])]
    assert len({len(padded.program_text(p)) for p in programs}) == 1
    for p in programs:
        assert (
            padded.reward(problem, padded.program_text(p))
            == plain.reward(problem, plain.program_text(p))
        ).all()
        assert padded.answer_key(padded.program_text(p)) == plain.answer_key(plain.program_text(p))
    for p in programs:  # thresholds() reads back what program_text wrote, padded or not
        assert (
            padded.thresholds_of(padded.program_text(p))
            == plain.thresholds_of(plain.program_text(p))
            == list(p)
        )
    assert padded.thresholds_of("(+ (< x 03)") == [3]  # also off a program that does not parse


def _reference(problem, answer):
    """The code reward and validity as their definitions say, straight from the interpreter."""
    shown, tests = code.shown(problem), code.tests(problem)
    consistent = all(o == code.target(problem, x) for o, x in zip(lang.run(answer, shown), shown))
    passed = [float(o == code.target(problem, x)) for o, x in zip(lang.run(answer, tests), tests)]
    return (passed if consistent else [0.0] * code.dim), consistent and lang.canonical(
        answer
    ) is not None


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(0, 16), min_size=3, max_size=3),
    st.sampled_from(["+", "-", "/", "%", "min"]),
    st.integers(0, 3),
    st.integers(0, 2**32),
)
def test_code_reward_and_validity_are_their_definition_for_any_program_and_problem(ts, op, c, seed):
    """The same text on different problems scores as the interpreter, run on that problem's tests
    and examples, says (programs that fail on some inputs included): a check for any faster path
    reward or valid may take."""
    problems = code.problems("train", 3, random.Random(seed))
    answers = [
        f"(+ (< x {ts[0]}) (< x {ts[1]}))",
        f"({op} (< x {ts[2]}) {c})",
        f"(/ 2 (- x {ts[0]}))",
        code.program_text(problems[0][:2]),
        "(+ (< x 3)",
    ]
    for problem in problems:
        for answer in answers:
            reward, valid = _reference(problem, answer)
            assert code.reward(problem, answer).tolist() == reward
            assert code.valid(problem, answer) == valid


@settings(max_examples=150, deadline=None)
@given(
    st.integers(0, 10**6), st.text(alphabet="()<>+-*/%=x 0123456789", max_size=40), st.booleans()
)
def test_code_reward_kept_by_text_is_the_reward_run_afresh(seed, noise, as_program):
    """CodeTask.reward keeps each text's outputs (codetask.domain_outputs): the same vector as
    running the answer on this problem's inputs now, per the definition (0 on every test if it
    contradicts an example, else 1 where it matches the hidden program), asked twice, for programs
    and for noise."""
    task = make_task("code", domain=64, thresholds=3, window_share=0.5, fixed_width=True)
    rng = random.Random(seed)
    problem = task.problems("train", 1, rng)[0]
    answer = task.program_text(sorted(rng.sample(range(64), 3))) if as_program else noise
    tests, shown = task.tests(problem), list(task.shown(problem))
    outputs = lang.run(answer, tests + shown)
    if any(o != task.target(problem, x) for o, x in zip(outputs[len(tests) :], shown)):
        expected = np.zeros(len(tests), dtype=np.float32)
    else:
        expected = np.array(
            [float(o == task.target(problem, x)) for o, x in zip(outputs, tests)], dtype=np.float32
        )
    for _ in range(2):  # afresh, then from what was kept
        got = task.reward(problem, answer)
        assert got.dtype == np.float32 and np.array_equal(got, expected)
