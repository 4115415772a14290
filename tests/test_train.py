"""train.py: a tiny end-to-end run of every algorithm on CPU (warm start, RL steps, logs and
checkpoints), its sampling and update rules, and every algorithm's advantage and RL step on batches
without signal: finite, zero where no rollout scores differently."""

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tiny_runs
import torch
from tiny_runs import TINY, all_finite, same_weights, tiny

import engine
import rollouts
import train as trainer
import vpo
from config import ConfigError, make_task
from model import Tokenizer, build_model
from policy import Policy
from runfiles import model_from_checkpoint
from train import ADVANTAGES, resolve_config, train

# The end-to-end runs below train 2 RL steps, not tiny.yaml's 4 (each costs CPU): the second logs,
# evaluates and checkpoints as any later one would. A finite training set (historical exploration
# needs one) of 2 problems, 2 prompts a step: the second step draws them again, so the outcome
# counts it reads have grown.
SHORT = ["steps=2"]
FINITE = ["train_problems=2"]


@pytest.mark.parametrize("algo", sorted(ADVANTAGES))
def test_every_algorithm_runs_end_to_end(tmp_path, algo):
    # historical exploration counts outcomes per problem: it needs a finite training set
    finite = FINITE if ADVANTAGES[algo].explores == "historical" else []
    out = train(tiny(tmp_path, f"algo={algo}", *SHORT, *finite))
    for name in (
        "config.yaml",
        "metrics.jsonl",
        "timing.jsonl",
        "samples.jsonl",
        "log.txt",
        "final.pt",
        "ckpt.pt",
    ):
        assert os.path.exists(os.path.join(out, name)), name
    lines = [
        json.loads(line)
        for line in Path(os.path.join(out, "metrics.jsonl")).read_text().splitlines()
    ]
    train_lines = [r for r in lines if r["kind"] == "train"]
    assert [r["step"] for r in train_lines] == [1, 2]
    for r in train_lines:
        for key in (
            "reward_scalar",
            "reward_per_component",
            "set_score",
            "adv_mean",
            "adv_std",
            "zero_std_groups",
            "entropy",
            "clip_frac",
            "kl",
            "grad_norm",
        ):
            assert key in r
        assert all(map(lambda v: v == v, [r["loss"], r["grad_norm"], r["entropy"]]))  # no NaN
    model, tok, cfg, m = model_from_checkpoint(os.path.join(out, "final.pt"))
    assert cfg["algo"] == algo and m == (cfg["answers_per_rollout"] if ADVANTAGES[algo][1] else 1)
    assert all(torch.isfinite(p).all() for p in model.parameters())


def _variants():
    from lab import experiment

    return experiment.VARIANTS


@pytest.mark.parametrize("name", sorted(_variants()))
def test_every_leaderboard_variant_runs_end_to_end(tmp_path, name):
    """experiment.VARIANTS: an algorithm with other settings (dr_grpo, dapo, ...) on tiny.yaml."""
    from lab import experiment

    algo, settings = _variants()[name]
    task = ["task=code"] if name in experiment.CODE_ONLY else []
    changed = [f"{k}={v}" for k, v in settings.items()]
    out = train(tiny(tmp_path, f"algo={algo}", *task, *SHORT, *changed))
    lines = [
        json.loads(line)
        for line in Path(os.path.join(out, "metrics.jsonl")).read_text().splitlines()
        if '"train"' in line
    ]
    assert [r["step"] for r in lines] == [1, 2] and all(r["loss"] == r["loss"] for r in lines)
    if settings.get("dynamic_sampling"):
        assert all(1 <= r["sampling_rounds"] <= settings["dynamic_sampling"] for r in lines)


@pytest.mark.parametrize("name", ["ucb_con_before", "ucb_con_current"])
def test_every_open_exploration_choice_runs_end_to_end(tmp_path, name):
    """experiment.OPEN_CHOICES: UCB-Con with one setting changed, on a finite set of tiny.yaml."""
    from lab import experiment

    algo, settings = experiment.OPEN_CHOICES[name]
    changed = [f"{k}={v}" for k, v in settings.items()]
    out = train(tiny(tmp_path, f"algo={algo}", *SHORT, *FINITE, *changed))
    lines = [
        json.loads(line)
        for line in Path(os.path.join(out, "metrics.jsonl")).read_text().splitlines()
        if '"train"' in line
    ]
    assert [r["step"] for r in lines] == [1, 2] and all(r["loss"] == r["loss"] for r in lines)


def test_code_task_runs(tmp_path):
    out = train(tiny(tmp_path, "task=code", "algo=vpo"))
    lines = [
        json.loads(line)
        for line in Path(os.path.join(out, "metrics.jsonl")).read_text().splitlines()
        if '"train"' in line
    ]
    # 13 hidden tests
    assert len(lines) == 4 and all(len(r["reward_per_component"]) == 13 for r in lines)
    # a group whose rollouts all score the same gets zero advantage, so zero gradient, not NaN
    assert all(r["grad_norm"] == 0.0 for r in lines if r["zero_std_groups"] == 1.0)


def test_kl_and_several_epochs(tmp_path):
    out = train(tiny(tmp_path, "kl_coef=0.01", "epochs_per_batch=2", "lr=0.01"))
    lines = [
        json.loads(line)
        for line in Path(os.path.join(out, "metrics.jsonl")).read_text().splitlines()
        if '"train"' in line
    ]
    assert any(r["kl"] > 0 for r in lines)  # the policy moved away from the frozen warm start


@pytest.mark.parametrize(
    "flags",
    [
        ["scale_rewards=none"],
        ["scale_rewards=batch"],
        ["clip_high=0.28", "epochs_per_batch=2"],
        ["entropy_coef=0.05"],
        ["scale_rewards=none", "loss_norm=constant"],
        ["dynamic_sampling=3", "task=code", "algo=vpo"],
        ["mutation_share=0.5", "task=code"],
        ["format_coef=0.5", "task=code", "algo=vpo"],
    ],
)
def test_grpo_fixes_and_mutation_prompts_run_end_to_end(tmp_path, flags):
    out = train(tiny(tmp_path, *SHORT, *flags))
    lines = [
        json.loads(line)
        for line in Path(os.path.join(out, "metrics.jsonl")).read_text().splitlines()
        if '"train"' in line
    ]
    assert len(lines) == 2
    if "entropy_coef=0.05" in flags:
        assert all(r["entropy_bonus"] > 0 for r in lines)
    if "dynamic_sampling=3" in flags:  # flat groups are kept only once the 3 rounds have run out
        for r in lines:
            assert (
                r["flat_groups_kept"] == round(r["zero_std_groups"] * 2)
                and 1 <= r["sampling_rounds"] <= 3
            )
            assert r["flat_groups_kept"] == 0 or r["sampling_rounds"] == 3
    samples = [
        json.loads(line)
        for line in Path(os.path.join(out, "samples.jsonl")).read_text().splitlines()
    ]
    assert samples


def _plain_run(cfg, task, tok, model):
    """A train.Run with a default AdamW and fixed random streams, for one rl_step."""
    return trainer.Run(
        cfg,
        task,
        Policy.from_config(model, tok, cfg, "cpu", trainer.answers_per_rollout(cfg)).seeded(0),
        torch.optim.AdamW(model.parameters()),
        trainer.distributed.Scorer(model),
        rng=random.Random(1),
    )


def _rl_step_with_flat_groups(tmp_path, monkeypatch, flat, *overrides):
    """One rl_step on a fresh tiny model where the problems `flat` picks score the same in every
    rollout and the others at random -> (metrics, batch, the problems drawn in order, the advantage
    trained on)."""
    import rollouts
    import train as trainer

    cfg = tiny(tmp_path, *overrides)
    task, tok = trainer.make_task(cfg["task"]), trainer.Tokenizer()
    torch.manual_seed(0)
    model = build_model(cfg["model"], cfg["block_size"], tok.vocab_size, "cpu")
    calls, trained = [], []

    def score(task, problem, answers, m, as_written=False, memo=None):
        calls.append(problem)
        return (
            np.full((m, task.dim), 0.5, dtype=np.float32)
            if flat(problem)
            else np.random.default_rng(len(calls)).random((m, task.dim)).astype(np.float32)
        )

    real_update = trainer.policy_update

    def policy_update(run, batch, adv, entropy_coef=0.0):
        trained.append(adv.clone())
        return real_update(run, batch, adv, entropy_coef)

    monkeypatch.setattr(rollouts, "score_answers", score)
    monkeypatch.setattr(trainer, "policy_update", policy_update)
    run = _plain_run(cfg, task, tok, model)
    metrics, batch = trainer.rl_step(run)
    return metrics, batch, calls[:: cfg["group_size"]], trained[0]


def with_abcd(problem):  # about half of the persona problems
    return any(c in problem for c in "abcd")


def test_dynamic_sampling_draws_again_until_p_groups_spread(tmp_path, monkeypatch):
    P = 4
    metrics, batch, drawn, _ = _rl_step_with_flat_groups(
        tmp_path, monkeypatch, with_abcd, "algo=grpo", f"prompts_per_step={P}", "dynamic_sampling=5"
    )
    rounds = len(drawn) // P
    # this seed needs a redraw
    assert len(drawn) == rounds * P and metrics["sampling_rounds"] == rounds > 1
    spread = [i for i, p in enumerate(drawn) if not with_abcd(p)]
    # it stopped as soon as it could
    assert len([i for i in spread if i < (rounds - 1) * P]) < P <= len(spread)
    assert batch["problems"] == [drawn[i] for i in spread[:P]] and metrics["flat_groups_kept"] == 0
    assert (
        metrics["zero_std_groups"] == 0
        and batch["rewards"].shape[0] == P
        and batch["completion"].shape[0] == P * 4
    )


def test_dynamic_sampling_gives_up_after_its_rounds_and_says_so(tmp_path, monkeypatch):
    metrics, batch, drawn, adv = _rl_step_with_flat_groups(
        tmp_path, monkeypatch, lambda p: True, "algo=grpo", "dynamic_sampling=3"
    )
    assert (
        len(drawn) == 3 * 2 and metrics["sampling_rounds"] == 3 and metrics["flat_groups_kept"] == 2
    )
    assert batch["problems"] == drawn[:2] and torch.all(adv == 0)


def test_gdpo_with_dynamic_sampling_trains_on_advantages_of_batch_std_1(tmp_path, monkeypatch):
    """GDPO divides by the std over the batch: the batch it trains on, not the groups drawn and
    dropped (computed before the selection, the kept advantages had std 1.39 in one run)."""
    metrics, batch, drawn, adv = _rl_step_with_flat_groups(
        tmp_path, monkeypatch, with_abcd, "algo=gdpo", "prompts_per_step=4", "dynamic_sampling=5"
    )
    # some groups were dropped
    assert metrics["sampling_rounds"] > 1 and len(drawn) > len(batch["problems"])
    assert abs(float(adv.std(unbiased=False)) - 1) < 1e-5 and abs(float(adv.mean())) < 1e-6


def test_dr_grpo_loss_divides_by_rollouts_times_the_longest_completion(tmp_path, monkeypatch):
    import train as trainer
    from rollouts import max_completion_tokens

    seen = []
    real = trainer.grpo.policy_loss

    def policy_loss(logprobs, old_logprobs, advantages, mask, settings, **kwargs):
        seen.append(settings.normalizer)
        return real(logprobs, old_logprobs, advantages, mask, settings, **kwargs)

    monkeypatch.setattr(trainer.grpo, "policy_loss", policy_loss)
    for norm, algo, m in [("constant", "grpo", 1), ("constant", "vpo", 3), ("tokens", "grpo", 1)]:
        _rl_step_with_flat_groups(
            tmp_path, monkeypatch, lambda p: False, f"algo={algo}", f"loss_norm={norm}"
        )
        want = (
            2 * 4 * max_completion_tokens(trainer.make_task("persona"), m)
            if norm == "constant"
            else None
        )
        assert seen[-1] == want and (want is None or want == 2 * 4 * (13 * m + 1))


def test_dynamic_sampling_keeps_the_share_of_mutation_groups(tmp_path, monkeypatch):
    import rollouts
    import train as trainer

    cfg = tiny(tmp_path, "dynamic_sampling=3", "algo=grpo", "task=code", "mutation_share=0.5")
    task, tok = trainer.make_task("code"), trainer.Tokenizer()
    torch.manual_seed(0)
    model = build_model(cfg["model"], cfg["block_size"], tok.vocab_size, "cpu")
    calls = []

    def spread_everywhere(task, problem, answers, m, as_written=False, memo=None):
        calls.append(problem)
        return np.random.default_rng(len(calls)).random((m, task.dim)).astype(np.float32)

    monkeypatch.setattr(rollouts, "score_answers", spread_everywhere)
    run = _plain_run(cfg, task, tok, model)
    _, batch = trainer.rl_step(run)
    G = cfg["group_size"]
    prompts = [
        tok.decode(row[mask]) for row, mask in zip(batch["prompt"][::G], batch["prompt_mask"][::G])
    ]
    assert len(prompts) == cfg["prompts_per_step"]
    # parent-format prompts
    assert sum(" from " in p for p in prompts) == round(0.5 * cfg["prompts_per_step"])


def test_parent_replay_adds_the_warm_starts_loss_on_parent_prompts(tmp_path):
    """With every advantage zero and no KL the RL loss has no gradient, so an update moves the
    policy by parent_replay x the demonstrations' cross-entropy alone: its gradient is that one, and
    the demos shown carry parents."""
    import train as trainer

    # no clipping: the gradient is compared as it is
    cfg = tiny(
        tmp_path, "algo=grpo", "task=code", "parent_replay=0.5", "kl_coef=0", "max_grad_norm=1e9"
    )
    task, tok = trainer.make_task("code"), trainer.Tokenizer()
    torch.manual_seed(0)
    model = build_model(cfg["model"], cfg["block_size"], tok.vocab_size, "cpu")
    policy = Policy.from_config(model, tok, cfg, "cpu", answers_per_rollout=1).seeded(0)
    run = trainer.Run(
        cfg,
        task,
        policy,
        torch.optim.SGD(model.parameters(), lr=0.0),
        trainer.distributed.Scorer(model),
        rng=random.Random(1),
    )
    problems = task.problems("train", 2, random.Random(0))
    batch = trainer.sample_rollouts(policy, task, problems, cfg["group_size"])
    adv = torch.zeros(len(batch["answers"]) * cfg["group_size"])
    state = run.rng.getstate()
    _, stats, _ = trainer.policy_update(run, batch, adv)
    grads = [p.grad.clone() for p in model.parameters()]
    run.rng.setstate(state)  # the same demonstrations again
    demos = trainer.padded_demos(task, tok, cfg, run.rng, "cpu", parents_only=True)
    assert all(" from " in tok.decode(row[mask]) for row, mask in zip(demos[0], demos[1]))
    model.zero_grad()
    replay = trainer.replay_loss(model, demos, cfg["dtype"], "cpu")
    (0.5 * replay).backward()
    assert stats["replay_loss"] == pytest.approx(replay.item(), rel=1e-5)
    for g, p in zip(grads, model.parameters()):
        assert torch.allclose(g, p.grad, atol=1e-6)
    assert any(float(g.abs().sum()) > 0 for g in grads)


def test_format_coef_adds_the_format_advantage_to_the_algorithms(tmp_path, monkeypatch):
    """With format_coef the update trains on the algorithm's advantage plus format_coef times the
    format advantage: flat (no change) when every answer scores, and added as is otherwise."""
    import train as trainer

    real = trainer.ADVANTAGES["grpo"].advantage
    rewards_seen = []
    monkeypatch.setitem(
        trainer.ADVANTAGES,
        "grpo",
        trainer.Algorithm(
            lambda r, s, w, cfg: rewards_seen.append(r) or real(r, s, w, cfg), writes_sets=False
        ),
    )
    adv = {}
    for coef in (0.0, 0.5):
        _, _, _, adv[coef] = _rl_step_with_flat_groups(
            tmp_path / str(coef), monkeypatch, lambda p: False, "algo=grpo", f"format_coef={coef}"
        )
    r = rewards_seen[-1]
    # random rewards: every answer scores, so the format term is flat: no change
    assert (r.sum(-1) > 0).all()
    assert torch.equal(adv[0.5], adv[0.0])
    monkeypatch.setattr(trainer.grpo, "format_advantages", lambda r: torch.ones(r.shape[:2]))
    _, _, _, with_ones = _rl_step_with_flat_groups(
        tmp_path / "ones", monkeypatch, lambda p: False, "algo=grpo", "format_coef=0.5"
    )
    assert torch.allclose(with_ones, adv[0.0] + 0.5)


def test_ctrl_c_in_one_run_says_how_to_resume_without_a_traceback(tmp_path):
    """Ctrl-C mid-run (5000 steps: it never ends first). The warm start comes from the session's
    cache (tiny_runs.WARMSTARTS), which this file's runs above have trained (else this run trains
    it): a process that loads it reaches its first checkpoint sooner."""
    import signal
    import time

    root = os.path.dirname(os.path.dirname(TINY))
    out = tmp_path / "run"
    command = [
        sys.executable,
        os.path.join(root, "train.py"),
        "--config",
        TINY,
        "--set",
        f"out_dir={out}",
        f"warmstart_dir={tiny_runs.WARMSTARTS or tmp_path / 'ws'}",
        "steps=5000",
        "ckpt_every=2",
        "eval_every=0",
    ]
    proc = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=root,
        env=dict(os.environ, OMP_WAIT_POLICY="PASSIVE"),
        # as at a terminal
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.time() + 120
    while not (out / "ckpt.pt").exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert (out / "ckpt.pt").exists() and proc.poll() is None
    proc.send_signal(signal.SIGINT)
    output = proc.communicate(timeout=60)[0]
    assert proc.returncode == 130 and "Traceback" not in output, output
    assert "--set resume=true" in output.splitlines()[-1] and (out / "ckpt.pt").exists()


def test_one_run_explains_itself(tmp_path, capsys):
    """python train.py says where its warm start went, ends with its held-out best@k against the
    warm start's (how many problems, which seed, the warm start asked for m answers), writes
    run.png, its closing lines count the whole wall time and say whether the warm start was
    trained or loaded; its folder records the code that trained it. A warm start of its own, of 8
    steps (tiny.yaml's 80 cost seconds of CPU), which the second run loads."""
    import train as trainer

    short = ["sft_steps=8", *SHORT]
    trainer.main(
        [
            "--config",
            TINY,
            "--set",
            f"out_dir={tmp_path}/run",
            f"warmstart_dir={tmp_path}/ws",
            "eval_problems=2",
            "pool_n=4",
            *short,
        ]
    )
    out = capsys.readouterr().out
    assert f"cached in {tmp_path}/ws/warmstart-persona-" in out
    assert "heldout, 2 problems drawn with seed 12345, 3 answers each" in out
    assert "this run" in out and "its warm start, 3 answers a rollout" in out
    assert "pass@k is 0 at every k" in out  # persona: said, not printed as a table of zeros
    assert os.path.exists(tmp_path / "run" / "run.png")
    assert out.strip().splitlines()[-1].startswith("done in ") and "this evaluation" in out
    assert "(the warm start trained here, included)" in (tmp_path / "run" / "log.txt").read_text()
    source = json.loads((tmp_path / "run" / "source.json").read_text())
    assert {"train.py", "vpo.py", "warmstart.py"} <= source.keys()
    again = [f"out_dir={tmp_path}/again", f"warmstart_dir={tmp_path}/ws", "eval_problems=2"]
    trainer.main(["--config", TINY, "--set", *again, "pool_n=4", *short])
    assert "(the warm start loaded from its cache)" in (tmp_path / "again" / "log.txt").read_text()


# ----------------------------------------------------------------------------------------------
# Numerics: no NaN or inf reaches the weights


def _advantage_fns():
    """Every advantage of the rewards alone: the exploration methods' also read outcomes, and their
    bonus moves even a flat group on purpose (tests/test_exploration.py holds them)."""
    for name, entry in trainer.ADVANTAGES.items():
        if not entry.explores:
            yield name, entry.advantage


@pytest.mark.parametrize(
    "case", ["all zero", "all equal", "some groups equal", "one answer nonzero"]
)
def test_advantages_are_finite_and_zero_for_zero_variance_groups(case):
    P, G, M, D = 3, 4, 3, 4
    rewards = torch.zeros(P, G, M, D)
    if case == "all equal":
        rewards[:] = 0.5
    elif case == "some groups equal":
        rewards[0] = 0.7
        rewards[1] = torch.rand(G, M, D, generator=torch.Generator().manual_seed(0))
    elif case == "one answer nonzero":
        rewards[0, 0, 0] = 1.0
    weights_ = vpo.sample_weights(P, 16, D, generator=torch.Generator().manual_seed(0))
    # groups whose rollouts all score the same
    flat = {
        "all zero": (0, 1, 2),
        "all equal": (0, 1, 2),
        "some groups equal": (0, 2),
        "one answer nonzero": (1, 2),
    }[case]
    for name, fn in _advantage_fns():
        adv = fn(rewards, rewards.mean(-1), weights_, resolve_config())
        assert adv.shape == (P, G) and torch.isfinite(adv).all(), name
        assert adv[list(flat)].abs().max() < 1e-6, (name, case, adv)


def _empty_generate(real):
    def generate(model, prompt, prompt_mask, num_samples, max_new_tokens, decoding, **kwargs):
        out = real(model, prompt, prompt_mask, num_samples, 1, decoding, **kwargs)
        out["tokens"][:] = decoding.eos_id  # every completion is just <|eos|>: one empty answer
        return out

    return generate


@pytest.mark.parametrize(
    "task_name, mode",
    [
        ("persona", "empty answers"),
        ("persona", "constant rewards"),
        ("persona", "random policy"),
        ("code", "random policy"),
    ],
)
def test_rl_step_keeps_weights_finite(monkeypatch, task_name, mode):
    """Every algorithm, on batches whose groups carry no signal (or, from a random policy,
    little)."""
    for algo, _ in _advantage_fns():
        cfg = resolve_config(TINY, ["quiet=true", f"algo={algo}", f"task={task_name}"])
        task, tok = make_task(task_name), Tokenizer()
        torch.manual_seed(0)
        model = build_model(cfg["model"], cfg["block_size"], tok.vocab_size, "cpu")
        opt = torch.optim.AdamW(
            model.parameters(), lr=cfg["lr"], weight_decay=cfg["weight_decay"], betas=(0.9, 0.99)
        )
        before = {k: v.clone() for k, v in model.state_dict().items()}
        with monkeypatch.context() as patch:
            if mode == "empty answers":
                patch.setattr(engine, "generate", _empty_generate(engine.generate))
            elif mode == "constant rewards":
                patch.setattr(
                    rollouts,
                    "score_answers",
                    lambda task, problem, answers, m, as_written=False, memo=None: np.full(
                        (m, task.dim), 0.5, dtype=np.float32
                    ),
                )
            m = trainer.answers_per_rollout(cfg)
            run = trainer.Run(
                cfg,
                task,
                Policy.from_config(model, tok, cfg, "cpu", m).seeded(0),
                opt,
                trainer.distributed.Scorer(model),
                rng=random.Random(0),
            )
            metrics, batch = trainer.rl_step(run)
        json.dumps(metrics, allow_nan=False)  # raises on NaN or inf
        assert all_finite(model.state_dict()), algo
        if mode != "random policy":  # no signal: zero advantages, zero gradient, weights unchanged
            assert metrics["zero_std_groups"] == 1.0 and metrics["grad_norm"] == 0.0, (
                algo,
                metrics,
            )
            assert same_weights(model.state_dict(), before), algo


def main_args(tmp_path, *overrides, ws=None):
    """train.py's command line for a tiny run in tmp_path (its warm start in tmp_path/ws unless
    `ws` names a cache)."""
    run = [f"out_dir={tmp_path}/run", f"warmstart_dir={ws or tmp_path / 'ws'}", "quiet=true"]
    return ["--config", TINY, "--set", *run, *overrides]


def test_a_bug_in_the_code_shows_its_traceback(tmp_path, monkeypatch, capsys):
    """A shape bug in a student's own vpo.py is no bad setting: train.py's main lets it raise, so
    its traceback shows where it is, instead of one line that names no place. The warm start comes
    from the session's cache: the bug is in the first RL step."""

    def set_scores_with_a_shape_bug(rewards, weights):
        return rewards.sum(-1) * weights.sum(-1)  # (P, G, m) * (P, N): the sizes do not match

    monkeypatch.setattr(vpo, "set_scores", set_scores_with_a_shape_bug)
    with pytest.raises(RuntimeError, match="The size of tensor a"):
        trainer.main(main_args(tmp_path, "algo=vpo", ws=tiny_runs.WARMSTARTS))
    assert "error:" not in capsys.readouterr().err


def test_a_bad_setting_keeps_its_one_line(tmp_path, capsys):
    """A block_size too short for the task's prompts, or a tokenizer that needs a download, is a
    setting: one line and exit 2, as every other bad setting."""
    for overrides, said in [
        (["block_size=16"], "exceeds block_size=16"),
        (["tokenizer=no_such_encoding"], "tokenizer 'no_such_encoding' is unavailable"),
    ]:
        with pytest.raises(SystemExit) as exit_:
            trainer.main(main_args(tmp_path, *overrides))
        err = capsys.readouterr().err
        assert exit_.value.code == 2 and len(err.splitlines()) == 1, err
        assert err.startswith("error: ") and said in err, err
    with pytest.raises(ConfigError, match="no_such_encoding"):
        resolve_config(overrides=["tokenizer=no_such_encoding"])


def test_outcome_reward_trains_on_whether_each_answer_solves(tmp_path, monkeypatch):
    """outcome_reward: GRPO's advantage is the group z-score of 1 (solved) or 0, so a group whose
    answers all fail gives no advantage at all, whatever their graded rewards."""
    import grpo
    import rewards

    monkeypatch.setattr(rewards.PersonaTask, "solved", lambda self, problem, r: r[0] > 0.5)
    _, batch, _, adv = _rl_step_with_flat_groups(
        tmp_path, monkeypatch, with_abcd, "algo=grpo", "outcome_reward=true"
    )
    r = batch["rewards"]  # (P, G, 1, D): 0.5 everywhere on the flat problems, random elsewhere
    solved = (r[:, :, 0, 0] > 0.5).float()
    adv = adv.reshape(solved.shape)
    flat = torch.tensor([with_abcd(p) for p in batch["problems"]])
    assert flat.any() and (~flat).any()
    assert adv[flat].abs().max() == 0  # graded rewards of 0.5 never solve: no signal
    assert torch.allclose(adv, grpo.grpo_advantages(solved), atol=1e-6)
    assert adv[~flat].abs().sum() > 0


@pytest.mark.parametrize(
    "overrides, named",
    [(["algo=vpo"], "reads the reward vector"), (["format_coef=0.5"], "format_coef")],
)
def test_outcome_reward_refuses_what_it_cannot_replace(tmp_path, overrides, named):
    with pytest.raises(ConfigError, match=named):
        tiny(tmp_path, "algo=grpo", "outcome_reward=true", *overrides)


@pytest.mark.parametrize("credit", ["togo", "marginal"])
def test_vpo_credit_trains_each_answers_tokens_on_its_own_advantage(tmp_path, monkeypatch, credit):
    """With vpo_credit the update gets one advantage per token: answer j's tokens (with the
    separator that closes it) vpo.credit_advantages' for j plus the format term, every other 0."""
    metrics, batch, _, adv = _rl_step_with_flat_groups(
        tmp_path, monkeypatch, with_abcd, "algo=vpo", f"vpo_credit={credit}", "format_coef=0.5"
    )
    assert adv.shape == batch["completion"].shape and metrics["grad_norm"] > 0
    tok = Tokenizer()
    apart = 0  # rollouts whose answers were paid differently
    for row, mask, trained in zip(batch["completion"], batch["completion_mask"], adv):
        answers = [[]]
        for t, on, a in zip(row.tolist(), mask.tolist(), trained.tolist()):
            if on:
                answers[-1].append(a)
            answers += [[]] if t == tok.sep else []
        # one value across each of the first m answers' tokens, 0 past the m-th
        assert all(len(set(a)) <= 1 for a in answers[:3]), answers
        assert all(a == 0 for rest in answers[3:] for a in rest)
        apart += len({a[0] for a in answers[:3] if a}) > 1
    assert apart > 0 and (adv[~batch["completion_mask"]] == 0).all()


def test_vpo_credit_is_refused_where_nothing_reads_it(tmp_path):
    with pytest.raises(ConfigError, match="vpo_credit must be one of set, togo, gain, marginal"):
        tiny(tmp_path, "vpo_credit=shapley")
    for other in (["algo=grpo"], ["algo=vpo_loo"], ["dynamic_sampling=2"]):
        with pytest.raises(ConfigError, match="needs algo=vpo"):
            tiny(tmp_path, "vpo_credit=togo", *other)
    assert tiny(tmp_path, "algo=grpo")["vpo_credit"] == "set"
