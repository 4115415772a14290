"""
The fast sampler and scorer: model.GPT.generate and model.GPT.score, computed faster (a KV cache,
one prefill per prompt, ended rows dropped; generate_static: fixed shapes, one CUDA graph replay per
token; score: each prompt once, completions in length buckets). A student can skip this file:
tests/test_engine.py holds both to the plain versions; tools/bench.py --naive times each trick.

Deliberately left out: torch.compile of the decode step (slower on CPU: docs/RESULTS.md), paged or
quantized caches, speculative decoding.
"""

import math

import torch
import torch.nn.functional as F

from model import SequenceTooLong, completion_dict, entropy_of, positions_of, token_logprobs


class KVCache:
    """Preallocated keys/values for every layer; rows repeated after the prefill, dropped once
    ended."""

    def __init__(self, n_layer, batch, n_head, max_len, head_size, device, dtype):
        self.k = torch.zeros(n_layer, batch, n_head, max_len, head_size, device=device, dtype=dtype)
        self.v = torch.zeros_like(self.k)
        self.length = 0  # tokens written so far (the same for every row: prompts are left-padded)

    def attend(self, layer, q, k, v, attn_mask):
        """Write this layer's new keys/values after the cached ones, attend to all of them."""
        end = self.length + k.size(2)
        self.k[layer, :, :, self.length : end] = k
        self.v[layer, :, :, self.length : end] = v
        k, v = self.k[layer, :, :, :end], self.v[layer, :, :, :end]  # (B, nh, T_total, hs)
        B, nh, T, hs = q.shape
        if T > 1:
            return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask.to(q.dtype))
        # one query per row: SDPA's CPU kernel issues two tiny matmuls per row and head
        att = torch.baddbmm(
            attn_mask.expand(B, nh, 1, -1).flatten(0, 1).to(q.dtype),
            q.flatten(0, 1),
            k.flatten(0, 1).transpose(1, 2),
            alpha=1.0 / math.sqrt(hs),
        )
        return torch.bmm(att.softmax(-1), v.flatten(0, 1)).view(B, nh, 1, hs)

    def advance(self, T):
        self.length += T  # called once per forward, after every layer has attended

    def repeat_rows(self, times):
        """(P, ...) -> (P*times, ...): each prompt's cache copied for its `times` samples."""
        self.k = self.k.repeat_interleave(times, dim=1)
        self.v = self.v.repeat_interleave(times, dim=1)

    def keep_rows(self, rows):
        """Keep only `rows` (a (B,) boolean mask): finished samples stop costing compute."""
        self.k, self.v = self.k[:, rows], self.v[:, rows]


def prefill(model, prompt, prompt_mask, num_samples, max_new_tokens, cache_type):
    """Each prompt through the model once -> (cache, key_mask, last logits (B, V), next positions
    (B, 1))."""
    P, Tp = prompt.shape
    cfg = model.cfg
    device = prompt.device
    if Tp + max_new_tokens > cfg.block_size:
        raise SequenceTooLong(
            f"prompt ({Tp}) + max_new_tokens ({max_new_tokens}) exceeds block_size={cfg.block_size}"
        )
    dtype = next(model.parameters()).dtype
    cache = cache_type(
        cfg.n_layer,
        P,
        cfg.n_head,
        max_len=Tp + max_new_tokens,
        head_size=cfg.n_embd // cfg.n_head,
        device=device,
        dtype=dtype,
    )
    key_mask = torch.ones(P, Tp + max_new_tokens, dtype=torch.bool, device=device)
    key_mask[:, :Tp] = prompt_mask
    positions = positions_of(prompt_mask)  # (P, Tp)
    logits = model(prompt, key_mask, positions, cache=cache)[:, -1]  # (P, V)
    cache.repeat_rows(num_samples)
    return (
        cache,
        key_mask.repeat_interleave(num_samples, dim=0),
        logits.repeat_interleave(num_samples, dim=0),
        positions[:, -1:].repeat_interleave(num_samples, dim=0) + 1,
    )


@torch.no_grad()
def generate(model, prompt, prompt_mask, num_samples, max_new_tokens, decoding, drop_finished=True):
    """model.generate's samples, faster (one prefill per prompt, ended rows dropped);
    drop_finished=False switches the second trick off (bench, tests)."""
    eos_id = decoding.eos_id
    B = prompt.size(0) * num_samples
    device = prompt.device
    cache, key_mask, logits, next_pos = prefill(
        model,
        prompt,
        prompt_mask,
        num_samples=num_samples,
        max_new_tokens=max_new_tokens,
        cache_type=KVCache,
    )

    tokens = torch.full((B, max_new_tokens), eos_id, dtype=torch.long, device=device)
    logprobs = torch.zeros(B, max_new_tokens, device=device)
    entropy = torch.zeros(B, max_new_tokens, device=device)
    rows = torch.arange(B, device=device)  # which of the B rows are still in the batch
    done = torch.zeros(B, dtype=torch.bool, device=device)  # (b,) rows in the batch that have ended
    for t in range(max_new_tokens):
        # every row's random number is drawn, in the batch or not, so dropping rows changes no
        # sample
        uniform = torch.rand(B, 1, device=device, generator=decoding.generator)[rows]  # (b, 1)
        logits = logits.float()
        tok = decoding.pick(logits, uniform)  # (b,)
        tok = tok.masked_fill(done, eos_id)
        logp = F.log_softmax(logits, dim=-1)  # (b, V)
        tokens[rows, t] = tok
        logprobs[rows, t] = logp.gather(-1, tok[:, None]).squeeze(-1)
        entropy[rows, t] = entropy_of(logp)
        done = done | (tok == eos_id)
        if t == max_new_tokens - 1 or bool(done.all()):
            break  # stop as soon as every row has ended: no wasted decode steps
        if drop_finished and int(done.sum()) * 4 >= len(done):
            # not at every ending: each drop copies the cache
            keep = ~done
            rows, tok, done = rows[keep], tok[keep], done[keep]
            key_mask, next_pos = key_mask[keep], next_pos[keep]
            cache.keep_rows(keep)
        logits = model(tok[:, None], key_mask, next_pos, cache=cache)[:, -1]
        next_pos = next_pos + 1
    return completion_dict(tokens, logprobs, entropy, eos_id=eos_id)


class StaticKVCache(KVCache):
    """A KVCache with fixed-shape steps: a new key goes to position `at`; unwritten keys are
    masked."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.at = torch.zeros(1, dtype=torch.long, device=self.k.device)

    def attend(self, layer, q, k, v, attn_mask):
        if self.length == 0:  # the prefill: as KVCache, once, before the static steps
            return super().attend(layer, q, k, v, attn_mask)
        self.k[layer].index_copy_(2, self.at, k)
        self.v[layer].index_copy_(2, self.at, v)
        return F.scaled_dot_product_attention(
            q, self.k[layer], self.v[layer], attn_mask=attn_mask.to(q.dtype)
        )


def on_side_stream(step):
    """Run step() eagerly on a side stream: the warm-up before a capture (lazy inits stay out of the
    graph)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        step()
    torch.cuda.current_stream().wait_stream(side)


def captured(step):
    """Run step() once eagerly, then record it as a CUDA graph -> its replay: the step in one
    launch."""
    on_side_stream(step)
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            step()  # recorded, not run
    # e.g. an op that waits for the host, on another torch or GPU than we tested
    except RuntimeError as e:
        raise RuntimeError(
            f"capturing a CUDA graph failed ({e}); run with --set cuda_graph=false to "
            f"sample and warm-start eagerly"
        ) from e
    return graph.replay


# generate_static checks whether every row has ended once in this many steps (each check waits for
# the GPU)
CHECK_EVERY = 8


@torch.no_grad()
def generate_static(
    model, prompt, prompt_mask, num_samples, max_new_tokens, decoding, capture=None
):
    """generate's samples at fixed shapes (CUDA-graphed if `capture`, by default on CUDA); ended
    rows stay, checked every CHECK_EVERY steps."""
    eos_id = decoding.eos_id
    capture = prompt.is_cuda if capture is None else capture and prompt.is_cuda
    Tp = prompt.size(1)
    B = prompt.size(0) * num_samples
    device = prompt.device
    cache, key_mask, logits, pos = prefill(
        model,
        prompt,
        prompt_mask,
        num_samples=num_samples,
        max_new_tokens=max_new_tokens,
        cache_type=StaticKVCache,
    )
    cache.at.fill_(Tp)  # where the first new token's key goes
    # one (B, 1) draw a step, as generate: one (T, B, 1) draw matches on the CPU only (CUDA offsets
    # each call)
    generator = decoding.generator or default_generator(device)
    state = generator.get_state()
    draws = [torch.rand(B, 1, device=device, generator=generator) for _ in range(max_new_tokens)]
    # the step's state, all preallocated; the keys after the prompt are shown one a step
    visible = torch.zeros(B, 1, 1, key_mask.size(1), device=device, dtype=torch.float32)
    visible.masked_fill_(~key_mask[:, None, None, :], float("-inf"))  # an additive attention mask
    visible[..., Tp:] = float("-inf")
    buffers = dict(
        logits=logits.float(),
        pos=pos,
        visible=visible,
        uniforms=torch.stack(draws),
        tokens=torch.full((B, max_new_tokens), eos_id, dtype=torch.long, device=device),
        logprobs=torch.zeros(B, max_new_tokens, device=device),
        entropy=torch.zeros(B, max_new_tokens, device=device),
        done=torch.zeros(B, dtype=torch.bool, device=device),
    )
    step = static_step(model, cache, buffers, Tp=Tp, decoding=decoding)
    if capture:
        replay = captured(step)  # runs the first step, records the next
    else:
        step()
        replay = step
    for i in range(1, max_new_tokens):
        if i % CHECK_EVERY == 0 and bool(buffers["done"].all()):
            break
        replay()
    if not bool(torch.isfinite(buffers["logprobs"]).all()):
        raise FloatingPointError(
            "non-finite logits while sampling: the policy diverged; stopping, the last checkpoint "
            "is kept"
        )
    rewind(generator, state, buffers["tokens"], eos_id=eos_id)
    return completion_dict(
        buffers["tokens"], buffers["logprobs"], buffers["entropy"], eos_id=eos_id
    )


def static_step(model, cache, buf, Tp, decoding):
    """generate_static's decode step: it reads and writes only `buf` and the cache, in place,
    so a CUDA graph can replay it."""
    eos_id = decoding.eos_id

    def step():
        t = cache.at - Tp  # (1,) the new token's index in the completion
        uniform = buf["uniforms"].index_select(0, t)[0]
        tok = decoding.pick(buf["logits"], uniform, check_finite=False)
        tok = tok.masked_fill(buf["done"], eos_id)  # (B,)
        logp = F.log_softmax(buf["logits"], dim=-1)
        buf["tokens"].index_copy_(1, t, tok[:, None])
        buf["logprobs"].index_copy_(1, t, logp.gather(-1, tok[:, None]))
        buf["entropy"].index_copy_(1, t, entropy_of(logp)[:, None])
        buf["done"].logical_or_(tok == eos_id)
        # the new token's key becomes visible, to itself and after
        buf["visible"].index_fill_(3, cache.at, 0.0)
        x = model.wte(tok[:, None]) + model.wpe(
            buf["pos"]
        )  # (B, 1, C): model.hidden at fixed shapes
        for block in model.blocks:
            x = block(x, buf["visible"], cache)
        buf["logits"].copy_(model.lm_head(model.ln_f(x))[:, -1].float())
        buf["pos"].add_(1)
        cache.at.add_(1)

    return step


def rewind(generator, state, tokens, eos_id):
    """Leave the generator (at `state` before the draws) where generate, which stops early, leaves
    it."""
    B, max_new_tokens = tokens.shape
    ended = tokens == eos_id
    # (B,) each row's last step
    last = torch.where(ended.any(1), ended.int().argmax(1), max_new_tokens - 1)
    generator.set_state(state)
    for _ in range(int(last.max()) + 1):
        torch.rand(B, 1, device=tokens.device, generator=generator)


def default_generator(device):
    """The generator torch.rand uses on `device` when it is given none."""
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        return torch.cuda.default_generators[index]
    if device.type != "cpu":
        raise ValueError(f"generate_static on {device.type}: pass a generator on that device")
    return torch.default_generator


class SharedPrompts:
    """The distinct prompts' keys/values for rows (B,) that extend them, concatenated so autograd
    sees through."""

    def __init__(self, rows):
        self.rows = rows
        self.kv = []  # per layer: the prompts' (k, v), each (P, nh, Tp, hs)
        self.length = 0

    def attend(self, layer, q, k, v, attn_mask):
        if self.length == 0:  # the prompts themselves
            self.kv.append((k, v))
        else:  # then the completions: attend to their prompt and to themselves
            pk, pv = self.kv[layer]
            k, v = torch.cat([pk[self.rows], k], dim=2), torch.cat([pv[self.rows], v], dim=2)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask.to(q.dtype))

    def advance(self, T):
        self.length += T

    def for_rows(self, rows):
        """The same prompts, extended by a subset of the rows (one length bucket)."""
        view = SharedPrompts(self.rows[rows])
        view.kv = self.kv
        view.length = self.length
        return view


def score(model, prompt, prompt_mask, completion, completion_mask, share_prompt=True, buckets=4):
    """model.score's result (B, Tc): each distinct prompt runs once, completions in up to `buckets`
    lengths."""
    B, Tp = prompt.shape
    mask = torch.cat([prompt_mask, completion_mask], dim=1)
    positions = positions_of(mask)
    if share_prompt:  # RL scores G samples of each prompt in consecutive rows
        _, rows, counts = torch.unique_consecutive(
            torch.cat([prompt, prompt_mask], 1), dim=0, return_inverse=True, return_counts=True
        )
        first = counts.cumsum(0) - counts  # (P,) the first row of each prompt
    else:
        rows = first = torch.arange(B, device=prompt.device)
    cache = SharedPrompts(rows)
    # (P, 1, C)
    last = model.hidden(prompt[first], prompt_mask[first], positions[first, :Tp], cache=cache)[
        :, -1:
    ]
    lengths = completion_mask.sum(1)
    order = (
        torch.argsort(lengths, descending=True, stable=True)
        if buckets > 1
        else torch.arange(B, device=prompt.device)
    )
    chunks = order.tensor_split(min(buckets, B))
    if sum(int(lengths[c].max()) * len(c) for c in chunks) > 0.9 * int(lengths.max()) * B:
        # lengths alike (e.g. nothing ends early): more forwards would save nothing
        chunks = [order]
    parts = []
    for chunk in chunks:
        # this bucket's own width; its first token needs no forward
        T = max(1, int(lengths[chunk].max()))
        h = last[rows[chunk]]  # (b, 1, C): the last prompt position predicts the first token
        if T > 1:
            ids = completion[chunk, : T - 1]
            keys = mask[chunk, : Tp + T - 1]
            more = model.hidden(
                ids, keys, positions[chunk, Tp : Tp + T - 1], cache=cache.for_rows(chunk)
            )
            h = torch.cat([h, more], dim=1)
        logp, ent = token_logprobs(model.lm_head(h), completion[chunk, :T])
        pad = (0, completion.size(1) - T)  # back to the batch's width
        parts.append((F.pad(logp, pad), F.pad(ent, pad)))
    inverse = torch.argsort(order)  # back to the batch's row order
    return torch.cat([p[0] for p in parts])[inverse], torch.cat([p[1] for p in parts])[inverse]
