"""Outcome-based exploration (exploration.py): the bonuses by hand, the outcome history, the finite
training set, each task's outcome and "solved", the settings that refuse, and a run killed with
SIGKILL that resumes with the same outcome counts."""

import itertools
import random

import numpy as np
import pytest
import torch
from tiny_runs import cli, popen, read, sigkill_when, tiny
from tiny_runs import config as run_config

import exploration
import train as trainer
from codetask import CodeTask
from config import ConfigError
from lab import exploration as lab_exploration
from maze import MazeTask, maze_of, walk
from rewards import PersonaTask
from runfiles import load_checkpoint
from tasks import TrainingSet

# ---- The bonuses, by hand


def test_ucb_bonus_by_hand():
    """min(1, sqrt(1/N)): counts 1, 4, 9 give 1, 1/2, 1/3; an outcome never seen (0) gets 1."""
    got = exploration.ucb_bonuses(torch.tensor([[1.0, 4.0, 9.0, 0.0]]))
    assert torch.allclose(got, torch.tensor([[1.0, 0.5, 1 / 3, 1.0]], dtype=torch.float64))


def test_ucb_con_is_negative_past_four_visits():
    """b0 = 0.5: zero at N = 4 (sqrt(1/4) = 0.5), below zero from N = 5 on."""
    got = exploration.ucb_con_bonuses(torch.tensor([[1.0, 4.0, 5.0, 100.0]]), baseline=0.5)
    assert got[0, 0] == 0.5 and got[0, 1] == 0.0
    assert (got[0, 2:] < 0).all()


def test_ucb_mean_sums_to_zero_over_a_group():
    """Each bonus minus the mean of the other G - 1: a group's bonuses sum to zero."""
    counts = torch.tensor([[1.0, 4.0, 9.0, 16.0], [2.0, 2.0, 2.0, 2.0]])
    got = exploration.ucb_mean_bonuses(counts)
    assert torch.allclose(got.sum(1), torch.zeros(2, dtype=torch.float64), atol=1e-12)
    # by hand: 1 - (1/2 + 1/3 + 1/4) / 3
    assert got[0, 0].item() == pytest.approx(1 - (0.5 + 1 / 3 + 0.25) / 3)
    assert torch.equal(got[1], torch.zeros(4, dtype=torch.float64))  # equally rare: no signal


def test_batch_penalty_by_hand():
    """-(1/G) x the other rollouts with the same outcome: [a, a, b, a] -> -2/4 for each a, 0 for
    b."""
    got = exploration.batch_bonuses([["a", "a", "b", "a"], ["x", "y", "z", "w"]])
    assert got.tolist() == [[-0.5, -0.5, 0.0, -0.5], [0.0, 0.0, 0.0, 0.0]]


def test_the_bonus_is_added_after_the_z_score_and_not_in_solved_groups():
    scores = torch.tensor([[1.0, 0.0, 0.0, 1.0], [1.0, 1.0, 1.0, 1.0]])
    bonus = torch.tensor([[1.0, 0.5, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0]], dtype=torch.float64)
    z = torch.tensor([1.0, -1.0, -1.0, 1.0])
    got = exploration.exploration_advantages(scores, bonus, coef=0.2)
    assert torch.allclose(got[0], z + 0.2 * bonus[0].float(), atol=1e-5)
    assert torch.allclose(got[1], 0.2 * torch.ones(4))  # equal scores: the bonus alone
    solved = torch.tensor([[True, False, False, True], [True, True, True, True]])
    gated = exploration.exploration_advantages(scores, bonus, coef=0.2, solved=solved)
    assert torch.equal(gated[0], got[0]) and torch.equal(gated[1], torch.zeros(4))


def test_the_bonus_before_the_z_score_is_z_scored_with_the_scores():
    scores = torch.tensor([[1.0, 0.0, 0.0, 1.0], [1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0]])
    bonus = torch.tensor(
        [[1.0, 0.5, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0], [1.0, 0.0, 0.0, 0.0]], dtype=torch.float64
    )
    got = exploration.exploration_advantages(scores, bonus, coef=0.2, at="before")
    # by hand: [1.2, 0.1, 0.0, 1.0] has mean 0.575 and population variance 1.1275 / 4
    by_hand = torch.tensor([0.625, -0.475, -0.575, 0.425]) / (1.1275 / 4) ** 0.5
    assert torch.allclose(got[0], by_hand, atol=1e-5)
    assert torch.equal(got[1], torch.zeros(4))  # one bonus for all: no signal (after: 0.2 each)
    # a flat group: the bonus alone, at unit scale whatever c (after: 0.2 x the bonus)
    unit = torch.tensor([3**0.5, -(3**-0.5), -(3**-0.5), -(3**-0.5)])
    assert torch.allclose(got[2], unit, atol=1e-4)  # the z-score's eps: 1e-6 / std 0.087
    solved = torch.tensor([[False] * 4, [True] * 4, [False] * 4])
    gated = exploration.exploration_advantages(scores, bonus, coef=0.2, solved=solved, at="before")
    assert torch.equal(gated, got)  # a solved group's bonus is zero before the z-score too


# ---- The history and the training set


def test_history_reads_earlier_counts_then_counts_the_batch():
    history = exploration.OutcomeHistory(["p", "q"])
    outcomes = [[["a"], ["a"], ["b"]]]
    first = history.record(["p"], outcomes, [[[False], [True], [False]]])
    assert first.tolist() == [[0, 0, 0]]  # nothing before this batch
    second = history.record(["p"], outcomes, [[[False], [False], [False]]])
    assert second.tolist() == [[2, 2, 1]]
    assert history.solved_at == {repr("p"): 2}  # the second answer drawn on p solved it
    summary = history.summary()
    assert summary["explore_solved_share"] == 0.5  # p solved, q never sampled
    assert summary["explore_distinct"] == 1.0  # p: a and b; q: none
    assert summary["explore_distinct_unsolved"] == 0.0
    restored = exploration.OutcomeHistory()
    restored.load_state_dict(history.state_dict())
    assert restored.state_dict() == history.state_dict()


def test_history_counting_the_current_batch_reads_counts_after_it():
    history = exploration.OutcomeHistory(["p"])
    outcomes = [[["a"], ["a"], ["b"]]]
    unsolved = [[[False], [False], [False]]]
    assert history.record(["p"], outcomes, unsolved, count_current=True).tolist() == [[2, 2, 1]]
    assert history.record(["p"], outcomes, unsolved, count_current=True).tolist() == [[4, 4, 2]]
    assert history.samples == {repr("p"): 6}  # counted once a batch, whichever N is read


def test_train_reads_where_the_bonus_goes_and_what_n_counts(tmp_path):
    cfg = tiny(tmp_path, "algo=ucb_con", "train_problems=4")
    assert (cfg["explore_bonus_at"], cfg["explore_count_current"]) == ("after", False)
    with pytest.raises(ConfigError, match="explore_bonus_at must be 'after' or 'before'"):
        tiny(tmp_path, "algo=ucb_con", "train_problems=4", "explore_bonus_at=sideways")
    scalar = torch.tensor([[[1.0], [0.0], [0.0], [0.0]]])
    outcomes = trainer.Outcomes(
        first=[["a", "b", "b", "b"]],
        solved=torch.zeros(1, 4, dtype=torch.bool),
        counts=torch.tensor([[1.0, 4.0, 9.0, 9.0]], dtype=torch.float64),
    )
    bonus = exploration.ucb_con_bonuses(outcomes.counts, 0.5)
    for at in ("after", "before"):
        cfg = tiny(tmp_path, "algo=ucb_con", "train_problems=4", f"explore_bonus_at={at}")
        got = trainer.ADVANTAGES["ucb_con"].advantage(None, scalar, None, cfg, outcomes)
        want = exploration.exploration_advantages(scalar[:, :, 0], bonus, 0.2, at=at)
        assert torch.equal(got, want)
    # and record_outcomes asks the history for the counts the setting names
    for current, want in ((False, [[0, 0, 0, 0]]), (True, [[1, 3, 3, 3]])):
        cfg = tiny(tmp_path, "algo=ucb_con", "train_problems=4", f"explore_count_current={current}")
        task = PersonaTask()
        problem = task.problems("train", 1, random.Random(0))[0]
        run = trainer.Run(cfg=cfg, task=task, policy=None, opt=None, scorer=None)
        run.history = exploration.OutcomeHistory([problem])
        assert problem[0] != problem[1]  # so the two words below are two outcomes
        letters = [problem[0], problem[1], problem[1], problem[1]]
        batch = {
            "problems": [problem],
            "answers": [[[w] for w in letters]],
            "rewards": torch.zeros(1, 4, 1, task.dim),
        }
        counts = trainer.record_outcomes(run, batch, torch.zeros(1, 4, 1)).counts
        assert counts.tolist() == want


def test_a_finite_set_visits_every_problem_once_per_epoch():
    task = PersonaTask()
    training = TrainingSet(task, 10, random.Random(0))
    seen = training.next(4) + training.next(4) + training.next(2)
    assert sorted(seen) == sorted(training.problems) and training.epoch == 1
    second = training.next(10)
    assert sorted(second) == sorted(training.problems) and training.epoch == 2
    assert second != seen  # a fresh order each epoch


# ---- Outcomes and "solved", per task


def test_two_programs_computing_one_function_share_an_outcome():
    task = CodeTask()
    problem = task.problems("train", 1, random.Random(3))[0]
    t1, t2 = problem[:2]
    plain = task.program_text((t1, t2))
    swapped = f"(+ (< x {t2}) (< x {t1}))"  # the same function, written the other way round
    assert plain != swapped
    assert task.outcome(problem, plain) == task.outcome(problem, swapped)
    assert task.outcome(problem, plain) != task.outcome(problem, task.program_text((t1, t2 + 1)))
    assert task.solved(problem, task.reward(problem, plain))
    assert not task.solved(problem, task.reward(problem, task.program_text((t1, t2 + 1))))


def test_maze_routes_collecting_the_same_tiles_share_an_outcome():
    task = MazeTask()
    seed = task.problems("train", 1, random.Random(0))[0]
    maze = maze_of(seed)
    routes = [task.demonstration(seed, 1, random.Random(i))[0] for i in range(40)]
    by_outcome = {}
    for route in routes:
        by_outcome.setdefault(task.outcome(seed, route), set()).add(task.answer_key(route))
    # several different walks share an outcome, and an outcome fixes the reward
    assert any(len(keys) > 1 for keys in by_outcome.values())
    for route in routes:
        same = [r for r in routes if task.outcome(seed, r) == task.outcome(seed, route)]
        assert all(np.array_equal(task.reward(seed, r), task.reward(seed, route)) for r in same)
    assert task.outcome(seed, "") == "stopped"
    arrived = [r for r in routes if walk(maze, r)[1]]
    assert all(task.outcome(seed, r).startswith("arrived") for r in arrived)


def test_maze_solved_means_its_exact_optimum():
    task = MazeTask()
    seed = task.problems("train", 1, random.Random(1))[0]
    from maze import pareto_front

    front = pareto_front(seed)
    best = front[np.argmax(front.mean(1))]
    assert task.solved(seed, best)
    assert not task.solved(seed, best - np.array([0, 0.01, 0, 0]))


def test_persona_outcome_counts_liked_letters_and_its_optimum_is_exact():
    task = PersonaTask(num_personas=3, answer_len=6, overlap=0.3)
    problem = ("a", "b", "c")
    assert task.outcome(problem, "aabxyz") == task.outcome(problem, "baaqqq") == "2,1,0"
    assert task.outcome(problem, "AB") == "invalid"
    # the greedy optimum against every word of liked letters (others never help)
    best = max(
        float(task.scalarize(task.reward(problem, "".join(word))))
        for n in range(1, 7)
        for word in itertools.combinations_with_replacement("abc", n)
    )
    assert task.optimum_scalar() == pytest.approx(best)
    assert task.solved(problem, task.reward(problem, "aabbcc"))
    assert not task.solved(problem, task.reward(problem, "aaaaab"))


def test_each_tasks_vote_key_is_its_outcome_for_the_answers_that_may_vote():
    """maj@k's votes: code only programs that pass the shown examples (by behaviour), every maze
    route, persona's valid words."""
    code = CodeTask()
    problem = code.problems("train", 1, random.Random(3))[0]
    t1, t2 = problem[:2]
    swapped = f"(+ (< x {t2}) (< x {t1}))"
    assert code.vote_key(problem, swapped) == code.outcome(problem, code.program_text((t1, t2)))
    # a program that contradicts an example cannot vote, nor can text that does not parse
    assert not code.valid(problem, "(< x 0)") and code.vote_key(problem, "(< x 0)") is None
    assert code.vote_key(problem, "(< x") is None
    maze = MazeTask()
    seed = maze.problems("train", 1, random.Random(0))[0]
    assert maze.vote_key(seed, "") == maze.outcome(seed, "") == "stopped"
    persona = PersonaTask(num_personas=3, answer_len=6)
    assert persona.vote_key(("a", "b", "c"), "aabxyz") == "2,1,0"
    assert persona.vote_key(("a", "b", "c"), "AB") is None


# ---- Settings and runs


def test_historical_exploration_on_fresh_problems_is_refused_in_one_line(tmp_path):
    with pytest.raises(ConfigError, match="needs a finite training set"):
        tiny(tmp_path, "algo=ucb_con")
    with pytest.raises(ConfigError, match="dynamic_sampling does not go with"):
        tiny(tmp_path, "algo=batch_explore", "dynamic_sampling=2")
    tiny(tmp_path, "algo=batch_explore")  # batch exploration needs no history
    tiny(tmp_path, "algo=ucb_con", "train_problems=4")


def test_train_problems_zero_draws_fresh_problems_as_before(tmp_path):
    """The default keeps today's draws: make_run builds no set and touches no random stream."""
    cfg = tiny(tmp_path, "algo=grpo")
    run = trainer.make_run(cfg, trainer.make_task(cfg["task"]), policy=_policy(cfg))
    assert run.train_set is None and run.history is None
    assert run.rng.getstate() == random.Random(cfg["seed"]).getstate()


def test_a_screened_set_mixes_solvable_and_unsolved_and_can_be_drawn_again():
    task = CodeTask()

    def solved(problems):  # a stand-in for the start's samples: a fixed rule on the problem
        return [sum(p) % 3 == 0 for p in problems]

    screened = exploration.ScreenedTrainingSet(
        task, 10, random.Random(5), solved=solved, solvable_share=0.3
    )
    flags = solved(screened.problems)
    assert len(screened.problems) == 10 and sum(flags) == 3  # round(10 x 0.3) the start solves
    assert len({repr(p) for p in screened.problems}) == 10
    drawn = lab_exploration.candidates(task, random.Random(5), max(screened.positions) + 1)
    assert [drawn[i] for i in screened.positions] == screened.problems
    # the first candidates in draw order: each part takes them as they come
    unsolved = [p for p in drawn if not solved([p])[0]]
    assert [p for p in screened.problems if not solved([p])[0]] == unsolved[:7]
    assert sorted(screened.next(10), key=repr) == sorted(screened.problems, key=repr)  # an epoch
    assert screened.state_dict()["positions"] == screened.positions
    with pytest.raises(ConfigError, match="lower train_solvable_share or raise"):
        exploration.ScreenedTrainingSet(
            task, 4, random.Random(0), lambda ps: [False] * len(ps), 0.5
        )


def test_train_screens_its_set_with_the_start_and_draws_it_again_on_resume(tmp_path):
    with pytest.raises(ConfigError, match="screens a finite training set"):
        tiny(tmp_path, "algo=grpo", "train_problems=0", "train_screen_answers=2")
    with pytest.raises(ConfigError, match=r"train_solvable_share must be in \[0, 1\]"):
        tiny(tmp_path, "algo=ucb_con", "train_problems=4", "train_solvable_share=1.5")
    settings = ["algo=ucb_con", "train_problems=4", "train_screen_answers=2"]
    cfg = tiny(tmp_path, *settings, "train_solvable_share=0")
    task = trainer.make_task(cfg["task"], **cfg["task_options"])
    policy = _policy(cfg)  # untrained: it solves nothing, so every problem is an unsolved one
    runs = [trainer.make_run(cfg, task, policy) for _ in range(2)]
    assert isinstance(runs[0].train_set, exploration.ScreenedTrainingSet)
    assert runs[0].train_set.problems == runs[1].train_set.problems  # a resume draws it again
    assert list(runs[0].history.counts) == [repr(p) for p in runs[0].train_set.problems]
    with pytest.raises(ConfigError, match="lower train_solvable_share"):
        trainer.make_run(tiny(tmp_path, *settings, "train_solvable_share=1"), task, policy)


def _policy(cfg):
    from model import Tokenizer, build_model
    from policy import Policy

    tok = Tokenizer(cfg["tokenizer"])
    model = build_model(cfg["model"], cfg["block_size"], tok.vocab_size, device="cpu")
    return Policy.from_config(model, tok, cfg, device="cpu", answers_per_rollout=1)


def test_outcome_counts_survive_sigkill_and_resume(baseline, tmp_path):
    """A ucb_con run killed with SIGKILL after its first checkpoint resumes to the same metrics,
    weights and outcome counts as the run that was never interrupted. Only the killed run is a
    process of its own; the others train its settings in the test's process (train(), without the
    report train.py's main adds at the end)."""
    ws = baseline["ws"]  # the cached tiny warm start
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    # 6 steps, not RUN's 12: a checkpoint at 3, killed at 4, resumed to 6
    settings = ("algo=ucb_con", "train_problems=4", "steps=6")

    trainer.train(run_config(whole, ws, *settings))
    sigkill_when(
        {
            popen(cli(killed, ws, *settings)): lambda: (
                (killed / "ckpt.pt").exists()
                and b'"kind": "train", "step": 4,' in read(killed / "metrics.jsonl")
            )
        }
    )
    assert not (killed / "final.pt").exists(), "the run finished before it could be killed"
    trainer.train(run_config(killed, ws, *settings, "resume=true"))
    assert read(killed / "metrics.jsonl") == read(whole / "metrics.jsonl")
    a, b = load_checkpoint(str(whole / "final.pt")), load_checkpoint(str(killed / "final.pt"))
    assert a["history"] == b["history"] and a["train_set"] == b["train_set"]
    assert sum(a["history"]["samples"].values()) == 6 * 2 * 4  # steps x prompts x group
