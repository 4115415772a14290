"""
Train a small GPT policy with GRPO, VPO or one of the baselines, on a vector-reward task.

    python train.py --config configs/persona.yaml --set algo=vpo seed=1
    python train.py                      # no --config: DEFAULTS alone (persona, VPO)

Read top to bottom: the hyperparameters (every one visible below, with a comment), the algorithm
table, one RL step, DAPO's dynamic sampling (an option, off by default), the training loop.

A run starts from the supervised warm start (warmstart.py: the task's demonstrations in every
format, cached, so GRPO and VPO runs of the same task and seed start from the SAME weights). Each
RL step then samples `prompts_per_step` training problems, G rollouts each, scores every answer
with the task's reward vector, turns the rewards into one advantage per rollout with the chosen
algorithm (ADVANTAGES below), and takes `epochs_per_batch` clipped policy-gradient steps.
With `parent_replay` > 0 (code) each of those steps also pulls the policy towards the warm start's
demonstrations of the search's parent format, which RL's plain prompts would otherwise erase.

The logged loss reads ~0 while its gradient is not zero (grpo.py says why): read reward, grad norm
and clip fraction instead.

What we simplified, and why:
- No value model, no GAE (group baselines need none).
- Sampling and training share one model in one process; no separate inference server.
- The "old" log-probs are those recorded while sampling (at temperature 1 without top-k/top-p
  they are exactly the policy's); with other sampling settings the ratio is off-policy by design.
- Problems are generated each step from a seeded RNG rather than read from a dataset.
Machinery a student can skip lives in config.py (checking settings), warmstart.py (the supervised
warm start), checkpoint.py (saving, loading, resuming) and distributed.py (torchrun); the fast
sampler and scorer in engine.py.
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # OpenMP busy-waiting made CPU runs far slower

import argparse
import copy
import random
import sys
import time
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

import baselines
import checkpoint
import config
import distributed
import engine
import grpo
import vpo
from config import ConfigError, make_task
from model import GPT, Tokenizer
from rollouts import max_completion_tokens, sample_rollouts
from warmstart import autocast, demo_nll, padded_demos, warm_start

# ----------------------------------------------------------------------------------------------
# Hyperparameters: what every run uses unless its task file (configs/<task>.yaml) changes the key.
# A config file and --set key=value may change them, never add to them.
DEFAULTS = dict(
    # what to train
    task="persona",            # persona | persona_collinear | code
    task_options={},           # constructor arguments of the task (see rewards.py)
    algo="vpo",                # a name in ADVANTAGES below
    seed=0,
    # model
    model="cpu",               # size preset from model.PRESETS
    block_size=192,            # longest prompt + completion, in tokens
    tokenizer="bytes",         # bytes | numbers (bytes + one token per 2-digit number; both offline) | a tiktoken name
    # warm start (supervised, warmstart.py)
    sft_steps=300,
    sft_batch=64,
    sft_lr=3e-3,
    sft_parent_fraction=0.15,  # code task: share of demonstrations whose prompt carries parents
    sft_single_first=0.3,      # share of the warm start spent on the plain 1-answer format first
    # RL
    steps=250,
    prompts_per_step=8,        # P: prompt groups per step
    group_size=8,              # G: rollouts per prompt
    answers_per_rollout=3,     # m: answers in one rollout for set methods (vpo, multi_rlvr, vpo_loo)
    num_weights=100,           # N: weightings per group for VPO's score
    alpha=1.0,                 # Dirichlet concentration of the weightings
    weight_sampler="dirichlet",  # dirichlet | sobol
    lr=1e-3,
    weight_decay=0.0,
    clip=0.2,                  # PPO ratio clip
    kl_coef=0.0,               # k3 KL to the warm-start policy; 0 skips the reference forward
    epochs_per_batch=1,        # policy updates per batch of rollouts (ratio != 1 after the first)
    max_grad_norm=1.0,
    mutation_share=0.0,        # code task: share of prompt groups that show parent programs to mutate
    parent_replay=0.0,         # code task: weight of the warm start's loss on demonstrations WITH parents (the
                               # search's prompt) in every RL update, against forgetting (PPO-ptx; replay_loss); 0: off
    max_k=4,                   # k of the max_at_k baseline (best of k samples)
    # GRPO's own fixes against collapse (grpo.py), for every algorithm, off by default
    scale_rewards="group",     # the std an advantage divides by: group | batch (one for the whole batch, TRL's
                               # option) | none (Dr. GRPO); only group where a method divides by no group std
    loss_norm="tokens",        # tokens: the loss is the batch's token mean; constant: token sum / (rollouts x
                               # longest possible completion), Dr. GRPO's other half
    clip_high=0.0,             # upper ratio clip 1 + clip_high (DAPO: 0.28); 0: the same as clip
    entropy_coef=0.0,          # bonus for the policy's token entropy, with its gradient (x grpo.advantage_scale)
    format_coef=0.0,           # weight of a format reward's advantage (grpo.format_advantages: the share of a
                               # rollout's answers that score at all), added to every algorithm's, times the
                               # RMS of that algorithm's advantages (grpo.advantage_scale); 0: off
    dynamic_sampling=0,        # DAPO: at most this many rounds of P fresh groups, until P groups' advantages
                               # are not all zero; flat groups fill in only if the rounds run out (0: off)
    temperature=1.0,
    top_k=0,                   # 0: off
    top_p=1.0,                 # 1.0: off
    # logging and evaluation
    eval_every=25,             # steps between held-out evaluations (0: only at the end)
    eval_problems=32,          # held-out problems per evaluation
    ckpt_every=25,
    out_dir="",                # "" -> out/<task>-<algo>-s<seed>
    warmstart_dir="out/warmstart",
    warmstart_from="",         # a warm-start checkpoint to start from instead of training/caching one
    device="auto",             # auto | cpu | cuda | mps
    threads=1,                 # torch CPU threads; measured: 2 threads were no faster than 1 here
    dtype="float32",           # float32 | bfloat16 (autocast; CUDA or CPU)
    compile=False,             # torch.compile the scoring forward (measured on CPU: slower; for GPUs)
    cuda_graph=True,           # on CUDA, sample with engine.generate_static captured as a CUDA graph, one launch
                               # per token (measured on an H100: code VPO RL step 0.45 -> 0.15 s); no effect elsewhere
    peak_tflops=0.0,           # the device's peak, to log model-FLOPs utilisation (0: not logged)
    overwrite=False,           # allow writing into an out_dir that already holds a run
    resume=False,              # continue the unfinished run in out_dir from its last checkpoint
    quiet=False,
)
# Evaluation and search (search.py, and the lab's pools and searches): how a finished run is measured.
# They never change what a run trains (checkpoint.EVAL_KEYS: left out of the run's folder and result keys).
EVALUATION = dict(
    pool_n=30,                 # answers per held-out problem; k counts answers, up to pool_n
    pool_problems=40,          # held-out problems per task and seed (the same for every method)
    heldout_weightings=64,     # weightings for w-best@k, from a seed no training run uses
    evo_problems=64,           # searches per policy (the paper's case study: 32; 64 narrows the interval)
    evo_min_plausible=2000,    # a searched problem leaves >= this many plausible programs: 10x the budget, so a
                               # same-budget sampler cannot stumble on the answer
    evo_screen=112,            # candidate search problems the lab screens, keeping those no checkpoint's pool solves
    evo_budget=200,            # candidates evaluated per search (the paper: 200 iterations of one program)
    evo_islands=5,             # OpenEvolve's default
    evo_migrate_every=50,      # candidates of a search between ring migrations
    evo_capacity=10,           # programs an island keeps, one per pass pattern, best first
    evo_explore=0.3,           # chance a parent is any program of its island instead of the best
    evo_temperature=0.7,       # sampling temperature of the search and of its control (OpenEvolve's)
    evo_top_p=0.95,            # nucleus sampling, likewise (1.0: off)
    evo_children_per_call=1,   # children per call: 1 (OpenEvolve's iteration); a set policy also runs at m
    evo_positions_per_call=60_000,  # memory cap: rows x tokens per sampler call
)
DEFAULTS.update(EVALUATION)
EVAL_KEYS = tuple(EVALUATION)  # = checkpoint.EVAL_KEYS (a test holds them equal)

# ----------------------------------------------------------------------------------------------
# Algorithms: name -> (advantage, whether its rollouts hold a SET of m answers). An advantage gets
# the batch's reward vectors r (P, G, m, D), their fixed scalarisation s (P, G, m), the group
# weightings w (P, N, D) and the config, and returns one advantage per rollout (P, G).
# To try a new idea, write the function (in its own file, like baselines.py) and add a line here.
ADVANTAGES = {
    "grpo": (lambda r, s, w, cfg: grpo.grpo_advantages(s[:, :, 0], scale=cfg["scale_rewards"]), False),
    "vpo": (lambda r, s, w, cfg: vpo.vpo_advantages(r, w, scale=cfg["scale_rewards"]), True),
    # the paper's ablations: VPO's format without its weightings, its weightings without the format
    "multi_rlvr": (lambda r, s, w, cfg: grpo.grpo_advantages(vpo.multi_rlvr_scores(s), scale=cfg["scale_rewards"]),
                   True),
    "random_weights": (lambda r, s, w, cfg: grpo.grpo_advantages(vpo.random_weight_scores(r[:, :, 0], w[:, 0]),
                                                                 scale=cfg["scale_rewards"]), False),
    "goal_conditioned": (lambda r, s, w, cfg: grpo.grpo_advantages(vpo.random_weight_scores(r[:, :, 0], w[:, 0]),
                                                                   scale=cfg["scale_rewards"]),
                         False),  # the same score; the weighting is also written into the prompt
    "vpo_loo": (lambda r, s, w, cfg: vpo.leave_one_out_advantages(vpo.set_scores(r, w)), True),  # an exercise
    # the field's baselines (baselines.py); scale_rewards other than group is refused where no group std
    # is divided (config.py)
    "max_at_k": (lambda r, s, w, cfg: baselines.max_at_k_advantages(s[:, :, 0], cfg["max_k"],
                                                                    scale=cfg["scale_rewards"]), False),
    "gdpo": (lambda r, s, w, cfg: baselines.gdpo_advantages(r[:, :, 0]), False),
    "maxrl": (lambda r, s, w, cfg: baselines.maxrl_advantages(s[:, :, 0]), False),
    "rloo": (lambda r, s, w, cfg: baselines.rloo_advantages(s[:, :, 0]), False),
}
SET_ALGOS = {name for name, (_, uses_sets) in ADVANTAGES.items() if uses_sets}


def answers_per_rollout(cfg):
    return cfg["answers_per_rollout"] if cfg["algo"] in SET_ALGOS else 1


def resolve_config(path=None, overrides=(), base=None):
    """DEFAULTS <- YAML file <- key=value overrides, checked (config.py); ConfigError in one line."""
    return config.resolve(DEFAULTS, ADVANTAGES, path, overrides, base)


# ----------------------------------------------------------------------------------------------
# One RL step

@dataclass
class Run:
    """What one RL step needs: the policy, its optimizer, the task and the random streams."""
    cfg: dict
    task: object
    tok: Tokenizer
    model: GPT
    opt: torch.optim.Optimizer
    scorer: torch.nn.Module      # engine.score as a module (distributed.Scorer), DDP-wrapped under torchrun
    ref_model: GPT = None        # the frozen warm start, for the KL (kl_coef > 0)
    rng: random.Random = None    # which problems
    generator: torch.Generator = None  # on `device`: the tokens sampled and the weightings drawn
    device: str = "cpu"
    rank: int = 0
    world: int = 1

    @property
    def m(self):
        return answers_per_rollout(self.cfg)


def rl_step(run):
    """One step: sample rollouts -> reward vectors -> advantages -> clipped policy loss -> update.
    Returns (metrics, batch)."""
    cfg = run.cfg
    t0 = time.time()
    if cfg["dynamic_sampling"]:  # DAPO: groups whose rollouts all score alike teach nothing; draw others
        batch, weights, sampling = sample_spread_groups(run)
    else:
        batch, weights, _ = sample_round(run)
        sampling = {}
    t_sample = time.time() - t0

    rewards = batch["rewards"]  # (P, G, m, D)
    scalar = run.task.scalarize(rewards)  # (P, G, m): the fixed scalarisation of every answer
    # on the groups trained, never on groups DAPO dropped (gdpo would normalise over groups not there)
    adv = ADVANTAGES[cfg["algo"]][0](rewards, scalar, weights, cfg)  # (P, G)
    # the fixed-weight terms are sized to this method's advantages, so a coefficient means the same in every method
    scale = grpo.advantage_scale(adv) if cfg["format_coef"] or cfg["entropy_coef"] else 1.0
    if cfg["format_coef"]:
        adv = adv + cfg["format_coef"] * scale * grpo.format_advantages(rewards)
    loss, stats, grad_norm = policy_update(run, batch, adv.reshape(-1).to(run.device), cfg["entropy_coef"] * scale)
    metrics = step_metrics(run, batch, rewards, scalar, weights, adv)
    metrics = {"loss": loss, **stats, "grad_norm": grad_norm, **metrics, **sampling, "adv_scale": scale,
               "tokens": batch["num_tokens"],
               "sample_s": t_sample, "step_s": time.time() - t0}
    return distributed.reduce_metrics(metrics, run.world, run.device), batch


def sample_round(run):
    """P fresh prompt groups, sampled and scored -> (batch, weightings (P, N, D), which groups show parents)."""
    cfg, task, P = run.cfg, run.task, run.cfg["prompts_per_step"]
    problems = task.problems("train", P, run.rng)
    # the last groups show parent programs to mutate, as the evolutionary search will (code task)
    mutating = round(cfg["mutation_share"] * P)
    parents = [None] * (P - mutating) + [task.scored(q, task.demo_parents(q, run.rng)) for q in problems[P - mutating:]]
    # N weightings per group for the set methods, one for the single-answer weighted baselines
    weights = vpo.sample_weights(P, cfg["num_weights"] if cfg["algo"] in SET_ALGOS else 1, task.dim,
                                 cfg["alpha"], cfg["weight_sampler"], run.generator)  # (P, N, D)
    # under torchrun every rank draws the same global batch and keeps its share of the groups
    problems, parents, weights = (x[run.rank::run.world] for x in (problems, parents, weights))
    goals = weights[:, 0].tolist() if cfg["algo"] == "goal_conditioned" else None
    run.model.eval()
    batch = sample_rollouts(run.model, run.tok, task, problems, run.m, cfg["group_size"], cfg, run.generator,
                            run.device, parents=parents, goals=goals)
    return batch, weights, [p is not None for p in parents]


def policy_update(run, batch, adv, entropy_coef=0.0):
    """`epochs_per_batch` steps of the clipped policy loss (grpo.policy_loss: a token mean, or Dr. GRPO's
    constant normaliser), with a KL to the warm start if kl_coef > 0 and an entropy bonus of weight
    `entropy_coef` -> (loss, loss stats, grad norm) of the last epoch."""
    cfg = run.cfg
    inputs = (batch["prompt"], batch["prompt_mask"], batch["completion"], batch["completion_mask"])
    ref_logprobs = None
    if run.ref_model is not None:
        with torch.no_grad():
            ref_logprobs, _ = engine.score(run.ref_model, *inputs)
    run.model.train()
    # the loss averages over the GLOBAL batch's tokens: DDP averages gradients over ranks, so each
    # rank's token mean is reweighted by its share of the tokens (1.0 in one process)
    share = distributed.token_share(batch["num_tokens"], run.world, run.device)
    normaliser = None
    demos = None  # the replay's batch: warm-start demonstrations whose prompts show parents (the search's format)
    if cfg["parent_replay"]:  # drawn from the run's problem stream
        demos = padded_demos(run.task, run.tok, cfg, run.rng, run.device, parents_only=True)
    if cfg["loss_norm"] == "constant":  # Dr. GRPO: rollouts x the longest completion sampling allows;
        # a constant per rank, so DDP's mean over ranks is the global constant and no reweighting is needed
        normaliser, share = len(adv) * max_completion_tokens(run.task, run.m), 1.0
    for _ in range(cfg["epochs_per_batch"]):
        with autocast(cfg, run.device):
            logprobs, entropy = run.scorer(*inputs)  # entropy keeps its gradient, for the entropy bonus
        loss, stats = grpo.policy_loss(logprobs.float(), batch["old_logprobs"], adv, batch["completion_mask"],
                                       cfg["clip"], ref_logprobs, cfg["kl_coef"], cfg["clip_high"] or None,
                                       entropy.float(), entropy_coef, normaliser=normaliser)
        total = loss * share
        if demos is not None:  # the same demonstrations on every rank: DDP's mean over ranks leaves it as is
            replay = replay_loss(run, demos)
            total, stats = total + cfg["parent_replay"] * replay, {**stats, "replay_loss": replay.item()}
        grad_norm = guarded_step(run, total)
    return loss.item(), stats, grad_norm


def replay_loss(run, demos):
    """The warm start's cross-entropy on `demos`' completion tokens, under the current policy. Why: RL
    trains on plain prompts only (as the paper does), and a model this small forgets what no RL prompt
    asks for (docs/RESULTS.md: children written from parents went invalid). Through the unwrapped
    model: under torchrun its gradient adds to the DDP forward's in the same backward."""
    prompt, prompt_mask, completion, completion_mask = demos
    with autocast(run.cfg, run.device):
        logp, _ = engine.score(run.model, prompt, prompt_mask, completion, completion_mask, share_prompt=False)
    return demo_nll(logp.float(), completion_mask)


def guarded_step(run, loss):
    """backward, clip, optimizer step; stop the run at the first non-finite number, before it
    reaches a checkpoint (the last one is kept). Every divergence check of the step is here."""
    def stop(what):
        raise FloatingPointError(f"{what} (lr={run.cfg['lr']}); stopping, the last checkpoint is kept")
    if not torch.isfinite(loss):
        stop(f"non-finite loss ({loss.item()})")
    run.opt.zero_grad(set_to_none=True)
    loss.backward()
    grad_norm = torch.nn.utils.clip_grad_norm_(run.model.parameters(), run.cfg["max_grad_norm"])
    if not torch.isfinite(grad_norm):
        stop("non-finite gradient norm")
    run.opt.step()
    if not torch.stack([torch.isfinite(p).all() for p in run.model.parameters()]).all():  # one sync
        stop("non-finite weights after the optimizer step")
    return float(grad_norm)


def step_metrics(run, batch, rewards, scalar, weights, adv):
    """What explains a step (CleanRL-style): rewards, the set score, advantage stats, entropy, diversity."""
    task, P, G = run.task, len(batch["answers"]), run.cfg["group_size"]
    valid = rewards.sum(-1) > 0  # (P, G, m) answers that parsed and were not repeats
    if run.cfg["algo"] not in SET_ALGOS:  # the same 32 weightings at every step, from their own generator:
        # logging must never draw from the training stream (removing a log line would change the run)
        weights = vpo.sample_weights(1, 32, task.dim, generator=torch.Generator().manual_seed(0)).expand(P, -1, -1)
    set_score = vpo.set_scores(rewards, weights)
    distinct = np.mean([len({task.answer_key(row[0]) for row in group}) / G for group in batch["answers"]])
    mask = batch["completion_mask"].float()
    return {
        "reward_scalar": float(scalar[valid].mean()) if valid.any() else 0.0,
        "reward_per_component": [round(float(x), 4) for x in rewards.reshape(-1, task.dim)[valid.reshape(-1)].mean(0)]
        if valid.any() else [0.0] * task.dim,
        "set_score": float(set_score.mean()),
        "valid_answers": float(valid.float().mean()),
        "adv_mean": float(adv.mean()), "adv_std": float(adv.std()),
        "zero_std_groups": float((adv.abs().sum(1) == 0).float().mean()),
        "entropy": float((batch["entropy"] * mask).sum() / mask.sum()),
        "distinct_first_answers": float(distinct),
    }


# ----------------------------------------------------------------------------------------------
# DAPO's dynamic sampling (dynamic_sampling > 0; off by default)

def sample_spread_groups(run):
    """DAPO's dynamic sampling -> (batch, weightings, sampling metrics): keep the groups whose advantage
    has spread, refill from the next round, until P have spread or dynamic_sampling rounds are drawn;
    then flat groups fill the gaps, the earliest first. Groups with parents keep their configured share,
    as in every step (without it the search's mutation skill went untrained: measured, every child it
    wrote was invalid). Under torchrun each rank draws again on its own: the ranks' problem streams part."""
    cfg, P = run.cfg, run.cfg["prompts_per_step"] // run.world
    parents_wanted = round(cfg["mutation_share"] * P)  # of the P groups kept, those showing parents
    rounds, spread, shows_parents, keep = [], [], [], []  # spread, shows_parents: per group, across rounds
    while len(rounds) < cfg["dynamic_sampling"] and not (len(keep) == P and all(spread[g] for g in keep)):
        batch, weights, shown = sample_round(run)
        adv = ADVANTAGES[cfg["algo"]][0](batch["rewards"], run.task.scalarize(batch["rewards"]), weights, cfg)
        rounds.append((batch, weights))
        spread += (adv.abs().sum(1) > 0).tolist()
        shows_parents += shown
        ranked = sorted(range(len(spread)), key=lambda g: not spread[g])  # spread first, each in the order drawn
        plain, mutating = [g for g in ranked if not shows_parents[g]], [g for g in ranked if shows_parents[g]]
        keep = plain[:P - parents_wanted] + mutating[:parents_wanted]
    # a rank short of one kind (torchrun can split the kinds unevenly): the other kind fills in
    keep = sorted(keep + (plain[P - parents_wanted:] + mutating[parents_wanted:])[:P - len(keep)])
    batch = pick_groups([b for b, _ in rounds], keep, run.tok.eos, cfg["group_size"])
    weights = torch.cat([w for _, w in rounds])[keep]
    return batch, weights, {"sampling_rounds": len(rounds), "flat_groups_kept": sum(not spread[g] for g in keep)}


def pick_groups(batches, groups, pad_id, G):
    """Batches of several sampling rounds -> one batch of the prompt groups `groups` (numbered across
    the rounds). Prompts stay left-padded and completions right-padded (with pad_id and zero
    log-probs), to the widest round: padding is masked, so no score changes."""
    rows = torch.tensor([g * G + i for g in groups for i in range(G)], device=batches[0]["completion"].device)

    def cat(key, value, left=False):
        width = max(b[key].size(1) for b in batches)
        return torch.cat([F.pad(b[key], (width - b[key].size(1), 0) if left else (0, width - b[key].size(1)),
                                value=value) for b in batches])[rows]
    problems, answers = [p for b in batches for p in b["problems"]], [a for b in batches for a in b["answers"]]
    completion_mask = cat("completion_mask", False)
    return dict(problems=[problems[g] for g in groups], answers=[answers[g] for g in groups],
                prompt=cat("prompt", pad_id, left=True), prompt_mask=cat("prompt_mask", False, left=True),
                completion=cat("completion", pad_id), completion_mask=completion_mask,
                old_logprobs=cat("old_logprobs", 0.0), entropy=cat("entropy", 0.0),
                rewards=torch.cat([b["rewards"] for b in batches])[groups], num_tokens=int(completion_mask.sum()))


# ----------------------------------------------------------------------------------------------
# The training loop

def start_process(cfg):
    """Device, torchrun rank and world, threads and seeds -> (device, rank, world)."""
    device = config.pick_device(cfg["device"])  # before any folder is made: a bad device writes nothing
    rank, world, device = distributed.init(device)
    if device.startswith("cuda"):  # TF32 matmuls: ~free speed on Ampere and later, fine for RL
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    if cfg["prompts_per_step"] % world:
        raise ConfigError(f"prompts_per_step={cfg['prompts_per_step']} must be a multiple of the {world} ranks")
    if cfg["threads"]:
        torch.set_num_threads(cfg["threads"])
    random.seed(cfg["seed"])
    np.random.seed(cfg["seed"])
    torch.manual_seed(cfg["seed"])
    return device, rank, world


def make_run(cfg, task, tok, model, device, rank=0, world=1):
    """The policy's optimizer, its scorer (DDP-wrapped under torchrun), the frozen reference for the
    KL, and the two random streams, seeded from cfg["seed"]. bench.py times exactly this."""
    opt = torch.optim.AdamW(model.parameters(), lr=cfg["lr"], weight_decay=cfg["weight_decay"],
                            betas=(0.9, 0.99), fused=device.startswith("cuda"))  # fused: one kernel on GPUs
    scorer = distributed.wrap(distributed.Scorer(model), world)
    if cfg["compile"]:
        scorer = torch.compile(scorer)
    ref_model = copy.deepcopy(model).eval().requires_grad_(False) if cfg["kl_coef"] > 0 else None  # the warm start
    return Run(cfg, task, tok, model, opt, scorer, ref_model, random.Random(cfg["seed"]),
               torch.Generator(device=device).manual_seed(cfg["seed"]), device, rank, world)


def evaluate_heldout(run, files, step, seed=12345):
    """A quick held-out look, written to metrics.jsonl and the log: two rollouts per problem, mean fixed
    scalar reward. The same problems (and random numbers) at every evaluation and in every run. Rank 0
    only (no collective calls inside)."""
    if run.rank:
        return {"heldout_scalar": float("nan")}
    problems = run.task.problems("heldout", run.cfg["eval_problems"], random.Random(seed))
    run.model.eval()
    batch = sample_rollouts(run.model, run.tok, run.task, problems, run.m, 2, run.cfg,
                            torch.Generator(device=run.device).manual_seed(seed), run.device)
    valid = batch["rewards"].sum(-1) > 0  # (P, 2, m)
    scalar = run.task.scalarize(batch["rewards"])
    ev = {"heldout_scalar": float(scalar[valid].mean()) if valid.any() else 0.0,
          "heldout_best_in_rollout": float(scalar.max(-1).values.mean()), "heldout_valid": float(valid.float().mean())}
    files.write("metrics.jsonl", {"kind": "eval", "step": step, **ev})
    files.log(f"eval @ {step}: held-out scalar {ev['heldout_scalar']:.3f}, best-in-rollout "
              f"{ev['heldout_best_in_rollout']:.3f}, valid {ev['heldout_valid']:.2f}")
    return ev


def train(cfg):
    """Warm start, then cfg["steps"] RL steps -> the run's folder (checkpoint.RunFiles keeps the
    folder, resuming and the logs)."""
    device, rank, world = start_process(cfg)
    files = checkpoint.RunFiles(cfg, lead=rank == 0)
    task, tok = make_task(cfg["task"], **cfg["task_options"]), Tokenizer(cfg["tokenizer"])
    files.log(f"task {cfg['task']} (D={task.dim}), algo {cfg['algo']} (m={answers_per_rollout(cfg)}), "
              f"device {device}, threads {torch.get_num_threads()}, out_dir {files.out_dir}")
    with distributed.lead_first(rank, world):  # rank 0 trains and caches the warm start; the others load it
        model, warm_path = warm_start(cfg, task, tok, device, files.log)
    files.log(f"model: {model.num_params() / 1e6:.2f}M parameters")
    run = make_run(cfg, task, tok, model, device, rank, world)
    if not files.resume:
        evaluate_heldout(run, files, 0)
    for step in range(files.restore(run), cfg["steps"] + 1):
        metrics, batch = rl_step(run)
        files.log_step(run, step, metrics, batch)
        if cfg["eval_every"] and step % cfg["eval_every"] == 0 and step != cfg["steps"]:
            evaluate_heldout(run, files, step)
        if cfg["ckpt_every"] and step % cfg["ckpt_every"] == 0:
            files.save("ckpt.pt", checkpoint.run_state(run, step))
    last_eval = evaluate_heldout(run, files, cfg["steps"])
    if world > 1:
        files.log("ranks in sync: %s (parameter checksum %.6f)" % distributed.replicas_in_sync(model, world, device))
    files.save("final.pt", {**checkpoint.run_state(run, cfg["steps"]), "warm_start": warm_path})
    files.log(f"done in {time.time() - files.t_start:.0f}s: held-out scalar {last_eval['heldout_scalar']:.3f}")
    files.close()
    distributed.finish(world)
    return files.out_dir


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].strip(),
                                     epilog="Many runs compared (the default experiment): python lab/experiment.py")
    parser.add_argument("--config", help="YAML file of overrides to the defaults at the top of train.py")
    parser.add_argument("--set", nargs="*", action="extend", default=[], metavar="KEY=VALUE",
                        help="override config keys (repeat --set as often as you like: every item counts)")
    args = parser.parse_args(argv)
    try:
        train(resolve_config(args.config, args.set))
    except KeyboardInterrupt:  # Ctrl-C: no traceback; the checkpoints written so far stay
        print("\ninterrupted: the run's checkpoints so far stay in its out_dir; the same command with "
              "--set resume=true continues from the last one", file=sys.stderr)
        sys.exit(130)
    except (ConfigError, FileNotFoundError, RuntimeError, FloatingPointError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)  # ValueError: e.g. a prompt longer than block_size
        sys.exit(2)


if __name__ == "__main__":
    main()
