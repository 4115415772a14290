"""
Rollouts: the prompt and completion formats, sampling G rollouts per problem, and turning each
rollout into reward vectors. Training (train.py), evaluation and search (search.py) all sample
through `sample_rollouts`, so they see exactly the same formats.

A prompt states how many answers it wants, `<|bos|>3|likes qxmz<|answer|>`, so one warm-start model
serves the single-answer methods (m = 1) and the set methods (m > 1). A completion is the answers
separated by <|sep|> and closed by <|eos|>: `a1<|sep|>a2<|sep|>a3<|eos|>`.

Two scoring conventions, on purpose (`score_answers`):
- training: a repeated answer inside a rollout scores zero, and so does a missing one. A repeat
  adds nothing to a set's best-of-m, and Multi-RLVR's sum would otherwise pay the policy for
  writing the same thing twice. This is part of the methods.
- evaluation (as_written=True): every answer scores what it is worth, repeats included, as the VPO
  authors' evaluation does; a zero row in a pool would inflate its diversity.

Deliberately left out: chat templates, system prompts, stop strings other than <|eos|>.
"""

import numpy as np
import torch

import engine
from model import pad_left


def rollout_prompt(task, problem, m, parents=None, goal=None):
    """The full prompt text, asking for m answers."""
    return f"<|bos|>{m}|{task.prompt(problem, parents=parents, goal=goal)}<|answer|>"


def rollout_text(answers):
    """Answers -> the completion text the policy should write: a1<|sep|>a2<|sep|>a3<|eos|>."""
    return "<|sep|>".join(answers) + "<|eos|>"


def score_answers(task, problem, answers, m, as_written=False, memo=None):
    """The first m answers of a rollout -> (m, D) reward rows. A missing answer gets the zero row;
    so does a repeat (by the task's answer_key) unless as_written. Answers past the m-th are ignored.
    memo: a dict of this problem's rewards by answer text, shared by its rollouts (rewards are
    deterministic, so an answer sampled twice is run once: a third of the code task's reward time)."""
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


def max_completion_tokens(task, m):
    """The longest completion sampling allows: m answers, each with its separator or end token."""
    return m * task.max_answer_tokens + 1


def sample_rollouts(model, tok, task, problems, m, group_size, cfg, generator, device,
                    parents=None, goals=None, as_written=False):
    """Sample `group_size` rollouts of m answers for each problem and score them (for training,
    or as written for evaluation).

    parents: per problem, the parents of the code task's mutation prompt, (text, score) pairs worst to
    best (or None); what the policy writes from them is read as task.child_program (an edit applied);
    goals: per problem, a weighting written into the prompt (goal-conditioned GRPO), or None.
    Returns a dict: the problems, prompt/completion tensors and masks (B = P * G rows, on `device`) for the
    update, old_logprobs and entropy (B, T) from sampling, rewards (P, G, m, D) float32 on the CPU,
    answers (P lists of G lists of m strings, "" where missing) and the token count.
    """
    prompts = [tok.encode(rollout_prompt(task, p, m, parents=parents[i] if parents else None,
                                         goal=goals[i] if goals is not None else None))
               for i, p in enumerate(problems)]
    prompt_ids, prompt_mask = pad_left(prompts, tok.eos, device)
    out = engine.sample(cfg, model, prompt_ids, prompt_mask, group_size, max_completion_tokens(task, m), tok.eos,
                        generator)
    tokens, mask = out["tokens"].cpu(), out["mask"].cpu()  # one copy each, not one per row
    G = group_size
    rewards = np.zeros((len(problems), G, m, task.dim), dtype=np.float32)
    answers = []
    for i, problem in enumerate(problems):
        row, memo = [], {}
        for g in range(G):
            texts = tok.split_answers(tokens[i * G + g][mask[i * G + g]].tolist())
            if parents and parents[i]:  # children from parents: the programs they stand for (edits applied)
                texts = [task.child_program(t, parents[i]) for t in texts]
            rewards[i, g] = score_answers(task, problem, texts, m, as_written, memo)
            row.append(texts[:m] + [""] * (m - len(texts[:m])))
        answers.append(row)
    return dict(problems=problems, prompt=prompt_ids.repeat_interleave(G, 0), prompt_mask=prompt_mask.repeat_interleave(G, 0),
                completion=out["tokens"], completion_mask=out["mask"], old_logprobs=out["logprobs"],
                entropy=out["entropy"], rewards=torch.from_numpy(rewards), answers=answers,
                num_tokens=int(mask.sum()))
