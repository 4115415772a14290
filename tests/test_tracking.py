"""report_to (tracking.py): short tiny runs with the real TensorBoard and trackio, their logged
scalars read back from each tracker's own store and compared with metrics.jsonl, a resumed run's
steps logged once, a missing package refused in one line, and the setting neutral to results (the
lab's keys, the committed board)."""

import gc
import json
import os
import shutil
import sys

import pytest
from tiny_runs import TINY, Killed, config

import runfiles
import tracking
import train as trainer
from config import ConfigError, trackers
from lab import experiment, stored
from train import train

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BOARD = os.path.join(ROOT, "docs", "figures", "leaderboard")


def expected_curves(run_dir):
    """metrics.jsonl -> {scalar name: [(step, value), ...]}, read here without tracking.py: each
    number under its kind, a list's items numbered."""
    curves = {}
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        for line in f:
            record = json.loads(line)
            for key, value in record.items():
                if key in ("kind", "step"):
                    continue
                values = enumerate(value) if isinstance(value, list) else [(None, value)]
                for i, v in values:
                    name = f"{record['kind']}/{key}" + ("" if i is None else f"/{i}")
                    curves.setdefault(name, []).append((record["step"], float(v)))
    return curves


def tensorboard_curves(logdir):
    """{tag: [(step, value), ...]} and the config text, as TensorBoard itself reads the folder."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(logdir)
    events.Reload()
    curves = {t: [(e.step, e.value) for e in events.Scalars(t)] for t in events.Tags()["scalars"]}
    config_text = events.Tensors("config/text_summary")[0].tensor_proto.string_val[0].decode()
    return curves, config_text


def trackio_curves(run_name):
    """{metric: [(step, value), ...]} and the config of a run in trackio's store (TRACKIO_DIR)."""
    import trackio
    from trackio.sqlite_storage import SQLiteStorage

    runs = [r for r in trackio.Api().runs(tracking.PROJECT) if r.name == run_name]
    assert len(runs) == 1, [r.name for r in trackio.Api().runs(tracking.PROJECT)]
    curves = {}
    for row in SQLiteStorage.get_logs(tracking.PROJECT, run_name, run_id=runs[0].id):
        for key, value in row.items():
            if key not in ("step", "timestamp"):
                curves.setdefault(key, []).append((row["step"], value))
    return curves, runs[0].config


def assert_same(logged, expected):
    """The same names, steps and values (TensorBoard keeps float32)."""
    assert logged.keys() == expected.keys()
    for name, points in expected.items():
        assert [s for s, _ in logged[name]] == [s for s, _ in points], name
        assert [v for _, v in logged[name]] == pytest.approx([v for _, v in points], rel=1e-6)


@pytest.fixture(scope="module")
def trackio_store(tmp_path_factory):
    """One report_dir for this file's trackio runs: trackio fixes its folder once per process, as
    it is first imported (so nothing here imports it before a run has)."""
    return tmp_path_factory.mktemp("tracking")


def test_report_to_names_each_tracker_once():
    assert trackers("none") == [] and trackers("tensorboard") == ["tensorboard"]
    assert trackers("trackio, tensorboard,trackio") == ["trackio", "tensorboard"]


def test_scalars_are_every_number_of_a_line_under_its_kind():
    line = {"kind": "train", "step": 3, "loss": 0.5, "reward_per_component": [0.25, 1], "ok": True}
    line["note"] = "words are not curves"
    assert tracking.scalars(line) == {
        "train/loss": 0.5,
        "train/reward_per_component/0": 0.25,
        "train/reward_per_component/1": 1.0,
        "train/ok": 1.0,
    }
    assert tracking.scalars({"kind": "eval", "step": 0, "heldout_scalar": 0.1}) == {
        "eval/heldout_scalar": 0.1
    }


def test_tensorboard_shows_every_scalar_of_metrics_jsonl_and_the_config(baseline, tmp_path):
    """3 steps: a checkpoint, evaluations, training lines (that a tracker changes nothing a run
    computes: the resumed run below, tracked by both, is the baseline byte for byte)."""
    out = train(
        config(
            tmp_path / "runs" / "persona-vpo-s0", baseline["ws"], "report_to=tensorboard", "steps=3"
        )
    )
    # the report_dir's default: tracking/ beside the run's folder, the run named by its folder
    logged, config_text = tensorboard_curves(
        str(tmp_path / "runs/tracking/tensorboard/persona-vpo-s0")
    )
    expected = expected_curves(out)
    assert "train/reward_per_component/3" in expected and "eval/heldout_scalar" in expected
    assert_same(logged, expected)
    assert '| algo | "vpo" |' in config_text and '| report_to | "tensorboard" |' in config_text


def test_trackio_shows_every_scalar_of_metrics_jsonl_and_the_config(
    baseline, tmp_path, trackio_store
):
    out = train(
        # 3 steps: a checkpoint, evaluations, training lines; the length is not what is checked
        config(tmp_path / "grpo-run", baseline["ws"], "report_to=trackio", "algo=grpo", "steps=3")
        | {"report_dir": str(trackio_store)}
    )
    logged, saved_config = trackio_curves("grpo-run")
    assert_same(logged, expected_curves(out))
    assert saved_config["algo"] == "grpo" and saved_config["lr"] == 1e-3


def _killed_at_the_second_checkpoint():
    real, calls = runfiles.atomic_save, []

    def save(obj, path):
        calls.append(path)
        if len(calls) == 2:
            raise Killed
        real(obj, path)

    return save


def test_a_resumed_run_logs_each_step_once(baseline, tmp_path, trackio_store, monkeypatch):
    """Killed as it saves the checkpoint of step 6 (its trackers have seen steps to 6, its last
    checkpoint is step 3's), then resumed: each tracker holds metrics.jsonl, every step once."""
    out = tmp_path / "resumed"
    cfg = config(out, baseline["ws"], "report_to=tensorboard,trackio") | {
        "report_dir": str(trackio_store)
    }
    with monkeypatch.context() as patch:
        patch.setattr(runfiles, "atomic_save", _killed_at_the_second_checkpoint())
        with pytest.raises(Killed):
            train(cfg)
    import trackio

    gc.collect()  # close the killed run's files, as process exit would
    trackio.finish()  # and its trackio run, as trackio does at exit
    before, _ = trackio_curves("resumed")
    assert max(s for s, _ in before["train/loss"]) == 6  # logged past the checkpoint it resumes
    train({**cfg, "resume": True})
    expected = expected_curves(out)
    assert [s for s, _ in expected["train/loss"]] == list(range(1, 13))
    assert_same(tensorboard_curves(str(trackio_store / "tensorboard" / "resumed"))[0], expected)
    assert_same(trackio_curves("resumed")[0], expected)
    with open(out / "metrics.jsonl", "rb") as f:
        assert f.read() == baseline["metrics"]


def test_a_finished_run_the_lab_reuses_joins_the_view_whole(baseline, tmp_path):
    run = tmp_path / "runs" / "persona-vpo-s0"
    shutil.copytree(baseline["out"], run)
    experiment.show_finished(config(run, baseline["ws"]))  # report_to=none: nothing
    assert sorted(os.listdir(tmp_path / "runs")) == ["persona-vpo-s0"]
    experiment.show_finished(config(run, baseline["ws"], "report_to=tensorboard"))
    logged, config_text = tensorboard_curves(
        str(tmp_path / "runs/tracking/tensorboard/persona-vpo-s0")
    )
    assert_same(logged, expected_curves(run))
    assert '| report_to | "none" |' in config_text  # the config it was trained with


@pytest.mark.parametrize("package", ["tensorboard", "trackio"])
def test_a_missing_package_stops_the_run_at_once_in_one_line(
    package, tmp_path, monkeypatch, capsys
):
    monkeypatch.setitem(sys.modules, package, None)  # `import package` now fails, as uninstalled
    with pytest.raises(SystemExit) as exit_:
        trainer.main(["--config", TINY, "--set", f"out_dir={tmp_path}/run", f"report_to={package}"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.count("\n") == 1
    assert err == f"error: report_to={package} needs its package: pip install {package}\n"
    assert not os.listdir(tmp_path)  # before the folder, before the warm start


def test_an_unknown_tracker_is_refused_in_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        trainer.main(["--config", TINY, "--set", f"out_dir={tmp_path}/run", "report_to=wandb"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "report_to must be none, tensorboard, trackio" in err


def test_the_default_writes_nothing_new(baseline):
    """report_to=none: no tracking/ beside the run, no tracker's file in it."""
    assert trainer.DEFAULTS["report_to"] == "none"
    assert sorted(os.listdir(os.path.dirname(baseline["out"]))) == ["run", "ws"]
    assert not [f for f in os.listdir(baseline["out"]) if "tfevents" in f or "trackio" in f]


def test_report_to_keys_no_result_and_still_matches_the_committed_board(tmp_path):
    """The lab keys runs and results without report_to and report_dir, and the board's settings
    check (--against) passes with them; another setting (lr) is still refused."""
    shown = {"report_to": "tensorboard", "report_dir": str(tmp_path)}
    plain = experiment.run_config("persona", "vpo", 0, str(tmp_path), quick=True)
    tracked = experiment.run_config("persona", "vpo", 0, str(tmp_path), quick=True, overrides=shown)
    assert tracked["report_to"] == "tensorboard"
    assert stored.result_key(plain, {}, []) == stored.result_key(tracked, {}, [])
    # nor by tracking.py's code: an edit of it retrains nothing
    assert "tracking.py" not in runfiles.source_fingerprint("train")
    tasks = ["persona", "code", "maze", "persona_collinear"]
    board = stored.load_board(BOARD, tasks, [0])
    for overrides, refused in [(shown, None), ({**shown, "lr": 0.123}, "'lr' is 0.123 here")]:
        settings = experiment.evaluation_settings(tasks, False, overrides)
        configs = {
            (t, "vpo_loo", 0): experiment.run_config(
                t, "vpo_loo", 0, str(tmp_path), False, overrides
            )
            for t in tasks
        }
        keys = experiment.own_keys(["vpo_loo"])
        if refused:
            with pytest.raises(ConfigError, match=refused):
                stored.check_against(board, BOARD, configs, settings, keys)
        else:
            stored.check_against(board, BOARD, configs, settings, keys)
