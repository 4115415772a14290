"""
Where a set policy's answer slots go: for each set-format checkpoint of a headline run, redraw the
evaluation pools (same problems, same seed, so the same answers as results.json) and count the
answers that repeat an earlier answer of the same rollout, and those that score zero.

    python tools/wasted_answers.py out/headline            # every task, every m > 1 checkpoint

VPO's set score is a max over the set, so a wasted slot costs it nothing during training; this is
the number that shows it. Left out: single-answer checkpoints (nothing to repeat within a rollout).
"""

import argparse
import glob
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from experiment import HEADLINE, _eval_job  # noqa: E402
from rewards import make_task  # noqa: E402
from checkpoint import model_from_checkpoint  # noqa: E402


def wasted(task, problems, answers, m):
    """Fractions of answers that repeat an earlier one of their rollout (score_answers zeroes
    them), and of the others that score zero on every component (unparseable, or no test passed)."""
    repeated = zero = total = 0
    for problem, pool in zip(problems, answers):
        for start in range(0, len(pool), m):
            seen = set()
            for answer in pool[start:start + m]:
                total += 1
                key = task.answer_key(answer)
                if key in seen:
                    repeated += 1
                elif not task.reward(problem, answer).any():
                    zero += 1
                seen.add(key)
    return {"repeated": repeated / total, "zero_score": zero / total}


def main():
    parser = argparse.ArgumentParser(description=__doc__.strip().split("\n\n")[0])
    parser.add_argument("out_dir", help="a headline experiment's folder (holds runs/)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    paths = sorted(glob.glob(os.path.join(args.out_dir, "runs", "*", "final.pt")))
    if not paths:
        sys.exit(f"error: no runs/*/final.pt under {args.out_dir}")
    for path in paths:
        _, _, cfg, m = model_from_checkpoint(path)
        if m == 1:
            continue
        # the experiment's own evaluation job, so these are the pools behind results.json
        _, _, answers, problems = _eval_job(path, cfg, HEADLINE["eval_problems"],
                                            HEADLINE["eval_n"], cfg["seed"], m)
        counts = wasted(make_task(cfg["task"], **cfg["task_options"]), problems, answers, m)
        print(f"{os.path.basename(os.path.dirname(path)):28s} " +
              "  ".join(f"{k} {v:.2f}" for k, v in counts.items()), flush=True)


if __name__ == "__main__":
    main()
