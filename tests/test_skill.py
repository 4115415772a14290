"""The mutation skill the search relies on: a policy that writes the warm start's demonstrations
(the edit skill intact) drives a search whose every child is valid, so children go invalid only when
a policy has lost that skill (what parent_replay guards against, tests/test_train.py)."""

import random
import re

import torch

from codetask import CodeTask
from evolve import evolve_many, search_problems
from model import Tokenizer
from policy import Policy
from train import EVALUATION as SETTINGS
from train import resolve_config


class Demonstrator:
    """engine.generate's stand-in: each prompt answered as the warm start's demonstrator would, a
    consistent program for a plain prompt, an edit of the best parent for a prompt with parents."""

    def __init__(self, task, tok, problems):
        self.task, self.tok, self.rng = task, tok, random.Random(0)
        # the prompt text names its problem
        self.by_examples = {task.prompt(p): p for p in problems}

    def answer(self, text):
        # after "m|"
        body = text.removeprefix("<|bos|>").split("|", 1)[1].removesuffix("<|answer|>")
        examples, _, parents = body.partition(" from ")
        problem = self.by_examples[examples]
        shown = (
            [tuple(self.task.thresholds_of(part)) for part in parents.split(" ; ")]
            if parents
            else None
        )
        return self.task.demonstration(problem, 1, self.rng, parents=shown)[0]

    def __call__(self, model, prompt, prompt_mask, num_samples, max_new_tokens, decoding, **kwargs):
        texts = [self.tok.decode(p[m]) for p, m in zip(prompt, prompt_mask)]
        rows = [
            self.tok.encode(self.answer(t) + "<|eos|>") for t in texts for _ in range(num_samples)
        ]
        width = max(map(len, rows))
        tokens = torch.tensor([r + [decoding.eos_id] * (width - len(r)) for r in rows])
        mask = torch.tensor([[j < len(r) for j in range(width)] for r in rows])
        zeros = torch.zeros(tokens.shape)
        return dict(tokens=tokens, mask=mask, logprobs=zeros, entropy=zeros)


def test_a_policy_with_the_edit_skill_intact_writes_only_valid_children(monkeypatch):
    import engine

    task = CodeTask(
        thresholds=3, domain=64, window_share=0.5, fixed_width=True, noise=0.0, edits=True
    )
    tok = Tokenizer()
    problems = search_problems(task, "train", 4, 2000, seed=0)
    demonstrator = Demonstrator(task, tok, problems)
    monkeypatch.setattr(engine, "generate", demonstrator)
    cfg = resolve_config(overrides=["task=code", "block_size=224"])
    settings = dict(SETTINGS, evo_budget=40, evo_islands=2, evo_migrate_every=20)
    # one child a call; the model is never read: the demonstrator writes every answer
    policy = Policy.from_config(None, tok, cfg, "cpu", answers_per_rollout=1)
    runs = evolve_many(policy, task, problems, settings, seed=0)
    children = sum(r["mutations"]["children"] for r in runs)
    assert children > 50  # most of the budget was children written from parents
    assert sum(r["mutations"]["invalid"] for r in runs) == 0
    # and the edits are what the search needs: children improve on their parent, as the warm start's
    # do
    assert sum(r["mutations"]["improved"] for r in runs) > 0.1 * children
    assert all(
        re.fullmatch(r"\(\+ \(< x \d\d\) \(\+ \(< x \d\d\) \(< x \d\d\)\)\)", r["best"])
        for r in runs
    )
