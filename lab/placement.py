"""Where a set policy's answers sit: the share of a pool's answers that are specialists (one side of
the conflict) and compromises (both sides at once), per problem, for VPO, vpo_loo and VPO without
the group std, on persona and the maze, with paired intervals.

    # pools with every answer's reward vector, from the checkpoints of lab/experiment.py runs
    python lab/placement.py --pools out/placement out/placement_nostd=vpo_nostd
    python lab/placement.py            # the table, from the committed docs/figures/placement/

Why: lab/estimators.py finds that VPO's group z-score stops at more specialists and fewer
compromises than its set score's optimum when the answers are drawn independently (on its conflict
case 0.44 / 0.44 / 0.11 against 0.38 / 0.38 / 0.24), and that mean-centring or vpo_loo stop at the
optimum. Whether trained policies show it is a question about their pools. The board's result
files keep three problems' reward vectors per run (for a figure), so --pools evaluates the
checkpoints again with the board's own pools job (the same problems, seeds and sampling, so the
pools are the board's when the checkpoint is) and keeps every answer's reward vector.

What a place is, from an answer's reward vector alone (answer_place):
  persona (D personas, r_i = sqrt(share of the word's letters that are persona i's favorite)): the
    letters that please someone are split by r_i^2; a specialist gives one persona at least
    SPECIALIST_SHARE of them, a compromise gives none more than COMPROMISE_SHARE; between the two,
    "leaning"; the zero vector (invalid, or pleasing nobody), "none".
  maze ([completion, gold, diamond, avoid_lava], zero unless the route arrives): a specialist
    collects items of one corner only, a compromise of both, "direct" arrives with neither, "none"
    does not arrive.

Deliberately left out: code (its components are test cases, not sides of a conflict), weighting
the shares by answer quality, and any training: the runs are lab/experiment.py's.
"""

import argparse
import glob
import json
import os
import sys

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, HERE)  # so that `python lab/placement.py` finds the reference

import numpy as np  # noqa: E402

from lab.report import paired_bootstrap_interval  # noqa: E402

TASKS = ("persona", "maze")
PLACES = {
    "persona": ("specialist", "leaning", "compromise", "none"),
    "maze": ("specialist", "compromise", "direct", "none"),
}
SPECIALIST_SHARE = 0.75  # persona: at least this share of the pleasing letters for one persona
COMPROMISE_SHARE = 0.5  # persona: no persona above this share
# rewards are float32 and the files round them, so a 9-of-12 word reads 0.74996: the shares a
# 12-letter word can give lie at least 0.02 from either threshold (8/11, 5/9), so 0.01 decides
SHARE_TOLERANCE = 0.01
# the rows compared, and what each is against (VPO against the two that stop at the optimum in
# the exact lab)
METHODS = ("vpo", "vpo_loo", "vpo_nostd")
# the places each pair is compared on: the maze has no compromise (a walk through both corner
# zones cannot arrive within the budget), so its other side is the route that takes no corner
COMPARED = {"persona": ("specialist", "compromise"), "maze": ("specialist", "direct")}
PAIRS = (("vpo", "vpo_loo"), ("vpo", "vpo_nostd"), ("vpo_loo", "vpo_nostd"))
DEFAULT_DIR = os.path.join(HERE, "docs", "figures", "placement")


def answer_place(task, reward):
    """One answer's reward vector -> its place (a name in PLACES[task])."""
    r = np.asarray(reward, dtype=float)
    if task == "persona":
        if not (r > 0).any():
            return "none"
        top = (r**2 / (r**2).sum()).max()  # the largest persona's share of the pleasing letters
        if top >= SPECIALIST_SHARE - SHARE_TOLERANCE:
            return "specialist"
        return "compromise" if top <= COMPROMISE_SHARE + SHARE_TOLERANCE else "leaning"
    if task == "maze":
        if r.shape != (4,):
            raise ValueError(f"a maze reward is [completion, gold, diamond, avoid_lava], got {r}")
        if r[0] <= 0:
            return "none"
        gold, diamond = r[1] > 0, r[2] > 0
        if gold and diamond:
            return "compromise"
        return "specialist" if gold or diamond else "direct"
    raise ValueError(f"answer_place knows {', '.join(TASKS)}, not '{task}'")


def place_shares(task, pools):
    """pools (problems, n, D) -> (problems, places): each pool's share of answers in each place."""
    names = PLACES[task]
    out = np.zeros((len(pools), len(names)))
    for i, pool in enumerate(pools):
        for reward in pool:
            out[i, names.index(answer_place(task, reward))] += 1.0 / len(pool)
    return out


# ---- The pools: every answer's reward vector, from a run's checkpoint ----


def evaluate_pools(run_dirs, out_dir, board_dir=None):
    """For every VPO-family result file under each RUN_DIR[=NAME]/results/: its checkpoint's pools
    again (lab.workers.pools_job, the board's), every reward vector kept, into
    out_dir/TASK-NAME-sSEED.json. NAME: the method's name in the table (default: the file's).
    board_dir: a board whose result file of the same run (task, method, seed) the pools are checked
    against, problem by problem."""
    from lab.workers import pools_job  # imports torch and the tasks: only when evaluating

    os.makedirs(out_dir, exist_ok=True)
    for item in run_dirs:
        run_dir, _, name = item.partition("=")
        files = sorted(glob.glob(os.path.join(run_dir, "results", "*.json")))
        if not files:
            raise SystemExit(f"error: no result files under {run_dir}/results/")
        for path in files:
            with open(path) as f:
                result = json.load(f)
            if result["task"] not in TASKS or not result["method"].startswith("vpo"):
                continue
            method = name or result["method"]
            out = os.path.join(out_dir, f"{result['task']}-{method}-s{result['seed']}.json")
            if os.path.exists(out):  # evaluated before: delete the file to evaluate it again
                print(f"{out}: kept")
                continue
            pools = result["pools"]
            checkpoint = os.path.join(HERE, pools["checkpoint"])
            if not os.path.exists(checkpoint):
                raise SystemExit(f"error: {path}'s checkpoint {checkpoint} is missing")
            key = pools["key"]
            record, rewards = pools_job(
                checkpoint, key["run"], key["settings"], result["seed"], result["m"]
            )
            same = record["per_problem"]["best"] == pools["per_problem"]["best"]
            board = os.path.join(board_dir or "", "results", os.path.basename(path))
            as_board = None  # no board, or no such run on it
            if board_dir and not name and os.path.exists(board):
                with open(board) as f:
                    as_board = record["per_problem"] == json.load(f)["pools"]["per_problem"]
            kept = {
                "task": result["task"],
                "method": method,
                "seed": result["seed"],
                "run": {k: key["run"][k] for k in ("algo", "scale_rewards", "steps", "seed")},
                "commit": result.get("commit"),
                "same_pools_as_the_run": same,
                "same_pools_as_the_board": as_board,
                "per_problem_best": record["per_problem"]["best"],
                "rewards": np.asarray(rewards).round(4).tolist(),  # (problems, n, D)
            }
            with open(out, "w") as f:
                json.dump(kept, f)
            print(f"{out}: {np.asarray(rewards).shape}, as the run's: {same}, board's: {as_board}")


def load_shares(pool_dir):
    """{(task, method, seed): (problems, places) shares} from pool_dir's files."""
    shares = {}
    for path in sorted(glob.glob(os.path.join(pool_dir, "*.json"))):
        with open(path) as f:
            kept = json.load(f)
        key = (kept["task"], kept["method"], kept["seed"])
        shares[key] = place_shares(kept["task"], np.asarray(kept["rewards"]))
    return shares


def committed_shares(board_dir, methods=METHODS):
    """{(task, method, seed): (3, places) shares} from a board's result files, which keep the first
    three problems' reward vectors of every run (for reward_vectors.png)."""
    shares = {}
    for task in TASKS:
        for method in methods:
            for path in sorted(
                glob.glob(os.path.join(board_dir, "results", f"{task}-{method}-s*"))
            ):
                with open(path) as f:
                    result = json.load(f)
                vectors = result.get("pools", {}).get("reward_vectors")
                if vectors is not None:
                    key = (task, method, result["seed"])
                    shares[key] = place_shares(task, np.asarray(vectors))
    return shares


def route_family_table(board_dir):
    """Markdown: the maze's route families per method and seed (maze.route_families: the corner
    zone a walk enters, else the bonus, else direct; every route of the 40 pools, arrived or not),
    then each pair's difference in the corner share, its 95% interval over seeds only."""
    lines = ["| maze, every route of 40 pools | seed | gold | diamond | bonus | direct |"]
    lines.append("|---|---|---|---|---|---|")
    corners = {}
    for method in METHODS:
        for path in sorted(glob.glob(os.path.join(board_dir, "results", f"maze-{method}-s*"))):
            with open(path) as f:
                result = json.load(f)
            families = result["pools"].get("route_families")
            if families:
                shares = [families[k] for k in ("gold", "diamond", "bonus", "direct")]
                corners[method, result["seed"]] = shares[0] + shares[1]
                cells = " | ".join(f"{v:.3f}" for v in shares)
                lines.append(f"| {method} | {result['seed']} | {cells} |")
    for a, b in PAIRS:
        seeds = sorted({s for m, s in corners if m == a} & {s for m, s in corners if m == b})
        if seeds:
            x = np.array([[corners[a, s]] for s in seeds])  # (seeds, 1)
            y = np.array([[corners[b, s]] for s in seeds])
            diff, low, high = paired_bootstrap_interval(x, y)
            lines.append(
                f"\n{a} - {b}, corner routes: {diff:+.3f} [{low:+.3f}, {high:+.3f}] "
                f"({len(seeds)} seeds, resampled)"
            )
    return "\n".join(lines)


def seeds_named(seeds):
    return f"seed {seeds[0]}" if len(seeds) == 1 else f"{len(seeds)} seeds"


def table(shares, methods=METHODS):
    """Markdown: per task, each method's mean share per place (over seeds and problems), then each
    pair's paired difference in the specialist and compromise shares with its 95% interval."""
    lines = []
    for task in TASKS:
        shown = [m for m in methods if any(k[:2] == (task, m) for k in shares)]
        if not shown:
            continue
        seeds = sorted({k[2] for k in shares if k[0] == task})
        names = PLACES[task]
        lines += [f"**{task}** ({seeds_named(seeds)})", ""]
        lines += ["| method | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
        for m in shown:
            mean = np.mean([shares[task, m, s] for s in seeds if (task, m, s) in shares], (0, 1))
            lines.append(f"| {m} | " + " | ".join(f"{v:.3f}" for v in mean) + " |")
        lines += ["", "| difference [95%] | " + " | ".join(COMPARED[task]) + " |", "|---|---|---|"]
        for a, b in PAIRS:
            common = [s for s in seeds if (task, a, s) in shares and (task, b, s) in shares]
            if not common:
                continue
            cells = []
            for place in COMPARED[task]:
                j = names.index(place)
                x = np.array([shares[task, a, s][:, j] for s in common])  # (seeds, problems)
                y = np.array([shares[task, b, s][:, j] for s in common])
                diff, low, high = paired_bootstrap_interval(x, y)
                verdict = "more" if low > 0 else "fewer" if high < 0 else "within noise"
                cells.append(f"{diff:+.3f} [{low:+.3f}, {high:+.3f}] {verdict}")
            lines.append(f"| {a} - {b} ({seeds_named(common)}) | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--pools",
        nargs="+",
        metavar="RUN_DIR[=NAME]",
        help="evaluate these experiment folders' VPO checkpoints again first (NAME: the row)",
    )
    parser.add_argument("--dir", default=DEFAULT_DIR, help="where the pools' files are kept")
    parser.add_argument(
        "--board",
        default=os.path.join(HERE, "docs", "figures", "voting"),
        help="with --pools: the committed board the pools are checked against",
    )
    parser.add_argument(
        "--committed",
        metavar="BOARD_DIR",
        help="instead: the three problems a board's result files keep per run, and the maze's "
        "route families (e.g. docs/figures/voting)",
    )
    parser.add_argument(
        "--methods",
        nargs="+",
        default=list(METHODS),
        help="with --committed: the rows (the pairs compared stay VPO's)",
    )
    parser.add_argument("--seeds", nargs="+", type=int, help="only these seeds' pools")
    args = parser.parse_args(argv)
    if args.committed:
        shares = committed_shares(args.committed, args.methods)
        if not shares:
            raise SystemExit(f"error: no reward vectors under {args.committed}/results/")
        print(table(shares, args.methods) + "\n" + route_family_table(args.committed))
        return shares
    if args.pools:
        evaluate_pools(args.pools, args.dir, args.board)
    shares = load_shares(args.dir)
    if args.seeds is not None:
        shares = {k: v for k, v in shares.items() if k[2] in args.seeds}
    if not shares:
        raise SystemExit(f"error: no pools under {args.dir}; run with --pools first")
    text = table(shares)
    print(text)
    with open(os.path.join(args.dir, "table.md"), "w") as f:
        f.write(text)
    return shares


if __name__ == "__main__":
    main()
