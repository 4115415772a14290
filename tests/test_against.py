"""--against: a new method trained and evaluated alone, on a committed board's problems and settings, and
ranked among the board's methods. The board here is tests/fixtures/board/results/, the result files of

    python train.py --quick --tasks persona code --algos grpo vpo --set out_dir=OUT

(copy OUT/results/*.json there again if the tasks' problems ever change: the command then refuses it)."""
import json
import os

import pytest

from lab import experiment
import search
from lab import stored
import train

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BOARD = os.path.join(ROOT, "tests", "fixtures", "board")
QUICK = experiment.evaluation_settings(["persona", "code"], True, {})


def _configs(**overrides):
    return {("persona", "vpo_loo", 0): experiment.run_config("persona", "vpo_loo", 0, "out", True, overrides),
            ("code", "vpo_loo", 0): experiment.run_config("code", "vpo_loo", 0, "out", True, overrides)}


def _own():
    return {"vpo_loo": set(), "grpo": set()}


def test_a_run_with_the_boards_settings_passes_the_check():
    board = stored.load_board(BOARD, ["persona", "code"], [0])
    stored.check_against(board, BOARD, _configs(), QUICK, _own())  # no error


def test_a_result_neutral_setting_that_differs_from_the_boards_passes():
    """cuda_graph (and threads, device, ...) change no result: a board stored with another value of one
    of them is still the same recipe."""
    board = stored.load_board(BOARD, ["persona", "code"], [0])
    for record in board.values():
        if "pools" in record:
            record["pools"]["key"]["run"].update(cuda_graph=False, threads=4)
    stored.check_against(board, BOARD, _configs(), QUICK, _own())  # no error
    with pytest.raises(train.ConfigError, match="'lr'"):  # and a setting that does change results is still refused
        stored.check_against(board, BOARD, _configs(lr=0.123), QUICK, _own())


@pytest.mark.parametrize("overrides, settings, named", [({"lr": 0.123}, {}, "'lr'"),
                                                        ({"kl_coef": 0.5}, {}, "'kl_coef'"),
                                                        ({}, {"pool_n": 12}, "'pool_n'"),
                                                        ({}, {"evo_budget": 99}, "'evo_budget'")])
def test_a_setting_that_differs_from_the_boards_is_refused_by_name(overrides, settings, named):
    board = stored.load_board(BOARD, ["persona", "code"], [0])
    with pytest.raises(train.ConfigError, match=named):
        stored.check_against(board, BOARD, _configs(**overrides), {**QUICK, **settings}, _own())


def test_a_methods_own_keys_may_differ():
    """Dr. GRPO's documented overrides are its own; the same keys on another method are refused."""
    board = stored.load_board(BOARD, ["persona"], [0])
    own = {"dr_grpo": {"scale_rewards", "loss_norm"}, "grpo": set()}
    cfg = experiment.run_config("persona", "dr_grpo", 0, "out", True)
    stored.check_against(board, BOARD, {("persona", "dr_grpo", 0): cfg}, QUICK, own)
    with pytest.raises(train.ConfigError, match="'loss_norm'"):
        stored.check_against(board, BOARD, {("persona", "dr_grpo", 0): cfg}, QUICK, {"dr_grpo": set(), "grpo": set()})


def test_a_seed_or_task_the_board_lacks_is_refused():
    with pytest.raises(train.ConfigError, match="no GRPO result for persona seed 1"):
        stored.load_board(BOARD, ["persona"], [1])
    with pytest.raises(train.ConfigError, match="persona_collinear seed 0"):
        stored.load_board(BOARD, ["persona_collinear"], [0])


def test_the_new_method_is_ranked_among_the_board_on_its_problems(tmp_path, capsys):
    out = str(tmp_path / "against")
    experiment.main(["--quick", "--tasks", "persona", "code", "--algos", "vpo_loo", "--against", BOARD,
                     "--set", f"out_dir={out}"])
    # only the new method was trained and evaluated: the board's warm starts, optimum and screens are not redone
    assert sorted(os.listdir(os.path.join(out, "results"))) == ["code-vpo_loo-s0.json", "persona-vpo_loo-s0.json"]
    new = json.load(open(os.path.join(out, "results", "code-vpo_loo-s0.json")))
    board = json.load(open(os.path.join(BOARD, "results", "code-grpo-s0.json")))
    assert new["search"]["key"]["problems"] == board["search"]["key"]["problems"]  # the board's search problems
    assert new["pools"]["problems"] == board["pools"]["problems"]
    summary = open(os.path.join(out, "summary.md")).read()
    assert f"## vpo_loo against the board in {BOARD}" in summary
    row = next(line for line in summary.splitlines() if line.startswith("| persona: w-best@6 | vpo_loo |"))
    assert " of 5 |" in row and row.count("[") == 3  # ranked among 5; intervals vs VPO, GRPO, the warm start
    assert any(v in row for v in ("yes", "no", "within noise"))
    assert "| grpo |" in summary and "| vpo_loo |" in summary  # the board's rows and the new one, in one table
    assert "expected time about" in capsys.readouterr().out


def test_the_command_refuses_a_mismatch_in_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        experiment.main(["--quick", "--tasks", "persona", "--algos", "vpo_loo", "--against", BOARD,
                         "--set", f"out_dir={tmp_path}", "lr=0.123"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1 and "'lr' is 0.123 here" in err
    assert not os.path.exists(tmp_path / "results")  # refused before anything ran


def test_a_method_already_on_the_board_runs_as_its_own_row_on_the_tasks_asked(tmp_path, capsys):
    """An edited vpo.py run as `vpo` against the board: its row "vpo (yours)" beside the board's vpo, with
    paired intervals and verdicts against the board's VPO, GRPO and warm start; only persona is shown."""
    out = str(tmp_path / "yours")
    experiment.main(["--quick", "--tasks", "persona", "--algos", "vpo", "--against", BOARD, "--set", f"out_dir={out}"])
    console = capsys.readouterr().out
    summary = open(os.path.join(out, "summary.md")).read()
    for text in (console, summary):
        assert "SMOKE TEST" in text  # a --quick run says its numbers mean nothing
        assert f"## vpo (yours) against the board in {BOARD}" in text and "Tasks persona, seeds [0]" in text
        row = next(line for line in text.splitlines() if line.startswith("| persona: w-best@6 | vpo (yours) |"))
        assert row.count("[") == 3 and row.count("within noise") + row.count("yes") + row.count("no") >= 3
        assert "code:" not in text.split("## vpo (yours)")[1].split("\n\n## ")[0]  # only the task that ran
    assert summary.index("## vpo (yours) against") < summary.index("### persona")  # the comparison comes first
    assert "| vpo |" in summary and "| vpo (yours) |" in summary  # the board's vpo and the new one, side by side
    assert len(console.split("## vpo (yours) against")[1].splitlines()) < 20  # the comparison fits a screen
    results = json.load(open(os.path.join(out, "results.json")))
    assert set(results["tasks"]) == {"persona"} and "vpo (yours)" in results["tasks"]["persona"]


def test_against_reuses_a_warm_start_cached_by_another_experiment(tmp_path, monkeypatch, capsys):
    cfg = experiment.run_config("persona", "vpo", 0, str(tmp_path / "mine"), True)
    path = experiment.warmstart_path(cfg)
    elsewhere = tmp_path / "out" / "headline" / "warmstart" / os.path.basename(path)
    elsewhere.parent.mkdir(parents=True)
    elsewhere.write_bytes(b"weights")
    monkeypatch.chdir(tmp_path)

    class Say:
        said = []

        def say(self, msg):
            self.said.append(msg)
    experiment.reuse_warm_start(path, Say())
    assert open(path, "rb").read() == b"weights" and "reusing" in Say.said[0]
