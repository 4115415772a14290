"""
Train a small GPT policy with GRPO, VPO or one of the baselines, on a vector-reward task.

    python train.py --config configs/persona.yaml --set algo=vpo seed=1
    python train.py                      # no --config: DEFAULTS alone (persona, VPO)
    python train.py --help               # every setting, its default and why

Read top to bottom: the settings, the algorithm table, one RL step, the loop. A run starts from the
supervised warm start (warmstart.py: GRPO and VPO runs of one task and seed start from the SAME
weights). Each RL step samples `prompts_per_step` problems, G rollouts each, scores every answer
with the task's reward vector, turns the rewards into one advantage per rollout (ADVANTAGES) and
takes `epochs_per_batch` clipped policy-gradient steps. The logged loss reads ~0 (grpo.py says why).

What we simplified, and why:
- No value model, no GAE (group baselines need none); one model in one process, no inference server.
- The "old" log-probs are those recorded while sampling (exactly the policy's at temperature 1
  without top-k/top-p; otherwise the ratio is off-policy by design).
- Problems are generated each step from a seeded RNG rather than read from a dataset.
Machinery a student can skip: config.py, warmstart.py, runfiles.py, distributed.py, engine.py.
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # OpenMP busy-waiting made CPU runs far slower

import copy
import random
import sys
import time
from dataclasses import dataclass

import numpy as np
import torch

import baselines
import config
import distributed
import engine
import grpo
import runfiles
import search
import vpo
from config import EVALUATION, ConfigError, make_task
from model import GPT, Tokenizer, autocast
from rollouts import max_completion_tokens, rollout_prompt, sample_rollouts
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
    lr=1e-3,  # AdamW's learning rate
    weight_decay=0.0,  # AdamW's weight decay
    clip=0.2,  # PPO ratio clip: the ratio's range is [1 - clip, 1 + clip]
    kl_coef=0.0,  # k3 KL to the warm-start policy; 0 skips the reference forward
    epochs_per_batch=1,  # policy updates per batch of rollouts (ratio != 1 after the first)
    max_grad_norm=1.0,  # gradient norm clip of every update
    mutation_share=0.0,  # code task: share of prompt groups that show parent programs to mutate
    parent_replay=0.0,  # code task: weight of the warm start's loss on parent prompts (PPO-ptx)
    max_k=4,  # k of the max_at_k baseline (best of k samples)
    # GRPO's own fixes against collapse (grpo.py), for every algorithm, off by default
    scale_rewards="group",  # the std advantages divide by: group | batch (TRL) | none (Dr. GRPO)
    loss_norm="tokens",  # tokens: the batch's token mean | constant: Dr. GRPO's (grpo.py)
    clip_high=0.0,  # upper ratio clip 1 + clip_high (DAPO: 0.28); 0: the same as clip
    entropy_coef=0.0,  # bonus for the policy's token entropy, at each method's advantage RMS
    format_coef=0.0,  # weight of grpo.format_advantages, at each method's advantage RMS
    dynamic_sampling=0,  # DAPO: at most this many rounds of fresh groups until P have spread
    temperature=1.0,  # sampling temperature (1: the policy's own probabilities)
    top_k=0,  # sample among the k likeliest tokens only (0: off)
    top_p=1.0,  # nucleus sampling (1.0: off)
    # logging and evaluation
    eval_every=25,  # steps between held-out evaluations (0: only at the end)
    eval_problems=32,  # held-out problems per evaluation
    ckpt_every=25,  # steps between resume checkpoints (0: only the final one)
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


# ---- Algorithms: name -> (advantage, whether its rollouts hold a SET of m answers) --------------
# An advantage takes the reward vectors r (P, G, m, D), their fixed scalarization s (P, G, m), the
# weightings w (P, N, D) and cfg, and returns (P, G): one advantage per rollout. Single-answer
# methods have m = 1 and N = 1. A new idea: write the function (like baselines.py), add a line here.
def group_z(scores, cfg):
    """The group z-score of (P, G) scores (grpo.grpo_advantages), with the run's std choice."""
    return grpo.grpo_advantages(scores, std=cfg["scale_rewards"])


ADVANTAGES = {
    "grpo": (lambda r, s, w, cfg: group_z(s[:, :, 0], cfg), False),
    "vpo": (lambda r, s, w, cfg: vpo.vpo_advantages(r, w, std=cfg["scale_rewards"]), True),
    # the paper's ablations: VPO's set format without its weightings, its weightings without sets
    "multi_rlvr": (lambda r, s, w, cfg: group_z(vpo.multi_rlvr_scores(s), cfg), True),
    "random_weights": (lambda r, s, w, cfg: group_z(vpo.random_weight_scores(r, w), cfg), False),
    # the same score; the weighting is also written into the prompt
    "goal_conditioned": (lambda r, s, w, cfg: group_z(vpo.random_weight_scores(r, w), cfg), False),
    # an exercise
    "vpo_loo": (lambda r, s, w, cfg: vpo.leave_one_out_advantages(vpo.set_scores(r, w)), True),
    # the field's baselines (baselines.py); config.py refuses scale_rewards where no std divides
    "max_at_k": (
        lambda r, s, w, cfg: baselines.max_at_k_advantages(
            s[:, :, 0], cfg["max_k"], std=cfg["scale_rewards"]
        ),
        False,
    ),
    "gdpo": (lambda r, s, w, cfg: baselines.gdpo_advantages(r[:, :, 0]), False),
    "maxrl": (lambda r, s, w, cfg: baselines.maxrl_advantages(s[:, :, 0]), False),
    # RLOO (Ahmadian et al. 2024): vpo_loo's baseline on one answer's fixed scalarization
    "rloo": (lambda r, s, w, cfg: vpo.leave_one_out_advantages(s[:, :, 0]), False),
}
SET_ALGOS = {name for name, (_, uses_sets) in ADVANTAGES.items() if uses_sets}


def answers_per_rollout(cfg):
    return cfg["answers_per_rollout"] if cfg["algo"] in SET_ALGOS else 1


def resolve_config(path=None, overrides=(), base=None):
    """DEFAULTS <- YAML file <- key=value overrides, checked (config.py): ConfigError, one line."""
    return config.resolve(DEFAULTS, ADVANTAGES, path, overrides, base, vpo.WEIGHT_SAMPLERS)


# ---- One RL step ---------------------------------------------------------------------------------


@dataclass
class Run:
    """What one RL step needs: the policy, its optimizer, the task and the random streams."""

    cfg: dict
    task: object
    tok: Tokenizer
    model: GPT
    opt: torch.optim.Optimizer
    scorer: torch.nn.Module  # engine.score as a module (distributed.scorer), DDP under torchrun
    ref_model: GPT = None  # the frozen warm start, for the KL (kl_coef > 0)
    rng: random.Random = None  # which problems
    generator: torch.Generator = None  # on `device`: the tokens sampled and the weightings drawn
    device: str = "cpu"
    rank: int = 0
    world: int = 1

    @property
    def m(self):
        return answers_per_rollout(self.cfg)


def rl_step(run):
    """One step: sample rollouts -> reward vectors -> advantages -> clipped loss -> update ->
    (metrics, batch)."""
    cfg = run.cfg
    advantage = ADVANTAGES[cfg["algo"]][0]
    t0 = time.time()
    sampling = {}
    if cfg["dynamic_sampling"]:  # DAPO (baselines.py): groups that all score alike teach nothing
        batch, weights, sampling = baselines.sample_spread_groups(run, sample_round, advantage)
    else:
        batch, weights, _ = sample_round(run)
    t_sample = time.time() - t0
    rewards = batch["rewards"]  # (P, G, m, D)
    scalar = run.task.scalarize(rewards)  # (P, G, m): the fixed scalarization of every answer
    adv = advantage(rewards, scalar, weights, cfg)  # (P, G), on the groups kept (gdpo's batch std)
    # fixed-weight terms are sized to this method's advantages: a coefficient means the same in all
    rms = grpo.advantage_rms(adv) if cfg["format_coef"] or cfg["entropy_coef"] else 1.0
    if cfg["format_coef"]:
        adv = adv + cfg["format_coef"] * rms * grpo.format_advantages(rewards)
    flat = adv.reshape(-1).to(run.device)
    loss, stats, grad_norm = policy_update(run, batch, flat, cfg["entropy_coef"] * rms)
    metrics = {
        "loss": loss,
        **stats,
        "grad_norm": grad_norm,
        **step_metrics(run, batch, rewards, scalar, weights, adv),
        **sampling,
        "adv_scale": rms,
        "tokens": batch["num_tokens"],
        "sample_s": t_sample,
        "step_s": time.time() - t0,
    }
    return distributed.reduce_metrics(metrics, run.world, run.device), batch


def sample_round(run):
    """P fresh prompt groups, sampled and scored -> (batch, weightings (P, N, D), which groups show
    parents)."""
    cfg = run.cfg
    task = run.task
    P = cfg["prompts_per_step"]
    problems = task.problems("train", P, run.rng)
    # the last groups show parent programs to mutate, as the evolutionary search will (code task)
    mutating = round(cfg["mutation_share"] * P)
    shown = [task.scored(q, task.demo_parents(q, run.rng)) for q in problems[P - mutating :]]
    parents = [None] * (P - mutating) + shown
    # N weightings per group for the set methods, one for the single-answer weighted baselines
    N = cfg["num_weights"] if cfg["algo"] in SET_ALGOS else 1
    weights = vpo.sample_weights(P, N, task.dim, cfg["alpha"], cfg["weight_sampler"], run.generator)
    # under torchrun every rank draws the same global batch and keeps its share of the groups
    problems, parents, weights = (x[run.rank :: run.world] for x in (problems, parents, weights))
    goals = weights[:, 0].tolist() if cfg["algo"] == "goal_conditioned" else None
    run.model.eval()
    G = cfg["group_size"]
    batch = sample_rollouts(
        run.model, run.tok, task, problems, run.m, G, cfg, run.generator, parents, goals
    )
    return batch, weights, [p is not None for p in parents]


def policy_update(run, batch, adv, entropy_coef=0.0):
    """`epochs_per_batch` steps of grpo.policy_loss (with what cfg asks: KL, entropy, replay) ->
    (loss, stats, grad norm)."""
    cfg = run.cfg
    inputs = (batch["prompt"], batch["prompt_mask"], batch["completion"], batch["completion_mask"])
    ref_logprobs = None  # the warm start's log-probs, for the KL (kl_coef > 0)
    if run.ref_model is not None:
        with torch.no_grad():
            ref_logprobs = engine.score(run.ref_model, *inputs)[0]
    run.model.train()
    # under torchrun each rank's token mean weighs its share of the global batch's tokens (1 alone)
    share = distributed.token_share(batch["num_tokens"], run.world, run.device)
    demos = None  # parent replay's demonstrations with parents, the same on every rank
    if cfg["parent_replay"]:
        demos = padded_demos(run.task, run.tok, cfg, run.rng, run.device, parents_only=True)
    normalizer = None
    if cfg["loss_norm"] == "constant":  # Dr. GRPO: rollouts x the longest completion, every rank
        normalizer = len(adv) * max_completion_tokens(run.task, run.m)
        share = 1.0
    for _ in range(cfg["epochs_per_batch"]):
        with autocast(cfg, run.device):
            logprobs, entropy = run.scorer(*inputs)  # entropy keeps its gradient, for the bonus
        loss, stats = grpo.policy_loss(
            logprobs.float(),
            batch["old_logprobs"],
            adv,
            batch["completion_mask"],
            cfg["clip"],
            ref_logprobs,
            cfg["kl_coef"],
            cfg["clip_high"] or None,
            entropy.float(),
            entropy_coef,
            normalizer=normalizer,
        )
        total = loss * share
        if demos is not None:
            replay = replay_loss(run.model, demos, cfg, run.device)
            total = total + cfg["parent_replay"] * replay
            stats["replay_loss"] = replay.item()
        # the gradient step; a non-finite number stops the run before it reaches a checkpoint
        if not torch.isfinite(total):
            stop_non_finite(f"non-finite loss ({total.item()})", cfg)
        run.opt.zero_grad(set_to_none=True)
        total.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(run.model.parameters(), cfg["max_grad_norm"])
        if not torch.isfinite(grad_norm):
            stop_non_finite("non-finite gradient norm", cfg)
        run.opt.step()
        if not torch.stack([torch.isfinite(p).all() for p in run.model.parameters()]).all():
            stop_non_finite("non-finite weights after the optimizer step", cfg)
    return loss.item(), stats, float(grad_norm)


def stop_non_finite(what, cfg):
    raise FloatingPointError(f"{what} (lr={cfg['lr']}); stopping, the last checkpoint is kept")


# ---- What a step logs (CleanRL-style: the numbers that explain a run) ----------------------------


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
        "zero_std_groups": float((adv.abs().sum(1) == 0).float().mean()),
        "entropy": float((batch["entropy"] * mask).sum() / mask.sum()),
        "distinct_first_answers": float(np.mean(distinct)),
    }


def log_step(files, run, step, metrics, batch):
    """metrics.jsonl, timing.jsonl, the console line and, every 25 steps, a few rollouts."""
    cfg = run.cfg
    m = metrics
    timing = {"step": step, "sample_s": m.pop("sample_s"), "step_s": m.pop("step_s")}
    timing["tokens_per_s"] = m["tokens"] / timing["step_s"]
    if cfg["peak_tflops"] > 0:  # ~2N FLOPs per sampled token, 6N per trained token
        flops = (2 + 6 * cfg["epochs_per_batch"]) * run.model.num_params() * m["tokens"]
        timing["mfu"] = flops / timing["step_s"] / (cfg["peak_tflops"] * 1e12)
    files.write("metrics.jsonl", {"kind": "train", "step": step, **m})
    files.write("timing.jsonl", timing)
    files.log(
        f"step {step}/{cfg['steps']} | reward {m['reward_scalar']:.3f} set {m['set_score']:.3f} "
        f"| adv std {m['adv_std']:.2f} zero-std {m['zero_std_groups']:.2f} "
        f"| ent {m['entropy']:.3f} distinct {m['distinct_first_answers']:.2f} "
        f"| clip {m['clip_frac']:.3f} kl {m['kl']:.4f} gnorm {m['grad_norm']:.2f} "
        f"| {timing['tokens_per_s']:.0f} tok/s"
        + (f" mfu {timing['mfu']:.1%}" if "mfu" in timing else "")
        + f" | ETA {files.eta(step, cfg['steps']):.0f}s"
    )
    if step % 25 == 0 or step == cfg["steps"]:
        prompt = rollout_prompt(run.task, batch["problems"][0], run.m)
        answers = batch["answers"][0][:4]
        rewards = batch["rewards"][0, :4].tolist()
        sample = {"step": step, "prompt": prompt, "answers": answers, "rewards": rewards}
        files.write("samples.jsonl", sample)


def evaluate_heldout(run, files, step):
    """search.heldout_look on rank 0 (the same problems and draws every time) -> metrics.jsonl."""
    if run.rank:
        return {"heldout_scalar": float("nan")}
    ev = search.heldout_look(run.model, run.tok, run.task, run.m, run.cfg, run.device)
    files.write("metrics.jsonl", {"kind": "eval", "step": step, **ev})
    files.log(
        f"eval @ {step}: held-out scalar {ev['heldout_scalar']:.3f}, best-in-rollout "
        f"{ev['heldout_best_in_rollout']:.3f}, valid {ev['heldout_valid']:.2f}"
    )
    return ev


# ---- The training loop ---------------------------------------------------------------------------


def make_run(cfg, task, tok, model, device, rank=0, world=1):
    """The optimizer, scorer, frozen reference (for the KL) and random streams of a run; bench.py
    times this."""
    opt = torch.optim.AdamW(
        model.parameters(),
        lr=cfg["lr"],
        weight_decay=cfg["weight_decay"],
        betas=(0.9, 0.99),
        fused=device.startswith("cuda"),  # one kernel on GPUs
    )
    scorer = distributed.scorer(model, world, cfg["compile"])
    ref_model = None  # the warm start, frozen, for the KL
    if cfg["kl_coef"] > 0:
        ref_model = copy.deepcopy(model).eval().requires_grad_(False)
    rng = random.Random(cfg["seed"])
    generator = torch.Generator(device=device).manual_seed(cfg["seed"])
    return Run(cfg, task, tok, model, opt, scorer, ref_model, rng, generator, device, rank, world)


def run_state(run, step):
    """Everything a resumed run needs to continue as if it had never stopped."""
    return {
        "model": run.model.state_dict(),
        "model_config": vars(run.model.cfg),
        "config": run.cfg,
        "m": run.m,
        "step": step,
        "optimizer": run.opt.state_dict(),
        "rng": run.rng.getstate(),
        "generator": run.generator.get_state(),
        "torch_rng": torch.get_rng_state(),
    }


def restore(run, files):
    """Load the run folder's resume checkpoint (if any) into `run` -> the first step to train."""
    state = files.resume
    if not state:
        return files.start_steps(1)
    run.model.load_state_dict(state["model"])
    run.opt.load_state_dict(state["optimizer"])
    run.rng.setstate(state["rng"])
    run.generator.set_state(state["generator"])
    torch.set_rng_state(state["torch_rng"])
    files.log(f"resumed from step {state['step']}")
    return files.start_steps(state["step"] + 1)


def train(cfg):
    """Warm start, then cfg["steps"] RL steps -> the run's folder (runfiles.RunFiles: folder,
    resuming, logs)."""
    t_begin = time.time()  # the closing line counts the warm start too
    device, rank, world = distributed.start_process(cfg)
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
        model, warm_path = warm_start(cfg, task, tok, device, files.log)
    files.log(f"model: {model.num_params() / 1e6:.2f}M parameters")
    run = make_run(cfg, task, tok, model, device, rank, world)
    if not files.resume:
        evaluate_heldout(run, files, 0)
    for step in range(restore(run, files), cfg["steps"] + 1):
        metrics, batch = rl_step(run)
        log_step(files, run, step, metrics, batch)
        if cfg["eval_every"] and step % cfg["eval_every"] == 0 and step != cfg["steps"]:
            evaluate_heldout(run, files, step)
        if cfg["ckpt_every"] and step % cfg["ckpt_every"] == 0:
            files.save("ckpt.pt", run_state(run, step))
    last_eval = evaluate_heldout(run, files, cfg["steps"])
    if world > 1:
        in_sync, checksum = distributed.replicas_in_sync(model, world, device)
        files.log(f"ranks in sync: {in_sync} (parameter checksum {checksum:.6f})")
    files.save("final.pt", {**run_state(run, cfg["steps"]), "warm_start": warm_path})
    warm = "loaded from its cache" if cached else "trained here, included"
    files.log(
        f"trained in {time.time() - t_begin:.0f}s (the warm start {warm}): held-out scalar "
        f"{last_eval['heldout_scalar']:.3f}"
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
            figure = search.report_run(out_dir)
            print(f"done in {time.time() - t0:.0f}s, the run and this evaluation; see {figure}")
    except KeyboardInterrupt:  # Ctrl-C: no traceback; the checkpoints written so far stay
        print(
            "\ninterrupted: the run's checkpoints so far stay in its out_dir; the same command "
            "with --set resume=true continues from the last one",
            file=sys.stderr,
        )
        sys.exit(130)
    except (ConfigError, FileNotFoundError, RuntimeError, FloatingPointError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)  # ValueError: e.g. a prompt longer than block_size
        sys.exit(2)


if __name__ == "__main__":
    main()
