"""lab/report.py: result files merged over seeds, and the claims' verdicts from intervals. The
tables are tested in test_lab_tables.py."""

import functools
import json
import os
from pathlib import Path

import numpy as np
import pytest
from checks import record as _record

from lab import experiment, plots, report, tables


def _claim(results, number):
    """The evidence lines of claim `number` ("0." ... "5.") in the report."""
    text = next(c for c in report.claims(results) if c.startswith(f"**{number}."))
    return [line.removeprefix("   - ") for line in text.split("\n")[1:]]


def test_merge_averages_seeds_and_keeps_each_seed():
    records = [_record("persona", "vpo", 0, [0.4, 0.6]), _record("persona", "vpo", 1, [0.6, 0.8])]
    entry = report.merge(records)["tasks"]["persona"]["vpo"]
    assert entry["best_at_k"] == [0.6, 0.6] and entry["best_at_k_spread"] == [0.2, 0.2]
    assert entry["best_at_k_per_seed"] == [[0.5, 0.5], [0.7, 0.7]] and entry["seeds"] == [0, 1]
    assert entry["per_problem"][1]["best"] == [0.6, 0.8]


def test_solved_only_counts_what_one_search_unlocks_per_seed():
    def search(solved):  # one seed's search result: 4 problems searched, these solved
        return {"searches": 4, "solved": len(solved), "budget": 10, "solved_problems": solved}

    # seed 0: VPO solves p1 and p2, GRPO p2 and p3; seed 1 draws p1 again: only GRPO solves it there
    vpo = report.merge_searches([(0, search(["p1", "p2"])), (1, search([]))])
    grpo = report.merge_searches([(0, search(["p2", "p3"])), (1, search(["p1"]))])
    assert vpo["solved"] == 2 and grpo["solved_per_seed"] == [2, 1]
    only_vpo, only_grpo = report.solved_only(vpo, grpo)
    assert only_vpo == ["s0:p1"] and only_grpo == ["s0:p3", "s1:p1"]


def test_claim_verdicts_follow_the_interval():
    seeds = range(3)
    better = [_record("persona", "vpo", s, [0.7, 0.8, 0.9, 0.7]) for s in seeds] + [
        _record("persona", "grpo", s, [0.5, 0.6, 0.6, 0.5]) for s in seeds
    ]
    text = "\n".join(report.claims(report.merge(better)))
    assert "vs grpo +0.225 [+0.200, +0.250] (yes)" in text
    same = [_record("persona", a, s, [0.5, 0.7, 0.6, 0.2]) for a in ("vpo", "grpo") for s in seeds]
    assert "vs grpo +0.000 [+0.000, +0.000] (within noise)" in "\n".join(
        report.claims(report.merge(same))
    )
    worse = [_record("persona", "vpo", s, [0.1, 0.2, 0.1, 0.2]) for s in seeds] + [
        _record("persona", "grpo", s, [0.5, 0.6, 0.6, 0.5]) for s in seeds
    ]
    assert "(no)" in "\n".join(report.claims(report.merge(worse)))


def test_report_merges_seeds_run_in_different_folders(tmp_path, capsys):
    for seed in (0, 1):
        for method, best in (("vpo", [0.9, 0.8]), ("grpo", [0.5, 0.4])):
            report.update_record(
                str(tmp_path / f"s{seed}"),
                "persona",
                method,
                seed,
                **{
                    k: v
                    for k, v in _record("persona", method, seed, best).items()
                    if k not in ("task", "method", "seed")
                },
            )
    experiment.main(
        ["--report", str(tmp_path / "s0"), str(tmp_path / "s1"), "--out", str(tmp_path / "all")]
    )
    results = json.loads(Path(tmp_path / "all" / "results.json").read_text())
    assert results["seeds"] == [0, 1] and results["tasks"]["persona"]["vpo"]["best_at_k"] == [
        0.85,
        0.85,
    ]
    assert os.path.exists(tmp_path / "all" / "summary.md") and os.path.exists(
        tmp_path / "all" / "best_at_k.png"
    )
    assert "Seeds [0, 1]" in capsys.readouterr().out


def test_report_without_result_files_is_a_one_line_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        experiment.main(["--report", str(tmp_path)])
    assert e.value.code == 2 and "no result files" in capsys.readouterr().err


def gap_pools(mean_scalar, set_score, pass30):
    """A pool record with what the gap closed reads: best@1, the set score, pass@30."""
    return {
        "ks": [1, 30],
        "best_at_k": [mean_scalar, 1.0],
        "heldout_weight_best_at_k": [0.0, 0.0],
        "pass_at_k": [0.0, pass30],
        "mean_scalar": mean_scalar,
        "set_score": set_score,
        "per_problem": {"best": [1.0], "w_best": [0.0], "pass": [1.0]},
    }


def test_gap_closed_is_measured_from_the_warm_start_in_the_methods_own_format():
    records = [
        {"task": "code", "method": "optimum", "seed": 0, "m": 3, "pools": gap_pools(0.9, 0.8, 1.0)},
        {
            "task": "code",
            "method": "warm_start",
            "seed": 0,
            "m": 1,
            "pools": gap_pools(0.5, 0.7, 0.4),
        },
        {
            "task": "code",
            "method": report.warm_start_row(3),
            "seed": 0,
            "m": 3,
            "pools": gap_pools(0.5, 0.6, 0.5),
        },
        {"task": "code", "method": "grpo", "seed": 0, "m": 1, "pools": gap_pools(0.7, 0.7, 0.1)},
        {"task": "code", "method": "vpo", "seed": 0, "m": 3, "pools": gap_pools(0.5, 0.75, 0.75)},
    ]
    tasks = report.merge(records)["tasks"]["code"]
    assert tasks["grpo"]["gap_closed"]["objective_name"] == "mean_scalar"
    # (0.7 - 0.5) / (0.9 - 0.5)
    assert tasks["grpo"]["gap_closed"]["objective"] == pytest.approx(0.5)
    assert tasks["grpo"]["gap_closed"]["pass"] == pytest.approx(-0.5)  # (0.1 - 0.4) / (1.0 - 0.4)
    # (0.75 - 0.6) / (0.8 - 0.6)
    assert tasks["vpo"]["gap_closed"]["objective"] == pytest.approx(0.75)
    # against the 3-answer warm start
    assert tasks["vpo"]["gap_closed"]["pass"] == pytest.approx(0.5)
    assert "gap_closed" not in tasks["warm_start"] and "gap_closed" not in tasks["optimum"]


def test_the_warm_start_row_is_named_by_its_m_and_read_back_for_any_m():
    # the result files' names stay: one answer "warm_start", the default m = 3 "warm_start_m3"
    assert report.warm_start_row(1) == "warm_start" and report.warm_start_row(3) == "warm_start_m3"
    for m in (1, 2, 3, 12):
        assert report.warm_start_answers(report.warm_start_row(m)) == m
    for other in ("vpo", "optimum", "warm_start_m", "warm_start_mx", "warm_start (yours)"):
        assert report.warm_start_answers(other) is None
    assert report.untrained_row("warm_start_m5") and report.untrained_row("optimum")
    assert not report.untrained_row("vpo")


def test_a_set_method_closes_the_gap_from_the_warm_start_asked_for_its_own_m():
    def row(method, m, *values):
        return {"task": "code", "method": method, "seed": 0, "m": m, "pools": gap_pools(*values)}

    records = [
        row("optimum", 4, 0.9, 0.8, 1.0),
        row("warm_start", 1, 0.5, 0.7, 0.4),
        row(report.warm_start_row(4), 4, 0.5, 0.4, 0.5),
        row("vpo", 4, 0.5, 0.6, 0.75),
    ]
    tasks = report.merge(records)["tasks"]["code"]
    # (0.6 - 0.4) / (0.8 - 0.4): against the warm start asked for 4 answers
    assert tasks["vpo"]["gap_closed"]["objective"] == pytest.approx(0.5)
    assert "gap_closed" not in tasks["warm_start_m4"]


# ----------------------------------------------------------------------------------------------
# One rule for every verdict (report.verdict, report.no_gain_verdict): each outcome once, and each
# claim's verdict read from its interval, never from a point estimate.


@pytest.mark.parametrize(
    "interval, expected",
    [
        ((0.05, 0.01, 0.09), "yes"),
        ((-0.05, -0.09, -0.01), "no"),
        ((0.05, -0.01, 0.11), "within noise"),
        ((0.05, 0.0, 0.10), "within noise"),
        (None, "not measured"),
    ],
)
def test_verdict_of_a_claim_of_more(interval, expected):
    assert report.verdict(interval) == expected


@pytest.mark.parametrize(
    "interval, expected",
    [
        ((0.0, -0.015, 0.019), "yes (inside +-0.02)"),
        ((0.01, 0.005, 0.015), "yes (inside +-0.02)"),
        ((0.021, 0.001, 0.058), "no (VPO gains)"),
        ((-0.04, -0.06, -0.021), "VPO loses"),
        ((0.0, -0.01, 0.03), "within noise"),
    ],
)
def test_verdict_of_a_claim_of_no_gain_needs_the_whole_interval_inside_the_margin(
    interval, expected
):
    assert report.NO_GAIN_MARGIN == 0.02
    assert report.no_gain_verdict(interval) == expected


def _pair(task, vpo, grpo, seeds=range(3), **kw):
    return [_record(task, "vpo", s, vpo, **kw) for s in seeds] + [
        _record(task, "grpo", s, grpo, **kw) for s in seeds
    ]


def test_claim_2_diversity_is_decided_by_its_paired_interval():
    def records(vpo, grpo):
        return [
            _record(
                "persona", "vpo", s, [0.5] * 4, per_problem_diversity=vpo, diversity=sum(vpo) / 4
            )
            for s in range(3)
        ] + [
            _record(
                "persona", "grpo", s, [0.5] * 4, per_problem_diversity=grpo, diversity=sum(grpo) / 4
            )
            for s in range(3)
        ]

    (line,) = _claim(report.merge(records([0.8, 0.7, 0.9, 0.6], [0.3, 0.2, 0.4, 0.5])), 2)
    assert line.endswith("over problems and seeds: yes") and "(2.14x)" in line
    (line,) = _claim(report.merge(records([0.1, 0.2, 0.1, 0.2], [0.3, 0.2, 0.4, 0.5])), 2)
    assert line.endswith(": no")
    # VPO's mean is higher (0.6 vs 0.5) but one problem carries it all: the interval holds zero
    (line,) = _claim(report.merge(records([0.5, 0.4, 0.6, 0.9], [0.5, 0.6, 0.4, 0.5])), 2)
    assert line.endswith(": within noise")


def test_claim_2_without_per_problem_diversity_resamples_seeds_alone():
    records = [
        _record("persona", "vpo", s, [0.5], diversity=d) for s, d in enumerate((0.7, 0.8, 0.2))
    ] + [_record("persona", "grpo", s, [0.5], diversity=0.4) for s in range(3)]
    (line,) = _claim(report.merge(records), 2)
    # VPO above on 2 seeds of 3, below on the third
    assert "over 3 seeds only: within noise" in line
    records[2]["pools"]["diversity"] = 0.5
    assert _claim(report.merge(records), 2)[0].endswith("over 3 seeds only: yes")


def test_claim_3_pass_at_k_is_decided_by_its_paired_interval():
    def pass_records(vpo, grpo):
        return [_record("code", "vpo", s, [0.5] * 4, passed=vpo) for s in range(3)] + [
            _record("code", "grpo", s, [0.5] * 4, passed=grpo) for s in range(3)
        ]

    assert _claim(report.merge(pass_records([1, 1, 1, 0], [0, 0, 0, 0])), 3)[0].endswith(": yes")
    assert _claim(report.merge(pass_records([1, 0, 0, 0], [0, 0, 0, 0])), 3)[0].endswith(
        ": within noise"
    )
    assert _claim(report.merge(pass_records([0, 0, 0, 0], [1, 1, 1, 0])), 3)[0].endswith(": no")


def _search_record(method, seed, problems, solved, m=1):
    search = {
        "searches": len(problems),
        "solved": len(solved),
        "budget": 10,
        "solved_problems": solved,
        "key": {"problems": problems},
    }
    return {"task": "code", "method": method, "seed": seed, "m": m, "search": search}


def test_claim_4_search_is_decided_by_the_paired_interval_not_by_the_counts():
    p = [f"p{i}" for i in range(8)]
    # VPO solves more in total (7 vs 4) but loses one seed: the interval holds zero
    records = [
        _search_record("vpo", 0, p, p[:6]),
        _search_record("grpo", 0, p, p[:1]),
        _search_record("vpo", 1, p, p[:1]),
        _search_record("grpo", 1, p, p[:3]),
    ]
    lines = _claim(report.merge(records), 4)
    assert lines[0] == "solved (same-budget sampling in brackets): vpo 7/16, grpo 4/16"
    assert (
        lines[1].startswith("vpo - grpo, share solved +0.188 [")
        and ": within noise (solved only by vpo 5, only by grpo 2)" in lines[1]
    )
    records = [
        _search_record(a, s, p, p[:6] if a == "vpo" else p[:1])
        for a in ("vpo", "grpo")
        for s in range(3)
    ]
    assert ": yes (solved only by vpo 15, only by grpo 0)" in _claim(report.merge(records), 4)[1]
    records = [
        _search_record(a, s, p, p[:1] if a == "vpo" else p[:6])
        for a in ("vpo", "grpo")
        for s in range(3)
    ]
    assert ": no (solved only by vpo 0, only by grpo 15)" in _claim(report.merge(records), 4)[1]


def test_claim_4_reports_the_matched_format_pair_with_its_own_interval():
    """Where both mutation rows ran, claim 4 adds vpo_mutation - grpo_mutation, paired on their own
    problems."""
    p = [f"p{i}" for i in range(8)]
    records = [
        _search_record(a, s, p, solved)
        for s in range(3)
        for a, solved in (
            ("vpo", p[:2]),
            ("grpo", p[:2]),
            ("vpo_mutation", p[:5]),
            ("grpo_mutation", []),
        )
    ]
    lines = _claim(report.merge(records), 4)
    assert lines[1].startswith("vpo - grpo, share solved +0.000") and ": within noise" in lines[1]
    assert lines[2].startswith("vpo_mutation - grpo_mutation, share solved +0.625 [") and lines[
        2
    ].endswith(": yes (solved only by vpo_mutation 15, only by grpo_mutation 0)")
    alone = [r for r in records if r["method"] != "grpo_mutation"]
    assert len(_claim(report.merge(alone), 4)) == 2  # one mutation row alone: no pair


def test_claim_5_control_no_gain_and_gain():
    flat = [0.5, 0.6, 0.7, 0.4]
    same = _pair("persona_collinear", flat, flat)
    assert _claim(report.merge(same), 5) == [
        "w-best@k VPO - grpo +0.000 [+0.000, +0.000]: yes (inside +-0.02)"
    ]
    gain = _pair("persona_collinear", [v + 0.05 for v in flat], flat)
    assert _claim(report.merge(gain), 5)[0].endswith(": no (VPO gains)")
    loss = _pair("persona_collinear", [v - 0.05 for v in flat], flat)
    assert _claim(report.merge(loss), 5)[0].endswith(": VPO loses")
    noisy = _pair("persona_collinear", [0.5, 0.6, 0.7, 0.5], [0.5, 0.6, 0.7, 0.4])
    assert _claim(report.merge(noisy), 5)[0].endswith(": within noise")  # +0.025 [+0, +0.1]


def _gap_records(grpo_pass, grpo_valid=0.9):
    def pools(mean_scalar, pass_rate):
        return {
            "ks": [1, 30],
            "best_at_k": [mean_scalar, 1.0],
            "heldout_weight_best_at_k": [0.0, 0.0],
            "pass_at_k": [0.0, pass_rate],
            "mean_scalar": mean_scalar,
            "set_score": 0.5,
            "valid": 0.9,
            "per_problem": {"best": [1.0] * 4, "w_best": [0.0] * 4, "pass": [pass_rate] * 4},
        }

    training = {"last10": {"valid_answers": grpo_valid}}
    return [
        {"task": "code", "method": "optimum", "seed": 0, "m": 1, "pools": pools(0.9, 1.0)},
        {"task": "code", "method": "warm_start", "seed": 0, "m": 1, "pools": pools(0.5, 0.5)},
        {
            "task": "code",
            "method": "grpo",
            "seed": 0,
            "m": 1,
            "pools": pools(0.8, grpo_pass),
            "training": training,
        },
    ]


def test_claim_0_shows_pass_at_k_and_says_where_rl_made_it_worse():
    (line,) = _claim(report.merge(_gap_records(grpo_pass=0.25)), 0)
    assert "own objective (mean_scalar) 0.75 (0.75): yes" in line  # (0.8 - 0.5) / (0.9 - 0.5)
    # (0.25 - 0.5) / (1 - 0.5)
    assert "pass@30 -0.50 (-0.50), RL made pass@30 worse on average" in line
    (line,) = _claim(report.merge(_gap_records(grpo_pass=0.75)), 0)
    assert "pass@30 0.50 (0.50) (vs warm_start" in line and "worse" not in line


def test_a_method_that_did_not_train_is_marked_and_ranked_apart(tmp_path):
    records = _gap_records(grpo_pass=0.5, grpo_valid=0.0) + [
        _record("code", "vpo", 0, [0.2] * 4) | {"training": {"last10": {"valid_answers": 0.85}}}
    ]
    results = report.merge(records)
    assert report.did_not_train(results["tasks"]["code"]["grpo"])
    assert not report.did_not_train(results["tasks"]["code"]["vpo"])
    assert "DID NOT TRAIN" in _claim(results, 0)[0]
    table = tables.leaderboard_table(results)
    start = table.index("#### code: best@30, ranked") + 4
    best = table[start : table.index("", start) + 1]
    # grpo's best@30 (1.0) ties the top, yet it comes last, named so
    assert best[-2].startswith("| grpo (did not train) | 1.000 ") and best[-1] == ""
    assert best[0].startswith("| ") and " | 1.000 " in best[0] and "grpo" not in best[0]
    assert any(
        line.startswith("| grpo (did not train) ")
        for line in tables.summary_markdown(results).splitlines()
    )
    order = plots.leaderboard_figure(tables.leaderboard_rows(results), str(tmp_path / "lb.png"))
    assert order["code: best@30"][-1] == "grpo" + report.UNTRAINED


def test_what_drives_search_correlates_each_trained_policys_properties_with_its_solved_share(
    tmp_path, monkeypatch
):
    """Four trained methods on two seeds whose search solves more the fewer invalid children they
    write; their diversity is unrelated. The warm start and a parent-prompt-trained row are left
    out. The bootstrap draws 200 resamples (the report's 2,000 take seconds for each property), and
    the report draws its drivers' figure alone: its other figures are left to test_lab_plots.py."""
    fewer = functools.partial(report.rank_correlation_interval, num_resamples=200)
    monkeypatch.setattr(report, "rank_correlation_interval", fewer)
    monkeypatch.setattr(plots, "make_all", lambda *args: [])
    monkeypatch.setattr(plots, "leaderboard_figure", lambda *args, **kwargs: None)
    problems = ["a", "b", "c", "d"]

    def record(method, seed, solved, invalid, diversity):
        mutations = {"children": 10, "invalid": invalid, "improved": 10 - invalid}
        search = {
            "searches": 4,
            "solved": len(solved),
            "budget": 10,
            "solved_problems": solved,
            "key": {"problems": problems},
            "mutations": mutations,
            "solved_curve": [len(solved) / 4] * 10,
        }
        r = _record("code", method, seed, [0.5] * 4, diversity=diversity)
        return dict(r, search=search, training={"last10": {"valid_answers": 0.9}})

    records = [
        record(m, s, problems[:k], 10 - 2 * k, d)
        for m, k, d in (
            ("grpo", 1, 3.0),
            ("vpo", 2, 1.0),
            ("max_at_k", 3, 4.0),
            ("dr_grpo", 4, 2.0),
        )
        for s in (0, 1)
    ]
    records += [record("warm_start", s, [], 9, 9.0) for s in (0, 1)] + [
        record("vpo_mutation", 0, problems, 0, 0.5)
    ]
    results = report.merge(records)
    points = report.search_points(results)
    assert (
        sorted({m for m, _, _ in points}) == ["dr_grpo", "grpo", "max_at_k", "vpo"]
        and len(points) == 8
    )
    drivers = {name: iv for name, _, iv in report.search_drivers(results)}
    assert drivers["invalid"][0] == pytest.approx(-1.0) and drivers["improved"][0] == pytest.approx(
        1.0
    )
    # ranks (2, 0, 3, 1) vs (0, 1, 2, 3): 1 - 6 * 10 / (4 * 15)
    assert drivers["diversity"][0] == pytest.approx(0.0)
    lines = tables.drivers_table(results)
    assert (
        lines[0].startswith("What drives search (code)")
        and "| children invalid | -1.000 [-1.000, -1.000] |" in lines
    )
    tables.write_report(str(tmp_path), results)
    assert os.path.exists(tmp_path / "search_drivers.png")


def test_spearman_is_spearmans_with_ties_sharing_their_mean_rank():
    assert report.spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert report.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    # ranks (0, 1.5, 1.5, 3) against (0, 1, 2, 3): Pearson's r of the ranks, by hand 3 / sqrt(10)
    assert report.spearman([1, 2, 2, 3], [5, 6, 7, 8]) == pytest.approx(3 / np.sqrt(10))
    # nan: no order
    assert report.spearman([7, 7, 7], [1, 2, 3]) != report.spearman([7, 7, 7], [1, 2, 3])


def test_rank_correlation_interval_resamples_whole_methods():
    # three methods, two seeds each, perfectly ordered: every resample keeps the order
    rho, low, high = report.rank_correlation_interval(
        [1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 5, 6], [0, 0, 1, 1, 2, 2], 300
    )
    assert rho == pytest.approx(1.0) and low == pytest.approx(1.0) and high == pytest.approx(1.0)
    # the third method against the order of the other two: which methods a resample draws decides
    # the sign
    rho, low, high = report.rank_correlation_interval(
        [1, 2, 3, 4, 5, 6], [1, 2, 3, 4, -9, -8], [0, 0, 1, 1, 2, 2], 300
    )
    assert (
        rho == pytest.approx(-13 / 35) and low == pytest.approx(-1.0) and high == pytest.approx(1.0)
    )


# ---------------------------------------------------------------- paired bootstrap interval


def test_paired_bootstrap_identical_methods_and_a_constant_shift():
    a = np.random.default_rng(0).random((3, 40))
    assert report.paired_bootstrap_interval(a, a.copy()) == (0.0, 0.0, 0.0)
    # every problem 0.25 better: every resample's mean gap is 0.25 whatever it draws
    assert report.paired_bootstrap_interval(a + 0.25, a, num_resamples=500) == pytest.approx(
        (0.25, 0.25, 0.25), abs=1e-12
    )
    # paired: a shift survives problems of very different difficulty, which an unpaired interval
    # would not
    hard_and_easy = np.tile(np.linspace(0, 0.7, 40), (3, 1))
    assert report.paired_bootstrap_interval(hard_and_easy + 0.1, hard_and_easy) == pytest.approx(
        (0.1, 0.1, 0.1), abs=1e-12
    )


def test_paired_bootstrap_known_cases():
    # one seed, two problems with gaps 0 and 1: a resample's mean is 0, .5 or 1 with chances 1/4,
    # 1/2,
    # 1/4, so the 95% interval runs from 0 to 1 around the mean .5
    assert report.paired_bootstrap_interval([[1.0, 1.0]], [[1.0, 0.0]]) == (0.5, 0.0, 1.0)
    # the same gaps on two seeds of one problem: now the seeds are what is resampled
    assert report.paired_bootstrap_interval([[0.0], [1.0]], [[0.0], [0.0]]) == (0.5, 0.0, 1.0)
    # one seed, one problem: nothing to resample
    assert report.paired_bootstrap_interval([[0.75]], [[0.5]]) == (0.25, 0.25, 0.25)
    # at level ~0 the interval shrinks to the resamples' median, .5 here
    assert report.paired_bootstrap_interval([[1.0, 1.0]], [[1.0, 0.0]], level=1e-9)[1:] == (
        0.5,
        0.5,
    )


def test_paired_bootstrap_is_antisymmetric_deterministic_and_brackets_the_mean():
    rng = np.random.default_rng(1)
    a, b = rng.random((3, 30)), rng.random((3, 30))
    mean, low, high = report.paired_bootstrap_interval(a, b, seed=7)
    assert mean == pytest.approx(float((a - b).mean()), abs=1e-15) and low < mean < high
    assert report.paired_bootstrap_interval(a, b, seed=7) == (mean, low, high)
    assert report.paired_bootstrap_interval(a, b, seed=8) != (mean, low, high)
    assert report.paired_bootstrap_interval(b, a, seed=7) == pytest.approx(
        (-mean, -high, -low), abs=1e-12
    )
    narrow = report.paired_bootstrap_interval(a, b, level=0.5, seed=7)
    assert low < narrow[1] < narrow[2] < high


@pytest.mark.parametrize(
    "a, b, kwargs",
    [
        (np.zeros((2, 3)), np.zeros((2, 4)), {}),  # different problems
        (np.zeros(3), np.zeros(3), {}),  # not (seeds, problems)
        (np.zeros((0, 3)), np.zeros((0, 3)), {}),  # empty
        (np.full((2, 3), np.nan), np.zeros((2, 3)), {}),
        (np.zeros((2, 3)), np.zeros((2, 3)), {"level": 1.0}),
        (np.zeros((2, 3)), np.zeros((2, 3)), {"num_resamples": 0}),
    ],
)
def test_paired_bootstrap_rejects_bad_inputs(a, b, kwargs):
    with pytest.raises(ValueError):
        report.paired_bootstrap_interval(a, b, **kwargs)
