"""
The policy: a byte-level tokenizer and a small GPT (nanoGPT's: pre-norm blocks, SDPA attention,
learned positions, tied lm_head), with a plain `generate` and `score`.

One thing differs from nanoGPT because RL needs it: a batch mixes prompts of different lengths, so
prompts are LEFT-padded and every forward takes a padding mask; position ids count only real
tokens, so padding never shifts a sequence.

`GPT.generate` and `GPT.score` are the plain reference (every new token re-runs the whole sequence);
engine.py has the fast versions that training and search use, held to these by tests/test_engine.py.

Deliberately left out: dropout at RL time (sampled log-probs must match the scoring forward), rotary
embeddings, pretrained weights (every model here is trained from scratch on generated data).
"""

import math
import re
from dataclasses import dataclass

import tiktoken
import torch
import torch.nn as nn
import torch.nn.functional as F

# ---- Tokenizer: the 256 bytes (no merges) and our special tokens, via tiktoken (offline) ----
# "numbers" adds one token per "00".."99": a number below 100 is one choice, not two digits

# bos, prompt->answer, answer->answer, end
SPECIAL_TOKENS = ["<|bos|>", "<|answer|>", "<|sep|>", "<|eos|>"]
# code points that are not characters: no UTF-8 bytes exist for them
SURROGATES = re.compile("[\ud800-\udfff]")


class Tokenizer:
    """Text <-> token ids; `name`: bytes, numbers, maze (numbers, and a token per maze move with the
    cell it reaches: "R34") or a tiktoken encoding (needs a download).
    encode accepts any str: valid Unicode round-trips; surrogates (no UTF-8 bytes) become U+FFFD, so
    decode(encode(text)) == SURROGATES.sub("\ufffd", text). decode never raises: invalid UTF-8 (a
    policy can stop inside a character) becomes U+FFFD. Special tokens are always one id each."""

    def __init__(self, name: str = "bytes"):
        if name in ("bytes", "numbers", "maze"):
            ranks = {bytes([i]): i for i in range(256)}
            pattern = r"[\s\S]"  # one character per piece: with no merges, splitting is irrelevant
            if name in ("numbers", "maze"):
                # "07" merges from "0" + "7"
                ranks.update({f"{n:02d}".encode(): 256 + n for n in range(100)})
                # digits in pieces of two ("123" -> "12", "3"), all else by character
                pattern = r"\d{1,2}|[\s\S]"
            if name == "maze":
                # a maze move and the cell it reaches, "R34", as one token: merges from "R" + "34"
                moves = [
                    f"{m}{r}{c}".encode() for m in "UDLR" for r in range(10) for c in range(10)
                ]
                ranks.update({move: 356 + i for i, move in enumerate(moves)})
                pattern = r"[UDLR]\d\d|\d{1,2}|[\s\S]"
            base = len(ranks)
        else:
            try:
                named = tiktoken.get_encoding(name)
            except Exception as e:  # offline: tiktoken tries to download the merge file
                first = (str(e).strip().splitlines() or [""])[0]  # tiktoken's run over lines
                raise RuntimeError(
                    f"tokenizer '{name}' is unavailable ({type(e).__name__}: {first}); "
                    f"use tokenizer=bytes, numbers or maze, which need no download"
                ) from None
            ranks, pattern, base = named._mergeable_ranks, named._pat_str, named.n_vocab
        specials = {tok: base + i for i, tok in enumerate(SPECIAL_TOKENS)}
        self.enc = tiktoken.Encoding(
            name=f"vpo-{name}", pat_str=pattern, mergeable_ranks=ranks, special_tokens=specials
        )
        self.bos, self.answer, self.sep, self.eos = (specials[t] for t in SPECIAL_TOKENS)
        self.vocab_size = base + len(SPECIAL_TOKENS)

    def encode(self, text: str) -> list[int]:
        if not text.isascii():  # surrogates encode as U+FFFD (the class docstring)
            text = SURROGATES.sub("\ufffd", text)
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


# ---- The transformer -----------------------------------------------------------------------------


class SequenceTooLong(ValueError):
    """A prompt and its completion longer than the model's block_size: a setting too small for the
    task's prompts, which the commands report in one line as they report a bad setting."""


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg, layer):
        super().__init__()
        assert cfg.n_embd % cfg.n_head == 0
        self.n_head = cfg.n_head
        self.layer = layer
        self.qkv = nn.Linear(cfg.n_embd, 3 * cfg.n_embd, bias=cfg.bias)
        self.proj = nn.Linear(cfg.n_embd, cfg.n_embd, bias=cfg.bias)
        self.dropout = cfg.dropout

    def forward(self, x, attn_mask, cache=None):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        # (B, nh, T, hs)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        if cache is not None:  # engine.py: keys/values of earlier tokens are kept, not recomputed
            y = cache.attend(self.layer, q, k, v, attn_mask)
        else:
            dropout = self.dropout if self.training else 0.0
            mask = attn_mask.to(q.dtype)  # q is bf16 under autocast
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout)
        y = y.transpose(1, 2).reshape(B, T, C)  # (B, T, C)
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
    def __init__(self, cfg, layer):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.n_embd, bias=cfg.bias)
        self.attn = CausalSelfAttention(cfg, layer)
        self.ln2 = nn.LayerNorm(cfg.n_embd, bias=cfg.bias)
        self.mlp = MLP(cfg)

    def forward(self, x, attn_mask, cache=None):
        x = x + self.attn(self.ln1(x), attn_mask, cache)
        return x + self.mlp(self.ln2(x))


@dataclass
class GPTConfig:
    vocab_size: int = 260  # 256 bytes + 4 special tokens
    block_size: int = 256  # longest prompt + completion
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128
    dropout: float = 0.0  # RL assumes 0: sampled log-probs must match the scoring forward
    bias: bool = False


# "cpu" trains on a laptop in minutes; larger is not always better (docs/RESULTS.md)
PRESETS = {
    "nano": dict(n_layer=2, n_head=2, n_embd=48),
    "micro": dict(n_layer=4, n_head=4, n_embd=64),  # the maze's base: deep enough to track a cell
    "cpu": dict(n_layer=4, n_head=4, n_embd=128),
    "cpu_big": dict(n_layer=6, n_head=6, n_embd=192),
    "gpu": dict(n_layer=8, n_head=8, n_embd=512),
}


@dataclass
class Decoding:
    """How a completion is drawn: the token that ends it, and which tokens each step may pick."""

    eos_id: int
    temperature: float = 1.0  # 0: greedy
    top_k: int | None = None  # None: every token
    top_p: float | None = None  # None: no nucleus
    generator: torch.Generator | None = None  # the random stream (None: torch's default)

    def pick(self, logits, uniform, check_finite=True):
        """(B, V) logits and (B, 1) random numbers -> (B,) token ids (sample_from_logits)."""
        return sample_from_logits(
            logits,
            self.temperature,
            self.top_k,
            top_p=self.top_p,
            uniform=uniform,
            check_finite=check_finite,
        )


class GPT(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.wpe = nn.Embedding(cfg.block_size, cfg.n_embd)
        self.blocks = nn.ModuleList([Block(cfg, i) for i in range(cfg.n_layer)])
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
        """idx (B, T), key_mask (B, T_total) True for real tokens, positions (B, T) -> logits (B, T,
        V)."""
        return self.lm_head(self.hidden(idx, key_mask, positions, cache=cache))

    def hidden(self, idx, key_mask, positions, cache=None, check=True):
        """forward() without the lm_head (B, T, C). With a cache (engine.py) idx holds only the new
        tokens; check=False skips the length check, which a CUDA graph cannot wait for."""
        if check and positions.max() >= self.cfg.block_size:
            raise SequenceTooLong(
                f"sequence of {int(positions.max()) + 1} tokens exceeds "
                f"block_size={self.cfg.block_size}"
            )
        B, T = idx.shape
        start = cache.length if cache is not None else 0
        # causal, never a padded key, always itself (a fully masked padding query's NaN leaks into
        # real rows)
        query_pos = torch.arange(start, start + T, device=idx.device)[:, None]  # (T, 1)
        key_pos = torch.arange(start + T, device=idx.device)[None, :]  # (1, T_total)
        visible = ((key_pos <= query_pos) & key_mask[:, None, None, : start + T]) | (
            key_pos == query_pos
        )
        # as an additive float mask: SDPA would otherwise convert a boolean mask in every layer
        attn_mask = torch.zeros(visible.shape, device=idx.device, dtype=self.wte.weight.dtype)
        attn_mask.masked_fill_(~visible, float("-inf"))  # (B, 1, T, T_total)
        x = self.wte(idx) + self.wpe(positions)  # (B, T, C)
        for block in self.blocks:
            x = block(x, attn_mask, cache)
        if cache is not None:
            cache.advance(T)
        return self.ln_f(x)

    @torch.no_grad()
    def generate(self, prompt, prompt_mask, num_samples, max_new_tokens, decoding):
        """Sample `num_samples` completions for each of P left-padded prompts (P, Tp), the plain way
        -> dict of (P*num_samples, T): tokens (eos-padded), mask (True on sampled tokens, eos
        included), logprobs and entropy of the policy itself, before temperature/top-k/top-p (RL's
        "old" policy). decoding: a Decoding (when to stop, which tokens may be drawn).
        """
        eos_id = decoding.eos_id
        idx = prompt.repeat_interleave(num_samples, 0)  # (B, Tp), B = P * num_samples
        key_mask = prompt_mask.repeat_interleave(num_samples, 0)
        B = idx.size(0)
        device = idx.device
        tokens = torch.full((B, max_new_tokens), eos_id, dtype=torch.long, device=device)
        logprobs = torch.zeros(B, max_new_tokens, device=device)
        entropy = torch.zeros(B, max_new_tokens, device=device)
        done = torch.zeros(B, dtype=torch.bool, device=device)
        for t in range(max_new_tokens):
            positions = positions_of(key_mask)
            # (B, V): the whole sequence, again
            logits = self(idx, key_mask, positions)[:, -1].float()
            uniform = torch.rand(B, 1, device=device, generator=decoding.generator)
            tok = decoding.pick(logits, uniform)
            tok = tok.masked_fill(done, eos_id)  # an ended row only ever writes eos
            logp = F.log_softmax(logits, dim=-1)
            tokens[:, t] = tok
            logprobs[:, t] = logp.gather(-1, tok[:, None]).squeeze(-1)
            entropy[:, t] = entropy_of(logp)
            done = done | (tok == eos_id)
            if bool(done.all()):
                break
            idx = torch.cat([idx, tok[:, None]], 1)
            key_mask = torch.cat([key_mask, torch.ones_like(key_mask[:, :1])], 1)
        return completion_dict(tokens, logprobs, entropy, eos_id=eos_id)

    def score(self, prompt, prompt_mask, completion, completion_mask, check=True):
        """Log-prob and entropy (B, Tc) of each completion token (right-padded, after its
        left-padded prompt), in one forward; positions past completion_mask are garbage."""
        Tp = prompt.size(1)
        idx = torch.cat([prompt, completion], dim=1)  # (B, Tp + Tc)
        mask = torch.cat([prompt_mask, completion_mask], dim=1)
        positions = positions_of(mask)
        # position i predicts token i+1: the lm_head runs only where a completion token is predicted
        # (B, Tc, C)
        h = self.hidden(idx[:, :-1], mask[:, :-1], positions[:, :-1], check=check)[:, Tp - 1 :]
        return token_logprobs(self.lm_head(h), completion)


# ---- Helpers shared with engine.py ---------------------------------------------------------------


def build_model(preset, block_size, vocab_size, device):
    """A freshly initialized GPT of a size preset (PRESETS), on `device`."""
    config = GPTConfig(vocab_size=vocab_size, block_size=block_size, **PRESETS[preset])
    return GPT(config).to(device)


def autocast(dtype, device):
    """bf16 autocast for dtype "bfloat16", else a context that changes nothing (one `with` for
    both)."""
    if dtype == "bfloat16":
        return torch.autocast(
            device_type="cuda" if device.startswith("cuda") else "cpu", dtype=torch.bfloat16
        )
    return torch.autocast(device_type="cpu", enabled=False)


def entropy_of(logp):
    """Log-probabilities (..., V) -> the entropy of each distribution (...)."""
    return -(logp.exp() * logp).sum(-1)


def positions_of(mask):
    """(B, T) True on real tokens -> position ids that count only real tokens (padding gets 0)."""
    return (mask.long().cumsum(1) - 1).clamp(min=0)


def token_logprobs(logits, tokens):
    """logits (B, T, V), tokens (B, T) -> log-prob of each token (B, T) and the entropy (B, T)."""
    logp = F.log_softmax(logits.float(), dim=-1)
    return logp.gather(-1, tokens.unsqueeze(-1)).squeeze(-1), entropy_of(logp)


def completion_dict(tokens, logprobs, entropy, eos_id):
    """Sampled (B, max_new) tensors -> generate's result, each row up to its first eos included."""
    ended = (tokens == eos_id).long()
    mask = (ended.cumsum(1) - ended) == 0  # (B, max_new)
    T = int(mask.sum(1).max())
    return dict(
        tokens=tokens[:, :T],
        mask=mask[:, :T],
        logprobs=logprobs[:, :T] * mask[:, :T],
        entropy=entropy[:, :T] * mask[:, :T],
    )


def sample_from_logits(
    logits, temperature=1.0, top_k=None, top_p=None, generator=None, uniform=None, check_finite=True
):
    """(B, V) logits -> (B,) token ids; temperature 0 is greedy. `uniform` (B, 1): the random
    numbers (default: drawn from `generator`); check_finite=False skips the check that needs the
    host."""
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
    # inverse-CDF sampling: one random number per row (multinomial draws one per vocabulary entry),
    # drawable ahead; the CDF ends at exactly 1 > u, and a zero-probability token is never chosen
    cdf = logits.softmax(-1).cumsum(-1)
    if check_finite and not bool(torch.isfinite(cdf[:, -1]).all()):
        raise FloatingPointError(
            "non-finite logits while sampling (nan or inf probabilities): the policy "
            "diverged; stopping, the last checkpoint is kept"
        )
    cdf = cdf / cdf[:, -1:]
    if uniform is None:
        uniform = torch.rand(len(cdf), 1, device=cdf.device, generator=generator)
    return torch.searchsorted(cdf, uniform, right=True).squeeze(-1)


def pad_left(seqs, pad_id, device="cpu"):
    """list of token lists -> (B, T) tensor left-padded with pad_id, and its mask."""
    T = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), T), pad_id, dtype=torch.long)
    mask = torch.zeros(len(seqs), T, dtype=torch.bool)
    for i, s in enumerate(seqs):
        ids[i, T - len(s) :] = torch.tensor(s, dtype=torch.long)
        mask[i, T - len(s) :] = True
    return ids.to(device), mask.to(device)


def pad_right(seqs, pad_id, device="cpu"):
    """list of token lists -> (B, T) tensor right-padded with pad_id, and its mask."""
    ids, mask = pad_left([s[::-1] for s in seqs], pad_id, device)
    return ids.flip(1), mask.flip(1)
