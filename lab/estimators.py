"""What each advantage really optimizes: its expected update against the exact gradient of the
objective it claims, on tabular policies small enough to enumerate.

    python lab/estimators.py                     # the table, and the figure in docs/figures/
    python lab/estimators.py --history 0         # the exploration bonuses at their first step
    python lab/estimators.py --methods ucb ucb_con batch_explore --explore-coef 1.0
    python lab/estimators.py --sequential        # per-answer credit on sets written in sequence

A policy here is a softmax over a handful of answers (its logits are the parameters), each answer
with a fixed reward vector, in the shapes of the project's tasks (CASES). A rollout of a set method
holds m answers drawn from the same softmax; a repeat inside a rollout scores the zero vector, as
in training. For every algorithm in train.ADVANTAGES and the two of grpo_vs_vpo.py:

  a. the exact gradient of the objective the method claims (CLAIMS), by enumeration: a sum over
     every rollout of its probability, its value and its score c - m pi (c: how many times the
     rollout holds each answer; the gradient of a rollout's log-probability w.r.t. the logits);
  b. the expected update of the method's estimator: the mean over groups of sum_g A_g (c_g - m pi),
     with A from the project's own advantage function called on the tensors train.py passes it
     (rewards (P, G, m, D), scalar (P, G, m), weights (P, N, D), cfg), every group of G rollouts
     enumerated with its probability (G = 8 for single answers, G = 4 for sets of m = 3);
  c. their cosine and the ratio of their norms;
  d. the fixed point: plain ascent along the expected update (and, beside it, along the claimed
     objective's gradient) from the same start, until the probabilities stop moving.
After the table: VPO's and vpo_loo's expected update at their claim's optimum, sampled at
train.py's own G and weightings (where the enumeration's stand-ins below could mislead); and the
pitfalls the field has hit, each beside its sound form (tests/test_lab_estimators.py holds them).
The figure: the fixed points of FIGURE_METHODS on the conflict case, as bars per answer.

--sequential (its own section below): a policy that writes its m answers one after another, one
softmax per prefix, beside its twin whose answers are independent; for each per-answer credit form
(the set's score, reward-to-go, prefix gain, the pass@k marginal) and baseline (the group z-score,
mean, leave-one-out), the same cosine, norm ratio and fixed point, and the variance of a group's
update, all exact; written to docs/figures/estimators_sequential/.

What stands in for what train.py draws, and why: VPO's N = 100 fresh Dirichlet weightings per
group are replaced by one fixed set of WEIGHTINGS scrambled Sobol points on the simplex
(vpo.sample_weights' sobol sampler, seed 0), in the objective and the estimator alike, so that the
table isolates what the z-score and the max do; random-weight GRPO's one weighting per group is
averaged over RANDOM_WEIGHTINGS such points. The historical exploration bonuses read counts N(x, a)
of earlier samples: we take `history` earlier answers drawn from the current policy, counted at
their expectation, N(x, a) = history * pi(a) (history = 0 is the first step). Goal-conditioned
GRPO's advantage is random-weight GRPO's; a tabular policy cannot read the weighting in its prompt,
so its row is that one's.

Deliberately left out: the clipped ratio and several updates per batch (the first update of a
batch is a plain policy gradient), Adam (ascent is plain gradient ascent), the token mean of the
loss (an update here is a sum over rollouts), prompts (one problem, one softmax).
"""

import argparse
import functools
import itertools
import math
import os
import sys
import time
from typing import NamedTuple

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, HERE)  # so that `python lab/estimators.py` finds the reference

import numpy as np  # noqa: E402
import torch  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

import grpo  # noqa: E402
import grpo_vs_vpo  # noqa: E402
import metrics  # noqa: E402
import train  # noqa: E402
import vpo  # noqa: E402
from lab.plots import color  # noqa: E402

WEIGHTINGS = 512  # the fixed weightings of VPO's objective and estimator
RANDOM_WEIGHTINGS = 64  # the weightings random-weight GRPO's expectation averages over
SET_ANSWERS = 3  # m of the set methods, train.py's answers_per_rollout
SINGLE_GROUP = 8  # G of the single-answer methods, train.py's group_size
SET_GROUP = 4  # G of the set methods: 8,855 groups of 4 sets are enumerated; 8 would be 2.2M
HISTORY = 32  # earlier answers behind the exploration counts: four visits of a group of 8
SAMPLED_CHUNK = 2000  # groups per advantage call when sampling
FIGURE_METHODS = ["grpo", "vpo", "max_at_k", "ucb_con"]


class Case(NamedTuple):
    answers: list  # the answers' names
    rewards: list  # (A, D): each answer's reward vector
    start: list  # (A,): the logits ascent starts from
    scalar_weights: list = None  # the fixed scalarization's weights; None: the mean


# The project's task shapes. conflict: persona's two likes, the maze's gold and diamond corners (two
# specialists and a balanced compromise that wins the mean); code: one component per hidden test,
# one program passing all; collinear: the control, every answer on one ray, so that every
# weighting ranks them alike; rare: the best answer drawn 2% of the time.
CASES = {
    "conflict": Case(
        ["left", "right", "balanced", "weak"],
        [[1.0, 0.0], [0.0, 1.0], [0.6, 0.6], [0.2, 0.2]],
        start=[0.0, 0.0, 0.0, 0.0],
    ),
    "code": Case(
        ["all", "three", "half_a", "half_b"],
        [[1, 1, 1, 1], [1, 1, 1, 0], [1, 1, 0, 0], [0, 0, 1, 1]],
        start=[0.0, 0.0, 0.0, 0.0],
    ),
    "collinear": Case(
        ["top", "high", "low", "bottom"],
        [[1.0, 0.9], [0.7, 0.63], [0.4, 0.36], [0.1, 0.09]],
        start=[0.0, 0.0, 0.0, 0.0],
    ),
    "rare": Case(
        ["best", "near_a", "near_b", "poor"],
        [[1.0, 1.0], [0.8, 0.5], [0.5, 0.8], [0.2, 0.2]],
        start=[math.log(0.02), math.log(0.33), math.log(0.33), math.log(0.32)],
    ),
}

# What each method claims to maximize (docs/METHOD.md), as an objective of this module:
# mean: E[s(r)], the fixed scalarization of one answer; set: E over sets of m of the set score
# E_w[max_j w . r_j]; sum: E over sets of the summed scalarization of the set's distinct answers;
# max@k: E[best s of max_k answers]; log_success: log P(the answer reaches the best scalarization).
CLAIMS = {
    "grpo": "mean",
    "vpo": "set",
    "multi_rlvr": "sum",
    "random_weights": "mean",  # E_w[w . r] is the mean under uniform weightings
    "goal_conditioned": "mean",
    "vpo_loo": "set",
    "max_at_k": "max@k",
    "gdpo": "mean",  # every component at once: their mean
    "maxrl": "log_success",
    "rloo": "mean",
    "ucb": "mean",  # the bonus is an exploration device on GRPO's objective, not a new target
    "ucb_mean": "mean",
    "ucb_con": "mean",
    "batch_explore": "mean",
    "one_file grpo": "mean",
    "one_file vpo": "set",
}
ONE_FILE = {"one_file grpo": "grpo", "one_file vpo": "vpo"}


def method_answers(method):
    """m of a method's rollouts."""
    if method in ONE_FILE:
        return SET_ANSWERS if ONE_FILE[method] == "vpo" else 1
    return SET_ANSWERS if method in train.SET_ALGOS else 1


# ---- Enumeration: rollouts, groups and their probabilities ----


class Rollouts(NamedTuple):
    """Every distinct rollout of m answers, as the multiset of answers it holds (order within a
    rollout changes neither its score nor any advantage here)."""

    members: list  # T tuples of m answer indices, sorted
    counts: np.ndarray  # (T, A): how many times each rollout holds each answer
    log_ways: np.ndarray  # (T,): log of the number of orders that write it


def rollouts_of(num_answers, m):
    members = list(itertools.combinations_with_replacement(range(num_answers), m))
    counts = np.array([np.bincount(t, minlength=num_answers) for t in members], dtype=float)
    return Rollouts(members, counts, log_multinomial(counts))


def log_multinomial(counts):
    """(K, n) counts -> (K,): log of (sum of the row)! / prod of its entries'!."""
    counts = np.asarray(counts, dtype=float)
    lgamma = np.vectorize(math.lgamma)
    return lgamma(counts.sum(1) + 1) - lgamma(counts + 1).sum(1)


def groups_of(num_rollouts, G):
    """Every group of G rollouts as a multiset: (K, G) rollout indices, (K,) log of its orders."""
    members = np.array(list(itertools.combinations_with_replacement(range(num_rollouts), G)))
    counts = np.stack([np.bincount(g, minlength=num_rollouts) for g in members])
    return members, log_multinomial(counts)


def softmax(logits):
    z = np.asarray(logits, dtype=float)
    e = np.exp(z - z.max())
    return e / e.sum()


def rollout_log_probs(rollouts, pi):
    """log P of each distinct rollout under the policy pi (A,)."""
    with np.errstate(divide="ignore"):
        return rollouts.log_ways + rollouts.counts @ np.log(pi)


def rollout_rewards(case, rollouts):
    """(T, m, D) reward vectors of each rollout's answers, a repeat scoring the zero vector."""
    R = np.asarray(case.rewards, dtype=float)
    out = np.zeros((len(rollouts.members), len(rollouts.members[0]), R.shape[1]))
    for t, members in enumerate(rollouts.members):
        for j, a in enumerate(members):
            if a not in members[:j]:
                out[t, j] = R[a]
    return out


def scalarization(case):
    """(D,) weights of the case's fixed scalarization."""
    D = len(case.rewards[0])
    return np.asarray(case.scalar_weights or [1.0 / D] * D, dtype=float)


def fixed_weightings(dim, n=WEIGHTINGS):
    """(n, D) scrambled Sobol points on the simplex, the same on every call."""
    generator = torch.Generator().manual_seed(0)
    return vpo.sample_weights(1, n, dim, sampler="sobol", generator=generator)[0].double()


def solving(case):
    """(A,) bools: the answers that reach the best fixed scalarization (task.solved's meaning)."""
    s = np.asarray(case.rewards, dtype=float) @ scalarization(case)
    return s >= s.max() - 1e-12


class Enumeration(NamedTuple):
    """Every group of G rollouts of m answers a case allows, as train.py's tensors."""

    rollouts: Rollouts
    groups: np.ndarray  # (K, G): each group's rollouts, indices into rollouts.members
    log_ways: np.ndarray  # (K,): log of the number of orders that draw the group
    counts: np.ndarray  # (K, G, A): c of each rollout of each group
    rewards: torch.Tensor  # (K, G, m, D): the `rewards` train.py passes an advantage
    scalar: torch.Tensor  # (K, G, m): the fixed scalarization of every answer
    first: np.ndarray  # (K, G): each rollout's first answer (what an outcome is read from)


def enumerate_groups(case, m, G):
    rollouts = rollouts_of(len(case.answers), m)
    groups, log_ways = groups_of(len(rollouts.members), G)
    rewards = torch.from_numpy(rollout_rewards(case, rollouts)[groups])
    scalar = rewards @ torch.from_numpy(scalarization(case))
    first = np.array([t[0] for t in rollouts.members])[groups]
    return Enumeration(
        rollouts, groups, log_ways, rollouts.counts[groups], rewards, scalar=scalar, first=first
    )


def group_probabilities(enum, pi):
    """(K,) the probability of drawing each group, in any order."""
    log_p = enum.log_ways + rollout_log_probs(enum.rollouts, pi)[enum.groups].sum(1)
    return np.exp(log_p)


def update_of(adv, counts, pi):
    """Per group sum_g A_g (c_g - m pi): adv (K, G), counts (K, G, A) -> (K, A)."""
    m = counts[0, 0].sum()
    return np.einsum("kg,kga->ka", adv, counts) - (adv.sum(1) * m)[:, None] * pi


def expected_update_of(adv, enum, pi):
    """The mean over groups of sum_g A_g (c_g - m pi), exactly: adv (K, G) of every group."""
    return group_probabilities(enum, pi) @ update_of(np.asarray(adv), enum.counts, pi)


def update_variance(adv, enum, pi):
    """The variance of one group's update around its mean, summed over the answers: what a batch
    of groups averages away."""
    per_group = update_of(np.asarray(adv), enum.counts, pi)
    return float(
        group_probabilities(enum, pi)
        @ ((per_group - expected_update_of(adv, enum, pi)) ** 2).sum(1)
    )


# ---- The advantages, as train.py computes them ----


def advantages(method, case, batch, pi, history=HISTORY, weights=None, cfg=None):
    """batch: (rewards (P, G, m, D), scalar (P, G, m), first answers (P, G)) -> (P, G) numpy, from
    train.ADVANTAGES[method].advantage (or grpo_vs_vpo.advantages) with train.DEFAULTS' cfg.
    weights (P, N, D): the weightings train.py would draw; None: the fixed ones (the docstring).
    cfg: settings that replace train.DEFAULTS' (explore_coef, scale_rewards, max_k, ...)."""
    rewards, scalar, first = batch
    P, D = rewards.shape[0], rewards.shape[-1]
    cfg = {**train.DEFAULTS, **(cfg or {})}
    if method in ONE_FILE:
        weights = fixed_weightings(D).expand(P, -1, -1) if weights is None else weights
        return grpo_vs_vpo.advantages(ONE_FILE[method], rewards, weights).numpy()
    algorithm = train.ADVANTAGES[method]
    if weights is None and method in ("random_weights", "goal_conditioned"):
        # one weighting per group in training: the expectation averages over RANDOM_WEIGHTINGS
        n = RANDOM_WEIGHTINGS
        weights = fixed_weightings(D, n).repeat_interleave(P, dim=0)[:, None]  # (n P, 1, D)
        adv = algorithm.advantage(rewards.repeat(n, 1, 1, 1), scalar.repeat(n, 1, 1), weights, cfg)
        return adv.reshape(n, P, -1).mean(0).numpy()
    weights = fixed_weightings(D).expand(P, -1, -1) if weights is None else weights
    extra = {"outcomes": outcomes_of(case, first, pi, history)} if algorithm.explores else {}
    return algorithm.advantage(rewards, scalar, weights, cfg, **extra).numpy()


def outcomes_of(case, first, pi, history):
    """train.Outcomes of rollouts whose first answers are `first` (P, G): an answer is its own
    outcome; the counts are those of `history` earlier answers drawn from pi, at their
    expectation."""
    counts = torch.from_numpy(history * pi[first])
    solved = torch.from_numpy(solving(case)[first])
    names = [[case.answers[a] for a in row] for row in first]
    return train.Outcomes(names, solved, counts)


def depends_on_policy(method, history):
    """Whether a method's advantages move with the policy (the counts of the historical ones)."""
    explores = method in train.ADVANTAGES and train.ADVANTAGES[method].explores == "historical"
    return explores and history > 0


class Estimator:
    """A method on a case: its enumerated groups and their advantages, computed once where they do
    not depend on the policy."""

    def __init__(self, method, case, history=HISTORY, cfg=None):
        self.method, self.case, self.history, self.cfg = method, case, history, cfg
        m = method_answers(method)
        self.enum = enumerate_groups(case, m, SET_GROUP if m > 1 else SINGLE_GROUP)
        self.fixed_adv = None

    def advantages(self, pi):
        enum = self.enum
        if self.fixed_adv is not None:
            return self.fixed_adv
        adv = advantages(
            self.method,
            self.case,
            (enum.rewards, enum.scalar, enum.first),
            pi,
            history=self.history,
            cfg=self.cfg,
        )
        if not depends_on_policy(self.method, self.history):
            self.fixed_adv = adv
        return adv

    def expected_update(self, logits):
        pi = softmax(logits)
        return expected_update_of(self.advantages(pi), self.enum, pi)


def sampled_update(method, case, logits, num_groups, G=None, seed=0, train_weightings=False):
    """The same expectation estimated from num_groups groups of G rollouts (None: the enumeration's
    G) drawn from the softmax -> (mean (A,), its standard error (A,)). History: HISTORY.
    train_weightings: each group draws its own weightings as train.py's sample_round does (N =
    num_weights Dirichlet draws for a set method, one for the others)."""
    pi = softmax(logits)
    m = method_answers(method)
    G = G or (SET_GROUP if m > 1 else SINGLE_GROUP)
    rng = np.random.default_rng(seed)
    generator = torch.Generator().manual_seed(seed)
    R = np.asarray(case.rewards, dtype=float)
    per_group = []
    for start in range(0, num_groups, SAMPLED_CHUNK):  # in chunks: (P, G, N, m) stays small
        answers = rng.choice(len(pi), size=(min(SAMPLED_CHUNK, num_groups - start), G, m), p=pi)
        rewards = R[answers]  # (P, G, m, D)
        for j in range(1, m):  # a repeat inside a rollout scores the zero vector
            repeat = (answers[..., :j] == answers[..., j : j + 1]).any(-1)
            rewards[..., j, :][repeat] = 0.0
        rewards = torch.from_numpy(rewards)
        scalar = rewards @ torch.from_numpy(scalarization(case))
        weights = None
        if train_weightings:
            N = train.DEFAULTS["num_weights"] if m > 1 else 1
            weights = vpo.sample_weights(len(answers), N, R.shape[1], generator=generator).double()
        batch = (rewards, scalar, answers[..., 0])
        adv = advantages(method, case, batch, pi, weights=weights)
        counts = np.stack([(answers == a).sum(-1) for a in range(len(pi))], axis=-1)
        per_group.append(update_of(adv, counts.astype(float), pi))  # (P, A)
    per_group = np.concatenate(per_group)
    return per_group.mean(0), per_group.std(0, ddof=1) / math.sqrt(num_groups)


# ---- The objectives the methods claim, exactly ----


class Objective(NamedTuple):
    """J = transform(sum over rollouts of m answers of P(rollout) value(rollout))."""

    rollouts: Rollouts
    values: np.ndarray  # (T,)
    log: bool  # J is the log of the sum (MaxRL's log-probability of success)


def objective_of(case, claim):
    """The claim's Objective on a case (CLAIMS names the claims)."""
    m = {"mean": 1, "log_success": 1, "max@k": train.DEFAULTS["max_k"]}.get(claim, SET_ANSWERS)
    rollouts = rollouts_of(len(case.answers), m)
    rewards = torch.from_numpy(rollout_rewards(case, rollouts))  # (T, m, D), repeats zeroed
    scalar = (rewards @ torch.from_numpy(scalarization(case))).numpy()  # (T, m)
    if claim == "set":
        weights = fixed_weightings(rewards.shape[-1])[None]
        values = vpo.set_scores(rewards[None], weights)[0].numpy()
    elif claim == "log_success":
        values = solving(case)[[t[0] for t in rollouts.members]].astype(float)
    elif claim in ("mean", "sum"):
        values = scalar.sum(1)  # one answer; or the set's distinct answers
    elif claim == "max@k":
        # k draws of one answer each: the repeats are draws too, so the max reads their values
        R = np.asarray(case.rewards, dtype=float) @ scalarization(case)
        values = np.array([R[list(t)].max() for t in rollouts.members])
    else:
        raise ValueError(f"unknown claim '{claim}'")
    return Objective(rollouts, values, log=claim == "log_success")


def objective_value(objective, logits):
    total = np.exp(rollout_log_probs(objective.rollouts, softmax(logits))) @ objective.values
    return math.log(total) if objective.log else total


def objective_gradient(objective, logits):
    """dJ/dlogits by enumeration: sum over rollouts of P value (c - m pi) (divided by the sum
    where J is its log)."""
    pi = softmax(logits)
    p = np.exp(rollout_log_probs(objective.rollouts, pi))
    counts = objective.rollouts.counts
    m = counts[0].sum()
    grad = (p * objective.values) @ (counts - m * pi)
    return grad / (p @ objective.values) if objective.log else grad


# ---- Fixed points: plain ascent until the probabilities stop moving ----

ASCENT_STEPS = 3000  # the most steps of ascent
ASCENT_RATE = 0.5  # the first step's length in logits; later steps scale with the update
ASCENT_STILL = 1e-6  # a step that moves no probability by more than this ends the ascent


def ascend(direction, logits):
    """Ascent along direction(logits) -> (probabilities where it stops, steps taken). Every step is
    ASCENT_RATE x direction / |direction at the start|, so methods whose updates differ in size
    by a constant climb alike."""
    theta = np.asarray(logits, dtype=float)
    scale = np.linalg.norm(direction(theta))
    if scale < 1e-12:
        return softmax(theta), 0
    for step in range(1, ASCENT_STEPS + 1):
        moved = theta + ASCENT_RATE * direction(theta) / scale
        if np.abs(softmax(moved) - softmax(theta)).max() < ASCENT_STILL:
            return softmax(moved), step
        theta = moved
    return softmax(theta), ASCENT_STEPS


def cosine(a, b):
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    return float(a @ b / (na * nb)) if na > 1e-12 and nb > 1e-12 else float("nan")


def mass(case, pi, least=0.05):
    """Where the probability mass is: the answers holding at least `least`, largest first."""
    order = np.argsort(-pi, kind="stable")
    return " ".join(f"{case.answers[a]} {pi[a]:.2f}" for a in order if pi[a] >= least)


# ---- The table and the figure ----


class Row(NamedTuple):
    method: str
    case: str
    cosine: float  # of the expected update and the claimed objective's gradient, at the start
    norm_ratio: float  # |expected update| / |gradient|
    fixed_point: np.ndarray  # (A,) where ascent along the expected update stops
    steps: int
    optimum: np.ndarray  # (A,) where ascent along the claimed objective's gradient stops
    optimum_steps: int


def measure(methods, cases, history=HISTORY, cfg=None):
    """A Row per method and case; each claimed objective's optimum is found once per case."""
    rows, optima = [], {}
    for case_name in cases:
        case = CASES[case_name]
        for method in methods:
            objective = objective_of(case, CLAIMS[method])
            key = (case_name, CLAIMS[method])
            if key not in optima:
                climb = functools.partial(objective_gradient, objective)
                optima[key] = ascend(climb, case.start)
            estimator = Estimator(method, case, history=history, cfg=cfg)
            update = estimator.expected_update(case.start)
            gradient = objective_gradient(objective, case.start)
            ratio = np.linalg.norm(update) / np.linalg.norm(gradient)
            fixed, steps = ascend(estimator.expected_update, case.start)
            rows.append(
                Row(
                    method,
                    case_name,
                    cosine(update, gradient),
                    ratio,
                    fixed,
                    steps,
                    optimum=optima[key][0],
                    optimum_steps=optima[key][1],
                )
            )
    return rows


# ---- The pitfalls the field has hit, each on a case where it shows ----

# Every answer's components sum to 1, and the fixed scalarization is not their mean.
CONSTANT_SUM = Case(
    ["a", "b", "c", "d"],
    [[1.0, 0.0], [0.0, 1.0], [0.5, 0.5], [0.8, 0.2]],
    start=[0.0] * 4,
    scalar_weights=[0.7, 0.3],
)
BINARY = Case(["pass", "fail_a", "fail_b", "fail_c"], [[1.0], [0.0], [0.0], [0.0]], [0.0] * 4)
# Correctness (first component) plus a small style bonus; the policy is mostly right already.
SHAPED = Case(
    ["right", "right_styled", "wrong_styled", "wrong"],
    [[1.0, 0.0], [1.0, 0.02], [0.0, 0.02], [0.0, 0.0]],
    start=np.log([0.45, 0.45, 0.05, 0.05]).tolist(),
)


def others_max(chosen, j):
    """chosen (P, k) -> (P,): the best of each subset without its j-th member."""
    return torch.cat([chosen[:, :j], chosen[:, j + 1 :]], 1).max(1).values


def subset_credits(scores, k, credit):
    """Per rollout, the mean over the k-subsets of its group that hold it of credit(subset scores
    (P, k), its place j in the subset) -> (P, G)."""
    P, G = scores.shape
    total = torch.zeros_like(scores)
    for subset in itertools.combinations(range(G), k):
        chosen = scores[:, list(subset)]
        for j, i in enumerate(subset):
            total[:, i] += credit(chosen, j)
    return total / math.comb(G - 1, k - 1)


# Three per-answer credits toward E[best of k]. marginal: max(S) - max(S without i), zero for every
# answer below its subset's best, unbiased (the baseline does not depend on i's own answer);
# every_member: max(S) for each member, unbiased, non-best answers credited; best_only: max(S) for
# the best member and nothing for the others, which zeroes them without a baseline.
PASS_AT_K_CREDITS = {
    "marginal": lambda s, j: s.max(1).values - others_max(s, j),
    "every_member": lambda s, j: s.max(1).values,
    "best_only": lambda s, j: torch.where(s.max(1).indices == j, s.max(1).values, 0.0),
}


def pass_at_k_credits(case, k):
    """On a case's start: each credit's (cosine with grad E[best of k], the variance of a group's
    update over its squared mean)."""
    pi = softmax(case.start)
    enum = enumerate_groups(case, 1, SINGLE_GROUP)
    gradient = objective_gradient(objective_of(case, "max@k"), case.start)
    out = {}
    for name, credit in PASS_AT_K_CREDITS.items():
        adv = subset_credits(enum.scalar[:, :, 0], k, credit).numpy()
        update = expected_update_of(adv, enum, pi)
        out[name] = (cosine(update, gradient), update_variance(adv, enum, pi) / (update @ update))
    return out


def filtered_updates(case):
    """GRPO on the shaped reward (the sum of the components), groups kept as DAPO's dynamic
    sampling keeps them: (kept on the raw reward, kept on the shaped one, the raw gradient). Each
    is the mean update over the groups kept."""
    pi = softmax(case.start)
    enum = enumerate_groups(case, 1, SINGLE_GROUP)
    raw, shaped = enum.rewards[:, :, 0, 0], enum.rewards[:, :, 0].sum(-1)
    per_group = update_of(grpo.grpo_advantages(shaped).numpy(), enum.counts, pi)
    P = group_probabilities(enum, pi)
    kept = [(P * (x.std(1) > 0).numpy()) for x in (raw, shaped)]
    correctness = objective_of(case._replace(scalar_weights=[1.0, 0.0]), "mean")
    on_raw, on_shaped = [(p @ per_group) / p.sum() for p in kept]
    return on_raw, on_shaped, objective_gradient(correctness, case.start)


def best_at_k_from_pools(case, n, k):
    """best@k from a pool of n answers, averaged over every pool the case's start can draw ->
    (the exact E[best of k], metrics.max_at_k's mean, the bootstrap's mean: k drawn from the pool
    WITH replacement, whose j-th smallest is the max with probability (j/n)^k - ((j-1)/n)^k)."""
    pi = softmax(case.start)
    enum = enumerate_groups(case, 1, n)
    P = group_probabilities(enum, pi)
    pools = np.sort(enum.scalar[:, :, 0].numpy(), axis=1)
    unbiased = P @ np.array([metrics.max_at_k(pool, k) for pool in pools])
    j = np.arange(1, n + 1)
    bootstrap = P @ (pools @ ((j / n) ** k - ((j - 1) / n) ** k))
    return objective_value(objective_of(case, "max@k"), case.start), unbiased, bootstrap


def pitfalls():
    """Each pitfall beside its sound form, as markdown lines."""
    constant_sum = objective_gradient(objective_of(CONSTANT_SUM, "mean"), CONSTANT_SUM.start)
    gdpo = Estimator("gdpo", CONSTANT_SUM).expected_update(CONSTANT_SUM.start)
    grpo_update = Estimator("grpo", CONSTANT_SUM).expected_update(CONSTANT_SUM.start)
    maxrl = []
    for case in (BINARY, CASES["rare"]):
        gradient = objective_gradient(objective_of(case, "log_success"), case.start)
        maxrl.append(cosine(Estimator("maxrl", case).expected_update(case.start), gradient))
    credits = pass_at_k_credits(CASES["rare"], train.DEFAULTS["max_k"])
    on_raw, on_shaped, raw_gradient = filtered_updates(SHAPED)
    exact, unbiased, bootstrap = best_at_k_from_pools(CASES["conflict"], n=8, k=4)
    return [
        "| pitfall | the sound form | the pitfall |",
        "| --- | --- | --- |",
        "| components summing to one total, s = 0.7 r_1 + 0.3 r_2 | GRPO: cosine "
        f"{cosine(grpo_update, constant_sum):+.3f} | GDPO: update norm "
        f"{np.linalg.norm(gdpo):.1e} |",
        f"| MaxRL, cosine with grad log P(success) | 0/1 rewards: {maxrl[0]:+.3f} | graded (rare): "
        f"{maxrl[1]:+.3f} |",
        "| pass@4 credit on rare: cosine with grad E[best of 4], variance / mean^2 | marginal: "
        f"{credits['marginal'][0]:+.3f}, {credits['marginal'][1]:.1f} | every member: "
        f"{credits['every_member'][0]:+.3f}, {credits['every_member'][1]:.1f}; best only: "
        f"{credits['best_only'][0]:+.3f}, {credits['best_only'][1]:.1f} |",
        "| dynamic sampling, cosine with the correctness gradient | kept on the raw reward: "
        f"{cosine(on_raw, raw_gradient):+.3f} | on the shaped one: "
        f"{cosine(on_shaped, raw_gradient):+.3f} |",
        f"| best@4 from pools of 8 on conflict (exact {exact:.4f}) | metrics.max_at_k: "
        f"{unbiased:.4f} | bootstrap: {bootstrap:.4f} |",
    ]


def at_optimum(method, case_name, num_groups):
    """The method's expected update where its claimed objective peaks, at train.py's G and
    weightings (sampled) -> (the optimum (A,), the update's mean (A,), its standard error (A,)):
    an update that is not zero there has its fixed point elsewhere."""
    case = CASES[case_name]
    objective = objective_of(case, CLAIMS[method])
    optimum, _ = ascend(functools.partial(objective_gradient, objective), case.start)
    logits = np.log(np.maximum(optimum, 1e-300))
    G = train.DEFAULTS["group_size"]
    mean, se = sampled_update(method, case, logits, num_groups, G=G, seed=0, train_weightings=True)
    return optimum, mean, se


def table(rows):
    """The rows as markdown: method x case, each cell the cosine, the norm ratio and where the
    fixed point's mass is ("..." where ascent was still moving at ASCENT_STEPS); then where each
    claimed objective's optimum is."""
    cases = list(dict.fromkeys(r.case for r in rows))
    methods = list(dict.fromkeys(r.method for r in rows))
    cell = {(r.method, r.case): r for r in rows}
    head = "| {} | " + " | ".join(cases) + " |"
    rule = "| --- " * (len(cases) + 1) + "|"
    lines = [head.format("method (claims)"), rule]
    for method in methods:
        cells = []
        for case_name in cases:
            r = cell[(method, case_name)]
            fixed = mass(CASES[case_name], r.fixed_point) + moving(r.steps)
            cells.append(f"{r.cosine:+.3f}, x{r.norm_ratio:.1f}: {fixed}")
        lines.append(f"| {method} ({CLAIMS[method]}) | " + " | ".join(cells) + " |")
    lines += ["", head.format("the claim's optimum"), rule]
    for claim in dict.fromkeys(CLAIMS[m] for m in methods):
        first = next(m for m in methods if CLAIMS[m] == claim)
        optima = [
            mass(CASES[c], cell[(first, c)].optimum) + moving(cell[(first, c)].optimum_steps)
            for c in cases
        ]
        lines.append(f"| {claim} | " + " | ".join(optima) + " |")
    return "\n".join(lines)


def moving(steps):
    return " ..." if steps >= ASCENT_STEPS else ""


def draw(rows, path, case_name="conflict"):
    """Probability bars per answer: the start, and the fixed points of FIGURE_METHODS on a case."""
    case = CASES[case_name]
    shown = [r for r in rows if r.case == case_name and r.method in FIGURE_METHODS]
    bars = [("start", softmax(case.start), "warm_start")]
    bars += [(r.method, r.fixed_point, r.method) for r in shown]
    vpo_row = [r for r in shown if r.method == "vpo"]
    if vpo_row:
        bars.append(("VPO's objective: its optimum", vpo_row[0].optimum, "optimum"))
    fig = Figure(figsize=(7.5, 3.6))
    ax = fig.add_subplot()
    width = 0.8 / len(bars)
    x = np.arange(len(case.answers))
    for i, (name, pi, method) in enumerate(bars):
        ax.bar(x + (i - (len(bars) - 1) / 2) * width, pi, width, label=name, color=color(method))
    labels = [f"{a}\n{tuple(r)}" for a, r in zip(case.answers, case.rewards)]
    ax.set_xticks(x, labels)
    ax.set_ylabel("probability at the fixed point")
    ax.set_ylim(0, 1)
    ax.set_title(f"Where each expected update leads on the {case_name} case")
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.set_layout_engine(None)  # laid out: savefig need not draw it twice
    fig.savefig(path, dpi=120)


# ---- Sets written in sequence: what each per-answer credit pays for, exactly ----
#
# VPO writes its m answers one after another, answer j seeing answers 1..j-1. A tabular policy of
# that kind keeps one softmax per prefix (the answers written so far), so that every set and every
# group of G sets can still be enumerated. Its independent twin ties every prefix's logits to one
# vector: the answers are then drawn independently, as pass@k training draws them. A credit form
# pays answer j (its log-probability's score only, not the set's); the baselines come from the
# group, as train.py's would. For sets written in sequence, REINFORCE stays unbiased when answer j
# is paid the set's score minus anything fixed by the answers before j ("togo"); the table checks
# which other forms survive the step from independent answers to sequential ones.

SEQUENTIAL_CASE = Case(["left", "right", "balanced"], [[1.0, 0.0], [0.0, 1.0], [0.6, 0.6]], [])
SEQUENTIAL_SETS = (3, 2)  # m: VPO's three; two, where writing the best answer first is not best
SEQUENTIAL_GROUP = 4  # G: 27,405 groups of 4 sets of 3 (8 would be 18.2M)
# the start's logits: N(0, 0.7^2) per prefix, seed 0, so that no symmetry hides a bias
SEQUENTIAL_START_SCALE = 0.7
SEQUENTIAL_DIR = "estimators_sequential"
ZERO_STD = 1e-6  # grpo.grpo_advantages' eps: a group whose set scores are all equal has no std


def credit_of(form, R, prefix, without):
    """Each sequence's credit per answer (S, m), before the group's baseline. R (S,) the set score,
    prefix (S, m + 1) the score of the first j answers (j = 0..m), without (S, m) the score of the
    set without answer j:
    set: the set's score for every answer (VPO's); togo: the set's score minus that of the answers
    before j; gain: what j adds to the answers before it; marginal: what the set loses without j
    (pass@k training's). marginal_zeroed: the same with j's row zeroed in the training rewards,
    where a later repeat of j was already zeroed, so the set without j loses that answer too."""
    m = prefix.shape[1] - 1
    if form == "set":
        return np.repeat(R[:, None], m, axis=1)
    if form == "togo":
        return R[:, None] - prefix[:, :-1]
    if form == "gain":
        return prefix[:, 1:] - prefix[:, :-1]
    if form in ("marginal", "marginal_zeroed"):
        return R[:, None] - without[form]
    raise ValueError(f"unknown credit form '{form}'")


def group_baseline(credits, set_scores, baseline):
    """credits (K, G, m) of each group's rollouts, set_scores (K, G) -> the advantages (K, G, m).
    mean: minus the group's mean credit at the same place; loo: minus the mean of the other G - 1;
    z: the mean's, divided by the std of the group's set scores, a group whose set scores are all
    equal getting zeros (VPO's z-score for the set form); zeroed: the mean's, with those zeros
    too (scale_rewards none, as VPO's advantage drops such groups)."""
    centred = credits - credits.mean(1, keepdims=True)
    if baseline == "mean":
        return centred
    if baseline == "loo":  # vpo_loo's baseline, each place on its own (vpo.py's RLOO)
        return vpo.leave_one_out_advantages(torch.as_tensor(credits)).numpy()
    std = set_scores.std(1)[:, None, None]  # population std, as grpo.grpo_advantages
    if baseline == "z":
        return np.where(std < ZERO_STD, 0.0, centred / (std + ZERO_STD))
    if baseline == "zeroed":
        return np.where(std < ZERO_STD, 0.0, centred)
    raise ValueError(f"unknown baseline '{baseline}'")


# The rows: (credit form, baseline). value: the set's score minus its exact expectation given the
# answers before j, E[R | answers 1..j-1], a baseline no trainer has (the variance floor of togo).
SEQUENTIAL_ROWS = [
    ("set", "z"),  # VPO
    ("set", "mean"),  # VPO, scale_rewards none
    ("set", "loo"),  # vpo_loo
    ("togo", "z"),
    ("togo", "mean"),
    ("togo", "zeroed"),
    ("togo", "loo"),
    ("value", "none"),
    ("gain", "z"),
    ("gain", "mean"),
    ("gain", "loo"),
    ("marginal", "z"),
    ("marginal", "mean"),
    ("marginal", "loo"),
    ("marginal_zeroed", "loo"),
]


class Sequences:
    """Every sequence of m answers a policy can write, and what is fixed once per case: each
    sequence's prefixes, its set score, the scores of its prefixes and of the set without each
    answer (the case's rewards, repeats scoring the zero vector as in training, under the fixed
    WEIGHTINGS), and every group of G sequences."""

    def __init__(self, case, m, G=SEQUENTIAL_GROUP):
        A = len(case.answers)
        self.case, self.m, self.G, self.A = case, m, G, A
        self.prefixes = [p for j in range(m) for p in itertools.product(range(A), repeat=j)]
        index = {p: i for i, p in enumerate(self.prefixes)}
        self.seqs = np.array(list(itertools.product(range(A), repeat=m)))  # (S, m)
        # (S, m): the prefix (row of the logit table) each answer is drawn from
        self.prefix_of = np.array([[index[tuple(s[:j])] for j in range(m)] for s in self.seqs])
        raw = np.asarray(case.rewards, dtype=float)[self.seqs]  # (S, m, D) as written
        first = np.array([[s[j] not in s[:j] for j in range(m)] for s in self.seqs])
        trained = raw * first[..., None]  # a repeat scores the zero vector
        weights = fixed_weightings(raw.shape[-1])[None]  # (1, N, D)

        def score(rows):  # (S, k, D) -> (S,): the set score of each sequence's rows
            if rows.shape[1] == 0:
                return np.zeros(len(rows))
            return vpo.set_scores(torch.from_numpy(rows)[None], weights)[0].numpy()

        self.R = score(trained)
        self.prefix = np.stack([score(trained[:, :j]) for j in range(m + 1)], axis=1)
        keep = [[k for k in range(m) if k != j] for j in range(m)]
        self.without = {
            # the set of the other answers as written (a max is the same with repeats)
            "marginal": np.stack([score(raw[:, k]) for k in keep], axis=1),
            # j's row zeroed in the training rewards, whose later repeats of j are zeros already
            "marginal_zeroed": np.stack(
                [score(trained * (np.arange(m) != j)[None, :, None]) for j in range(m)], axis=1
            ),
        }
        self.members, self.log_ways = groups_of(len(self.seqs), G)  # (K, G), (K,)

    def table(self, theta):
        """The logit table (prefixes, A) of a parameter: a table itself (sequential), or one row
        shared by every prefix (independent)."""
        theta = np.asarray(theta, dtype=float)
        return np.tile(theta, (len(self.prefixes), 1)) if theta.ndim == 1 else theta

    def log_probs(self, theta):
        """(S,) log-probability of every sequence."""
        table = self.table(theta)
        log_pi = table - table.max(1, keepdims=True)
        log_pi = log_pi - np.log(np.exp(log_pi).sum(1, keepdims=True))
        return log_pi[self.prefix_of, self.seqs].sum(1)

    def scores(self, theta):
        """(S * m, parameters): the gradient of log pi(answer j | answers before j) w.r.t. theta,
        per sequence and place; an independent policy's is summed over its tied rows."""
        table = self.table(theta)
        pi = np.exp(table - table.max(1, keepdims=True))
        pi /= pi.sum(1, keepdims=True)
        S, P = len(self.seqs), len(self.prefixes)
        out = np.zeros((S, self.m, P, self.A))
        for j in range(self.m):
            rows = self.prefix_of[:, j]
            out[np.arange(S), j, rows] = -pi[rows]
            out[np.arange(S), j, rows, self.seqs[:, j]] += 1.0
        if np.asarray(theta).ndim == 1:
            out = out.sum(2)
        return out.reshape(S * self.m, -1)

    def gradient(self, theta):
        """The exact gradient of the expected set score E[R]."""
        p = np.exp(self.log_probs(theta))
        return np.repeat(p * self.R, self.m) @ self.scores(theta)

    def value(self, theta):
        """E[R] under the policy."""
        return float(np.exp(self.log_probs(theta)) @ self.R)

    def expected_given_prefix(self, theta):
        """(S, m): E[R | the answers before j], per sequence and place."""
        p = np.exp(self.log_probs(theta))
        out = np.zeros((len(self.seqs), self.m))
        for j in range(self.m):
            rows = self.prefix_of[:, j]
            mass = np.bincount(rows, weights=p, minlength=len(self.prefixes))
            total = np.bincount(rows, weights=p * self.R, minlength=len(self.prefixes))
            out[:, j] = total[rows] / np.maximum(mass[rows], 1e-300)
        return out


class SequentialCredit:
    """One (credit form, baseline) row on a Sequences: its expected update and the variance of a
    group's update, exactly. The group advantages do not depend on the policy (but value's), so
    they are laid out once as a (K, S * m) matrix: a group's weight on every (sequence, place)."""

    def __init__(self, seqs, form, baseline):
        self.seqs, self.form, self.baseline = seqs, form, baseline
        K, G = seqs.members.shape
        self.adv = None
        if form == "value":
            return
        credits = credit_of(form, seqs.R, seqs.prefix, seqs.without)[seqs.members]  # (K, G, m)
        if form == "set" and baseline in ("z", "mean", "loo"):
            # VPO's own advantages on the set scores: the project's functions
            scores = torch.from_numpy(seqs.R[seqs.members])
            own = {
                "z": grpo.grpo_advantages(scores),
                "mean": grpo.grpo_advantages(scores, std="none"),
                "loo": vpo.leave_one_out_advantages(scores),
            }[baseline]
            adv = np.repeat(own.numpy()[..., None], seqs.m, axis=2)
        else:
            adv = group_baseline(credits, seqs.R[seqs.members], baseline)
        self.adv = adv.reshape(K, -1)  # (K, G m)
        cells = seqs.members[..., None] * seqs.m + np.arange(seqs.m)  # (K, G, m)
        self.cells = cells.reshape(K, -1)  # (K, G m): the (sequence, place) of each advantage

    def rollout_advantages(self, theta):
        """value's advantages, one rollout at a time: (S, m)."""
        return self.seqs.R[:, None] - self.seqs.expected_given_prefix(theta)

    def group_probabilities(self, theta):
        seqs = self.seqs
        return np.exp(seqs.log_ways + seqs.log_probs(theta)[seqs.members].sum(1))

    def expected_update(self, theta):
        """E over groups of sum_g sum_j A_gj grad log pi(answer j of g | its prefix)."""
        seqs = self.seqs
        if self.adv is None:  # no group: G times one rollout's
            p = np.exp(seqs.log_probs(theta))
            weight = seqs.G * (p[:, None] * self.rollout_advantages(theta)).reshape(-1)
            return weight @ seqs.scores(theta)
        # each (sequence, place)'s advantage summed over the groups, weighted by their probability
        weighted = self.group_probabilities(theta)[:, None] * self.adv
        weight = np.bincount(self.cells.ravel(), weighted.ravel(), len(seqs.seqs) * seqs.m)
        return weight @ seqs.scores(theta)

    def variance(self, theta):
        """The variance of one group's update around its mean, summed over the parameters."""
        phi = self.seqs.scores(theta)  # (S m, parameters)
        gram = phi @ phi.T
        mean = self.expected_update(theta)
        if self.adv is None:  # G independent rollouts: G times one's variance
            p = np.exp(self.seqs.log_probs(theta))
            a = self.rollout_advantages(theta).reshape(len(p), -1)  # (S, m)
            cells = np.arange(len(p) * self.seqs.m).reshape(len(p), -1)
            second = np.einsum("s,si,sj,sij->", p, a, a, gram[cells[:, :, None], cells[:, None]])
            return float(self.seqs.G * (second - (mean / self.seqs.G) @ (mean / self.seqs.G)))
        a = self.adv
        second = np.einsum("ki,kj,kij->k", a, a, gram[self.cells[:, :, None], self.cells[:, None]])
        return float(self.group_probabilities(theta) @ second - mean @ mean)


def sequential_start(seqs, independent, seed=0):
    """The start: N(0, SEQUENTIAL_START_SCALE^2) logits per prefix (seed 0); the independent
    policy takes the first prefix's row (the first answer's distribution) for every answer."""
    table = np.random.default_rng(seed).normal(size=(len(seqs.prefixes), seqs.A))
    table *= SEQUENTIAL_START_SCALE
    return table[0] if independent else table


class SequentialRow(NamedTuple):
    form: str
    baseline: str
    m: int
    independent: bool
    cosine: float  # of the expected update and the exact gradient of E[R], at the start
    norm_ratio: float  # |expected update| / |gradient|
    noise: float  # variance of one group's update / |its mean|^2
    value: float  # E[R] where ascent along the expected update stops
    shares: np.ndarray  # (A,): the share of the written answers that are each answer there
    repeats: float  # the share of answers that repeat an earlier one there
    steps: int


def answer_shares(seqs, theta):
    """(the share of written answers that are each answer (A,), the share that repeat an earlier
    answer of their set)."""
    p = np.exp(seqs.log_probs(theta))
    counts = np.stack([(seqs.seqs == a).sum(1) for a in range(seqs.A)], axis=1)  # (S, A)
    distinct = np.array([len(set(s)) for s in seqs.seqs])
    return p @ counts / seqs.m, float(p @ (seqs.m - distinct)) / seqs.m


SEQUENTIAL_RATE = 10.0  # the learning rate of ascent on E[R] (a plain one: its gradient is ~0.02)


def sequential_ascent(direction, seqs, theta):
    """Ascent along direction(theta), rescaled once to the exact gradient's norm at the start (so a
    method whose update is a constant times the gradient climbs exactly as the gradient does), at
    SEQUENTIAL_RATE, until no sequence's probability moves by ASCENT_STILL -> (theta, steps). Unlike
    ascend, the step does not grow when the start sits near a flat point (the independent m = 2
    start does)."""
    theta = np.asarray(theta, dtype=float)
    size = np.linalg.norm(direction(theta))
    if size < 1e-12:
        return theta, 0
    rate = SEQUENTIAL_RATE * np.linalg.norm(seqs.gradient(theta)) / size
    p = np.exp(seqs.log_probs(theta))
    for step in range(1, ASCENT_STEPS + 1):
        theta = theta + rate * direction(theta).reshape(theta.shape)
        moved = np.exp(seqs.log_probs(theta))
        if np.abs(moved - p).max() < ASCENT_STILL:
            return theta, step
        p = moved
    return theta, ASCENT_STEPS


def measure_sequential(rows=SEQUENTIAL_ROWS, sets=SEQUENTIAL_SETS, ascent=True):
    """A SequentialRow per (m, policy, row); then each (m, policy)'s optimum, ascent along the exact
    gradient, as a row of form 'optimum'."""
    out = []
    for m in sets:
        seqs = Sequences(SEQUENTIAL_CASE, m)
        for independent in (False, True):
            start = sequential_start(seqs, independent)
            gradient = seqs.gradient(start)
            for form, baseline in rows:
                credit = SequentialCredit(seqs, form, baseline)
                update = credit.expected_update(start)
                noise = credit.variance(start) / (update @ update)
                end, steps = start, 0
                if ascent:
                    end, steps = sequential_ascent(credit.expected_update, seqs, start)
                shares, repeats = answer_shares(seqs, end)
                ratio = np.linalg.norm(update) / np.linalg.norm(gradient)
                row = (form, baseline, m, independent, cosine(update, gradient), ratio, noise)
                out.append(SequentialRow(*row, seqs.value(end), shares, repeats, steps))
            end, steps = start, 0
            if ascent:
                end, steps = sequential_ascent(seqs.gradient, seqs, start)
            shares, repeats = answer_shares(seqs, end)
            row = ("optimum", "", m, independent, 1.0, 1.0, float("nan"))
            out.append(SequentialRow(*row, seqs.value(end), shares, repeats, steps))
    return out


ROW_NAMES = {
    ("set", "z"): "VPO (set, z-score)",
    ("set", "mean"): "VPO, scale_rewards none (set, mean)",
    ("set", "loo"): "vpo_loo (set, leave-one-out)",
    ("value", "none"): "togo, exact E[R | answers before j]",
}


def row_name(form, baseline):
    return ROW_NAMES.get((form, baseline), f"{form}, {baseline}")


def sequential_tables(rows):
    """The rows as markdown: at the start (cosine, norm ratio, variance / |mean|^2) per set size
    and policy; then where ascent along each expected update stops (E[R] and the share of answers
    that are specialists, compromise and repeats), the optimum's line last."""
    columns = list(dict.fromkeys((r.m, r.independent) for r in rows))
    names = [f"m = {m}, {'independent' if ind else 'sequential'}" for m, ind in columns]
    cell = {(r.form, r.baseline, r.m, r.independent): r for r in rows}
    keys = list(dict.fromkeys((r.form, r.baseline) for r in rows if r.form != "optimum"))
    head = "| {} | " + " | ".join(names) + " |"
    rule = "| --- " * (len(columns) + 1) + "|"
    start = [head.format("credit, baseline (at the start)"), rule]
    for key in keys:
        cells = [cell[key + c] for c in columns]
        text = [f"{r.cosine:+.3f}, x{r.norm_ratio:.2f}, {r.noise:.1f}" for r in cells]
        start.append(f"| {row_name(*key)} | " + " | ".join(text) + " |")
    end = [head.format("credit, baseline (where ascent stops)"), rule]
    for key in keys + [("optimum", "")]:
        cells = [cell[key + c] for c in columns]
        text = [
            f"{r.value:.4f}: {r.shares[:2].sum():.2f} / {r.shares[2]:.2f} / {r.repeats:.2f}"
            + moving(r.steps)
            for r in cells
        ]
        name = "the optimum (ascent on E[R])" if key[0] == "optimum" else row_name(*key)
        end.append(f"| {name} | " + " | ".join(text) + " |")
    return "\n".join(start), "\n".join(end)


def draw_sequential(rows, path, m=SEQUENTIAL_SETS[0]):
    """Two panels for m answers: each row's cosine with the exact gradient at the start, and the
    share of compromise answers where its ascent stops, sequential beside independent."""
    keys = list(dict.fromkeys((r.form, r.baseline) for r in rows if r.form != "optimum"))
    cell = {(r.form, r.baseline, r.independent): r for r in rows if r.m == m}
    fig = Figure(figsize=(10, 5.2))
    y = np.arange(len(keys))
    for panel, (title, read) in enumerate(
        [
            ("cosine with grad E[R] at the start", lambda r: r.cosine),
            ("share of compromise answers where ascent stops", lambda r: r.shares[2]),
        ]
    ):
        ax = fig.add_subplot(1, 2, panel + 1)
        for shift, independent, name in ((-0.2, False, "sequential"), (0.2, True, "independent")):
            values = [read(cell[key + (independent,)]) for key in keys]
            ax.barh(y + shift, values, 0.4, label=name, color=f"C{int(independent)}")
        if panel == 1:
            for independent, style in ((False, "-"), (True, "--")):
                optimum = cell[("optimum", "", independent)].shares[2]
                ax.axvline(optimum, color=f"C{int(independent)}", ls=style, lw=1)
        ax.set_yticks(y, [row_name(*k) for k in keys] if panel == 0 else [])
        ax.invert_yaxis()
        ax.set_title(title, fontsize=10)
    fig.legend(*ax.get_legend_handles_labels(), loc="lower center", ncol=2, fontsize=9)
    fig.suptitle(f"Per-answer credit on sets of {m} (lines: the optimum of E[R])", fontsize=11)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.set_layout_engine(None)  # laid out: savefig need not draw it twice
    fig.savefig(path, dpi=120)


def sequential_main(out, sets=SEQUENTIAL_SETS):
    """--sequential: the tables (printed and written to out/table.md) and the figure."""
    rows = measure_sequential(sets=sets)
    at_start, at_end = sequential_tables(rows)
    text = "\n\n".join([at_start, at_end])
    print(text)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "table.md"), "w") as f:
        f.write(text + "\n")
    figure = os.path.join(out, "fixed_points.png")
    draw_sequential(rows, figure, m=sets[0])
    print(f"\nfigure: {figure}")
    return rows


def parser():
    """The command line: the methods and cases of the exact table, or --sequential."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--methods", nargs="+", default=list(CLAIMS), choices=list(CLAIMS))
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    parser.add_argument(
        "--history",
        type=int,
        default=HISTORY,
        help="earlier answers behind the exploration counts (0: the first step)",
    )
    parser.add_argument(
        "--explore-coef",
        type=float,
        default=train.DEFAULTS["explore_coef"],
        help="c, the weight of the exploration bonuses (train.py's explore_coef)",
    )
    parser.add_argument(
        "--check-groups",
        type=int,
        default=40_000,
        help="sampled groups for the check at the claim's optimum",
    )
    parser.add_argument(
        "--sequential",
        action="store_true",
        help="instead: per-answer credit on sets written in sequence (docs/figures/"
        "estimators_sequential/)",
    )
    parser.add_argument(
        "--sets",
        nargs="+",
        type=int,
        default=list(SEQUENTIAL_SETS),
        choices=list(SEQUENTIAL_SETS),
        help="with --sequential: the set sizes m (the figure shows the first)",
    )
    parser.add_argument("--out", help="where the figures go (default: docs/figures/estimators)")
    return parser


def main(argv=None):
    args = parser().parse_args(argv)
    t0 = time.time()
    torch.set_num_threads(1)
    if args.sequential:
        out = args.out or os.path.join(HERE, "docs", "figures", SEQUENTIAL_DIR)
        rows = sequential_main(out, sets=args.sets)
        print(f"done in {time.time() - t0:.0f}s")
        return rows
    args.out = args.out or os.path.join(HERE, "docs", "figures", "estimators")
    cfg = {"explore_coef": args.explore_coef}
    rows = measure(args.methods, args.cases, history=args.history, cfg=cfg)
    print(table(rows))
    print(
        f"\nAt the claim's optimum on the conflict case, G = {train.DEFAULTS['group_size']} "
        f"and train.py's weightings, {args.check_groups} sampled groups: the expected update "
        "(+- 1.96 standard errors); zero within error: the optimum is the update's fixed point"
    )
    for method in [m for m in ("vpo", "vpo_loo") if m in args.methods]:
        optimum, mean, se = at_optimum(method, "conflict", args.check_groups)
        cells = ", ".join(
            f"{a} {u:+.4f} +- {1.96 * e:.4f}"
            for a, u, e in zip(CASES["conflict"].answers, mean, se)
        )
        print(f"  {method}: at {mass(CASES['conflict'], optimum)}: {cells}")
    os.makedirs(args.out, exist_ok=True)
    print("\nThe pitfalls of the field, each beside its sound form (tests/test_lab_estimators.py)")
    print("\n".join(pitfalls()))
    figure = os.path.join(args.out, "conflict_fixed_points.png")
    draw(rows, figure)
    print(f"\nfigure: {figure}\ndone in {time.time() - t0:.0f}s")
    return rows


if __name__ == "__main__":
    main()
