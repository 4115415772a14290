"""
What the evolutionary search can do with a perfect mutation operator: search.run_searches with the
task's own demonstrator (CodeTask.demonstration, the thing the warm start imitates) in place of a
policy, on training problems. If this does not solve the search problems, no policy will; if it
does and a policy does not, the policy's mutation skill is what to work on.

    python probes/search_ceiling.py [--config configs/code.yaml --problems N --seed S]

No model is loaded: the search's sampler is swapped for the demonstrator (this file only). A child
from parents is the best parent with one threshold moved as the demonstrations move it; a plain
prompt gets a demonstration. The same-budget control then measures the demonstrator's own sampling.

Deliberately left out: policies (search.py measures those), the persona task (no search).
"""

import argparse
import os
import random
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import search  # noqa: E402
from config import make_task  # noqa: E402
import train  # noqa: E402
from train import resolve_config  # noqa: E402


def demonstrator_sampler(task, rng):
    """A stand-in for search._sample: the demonstrator writes every child (as a whole program)."""
    def sample(model, tok, task_, problems, per_call, rollouts, cfg, settings, gen, device, parents=None):
        rewards = np.zeros((len(problems), rollouts, per_call, task.dim), dtype=np.float32)
        answers = []
        for i, problem in enumerate(problems):
            shown = parents[i] if parents else None
            best = tuple(task.thresholds(shown[-1][0])) if shown else None
            row = []
            for g in range(rollouts):
                texts = [task.program_text(task._mutate(best, problem, rng)) if best is not None
                         else task.demonstration(problem, 1, rng)[0] for _ in range(per_call)]
                rewards[i, g] = np.stack([task.reward(problem, t) for t in texts])
                row.append(texts)
            answers.append(row)
        return rewards, answers
    return sample


def main():
    parser = argparse.ArgumentParser(description="the evolutionary search with the demonstrator as its mutation operator")
    parser.add_argument("--config", default=os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                                         "configs", "code.yaml"))
    parser.add_argument("--problems", type=int, default=train.EVALUATION["evo_problems"])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    cfg = resolve_config(args.config)
    task = make_task(cfg["task"], **cfg["task_options"])
    search._sample = demonstrator_sampler(task, random.Random(args.seed))
    problems = search.search_problems(task, "train", args.problems, train.EVALUATION["evo_min_plausible"], args.seed)
    out = search.run_searches(None, None, task, problems, 1, cfg, train.EVALUATION, args.seed, 1)
    mu = out["mutations"]
    print(f"search solved {out['solved']}/{out['searches']}, same-budget sampling {out['sampling_solved']}/"
          f"{out['searches']}; children {mu['children']}: invalid {mu['invalid'] / mu['children']:.2f}, "
          f"better than their best parent {mu['improved'] / mu['children']:.2f}")


if __name__ == "__main__":
    main()
