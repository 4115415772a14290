"""
The policy as sampling sees it: a model, its tokenizer, where it runs, how many answers a prompt
asks for, how tokens are drawn and the random stream they are drawn from. Training, evaluation and
search hand a `Policy` around instead of the same six arguments; `dataclasses.replace` gives a
variant (a search's temperature, pools of one answer a rollout) that shares the model.

Deliberately left out: batching across policies, a server, sampling settings per prompt.
"""

import dataclasses
from dataclasses import dataclass

import torch

import engine
from model import GPT, Decoding, Tokenizer


@dataclass
class Policy:
    """A model and how it is asked: m answers a prompt, sampled with these settings from this
    stream."""

    model: GPT
    tok: Tokenizer
    device: str = "cpu"
    answers_per_rollout: int = 1  # m: the answers one prompt asks for (a set method's m > 1)
    temperature: float = 1.0  # 1: the policy's own probabilities
    top_k: int = 0  # sample among the k likeliest tokens only (0: off)
    top_p: float = 1.0  # nucleus sampling (1.0: off)
    goal_conditioned: bool = False  # its prompts carry a weighting (the goal_conditioned baseline)
    cuda_graph: bool = False  # on CUDA, sample as a CUDA graph (engine.generate_static)
    generator: torch.Generator | None = None  # on `device`: every token drawn

    @classmethod
    def from_config(cls, model, tok, cfg, device, answers_per_rollout):
        """A run's policy: its sampling settings, its random stream seeded by cfg["seed"]."""
        policy = cls(
            model,
            tok,
            device=device,
            answers_per_rollout=answers_per_rollout,
            temperature=cfg["temperature"],
            top_k=cfg["top_k"],
            top_p=cfg["top_p"],
            goal_conditioned=cfg["algo"] == "goal_conditioned",
            cuda_graph=cfg.get("cuda_graph", False),  # .get: checkpoints older than the setting
        )
        return policy.seeded(cfg["seed"])

    def seeded(self, seed):
        """The same policy with a fresh random stream: the same draws every time it is asked."""
        generator = torch.Generator(device=self.device).manual_seed(seed)
        return dataclasses.replace(self, generator=generator)

    def sample(self, prompt_ids, prompt_mask, num_samples, max_new_tokens):
        """num_samples completions per left-padded prompt (engine.py) -> tokens, mask, logprobs,
        entropy (B = P * num_samples rows)."""
        decoding = Decoding(
            eos_id=self.tok.eos,
            temperature=self.temperature,
            top_k=self.top_k or None,
            top_p=self.top_p if self.top_p < 1 else None,  # 1 or 0: off
            generator=self.generator,
        )
        on_cuda = str(self.device).startswith("cuda")
        sampler = engine.generate_static if self.cuda_graph and on_cuda else engine.generate
        return sampler(
            self.model,
            prompt_ids,
            prompt_mask,
            num_samples=num_samples,
            max_new_tokens=max_new_tokens,
            decoding=decoding,
        )
