"""
Would a decode attention that reads less memory reach 2x of HF generate? A measurement for the speed
issue, not part of training: at tools/bench.py --trl's shape (8 prompts of 32 tokens x 8 samples x 48
new tokens, cpu preset) the cache attention is bound by reading the cached keys and values, and a
prompt's 8 samples read the same prompt keys 8 times. SharedPromptCache keeps them once per prompt:
the prompt part of the scores is one matmul per prompt and head over its G queries, the generated
part stays per row, and the softmax runs over both. That sums in another order than engine.KVCache,
so its numbers differ in the last bits: it is NOT exact, and therefore not in engine.py (every
committed result would move). Prints the median seconds of both samplers, alternated, and how far
their tokens and log-probs are apart.

    python tools/attention_probe.py              # --repeats 7

Left out: dropping finished rows (at this shape no rollout ends early), a bf16 cache (batched bf16
matmuls of these shapes ran slower than fp32 on the VM, tried), GPUs.
"""

import argparse
import math
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import engine  # noqa: E402
from model import GPT, GPTConfig, PRESETS  # noqa: E402


class SharedPromptCache(engine.KVCache):
    """engine.KVCache whose prompt keys/values stay one copy per prompt after the prefill."""

    def repeat_rows(self, times):
        L, P, nh, max_len, hs = self.k.shape
        self.samples, self.prompt_len = times, self.length
        self.prompt_k, self.prompt_v = self.k[:, :, :, :self.length], self.v[:, :, :, :self.length]  # (L, P, nh, Tp, hs)
        self.k = torch.zeros(L, P * times, nh, max_len - self.length, hs, dtype=self.k.dtype, device=self.k.device)
        self.v = torch.zeros_like(self.k)  # the generated tokens' keys/values, per row

    def keep_rows(self, rows):
        raise NotImplementedError("the probe samples with drop_finished=False")

    def attend(self, layer, q, k, v, attn_mask):
        if not hasattr(self, "samples"):  # the prefill
            return super().attend(layer, q, k, v, attn_mask)
        t = self.length - self.prompt_len  # this token's index among the generated ones
        self.k[layer, :, :, t:t + 1], self.v[layer, :, :, t:t + 1] = k, v
        B, nh, _, hs = q.shape
        P, G, Tp = B // self.samples, self.samples, self.prompt_len
        by_prompt = q.view(P, G, nh, hs).transpose(1, 2)  # (P, nh, G, hs)
        prompt_scores = by_prompt @ self.prompt_k[layer].transpose(2, 3) / math.sqrt(hs)  # (P, nh, G, Tp)
        prompt_scores = prompt_scores + attn_mask[:, :, :, :Tp].view(P, G, 1, Tp).transpose(1, 2)
        gen_k, gen_v = self.k[layer, :, :, :t + 1].flatten(0, 1), self.v[layer, :, :, :t + 1].flatten(0, 1)
        gen_scores = torch.bmm(q.flatten(0, 1), gen_k.transpose(1, 2)) / math.sqrt(hs)  # (B*nh, 1, t+1)
        gen_scores = gen_scores.view(P, G, nh, t + 1).transpose(1, 2)  # (P, nh, G, t+1)
        att = torch.cat([prompt_scores, gen_scores], -1).softmax(-1)
        from_prompt = (att[..., :Tp] @ self.prompt_v[layer]).transpose(1, 2).reshape(B, nh, 1, hs)
        from_generated = torch.bmm(att[..., Tp:].transpose(1, 2).reshape(B * nh, 1, t + 1), gen_v)
        return from_prompt + from_generated.view(B, nh, 1, hs)


def sample(model, prompt, prompt_mask, samples, new_tokens, shared):
    """engine.generate with the probe's cache (shared) or the engine's, every rollout new_tokens long."""
    real = engine.prefill
    if shared:
        engine.prefill = lambda *args: real(*args[:-1], SharedPromptCache)
    try:
        return engine.generate(model, prompt, prompt_mask, samples, new_tokens, -1, drop_finished=False,
                               generator=torch.Generator().manual_seed(1))
    finally:
        engine.prefill = real


def probe(preset="cpu", P=8, G=8, prompt_len=32, new_tokens=48, repeats=7):
    """-> {"engine_s", "shared_s" (medians), "token_agreement", "max_logprob_diff"}."""
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=260, block_size=prompt_len + new_tokens, **PRESETS[preset])).eval()
    prompt = torch.randint(0, 256, (P, prompt_len))
    prompt_mask = torch.ones(P, prompt_len, dtype=torch.bool)
    seconds, outs = {False: [], True: []}, {}
    with torch.no_grad():
        for shared in (False, True):
            outs[shared] = sample(model, prompt, prompt_mask, G, new_tokens, shared)  # warm-up, and the tokens
        for _ in range(repeats):
            for shared in (False, True):  # alternated, so a drifting machine favours neither
                t0 = time.perf_counter()
                sample(model, prompt, prompt_mask, G, new_tokens, shared)
                seconds[shared].append(time.perf_counter() - t0)
    return {"engine_s": statistics.median(seconds[False]), "shared_s": statistics.median(seconds[True]),
            "token_agreement": float((outs[False]["tokens"] == outs[True]["tokens"]).float().mean()),
            "max_logprob_diff": float((outs[False]["logprobs"] - outs[True]["logprobs"]).abs().max())}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].strip())
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    torch.set_num_threads(1)
    r = probe(repeats=args.repeats)
    print(f"engine.generate {r['engine_s']:.4f} s, prompt keys once per prompt {r['shared_s']:.4f} s "
          f"({1 - r['shared_s'] / r['engine_s']:.0%} less); tokens agree {r['token_agreement']:.3f}, "
          f"log-probs differ by up to {r['max_logprob_diff']:.1e}")
