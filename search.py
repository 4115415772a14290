"""
Test-time search with trained policies, from the command line: best@k / pass@k of checkpoints on
held-out problems (evaluate.py) and, with --search, the evolutionary search with the policy as its
mutation operator (evolve.py). Settings: config.EVALUATION, part of train.DEFAULTS.

    python search.py --checkpoints out/code-grpo-s0/final.pt out/code-vpo-s0/final.pt --n 30
    python search.py --checkpoints out/warmstart/warmstart-code-*.pt --search   # and the searches

Deliberately left out: anything the lab does (many runs, intervals across seeds: lab/).
"""

import random
import sys

from config import (
    EVALUATION,
    ONE_LINE_ERRORS,
    WriteError,
    make_task,
    resolve_evaluation,
    settings_parser,
)
from evaluate import evaluate_policy, load_policy
from evolve import run_searches, search_problems
from figures import print_pools
from runfiles import write_json


def main(argv=None):
    parser = settings_parser(
        "best@k / pass@k of checkpoints on held-out problems, and with --search the evolutionary "
        "search; --set changes the evaluation settings listed below",
        EVALUATION,
        config_file=False,
    )
    parser.add_argument("--checkpoints", nargs="+", required=True)
    parser.add_argument("--n", type=int, help="pool size in answers (default: pool_n)")
    parser.add_argument("--problems", type=int, help="problems (default: pool_problems)")
    parser.add_argument("--seed", type=int, default=0)
    # train: to design a task or a setting without looking at the problems reported
    parser.add_argument("--split", choices=["heldout", "train"], default="heldout")
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument("--zero-repeats", action="store_true", help="score as training does")
    parser.add_argument("--search", action="store_true", help="also run_searches on evo_problems")
    parser.add_argument("--children-per-call", type=int, help="1, or the policy's m (--search)")
    args = parser.parse_args(argv)
    try:
        settings = resolve_evaluation(args.set)
        args.n = args.n or settings["pool_n"]  # the options win over --set
        args.problems = args.problems or settings["pool_problems"]
        args.children_per_call = args.children_per_call or settings["evo_children_per_call"]
        rows, searches = evaluate_all(args, settings)
    except ONE_LINE_ERRORS as e:  # a bad setting or checkpoint, a missing file; a bug raises
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    print_pools(rows, args.problems, args.seed, split=args.split)
    print_searches(searches)
    if args.json:
        saved = {"pools": dict(rows), "searches": searches} if searches else dict(rows)
        try:
            write_json(args.json, saved, indent=1)
        except WriteError as e:
            print(f"error: {e}", file=sys.stderr)
            sys.exit(2)


def evaluate_all(args, settings):
    """Every checkpoint's pools and, with --search, its searches -> (rows, searches by path)."""
    rows = []
    searches = {}
    for path in args.checkpoints:
        policy, cfg = load_policy(path)
        task = make_task(cfg["task"], **cfg["task_options"])
        problems = task.problems(args.split, args.problems, random.Random(args.seed))
        as_written = not args.zero_repeats
        result, _, _ = evaluate_policy(
            policy, task, problems, n=args.n, seed=args.seed, as_written=as_written
        )
        rows.append((path, dict(result, checkpoint=path)))
        if args.search:
            count = settings["evo_problems"]
            least = settings["evo_min_plausible"]
            hard = search_problems(task, args.split, count, min_plausible=least, seed=args.seed)
            searches[path] = run_searches(
                policy,
                task,
                hard,
                settings=settings,
                seed=args.seed,
                children_per_call=args.children_per_call,
            )
    return rows, searches


def print_searches(searches):
    """A row per checkpoint: its searches solved against the same-budget control's."""
    if not searches:
        return
    print(
        f"\n{'checkpoint':40s} search solved  sampling solved  invalid children  better "
        "children  seconds"
    )
    for path, s in searches.items():
        n = max(1, s["mutations"]["children"])
        print(
            f"{path[-40:]:40s} {s['solved']:6d}/{s['searches']:<6d} "
            f"{s['sampling_solved']:8d}/{s['searches']:<6d} "
            f"{s['mutations']['invalid'] / n:16.2f} {s['mutations']['improved'] / n:16.3f} "
            f"{s['seconds']:6.0f} + {s['sampling_seconds']:.0f}"
        )


if __name__ == "__main__":
    main()
