"""
The policy: a byte-level tokenizer and a small GPT that can sample fast and score completions.

Read top to bottom: Tokenizer -> LayerNorm/attention/MLP/Block -> GPTConfig and presets -> GPT
(forward, score, generate). The model follows nanoGPT: pre-norm blocks, causal attention through
torch's scaled_dot_product_attention, learned positions, and an lm_head tied to the token
embedding.

Two things differ from nanoGPT because RL needs them:
- Batches mix prompts of different lengths, so prompts are LEFT-padded and every forward takes a
  padding mask; position ids count only real tokens, so padding never shifts a sequence.
- `generate` prefills each prompt once, copies its KV cache for the G samples of that prompt,
  then decodes all rows together with a preallocated (static) cache. It returns the per-token
  log-probs and entropies of what it sampled, which RL logs and uses as the "old" policy.

Deliberately left out: dropout at RL time (set it to 0 in configs), rotary embeddings, flash
decoding, mixed-precision tricks (train.py owns autocast), loading pretrained weights (nothing may
come from a hub: every model here is trained from scratch on generated data).
"""

import math
from dataclasses import dataclass, asdict

import tiktoken
import torch
import torch.nn as nn
import torch.nn.functional as F

# ----------------------------------------------------------------------------------------------
# Tokenizer: the 256 bytes are the ranks (no merges), plus the special tokens our formats need.
# Built locally with tiktoken's Encoding so it works offline; named encodings are an option.

SPECIAL_TOKENS = ["<|bos|>", "<|answer|>", "<|sep|>", "<|eos|>"]  # bos, prompt->answer, answer->answer, end


class Tokenizer:
    def __init__(self, name: str = "bytes"):
        if name == "bytes":
            ranks = {bytes([i]): i for i in range(256)}
            pattern = r"[\s\S]"  # one character per piece: with no merges, splitting is irrelevant
            base = 256
        else:
            try:
                named = tiktoken.get_encoding(name)
            except Exception as e:  # offline: tiktoken tries to download the merge file
                raise RuntimeError(f"tokenizer '{name}' is unavailable ({type(e).__name__}: {e}); "
                                   f"use tokenizer=bytes, which needs no download") from None
            ranks, pattern, base = named._mergeable_ranks, named._pat_str, named.n_vocab
        specials = {tok: base + i for i, tok in enumerate(SPECIAL_TOKENS)}
        self.enc = tiktoken.Encoding(name=f"vpo-{name}", pat_str=pattern, mergeable_ranks=ranks,
                                     special_tokens=specials)
        self.bos, self.answer, self.sep, self.eos = (specials[t] for t in SPECIAL_TOKENS)
        self.vocab_size = base + len(SPECIAL_TOKENS)

    def encode(self, text: str) -> list[int]:
        # special tokens are written as text in our formats, so they are always allowed
        return self.enc.encode(text, allowed_special="all")

    def decode(self, ids) -> str:
        # errors="replace": a policy can emit half of a multi-byte character; never crash on it
        return self.enc.decode([int(i) for i in ids], errors="replace")

    def split_answers(self, ids) -> list[str]:
        """Completion token ids -> the texts between <|sep|> tokens, up to <|eos|>."""
        answers, current = [], []
        for t in ids:
            t = int(t)
            if t == self.eos:
                break
            if t == self.sep:
                answers.append(self.decode(current))
                current = []
            elif t not in (self.bos, self.answer):
                current.append(t)
        answers.append(self.decode(current))
        return answers


# ----------------------------------------------------------------------------------------------
# The transformer

class CausalSelfAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        assert cfg.n_embd % cfg.n_head == 0
        self.n_head = cfg.n_head
        self.qkv = nn.Linear(cfg.n_embd, 3 * cfg.n_embd, bias=cfg.bias)
        self.proj = nn.Linear(cfg.n_embd, cfg.n_embd, bias=cfg.bias)
        self.dropout = cfg.dropout

    def forward(self, x, key_mask, cache=None, layer=0):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))  # (B, nh, T, hs)
        if cache is not None:  # append the new keys/values, attend to everything cached so far
            k, v = cache.append(layer, k, v)  # (B, nh, T_total, hs)
        T_total = k.size(2)
        # causal within the new block, everything before it visible, padded keys never visible;
        # every query also sees itself, so a padding query is not fully masked (that gives NaN,
        # and a NaN value leaks through a zero attention weight into real rows)
        query_pos = torch.arange(T_total - T, T_total, device=x.device)[:, None]  # (T, 1)
        key_pos = torch.arange(T_total, device=x.device)[None, :]  # (1, T_total)
        causal, itself = key_pos <= query_pos, key_pos == query_pos  # (T, T_total)
        mask = (causal[None, None] & key_mask[:, None, None, :T_total]) | itself  # (B, 1, T, T_total)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                           dropout_p=self.dropout if self.training else 0.0)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # (B, T, C)
        return self.proj(y)


class MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd, bias=cfg.bias)
        self.proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd, bias=cfg.bias)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x):
        return self.drop(self.proj(F.gelu(self.fc(x))))


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.n_embd, bias=cfg.bias)
        self.attn = CausalSelfAttention(cfg)
        self.ln2 = nn.LayerNorm(cfg.n_embd, bias=cfg.bias)
        self.mlp = MLP(cfg)

    def forward(self, x, key_mask, cache=None, layer=0):
        x = x + self.attn(self.ln1(x), key_mask, cache, layer)
        return x + self.mlp(self.ln2(x))


@dataclass
class GPTConfig:
    vocab_size: int = 260   # 256 bytes + 4 special tokens
    block_size: int = 256   # longest prompt + completion
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128
    dropout: float = 0.0    # RL assumes 0: sampled log-probs must match the scoring forward
    bias: bool = False


# Size presets: "cpu" is what the default experiment trains on a laptop in minutes.
PRESETS = {
    "nano": dict(n_layer=2, n_head=2, n_embd=48),
    "cpu": dict(n_layer=4, n_head=4, n_embd=128),
    "gpu": dict(n_layer=8, n_head=8, n_embd=512),
}


class KVCache:
    """Preallocated keys/values for every layer; rows can be repeated after the prompt prefill."""

    def __init__(self, n_layer, batch, n_head, max_len, head_size, device, dtype):
        self.k = torch.zeros(n_layer, batch, n_head, max_len, head_size, device=device, dtype=dtype)
        self.v = torch.zeros_like(self.k)
        self.length = 0  # tokens written so far (same for every row: prompts are left-padded)

    def append(self, layer, k, v):
        """Write this layer's new keys/values after the cached ones; return all of them."""
        end = self.length + k.size(2)
        self.k[layer, :, :, self.length:end] = k
        self.v[layer, :, :, self.length:end] = v
        return self.k[layer, :, :, :end], self.v[layer, :, :, :end]

    def advance(self, T):
        self.length += T  # called once per forward, after every layer has appended

    def repeat_rows(self, times):
        """(P, ...) -> (P*times, ...): each prompt's cache copied for its `times` samples."""
        self.k = self.k.repeat_interleave(times, dim=1)
        self.v = self.v.repeat_interleave(times, dim=1)


class GPT(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.wpe = nn.Embedding(cfg.block_size, cfg.n_embd)
        self.blocks = nn.ModuleList([Block(cfg) for _ in range(cfg.n_layer)])
        self.ln_f = nn.LayerNorm(cfg.n_embd, bias=cfg.bias)
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight  # tied embeddings
        self.apply(self._init_weights)
        for name, p in self.named_parameters():  # GPT-2's scaled init of residual projections
            if name.endswith("proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * cfg.n_layer))

    @staticmethod
    def _init_weights(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)
            if getattr(m, "bias", None) is not None:
                nn.init.zeros_(m.bias)

    def num_params(self):
        return sum(p.numel() for p in self.parameters())

    def forward(self, idx, key_mask, positions, cache=None):
        """idx (B, T) tokens, key_mask (B, T_total) True for real tokens, positions (B, T) -> logits (B, T, V)."""
        if positions.max() >= self.cfg.block_size:
            raise ValueError(f"sequence of {int(positions.max()) + 1} tokens exceeds block_size={self.cfg.block_size}")
        x = self.wte(idx) + self.wpe(positions)  # (B, T, C)
        for i, block in enumerate(self.blocks):
            x = block(x, key_mask, cache, i)
        if cache is not None:
            cache.advance(idx.size(1))
        return self.lm_head(self.ln_f(x))  # (B, T, V)

    def score(self, prompt, prompt_mask, completion, completion_mask):
        """Log-prob and entropy of each completion token given its prompt, in one batched forward.

        prompt (B, Tp) left-padded, completion (B, Tc) right-padded, masks True on real tokens.
        Returns logprobs (B, Tc) and entropy (B, Tc); positions past completion_mask are garbage.
        """
        idx = torch.cat([prompt, completion], dim=1)  # (B, Tp + Tc)
        mask = torch.cat([prompt_mask, completion_mask], dim=1)
        positions = (mask.long().cumsum(1) - 1).clamp(min=0)
        Tp = prompt.size(1)
        logits = self(idx[:, :-1], mask[:, :-1], positions[:, :-1])[:, Tp - 1:].float()  # (B, Tc, V)
        logp = F.log_softmax(logits, dim=-1)
        token_logp = logp.gather(-1, completion.unsqueeze(-1)).squeeze(-1)  # (B, Tc)
        entropy = -(logp.exp() * logp).sum(-1)  # (B, Tc)
        return token_logp, entropy

    @torch.no_grad()
    def generate(self, prompt, prompt_mask, num_samples, max_new_tokens, eos_id, temperature=1.0,
                 top_k=None, top_p=None, generator=None):
        """Sample `num_samples` completions for each of P left-padded prompts (P, Tp).

        Returns a dict of (P*num_samples, T) tensors: tokens (eos-padded after the end), mask (True on
        sampled tokens including the eos), logprobs and entropy of the sampling distribution
        (before temperature/top-k/top-p are applied, i.e. of the policy itself).
        """
        P, Tp = prompt.shape
        B = P * num_samples
        cfg = self.cfg
        if Tp + max_new_tokens > cfg.block_size:
            raise ValueError(f"prompt ({Tp}) + max_new_tokens ({max_new_tokens}) exceeds block_size={cfg.block_size}")
        dtype = next(self.parameters()).dtype
        cache = KVCache(cfg.n_layer, P, cfg.n_head, Tp + max_new_tokens, cfg.n_embd // cfg.n_head, prompt.device, dtype)
        key_mask = torch.ones(P, Tp + max_new_tokens, dtype=torch.bool, device=prompt.device)
        key_mask[:, :Tp] = prompt_mask
        positions = (prompt_mask.long().cumsum(1) - 1).clamp(min=0)  # (P, Tp)
        logits = self(prompt, key_mask, positions, cache)[:, -1]  # prefill once per prompt: (P, V)
        # share the prompt's cache and last logits across its samples instead of recomputing them
        cache.repeat_rows(num_samples)
        key_mask = key_mask.repeat_interleave(num_samples, dim=0)  # (B, Tp + max_new)
        logits = logits.repeat_interleave(num_samples, dim=0)  # (B, V)
        next_pos = positions[:, -1:].repeat_interleave(num_samples, dim=0) + 1  # (B, 1)

        tokens = torch.full((B, max_new_tokens), eos_id, dtype=torch.long, device=prompt.device)
        logprobs = torch.zeros(B, max_new_tokens, device=prompt.device)
        entropy = torch.zeros(B, max_new_tokens, device=prompt.device)
        done = torch.zeros(B, dtype=torch.bool, device=prompt.device)
        lengths = torch.full((B,), max_new_tokens, dtype=torch.long, device=prompt.device)
        for t in range(max_new_tokens):
            logp = F.log_softmax(logits.float(), dim=-1)  # (B, V)
            tok = sample_from_logits(logits.float(), temperature, top_k, top_p, generator)  # (B,)
            tok = torch.where(done, torch.full_like(tok, eos_id), tok)
            tokens[:, t] = tok
            logprobs[:, t] = logp.gather(-1, tok[:, None]).squeeze(-1)
            entropy[:, t] = -(logp.exp() * logp).sum(-1)
            just_ended = (tok == eos_id) & ~done
            lengths = torch.where(just_ended, torch.full_like(lengths, t + 1), lengths)
            done |= just_ended
            if bool(done.all()) or t == max_new_tokens - 1:
                break  # stop as soon as every row has ended: no wasted decode steps
            logits = self(tok[:, None], key_mask, next_pos, cache)[:, -1]
            next_pos = next_pos + 1
        mask = torch.arange(max_new_tokens, device=prompt.device)[None, :] < lengths[:, None]
        T = int(lengths.max())
        return dict(tokens=tokens[:, :T], mask=mask[:, :T], logprobs=logprobs[:, :T] * mask[:, :T],
                    entropy=entropy[:, :T] * mask[:, :T])


def sample_from_logits(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    """(B, V) logits -> (B,) token ids. temperature 0 means greedy."""
    if temperature == 0:
        return logits.argmax(-1)
    logits = logits / temperature
    if top_k is not None and top_k < logits.size(-1):
        kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p is not None and top_p < 1.0:
        sorted_logits, order = torch.sort(logits, descending=True, dim=-1)
        cum = sorted_logits.softmax(-1).cumsum(-1)
        drop = cum - sorted_logits.softmax(-1) > top_p  # keep the smallest prefix reaching top_p
        sorted_logits = sorted_logits.masked_fill(drop, float("-inf"))
        logits = torch.full_like(logits, float("-inf")).scatter(-1, order, sorted_logits)
    probs = logits.softmax(-1)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


def pad_left(seqs, pad_id, device="cpu"):
    """list of token lists -> (B, T) tensor left-padded with pad_id, and its mask."""
    T = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), T), pad_id, dtype=torch.long)
    mask = torch.zeros(len(seqs), T, dtype=torch.bool)
    for i, s in enumerate(seqs):
        ids[i, T - len(s):] = torch.tensor(s, dtype=torch.long)
        mask[i, T - len(s):] = True
    return ids.to(device), mask.to(device)


def pad_right(seqs, pad_id, device="cpu"):
    """list of token lists -> (B, T) tensor right-padded with pad_id, and its mask."""
    T = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), T), pad_id, dtype=torch.long)
    mask = torch.zeros(len(seqs), T, dtype=torch.bool)
    for i, s in enumerate(seqs):
        ids[i, :len(s)] = torch.tensor(s, dtype=torch.long)
        mask[i, :len(s)] = True
    return ids.to(device), mask.to(device)


def config_dict(cfg: GPTConfig):
    return asdict(cfg)
