"""
GRPO and VPO in one file: read it first, then run it.

    python grpo_vs_vpo.py                          # seed 0, about three minutes on a 2-core CPU
    python grpo_vs_vpo.py --seed 1 --out s1.json   # another seed; its per-problem numbers saved

A tiny GPT learns the persona task (rewards.PersonaTask) with two personas. Each persona likes one
letter of the prompt ("likes my"), an answer is a word of 1 to 12 letters, and its reward is a
VECTOR: one score per persona, sqrt(share of the word in that persona's letter). The file trains a
short supervised warm start on the task's demonstrations, then GRPO and VPO from that same starting
point, and compares them on held-out problems. Read it top to bottom. The two methods differ in two
places: m, the answers a rollout holds (VPO's 3, GRPO's 1), and the `if algo == "vpo":` branch of
`advantages` (one einsum and a max). Training scores a repeat of an earlier answer of its rollout
zero, but that cannot change VPO's advantage: the max already ignores a second copy.

What it shows. GRPO trains on the mean of the two scores, which the balanced word "mymymymymymy"
maximizes, so its answers collapse onto that word (its "distinct" column falls). VPO is paid for its
set's best answer under random trade-offs (w, 1 - w), so its answers keep leaning to one persona or
the other. The closing table's best@k scores the mean (GRPO's objective), w-best@k fresh trade-offs
from VPO's Dirichlet(1) (VPO's); the warm start asked for m answers shows what RL adds to the set
format. One run is one seed: `python lab/one_file_seeds.py` runs three and gives intervals.

Where this recipe departs from the textbook one:
- The loss is a token mean over the whole batch, so a long completion weighs more than a short one
  (the GRPO paper averages each completion's tokens first).
- The KL to the warm start is a term of the loss (GRPO's k3), not a penalty in the reward (RLHF's).
- The z-score divides by the group's population std, not the sample std.
- VPO draws three times GRPO's answers a step (8 x 8 x 3 against 8 x 8), so compute is not matched:
  GRPO with PROMPTS = 24 or GROUP = 24 would draw as many (the lab's `grpo_x3` row does the first).
- The KL's reference stays the warm start (never refreshed); a group whose scores all tie gets zero
  advantages; each update takes the whole batch (no minibatches).

What this file simplifies, and where the full trainer (train.py) does more:
- One task, one model size, every setting at the top. train.py trains any task from checked YAML;
  `configs/persona_one_file.yaml` is this file's recipe (a test keeps them equal), and its persona
  default (four personas, the `cpu` model, no KL, one update a batch) stays: the board used it.
- Sampling runs the whole sequence again for every new token. train.py's engine.py (a KV cache)
  gives the same log-probs many times faster, but draws tokens another way: a seed gives others.
- The warm start is trained here every run (600 steps, the formats taking turns, no gradient clip);
  warmstart.py trains 300 (one answer first, a warm-up, a cosine decay, norms clipped at 1), cached.
- Two algorithms. train.ADVANTAGES also holds the paper's ablations and the field's baselines, and
  train.py adds GRPO's own fixes, a format reward, checkpoints, resuming, logs, torchrun and CUDA.
- The evaluation: one pool a held-out problem; evaluate.py and lab/ add pass@k, diversity, search.
"""

import argparse
import copy
import json
import math
import os
import random
import sys
import time
from typing import NamedTuple

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # OpenMP's busy-waiting slows small CPU runs

import torch
import torch.nn.functional as F

from model import Tokenizer, build_model, pad_left, pad_right, positions_of
from rewards import PersonaTask

# ---- Settings ------------------------------------------------------------------------------------
SEED = 0  # the warm start's weights, the problems and every draw follow it (--seed changes it)
MODEL = "nano"  # a size preset of model.PRESETS: 2 layers, small enough to sample the plain way
WARM_STEPS = 600  # supervised steps, the two formats taking turns: 300 each, as train.py's default
WARM_BATCH = 64  # demonstrations per supervised step (train.py's sft_batch)
WARM_LR = 3e-3  # the warm start's learning rate, train.py's sft_lr, decayed linearly to 0
RL_STEPS = 150  # RL steps per method: GRPO's "distinct" falls to 0.2-0.4 by then (seeds 0-2)
PROMPTS = 8  # P: problems per RL step
GROUP = 8  # G: rollouts per problem, the group an advantage compares within
ANSWERS = 3  # m: answers in one VPO rollout (a GRPO rollout holds one)
BLOCK_SIZE = max(64, 16 + ANSWERS * 13 + 1)  # a prompt (up to 16 tokens), m answers of 13
WEIGHTINGS = 100  # N: random trade-offs per group for VPO's set score
LR = 1e-3  # AdamW's learning rate in RL (train.py's lr)
WEIGHT_DECAY = 0.01  # AdamW's own default, written out because train.py's default is 0
CLIP = 0.2  # PPO's ratio clip: the ratio's range is [1 - CLIP, 1 + CLIP]
# The weight of the k3 KL to the warm start, a loose anchor: GRPO's KL still climbs to about 0.8
# by its last steps as its answers collapse, as it does with no KL (docs/EXERCISES.md measures it).
KL_COEF = 0.01
UPDATES_PER_BATCH = 2  # gradient steps on each batch of rollouts (the clip binds from the second)
MAX_GRAD_NORM = 1.0  # the gradient's norm is clipped to this before each step
MIN_STD = 1e-6  # a group whose scores spread less than this carries no signal: advantages 0
# Added to the std as grpo.py adds it, so the two agree to the bit; past MIN_STD it changes little.
STD_EPS = 1e-6
EVAL_PROBLEMS = 40  # held-out problems both methods are compared on (the lab's pool_problems)
POOL = 30  # answers per held-out problem (VPO: 10 rollouts of 3); best@k for k up to POOL
HELDOUT_WEIGHTINGS = 64  # w-best@k's trade-offs (the lab's too), from a stream training never uses
KS = (1, 5, 30)  # the closing table's k: one answer, a handful, the whole pool

task = PersonaTask(num_personas=2)  # D = 2: one score per persona
tok = Tokenizer("bytes")  # the 256 bytes and <|bos|> <|answer|> <|sep|> <|eos|>


# ---- Prompts, completions and their log-probs ----------------------------------------------------


def prompt_ids(problem, m):
    """The tokens of a prompt asking for m answers: <|bos|>3|likes my<|answer|>."""
    return tok.encode(f"<|bos|>{m}|{task.prompt(problem)}<|answer|>")


def completion_ids(answers):
    """The tokens of a completion: a1<|sep|>a2<|sep|>a3<|eos|>."""
    return tok.encode("<|sep|>".join(answers) + "<|eos|>")


def completion_logprobs(model, prompt, prompt_mask, completion):
    """Left-padded prompts (B, Tp) and their completions (B, T) -> the log-prob of every
    completion token (B, T), in one forward over prompt + completion."""
    ids = torch.cat([prompt, completion], dim=1)  # (B, Tp + T)
    # Tokens after a completion's end never count in a loss, and causal attention hides them from
    # the tokens before, so the completion part of the mask can be all True.
    key_mask = torch.cat([prompt_mask, torch.ones_like(completion, dtype=torch.bool)], dim=1)
    positions = positions_of(key_mask)  # (B, Tp + T): padding does not shift a sequence
    logits = model(ids[:, :-1], key_mask[:, :-1], positions[:, :-1])  # (B, Tp + T - 1, V)
    logits = logits[:, prompt.size(1) - 1 :]  # (B, T, V): the positions that predict the completion
    return F.log_softmax(logits, dim=-1).gather(-1, completion[..., None]).squeeze(-1)  # (B, T)


# ---- The warm start: supervised learning on the task's imperfect demonstrations ------------------


def warm_start(rng):
    """A model that writes words in both formats, one answer (GRPO's) and m answers (VPO's)."""
    torch.manual_seed(SEED)
    model = build_model(MODEL, block_size=BLOCK_SIZE, vocab_size=tok.vocab_size, device="cpu")
    opt = torch.optim.AdamW(model.parameters(), lr=WARM_LR, weight_decay=WEIGHT_DECAY)
    for step in range(WARM_STEPS):
        m = 1 if step % 2 else ANSWERS  # the two formats take turns
        problems = task.problems("train", WARM_BATCH, rng)
        prompt, prompt_mask = pad_left([prompt_ids(q, m) for q in problems], tok.eos)
        demos = [completion_ids(task.demonstration(q, m, rng)) for q in problems]
        completion, mask = pad_right(demos, tok.eos)  # (B, T)
        logprobs = completion_logprobs(model, prompt, prompt_mask, completion=completion)
        loss = -(logprobs * mask).sum() / mask.sum()  # cross-entropy on the completion tokens
        for group in opt.param_groups:
            group["lr"] = WARM_LR * (1 - step / WARM_STEPS)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 100 == 0 or step == WARM_STEPS - 1:
            print(f"warm start {step + 1:3d}/{WARM_STEPS}: loss {loss.item():.3f}")
    return model.eval()


# ---- Sampling: plain multinomial, one token at a time --------------------------------------------


class Rollouts(NamedTuple):
    """B sampled completions with their prompts: what the loss needs of them."""

    prompt: torch.Tensor  # (B, Tp) prompt tokens, left-padded
    prompt_mask: torch.Tensor  # (B, Tp) False on the padding
    completion: torch.Tensor  # (B, T) the sampled tokens, <|eos|> after a completion's end
    mask: torch.Tensor  # (B, T) True up to and including the first <|eos|>
    old_logprobs: torch.Tensor  # (B, T) each token's log-prob under the policy that sampled it


@torch.no_grad()
def sample(model, problems, num_rollouts, m, generator):
    """num_rollouts completions of m answers for each problem -> Rollouts (B = len(problems) *
    num_rollouts rows) and the answers (B lists of m strings, "" where a completion wrote fewer)."""
    prompt, prompt_mask = pad_left(
        [prompt_ids(q, m) for q in problems for _ in range(num_rollouts)], tok.eos
    )  # (B, Tp)
    ids, key_mask = prompt, prompt_mask
    done = torch.zeros(len(ids), dtype=torch.bool)  # (B,)
    tokens, logprobs = [], []
    # Each answer ends in <|sep|> or <|eos|>; the one more token lets a completion whose last answer
    # ended in <|sep|> still write its <|eos|>.
    for _ in range(m * task.max_answer_tokens + 1):
        logits = model(ids, key_mask, positions_of(key_mask))[:, -1]  # (B, V) at each row's end
        logp = F.log_softmax(logits, dim=-1)  # (B, V)
        token = torch.multinomial(logp.exp(), 1, generator=generator).squeeze(1)  # (B,)
        token = token.masked_fill(done, tok.eos)  # a finished completion only writes <|eos|>
        tokens.append(token)
        logprobs.append(logp.gather(1, token[:, None]).squeeze(1))  # the "old" log-prob
        done = done | (token == tok.eos)
        if done.all():
            break
        ids = torch.cat([ids, token[:, None]], dim=1)
        key_mask = torch.cat([key_mask, torch.ones_like(done)[:, None]], dim=1)
    completion = torch.stack(tokens, dim=1)  # (B, T)
    ended = (completion == tok.eos).long()
    mask = (ended.cumsum(1) - ended) == 0  # (B, T): True up to the first <|eos|>, which counts
    old_logprobs = torch.stack(logprobs, dim=1) * mask  # (B, T)
    answers = [(tok.split_answers(row[keep]) + [""] * m)[:m] for row, keep in zip(completion, mask)]
    return Rollouts(prompt, prompt_mask, completion, mask=mask, old_logprobs=old_logprobs), answers


# ---- The reward vectors --------------------------------------------------------------------------


def reward_vectors(problems, answers, as_written=False):
    """B = P * G rollouts of m answers each -> rewards (P, G, m, D). In training a repeat within a
    rollout scores zeros, because a second copy adds nothing to a set; at evaluation (as_written)
    every answer scores what it is worth. An invalid or missing answer scores zeros."""
    G = len(answers) // len(problems)
    rewards = torch.zeros(len(problems), G, len(answers[0]), task.dim)  # (P, G, m, D)
    for b, rollout in enumerate(answers):
        for j, answer in enumerate(rollout):
            if as_written or answer not in rollout[:j]:
                reward = task.reward(problems[b // G], answer)  # (D,) in [0, 1]
                rewards[b // G, b % G, j] = torch.from_numpy(reward)
    return rewards


def random_weightings(num_groups, num_weightings, generator):
    """(P, N, D) trade-offs drawn uniformly from the simplex: normalized exponential draws are
    Dirichlet(1, ..., 1)."""
    draws = torch.empty(num_groups, num_weightings, task.dim).exponential_(generator=generator)
    return draws / draws.sum(dim=-1, keepdim=True)  # (P, N, D)


# ---- The advantages: the score of a rollout is where GRPO and VPO differ -------------------------


def advantages(algo, rewards, weightings):
    """rewards (P, G, m, D) and weightings (P, N, D) -> one advantage per rollout (P, G)."""
    if algo == "vpo":
        # Every answer under every trade-off; the set's best answer under each; their mean.
        scalarized = torch.einsum("pgmd,pnd->pgnm", rewards, weightings)  # (P, G, N, m)
        scores = scalarized.max(dim=-1).values.mean(dim=-1)  # (P, G): the set score R_g
    else:
        scores = rewards[:, :, 0].mean(dim=-1)  # (P, G): GRPO's fixed scalarization, the mean
    # Both methods take the group z-score; a group whose rollouts all scored alike teaches nothing.
    group_mean = scores.mean(dim=1, keepdim=True)  # (P, 1)
    std = scores.std(dim=1, keepdim=True, unbiased=False)  # (P, 1)
    return torch.where(std < MIN_STD, 0.0, (scores - group_mean) / (std + STD_EPS))  # (P, G)


# ---- The loss: PPO's clipped ratio, with a KL to the warm start ----------------------------------


def clipped_loss(logprobs, old_logprobs, ref_logprobs, adv, mask):
    """Token log-probs (B, T) of the policy (with gradients), of the sampling policy and of the
    warm start, one advantage per rollout (B,) and the completion mask (B, T) -> (loss, KL), both
    token means over the batch."""
    mask = mask.float()
    tokens = mask.sum()
    ratio = torch.exp(logprobs - old_logprobs)  # (B, T): 1 at a batch's first update
    unclipped = ratio * adv[:, None]  # (B, T): every token of a rollout shares its advantage
    clipped = ratio.clamp(1 - CLIP, 1 + CLIP) * adv[:, None]
    pg_loss = -(torch.minimum(unclipped, clipped) * mask).sum() / tokens
    # The k3 estimate of KL(policy || warm start): never negative, small while the two agree, but a
    # sampled token that the policy now finds far less likely than the warm start did inflates it.
    log_ratio = ref_logprobs - logprobs  # (B, T)
    kl = ((torch.exp(log_ratio) - log_ratio - 1) * mask).sum() / tokens
    return pg_loss + KL_COEF * kl, kl


# ---- The loop ------------------------------------------------------------------------------------


def train(algo, warm_model):
    """RL_STEPS steps of `algo` ("grpo" or "vpo") from a copy of the warm start -> the policy."""
    model = copy.deepcopy(warm_model)
    reference = copy.deepcopy(warm_model).requires_grad_(False)  # frozen, for the KL
    # beta2 0.99 (train.py's too) averages the squared gradients over about 100 optimizer steps,
    # not the default's 1,000, so the step size can follow a run of 300 (150 steps of 2 updates).
    opt = torch.optim.AdamW(model.parameters(), lr=LR, betas=(0.9, 0.99), weight_decay=WEIGHT_DECAY)
    m = ANSWERS if algo == "vpo" else 1
    rng = random.Random(SEED)  # both methods see the same problems
    generator = torch.Generator().manual_seed(SEED)  # every sampled token and every weighting
    t0 = time.time()
    for step in range(1, RL_STEPS + 1):
        problems = task.problems("train", PROMPTS, rng)
        model.eval()
        rollouts, answers = sample(model, problems, num_rollouts=GROUP, m=m, generator=generator)
        rewards = reward_vectors(problems, answers)  # (P, G, m, D)
        weightings = random_weightings(PROMPTS, WEIGHTINGS, generator)  # (P, N, D)
        adv = advantages(algo, rewards, weightings).reshape(-1)  # (B,), B = P * G
        if not torch.isfinite(adv).all():  # caught here, not as a NaN in the next step's sampling
            raise ValueError(f"{algo}: an advantage is NaN or inf; a tied group's must be 0")
        prompt, prompt_mask, completion = rollouts.prompt, rollouts.prompt_mask, rollouts.completion
        with torch.no_grad():
            ref_logprobs = completion_logprobs(
                reference, prompt, prompt_mask, completion=completion
            )
        model.train()
        for _ in range(UPDATES_PER_BATCH):
            logprobs = completion_logprobs(model, prompt, prompt_mask, completion=completion)
            loss, kl = clipped_loss(
                logprobs, rollouts.old_logprobs, ref_logprobs, adv=adv, mask=rollouts.mask
            )
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_GRAD_NORM)
            opt.step()
        # A step shows the mean reward of the answers that scored (not invalid ones, not repeats)
        # and the share of a group's first answers that differ: a collapsed policy repeats one word.
        scored = rewards.sum(-1) > 0  # (P, G, m): valid answers that repeat nothing
        mean_reward = rewards.mean(-1)[scored].mean().item() if scored.any() else 0.0
        groups = [answers[i : i + GROUP] for i in range(0, len(answers), GROUP)]
        distinct = sum(len({rollout[0] for rollout in group}) for group in groups) / len(answers)
        print(
            f"{algo} step {step:3d}/{RL_STEPS}: mean reward {mean_reward:.3f}, distinct "
            f"{distinct:.2f}, KL {kl.item():.3f}, {time.time() - t0:.0f}s"
        )
    return model.eval()


# ---- The evaluation: a pool of answers for each held-out problem ---------------------------------


def best_at_k(scores, k):
    """scores (..., n) -> (...): the expected best of k scores drawn without replacement from the
    n, exactly, never above the best of the n."""
    n = scores.size(-1)
    chance = [math.comb(i, k - 1) / math.comb(n, k) for i in range(n)]  # (n,) summing to 1
    return scores.double().sort(dim=-1).values @ torch.tensor(chance, dtype=torch.float64)


def pools(model, m, problems):
    """POOL answers for each of Q problems, written m a rollout (the last rollout's extra answers
    dropped when m does not divide POOL) -> rewards (Q, POOL, D) scored as written, and the answers
    (Q lists of POOL)."""
    # A stream of its own: every model is asked with the same draws, whatever training drew.
    generator = torch.Generator().manual_seed(SEED + 1)
    per_problem = math.ceil(POOL / m)  # rollouts a problem
    _, answers = sample(model, problems, num_rollouts=per_problem, m=m, generator=generator)
    rewards = reward_vectors(problems, answers, as_written=True)  # (Q, per_problem, m, D)
    flat = [
        sum(answers[i : i + per_problem], [])[:POOL] for i in range(0, len(answers), per_problem)
    ]
    return rewards.reshape(len(problems), -1, task.dim)[:, :POOL], flat


def show_answers(name, rewards, answers, problem, count=6):
    """`count` of a pool's answers, evenly spaced from the one leaning most to the first persona to
    the one leaning most to the last: six lines show both ends and the middle, and a collapsed pool
    shows one word six times."""
    lean = rewards[:, 0] - rewards[:, -1]  # (POOL,)
    shown = lean.argsort(descending=True, stable=True)[torch.linspace(0, POOL - 1, count).long()]
    print(f"\n{name}, {count} of its {POOL} answers to the held-out 'likes {''.join(problem)}':")
    for i in shown.tolist():
        vector = ", ".join(f"{x:.2f}" for x in rewards[i].tolist())
        print(f"  {answers[i]:12s}  reward vector ({vector})")


def evaluate(models):
    """{name: (model, m)} -> {name: {"best@k" and "w-best@k" for each k of KS: (Q,), one number
    per held-out problem}}, with a table of their means and a problem's answers printed."""
    problems = task.problems("heldout", EVAL_PROBLEMS, random.Random(SEED))
    # Held-out trade-offs (H, D): another stream again, from the Dirichlet(1) that VPO trains on.
    generator = torch.Generator().manual_seed(SEED + 2)
    tradeoffs = random_weightings(1, HELDOUT_WEIGHTINGS, generator)[0]
    results = {}
    for name, (model, m) in models.items():
        rewards, answers = pools(model, m, problems)  # (Q, POOL, D)
        show_answers(name, rewards[0], answers[0], problem=problems[0])
        mean_scalarized = rewards.mean(dim=-1)  # (Q, POOL): the fixed scalarization GRPO trained on
        # "a" for a pool's answer, "h" for a held-out trade-off
        tradeoff_scalarized = torch.einsum("qad,hd->qha", rewards, tradeoffs)  # (Q, H, POOL)
        results[name] = {f"best@{k}": best_at_k(mean_scalarized, k) for k in KS}  # (Q,) each
        for k in KS:
            results[name][f"w-best@{k}"] = best_at_k(tradeoff_scalarized, k).mean(-1)
    print(f"\nmeans over {EVAL_PROBLEMS} held-out problems, pools of {POOL} answers, seed {SEED}")
    print(" " * 10 + "".join(f"{name:>16s}" for name in results))
    for metric in [f"{kind}best@{k}" for kind in ("", "w-") for k in KS]:
        print(f"{metric:10s}" + "".join(f"{r[metric].mean():16.3f}" for r in results.values()))
    average = ", ".join(f"{x:.3f}" for x in tradeoffs.mean(0).tolist())
    print(
        "best@k: the best of k answers under the mean of the scores, GRPO's objective.\n"
        f"w-best@k: the same under {HELDOUT_WEIGHTINGS} held-out trade-offs, averaged: VPO's.\n"
        "best@1 and w-best@1 score a pool's average answer under the mean of the scores and\n"
        f"under the held-out trade-offs' mean ({average})."
    )
    return results


def main(argv=()):
    """The command line (--seed, --out) -> evaluate's per-problem results, after training."""
    global SEED  # the functions above read the settings; the command line may change this one
    parser = argparse.ArgumentParser(description="GRPO and VPO from one warm start, compared")
    parser.add_argument("--seed", type=int, default=SEED, help="the seed of every draw")
    parser.add_argument("--out", help="a JSON file for the per-problem numbers of every model")
    args = parser.parse_args(argv)
    SEED = args.seed
    torch.set_num_threads(1)  # models this small gain nothing from more threads
    t0 = time.time()
    warm_model = warm_start(random.Random(SEED))
    grpo_model = train("grpo", warm_model)
    vpo_model = train("vpo", warm_model)
    models = {"warm start": (warm_model, 1), f"warm start m={ANSWERS}": (warm_model, ANSWERS)}
    models.update({"GRPO": (grpo_model, 1), "VPO": (vpo_model, ANSWERS)})
    results = evaluate(models)
    seconds = time.time() - t0
    print(f"done in {seconds:.0f}s")
    if args.out:
        per_problem = {name: {k: v.tolist() for k, v in r.items()} for name, r in results.items()}
        with open(args.out, "w") as f:
            json.dump(dict(seed=SEED, seconds=round(seconds), per_problem=per_problem), f, indent=1)
    return results


if __name__ == "__main__":
    main(sys.argv[1:])
