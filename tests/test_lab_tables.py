"""lab/tables.py: the training, mutation and leaderboard tables built from merged result files, and
a method that did not train is tested with report.did_not_train in test_lab_report.py. The rank
correlation's bootstrap draws 200 resamples here (the report's 10,000 take seconds a call): what is
checked is exact in every draw or an interval around rho."""

import functools

import pytest
from checks import record as _record

from lab import report, tables

RESAMPLES = 200


@pytest.fixture
def fewer_resamples(monkeypatch):
    """tables.rank_correlation, and voting_table's through it, with RESAMPLES bootstrap draws."""
    fewer = functools.partial(tables.rank_correlation, num_resamples=RESAMPLES)
    monkeypatch.setattr(tables, "rank_correlation", fewer)


def test_training_table_reads_each_seed():
    def rows(start, end):
        return (
            [{"kind": "eval", "step": 0, "heldout_scalar": start}]
            + [
                {
                    "kind": "train",
                    "step": i,
                    "entropy": 2.0 if i <= 10 else 1.0,
                    "distinct_first_answers": 1.0,
                    "set_score": 0.5,
                    "reward_scalar": 0.1,
                    "valid_answers": 1.0,
                }
                for i in range(1, 31)
            ]
            + [{"kind": "eval", "step": 30, "heldout_scalar": end}]
        )

    runs = [report.training_summary(rows(0.25, 0.5)), report.training_summary(rows(0.75, 1.0))]
    results = {"tasks": {"persona": {"warm_start": {}, "grpo": {"training": runs}}}}
    assert (
        tables.training_table(results)[-1]
        == "| persona | grpo | 0.25 / 0.75 -> 0.50 / 1.00 | 2.00 / 2.00 -> 1.00 / 1.00 | "
        "1.00 / 1.00 -> 1.00 / 1.00 | 0.50 / 0.50 -> 0.50 / 0.50 |"
    )


def test_task_table_shows_maj_at_k_only_where_the_result_files_carry_it():
    records = [_record("code", m, 0, [0.5, 1.0]) for m in ("grpo", "vpo")]
    before = tables.task_table("code", report.merge(records)["tasks"]["code"], multi=False)
    assert "maj@" not in before[1] and len(before) == 6  # a file from before maj@k: no column
    records[1]["pools"].update(maj_at_k=[0.75, 0.8], maj_pass_at_k=[0.5, 0.25])
    lines = tables.task_table("code", report.merge(records)["tasks"]["code"], multi=False)
    assert "| maj@1 | maj@2 | maj-pass@1 | maj-pass@2 |" in lines[1]
    vpo = lines[4].split(" | ")
    head = lines[1].split(" | ")
    assert vpo[head.index("maj@2")] == "0.800" and vpo[head.index("maj-pass@1")] == "0.500"
    # grpo's file lacks it: a dash, not an error
    assert lines[3].split(" | ")[head.index("maj@1")] == "-"


def test_maj_boards_appear_with_paired_intervals_only_where_files_carry_maj():
    def voted(method, seed, maj, maj_pass):
        r = _record("code", method, seed, [0.5, 1.0])
        r["pools"].update(maj_at_k=[0.5, sum(maj) / 2], maj_pass_at_k=[0.0, sum(maj_pass) / 2])
        r["pools"]["per_problem"].update(maj=maj, maj_pass=maj_pass)
        return r

    records = [voted("vpo", s, [0.75, 0.25], [1.0, 0.0]) for s in range(2)]
    records += [voted("grpo", s, [0.5, 0.5], [0.0, 0.0]) for s in range(2)]
    boards = dict(tables.leaderboards(report.merge(records)))
    vpo = {m: rest for m, *rest in boards["code: maj@2"]}["vpo"]
    assert vpo[0] == [0.5, 0.5] and vpo[1] is None  # per seed; nothing against itself
    assert vpo[2][0] == pytest.approx(0.0)  # vpo - grpo on maj: 0.75 - 0.5 and 0.25 - 0.5
    maj_pass = {m: rest for m, *rest in boards["code: maj-pass@2"]}["vpo"]
    assert maj_pass[2][0] == pytest.approx(0.5)
    # a file from before maj@k (grpo's here): no maj row for it, and no interval against it
    records[2:] = [_record("code", "grpo", s, [0.5, 0.5]) for s in range(2)]
    boards = dict(tables.leaderboards(report.merge(records)))
    assert [m for m, *_ in boards["code: maj@2"]] == ["vpo"]
    assert boards["code: maj@2"][0][2:] == (None, None)
    assert "code: best@2" in boards and "code: maj-pass@2" in boards


def test_rank_correlation_is_spearmans_with_a_bootstrap_over_policies(fewer_resamples):
    # monotone: +1 or -1 in every draw whose ranks are not all tied
    assert tables.rank_correlation([1, 2, 3, 4, 5], [2, 4, 8, 16, 32]) == pytest.approx((1, 1, 1))
    assert tables.rank_correlation([1, 2, 3, 4, 5], [5, 3, 2, 1, 0]) == pytest.approx((-1, -1, -1))
    # by hand: ranks (0 1 2 3) and (1 0 2 3) -> 1 - 6 * 2 / (4 * 15) = 0.8
    rho, low, high = tables.rank_correlation([1, 2, 3, 4], [2, 1, 3, 4])
    assert rho == pytest.approx(0.8) and -1 <= low < rho < high <= 1  # the draws disagree
    assert tables.rank_correlation([1, 2, 3], [1, 2, 3]) is None  # too few policies
    assert tables.rank_correlation([1, 2, 3, 4], [0, 0, 0, 0]) is None  # no ranking to correlate


def test_voting_table_correlates_diversity_with_the_vote_over_every_policy(fewer_resamples):
    records = []
    for i, method in enumerate(["grpo", "vpo", "rloo", "dapo"]):
        r = _record("maze", method, 0, [0.5, 1.0], diversity=float(i))
        r["pools"]["maj_at_k"] = [0.5, 0.9 - 0.1 * i]  # the more diverse, the worse the vote
        records.append(r)
    lines = tables.voting_table(report.merge(records))
    every = "| maze (n = 2) | 4, every policy | -1.000 [-1.000, -1.000] | -1.000 [-1.000, -1.000] |"
    assert lines[-2] == every
    # an untrained start joins every policy's row; the trained methods' row leaves it out
    start = _record("maze", "warm_start", 0, [0.5, 1.0], diversity=9.0)
    start["pools"]["maj_at_k"] = [0.5, 0.75]
    lines = tables.voting_table(report.merge(records + [start]))
    # by hand: diversity ranks (0 1 2 3 4), maj@2 ranks (4 3 1 0 2) -> 1 - 6 * 34 / (5 * 24)
    assert lines[-3].startswith("| maze (n = 2) | 5, every policy | -0.700 [")
    assert lines[-2] == every.replace("4, every policy", "4, trained methods")
    # fewer than four policies: no row
    assert tables.voting_table(report.merge(records[:3])) == []
    # a method that did not train (no valid answer at the end) has no vote: left out of both rows
    stuck = _record("maze", "gdpo", 0, [0.0, 0.0], diversity=-1.0)
    stuck["pools"]["maj_at_k"] = [0.0, 0.0]
    stuck["training"] = {"last10": {"valid_answers": 0.0}}
    assert tables.voting_table(report.merge(records + [stuck]))[-2] == every


def test_mutation_table_gives_shares_of_the_children():
    mu = {"children": 40, "invalid": 10, "improved": 2}
    results = {"tasks": {"code": {"vpo": {"evolution": {"mutations": mu}}, "grpo": {}}}}
    lines = tables.mutation_table(results)
    assert lines[-2] == "| vpo | 40 | 0.25 | 0.050 |" and not any("grpo" in line for line in lines)
    assert tables.mutation_table({"tasks": {"persona": {}}}) == []


def test_leaderboard_ranks_methods_with_intervals_against_vpo_and_grpo():
    records = [
        _record("persona", m, s, best)
        for s in range(2)
        for m, best in (("vpo", [0.8, 0.9]), ("grpo", [0.5, 0.6]), ("max_at_k", [0.7, 0.7]))
    ]
    lines = tables.leaderboard_table(report.merge(records))
    rows = [line for line in lines if line.startswith("| ") and "method" not in line]
    assert [r.split(" | ")[0] for r in rows] == ["| vpo", "| max_at_k", "| grpo"]
    assert rows[2].endswith("| -0.300 [-0.300, -0.300] |  |")  # grpo - vpo; nothing against itself


def test_search_leaderboard_ranks_solved_shares_and_pairs_the_same_problems():
    def record(method, seed, problems, solved, m=1):
        search = {
            "searches": len(problems),
            "solved": len(solved),
            "budget": 10,
            "solved_problems": solved,
            "key": {"problems": problems},
        }
        r = {"task": "code", "method": method, "seed": seed, "m": m, "search": search}
        if m > 1:
            r["search_set"] = dict(search, solved=0, solved_problems=[])
        return r

    p = ["a", "b", "c", "d"]
    records = [
        record("vpo", 0, p, ["a", "b", "c"], m=3),
        record("grpo", 0, p, ["a"]),
        record("vpo", 1, p, ["a", "b"], m=3),
        record("grpo", 1, p, ["b"]),
    ]
    ((title, rows),) = tables.leaderboards(report.merge(records))
    assert title == "code: search, share of 4 hard problems solved"
    by_method = {m: (values, vs_vpo, vs_grpo) for m, values, vs_vpo, vs_grpo in rows}
    assert by_method["vpo"][0] == [0.75, 0.5] and by_method["grpo"][0] == [0.25, 0.25]
    assert by_method["vpo (m per call)"][0] == [0.0, 0.0]
    assert by_method["vpo"][2][0] == pytest.approx(0.375)  # (3 - 1 + 2 - 1) / 8 problems
    assert by_method["vpo"][1] is None and by_method["grpo"][2] is None  # nothing against itself
    # another seed's problems differ: no pairing with it, so no interval at all
    records[3] = record("grpo", 1, ["e", "f", "g", "h"], ["e"])
    rows = dict((m, rest) for m, *rest in tables.leaderboards(report.merge(records))[0][1])
    assert rows["vpo"][2][0] == pytest.approx(0.5)  # seed 0 alone: (3 - 1) / 4
