"""A tiny end-to-end run of every algorithm on CPU: warm start, RL steps, logs and checkpoints."""

import json
import os
import random
import subprocess
import sys

import numpy as np
import pytest
import torch

import warmstart
from checkpoint import model_from_checkpoint
from train import ADVANTAGES, ConfigError, resolve_config, train

TINY = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs", "tiny.yaml")


def tiny(tmp_path, *overrides):
    return resolve_config(TINY, [f"out_dir={tmp_path}/run", f"warmstart_dir={tmp_path}/ws", "quiet=true",
                                 *overrides])


@pytest.mark.parametrize("algo", sorted(ADVANTAGES))
def test_every_algorithm_runs_end_to_end(tmp_path, algo):
    out = train(tiny(tmp_path, f"algo={algo}"))
    for name in ("config.yaml", "metrics.jsonl", "timing.jsonl", "samples.jsonl", "log.txt", "final.pt", "ckpt.pt"):
        assert os.path.exists(os.path.join(out, name)), name
    lines = [json.loads(line) for line in open(os.path.join(out, "metrics.jsonl"))]
    train_lines = [r for r in lines if r["kind"] == "train"]
    assert [r["step"] for r in train_lines] == [1, 2, 3, 4]
    for r in train_lines:
        for key in ("reward_scalar", "reward_per_component", "set_score", "adv_mean", "adv_std",
                    "zero_std_groups", "entropy", "clip_frac", "kl", "grad_norm"):
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
    out = train(tiny(tmp_path, f"algo={algo}", *task, *[f"{k}={v}" for k, v in settings.items()]))
    lines = [json.loads(line) for line in open(os.path.join(out, "metrics.jsonl")) if '"train"' in line]
    assert [r["step"] for r in lines] == [1, 2, 3, 4] and all(r["loss"] == r["loss"] for r in lines)
    if settings.get("dynamic_sampling"):
        assert all(1 <= r["sampling_rounds"] <= settings["dynamic_sampling"] for r in lines)


def test_code_task_runs(tmp_path):
    out = train(tiny(tmp_path, "task=code", "algo=vpo"))
    lines = [json.loads(line) for line in open(os.path.join(out, "metrics.jsonl")) if '"train"' in line]
    assert len(lines) == 4 and all(len(r["reward_per_component"]) == 13 for r in lines)  # 13 hidden tests
    # a group whose rollouts all score the same gets zero advantage, so zero gradient, not NaN
    assert all(r["grad_norm"] == 0.0 for r in lines if r["zero_std_groups"] == 1.0)


def test_kl_and_several_epochs(tmp_path):
    out = train(tiny(tmp_path, "kl_coef=0.01", "epochs_per_batch=2", "lr=0.01"))
    lines = [json.loads(line) for line in open(os.path.join(out, "metrics.jsonl")) if '"train"' in line]
    assert any(r["kl"] > 0 for r in lines)  # the policy moved away from the frozen warm start


def test_warm_start_is_shared_between_algorithms(tmp_path):
    train(tiny(tmp_path, "algo=grpo", f"out_dir={tmp_path}/a"))
    train(tiny(tmp_path, "algo=vpo", f"out_dir={tmp_path}/b"))
    assert len(os.listdir(tmp_path / "ws")) == 1
    log = open(tmp_path / "b" / "log.txt").read()
    assert "warm start: loaded cached" in log


def test_warm_start_depends_on_its_seed_not_on_the_process_history(tmp_path):
    """A worker of the headline experiment runs several jobs in turn: whatever it drew before must
    not change the warm start it trains (it once did: the initial weights came from the global RNG)."""
    from model import Tokenizer
    from config import make_task
    from warmstart import warm_start
    tok, task = Tokenizer(), make_task("persona")

    def weights(seed, name, history):
        torch.manual_seed(history)  # what earlier jobs in the same process left behind
        cfg = tiny(tmp_path, "sft_steps=3", f"seed={seed}", f"warmstart_dir={tmp_path}/{name}")
        model, _ = warm_start(cfg, task, tok, "cpu", lambda msg: None)
        return torch.cat([p.detach().flatten() for p in model.parameters()])

    assert torch.equal(weights(0, "a", history=1), weights(0, "b", history=2))
    assert not torch.equal(weights(0, "c", history=1), weights(1, "d", history=1))


def test_finished_run_is_not_overwritten(tmp_path):
    train(tiny(tmp_path))
    with pytest.raises(ConfigError, match="already holds a finished run"):
        train(tiny(tmp_path))
    train(tiny(tmp_path, "overwrite=true"))


def test_missing_checkpoint_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="checkpoint not found"):
        model_from_checkpoint(str(tmp_path / "nope.pt"))
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(RuntimeError, match="unreadable or corrupt"):
        model_from_checkpoint(str(bad))


def test_single_answer_curriculum_batches():
    """The warm start's first phase shows only the plain 1-answer format; later phases mix in m."""
    import random
    from model import Tokenizer
    from config import make_task
    from warmstart import padded_demos
    tok, task = Tokenizer(), make_task("code")
    cfg = resolve_config(overrides=["task=code", "sft_parent_fraction=1.0"])
    rng = random.Random(0)

    def prompts(n, **kwargs):  # the prompts of one batch of n demonstrations, as text
        p, pm, _, _ = padded_demos(task, tok, dict(cfg, sft_batch=n), rng, "cpu", **kwargs)
        return [tok.decode(row[mask].tolist()) for row, mask in zip(p, pm)]
    for _ in range(20):
        assert all(t.startswith("<|bos|>1|") and " from " not in t for t in prompts(4, single_only=True))
    mixed = [prompts(1)[0] for _ in range(40)]
    assert any(t.startswith("<|bos|>3|") for t in mixed) and all(" from " in t for t in mixed)


class RunsCode:
    """Pickles as a call to os.system: what a malicious checkpoint would carry."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def test_a_checkpoint_that_would_run_code_is_refused_and_runs_nothing(tmp_path):
    marker = tmp_path / "ran"
    path = tmp_path / "shared.pt"
    torch.save({"model": {"w": torch.zeros(2)}, "model_config": {}, "config": {}, "payload": RunsCode(marker)}, path)
    with pytest.raises(RuntimeError) as err:
        model_from_checkpoint(str(path))
    assert "nothing of it was run" in str(err.value) and "system" in str(err.value)
    assert len(str(err.value).splitlines()) == 1
    assert not marker.exists()
    # the command line says the same in one line (search.py loads checkpoints a classmate shared)
    result = subprocess.run([sys.executable, "search.py", "--checkpoints", str(path)], capture_output=True, text=True,
                            cwd=os.path.dirname(TINY) + "/..")
    assert result.returncode != 0 and "nothing of it was run" in result.stderr and not marker.exists()


def test_logging_draws_nothing_from_the_training_stream(tmp_path, monkeypatch):
    """Removing a metric must not change the run: step_metrics may not touch the training generator."""
    import checkpoint
    out = train(tiny(tmp_path, "algo=grpo", f"out_dir={tmp_path}/a"))
    real = checkpoint.step_metrics

    def step_metrics(run, *args):
        state = run.generator.get_state()
        metrics = real(run, *args)
        assert torch.equal(state, run.generator.get_state())
        return metrics
    monkeypatch.setattr(checkpoint, "step_metrics", step_metrics)
    again = train(tiny(tmp_path, "algo=grpo", f"out_dir={tmp_path}/b"))
    assert open(os.path.join(out, "metrics.jsonl")).read() == open(os.path.join(again, "metrics.jsonl")).read()


def test_warm_start_key_follows_settings_and_task_code_not_trainer_text(tmp_path):
    """Editing a comment in warmstart.py or train.py must not retrain the warm start; editing the task's
    data code must."""
    root = os.path.dirname(TINY) + "/.."
    for name in os.listdir(root):
        if name.endswith(".py"):
            with open(os.path.join(root, name)) as src, open(tmp_path / name, "w") as dst:
                dst.write(src.read())

    def key(*overrides):
        code = f"import train, warmstart; print(warmstart.warmstart_path(train.resolve_config(overrides={list(overrides)!r})))"
        return subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                              check=True).stdout.strip()
    before = key()
    assert key("sft_steps=7") != before and key("seed=1") != before and key("lr=0.5") == before  # lr is RL's
    for name in ("warmstart.py", "train.py"):  # e.g. a comment in warm_start
        with open(tmp_path / name, "a") as f:
            f.write("\n# a comment about warm_start\n")
    assert key() == before
    with open(tmp_path / "rewards.py") as f:  # rewording rewards.py's docstrings and comments neither
        source = f.read()
    with open(tmp_path / "rewards.py", "w") as f:
        f.write(source.replace('"""A problem is a hidden program', '"""A problem: a hidden program', 1)
                .replace("\nimport itertools\n", "\n# reworded\nimport itertools\n", 1))
    assert key() == before
    with open(tmp_path / "rewards.py", "a") as f:
        f.write("\nEXTRA = 1\n")
    assert key() != before


@pytest.mark.parametrize("flags", [["scale_rewards=none"], ["scale_rewards=batch"], ["clip_high=0.28", "epochs_per_batch=2"], ["entropy_coef=0.05"],
                                   ["scale_rewards=none", "loss_norm=constant"],
                                   ["dynamic_sampling=3", "task=code", "algo=vpo"],
                                   ["mutation_share=0.5", "task=code"], ["format_coef=0.5", "task=code", "algo=vpo"]])
def test_grpo_fixes_and_mutation_prompts_run_end_to_end(tmp_path, flags):
    out = train(tiny(tmp_path, *flags))
    lines = [json.loads(line) for line in open(os.path.join(out, "metrics.jsonl")) if '"train"' in line]
    assert len(lines) == 4
    if "entropy_coef=0.05" in flags:
        assert all(r["entropy_bonus"] > 0 for r in lines)
    if "dynamic_sampling=3" in flags:  # flat groups are kept only once the 3 rounds have run out
        for r in lines:
            assert r["flat_groups_kept"] == round(r["zero_std_groups"] * 2) and 1 <= r["sampling_rounds"] <= 3
            assert r["flat_groups_kept"] == 0 or r["sampling_rounds"] == 3
    samples = [json.loads(line) for line in open(os.path.join(out, "samples.jsonl"))]
    assert samples


def _rl_step_with_flat_groups(tmp_path, monkeypatch, flat, *overrides):
    """One rl_step on a fresh tiny model where the problems `flat` picks score the same in every
    rollout and the others at random -> (metrics, batch, the problems drawn in order, the advantage
    trained on)."""
    import rollouts
    import train as trainer
    cfg = tiny(tmp_path, *overrides)
    task, tok = trainer.make_task(cfg["task"]), trainer.Tokenizer()
    torch.manual_seed(0)
    model = warmstart.build_model(cfg, tok, "cpu")
    calls, trained = [], []

    def score(task, problem, answers, m, as_written=False, memo=None):
        calls.append(problem)
        return np.full((m, task.dim), 0.5, dtype=np.float32) if flat(problem) else \
            np.random.default_rng(len(calls)).random((m, task.dim)).astype(np.float32)
    real_update = trainer.policy_update

    def policy_update(run, batch, adv, entropy_coef=0.0):
        trained.append(adv.clone())
        return real_update(run, batch, adv, entropy_coef)
    monkeypatch.setattr(rollouts, "score_answers", score)
    monkeypatch.setattr(trainer, "policy_update", policy_update)
    run = trainer.Run(cfg, task, tok, model, torch.optim.AdamW(model.parameters()), trainer.distributed.Scorer(model),
                      rng=random.Random(1), generator=torch.Generator().manual_seed(0))
    metrics, batch = trainer.rl_step(run)
    return metrics, batch, calls[::cfg["group_size"]], trained[0]


def with_abcd(problem):  # about half of the persona problems
    return any(c in problem for c in "abcd")


def test_dynamic_sampling_draws_again_until_p_groups_spread(tmp_path, monkeypatch):
    P = 4
    metrics, batch, drawn, _ = _rl_step_with_flat_groups(tmp_path, monkeypatch, with_abcd, "algo=grpo",
                                                         f"prompts_per_step={P}", "dynamic_sampling=5")
    rounds = len(drawn) // P
    assert len(drawn) == rounds * P and metrics["sampling_rounds"] == rounds > 1  # this seed needs a redraw
    spread = [i for i, p in enumerate(drawn) if not with_abcd(p)]
    assert len([i for i in spread if i < (rounds - 1) * P]) < P <= len(spread)  # it stopped as soon as it could
    assert batch["problems"] == [drawn[i] for i in spread[:P]] and metrics["flat_groups_kept"] == 0
    assert metrics["zero_std_groups"] == 0 and batch["rewards"].shape[0] == P and batch["completion"].shape[0] == P * 4


def test_dynamic_sampling_gives_up_after_its_rounds_and_says_so(tmp_path, monkeypatch):
    metrics, batch, drawn, adv = _rl_step_with_flat_groups(tmp_path, monkeypatch, lambda p: True, "algo=grpo",
                                                           "dynamic_sampling=3")
    assert len(drawn) == 3 * 2 and metrics["sampling_rounds"] == 3 and metrics["flat_groups_kept"] == 2
    assert batch["problems"] == drawn[:2] and torch.all(adv == 0)


def test_gdpo_with_dynamic_sampling_trains_on_advantages_of_batch_std_1(tmp_path, monkeypatch):
    """GDPO divides by the std over the batch: the batch it trains on, not the groups drawn and dropped
    (computed before the selection, the kept advantages had std 1.39 in one run)."""
    metrics, batch, drawn, adv = _rl_step_with_flat_groups(tmp_path, monkeypatch, with_abcd, "algo=gdpo",
                                                           "prompts_per_step=4", "dynamic_sampling=5")
    assert metrics["sampling_rounds"] > 1 and len(drawn) > len(batch["problems"])  # some groups were dropped
    assert abs(float(adv.std(unbiased=False)) - 1) < 1e-5 and abs(float(adv.mean())) < 1e-6


def test_dr_grpo_loss_divides_by_rollouts_times_the_longest_completion(tmp_path, monkeypatch):
    import train as trainer
    from rollouts import max_completion_tokens
    seen = []
    real = trainer.grpo.policy_loss

    def policy_loss(*args, normaliser=None, **kwargs):
        seen.append(normaliser)
        return real(*args, normaliser=normaliser, **kwargs)
    monkeypatch.setattr(trainer.grpo, "policy_loss", policy_loss)
    for norm, algo, m in [("constant", "grpo", 1), ("constant", "vpo", 3), ("tokens", "grpo", 1)]:
        _rl_step_with_flat_groups(tmp_path, monkeypatch, lambda p: False, f"algo={algo}", f"loss_norm={norm}")
        want = 2 * 4 * max_completion_tokens(trainer.make_task("persona"), m) if norm == "constant" else None
        assert seen[-1] == want and (want is None or want == 2 * 4 * (13 * m + 1))


def test_dynamic_sampling_keeps_the_share_of_mutation_groups(tmp_path, monkeypatch):
    import rollouts
    import train as trainer
    cfg = tiny(tmp_path, "dynamic_sampling=3", "algo=grpo", "task=code", "mutation_share=0.5")
    task, tok = trainer.make_task("code"), trainer.Tokenizer()
    torch.manual_seed(0)
    model = warmstart.build_model(cfg, tok, "cpu")
    calls = []

    def spread_everywhere(task, problem, answers, m, as_written=False, memo=None):
        calls.append(problem)
        return np.random.default_rng(len(calls)).random((m, task.dim)).astype(np.float32)
    monkeypatch.setattr(rollouts, "score_answers", spread_everywhere)
    run = trainer.Run(cfg, task, tok, model, torch.optim.AdamW(model.parameters()), trainer.distributed.Scorer(model),
                      rng=random.Random(1), generator=torch.Generator().manual_seed(0))
    _, batch = trainer.rl_step(run)
    G = cfg["group_size"]
    prompts = [tok.decode(row[mask]) for row, mask in zip(batch["prompt"][::G], batch["prompt_mask"][::G])]
    assert len(prompts) == cfg["prompts_per_step"]
    assert sum(" from " in p for p in prompts) == round(0.5 * cfg["prompts_per_step"])  # parent-format prompts


def test_parent_replay_adds_the_warm_starts_loss_on_parent_prompts(tmp_path):
    """With every advantage zero and no KL the RL loss has no gradient, so an update moves the policy by
    parent_replay x the demonstrations' cross-entropy alone: its gradient is that one, and the demos shown
    carry parents."""
    import train as trainer
    cfg = tiny(tmp_path, "algo=grpo", "task=code", "parent_replay=0.5", "kl_coef=0",
                "max_grad_norm=1e9")  # no clipping: the gradient is compared as it is
    task, tok = trainer.make_task("code"), trainer.Tokenizer()
    torch.manual_seed(0)
    model = warmstart.build_model(cfg, tok, "cpu")
    run = trainer.Run(cfg, task, tok, model, torch.optim.SGD(model.parameters(), lr=0.0),
                      trainer.distributed.Scorer(model), rng=random.Random(1), generator=torch.Generator().manual_seed(0))
    batch = trainer.sample_rollouts(model, tok, task, task.problems("train", 2, random.Random(0)), 1,
                                    cfg["group_size"], cfg, run.generator, "cpu")
    adv = torch.zeros(len(batch["answers"]) * cfg["group_size"])
    state = run.rng.getstate()
    _, stats, _ = trainer.policy_update(run, batch, adv)
    grads = [p.grad.clone() for p in model.parameters()]
    run.rng.setstate(state)  # the same demonstrations again
    demos = trainer.padded_demos(task, tok, cfg, run.rng, "cpu", parents_only=True)
    assert all(" from " in tok.decode(row[mask]) for row, mask in zip(demos[0], demos[1]))
    model.zero_grad()
    replay = trainer.replay_loss(model, demos, cfg, "cpu")
    (0.5 * replay).backward()
    assert stats["replay_loss"] == pytest.approx(replay.item(), rel=1e-5)
    for g, p in zip(grads, model.parameters()):
        assert torch.allclose(g, p.grad, atol=1e-6)
    assert any(float(g.abs().sum()) > 0 for g in grads)


def test_parent_replay_needs_the_code_task(tmp_path):
    with pytest.raises(ConfigError, match="parent_replay > 0 needs the code task"):
        tiny(tmp_path, "parent_replay=0.1")


def test_format_coef_adds_the_format_advantage_to_the_algorithms(tmp_path, monkeypatch):
    """With format_coef the update trains on the algorithm's advantage plus format_coef times the
    format advantage: flat (no change) when every answer scores, and added as is otherwise."""
    import train as trainer
    real = trainer.ADVANTAGES["grpo"][0]
    rewards_seen = []
    monkeypatch.setitem(trainer.ADVANTAGES, "grpo", (lambda r, s, w, cfg: rewards_seen.append(r) or real(r, s, w, cfg),
                                                     False))
    adv = {}
    for coef in (0.0, 0.5):
        _, _, _, adv[coef] = _rl_step_with_flat_groups(tmp_path / str(coef), monkeypatch, lambda p: False, "algo=grpo",
                                                       f"format_coef={coef}")
    r = rewards_seen[-1]
    assert (r.sum(-1) > 0).all()  # random rewards: every answer scores, so the format term is flat: no change
    assert torch.equal(adv[0.5], adv[0.0])
    monkeypatch.setattr(trainer.grpo, "format_advantages", lambda r: torch.ones(r.shape[:2]))
    _, _, _, with_ones = _rl_step_with_flat_groups(tmp_path / "ones", monkeypatch, lambda p: False, "algo=grpo",
                                                   "format_coef=0.5")
    assert torch.allclose(with_ones, adv[0.0] + 0.5)


def test_ctrl_c_in_one_run_says_how_to_resume_without_a_traceback(tmp_path):
    import signal
    import time
    root = os.path.dirname(os.path.dirname(TINY))
    out = tmp_path / "run"
    command = [sys.executable, os.path.join(root, "train.py"), "--config", TINY, "--set", f"out_dir={out}",
               f"warmstart_dir={tmp_path / 'ws'}", "steps=5000", "ckpt_every=2", "eval_every=0"]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=root,
                            env=dict(os.environ, OMP_WAIT_POLICY="PASSIVE"),
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # as at a terminal
    deadline = time.time() + 120
    while not (out / "ckpt.pt").exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert (out / "ckpt.pt").exists() and proc.poll() is None
    proc.send_signal(signal.SIGINT)
    output = proc.communicate(timeout=60)[0]
    assert proc.returncode == 130 and "Traceback" not in output, output
    assert "--set resume=true" in output.splitlines()[-1] and (out / "ckpt.pt").exists()


def test_one_run_explains_itself(tmp_path, capsys):
    """python train.py says where its warm start went, ends with its held-out best@k against the warm
    start's, writes run.png, and its closing line counts the whole wall time, the warm start included."""
    import train as trainer
    trainer.main(["--config", TINY, "--set", f"out_dir={tmp_path}/run", f"warmstart_dir={tmp_path}/ws",
                  "eval_problems=2", "pool_n=4"])
    out = capsys.readouterr().out
    assert f"cached in {tmp_path}/ws/warmstart-persona-" in out
    assert "held-out, 2 problems" in out and "this run" in out and "its warm start" in out
    assert "pass@k is 0 at every k" in out  # persona: said, not printed as a table of zeros
    assert os.path.exists(tmp_path / "run" / "run.png")
    assert out.strip().splitlines()[-1].startswith("done in ") and "warm start and this evaluation included" in out
    assert "the warm start included" in open(tmp_path / "run" / "log.txt").read()
