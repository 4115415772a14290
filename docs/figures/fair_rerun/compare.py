"""The code leaderboard before and after the fair-baselines rerun, row by row: each rerun method's mean,
rank, its change with a paired 95% interval over problems and seeds, and its gap to GRPO before and after.
Before: the board's result files at commit 317607e (read with git); after: docs/figures/leaderboard.

    python docs/figures/fair_rerun/compare.py            # from the repository root
"""
import copy
import json
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.getcwd())
from lab import report, tables  # noqa: E402

BEFORE, BOARD = "317607e", "docs/figures/leaderboard/results"
RERUN = ["max_at_k", "maxrl", "dr_grpo", "gdpo", "vpo_loo", "rloo"]


def before_records():
    names = subprocess.run(["git", "ls-tree", "--name-only", f"{BEFORE}:{BOARD}"], capture_output=True, text=True,
                           check=True).stdout.split()
    return [json.loads(subprocess.run(["git", "show", f"{BEFORE}:{BOARD}/{n}"], capture_output=True, text=True,
                                      check=True).stdout) for n in names if n.startswith("code-")]


def main():
    before = before_records()
    after = [r for r in report.load_records([os.path.dirname(BOARD)]) if r["task"] == "code"]
    both = before + [dict(copy.deepcopy(r), method=r["method"] + " (after)") for r in after if r["method"] in RERUN]
    paired = report.merge(both, ["code"])
    boards = [{t: {r[0]: r for r in rows} for t, rows in tables.leaderboards(report.merge(rs, ["code"]))}
              for rs in (before, after)]
    for title in boards[1]:
        print(f"\n### {title}\n\n| method | before (rank) | after (rank) | after - before [95%] | - GRPO before | - GRPO after |"
              "\n|---|---|---|---|---|---|")
        for m in RERUN:
            cells = []
            for b in boards:
                rows = b.get(title, {})
                ranked = [n for n, *_ in sorted(rows.values(), key=lambda r: -np.mean(r[1]))
                          if not n.endswith(report.UNTRAINED)]
                name = next((n for n in rows if n.split(" (")[0] == m), None)
                cells.append((f"{np.mean(rows[name][1]):.3f} ({ranked.index(name) + 1 if name in ranked else '-'}"
                              f"/{len(ranked)})", report.fmt_interval(rows[name][3]) if rows[name][3] else "-")
                             if name else ("-", "-"))
            if "search" in title:
                s = report.named_searches(paired["tasks"]["code"])
                diff = report.paired_search(s[m + " (after)"]["per_problem"], s[m]["per_problem"]) \
                    if m in s and m + " (after)" in s else None
            else:
                diff = report.paired(paired, "code", m + " (after)", m, "best" if "best@" in title else "pass")
            change = f"{report.fmt_interval(diff)} {report.verdict(diff)}" if diff else "-"
            print(f"| {m} | {cells[0][0]} | {cells[1][0]} | {change} | {cells[0][1]} | {cells[1][1]} |")


if __name__ == "__main__":
    main()
