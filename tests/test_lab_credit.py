"""lab/credit.py: valid answers by place, and the paired differences its tables show."""

import numpy as np

from lab import credit


def test_valid_by_place_reads_each_rollouts_answers_in_order():
    # one problem, a pool of 2 rollouts of 3 answers: places 1, 2, 3 valid 2/2, 1/2, 0/2
    rewards = np.zeros((1, 6, 2))
    rewards[0, [0, 3, 1]] = 0.5
    assert credit.valid_by_place(rewards, 3).tolist() == [[1.0, 0.5, 0.0]]


def test_difference_pairs_the_seeds_both_hold():
    a = {0: [1.0, 1.0], 1: [0.5, 0.5], 2: [9.0, 9.0]}
    b = {0: [0.0, 0.0], 1: [0.5, 0.5]}
    (mean, low, high), seeds = credit.difference(a, b)
    assert seeds == [0, 1] and mean == 0.5 and low <= mean <= high
    assert credit.difference(a, {}) == (None, [])
    assert credit.cell(None) == "not run"


def test_pool_rows_show_each_method_and_its_difference_to_the_base():
    def pools(valid, best):
        return {"valid_by_place": [valid, valid], "best": [best, best], "pass": [0.0, 1.0]}

    found = {
        "code/vpo_set/0": pools([1.0, 0.5, 0.5], 0.8),
        "code/vpo_togo/0": pools([1.0, 0.75, 0.5], 0.9),
    }
    base, togo = credit.pool_rows(found, base="vpo_set")
    assert base == "| code | vpo_set | 0 | 1.000 | 0.500 | 0.500 | 0.800 | 0.500 |  |"
    # place 2: +0.25 on both problems, so the interval is a point; pass@30 the same pools' 0 and 1
    assert "| code | vpo_togo | 0 | 1.000 | 0.750 | 0.500 | 0.900 | 0.500 |" in togo
    assert "+0.250 [+0.250, +0.250] yes" in togo and togo.count("within noise") == 3


def test_training_tail_is_the_mean_of_the_last_steps(tmp_path, monkeypatch):
    import json

    monkeypatch.setattr(credit, "LAST_STEPS", 2)
    rows = [{"kind": "eval", "step": 0}]
    rows += [{"kind": "train", "step": s, **dict.fromkeys(credit.LOGGED, s)} for s in (1, 2, 3)]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    tail = credit.training_tail(str(tmp_path))
    assert tail["valid_answers"] == 2.5 and tail["step_1"]["set_score"] == 1 and tail["steps"] == 3
