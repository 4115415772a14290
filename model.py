"""
The policy: a byte-level tokenizer and a small GPT, with a plain `generate` and `score`.

Read top to bottom: Tokenizer -> attention / MLP / Block -> GPTConfig and presets -> GPT
(forward, generate, score) -> sampling and padding helpers. The model follows nanoGPT: pre-norm
blocks, causal attention through torch's scaled_dot_product_attention, learned positions, and an
lm_head tied to the token embedding.

One thing differs from nanoGPT because RL needs it: a batch mixes prompts of different lengths, so
prompts are LEFT-padded and every forward takes a padding mask; position ids count only real
tokens, so padding never shifts a sequence.

`GPT.generate` and `GPT.score` are written the plain way (every new token re-runs the whole
sequence; every row runs its own prompt). They are the reference: engine.py has the fast versions
that training and search use (a KV cache, each prompt run once for its G samples, finished rows
dropped, length-bucketed scoring), and tests/test_engine.py holds those to these.

Deliberately left out: dropout at RL time (sampled log-probs must match the scoring forward),
rotary embeddings, mixed-precision tricks (warmstart.py owns autocast), pretrained weights (nothing
may come from a hub: every model here is trained from scratch on generated data).
"""

import math
import re
from dataclasses import dataclass

import tiktoken
import torch
import torch.nn as nn
import torch.nn.functional as F

# ----------------------------------------------------------------------------------------------
# Tokenizer: the 256 bytes are the ranks (no merges), plus the special tokens our formats need.
# Built locally with tiktoken's Encoding so it works offline; named encodings are an option.
# "numbers" adds one token for every two-digit string "00".."99" (runs of digits are cut into
# pieces of at most two, as GPT-4's encoding cuts them into pieces of three): a number below 100 is
# then one token, so "a number between 33 and 53" is one choice instead of a tens and a units digit.

SPECIAL_TOKENS = ["<|bos|>", "<|answer|>", "<|sep|>", "<|eos|>"]  # bos, prompt->answer, answer->answer, end
SURROGATES = re.compile("[\ud800-\udfff]")  # code points that are not characters: no UTF-8 bytes exist for them


class Tokenizer:
    """Text <-> token ids; `name`: bytes, numbers or a tiktoken encoding (needs a download).

    What it promises:
    - encode accepts any str. Valid Unicode round-trips exactly: decode(encode(text)) == text.
    - A str that is not valid Unicode, i.e. one holding surrogate code points (U+D800..U+DFFF, alone
      or as a UTF-16 pair, e.g. from bytes read with errors="surrogateescape"), has no UTF-8 bytes:
      encode writes each surrogate as U+FFFD, the replacement character decode also writes, so
      decode(encode(text)) == SURROGATES.sub("\ufffd", text). (tiktoken alone would join a pair into
      the character it stands for in UTF-16 and replace only lone ones; one rule for all is simpler.)
    - decode accepts any ids of the vocabulary and never raises: bytes that are not valid UTF-8 (a
      policy can stop inside a multi-byte character) become U+FFFD, so its output is valid Unicode.
    - Special tokens are written as text in our formats and are always one id each.
    """

    def __init__(self, name: str = "bytes"):
        if name in ("bytes", "numbers"):
            ranks = {bytes([i]): i for i in range(256)}
            pattern = r"[\s\S]"  # one character per piece: with no merges, splitting is irrelevant
            if name == "numbers":
                ranks.update({f"{n:02d}".encode(): 256 + n for n in range(100)})  # "07" merges from "0" + "7"
                pattern = r"\d{1,2}|[\s\S]"  # digits in pieces of two ("123" -> "12", "3"), all else by character
            base = len(ranks)
        else:
            try:
                named = tiktoken.get_encoding(name)
            except Exception as e:  # offline: tiktoken tries to download the merge file
                raise RuntimeError(f"tokenizer '{name}' is unavailable ({type(e).__name__}: {e}); "
                                   f"use tokenizer=bytes or numbers, which need no download") from None
            ranks, pattern, base = named._mergeable_ranks, named._pat_str, named.n_vocab
        specials = {tok: base + i for i, tok in enumerate(SPECIAL_TOKENS)}
        self.enc = tiktoken.Encoding(name=f"vpo-{name}", pat_str=pattern, mergeable_ranks=ranks,
                                     special_tokens=specials)
        self.bos, self.answer, self.sep, self.eos = (specials[t] for t in SPECIAL_TOKENS)
        self.vocab_size = base + len(SPECIAL_TOKENS)

    def encode(self, text: str) -> list[int]:
        if not text.isascii():  # the class docstring: surrogates (not valid Unicode) encode as U+FFFD
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


# ----------------------------------------------------------------------------------------------
# The transformer

class CausalSelfAttention(nn.Module):
    def __init__(self, cfg, layer):
        super().__init__()
        assert cfg.n_embd % cfg.n_head == 0
        self.n_head, self.layer = cfg.n_head, layer
        self.qkv = nn.Linear(cfg.n_embd, 3 * cfg.n_embd, bias=cfg.bias)
        self.proj = nn.Linear(cfg.n_embd, cfg.n_embd, bias=cfg.bias)
        self.dropout = cfg.dropout

    def forward(self, x, attn_mask, cache=None):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))  # (B, nh, T, hs)
        if cache is not None:  # engine.py: keys/values of earlier tokens are kept, not recomputed
            y = cache.attend(self.layer, q, k, v, attn_mask)
        else:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask.to(q.dtype),  # q is bf16 under autocast
                                               dropout_p=self.dropout if self.training else 0.0)
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
    vocab_size: int = 260   # 256 bytes + 4 special tokens
    block_size: int = 256   # longest prompt + completion
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128
    dropout: float = 0.0    # RL assumes 0: sampled log-probs must match the scoring forward
    bias: bool = False


# Size presets: "cpu" is what the default experiment trains on a laptop in minutes. Larger is not
# always better at the same settings (the code task's warm start: docs/RESULTS.md).
PRESETS = {
    "nano": dict(n_layer=2, n_head=2, n_embd=48),
    "cpu": dict(n_layer=4, n_head=4, n_embd=128),
    "cpu_big": dict(n_layer=6, n_head=6, n_embd=192),
    "gpu": dict(n_layer=8, n_head=8, n_embd=512),
}


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
        """idx (B, T) tokens, key_mask (B, T_total) True for real tokens, positions (B, T) -> logits (B, T, V)."""
        return self.lm_head(self.hidden(idx, key_mask, positions, cache))

    def hidden(self, idx, key_mask, positions, cache=None, check=True):
        """forward() without the lm_head: the final hidden states (B, T, C). With a cache (engine.py),
        idx holds only the new tokens and key_mask covers the cached ones too. check=False skips the
        length check, which needs the host (a step captured as a CUDA graph cannot wait for it)."""
        if check and positions.max() >= self.cfg.block_size:
            raise ValueError(f"sequence of {int(positions.max()) + 1} tokens exceeds block_size={self.cfg.block_size}")
        B, T = idx.shape
        start = cache.length if cache is not None else 0
        # which keys each query sees, built once here rather than in every layer: causal within the new
        # block, everything before it, never a padded key; every query also sees itself, so a padding
        # query is not fully masked (that gives NaN, which leaks through a zero attention weight into real rows)
        query_pos = torch.arange(start, start + T, device=idx.device)[:, None]  # (T, 1)
        key_pos = torch.arange(start + T, device=idx.device)[None, :]  # (1, T_total)
        visible = ((key_pos <= query_pos) & key_mask[:, None, None, :start + T]) | (key_pos == query_pos)
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
    def generate(self, prompt, prompt_mask, num_samples, max_new_tokens, eos_id, temperature=1.0,
                 top_k=None, top_p=None, generator=None):
        """Sample `num_samples` completions for each of P left-padded prompts (P, Tp).

        Returns a dict of (P*num_samples, T) tensors: tokens (eos-padded after the end), mask (True on
        sampled tokens including the eos), logprobs and entropy of the sampling distribution before
        temperature/top-k/top-p (i.e. of the policy itself: RL uses them as the "old" policy).
        The plain way (the module docstring); engine.generate samples the same tokens.
        """
        idx = prompt.repeat_interleave(num_samples, 0)  # (B, Tp), B = P * num_samples
        key_mask = prompt_mask.repeat_interleave(num_samples, 0)
        B, device = idx.size(0), idx.device
        tokens = torch.full((B, max_new_tokens), eos_id, dtype=torch.long, device=device)
        logprobs = torch.zeros(B, max_new_tokens, device=device)
        entropy = torch.zeros(B, max_new_tokens, device=device)
        done = torch.zeros(B, dtype=torch.bool, device=device)
        for t in range(max_new_tokens):
            positions = (key_mask.long().cumsum(1) - 1).clamp(min=0)
            logits = self(idx, key_mask, positions)[:, -1].float()  # (B, V): the whole sequence, again
            uniform = torch.rand(B, 1, device=device, generator=generator)
            tok = sample_from_logits(logits, temperature, top_k, top_p, uniform=uniform)
            tok = tok.masked_fill(done, eos_id)  # an ended row only ever writes eos
            logp = F.log_softmax(logits, dim=-1)
            tokens[:, t] = tok
            logprobs[:, t] = logp.gather(-1, tok[:, None]).squeeze(-1)
            entropy[:, t] = -(logp.exp() * logp).sum(-1)
            done = done | (tok == eos_id)
            if bool(done.all()):
                break
            idx = torch.cat([idx, tok[:, None]], 1)
            key_mask = torch.cat([key_mask, torch.ones_like(key_mask[:, :1])], 1)
        return completion_dict(tokens, logprobs, entropy, eos_id)

    def score(self, prompt, prompt_mask, completion, completion_mask, check=True):
        """Log-prob and entropy of each completion token given its prompt, in one batched forward.

        prompt (B, Tp) left-padded, completion (B, Tc) right-padded, masks True on real tokens; check:
        as in hidden().
        Returns logprobs (B, Tc) and entropy (B, Tc); positions past completion_mask are garbage.
        """
        Tp = prompt.size(1)
        idx = torch.cat([prompt, completion], dim=1)  # (B, Tp + Tc)
        mask = torch.cat([prompt_mask, completion_mask], dim=1)
        positions = (mask.long().cumsum(1) - 1).clamp(min=0)
        # the hidden state at position i predicts token i+1: the last prompt token predicts the first
        # completion token, so the lm_head runs only where a completion token is predicted
        h = self.hidden(idx[:, :-1], mask[:, :-1], positions[:, :-1], check=check)[:, Tp - 1:]  # (B, Tc, C)
        return token_logprobs(self.lm_head(h), completion)


# ----------------------------------------------------------------------------------------------
# Helpers shared with engine.py

def token_logprobs(logits, tokens):
    """logits (B, T, V), tokens (B, T) -> log-prob of each token (B, T) and the entropy (B, T)."""
    logp = F.log_softmax(logits.float(), dim=-1)
    return logp.gather(-1, tokens.unsqueeze(-1)).squeeze(-1), -(logp.exp() * logp).sum(-1)


def completion_dict(tokens, logprobs, entropy, eos_id):
    """Sampled (B, max_new) tensors -> generate's result, cut to the longest completion. A row's
    completion runs up to and including its first eos."""
    ended = (tokens == eos_id).long()
    mask = (ended.cumsum(1) - ended) == 0  # (B, max_new)
    T = int(mask.sum(1).max())
    return dict(tokens=tokens[:, :T], mask=mask[:, :T], logprobs=logprobs[:, :T] * mask[:, :T],
                entropy=entropy[:, :T] * mask[:, :T])


def sample_from_logits(logits, temperature=1.0, top_k=None, top_p=None, generator=None, uniform=None,
                       check_finite=True):
    """(B, V) logits -> (B,) token ids. temperature 0 means greedy. `uniform` (B, 1) in [0, 1) are
    the random numbers to use; by default they are drawn from `generator`. check_finite=False skips
    the check that needs the host (engine.generate_static checks once, after its loop)."""
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
    # inverse-CDF sampling: one random number per row where torch.multinomial draws one per
    # vocabulary entry: far cheaper, and a caller can draw the numbers ahead (generate_static).
    # Dividing by the last entry makes the CDF end at exactly 1 > u, and a zero-probability
    # token repeats its predecessor's CDF value, so it can never be chosen.
    cdf = logits.softmax(-1).cumsum(-1)
    if check_finite and not bool(torch.isfinite(cdf[:, -1]).all()):
        raise FloatingPointError("non-finite logits while sampling (nan or inf probabilities): the policy "
                                 "diverged; stopping, the last checkpoint is kept")
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
        ids[i, T - len(s):] = torch.tensor(s, dtype=torch.long)
        mask[i, T - len(s):] = True
    return ids.to(device), mask.to(device)


def pad_right(seqs, pad_id, device="cpu"):
    """list of token lists -> (B, T) tensor right-padded with pad_id, and its mask: the reversed
    sequences left-padded, flipped back."""
    ids, mask = pad_left([s[::-1] for s in seqs], pad_id, device)
    return ids.flip(1), mask.flip(1)
