"""
The evolutionary search with the policy as its mutation operator: the OpenEvolve loop in miniature
(settings: config.EVALUATION's evo_*; `python search.py --search` runs it).

`run_searches`: one search per problem, all on the same budget of candidates. A search keeps
islands of programs; the policy, shown parents WITH their scores, writes the children; every
`evo_migrate_every` candidates each island receives its neighbor's best (ring migration). Beside it,
a same-budget control of plain samples: the search earns its keep only where it beats that. The
task must show parents (tasks.ParentTask: the code task).

Deliberately left out: MAP-Elites grids, LLM-written prompts, asynchronous evaluation, multi-line
diffs, island resets, early stopping on stagnation.
"""

import dataclasses
import random
import time

import numpy as np

from config import ConfigError
from rollouts import sample_rollouts
from tasks import ParentTask

# the control's random stream: the search's seed + this, far from the search's own
CONTROL_SEED_OFFSET = 1_000_003
# room for a prompt that shows parents, in tokens, when a call's rollouts are sized to memory
PARENTS_PROMPT_TOKENS = 96


def run_searches(policy, task, problems, settings, seed, children_per_call):
    """evolve_many and the same-budget sampling control for one policy; children_per_call: 1 or
    the policy's m."""
    if not isinstance(task, ParentTask):
        raise TypeError(f"{type(task).__name__} shows no parents: nothing to search with")
    m = policy.answers_per_rollout
    if children_per_call not in (1, m):
        raise ConfigError(
            f"children_per_call must be 1 or the policy's m={m}, got {children_per_call}"
        )
    policy = dataclasses.replace(policy, answers_per_rollout=children_per_call)
    t0 = time.time()
    runs = evolve_many(policy, task, problems, settings=settings, seed=seed)
    seconds = time.time() - t0
    t0 = time.time()
    budget = settings["evo_budget"]
    sampled = sampling_control(
        policy, task, problems, settings=settings, seed=seed + CONTROL_SEED_OFFSET
    )
    for run, at in zip(runs, sampled):
        run["sampling_solved_at"] = at
    return {
        "searches": len(runs),
        "budget": budget,
        "children_per_call": children_per_call,
        "solved": sum(r["solved_at"] is not None for r in runs),
        "solved_problems": [r["problem"] for r in runs if r["solved_at"] is not None],
        "solved_curve": solved_curve(runs, budget),
        "sampling_solved": sum(at is not None for at in sampled),
        "sampling_curve": solved_curve([{"solved_at": at} for at in sampled], budget),
        "mutations": {
            k: sum(r["mutations"][k] for r in runs) for k in ("children", "invalid", "improved")
        },
        "seconds": seconds,
        "sampling_seconds": time.time() - t0,
        "runs": runs,
    }


def search_problems(task, split, n, min_plausible, seed, max_draws=100_000):
    """The first n problems of `split` (from `seed`) with at least `min_plausible` plausible
    programs."""
    if not isinstance(task, ParentTask):
        raise ConfigError(f"{type(task).__name__} shows no parents: only the code task is searched")
    rng = random.Random(seed)
    found = []
    drawn = 0
    while len(found) < n:
        if drawn >= max_draws:
            raise ConfigError(
                f"only {len(found)} of {max_draws} {split} problems leave >= {min_plausible} "
                f"plausible programs (wanted {n}); lower evo_min_plausible or use a larger code "
                "family"
            )
        batch = task.problems(split, n, rng)
        drawn += len(batch)
        found += [p for p in batch if task.num_plausible(p) >= min_plausible]
    return found[:n]


def evolve_many(policy, task, problems, settings, seed):
    """One evolutionary search per problem, in lockstep (islands; each call asks the policy for its
    m children; ring migration every `evo_migrate_every`) -> per problem: solved_at, candidates,
    best, best_score, mutations."""
    budget = settings["evo_budget"]
    num_islands = settings["evo_islands"]
    every = settings["evo_migrate_every"]
    if min(budget, num_islands, every) < 1:
        raise ConfigError("evo_budget, evo_islands and evo_migrate_every must be >= 1")
    rng = random.Random(seed)
    policy = policy.seeded(seed)
    islands = [[Island(settings["evo_capacity"]) for _ in range(num_islands)] for _ in problems]
    runs = [
        {
            "problem": repr(p),
            "solved_at": None,
            "candidates": 0,
            "best": None,
            "best_score": 0.0,
            "mutations": {"children": 0, "invalid": 0, "improved": 0},
        }
        for p in problems
    ]
    while True:
        # the searches still going: neither solved nor out of budget
        live = [
            search
            for search, run in enumerate(runs)
            if run["solved_at"] is None and run["candidates"] < budget
        ]
        if not live:
            return runs
        calls = [(search, island) for search in live for island in range(num_islands)]
        explore = settings["evo_explore"]
        parents = [
            islands[search][island].pick_parents(rng, explore) or None for search, island in calls
        ]
        asked = [problems[search] for search, _ in calls]
        rewards, answers = _sample(
            policy, task, asked, rollouts=1, settings=settings, parents=parents
        )
        crossed = {search: runs[search]["candidates"] // every for search in live}
        for call, (search, island) in enumerate(calls):
            children = zip(answers[call][0], rewards[call, 0])
            add_children(
                runs[search],
                islands[search][island],
                task,
                problem=problems[search],
                children=children,
                parents=parents[call],
                budget=budget,
            )
        for search in live:  # ring migration once a search crosses a multiple of `every`
            run = runs[search]
            if run["solved_at"] is None and run["candidates"] // every > crossed[search]:
                migrate(islands[search])


def add_children(run, island, task, problem, children, parents, budget):
    """(answer, reward) children of one island's call into its island and its search's record,
    until the search is solved or its budget spent; parents: what the call showed (best last)."""
    for answer, reward in children:
        if run["solved_at"] is not None or run["candidates"] >= budget:
            return
        run["candidates"] += 1
        score = float(task.scalarize(reward))  # the examples only
        valid = task.valid(problem, answer)
        if parents:  # the policy as a mutation operator
            run["mutations"]["children"] += 1
            run["mutations"]["invalid"] += not valid
            run["mutations"]["improved"] += score > parents[-1][1]
        if valid:
            island.add(answer, reward, score)
            if run["best"] is None or score > run["best_score"]:
                run["best"] = answer
                run["best_score"] = score
        if (reward >= 1.0).all():
            run["solved_at"] = run["candidates"]


def migrate(islands):
    """Ring migration: each island receives its left neighbor's best program."""
    bests = [island.best() for island in islands]
    for i, island in enumerate(islands):
        if bests[i - 1] is not None:
            score, text, reward = bests[i - 1]
            island.add(text, reward, score)


class Island:
    """Programs kept by one island: at most `capacity`, one per pass pattern (FunSearch's
    signature)."""

    def __init__(self, capacity):
        self.capacity = capacity
        self.programs = []  # (score, text, reward vector), best first

    def add(self, text, reward, score):
        """Keep a program with its reward vector and its score (the task's scalarization of it)."""
        for i, (_, kept, kept_reward) in enumerate(self.programs):
            if np.array_equal(kept_reward, reward):  # same behavior: keep one, the shorter text
                if len(text) < len(kept):
                    self.programs[i] = (score, text, reward)
                return
        self.programs.append((score, text, reward))
        self.programs.sort(key=lambda p: -p[0])
        del self.programs[self.capacity :]

    def best(self):
        return self.programs[0] if self.programs else None

    def pick_parents(self, rng, explore):
        """A parent (the best, or with probability `explore` any) and an inspiration: (text, score),
        worst first."""
        if not self.programs:
            return []
        parent = self.programs[0] if rng.random() >= explore else rng.choice(self.programs)
        others = [p for p in self.programs if p is not parent]
        chosen = [parent] + ([rng.choice(others)] if others else [])
        return [(text, score) for score, text, _ in sorted(chosen, key=lambda p: p[0])]


def _sample(policy, task, problems, rollouts, settings, parents=None):
    """sample_rollouts at the search's sampling settings, memory-capped -> rewards (P, rollouts, m,
    D), answers."""
    policy = dataclasses.replace(
        policy, temperature=settings["evo_temperature"], top_p=settings["evo_top_p"], top_k=0
    )
    m = policy.answers_per_rollout
    length = rollouts * (m * task.max_answer_tokens + 1 + PARENTS_PROMPT_TOKENS)
    chunk = max(1, settings["evo_positions_per_call"] // length)
    rewards = []
    answers = []
    for start in range(0, len(problems), chunk):
        part = problems[start : start + chunk]
        shown = parents[start : start + chunk] if parents else None
        batch = sample_rollouts(policy, task, part, G=rollouts, parents=shown, as_written=True)
        rewards.append(batch["rewards"].numpy())
        answers += batch["answers"]
    return np.concatenate(rewards), answers


def sampling_control(policy, task, problems, settings, seed):
    """The same-budget control: evo_budget plain samples per problem, the policy's m a rollout ->
    per problem the index (1-based) of the first answer that passes, or None."""
    budget = settings["evo_budget"]
    per_call = policy.answers_per_rollout
    rollouts = -(-budget // per_call)  # ceil(budget / per_call); answers past the budget unread
    rewards, _ = _sample(policy.seeded(seed), task, problems, rollouts=rollouts, settings=settings)
    passed = (rewards >= 1.0).all(-1).reshape(len(problems), -1)[:, :budget]  # (P, budget)
    return [int(row.nonzero()[0][0]) + 1 if row.any() else None for row in passed]


def solved_curve(results, budget):
    """Fraction of searches solved after b candidates, for b = 1..budget."""
    curve = np.zeros(budget)
    for r in results:
        if r["solved_at"] is not None:
            curve[r["solved_at"] - 1 :] += 1
    return (curve / max(1, len(results))).tolist()
