"""
Train a small GPT policy with GRPO, VPO or one of the baselines, on a vector-reward task.

    python train.py --config configs/persona.yaml --set algo=vpo seed=1
    python train.py                      # no --config: DEFAULTS alone (persona, VPO)
    python train.py --help               # every setting, its default and why

The full trainer; grpo_vs_vpo.py is the idea in one file, to read first. Read this one top to
bottom: the settings, the algorithm table, one RL step, the loop. What is off by default (the
parents a prompt may show, the format term, parent replay, DAPO's dynamic sampling in a section of
its own, torchrun's share of a batch) sits apart from the step's plain path. A run starts from the
supervised warm start (warmstart.py: GRPO and VPO runs of one task and seed start from the SAME
weights). Each RL step samples `prompts_per_step` problems, G rollouts each, scores every answer
with the task's reward vector, turns the rewards into one advantage per rollout (ADVANTAGES) and
takes `epochs_per_batch` clipped policy-gradient steps. The logged loss reads ~0 (grpo.py says why).

What we simplified, and why:
- No value model, no GAE (group baselines need none); one model in one process, no inference server.
- The "old" log-probs are those recorded while sampling (exactly the policy's at temperature 1
  without top-k/top-p; otherwise the ratio is off-policy by design).
- Problems are generated from a seeded RNG rather than read from a dataset (fresh ones every step,
  or with train_problems a finite set drawn once and visited in epochs).
Machinery a student can skip: config.py, warmstart.py, runfiles.py, tracking.py, distributed.py,
engine.py.
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # OpenMP busy-waiting made CPU runs far slower

import copy
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch

import baselines
import config
import distributed
import engine
import exploration
import grpo
import runfiles
import vpo
from config import EVALUATION, ONE_LINE_ERRORS, ConfigError, make_task
from evaluate import heldout_look
from figures import report_run
from model import Tokenizer
from policy import Policy
from rollouts import max_completion_tokens, sample_rollouts, solves
from tasks import ParentTask, TrainingSet
from warmstart import padded_demos, replay_loss, warm_start, warmstart_path

# ---- Settings: every run's, unless its configs/<task>.yaml or --set key=value changes one (never
# adds one). Each line's comment is its reason: `python train.py --help` prints them.
DEFAULTS = dict(
    # what to train
    task="persona",  # a name in config.TASKS: what is asked, and the reward vector of an answer
    task_options={},  # the task's constructor arguments (rewards.PersonaTask, codetask.CodeTask)
    algo="vpo",  # a name in train.ADVANTAGES: grpo, vpo, the ablations and baselines
    seed=0,  # the problems, the warm start's weights and every draw follow it
    # model
    model="cpu",  # size preset from model.PRESETS
    block_size=192,  # longest prompt + completion, in tokens
    tokenizer="bytes",  # bytes | numbers (a token per 2-digit number) | maze | a tiktoken name
    # warm start (supervised, warmstart.py)
    sft_steps=300,  # supervised steps on demonstrations before RL
    sft_batch=64,  # demonstrations per warm-start step
    sft_lr=3e-3,  # the warm start's peak learning rate (50 steps of warm-up, then cosine)
    sft_parent_fraction=0.15,  # code task: share of demonstrations whose prompt carries parents
    sft_single_first=0.3,  # share of the warm start spent on the plain 1-answer format first
    # RL
    steps=250,  # RL steps
    prompts_per_step=8,  # P: prompt groups per step
    group_size=8,  # G: rollouts per prompt
    answers_per_rollout=3,  # m: answers in one rollout of a set method (vpo, multi_rlvr, vpo_loo)
    num_weights=100,  # N: weightings per group for VPO's score
    alpha=1.0,  # Dirichlet concentration of the weightings (1: uniform on the simplex)
    weight_sampler="dirichlet",  # a name in vpo.WEIGHT_SAMPLERS: dirichlet | sobol
    vpo_credit="set",  # set: VPO's, the set's credit | togo | gain | marginal: per answer (vpo.py)
    lr=1e-3,  # AdamW's learning rate
    weight_decay=0.0,  # AdamW's weight decay
    clip=0.2,  # PPO ratio clip: the ratio's range is [1 - clip, 1 + clip]
    kl_coef=0.0,  # k3 KL to the warm-start policy; 0 skips the reference forward
    epochs_per_batch=1,  # policy updates per batch of rollouts (ratio != 1 after the first)
    max_grad_norm=1.0,  # gradient norm clip of every update
    mutation_share=0.0,  # code task: share of prompt groups that show parent programs to mutate
    parent_replay=0.0,  # code task: weight of the warm start's loss on parent prompts (PPO-ptx)
    max_k=4,  # k of the max_at_k baseline (best of k samples)
    # outcome-based exploration (exploration.py) and the finite training set it needs
    train_problems=0,  # N > 0: N problems drawn once, visited in epochs; 0: fresh ones every step
    train_screen_answers=0,  # K > 0: the set mixes problems the start solves in K answers and not
    train_solvable_share=0.5,  # with K > 0: the share of the set the start solves (the rest not)
    explore_coef=0.2,  # c: the weight of an exploration method's bonus (the paper's 0.2)
    ucb_baseline=0.5,  # b0 of ucb_con: the bonus minus b0 (the paper's 0.5; 1 on easy data)
    explore_solved_groups=False,  # also a bonus where a group's answers all solve (docs/METHOD.md)
    explore_bonus_at="after",  # "after" GRPO's z-score (the paper's objective) | "before" it
    explore_count_current=False,  # N(x, a) also counts this step's answers (earlier steps only)
    outcome_reward=False,  # reward 1 if an answer solves its problem, else 0 (docs/METHOD.md)
    # GRPO's own fixes against collapse (grpo.py), for every algorithm, off by default
    scale_rewards="group",  # the std advantages divide by: group | batch (TRL) | none (Dr. GRPO)
    loss_norm="tokens",  # tokens: the batch's token mean | constant: Dr. GRPO's (grpo.py)
    clip_high=0.0,  # upper ratio clip 1 + clip_high (DAPO: 0.28); 0: the same as clip
    entropy_coef=0.0,  # bonus for the policy's token entropy, at each method's advantage RMS
    format_coef=0.0,  # weight of grpo.format_advantages, at each method's advantage RMS
    dynamic_sampling=0,  # DAPO: at most this many rounds of fresh groups until P have a signal
    temperature=1.0,  # sampling temperature (1: the policy's own probabilities)
    top_k=0,  # sample among the k likeliest tokens only (0: off)
    top_p=1.0,  # nucleus sampling (1.0: off)
    # logging and evaluation
    eval_every=25,  # steps between held-out evaluations (0: only at the end)
    eval_problems=32,  # held-out problems per evaluation
    ckpt_every=25,  # steps between resume checkpoints (0: only the final one)
    report_to="none",  # curves as it trains: none | tensorboard | trackio | tensorboard,trackio
    report_dir="",  # where many runs' curves meet (tracking.py); "" -> tracking/ beside the run
    out_dir="",  # the run's folder; "" -> out/<task>-<algo>-s<seed>
    warmstart_dir="out/warmstart",  # where warm starts are cached, one per task, seed and settings
    warmstart_from="",  # a warm-start checkpoint to start from instead of training/caching one
    device="auto",  # auto | cpu | cuda | mps
    threads=1,  # torch CPU threads; models this small gain nothing from more
    dtype="float32",  # float32 | bfloat16 (autocast; CUDA or CPU)
    compile=False,  # torch.compile the scoring forward (slower on CPU; for GPUs)
    cuda_graph=True,  # on CUDA, sample and warm-start as CUDA graphs (one launch a step)
    peak_tflops=0.0,  # the device's peak, to log model-FLOPs utilization (0: not logged)
    overwrite=False,  # allow writing into an out_dir that already holds a run
    resume=False,  # continue the unfinished run in out_dir from its last checkpoint
    quiet=False,  # print nothing; log.txt in the run's folder still gets every line
)
DEFAULTS.update(EVALUATION)  # and how a finished run is measured (config.EVALUATION)


# ---- Algorithms: an advantage function each, and whether its rollouts hold a SET of m answers ----
# An advantage takes the reward vectors (P, G, m, D), their fixed scalarization (P, G, m), the
# weightings (P, N, D) and cfg, and returns (P, G): one advantage per rollout (VPO with vpo_credit:
# (P, G, m), one per answer). Single-answer methods have m = 1 and N = 1. A new idea: write the
# function (like baselines.py), add a line to ADVANTAGES.


def grpo_advantage(rewards, scalar, weights, cfg):
    """GRPO: the group z-score of each answer's fixed scalarization."""
    return grpo.grpo_advantages(scalar[:, :, 0], std=cfg["scale_rewards"])


def vpo_advantage(rewards, scalar, weights, cfg):
    """VPO: each set's score, its best answer under each weighting, against the group's."""
    return vpo.vpo_advantages(rewards, weights, std=cfg["scale_rewards"], credit=cfg["vpo_credit"])


def multi_rlvr_advantage(rewards, scalar, weights, cfg):
    """The paper's ablation: VPO's sets scored by their summed fixed scalarization."""
    return grpo.grpo_advantages(vpo.multi_rlvr_scores(scalar), std=cfg["scale_rewards"])


def random_weights_advantage(rewards, scalar, weights, cfg):
    """The paper's other ablation: VPO's weightings without sets, one for each answer."""
    scores = vpo.random_weight_scores(rewards, weights)
    return grpo.grpo_advantages(scores, std=cfg["scale_rewards"])


def vpo_loo_advantage(rewards, scalar, weights, cfg):
    """An exercise: VPO's set score against the other rollouts' mean (leave-one-out)."""
    return vpo.leave_one_out_advantages(vpo.set_scores(rewards, weights))


def max_at_k_advantage(rewards, scalar, weights, cfg):
    """Max@K: each rollout's credit towards the best of max_k samples (baselines.py)."""
    return baselines.max_at_k_advantages(scalar[:, :, 0], cfg["max_k"], std=cfg["scale_rewards"])


def gdpo_advantage(rewards, scalar, weights, cfg):
    """GDPO: each reward component z-scored on its own (baselines.py)."""
    return baselines.gdpo_advantages(rewards[:, :, 0])


def maxrl_advantage(rewards, scalar, weights, cfg):
    """MaxRL: GRPO with the group's mean for its std (baselines.py)."""
    return baselines.maxrl_advantages(scalar[:, :, 0])


def rloo_advantage(rewards, scalar, weights, cfg):
    """RLOO (Ahmadian et al. 2024): vpo_loo's baseline on one answer's fixed scalarization."""
    return vpo.leave_one_out_advantages(scalar[:, :, 0])


# Outcome-based exploration (exploration.py) also reads the batch's outcomes: the counts N(x, a) of
# each rollout's outcome so far in training, and the outcomes themselves.


def ucb_advantage(rewards, scalar, weights, cfg, outcomes):
    """Historical exploration: GRPO plus c x min(1, sqrt(1 / N(x, a)))."""
    bonus = exploration.ucb_bonuses(outcomes.counts)
    return exploration_advantage(scalar, bonus, cfg=cfg, outcomes=outcomes)


def ucb_mean_advantage(rewards, scalar, weights, cfg, outcomes):
    """UCB-Mean: the bonus against the group's other rollouts' mean bonus."""
    bonus = exploration.ucb_mean_bonuses(outcomes.counts)
    return exploration_advantage(scalar, bonus, cfg=cfg, outcomes=outcomes)


def ucb_con_advantage(rewards, scalar, weights, cfg, outcomes):
    """UCB-Con: the bonus minus a constant b0 (ucb_baseline); the paper's best overall."""
    bonus = exploration.ucb_con_bonuses(outcomes.counts, cfg["ucb_baseline"])
    return exploration_advantage(scalar, bonus, cfg=cfg, outcomes=outcomes)


def batch_explore_advantage(rewards, scalar, weights, cfg, outcomes):
    """Batch exploration: GRPO minus c/G for every other rollout of the group with one's outcome."""
    bonus = exploration.batch_bonuses(outcomes.first)
    return exploration_advantage(scalar, bonus, cfg=cfg, outcomes=outcomes)


def exploration_advantage(scalar, bonus, cfg, outcomes):
    solved = None if cfg["explore_solved_groups"] else outcomes.solved
    return exploration.exploration_advantages(
        scalar[:, :, 0],
        bonus,
        cfg["explore_coef"],
        std=cfg["scale_rewards"],
        solved=solved,
        at=cfg["explore_bonus_at"],
    )


class Algorithm(NamedTuple):
    advantage: Callable  # (rewards, scalar, weights, cfg) -> (P, G)
    writes_sets: bool  # its rollouts hold m answers and its groups N weightings
    # its advantage also takes the batch's outcomes (Outcomes); historical: it needs their history
    explores: str = ""  # "" | "batch" | "historical"
    # its advantage reads the reward vector itself, so outcome_reward has no scalar to replace
    reads_vector: bool = False


ADVANTAGES = {
    "grpo": Algorithm(grpo_advantage, writes_sets=False),
    "vpo": Algorithm(vpo_advantage, writes_sets=True, reads_vector=True),
    "multi_rlvr": Algorithm(multi_rlvr_advantage, writes_sets=True),
    "random_weights": Algorithm(random_weights_advantage, writes_sets=False, reads_vector=True),
    # the same score; the weighting is also written into the prompt
    "goal_conditioned": Algorithm(random_weights_advantage, writes_sets=False, reads_vector=True),
    "vpo_loo": Algorithm(vpo_loo_advantage, writes_sets=True, reads_vector=True),
    # the field's baselines; config.py refuses scale_rewards where no std divides
    "max_at_k": Algorithm(max_at_k_advantage, writes_sets=False),
    "gdpo": Algorithm(gdpo_advantage, writes_sets=False, reads_vector=True),
    "maxrl": Algorithm(maxrl_advantage, writes_sets=False),
    "rloo": Algorithm(rloo_advantage, writes_sets=False),
    # outcome-based exploration (exploration.py); historical ones need train_problems > 0
    "ucb": Algorithm(ucb_advantage, writes_sets=False, explores="historical"),
    "ucb_mean": Algorithm(ucb_mean_advantage, writes_sets=False, explores="historical"),
    "ucb_con": Algorithm(ucb_con_advantage, writes_sets=False, explores="historical"),
    "batch_explore": Algorithm(batch_explore_advantage, writes_sets=False, explores="batch"),
}
SET_ALGOS = {name for name, algorithm in ADVANTAGES.items() if algorithm.writes_sets}


def answers_per_rollout(cfg):
    return cfg["answers_per_rollout"] if cfg["algo"] in SET_ALGOS else 1


def resolve_config(path=None, overrides=(), base=None):
    """DEFAULTS <- YAML file <- key=value overrides, checked (config.py, then check_settings):
    ConfigError, one line."""
    cfg = config.resolve(
        DEFAULTS, ADVANTAGES, path, overrides=overrides, base=base, samplers=vpo.WEIGHT_SAMPLERS
    )
    check_settings(cfg)
    return cfg


def check_settings(cfg):
    """The settings of exploration, the outcome reward and VPO's credit, checked here, not in
    config.py: config.py's code is part of every cached warm start's key."""
    # outcome_reward replaces the scalar an advantage reads: it refuses what it cannot replace
    if cfg["outcome_reward"] and ADVANTAGES[cfg["algo"]].reads_vector:
        raise ConfigError(
            f"outcome_reward does not apply to {cfg['algo']}: its advantage reads the reward "
            "vector itself, not a scalar the outcome could replace"
        )
    if cfg["outcome_reward"] and cfg["format_coef"]:
        raise ConfigError(
            "outcome_reward trains on the outcome alone: format_coef would add a reward for "
            "answers that parse (set format_coef=0)"
        )
    # only VPO reads vpo_credit; DAPO's resampling reads one advantage a rollout
    if cfg["vpo_credit"] not in vpo.CREDITS:
        credits = ", ".join(vpo.CREDITS)
        raise ConfigError(f"vpo_credit must be one of {credits}, got '{cfg['vpo_credit']}'")
    if cfg["vpo_credit"] != "set" and (cfg["algo"] != "vpo" or cfg["dynamic_sampling"]):
        raise ConfigError(
            f"vpo_credit={cfg['vpo_credit']} pays VPO's answers one by one: it needs algo=vpo and "
            f"dynamic_sampling=0 (here {cfg['algo']} and {cfg['dynamic_sampling']})"
        )
    if cfg["train_screen_answers"] < 0:
        raise ConfigError("train_screen_answers must be >= 0 (0: no screening)")
    if cfg["train_screen_answers"] and not cfg["train_problems"]:
        raise ConfigError("train_screen_answers screens a finite training set: set train_problems")
    if not 0 <= cfg["train_solvable_share"] <= 1:
        raise ConfigError("train_solvable_share must be in [0, 1]")
    if cfg["explore_bonus_at"] not in ("after", "before"):
        raise ConfigError(
            f"explore_bonus_at must be 'after' or 'before' (the z-score), not "
            f"'{cfg['explore_bonus_at']}'"
        )


# ---- One RL step ---------------------------------------------------------------------------------


@dataclass
class Run:
    """What one RL step needs: the policy, its optimizer, the task and the random streams."""

    cfg: dict
    task: object  # a tasks.Task
    policy: Policy  # the model, how it samples, and its generator (tokens and weightings)
    opt: torch.optim.Optimizer
    scorer: torch.nn.Module  # engine.score as a module (distributed.scorer), DDP under torchrun
    ref_model: torch.nn.Module = None  # the frozen warm start, for the KL (kl_coef > 0)
    rng: random.Random = None  # which problems
    rank: int = 0
    world: int = 1
    train_set: TrainingSet = None  # the finite training set (train_problems > 0), else None
    history: exploration.OutcomeHistory = None  # its outcomes so far, per problem


def rl_step(run):
    """One step: sample rollouts -> reward vectors -> advantages -> clipped loss -> update ->
    (metrics, batch)."""
    cfg = run.cfg
    algorithm = ADVANTAGES[cfg["algo"]]
    t0 = time.time()
    if cfg["dynamic_sampling"]:  # off by default: DAPO's resampling, set apart below
        batch, weights, sampling = dapo_sample(run, algorithm.advantage)
    else:
        batch, weights, _ = sample_round(run)
        sampling = {}
    t_sample = time.time() - t0
    rewards = batch["rewards"]  # (P, G, m, D)
    scalar = run.task.scalarize(rewards)  # (P, G, m): the fixed scalarization of every answer
    # None unless the training set is finite or the method explores
    outcomes = record_outcomes(run, batch, scalar)
    # Only the exploration methods take the outcomes; every other advantage takes four arguments.
    extra = {"outcomes": outcomes} if algorithm.explores else {}
    trained = trained_scalar(run, batch, scalar)  # the scalar the advantages see
    adv = algorithm.advantage(rewards, trained, weights, cfg, **extra)  # (P, G), or (P, G, m)
    adv, scale = with_fixed_weight_terms(adv, rewards, cfg)
    flat = adv.flatten(0, 1).to(run.policy.device)  # (B,), B = P * G rollouts; or (B, m)
    if flat.dim() == 2:  # vpo_credit: each answer's tokens their answer's advantage, (B, T)
        tokens = batch["completion"], batch["completion_mask"], run.policy.tok.sep
        flat = grpo.token_advantages(flat, *tokens)
    loss, stats, grad_norm = policy_update(
        run, batch, flat, entropy_coef=cfg["entropy_coef"] * scale
    )
    metrics = {
        "loss": loss,
        **stats,
        "grad_norm": grad_norm,
        **step_metrics(run, batch, rewards, scalar=scalar, weights=weights, adv=adv),
        **({"solved_answers": float(trained.mean())} if cfg["outcome_reward"] else {}),
        **sampling,
        **(run.history.summary() if run.history else {}),
        **({"epoch": run.train_set.epoch} if run.train_set else {}),
        "adv_scale": scale,
        "tokens": batch["num_tokens"],
        "sample_s": t_sample,
        "step_s": time.time() - t0,
    }
    return metrics, batch


def sample_round(run):
    """prompts_per_step fresh prompt groups, sampled and scored -> (batch, weightings (P, N, D),
    whether each group's prompt shows parents)."""
    cfg = run.cfg
    task = run.task
    num_groups = cfg["prompts_per_step"]  # the whole batch's, before torchrun splits it
    # A finite training set hands out its next problems; otherwise fresh ones are drawn.
    if run.train_set:
        problems = run.train_set.next(num_groups)
    else:
        problems = task.problems("train", num_groups, run.rng)
    parents = parent_prompts(run, problems)  # None for a plain prompt, as every one by default
    # The set methods draw N weightings per group; the single-answer weighted baselines draw one.
    N = cfg["num_weights"] if cfg["algo"] in SET_ALGOS else 1
    generator = run.policy.generator
    weights = vpo.sample_weights(
        num_groups,
        N,
        task.dim,
        alpha=cfg["alpha"],
        sampler=cfg["weight_sampler"],
        generator=generator,
    )  # (P, N, D)
    if run.world > 1:  # Under torchrun every rank draws the whole batch and keeps its share.
        problems = problems[run.rank :: run.world]
        parents = parents[run.rank :: run.world]
        weights = weights[run.rank :: run.world]
    goals = weights[:, 0].tolist() if run.policy.goal_conditioned else None
    run.policy.model.eval()
    batch = sample_rollouts(
        run.policy, task, problems, G=cfg["group_size"], parents=parents, goals=goals
    )
    return batch, weights, [p is not None for p in parents]


def parent_prompts(run, problems):
    """Per problem, the parent programs (with their scores) its prompt shows, or None. Off by
    default: with mutation_share > 0 on the code task, the last groups show parents to mutate, as
    the evolutionary search will."""
    task = run.task
    if not isinstance(task, ParentTask):
        return [None] * len(problems)
    plain = len(problems) - round(run.cfg["mutation_share"] * len(problems))
    shown = [task.scored(q, task.demo_parents(q, run.rng)) for q in problems[plain:]]
    return [None] * plain + shown


def with_fixed_weight_terms(adv, rewards, cfg):
    """The method's advantages (P, G) -> (advantages, scale): plus the format term (format_coef, off
    by default), and the scale the format term and the entropy bonus take, the RMS of the method's
    own advantages, so that a coefficient weighs the same in every method (docs/METHOD.md)."""
    scale = grpo.advantage_rms(adv) if cfg["format_coef"] or cfg["entropy_coef"] else 1.0
    if cfg["format_coef"]:
        term = cfg["format_coef"] * scale * grpo.format_advantages(rewards)  # (P, G)
        adv = adv + (term if adv.dim() == 2 else term[..., None])  # (P, G, m): its rollout's
    return adv, scale


def trained_scalar(run, batch, scalar):
    """The scalar (P, G, m) the advantages see: the fixed scalarization `scalar`, or with
    outcome_reward (off by default) the outcome alone, 1 where an answer solves its problem
    (task.solved) and 0 elsewhere, so a group that never solves gives no advantage at all."""
    if not run.cfg["outcome_reward"]:
        return scalar
    rewards = batch["rewards"]  # (P, G, m, D)
    solved = [solves(run.task, p, rewards[i]) for i, p in enumerate(batch["problems"])]
    return torch.stack(solved).float()  # (P, G, m)


class Outcomes(NamedTuple):
    first: list  # P x G: each rollout's first answer's outcome (task.outcome)
    solved: torch.Tensor  # (P, G): whether that answer reached the problem's best (task.solved)
    counts: torch.Tensor  # (P, G): N(x, a) of those outcomes so far; None without history


def record_outcomes(run, batch, scalar):
    """Every answer's outcome (scalar: the batch's fixed scalarization, (P, G, m)), counted in
    run.history when the training set is finite -> Outcomes, or None when neither a history nor the
    method asks for them."""
    if run.history is None and not ADVANTAGES[run.cfg["algo"]].explores:
        return None
    task = run.task
    outcomes = []  # P x G x m: each answer's outcome
    solved = []  # P x G x m: whether each answer reached the problem's best
    for i, (problem, group) in enumerate(zip(batch["problems"], batch["answers"])):
        outcomes.append([[task.outcome(problem, a) for a in rollout] for rollout in group])
        solved.append(solved_answers(run, problem, batch["rewards"][i], scalar=scalar[i]).tolist())
    counts = None
    if run.history is not None:
        counts = run.history.record(
            batch["problems"], outcomes, solved, count_current=run.cfg["explore_count_current"]
        )
    first = [[rollout[0] for rollout in group] for group in outcomes]
    first_solved = torch.tensor([[rollout[0] for rollout in group] for group in solved])
    return Outcomes(first, first_solved, counts)


def solved_answers(run, problem, rewards, scalar):
    """rewards (G, m, D), scalar (G, m) of one group -> (G, m) bools: task.solved of each answer,
    asked only where it can hold (task.solved can be costly: the maze's exact optimum is a search).
    A solving answer reaches the best scalar any answer can, so it is its group's best; and without
    a history only a group whose answers are all solved matters (the bonus skips it)."""
    solved = torch.zeros(scalar.shape, dtype=torch.bool)
    best = scalar.max()
    candidates = (scalar == best) & (best > 0)
    if run.history is None and not candidates.all():
        return solved
    for g, j in candidates.nonzero().tolist():
        solved[g, j] = bool(run.task.solved(problem, rewards[g, j].numpy()))
    return solved


def policy_update(run, batch, adv, entropy_coef=0.0):
    """`epochs_per_batch` steps of grpo.policy_loss (with what cfg asks: KL, entropy, replay) ->
    (loss, stats, grad norm)."""
    cfg = run.cfg
    model = run.policy.model
    device = run.policy.device
    # Under torchrun each rank's token mean weighs its share of the whole batch's tokens (alone: 1).
    share = distributed.token_share(batch["num_tokens"], run.world, device)
    inputs = (batch["prompt"], batch["prompt_mask"], batch["completion"], batch["completion_mask"])
    ref_logprobs = None  # the warm start's log-probs, for the KL (kl_coef > 0)
    if run.ref_model is not None:
        with torch.no_grad():
            ref_logprobs = engine.score(run.ref_model, *inputs)[0]
    model.train()
    demos = parent_replay_demos(run)  # None unless parent_replay > 0 (off by default)
    settings = grpo.LossSettings(
        clip=cfg["clip"],
        clip_high=cfg["clip_high"] or None,
        kl_coef=cfg["kl_coef"],
        entropy_coef=entropy_coef,
    )
    if cfg["loss_norm"] == "constant":  # Dr. GRPO's: rollouts x the longest completion, any rank
        m = run.policy.answers_per_rollout
        settings.normalizer = len(adv) * max_completion_tokens(run.task, m)
        share = 1.0
    for _ in range(cfg["epochs_per_batch"]):
        logprobs, entropy = run.scorer(*inputs)  # entropy keeps its gradient, for the bonus
        loss, stats = grpo.policy_loss(
            logprobs.float(),
            batch["old_logprobs"],
            adv,
            mask=batch["completion_mask"],
            settings=settings,
            ref_logprobs=ref_logprobs,
            entropy=entropy.float(),
        )
        total = loss * share
        if demos is not None:
            replay = replay_loss(model, demos, cfg["dtype"], device=device)
            total = total + cfg["parent_replay"] * replay
            stats["replay_loss"] = replay.item()
        # The gradient step. A non-finite number stops the run before it reaches a checkpoint.
        if not torch.isfinite(total):
            stop_non_finite(f"non-finite loss ({total.item()})", cfg)
        run.opt.zero_grad(set_to_none=True)
        total.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg["max_grad_norm"])
        if not torch.isfinite(grad_norm):
            stop_non_finite("non-finite gradient norm", cfg)
        run.opt.step()
        if not torch.stack([torch.isfinite(p).all() for p in model.parameters()]).all():
            stop_non_finite("non-finite weights after the optimizer step", cfg)
    return loss.item(), stats, float(grad_norm)


def parent_replay_demos(run):
    """Off by default (parent_replay > 0, the code task): one batch of the warm start's
    demonstrations with parents, whose loss joins every update (PPO-ptx), the same on every rank;
    else None."""
    if not run.cfg["parent_replay"]:
        return None
    device = run.policy.device
    return padded_demos(
        run.task, run.policy.tok, run.cfg, rng=run.rng, device=device, parents_only=True
    )


def stop_non_finite(what, cfg):
    raise FloatingPointError(f"{what} (lr={cfg['lr']}); stopping, the last checkpoint is kept")


# ---- Off by default: DAPO's dynamic sampling (dynamic_sampling > 0) -----------------------------


def dapo_sample(run, advantage):
    """DAPO's dynamic sampling (arXiv 2503.14476) -> (batch, weightings, metrics): rounds of fresh
    prompt groups, keeping those whose advantages are not all zero, until prompts_per_step groups
    have a signal or dynamic_sampling rounds are drawn; flat groups fill what is left. Groups whose
    prompts show parents keep their share (without it the mutation skill went untrained)."""
    cfg = run.cfg
    kept_groups = cfg["prompts_per_step"] // run.world  # the groups this process trains on
    with_parents_wanted = round(cfg["mutation_share"] * kept_groups)
    rounds = []  # (batch, weightings) of each round drawn
    has_signal = []  # per group drawn, across rounds: whether its advantages are not all zero
    shows_parents = []  # per group drawn, across rounds: whether its prompt shows parents
    for _ in range(cfg["dynamic_sampling"]):
        batch, weights, shown = sample_round(run)
        scalar = trained_scalar(run, batch, run.task.scalarize(batch["rewards"]))
        adv = advantage(batch["rewards"], scalar, weights, cfg)
        rounds.append((batch, weights))
        has_signal += (adv.abs().sum(1) > 0).tolist()
        shows_parents += shown
        # Groups with a signal come first, each in the order it was drawn.
        ranked = sorted(range(len(has_signal)), key=lambda g: not has_signal[g])
        plain = [g for g in ranked if not shows_parents[g]]
        with_parents = [g for g in ranked if shows_parents[g]]
        keep = plain[: kept_groups - with_parents_wanted] + with_parents[:with_parents_wanted]
        if len(keep) == kept_groups and all(has_signal[g] for g in keep):
            break
    # A rank short of one kind (torchrun can split the kinds unevenly) fills in with the other.
    leftovers = plain[kept_groups - with_parents_wanted :] + with_parents[with_parents_wanted:]
    keep = sorted(keep + leftovers[: kept_groups - len(keep)])
    batch = baselines.pick_groups(
        [b for b, _ in rounds], keep, run.policy.tok.eos, G=cfg["group_size"]
    )
    weights = torch.cat([w for _, w in rounds])[keep]
    flat_kept = sum(not has_signal[g] for g in keep)
    return batch, weights, {"sampling_rounds": len(rounds), "flat_groups_kept": flat_kept}


# ---- What a step logs (CleanRL-style: the numbers that explain a run; runfiles.log_step writes)


def step_metrics(run, batch, rewards, scalar, weights, adv):
    """Rewards, the set score, advantage stats, entropy, distinct answers. The set score is taken
    under 32 fixed weightings, so runs compare; logging draws nothing from the training stream."""
    task = run.task
    valid = rewards.sum(-1) > 0  # (P, G, m) answers that parsed and were not repeats
    fixed = vpo.sample_weights(1, 32, task.dim, generator=torch.Generator().manual_seed(0))
    fixed = fixed.expand(len(batch["answers"]), -1, -1)
    own = vpo.set_scores(rewards, weights).mean()
    G = run.cfg["group_size"]
    distinct = [len({task.answer_key(row[0]) for row in group}) / G for group in batch["answers"]]
    per_component = [0.0] * task.dim
    if valid.any():
        per_component = [round(float(x), 4) for x in rewards[valid].mean(0)]
    mask = batch["completion_mask"].float()
    return {
        "reward_scalar": float(scalar[valid].mean()) if valid.any() else 0.0,
        "reward_per_component": per_component,
        "set_score": float(vpo.set_scores(rewards, fixed).mean()),
        **({"set_score_train": float(own)} if run.cfg["algo"] in SET_ALGOS else {}),
        "valid_answers": float(valid.float().mean()),
        "adv_mean": float(adv.mean()),
        "adv_std": float(adv.std()),
        "zero_std_groups": float((adv.abs().flatten(1).sum(1) == 0).float().mean()),
        "entropy": float((batch["entropy"] * mask).sum() / mask.sum()),
        "distinct_first_answers": float(np.mean(distinct)),
    }


def evaluate_heldout(run, files, step):
    """evaluate.heldout_look on rank 0 (the same problems and draws every time) ->
    metrics.jsonl."""
    if run.rank:
        return {"heldout_scalar": float("nan")}
    ev = heldout_look(run.policy, run.task, run.cfg["eval_problems"])
    files.write("metrics.jsonl", {"kind": "eval", "step": step, **ev})
    files.log(
        f"eval @ {step}: held-out scalar {ev['heldout_scalar']:.3f}, best-in-rollout "
        f"{ev['heldout_best_in_rollout']:.3f}, valid {ev['heldout_valid']:.2f}"
    )
    return ev


# ---- The training loop ---------------------------------------------------------------------------


def make_run(cfg, task, policy, rank=0, world=1):
    """The optimizer, scorer, frozen reference (for the KL) and random streams of a run; bench.py
    times this."""
    model = policy.model
    opt = torch.optim.AdamW(
        model.parameters(),
        lr=cfg["lr"],
        weight_decay=cfg["weight_decay"],
        betas=(0.9, 0.99),
        fused=policy.device.startswith("cuda"),  # one kernel on GPUs
    )
    scorer = distributed.scorer(model, world, cfg["compile"], dtype=cfg["dtype"])
    ref_model = None  # the warm start, frozen, for the KL
    if cfg["kl_coef"] > 0:
        ref_model = copy.deepcopy(model).eval().requires_grad_(False)
    rng = random.Random(cfg["seed"])
    train_set = None  # fresh problems every step
    history = None
    if cfg["train_problems"] and cfg["train_screen_answers"]:
        # the warm start as it stands here (a resumed run's weights load later): the same set again
        seed = cfg["seed"] + exploration.SCREEN_SEED
        solved = exploration.solved_within(policy, task, cfg["train_screen_answers"], seed=seed)
        train_set = exploration.ScreenedTrainingSet(
            task,
            cfg["train_problems"],
            rng,
            solved=solved,
            solvable_share=cfg["train_solvable_share"],
        )
    elif cfg["train_problems"]:
        train_set = TrainingSet(task, cfg["train_problems"], rng)
    if train_set is not None:
        history = exploration.OutcomeHistory(train_set.problems)
    return Run(
        cfg,
        task,
        policy,
        opt=opt,
        scorer=scorer,
        ref_model=ref_model,
        rng=rng,
        rank=rank,
        world=world,
        train_set=train_set,
        history=history,
    )


def train(cfg):
    """Warm start, then cfg["steps"] RL steps -> the run's folder (runfiles.RunFiles: folder,
    resuming, logs)."""
    t_begin = time.time()  # the closing line counts the warm start too
    device, rank, world = distributed.start_process(cfg)
    if world > 1 and cfg["train_problems"]:
        raise ConfigError(
            "train_problems > 0 runs in one process: each rank would count only its own share of "
            "the outcomes"
        )
    files = runfiles.RunFiles(cfg, lead=rank == 0)
    task = make_task(cfg["task"], **cfg["task_options"])
    tok = Tokenizer(cfg["tokenizer"])
    files.log(
        f"task {cfg['task']} (D={task.dim}), algo {cfg['algo']} (m={answers_per_rollout(cfg)}), "
        f"device {device}, threads {torch.get_num_threads()}, out_dir {files.out_dir}"
    )
    # rank 0 trains and caches the warm start; the others load it
    cached = os.path.exists(cfg["warmstart_from"] or warmstart_path(cfg))
    with distributed.lead_first(rank, world):
        model, warm_path = warm_start(cfg, task, tok, device=device, log=files.log)
    files.log(f"model: {model.num_params() / 1e6:.2f}M parameters")
    policy = Policy.from_config(
        model, tok, cfg, device=device, answers_per_rollout=answers_per_rollout(cfg)
    )
    run = make_run(cfg, task, policy, rank=rank, world=world)
    last_eval = None  # the held-out look at the last step (None: a resumed run had it already)
    if not files.resume:
        last_eval = evaluate_heldout(run, files, 0)
    first_step = runfiles.restore(run, files)
    for step in range(first_step, cfg["steps"] + 1):
        metrics, batch = rl_step(run)
        runfiles.log_step(files, run, step, metrics=metrics, batch=batch)
        if step == cfg["steps"] or (cfg["eval_every"] and step % cfg["eval_every"] == 0):
            last_eval = evaluate_heldout(run, files, step)
        if cfg["ckpt_every"] and step % cfg["ckpt_every"] == 0:
            files.save("ckpt.pt", runfiles.run_state(run, step))
    files.save("final.pt", {**runfiles.run_state(run, cfg["steps"]), "warm_start": warm_path})
    if world > 1:
        in_sync, checksum = distributed.replicas_in_sync(model, world, device)
        files.log(f"ranks in sync: {in_sync} (parameter checksum {checksum:.6f})")
    warm = "loaded from its cache" if cached else "trained here, included"
    heldout = f"{last_eval['heldout_scalar']:.3f}" if last_eval else "in metrics.jsonl"
    files.log(
        f"trained in {time.time() - t_begin:.0f}s (the warm start {warm}): held-out scalar "
        f"{heldout}"
    )
    files.close()
    distributed.finish(world)
    return files.out_dir


def main(argv=None):
    description = __doc__.split("\n\n")[0].strip() + " Many runs compared: python lab/experiment.py"
    parser = config.settings_parser(description, DEFAULTS, [(__file__, "DEFAULTS")])
    args = parser.parse_args(argv)
    try:
        t0 = time.time()
        out_dir = train(resolve_config(args.config, args.set))
        if os.environ.get("RANK", "0") == "0":  # under torchrun, one process reports
            # held-out best@k against the warm start's, and run.png
            figure = report_run(out_dir)
            print(f"done in {time.time() - t0:.0f}s, the run and this evaluation; see {figure}")
    except KeyboardInterrupt:  # Ctrl-C: no traceback; the checkpoints written so far stay
        print(
            "\ninterrupted: the run's checkpoints so far stay in its out_dir; the same command "
            "with --set resume=true continues from the last one",
            file=sys.stderr,
        )
        sys.exit(130)
    except ONE_LINE_ERRORS as e:  # a bad setting, a missing file, a diverged run; a bug raises
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
