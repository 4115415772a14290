"""
Outcome-based exploration (Song, Kempe and Munos 2025, arXiv 2509.06941): the field's other answer
to the collapse VPO addresses. Where VPO asks one rollout for a set of answers that specialize,
these methods keep GRPO's single answer and add a bonus for answers whose OUTCOME is rare.

An outcome is what the verifier sees of an answer (`task.outcome`), far coarser than its text: the
code task's outputs on its whole domain (two programs computing one function are one outcome), the
maze's item tiles collected and whether the route arrived, persona's count of each liked letter.

- `ucb_bonuses`: historical exploration, b = min(1, sqrt(1 / N(x, a))), N(x, a) the number of times
  outcome a was sampled on problem x in earlier steps (so a new outcome gets the cap, 1). It needs a
  problem seen more than once: a finite training set visited in epochs (train.py's
  `train_problems`).
- `ucb_mean_bonuses`: b minus the mean of the group's OTHER rollouts' bonuses (UCB-Mean).
- `ucb_con_bonuses`: b minus a constant b0 (UCB-Con): an outcome seen more than 1 / b0^2 times is
  pushed down, even when it is correct.
- `batch_bonuses`: batch exploration, -(1/G) x the number of the group's other rollouts with the
  same outcome: a penalty for repeating an outcome within the group, no history needed.
- `exploration_advantages`: GRPO's group z-score plus coef x a bonus (added after the z-score, or
  before it: an open choice of the paper), no bonus in a group whose answers all solve the problem
  (`explore_solved_groups` turns it on there).
- `OutcomeHistory`: the counts N(x, a) and which problems were solved: run state, saved with
  every checkpoint, and the numbers behind "RL as a sampling process".
- `ScreenedTrainingSet`: a finite training set in which a chosen share of the problems are ones
  the starting policy solves at least once in a few samples (`train_screen_answers`): under the
  outcome reward alone a problem never solved gives no signal, and a set of mostly such problems
  teaches nothing; the rest stay unsolved by the start, where the transfer shows.

Deliberately left out: the paper's analysis of outcome-based bandits, bonuses on reasoning text
(the outcome is all a bonus sees), any count shared across problems.
"""

import dataclasses
import math

import torch

from config import ConfigError
from grpo import grpo_advantages
from rollouts import sample_rollouts, solves
from tasks import TrainingSet
from vpo import leave_one_out_advantages


def ucb_bonuses(counts: torch.Tensor) -> torch.Tensor:
    """counts (P, G): N(x, a) of each rollout's outcome -> (P, G) bonuses min(1, sqrt(1 / N)).
    An outcome never counted (N = 0) gets the largest bonus, 1."""
    # N = 0 is read as 1: its bonus is 1, the cap
    return counts.double().clamp(min=1.0).rsqrt()


def ucb_mean_bonuses(counts: torch.Tensor) -> torch.Tensor:
    """counts (P, G) -> (P, G): each UCB bonus minus the mean bonus of the group's other G - 1
    rollouts. A group where every outcome is equally rare gets zeros: only relative rarity pays."""
    # RLOO's baseline on the bonuses: the student tree runs the student's (exercise loo)
    return leave_one_out_advantages(ucb_bonuses(counts))


def ucb_con_bonuses(counts: torch.Tensor, baseline: float) -> torch.Tensor:
    """counts (P, G) -> (P, G): each UCB bonus minus the constant `baseline` (b0)."""
    return ucb_bonuses(counts) - baseline


def batch_bonuses(outcomes) -> torch.Tensor:
    """outcomes: P lists of G hashable outcomes -> (P, G) penalties: -(1/G) x how many of the
    group's other rollouts share this rollout's outcome (0 for an outcome seen once)."""
    rows = []
    for group in outcomes:
        G = len(group)
        rows.append([-(group.count(a) - 1) / G for a in group])
    return torch.tensor(rows, dtype=torch.float64)


def exploration_advantages(scores, bonus, coef, std="group", solved=None, at="after"):
    """scores (P, G) and bonus (P, G) -> (P, G): GRPO's advantage of the scores plus coef x bonus.
    at="after" (the paper's objective): the bonus is added after the z-score, so it keeps its size
    whatever the group's spread. at="before": the bonus joins the scores and the sum is z-scored,
    so the bonus weighs more in a group whose scores barely differ (a flat group's advantage is the
    bonus alone, at unit scale). solved (P, G) bools, if given: a group whose rollouts ALL solved
    the problem gets no bonus, so exploration never pushes a policy off a problem it mastered."""
    bonus = bonus.to(scores.dtype)
    if solved is not None:
        bonus = torch.where(solved.all(dim=1, keepdim=True), torch.zeros_like(bonus), bonus)
    if at == "before":
        return grpo_advantages(scores + coef * bonus, std=std)
    return grpo_advantages(scores, std=std) + coef * bonus


class OutcomeHistory:
    """Per training problem (keyed by its repr): how often each outcome was sampled, how many
    answers were drawn, and after how many the problem was first solved. Plain dicts of strings and
    ints, so a checkpoint that holds them still loads with weights_only=True."""

    def __init__(self, problems=()):
        self.counts = {repr(p): {} for p in problems}  # problem -> {outcome: times sampled}
        self.samples = {repr(p): 0 for p in problems}  # problem -> answers drawn so far
        self.solved_at = {}  # problem -> the answer count at which it was first solved

    def record(self, problems, outcomes, solved, count_current=False):
        """problems: P problems; outcomes: P x G x m outcome strings (None for a missing answer);
        solved: P x G x m bools -> (P, G): N(x, a) of each rollout's FIRST answer's outcome in the
        earlier steps (what the UCB bonuses read); then this batch's answers are counted too.
        count_current: return N after counting this batch (so N >= 1, and an outcome drawn twice in
        this step's group already counts 2)."""
        earlier = self.first_counts(problems, outcomes)
        for problem, group, group_solved in zip(problems, outcomes, solved):
            key = repr(problem)
            counts = self.counts.setdefault(key, {})
            for rollout, rollout_solved in zip(group, group_solved):
                for outcome, ok in zip(rollout, rollout_solved):
                    if outcome is None:
                        continue
                    counts[outcome] = counts.get(outcome, 0) + 1
                    self.samples[key] = self.samples.get(key, 0) + 1
                    if ok and key not in self.solved_at:
                        self.solved_at[key] = self.samples[key]
        return self.first_counts(problems, outcomes) if count_current else earlier

    def first_counts(self, problems, outcomes):
        """(P, G): how often each rollout's first answer's outcome was counted on its problem."""
        return torch.tensor(
            [
                [self.counts.get(repr(p), {}).get(rollout[0], 0) for rollout in group]
                for p, group in zip(problems, outcomes)
            ],
            dtype=torch.float64,
        )

    def summary(self):
        """What the sampling process has found so far, over the training set: the share of problems
        solved at least once, the mean number of distinct outcomes per problem (all, and on the
        problems still unsolved), and the mean number of answers drawn per problem."""
        keys = list(self.counts)
        unsolved = [k for k in keys if k not in self.solved_at]
        return {
            "explore_solved_share": len(self.solved_at) / max(1, len(keys)),
            "explore_distinct": mean([len(self.counts[k]) for k in keys]),
            "explore_distinct_unsolved": mean([len(self.counts[k]) for k in unsolved]),
            "explore_samples": mean([self.samples[k] for k in keys]),
        }

    def state_dict(self):
        return {"counts": self.counts, "samples": self.samples, "solved_at": self.solved_at}

    def load_state_dict(self, state):
        self.counts = {k: dict(v) for k, v in state["counts"].items()}
        self.samples = dict(state["samples"])
        self.solved_at = dict(state["solved_at"])


def mean(values):
    return sum(values) / len(values) if values else math.nan


# ---- A training set screened by the starting policy ----

SCREEN_BATCH = 64  # candidates drawn (and sampled) at a time
SCREEN_LIMIT = 50  # candidates drawn at most, as a multiple of the set's size
# the screen's own random stream (seed + this): the answers that chose the set are never the ones
# a measurement of the start draws with the run's seed
SCREEN_SEED = 1_000_003


def candidate_batches(task, rng):
    """Candidate training problems drawn from rng, SCREEN_BATCH at a time, without end: the one
    sequence ScreenedTrainingSet screens (and lab/exploration.py draws again)."""
    while True:
        yield task.problems("train", SCREEN_BATCH, rng)


def solved_within(policy, task, answers, seed):
    """-> a function: problems -> one bool per problem, whether any of `answers` single answers of
    the policy (sampled as written, from a stream seeded by `seed`) solves it (task.solved)."""
    single = dataclasses.replace(policy.seeded(seed), answers_per_rollout=1)

    def check(problems):
        batch = sample_rollouts(single, task, problems, G=answers, as_written=True)
        rewards = batch["rewards"][:, :, 0]  # (P, answers, D)
        return [bool(solves(task, p, rewards[i]).any()) for i, p in enumerate(problems)]

    return check


class ScreenedTrainingSet(TrainingSet):
    """A finite training set of `size` problems: round(size x solvable_share) of them ones that
    `solved` (a function: problems -> bools, e.g. solved_within's) says the start solves, the rest
    ones it does not, taken in the order candidates are drawn (repeats skipped). Visited in epochs
    like TrainingSet; its state also names each problem's place among the candidates, so the set
    can be drawn again without the policy (candidate_batches)."""

    def __init__(self, task, size, rng, solved, solvable_share):
        wanted = {True: round(size * solvable_share)}
        wanted[False] = size - wanted[True]
        chosen = {True: [], False: []}  # (position among the candidates, problem)
        seen, drawn = set(), 0
        batches = candidate_batches(task, rng)
        while any(len(chosen[k]) < wanted[k] for k in chosen):
            if drawn >= SCREEN_LIMIT * size:  # a setting the start cannot meet, not a bug
                raise ConfigError(
                    f"{drawn} candidate problems gave {len(chosen[True])} the start solves and "
                    f"{len(chosen[False])} it does not, of {wanted[True]} and {wanted[False]} "
                    "wanted: lower train_solvable_share or raise train_screen_answers"
                )
            batch = next(batches)
            for i, (problem, ok) in enumerate(zip(batch, solved(batch))):
                if repr(problem) not in seen and len(chosen[ok]) < wanted[ok]:
                    seen.add(repr(problem))
                    chosen[ok].append((drawn + i, problem))
            drawn += len(batch)
        picked = sorted(chosen[True] + chosen[False])
        self.positions = [i for i, _ in picked]
        self.problems = [problem for _, problem in picked]
        self.rng = rng
        self.order = []
        self.epoch = 0

    def state_dict(self):
        return {**super().state_dict(), "positions": self.positions}
