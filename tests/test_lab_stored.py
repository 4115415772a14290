"""lab/stored.py: which stored runs and results an experiment may reuse (run_status, result keys),
and
--against's check of a committed board. The board here is tests/fixtures/board/results/, the result
files of

    python train.py --quick --tasks persona code --algos grpo vpo --set out_dir=OUT

(copy OUT/results/*.json there again if the tasks' problems ever change: the command then refuses
it). The --against command itself is tested in test_lab_experiment.py."""

import os

import pytest
import yaml

import train
from config import ConfigError
from lab import experiment, stored
from lab.stored import run_status

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BOARD = os.path.join(ROOT, "tests", "fixtures", "board")
QUICK = experiment.evaluation_settings(["persona", "code"], True, {})


def _configs(**overrides):
    return {
        ("persona", "vpo_loo", 0): experiment.run_config(
            "persona", "vpo_loo", 0, "out", True, overrides
        ),
        ("code", "vpo_loo", 0): experiment.run_config("code", "vpo_loo", 0, "out", True, overrides),
    }


def _own():
    return {"vpo_loo": set(), "grpo": set()}


def _saved_run(folder, cfg, final=True):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.yaml"), "w") as f:
        yaml.safe_dump(cfg, f)
    if final:
        open(os.path.join(folder, "final.pt"), "wb").close()


def test_run_status_reuses_only_identical_finished_runs(tmp_path):
    run = str(tmp_path / "run")
    cfg = train.resolve_config(
        overrides=[f"out_dir={run}", f"warmstart_from={tmp_path}/a/warmstart-persona-abc.pt"]
    )
    assert run_status(cfg) == "empty"
    _saved_run(run, cfg, final=False)
    assert run_status(cfg) == "unfinished"  # the experiment resumes it
    _saved_run(run, cfg)
    assert run_status(cfg) == "finished"
    # the same run copied elsewhere with its warm start (same cache key in the file name)
    moved = dict(cfg, warmstart_from=f"{tmp_path}/b/warmstart-persona-abc.pt", threads=2)
    assert run_status(moved) == "finished"
    assert run_status(dict(cfg, warmstart_from=f"{tmp_path}/a/warmstart-persona-xyz.pt")) == "other"
    assert run_status(dict(cfg, lr=cfg["lr"] * 2)) == "other"


def test_a_key_added_to_defaults_later_at_its_default_reuses_earlier_runs(tmp_path):
    """A run (and its evaluation) made before a DEFAULTS key existed ran with that key's default:
    the same command reuses it instead of refusing its folder; at another value it is another
    run."""
    run = str(tmp_path / "run")
    cfg = train.resolve_config(overrides=[f"out_dir={run}"])
    older = {k: v for k, v in cfg.items() if k != "parent_replay"}
    _saved_run(run, older)
    assert run_status(cfg) == "finished"
    assert run_status(dict(cfg, parent_replay=0.5)) == "other"
    older_key = stored.result_key(older, train.EVALUATION, ("pool_n",))
    assert stored.same_key(older_key, stored.result_key(cfg, train.EVALUATION, ("pool_n",)))
    assert not stored.same_key(
        older_key, stored.result_key(dict(cfg, parent_replay=0.5), train.EVALUATION, ("pool_n",))
    )
    assert not stored.same_key(None, stored.result_key(cfg, train.EVALUATION, ("pool_n",)))


def test_a_stored_key_holding_a_retired_setting_at_its_only_value_still_matches():
    """evo_seeds (searches per problem) was removed at 1, the only value it took: committed search
    results keep it in their keys and are still reused; at any other value they are not."""
    cfg = train.resolve_config()
    key = stored.result_key(cfg, train.EVALUATION, ("evo_budget",))
    retired = dict(key, settings={**key["settings"], "evo_seeds": 1})
    assert "evo_seeds" not in train.EVALUATION and stored.same_key(retired, key)
    assert not stored.same_key(dict(key, settings={**key["settings"], "evo_seeds": 2}), key)


def test_a_run_with_the_boards_settings_passes_the_check():
    board = stored.load_board(BOARD, ["persona", "code"], [0])
    stored.check_against(board, BOARD, _configs(), QUICK, _own())  # no error


def test_a_result_neutral_setting_that_differs_from_the_boards_passes():
    """cuda_graph (and threads, device, ...) change no result: a board stored with another value of
    one of them is still the same recipe."""
    board = stored.load_board(BOARD, ["persona", "code"], [0])
    for record in board.values():
        if "pools" in record:
            record["pools"]["key"]["run"].update(cuda_graph=False, threads=4)
    stored.check_against(board, BOARD, _configs(), QUICK, _own())  # no error
    # and a setting that does change results is still refused
    with pytest.raises(ConfigError, match="'lr'"):
        stored.check_against(board, BOARD, _configs(lr=0.123), QUICK, _own())


@pytest.mark.parametrize(
    "overrides, settings, named",
    [
        ({"lr": 0.123}, {}, "'lr'"),
        ({"kl_coef": 0.5}, {}, "'kl_coef'"),
        ({}, {"pool_n": 12}, "'pool_n'"),
        ({}, {"evo_budget": 99}, "'evo_budget'"),
    ],
)
def test_a_setting_that_differs_from_the_boards_is_refused_by_name(overrides, settings, named):
    board = stored.load_board(BOARD, ["persona", "code"], [0])
    with pytest.raises(ConfigError, match=named):
        stored.check_against(board, BOARD, _configs(**overrides), {**QUICK, **settings}, _own())


def test_a_methods_own_keys_may_differ():
    """Dr. GRPO's documented overrides are its own; the same keys on another method are refused."""
    board = stored.load_board(BOARD, ["persona"], [0])
    own = {"dr_grpo": {"scale_rewards", "loss_norm"}, "grpo": set()}
    cfg = experiment.run_config("persona", "dr_grpo", 0, "out", True)
    stored.check_against(board, BOARD, {("persona", "dr_grpo", 0): cfg}, QUICK, own)
    with pytest.raises(ConfigError, match="'loss_norm'"):
        stored.check_against(
            board, BOARD, {("persona", "dr_grpo", 0): cfg}, QUICK, {"dr_grpo": set(), "grpo": set()}
        )


def test_a_seed_or_task_the_board_lacks_is_refused():
    with pytest.raises(ConfigError, match="no GRPO result for persona seed 1"):
        stored.load_board(BOARD, ["persona"], [1])
    with pytest.raises(ConfigError, match="persona_collinear seed 0"):
        stored.load_board(BOARD, ["persona_collinear"], [0])


def test_a_result_made_by_other_code_moves_aside_and_comes_back_with_that_code(tmp_path):
    """keep_by_source on a result file: idea A's result, then idea B's code moves it to earlier/
    (naming the file that changed); back at A's code, A's result returns from there."""
    path = tmp_path / "results" / "persona-vpo-s0.json"
    path.parent.mkdir()
    a, b = {"vpo.py": "aaaa", "grpo.py": "cccc"}, {"vpo.py": "bbbb", "grpo.py": "cccc"}
    path.write_text("made by A")
    assert stored.keep_by_source(str(path), a, a) == ([], False)  # the same code: left alone
    assert stored.keep_by_source(str(path), a, b) == (["vpo.py"], False)
    assert not path.exists()
    path.write_text("made by B")
    assert stored.keep_by_source(str(path), b, a) == (["vpo.py"], True)
    assert path.read_text() == "made by A"
    assert sorted(os.listdir(tmp_path / "results" / "earlier")) == [
        f"persona-vpo-s0-{stored.source_hash(b)}.json"
    ]
    # a result made before results recorded their code counts as made by other code
    assert stored.keep_by_source(str(path), None, a) == (None, False) and not path.exists()


def test_a_run_folder_made_by_other_code_moves_aside_whole(tmp_path):
    run = tmp_path / "runs" / "persona-vpo-s0"
    run.mkdir(parents=True)
    (run / "final.pt").write_bytes(b"A")
    a, b = {"vpo.py": "aaaa"}, {"vpo.py": "bbbb"}
    assert stored.keep_by_source(str(run), a, b) == (["vpo.py"], False) and not run.exists()
    run.mkdir()
    (run / "final.pt").write_bytes(b"B")
    assert stored.keep_by_source(str(run), b, a) == (["vpo.py"], True)
    assert (run / "final.pt").read_bytes() == b"A"


def test_the_row_fingerprints_follow_the_imports():
    """A run's code is every reference file train.py imports; a warm start's pools do not depend
    on train.py, the optimum's neither on the warm start's training."""
    sources = stored.row_sources()
    assert {"train.py", "vpo.py", "grpo.py", "evaluate.py"} <= sources["run"].keys()
    assert "train.py" not in sources["warm"] and "warmstart.py" in sources["warm"]
    assert "warmstart.py" not in sources["optimum"] and "evaluate.py" in sources["optimum"]
    assert "evolve.py" in sources["warm"] and "evolve.py" in sources["optimum"]


def test_a_missing_board_folder_is_one_line_with_the_closest_board():
    typo = os.path.join(ROOT, "tests", "fixtures", "bord")
    with pytest.raises(ConfigError, match=f"no such folder; did you mean {BOARD}") as e:
        stored.load_board(typo, ["persona"], [0])
    assert "\n" not in str(e.value)
    with pytest.raises(ConfigError, match="is no board"):
        stored.load_board(os.path.join(ROOT, "tests"), ["persona"], [0])
