"""runfiles.py, and the training step's guards that keep its files sound: the per-step logs (what a
training log says must compare across runs, and logging draws nothing from the training stream),
out_dir and checkpoint errors end to end (exit 2, one line on stderr, nothing in out_dir modified),
checkpoints that are missing, corrupt, foreign or would run code, atomic saves, and the guarded
step: a non-finite loss or weight stops a run before it reaches a checkpoint."""

import json
import os
import types
from pathlib import Path

import pytest
import torch
from tiny_runs import RUN, TINY, Killed, all_finite, config, read, refuses_in_one_line, tiny

import grpo
import runfiles
import search
import train as trainer
import vpo
from config import ConfigError, make_task
from runfiles import load_checkpoint, model_from_checkpoint
from train import train


def _step(weights, set_algo=True):
    task = make_task("persona")
    g = torch.Generator().manual_seed(0)
    # (P, G, m, D): the same answers for both runs
    rewards = torch.rand(2, 4, 3, task.dim, generator=g)
    batch = {
        "answers": [[("a",) * 3] * 4] * 2,
        "completion_mask": torch.ones(8, 5),
        "entropy": torch.ones(8, 5),
    }
    run = types.SimpleNamespace(
        task=task, cfg={"group_size": 4, "algo": "vpo" if set_algo else "grpo"}
    )
    return trainer.step_metrics(run, batch, rewards, rewards.mean(-1), weights, torch.zeros(2, 4))


def test_the_logged_set_score_is_the_same_for_every_weight_sampler_and_count():
    g = torch.Generator().manual_seed(1)
    dirichlet = vpo.sample_weights(2, 100, 4, sampler="dirichlet", generator=g)
    sobol = vpo.sample_weights(2, 16, 4, sampler="sobol", generator=g)
    # one-hot weightings: a sampler a student might add
    vertices = torch.eye(4)[None].expand(2, -1, -1)
    logged = [_step(w) for w in (dirichlet, sobol, vertices)]
    # fixed weightings
    assert logged[0]["set_score"] == logged[1]["set_score"] == logged[2]["set_score"]
    trained = [m["set_score_train"] for m in logged]
    assert len(set(trained)) == 3  # the run's own weightings, logged under another name
    assert _step(dirichlet, set_algo=False)["set_score"] == logged[0]["set_score"]
    assert "set_score_train" not in _step(dirichlet, set_algo=False)


def test_logging_draws_nothing_from_the_training_stream(tmp_path, monkeypatch):
    """Removing a metric must not change the run: step_metrics may not touch the training
    generator (two steps check it twice a run)."""
    out = train(tiny(tmp_path, "algo=grpo", "steps=2", f"out_dir={tmp_path}/a"))
    real = trainer.step_metrics

    def step_metrics(run, *args, **kwargs):
        state = run.policy.generator.get_state()
        metrics = real(run, *args, **kwargs)
        assert torch.equal(state, run.policy.generator.get_state())
        return metrics

    monkeypatch.setattr(trainer, "step_metrics", step_metrics)
    again = train(tiny(tmp_path, "algo=grpo", "steps=2", f"out_dir={tmp_path}/b"))
    assert (
        Path(os.path.join(out, "metrics.jsonl")).read_text()
        == Path(os.path.join(again, "metrics.jsonl")).read_text()
    )


def test_finished_run_is_not_overwritten(tmp_path):
    train(tiny(tmp_path, "steps=1"))  # one step finishes a run as well as four
    with pytest.raises(ConfigError, match="already holds a finished run"):
        train(tiny(tmp_path, "steps=1"))
    train(tiny(tmp_path, "steps=1", "overwrite=true"))


def test_missing_checkpoint_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="checkpoint not found"):
        model_from_checkpoint(str(tmp_path / "nope.pt"))
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(ConfigError, match="unreadable or corrupt"):
        model_from_checkpoint(str(bad))


class RunsCode:
    """Pickles as a call to os.system: what a malicious checkpoint would carry."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def test_a_checkpoint_that_would_run_code_is_refused_and_runs_nothing(tmp_path, capsys):
    marker = tmp_path / "ran"
    path = tmp_path / "shared.pt"
    torch.save(
        {
            "model": {"w": torch.zeros(2)},
            "model_config": {},
            "config": {},
            "payload": RunsCode(marker),
        },
        path,
    )
    with pytest.raises(ConfigError) as err:
        model_from_checkpoint(str(path))
    assert "nothing of it was run" in str(err.value) and "system" in str(err.value)
    assert len(str(err.value).splitlines()) == 1
    assert not marker.exists()
    # the command line says the same in one line (search.py loads checkpoints a classmate shared);
    # its main() in this process: the same exit status and line, without a second `import torch`
    with pytest.raises(SystemExit) as stop:
        search.main(["--checkpoints", str(path)])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and len(err.splitlines()) == 1, err
    assert "nothing of it was run" in err and not marker.exists()


# ----------------------------------------------------------------------------------------------
# End to end: exit 2, one line on stderr, nothing in out_dir modified (`runs` and `baseline`:
# conftest.py)


def corrupt(path):
    data = read(path)
    with open(path, "wb") as f:
        f.write(data[: len(data) // 2])


def foreign(path):
    torch.save({"weights": torch.zeros(3)}, path)


def other_code(path):
    """The run's source.json as if vpo.py had been edited since it started."""
    source = os.path.join(os.path.dirname(path), "source.json")
    with open(source) as f:
        made_by = json.load(f)
    with open(source, "w") as f:
        json.dump({**made_by, "vpo.py": "0000000000"}, f)


# (out_dir under runs, extra overrides, prepare the dir, expected text in the one error line)
BAD = [
    ("empty", ["resume=true"], None, "ckpt.pt does not exist"),
    ("unfinished", ["resume=true"], corrupt, "is unreadable or corrupt"),
    ("unfinished", ["resume=true"], foreign, "is not a checkpoint of this trainer"),
    (
        "unfinished",
        ["resume=true"],
        lambda p: os.remove(os.path.join(os.path.dirname(p), "metrics.jsonl")),
        "metrics.jsonl is missing",
    ),
    ("finished", [], None, "already holds a finished run; choose another out_dir"),
    ("finished", ["resume=true"], None, "already holds a finished run; nothing to resume"),
    ("unfinished", [], None, "holds an unfinished run; --set resume=true"),
    ("unfinished", ["resume=true", "lr=0.5"], None, "config differs from the saved run in ['lr']"),
    ("unfinished", ["resume=true", "algo=grpo", "seed=3"], None, "in ['algo', 'seed']"),
    ("unfinished", ["resume=true"], other_code, "vpo.py changed since it started; overwrite"),
    ("afile", [], lambda p: open(os.path.dirname(p), "w").close(), "cannot create directory"),
]


@pytest.mark.parametrize("where, overrides, prepare, message", BAD, ids=[b[3][:40] for b in BAD])
def test_bad_configuration_one_line_exit_2(
    runs, baseline, capsys, where, overrides, prepare, message
):
    refuses_in_one_line(runs, baseline, capsys, where, overrides, prepare, message)


def test_atomic_save_never_leaves_a_torn_file(tmp_path, monkeypatch):
    path = str(tmp_path / "ckpt.pt")
    runfiles.atomic_save({"model": {"w": torch.ones(2)}, "model_config": {}, "config": {}}, path)
    good = read(path)

    def dies_mid_write(obj, f, *args, **kwargs):
        f.write(b"PK\x03\x04 partial")
        raise Killed

    monkeypatch.setattr(torch, "save", dies_mid_write)
    with pytest.raises(Killed):
        runfiles.atomic_save({"model": {"w": torch.zeros(2)}}, path)
    assert read(path) == good and os.listdir(tmp_path) == ["ckpt.pt"]
    assert torch.equal(load_checkpoint(path)["model"]["w"], torch.ones(2))


# ----------------------------------------------------------------------------------------------
# Numerics: no NaN or inf reaches a checkpoint; a non-finite loss stops the run cleanly


def _check_stopped_cleanly(out, last_step):
    assert not (out / "final.pt").exists()
    ckpt = load_checkpoint(str(out / "ckpt.pt"))
    assert ckpt["step"] == last_step and all_finite(ckpt["model"])
    text = (out / "metrics.jsonl").read_text()
    assert "NaN" not in text and "Infinity" not in text


def test_absurd_lr_stops_with_exit_2_and_keeps_last_checkpoint(baseline, tmp_path, capsys):
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as exit_:
        trainer.main(
            [
                "--config",
                TINY,
                "--set",
                f"out_dir={out}",
                f"warmstart_dir={baseline['ws']}",
                *RUN,
                "lr=1e30",
                "ckpt_every=1",
            ]
        )
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert (
        len(err.splitlines()) == 1 and "non-finite" in err and "last checkpoint is kept" in err
    ), err
    _check_stopped_cleanly(out, last_step=1)


@pytest.mark.parametrize("fault", ["nan loss", "inf weights after step"])
def test_non_finite_stops_before_it_reaches_a_checkpoint(baseline, tmp_path, monkeypatch, fault):
    out = tmp_path / "run"
    calls = []
    if fault == "nan loss":
        real = grpo.policy_loss

        def policy_loss(*args, **kwargs):
            loss, stats = real(*args, **kwargs)
            calls.append(1)
            return (loss * float("nan") if len(calls) == 7 else loss), stats

        monkeypatch.setattr(grpo, "policy_loss", policy_loss)
    else:
        real = torch.optim.AdamW.step

        def step(self, *args, **kwargs):
            result = real(self, *args, **kwargs)
            calls.append(1)
            if len(calls) == 7:
                self.param_groups[0]["params"][0].data[0, 0] = float("inf")
            return result

        monkeypatch.setattr(torch.optim.AdamW, "step", step)
    with pytest.raises(FloatingPointError, match="non-finite"):
        train(config(out, baseline["ws"]))
    _check_stopped_cleanly(out, last_step=6)  # step 7 failed; ckpt.pt is still step 6's
