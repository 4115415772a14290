"""
Rollouts: the prompt and completion formats, sampling G rollouts per problem, and their reward
vectors. Training, evaluation and search all sample through `sample_rollouts`: the same formats.

A prompt states how many answers it wants, `<|bos|>3|likes qxmz<|answer|>`, so one warm-start model
serves m = 1 and m > 1. A completion: `a1<|sep|>a2<|sep|>a3<|eos|>`.

Two scoring conventions, on purpose (`score_answers`):
- training: a repeated or missing answer scores zero: a repeat adds nothing to a set's best-of-m,
  and Multi-RLVR's sum would otherwise pay the policy for writing the same thing twice.
- evaluation (as_written=True): every answer scores what it is worth, as the VPO authors'
  evaluation does; a zero row in a pool would inflate its diversity.

Deliberately left out: chat templates, system prompts, stop strings other than <|eos|>.
"""

import numpy as np
import torch

from model import pad_left
from tasks import ParentTask


def rollout_prompt(task, problem, m, parents=None, goal=None):
    """The full prompt text, asking for m answers."""
    return f"<|bos|>{m}|{task.prompt(problem, parents=parents, goal=goal)}<|answer|>"


def rollout_text(answers):
    """Answers -> the completion text the policy should write: a1<|sep|>a2<|sep|>a3<|eos|>."""
    return "<|sep|>".join(answers) + "<|eos|>"


def score_answers(task, problem, answers, m, as_written=False, memo=None):
    """The first m answers of a rollout -> (m, D) reward rows: zero for a missing answer and, unless
    as_written, a repeat (by answer_key). memo: this problem's rewards by answer text
    (deterministic: an answer sampled twice runs once, a third of the code task's reward time)."""
    rows = np.zeros((m, task.dim), dtype=np.float32)
    memo = {} if memo is None else memo
    seen = set()
    for j, answer in enumerate(answers[:m]):
        key = task.answer_key(answer)
        if key not in seen or as_written:
            if answer not in memo:
                memo[answer] = task.reward(problem, answer)
            rows[j] = memo[answer]
        seen.add(key)
    return rows


def solves(task, problem, rewards):
    """rewards (..., D) of answers to one problem -> (...) bools, task.solved of each; a zero
    vector (unparsed, repeated) never solves, so task.solved (which can be costly) is not asked."""
    solved = torch.zeros(rewards.shape[:-1], dtype=torch.bool)
    for index in (rewards.sum(-1) > 0).nonzero().tolist():
        solved[tuple(index)] = bool(task.solved(problem, rewards[tuple(index)].numpy()))
    return solved


def max_completion_tokens(task, m):
    """The longest completion sampling allows: m answers, each with its separator or end token."""
    return m * task.max_answer_tokens + 1


def sample_rollouts(policy, task, problems, G, parents=None, goals=None, as_written=False):
    """Sample G rollouts of the policy's m answers per problem and score them (as_written: as
    evaluation does).

    parents: per problem, the code task's (text, score) parents worst to best, or None (answers are
    read through task.child_program); goals: per problem, a weighting written into the prompt.
    -> dict: problems, prompt/completion tensors and masks (B = P * G rows, on the policy's device),
    old_logprobs and entropy (B, T), rewards (P, G, m, D) on the CPU, answers (P x G x m strings, ""
    if missing), num_tokens.
    """
    if any(parents or []) and not isinstance(task, ParentTask):
        raise TypeError(f"{type(task).__name__} shows no parents (tasks.ParentTask)")
    m = policy.answers_per_rollout
    tok = policy.tok
    prompts = []
    for i, problem in enumerate(problems):
        shown = parents[i] if parents else None
        goal = goals[i] if goals is not None else None
        prompts.append(tok.encode(rollout_prompt(task, problem, m, parents=shown, goal=goal)))
    prompt_ids, prompt_mask = pad_left(prompts, tok.eos, policy.device)
    out = policy.sample(prompt_ids, prompt_mask, G, max_new_tokens=max_completion_tokens(task, m))
    tokens = out["tokens"].cpu()  # one copy, not one per row
    mask = out["mask"].cpu()
    rewards = np.zeros((len(problems), G, m, task.dim), dtype=np.float32)
    answers = []
    for i, problem in enumerate(problems):
        row = []
        memo = {}  # this problem's rewards by answer text
        for g in range(G):
            texts = tok.split_answers(tokens[i * G + g][mask[i * G + g]].tolist())
            if parents and parents[i]:  # children from parents: the programs they stand for
                texts = [task.child_program(t, parents[i]) for t in texts]
            rewards[i, g] = score_answers(
                task, problem, texts, m=m, as_written=as_written, memo=memo
            )
            row.append(texts[:m] + [""] * (m - len(texts[:m])))
        answers.append(row)
    return dict(
        problems=problems,
        prompt=prompt_ids.repeat_interleave(G, 0),
        prompt_mask=prompt_mask.repeat_interleave(G, 0),
        completion=out["tokens"],
        completion_mask=out["mask"],
        old_logprobs=out["logprobs"],
        entropy=out["entropy"],
        rewards=torch.from_numpy(rewards),
        answers=answers,
        num_tokens=int(mask.sum()),
    )
