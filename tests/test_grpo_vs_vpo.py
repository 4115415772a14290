"""grpo_vs_vpo.py, the idea in one file, held to the reference: its advantages are grpo.py's and
vpo.py's (and train.py's), its loss is grpo.policy_loss, its sampler records the policy's own
log-probs, its best@k and w-best@k are metrics.py's, its settings are those of
configs/persona_one_file.yaml (the trainer runs its recipe), and a tiny run of the whole file
finishes."""

import itertools
import json
import os
import random

import numpy as np
import pytest
import torch
from checks import assert_close

import grpo
import grpo_vs_vpo as one_file
import metrics
import train
import vpo
from config import make_task
from model import build_model


def random_rewards(P, G, m, D, seed):
    """(P, G, m, D) rewards in [0, 1] with zero rows (invalid or repeated answers) and one group
    whose rollouts are all alike (no signal: its advantages must be zeros)."""
    generator = torch.Generator().manual_seed(seed)
    rewards = torch.rand(P, G, m, D, generator=generator)
    rewards[torch.rand(P, G, m, generator=generator) < 0.2] = 0.0
    rewards[0] = rewards[0, :1]  # every rollout of the first group is the same
    return rewards


@pytest.mark.parametrize("seed", range(5))
def test_its_advantages_are_grpo_and_vpo_py_on_random_inputs(seed):
    P, G, m, D, N = 4, 8, 3, 2, 100
    rewards = random_rewards(P, G, m, D, seed)
    weights = vpo.sample_weights(P, N, D, generator=torch.Generator().manual_seed(seed))
    got_vpo = one_file.advantages("vpo", rewards, weights)
    assert torch.equal(got_vpo, vpo.vpo_advantages(rewards, weights))
    single = rewards[:, :, :1]  # GRPO's rollouts hold one answer
    got_grpo = one_file.advantages("grpo", single, weights)
    assert torch.equal(got_grpo, grpo.grpo_advantages(single[:, :, 0].mean(-1)))
    assert got_grpo[0].abs().sum() == 0 and got_vpo[0].abs().sum() == 0  # no signal, zeros
    # and what the full trainer computes from the same rewards, through train.ADVANTAGES
    task = one_file.task
    for algo, r in (("vpo", rewards), ("grpo", single)):
        expected = train.ADVANTAGES[algo].advantage(r, task.scalarize(r), weights, train.DEFAULTS)
        assert_close(one_file.advantages(algo, r, weights), expected, atol=0, what=algo)


# Exercise (0) is graded by the tests named advantages_by_hand, advantages_of_one_answer,
# best_at_k_by_hand and tiny_run: each needs only the one file, so it grades (0) while the trainer's
# exercises are still blank. The tests above and below hold the one file to the trainer's files.
SPECIALISTS_AND_GENERALIST = torch.tensor([[[[1.0, 0.0], [0.0, 1.0]], [[0.6, 0.6], [0.6, 0.6]]]])


def test_advantages_by_hand():
    """Exercise (b)'s example: rollout 1 writes two specialists, rollout 2 one generalist twice;
    weightings (1, 0) and (0, 1)."""
    rewards, weights = SPECIALISTS_AND_GENERALIST, torch.tensor([[[1.0, 0.0], [0.0, 1.0]]])
    # set scores 1 and .6 (the reductions swapped: .5 and .6), z-scored: +1 and -1
    vpo_adv = one_file.advantages("vpo", rewards, weights)
    assert_close(vpo_adv, torch.tensor([[1.0, -1.0]]), atol=1e-4, what="VPO")
    # GRPO's rollouts hold one answer, scored by the mean: .5 and .6, so the generalist wins
    grpo_adv = one_file.advantages("grpo", rewards[:, :, :1], weights)
    assert_close(grpo_adv, torch.tensor([[-1.0, 1.0]]), atol=1e-4, what="GRPO")
    # three rollouts scored 0, .5, 1: mean .5, population std sqrt(1/6) (not the sample std, .5)
    three = torch.tensor([[[[0.0, 0.0]], [[0.5, 0.5]], [[1.0, 1.0]]]])
    z = 0.5 / (1 / 6) ** 0.5
    assert_close(
        one_file.advantages("grpo", three, weights), torch.tensor([[-z, 0.0, z]]), atol=1e-4
    )
    # a group whose rollouts all scored alike, or alike but for float noise, teaches nothing
    alike = torch.tensor([[[[0.3, 0.7]], [[0.3, 0.7]]], [[[0.5, 0.5]], [[0.5, 0.5 + 1e-7]]]])
    tied = "a group whose rollouts all scored alike must get zero advantages (std below MIN_STD)"
    flat = one_file.advantages("grpo", alike, weights.expand(2, -1, -1))
    assert torch.equal(flat, torch.zeros(2, 2)), f"{tied}; GRPO gave {flat.tolist()}"
    flat = one_file.advantages("vpo", alike.expand(-1, -1, 3, -1), weights.expand(2, -1, -1))
    assert torch.equal(flat, torch.zeros(2, 2)), f"{tied}; VPO gave {flat.tolist()}"


def test_advantages_of_one_answer_under_balanced_trade_offs_are_grpos():
    """With one answer a rollout, the set score is the answer under the mean trade-off; trade-offs
    (t, 1 - t) spread evenly over [0, 1] average to (1/2, 1/2), GRPO's mean."""
    rewards = random_rewards(4, 8, 1, 2, seed=0)
    t = torch.linspace(0, 1, 11)
    balanced = torch.stack([t, 1 - t], dim=-1).expand(4, -1, -1)  # (P, N, D)
    expected = one_file.advantages("grpo", rewards, balanced)
    assert_close(one_file.advantages("vpo", rewards, balanced), expected, atol=1e-4)
    assert expected[0].abs().sum() == 0 and expected[1:].abs().sum() > 0


def test_best_at_k_by_hand_and_by_brute_force():
    pool = torch.tensor([4.0, 1.0, 3.0, 2.0])
    # k = 1: the mean; k = 2: pair maxima 2, 3, 4, 3, 4, 4; k = 3: 3, 4, 4, 4; k = 4: the max
    for k, want in [(1, 2.5), (2, 20 / 6), (3, 3.75), (4, 4.0)]:
        got = one_file.best_at_k(pool, k).item()
        # what must hold first: an average of k-subsets' maxima lies between the mean and the best
        assert 2.5 - 1e-12 <= got <= 4.0 + 1e-12, (
            f"best@{k} of {pool.tolist()} is {got}: impossible, it must lie between the pool's "
            "mean (2.5, k = 1) and its best (4.0, k = n)"
        )
        assert abs(got - want) < 1e-12, f"best@{k} of {pool.tolist()}: want {want}, got {got}"
    generator = torch.Generator().manual_seed(0)
    pools = torch.randint(0, 4, (2, 3, 7), generator=generator).float() / 4  # ties aplenty
    for k in range(1, 8):
        got = one_file.best_at_k(pools, k)
        assert got.shape == (2, 3)
        for index in itertools.product(range(2), range(3)):
            subsets = list(itertools.combinations(pools[index].tolist(), k))
            brute = sum(max(subset) for subset in subsets) / len(subsets)
            assert abs(got[index].item() - brute) < 1e-12, (k, index)


def test_its_weightings_are_uniform_on_the_simplex():
    weights = one_file.random_weightings(2, 20_000, torch.Generator().manual_seed(0))
    assert weights.shape == (2, 20_000, one_file.task.dim) and (weights >= 0).all()
    assert_close(weights.sum(-1), torch.ones(2, 20_000), atol=1e-6, what="sums")
    # Dirichlet(1, 1) is uniform on [0, 1] in its first coordinate: mean 1/2, variance 1/12
    first = weights[..., 0].double()
    assert abs(first.mean() - 0.5) < 0.01 and abs(first.var() - 1 / 12) < 0.003


@pytest.fixture(scope="module")
def batch():
    """A nano model's sampled batch of VPO rollouts, and the model."""
    torch.manual_seed(0)
    model = build_model("nano", block_size=64, vocab_size=one_file.tok.vocab_size, device="cpu")
    problems = one_file.task.problems("train", 3, random.Random(0))
    generator = torch.Generator().manual_seed(0)
    tensors, answers = one_file.sample(model, problems, num_rollouts=4, m=3, generator=generator)
    return model, problems, tensors, answers


def test_sampling_records_the_policys_own_logprobs(batch):
    """The ratio is 1 at a batch's first update: the log-probs the sampler records are those the
    scoring forward computes."""
    model, problems, (prompt, prompt_mask, completion, mask, old_logprobs), answers = batch
    with torch.no_grad():
        scored = one_file.completion_logprobs(model, prompt, prompt_mask, completion=completion)
    assert_close(scored * mask, old_logprobs, atol=1e-5, what="log-probs")
    assert len(answers) == 12 and all(len(rollout) == 3 for rollout in answers)
    rewards = one_file.reward_vectors(problems, answers)
    assert rewards.shape == (3, 4, 3, one_file.task.dim)


def test_its_loss_is_grpo_policy_loss_on_one_batch(batch):
    model, _, (prompt, prompt_mask, completion, mask, old_logprobs), _ = batch
    logprobs = one_file.completion_logprobs(model, prompt, prompt_mask, completion=completion)
    generator = torch.Generator().manual_seed(1)
    # a later update: the ratio has moved away from 1 on some tokens, far enough for the clip
    old = old_logprobs + 0.5 * torch.randn(old_logprobs.shape, generator=generator) * mask
    ref = old_logprobs + 0.3 * torch.randn(old_logprobs.shape, generator=generator) * mask
    adv = torch.randn(len(completion), generator=generator)
    loss, kl = one_file.clipped_loss(logprobs, old, ref, adv=adv, mask=mask)
    settings = grpo.LossSettings(clip=one_file.CLIP, kl_coef=one_file.KL_COEF)
    expected, stats = grpo.policy_loss(
        logprobs, old, adv, mask, settings=settings, ref_logprobs=ref
    )
    assert stats["clip_frac"] > 0 and kl > 0
    assert_close(loss, expected, atol=1e-6, what="loss")
    assert abs(kl.item() - stats["kl"]) < 1e-6
    mine = torch.autograd.grad(loss, model.parameters(), retain_graph=True)
    theirs = torch.autograd.grad(expected, model.parameters())
    for a, b in zip(mine, theirs):
        assert_close(a, b, atol=1e-6, what="gradient")


def test_its_best_at_k_is_metrics_py():
    rng = np.random.default_rng(0)
    pool = rng.random((5, 12, 2))  # (problems, answers, D)
    pool[:, :3] = pool[:, :1]  # ties
    scores = torch.tensor(pool.mean(-1))
    weights = one_file.random_weightings(1, 16, torch.Generator().manual_seed(0))[0]
    weighted = torch.einsum("qnd,wd->qwn", torch.tensor(pool, dtype=torch.float32), weights)
    for k in range(1, 13):
        got = one_file.best_at_k(scores, k)
        expected = [metrics.max_at_k(row, k) for row in scores.numpy()]
        assert np.allclose(got.numpy(), expected, rtol=0, atol=1e-12), k
        # w-best@k: the mean over held-out weightings, as evaluate() takes it
        got_w = one_file.best_at_k(weighted, k).mean(-1)
        expected_w = [
            metrics.scalarized_best_at_k(rows, weights.numpy(), [k])[0]
            for rows in pool.astype(np.float32)
        ]
        assert np.allclose(got_w.numpy(), expected_w, rtol=0, atol=1e-6), k


def test_a_tiny_run_of_the_whole_file_finishes(monkeypatch, capsys, tmp_path):
    tiny = dict(WARM_STEPS=4, RL_STEPS=2, PROMPTS=2, GROUP=2, WEIGHTINGS=4, EVAL_PROBLEMS=2)
    tiny.update(POOL=6, HELDOUT_WEIGHTINGS=4, KS=(1, 6))
    for name, value in tiny.items():
        monkeypatch.setattr(one_file, name, value)
    monkeypatch.setattr(one_file, "SEED", one_file.SEED)  # --seed sets it; the test restores it
    out_file = tmp_path / "seed1.json"
    results = one_file.main(["--seed", "1", "--out", str(out_file)])
    assert list(results) == ["warm start", "warm start m=3", "GRPO", "VPO"]
    metrics = ["best@1", "best@6", "w-best@1", "w-best@6"]
    for per_problem in results.values():
        assert list(per_problem) == metrics
        assert all(v.shape == (2,) and ((v >= 0) & (v <= 1)).all() for v in per_problem.values())
    saved = json.loads(out_file.read_text())
    assert saved["seed"] == 1 and one_file.SEED == 1
    assert saved["per_problem"]["VPO"]["w-best@6"] == results["VPO"]["w-best@6"].tolist()
    out = capsys.readouterr().out
    assert "grpo step   2/2" in out and "vpo step   2/2" in out and "w-best@6" in out
    assert "seed 1" in out


@pytest.mark.parametrize(
    "answers, prompts, group, personas", [(4, 3, 3, 3), (1, 2, 2, 2), (2, 1, 4, 4)]
)
def test_the_file_runs_with_any_answers_prompts_group_and_personas(
    monkeypatch, capsys, answers, prompts, group, personas
):
    """The predict-then-run kit invites edits of these constants: each combination runs to the end
    (ANSWERS = 4 once crashed after training: 30 answers are not a whole number of rollouts)."""
    tiny = dict(WARM_STEPS=2, RL_STEPS=1, WEIGHTINGS=4, EVAL_PROBLEMS=2, HELDOUT_WEIGHTINGS=4)
    tiny.update(POOL=6, KS=(1, 6), ANSWERS=answers, PROMPTS=prompts, GROUP=group)
    # as the file computes it from ANSWERS when a student edits that line
    tiny.update(BLOCK_SIZE=max(64, 16 + answers * 13 + 1))
    for name, value in tiny.items():
        monkeypatch.setattr(one_file, name, value)
    monkeypatch.setattr(one_file, "task", one_file.PersonaTask(num_personas=personas))
    monkeypatch.setattr(one_file, "SEED", one_file.SEED)
    results = one_file.main(["--seed", "0"])
    assert list(results) == ["warm start", f"warm start m={answers}", "GRPO", "VPO"]
    for per_problem in results.values():
        assert all(v.shape == (2,) and ((v >= 0) & (v <= 1)).all() for v in per_problem.values())
    assert "vpo step   1/1" in capsys.readouterr().out


def test_a_nan_advantage_stops_training_in_one_line(monkeypatch):
    """A student's advantages without the tied-group guard divide by a zero std: the run stops
    there, saying so, not with a NaN crash in the next step's sampling."""
    tiny = dict(RL_STEPS=1, PROMPTS=1, GROUP=2, WEIGHTINGS=2)
    for name, value in tiny.items():
        monkeypatch.setattr(one_file, name, value)
    monkeypatch.setattr(one_file, "advantages", lambda *a: torch.full((1, 2), float("nan")))
    model = build_model("nano", block_size=64, vocab_size=one_file.tok.vocab_size, device="cpu")
    with pytest.raises(ValueError, match="advantage is NaN or inf"):
        one_file.train("grpo", model)


def test_best_at_1_is_w_best_at_1_under_the_average_trade_off():
    """best@1 and w-best@1 are a pool's mean reward under the mean and under the held-out
    trade-offs' average: equal when that average is (1/2, 1/2), as for mirrored trade-offs, and
    apart otherwise."""
    pool = torch.rand(3, 10, 2, generator=torch.Generator().manual_seed(0))  # (Q, POOL, D)
    draws = one_file.random_weightings(1, 8, torch.Generator().manual_seed(0))[0]
    mirrored = torch.cat([draws, draws.flip(-1)])  # (16, 2): (w, 1 - w) and (1 - w, w)
    best_1 = one_file.best_at_k(pool.mean(-1), 1)
    for tradeoffs, equal in ((mirrored, True), (draws, False)):
        w_best_1 = one_file.best_at_k(torch.einsum("qad,nd->qna", pool, tradeoffs), 1).mean(-1)
        average = one_file.best_at_k(pool @ tradeoffs.mean(0), 1)
        assert_close(w_best_1, average.double(), atol=1e-6, what="w-best@1")
        assert torch.allclose(w_best_1, best_1, atol=1e-6) == equal
        # two personas: they differ by (1/2 - the average's first weight) x (r1 - r2), pool means
        mean_answer = pool.mean(1).double()  # (Q, D)
        gap = (0.5 - tradeoffs.mean(0)[0].double()) * (mean_answer[:, 0] - mean_answer[:, 1])
        assert_close(best_1 - w_best_1, gap, atol=1e-6, what="best@1 - w-best@1")


ONE_FILE_CONFIG = os.path.join(
    os.path.dirname(os.path.dirname(__file__)), "configs", "persona_one_file.yaml"
)
# trainer setting -> the one file's constant of the same meaning
SAME_SETTINGS = dict(
    model="MODEL",
    block_size="BLOCK_SIZE",
    sft_steps="WARM_STEPS",
    sft_batch="WARM_BATCH",
    sft_lr="WARM_LR",
    steps="RL_STEPS",
    prompts_per_step="PROMPTS",
    group_size="GROUP",
    answers_per_rollout="ANSWERS",
    num_weights="WEIGHTINGS",
    lr="LR",
    weight_decay="WEIGHT_DECAY",
    clip="CLIP",
    kl_coef="KL_COEF",
    epochs_per_batch="UPDATES_PER_BATCH",
    max_grad_norm="MAX_GRAD_NORM",
    eval_problems="EVAL_PROBLEMS",
    pool_n="POOL",
    heldout_weightings="HELDOUT_WEIGHTINGS",
)
# what the one file writes into its code rather than a constant: the trainer's value for the same
THE_ONE_FILES_WAY = dict(
    alpha=1.0,  # Dirichlet(1) weightings (random_weightings)
    weight_sampler="dirichlet",
    scale_rewards="group",  # the group's own std (advantages)
    loss_norm="tokens",  # a token mean over the batch (clipped_loss)
    clip_high=0.0,  # one clip range, both sides
    entropy_coef=0.0,
    format_coef=0.0,
    dynamic_sampling=0,
    temperature=1.0,  # plain multinomial sampling (sample)
    top_k=0,
    top_p=1.0,
    tokenizer="bytes",
)


def test_its_settings_are_the_trainer_configs():
    """configs/persona_one_file.yaml holds the one file's recipe: change a constant of either and
    this fails, naming it."""
    cfg = train.resolve_config(ONE_FILE_CONFIG)
    drifted = {
        key: (cfg[key], getattr(one_file, name))
        for key, name in SAME_SETTINGS.items()
        if cfg[key] != getattr(one_file, name)
    }
    drifted.update({k: (cfg[k], v) for k, v in THE_ONE_FILES_WAY.items() if cfg[k] != v})
    assert not drifted, f"config vs grpo_vs_vpo.py: {drifted}"
    task = make_task(cfg["task"], **cfg["task_options"])
    assert type(task) is type(one_file.task) and vars(task) == vars(one_file.task)


def test_the_drift_check_sees_a_changed_constant(monkeypatch):
    """The check above can fail: one constant of the one file changed is caught."""
    monkeypatch.setattr(one_file, "KL_COEF", 0.0)
    with pytest.raises(AssertionError, match="kl_coef"):
        test_its_settings_are_the_trainer_configs()
