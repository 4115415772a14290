"""lab/experiment.py: where each setting of a headline run comes from, which earlier runs it reuses
or resumes, that Ctrl-C keeps what was done and the same command continues, and --against: a new
method trained and evaluated alone, on a committed board's problems and settings
(tests/fixtures/board/, see test_lab_stored.py), and ranked among the board's methods."""

import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import train
from config import read_yaml
from lab import experiment
from lab.report import warm_start_row
from runfiles import EVAL_KEYS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# Each headline method: its algorithm, the keys it sets and whether it needs the code task, written
# out
# here rather than read from experiment.VARIANTS, the table run_config reads (grpo_x3's
# prompts_per_step,
# m = 3 times the task's, is filled in by the test).
HEADLINE_METHODS = {
    "grpo": ("grpo", {}, False),
    "vpo": ("vpo", {}, False),
    "grpo_x3": ("grpo", {}, False),
    "dr_grpo": ("grpo", {"scale_rewards": "none", "loss_norm": "constant"}, False),
    "grpo_2ep": ("grpo", {"epochs_per_batch": 2}, False),
    "grpo_clip_higher": ("grpo", {"clip_high": 0.28, "epochs_per_batch": 2}, False),
    "grpo_entropy": ("grpo", {"entropy_coef": 0.01}, False),
    "dapo": ("grpo", {"clip_high": 0.28, "epochs_per_batch": 2, "dynamic_sampling": 10}, False),
    "grpo_mutation": ("grpo", {"mutation_share": 0.25}, True),
    "vpo_mutation": ("vpo", {"mutation_share": 0.25}, True),
}


@pytest.mark.parametrize("task", experiment.TASKS)
@pytest.mark.parametrize("method", HEADLINE_METHODS)
def test_a_headline_run_is_defaults_then_task_file_then_its_own_keys(tmp_path, task, method):
    # a new variant: add it above
    assert set(experiment.VARIANTS) == set(HEADLINE_METHODS) - {"grpo", "vpo"}
    algo, variant, code_only = HEADLINE_METHODS[method]
    if code_only and task != "code":
        with pytest.raises(Exception, match="needs the code task"):
            experiment.run_config(task, method, 3, str(tmp_path))
        return
    cfg = experiment.run_config(task, method, 3, str(tmp_path))
    task_file = read_yaml(os.path.join(ROOT, "configs", f"{task}.yaml"))
    if method == "grpo_x3":
        variant = {
            "prompts_per_step": 3
            * task_file.get("prompts_per_step", train.DEFAULTS["prompts_per_step"])
        }
    expected = {**train.DEFAULTS, **task_file, **variant, "algo": algo, "seed": 3}
    # where it writes, how loudly: not results
    neutral = ("out_dir", "warmstart_dir", "quiet", "threads")
    assert {k: v for k, v in cfg.items() if k not in neutral} == {
        k: v for k, v in expected.items() if k not in neutral
    }
    assert cfg["out_dir"] == os.path.join(str(tmp_path), "runs", f"{task}-{method}-s3")


def test_editing_a_default_no_task_file_sets_changes_the_headline(tmp_path, monkeypatch):
    untouched = [
        k
        for k in train.DEFAULTS
        if not any(
            k in read_yaml(os.path.join(ROOT, "configs", f"{t}.yaml")) for t in experiment.TASKS
        )
    ]
    assert "clip" in untouched
    monkeypatch.setitem(train.DEFAULTS, "clip", 0.3)
    assert all(
        experiment.run_config(t, "vpo", 0, str(tmp_path))["clip"] == 0.3 for t in experiment.TASKS
    )


def test_set_reaches_search_settings_and_refuses_unknown_keys(capsys):
    with pytest.raises(SystemExit) as e:
        experiment.main(["--set", "pool_n=-3"])
    assert e.value.code == 2 and "pool_n" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        experiment.main(["--set", "evo_budgett=5"])
    assert e.value.code == 2 and "unknown config key 'evo_budgett'" in capsys.readouterr().err
    assert "evo_budget" in EVAL_KEYS


def test_set_is_checked_against_each_chosen_task_config(capsys, monkeypatch):
    started = []
    monkeypatch.setattr(experiment, "run_headline", lambda *a, **kw: started.append(a[0]))
    # a code-only key, code only: fine
    experiment.main(["--tasks", "code", "--set", "parent_replay=0.05"])
    assert started == [{"parent_replay": 0.05}]
    with pytest.raises(SystemExit) as e:
        experiment.main(["--tasks", "code", "persona", "--set", "parent_replay=0.05"])
    assert e.value.code == 2 and "on task persona" in capsys.readouterr().err and len(started) == 1


def interrupt_at_first_checkpoint(command, env, ckpt):
    """Start the command, send Ctrl-C once `ckpt` exists (the run mid-way) -> what it printed. The
    command and its workers (their own process group) are stopped (SIGSTOP) as `ckpt` appears, so
    the run is still mid-way when the signal comes, however short it is and however slow the
    machine."""
    # Ctrl-C's default action even when this suite runs in a background job (`nohup ... &` starts
    # it with SIGINT ignored, and Python keeps an ignored SIGINT ignored), as at a terminal
    proc = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        cwd=ROOT,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline = time.time() + 240
        while not ckpt.exists() and time.time() < deadline and proc.poll() is None:
            time.sleep(0.01)
        assert ckpt.exists(), "the run never reached its first checkpoint"
        os.killpg(proc.pid, signal.SIGSTOP)
        assert not (ckpt.parent / "final.pt").exists(), "the run finished before it was stopped"
        proc.send_signal(signal.SIGINT)  # what Ctrl-C sends; it lands as the command goes on
        os.killpg(proc.pid, signal.SIGCONT)
        output = proc.communicate(timeout=60)[0]
    finally:  # a failed test leaves no stopped process behind
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130 and "Traceback" not in output, output
    return output


def test_ctrl_c_keeps_what_was_done_and_the_same_command_continues(tmp_path, capsys):
    """Ctrl-C in a command of its own; the same command then runs twice more in the test's own
    process (what carries over is on disk: another process is all a second command needs)."""
    out = tmp_path / "exp"
    run = out / "runs" / "code-vpo-s0"
    # the run is stopped at its first checkpoint (step 2) until Ctrl-C is sent; the 18 steps left
    # outlast the command's reaction to it (with 4 left, the run sometimes finished first)
    settings = [f"out_dir={out}", "steps=20", "ckpt_every=2", "eval_every=0"]
    settings += [f"warmstart_dir={WARMSTART_DIR}"]  # the quick warm start the other tests use
    # one worker process: each start costs seconds of CPU, and Ctrl-C stops one as it stops two
    argv = ["--quick", "--tasks", "code", "--algos", "vpo", "--workers", "1", "--set", *settings]
    command = [sys.executable, os.path.join(ROOT, "lab", "experiment.py"), *argv]
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
    output = interrupt_at_first_checkpoint(command, env, run / "ckpt.pt")
    assert "kept 0 finished run(s), 1 unfinished run(s)" in output.splitlines()[-1]
    assert not (run / "final.pt").exists()

    capsys.readouterr()
    experiment.main(argv)  # ends without SystemExit: it succeeded
    again = capsys.readouterr()
    assert "resuming unfinished run" in again.out
    assert "resumed from step" in (run / "log.txt").read_text()
    logged = (run / "metrics.jsonl").read_text().splitlines()
    steps = [json.loads(line)["step"] for line in logged if '"train"' in line]
    # every step exactly once: nothing lost, nothing trained twice
    assert steps == list(range(1, 21))

    # one small file per task, method and seed: the pools, the search in both formats, the optimum
    records = {
        name: json.loads(Path(out / "results" / f"code-{name}-s0.json").read_text())
        for name in ("warm_start", warm_start_row(3), "vpo", "optimum")
    }
    assert {"pools", "search", "search_set", "training"} <= records["vpo"].keys()
    assert (
        records["vpo"]["search_set"]["children_per_call"] == 3
        and records["vpo"]["search"]["children_per_call"] == 1
    )
    assert records[warm_start_row(3)]["m"] == 3 and records["optimum"]["pools"]["pass_at_k"][-1] > 0
    assert "RL learns" in again.out and "leaderboard.png" in again.out

    experiment.main(argv)
    third = capsys.readouterr().out
    assert "reusing finished run" in third and "trained" not in third


def _differences(task, a, b, quick=False):
    ca, cb = (experiment.run_config(task, name, 0, "out/x", quick) for name in (a, b))
    return {k: (ca[k], cb[k]) for k in ca if ca[k] != cb[k] and k != "out_dir"}


def test_clip_higher_is_compared_with_grpo_at_the_same_updates_per_batch():
    # clipping binds only from a batch's second update on: grpo_2ep and grpo_clip_higher differ in
    # the upper clip alone, and both take at least two updates per batch
    for task in experiment.TASKS:
        assert _differences(task, "grpo_2ep", "grpo_clip_higher") == {"clip_high": (0.0, 0.28)}
        assert experiment.run_config(task, "grpo_2ep", 0, "out/x")["epochs_per_batch"] >= 2
    assert {"grpo_2ep", "grpo_clip_higher"} <= set(experiment.ABLATIONS)


def test_dr_grpo_and_dapo_rows_use_every_part_of_their_method():
    assert _differences("persona", "grpo", "dr_grpo") == {
        "scale_rewards": ("group", "none"),
        "loss_norm": ("tokens", "constant"),
    }
    dapo = experiment.run_config("code", "dapo", 0, "out/x")
    assert (
        dapo["clip_high"] == 0.28 and dapo["epochs_per_batch"] >= 2 and dapo["dynamic_sampling"] > 1
    )


def test_quick_mode_trains_max_at_k_with_k_below_the_group_size():
    cfg = experiment.run_config("persona", "max_at_k", 0, "out/x", quick=True)
    assert 1 <= cfg["max_k"] < cfg["group_size"]


# ----------------------------------------------------------------------------------------------
# --against

BOARD = os.path.join(ROOT, "tests", "fixtures", "board")
# the repository's warm-start cache, which the lab's runs share with train.py (and with
# test_ctrl_c_keeps_what_was_done_and_the_same_command_continues): what these tests check is not how
# a warm start is trained, so each is trained once (its lock keeps concurrent tests to one)
WARMSTART_DIR = os.path.join(ROOT, "out", "warmstart")


def test_the_new_method_is_ranked_among_the_board_on_its_problems(tmp_path, capsys):
    out = str(tmp_path / "against")
    experiment.main(
        [
            "--quick",
            "--tasks",
            "persona",
            "code",
            "--algos",
            "vpo_loo",
            "--against",
            BOARD,
            # every job in this process: a worker's start costs seconds of CPU
            "--workers",
            "0",
            "--set",
            f"out_dir={out}",
            f"warmstart_dir={WARMSTART_DIR}",
        ]
    )
    # only the new method was trained and evaluated: the board's warm starts, optimum and screens
    # are not redone
    assert sorted(os.listdir(os.path.join(out, "results"))) == [
        "code-vpo_loo-s0.json",
        "persona-vpo_loo-s0.json",
    ]
    new = json.loads(Path(os.path.join(out, "results", "code-vpo_loo-s0.json")).read_text())
    board = json.loads(Path(os.path.join(BOARD, "results", "code-grpo-s0.json")).read_text())
    # the board's search problems
    assert new["search"]["key"]["problems"] == board["search"]["key"]["problems"]
    assert new["pools"]["problems"] == board["pools"]["problems"]
    summary = Path(os.path.join(out, "summary.md")).read_text()
    assert f"## vpo_loo against the board in {BOARD}" in summary
    row = next(
        line for line in summary.splitlines() if line.startswith("| persona: w-best@6 | vpo_loo |")
    )
    # ranked among 5; intervals vs VPO, GRPO, the warm start
    assert " of 5 |" in row and row.count("[") == 3
    assert any(v in row for v in ("yes", "no", "within noise"))
    # only the comparison and what it means: none of the board's own tables and claims
    assert "- persona: w-best@6, vpo_loo: " in summary and "the board's" in summary
    assert "| grpo |" not in summary and "paper's claims" not in summary
    assert "expected time about" in capsys.readouterr().out


def test_the_command_refuses_a_mismatch_in_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        experiment.main(
            [
                "--quick",
                "--tasks",
                "persona",
                "--algos",
                "vpo_loo",
                "--against",
                BOARD,
                "--set",
                f"out_dir={tmp_path}",
                f"warmstart_dir={WARMSTART_DIR}",
                "lr=0.123",
            ]
        )
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1 and "'lr' is 0.123 here" in err
    assert not os.path.exists(tmp_path / "results")  # refused before anything ran


def test_a_method_already_on_the_board_runs_as_its_own_row_on_the_tasks_asked(tmp_path, capsys):
    """An edited vpo.py run as `vpo` against the board: its row "vpo (yours)" beside the board's
    vpo, with paired intervals and verdicts against the board's VPO, GRPO and warm start; only
    persona is shown."""
    out = str(tmp_path / "yours")
    experiment.main(
        [
            "--quick",
            "--tasks",
            "persona",
            "--algos",
            "vpo",
            "--against",
            BOARD,
            "--workers",
            "0",
            "--set",
            f"out_dir={out}",
            f"warmstart_dir={WARMSTART_DIR}",
        ]
    )
    console = capsys.readouterr().out
    summary = Path(os.path.join(out, "summary.md")).read_text()
    for text in (console, summary):
        assert "SMOKE TEST" in text  # a --quick run says its numbers mean nothing
        assert (
            f"## vpo (yours) against the board in {BOARD}" in text
            and "Tasks persona, seeds [0]" in text
        )
        row = next(
            line
            for line in text.splitlines()
            if line.startswith("| persona: w-best@6 | vpo (yours) |")
        )
        assert (
            row.count("[") == 3
            and row.count("within noise") + row.count("yes") + row.count("no") >= 3
        )
        # only the task that ran
        assert "code:" not in text.split("## vpo (yours)")[1].split("\n\n## ")[0]
    # the comparison and what it means, the board's own tables left to its summary.md
    assert "- persona: w-best@6, vpo (yours): " in summary and "### persona" not in summary
    # the comparison fits a screen
    assert len(console.split("## vpo (yours) against")[1].splitlines()) < 20
    results = json.loads(Path(os.path.join(out, "results.json")).read_text())
    assert set(results["tasks"]) == {"persona"} and "vpo (yours)" in results["tasks"]["persona"]


def test_the_lab_reads_and_writes_the_warm_start_cache_train_py_uses():
    """One cache: a run of the lab and python train.py find each other's warm starts."""
    cfg = experiment.run_config("persona", "vpo", 0, "out/against", True)
    assert cfg["warmstart_dir"] == train.DEFAULTS["warmstart_dir"] == "out/warmstart"
    alone = train.resolve_config(
        os.path.join(ROOT, "configs", "persona.yaml"),
        [f"{k}={v}" for k, v in read_yaml(os.path.join(ROOT, "configs", "tiny.yaml")).items()],
    )
    assert experiment.warmstart_path(cfg) == experiment.warmstart_path(alone)


@pytest.mark.parametrize(
    "argv, said",
    [
        (["--algos", "vpoo"], "unknown method 'vpoo': did you mean vpo?"),
        (["--tasks", "persnoa"], "unknown task 'persnoa': did you mean persona?"),
        (
            ["--algos", "vpo", "--against", "docs/figures/leaderbord"],
            "docs/figures/leaderbord: no such folder; did you mean docs/figures/leaderboard?",
        ),
    ],
)
def test_an_unknown_method_task_or_board_is_one_line_with_a_suggestion(
    argv, said, capsys, monkeypatch
):
    monkeypatch.chdir(ROOT)
    with pytest.raises(SystemExit) as e:
        experiment.main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1 and said in err, err


def test_the_summary_names_the_commit_and_the_files_edited_since(tmp_path):
    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "vpo.py").write_text("x = 1\n")
    (tmp_path / "lab.md").write_text("notes\n")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "first")
    assert experiment.code_state(str(tmp_path)).endswith(" (as committed)")
    (tmp_path / "vpo.py").write_text("x = 2\n")
    (tmp_path / "lab.md").write_text("more notes\n")  # not a reference file
    commit, edited = experiment.code_state(str(tmp_path)).split(" ", 1)
    assert len(commit) >= 7 and edited == "(edited: vpo.py)"
    assert experiment.code_state(str(tmp_path / "nowhere")) == "unknown"


# The student's commands in one interpreter (each start costs seconds of CPU): before each, vpo.py
# gets its text and every module of the tree is dropped, so the command imports the tree's code as
# a new process would (no bytecode kept: a text of the same size within a second would pass it);
# after each, its stdout and copies of what it wrote go to snapshot <i>.
STUDENT_LOOP = """
import contextlib, io, json, os, runpy, shutil, sys

sys.dont_write_bytecode = True
tree, (steps, run, result), path = os.getcwd(), json.loads(sys.argv[1]), list(sys.path)
for i, (vpo_text, argv) in enumerate(steps):
    with open("vpo.py", "w") as f:
        f.write(vpo_text)
    for name, module in list(sys.modules.items()):
        if (getattr(module, "__file__", None) or "").startswith(tree + os.sep):
            del sys.modules[name]
    sys.argv, sys.path[:] = argv, [os.path.join(tree, "lab")] + path[1:]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        runpy.run_path(argv[0], run_name="__main__")  # an error or a SystemExit ends the loop
    os.makedirs(f"snapshot{i}")
    shutil.copy(os.path.join(run, "final.pt"), f"snapshot{i}/final.pt")
    shutil.copy(result, f"snapshot{i}/result.json")
    with open(f"snapshot{i}/stdout.txt", "w") as f:
        f.write(out.getvalue())
"""


def student_tree(tree):
    """A copy of the tree's code, configs and the board fixture at `tree` -> vpo_text(score): vpo.py
    with set_scores' last line, the score a student changes, returning `score`."""
    ignore = shutil.ignore_patterns("__pycache__")
    for folder in ("lab", "configs", "tests/fixtures/board"):
        shutil.copytree(os.path.join(ROOT, folder), tree / folder, ignore=ignore)
    for path in glob.glob(os.path.join(ROOT, "*.py")):
        shutil.copy(path, tree)
    lines = (tree / "vpo.py").read_text().splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.startswith("def set_scores"))
    at = next(i for i in range(start, len(lines)) if lines[i].startswith("    return "))
    return lambda score: "".join(lines[:at] + [f"    return {score}\n"] + lines[at + 1 :])


def test_a_second_idea_gets_its_own_result_and_the_first_comes_back_from_the_cache(tmp_path):
    """The student's loop in a copy of the tree: change vpo.py and run against the board; change it
    again: trained again, a new result; back to the first change: the first result, nothing
    trained; --set overwrite=true: trained again. One warm start serves them all (vpo.py does not
    shape it): the first finds it in the repository's cache or trains it, and no later one trains
    another. The four commands run one after another in one interpreter (STUDENT_LOOP)."""
    tree, out, ws = tmp_path / "tree", tmp_path / "against", WARMSTART_DIR
    vpo_text = student_tree(tree)
    # every answer under every weighting, (P, G, N, M), written otherwise than set_scores' einsum:
    # the student tree holds no answer of exercise (b)
    every = "(rewards[:, :, None] * weights[:, None, :, None]).sum(-1)"
    command = ["lab/experiment.py", "--quick", "--tasks", "persona", "--algos"]
    # every job in the command's own process: a worker's start costs seconds of CPU
    command += ["vpo", "--against", "tests/fixtures/board", "--workers", "0"]
    command += ["--set", f"out_dir={out}", f"warmstart_dir={ws}"]

    mean = f"{every}.mean(dim=-1).mean(dim=-1)"  # the first idea: the mean over answers
    soft = f"(0.05 * torch.logsumexp({every} / 0.05, dim=-1)).mean(dim=-1)"  # the second
    steps = [(vpo_text(mean), command), (vpo_text(soft), command), (vpo_text(mean), command)]
    steps.append((vpo_text(mean), command + ["overwrite=true"]))
    run = str(out / "runs" / "persona-vpo-s0")
    argument = json.dumps([steps, run, str(out / "results" / "persona-vpo-s0.json")])
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
    done = subprocess.run(
        [sys.executable, "-c", STUDENT_LOOP, argument],
        cwd=tree,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr

    def snapshot(i):  # what command i printed, its final.pt, its result file
        folder = tree / f"snapshot{i}"
        return (
            (folder / "stdout.txt").read_text(),
            (folder / "final.pt").read_bytes(),
            (folder / "result.json").read_bytes(),
        )

    first, second, back, again = (snapshot(i) for i in range(4))
    assert "trained persona/vpo/0" in first[0]
    assert "vpo.py changed since persona/vpo/0 was made: training it again" in second[0]
    assert "trained persona/vpo/0" in second[0] and second[1] != first[1]
    assert "persona/vpo/0: made by this very code before" in back[0]
    assert "trained" not in back[0] and back[1:] == first[1:]
    assert "reward_vectors.png" in back[0]  # redrawn from the first idea's result file
    # the same seed: the same result (final.pt differs only in its config's overwrite)
    assert "trained persona/vpo/0" in again[0] and again[2] == first[2]
    assert "warm start persona/0 ready" not in second[0] + back[0] + again[0]


def test_set_items_are_checked_together_under_each_method():
    """outcome_reward needs format_coef=0 on the code task (checked together, not one at a time)
    and is refused for a method that reads the reward vector."""
    from config import ConfigError
    from lab import experiment

    items = ["outcome_reward=true", "format_coef=0"]
    got = experiment.checked_overrides(items, ["code"], ["grpo", "ucb_con", "grpo_x3"])
    assert got == {"outcome_reward": True, "format_coef": 0}
    with pytest.raises(ConfigError, match="format_coef"):
        experiment.checked_overrides(items[:1], ["code"], ["grpo"])
    with pytest.raises(ConfigError, match="for vpo: outcome_reward does not apply"):
        experiment.checked_overrides(items, ["code"], ["grpo", "vpo"])


def test_every_method_with_a_setting_passes_the_check_on_tasks_without_code_rows():
    """--ablations --set on the maze or persona: the code-only rows are not run there, so the check
    skips them there (it refused grpo_mutation on the maze) and still checks them on code."""
    from config import ConfigError
    from lab import experiment

    methods = experiment.ALGOS + experiment.ABLATIONS
    got = experiment.checked_overrides(["out_dir=out/x"], ["maze", "persona"], methods)
    assert got == {"out_dir": "out/x"}
    assert experiment.checked_overrides(["out_dir=out/x"], ["code"], ["grpo_mutation"])
    with pytest.raises(ConfigError, match="mutation_share > 0 needs the code task"):
        experiment.run_config("maze", "grpo_mutation", 0, "out/x")  # why it is skipped there


def test_each_credit_form_is_vpo_with_its_vpo_credit(tmp_path):
    for name, (algo, settings) in experiment.CREDIT_FORMS.items():
        cfg = experiment.run_config("persona", name, 0, str(tmp_path))
        assert cfg["algo"] == algo == "vpo" and cfg["vpo_credit"] == settings["vpo_credit"] != "set"
        assert name not in experiment.ABLATIONS  # measured beside VPO, not a board row
