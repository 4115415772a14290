"""config.py (through train.py's resolve_config): unknown keys, wrong types and out-of-range values
fail with one line, in-process and end to end (train.py's command line: exit 2, one line on stderr,
nothing in out_dir modified), and make_task refuses what it does not know."""

import json
import os
import shutil
import subprocess
import sys

import pytest
import torch
from tiny_runs import cli, refuses_in_one_line, snapshot, tiny
from tiny_runs import config as run_config

import config
import runfiles
import train as trainer
import vpo
from config import ConfigError, make_task
from train import ADVANTAGES, DEFAULTS, resolve_config, train


def test_defaults_are_valid():
    """No file and no overrides: the defaults, checked like any other config, in a copy of their
    own."""
    cfg = resolve_config()
    assert cfg == DEFAULTS and cfg is not DEFAULTS
    cfg["lr"] = 0.5
    assert DEFAULTS["lr"] == 1e-3  # a caller's edits stay in its copy
    # the recipe, written out rather than read back from DEFAULTS (G = 8, m = 3, N = 100, alpha = 1:
    # README and
    # docs/METHOD.md)
    assert {
        k: DEFAULTS[k]
        for k in (
            "task",
            "algo",
            "model",
            "group_size",
            "answers_per_rollout",
            "num_weights",
            "alpha",
            "lr",
            "clip",
            "kl_coef",
            "scale_rewards",
            "loss_norm",
        )
    } == dict(
        task="persona",
        algo="vpo",
        model="cpu",
        group_size=8,
        answers_per_rollout=3,
        num_weights=100,
        alpha=1.0,
        lr=1e-3,
        clip=0.2,
        kl_coef=0.0,
        scale_rewards="group",
        loss_norm="tokens",
    )
    # the check runs on the defaults themselves, not only on what a file or an override changes
    for key, bad, message in [
        ("group_size", 1, "group_size must be >= 2"),
        ("lr", 0.0, "lr must be > 0"),
        ("algo", "ppo", "algo must be one of"),
        ("top_p", 1.5, r"top_p must be in \(0, 1\]"),
    ]:
        with pytest.raises(ConfigError, match=message):
            config.resolve({**DEFAULTS, key: bad}, ADVANTAGES, samplers=vpo.WEIGHT_SAMPLERS)


def test_overrides_parse_types():
    cfg = resolve_config(
        overrides=["lr=1e-3", "steps=7", "algo=grpo", "overwrite=true", "out_dir=123", "alpha=2"]
    )
    assert cfg["lr"] == 0.001 and cfg["steps"] == 7 and cfg["algo"] == "grpo"
    assert cfg["overwrite"] is True and cfg["out_dir"] == "123" and cfg["alpha"] == 2.0


@pytest.mark.parametrize(
    "override, message",
    [
        ("lrr=0.1", "unknown config key 'lrr' (did you mean 'lr'?)"),
        ("steps=abc", "config key 'steps' must be int"),
        ("steps=1.5", "config key 'steps' must be int"),
        ("lr=-1", "lr must be > 0"),
        ("group_size=1", "group_size must be >= 2"),
        ("answers_per_rollout=0", "answers_per_rollout (m) must be >= 1"),
        ("alpha=0", "alpha must be > 0"),
        ("sft_single_first=1.5", "sft_single_first must be in [0, 1]"),
        ("algo=ppo", "algo must be one of"),
        ("task=chess", "task must be one of"),
        ("task_options={bogus: 1}", "task_options for task 'persona'"),
        ("weight_sampler=sobol", None),
        ("loss_norm=mean", "loss_norm must be tokens or constant, got 'mean'"),
        ("format_coef=-0.5", "format_coef must be >= 0, got -0.5"),
        ("overwrite=yes please", "config key 'overwrite' must be bool"),
        ("noequals", "must look like key=value"),
    ],
)
def test_bad_overrides(override, message):
    if message is None:
        resolve_config(overrides=[override])
        return
    with pytest.raises(ConfigError) as err:
        resolve_config(overrides=[override])
    assert message in str(err.value)


def test_bad_files(tmp_path):
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError, match="cannot read config file"):
        resolve_config(str(missing))
    broken = tmp_path / "broken.yaml"
    broken.write_text("steps: [1, 2\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        resolve_config(str(broken))
    listy = tmp_path / "list.yaml"
    listy.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="must hold a mapping"):
        resolve_config(str(listy))


# Each command with two --set, the first item wrong: its one-line error shows that the first --set
# was kept. Then train.py on the copies of a run (`runs` below): a range error on a fresh out_dir,
# and a resume of an unfinished run with a changed config. The tests below read them.
COMMANDS = {
    "lab/experiment.py": ["lab/experiment.py", "--set", "stpes=3", "--set", "out_dir={x}"],
    "search.py": ["search.py", "--checkpoints", "missing.pt", "--set", "evo_budget=-1"]
    + ["--set", "pool_n=5"],
    "fresh": cli("{runs}/fresh", "{ws}", "answers_per_rollout=0")[1:],
    "unfinished": cli("{runs}/unfinished", "{ws}", "resume=true", "group_size=8")[1:],
    # the last: the process's own exit status and stderr
    "train.py": ["train.py", "--set", "stpes=3", "--set", "out_dir={x}"],
}

# One interpreter runs every command (each start costs seconds of CPU), each script as `python
# script ...` runs it (runpy, as __main__, with its own sys.argv and sys.path[0]), its exit status
# (SystemExit) and stderr caught; the last command is the process's own, read as it exits. Anything
# printed outside a command (at import, at exit) lands in some command's stderr, each one line.
RUN_EACH = """
import contextlib, io, json, os, runpy, sys

commands, path = json.loads(sys.argv[1]), list(sys.path)


def run(argv):
    sys.argv, sys.path[:] = argv, [os.path.dirname(os.path.abspath(argv[0]))] + path[1:]
    runpy.run_path(argv[0], run_name="__main__")


caught = []
for argv in commands[:-1]:
    err = io.StringIO()
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            run(argv)
        code = 0
    except SystemExit as e:
        code = 0 if e.code is None else e.code
    caught.append((code, err.getvalue()))
print(json.dumps(caught), flush=True)
run(commands[-1])
"""


@pytest.fixture(scope="module")
def command_line_errors(tmp_path_factory, baseline):
    """{command: (its exit status, stderr, whether its out_dir exists after it)}, and "runs":
    snapshots of the copies of the run before and after every command."""
    root = __file__.rsplit("/tests/", 1)[0]
    folder = tmp_path_factory.mktemp("command_line")
    runs = folder / "runs"
    shutil.copytree(baseline["out"], runs / "unfinished")
    os.remove(runs / "unfinished" / "final.pt")
    outs = {name: folder / name.replace("/", "_") for name in COMMANDS}
    outs.update(fresh=runs / "fresh", unfinished=runs / "unfinished")
    argvs = [
        [a.format(x=outs[name], runs=runs, ws=baseline["ws"]) for a in args]
        for name, args in COMMANDS.items()
    ]
    before = snapshot(runs)
    proc = subprocess.run(
        [sys.executable, "-c", RUN_EACH, json.dumps(argvs)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.stdout, proc.stderr  # the commands before the last said how they ended
    caught = json.loads(proc.stdout.splitlines()[0]) + [(proc.returncode, proc.stderr)]
    results = {
        name: (code, err, outs[name].exists() and name != "unfinished")
        for name, (code, err) in zip(COMMANDS, caught)
    }
    results["runs"] = before, snapshot(runs)
    return results


def test_command_line_error_is_one_line_and_nonzero(command_line_errors):
    code, err, written = command_line_errors["train.py"]
    assert code == 2
    assert err.strip() == "error: unknown config key 'stpes' (did you mean 'steps'?)"
    assert not written  # nothing written before the config is valid
    code, err, written = command_line_errors["lab/experiment.py"]
    assert code == 2 and not written
    assert (
        err.strip()
        == "error: --set stpes=3 on task persona: unknown config key 'stpes' (did you mean "
        "'steps'?)"
    )


def test_a_repeated_set_keeps_every_item(command_line_errors):
    """--set a=1 --set b=2 is --set a=1 b=2 (argparse's default keeps only the last --set): each
    command refuses its first --set's item."""
    for command, said in [
        ("train.py", "unknown config key 'stpes'"),
        ("lab/experiment.py", "unknown config key 'stpes'"),
        ("search.py", "evo_budget must be >= 0"),
    ]:
        code, err, written = command_line_errors[command]
        assert code == 2 and said in err and not written, (command, err)


def test_max_at_k_needs_k_below_the_group_size():
    """k = G leaves one k-subset, the whole group: every advantage is 0 and max_at_k would train
    nothing."""
    assert resolve_config(overrides=["algo=max_at_k", "group_size=8", "max_k=7"])["max_k"] == 7
    for k in (8, 0):
        with pytest.raises(
            ConfigError, match=r"max_k must be in 1\.\.group_size-1=7 for max_at_k, got " + str(k)
        ):
            resolve_config(overrides=["algo=max_at_k", "group_size=8", f"max_k={k}"])
    # other algorithms do not read it
    resolve_config(overrides=["algo=grpo", "group_size=4", "max_k=4"])


def test_a_weight_sampler_is_named_in_one_place():
    """A student adding a sampler edits vpo.py alone: train.py hands vpo.WEIGHT_SAMPLERS to the
    check, and config.py does not import vpo.py (a warm start's code imports config.py, and
    editing vpo.py must not retrain warm starts)."""
    import inspect

    assert "vpo.py" not in runfiles.project_imports("config")
    assert '"dirichlet"' not in inspect.getsource(config)  # no second list of names
    with pytest.raises(ConfigError, match="weight_sampler must be one of dirichlet, sobol"):
        resolve_config(overrides=["weight_sampler=vertices"])


def test_make_task_rejects_unknown():
    with pytest.raises(ValueError):
        make_task("chess")
    with pytest.raises(TypeError):
        make_task("persona", color=3)
    # the earlier (if (< x t) a b) family is gone (commit b5f2386 has it)
    with pytest.raises(TypeError):
        make_task("code", family="easy")


def test_parent_replay_needs_the_code_task(tmp_path):
    with pytest.raises(ConfigError, match="parent_replay > 0 needs the code task"):
        tiny(tmp_path, "parent_replay=0.1")


# ----------------------------------------------------------------------------------------------
# End to end: exit 2, one line on stderr, nothing in out_dir modified (`runs` and `baseline`:
# conftest.py)

# (out_dir under runs, extra overrides, prepare the dir, expected text in the one error line)
BAD = [
    ("fresh", ["group_size=two"], None, "config key 'group_size' must be int"),
    ("fresh", ["lr=-0.001"], None, "lr must be > 0"),
    ("fresh", ["group_size=1"], None, "group_size must be >= 2"),
    ("fresh", ["answers_per_rollout=0"], None, "answers_per_rollout (m) must be >= 1"),
    ("fresh", ["alpha=0"], None, "alpha must be > 0"),
    ("fresh", ["alpha=-2"], None, "alpha must be > 0"),
    ("fresh", ["task_options={noise: 0.5, color: 3}"], None, "task_options for task 'persona'"),
]


@pytest.mark.parametrize("where, overrides, prepare, message", BAD, ids=[b[3][:40] for b in BAD])
def test_bad_configuration_one_line_exit_2(
    runs, baseline, capsys, where, overrides, prepare, message
):
    refuses_in_one_line(runs, baseline, capsys, where, overrides, prepare, message)


def test_unknown_key_in_config_file(tmp_path, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text("task: persona\nlrr: 0.1\n")
    with pytest.raises(SystemExit) as exit_:
        trainer.main(["--config", str(path), "--set", f"out_dir={tmp_path}/run"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith("error: unknown config key 'lrr'"), err
    assert not (tmp_path / "run").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_unavailable_device_writes_nothing(tmp_path):
    with pytest.raises(ConfigError, match="CUDA is not available"):
        train(run_config(tmp_path / "run", tmp_path / "ws", "device=cuda"))
    assert not (tmp_path / "run").exists()


def test_bad_configuration_subprocess(command_line_errors):
    """The real command line (in the one process of `command_line_errors`): a range error on a
    fresh out_dir, and a resume of an unfinished run with a changed config."""
    for name, message in [
        ("fresh", "error: answers_per_rollout (m) must be >= 1, got 0"),
        ("unfinished", "config differs from the saved run in ['group_size']"),
    ]:
        code, err, written = command_line_errors[name]
        assert code == 2, err
        assert len(err.splitlines()) == 1 and err.startswith("error: ") and message in err, err
        assert not written
    before, after = command_line_errors["runs"]
    assert after == before


def test_every_setting_says_why_and_help_lists_it(capsys):
    """Each setting's reason is the trailing comment of its line in train.DEFAULTS or
    config.EVALUATION, every key has one, and --help of train.py and search.py prints them."""
    import search

    reasons = config.declared_reasons(trainer.__file__, "DEFAULTS")
    evaluation = config.declared_reasons(config.__file__, "EVALUATION")
    assert set(reasons) | set(evaluation) == set(DEFAULTS) and all(
        {**reasons, **evaluation}.values()
    )
    for main, shown in ((trainer.main, ("lr=0.001", "pool_n=30")), (search.main, ("pool_n=30",))):
        with pytest.raises(SystemExit):
            main(["--help"])
        out = capsys.readouterr().out
        assert all(line in out for line in shown) and evaluation["pool_n"] in out
        assert main is search.main or reasons["lr"] in out
