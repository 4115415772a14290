"""engine.py against model.py: the fast sampler draws the same tokens as the plain one for the same
random numbers, and the fast scorer gives the same log-probs, entropies and gradients."""

import dataclasses

import pytest
import torch

import engine
import model as model_module
from model import GPT, PRESETS, Decoding, GPTConfig, Tokenizer, pad_left, pad_right

tok = Tokenizer()


def tiny_model(seed=0, vocab=tok.vocab_size):
    torch.manual_seed(seed)
    return GPT(GPTConfig(vocab_size=vocab, block_size=64, **PRESETS["nano"])).eval()


PROMPTS = [
    [tok.bos, 10, 11, tok.answer],
    [tok.bos, 1, 2, 3, 4, 5, tok.answer],
    [tok.bos, 7, tok.answer],
]


def seeded_decoding(eos_id, seed, **sampling):
    """A Decoding with a fresh CPU generator seeded `seed`: two of them draw the same numbers."""
    return Decoding(eos_id, generator=torch.Generator().manual_seed(seed), **sampling)


@pytest.mark.parametrize(
    "share_prompt, drop_finished", [(True, True), (True, False), (False, True)]
)
@pytest.mark.parametrize(
    "sampling", [dict(), dict(temperature=0.7, top_k=20), dict(top_p=0.9), dict(temperature=0)]
)
def test_fast_generate_samples_what_the_plain_generate_samples(
    share_prompt, drop_finished, sampling
):
    model = tiny_model()
    p, pm = pad_left(PROMPTS, tok.eos)
    plain = model.generate(p, pm, 4, 14, seeded_decoding(tok.eos, 1, **sampling))
    samples = 4
    if not share_prompt:  # each sample its own copy of the prompt: 4 prefills of the same text
        p, pm, samples = p.repeat_interleave(4, 0), pm.repeat_interleave(4, 0), 1
    decoding = seeded_decoding(tok.eos, 1, **sampling)
    fast = engine.generate(model, p, pm, samples, 14, decoding, drop_finished=drop_finished)
    assert torch.equal(fast["tokens"], plain["tokens"]) and torch.equal(fast["mask"], plain["mask"])
    assert torch.allclose(fast["logprobs"], plain["logprobs"], atol=1e-5)
    assert torch.allclose(fast["entropy"], plain["entropy"], atol=1e-4)


def test_dropping_finished_rows_changes_no_sample():
    """A vocabulary of 8 with eos = 7: rollouts end after ~8 tokens, at different steps."""
    model = tiny_model(vocab=8)
    p, pm = pad_left([[1, 2, 3], [4, 5], [6, 1, 2, 3, 4]], pad_id=7)
    kept = engine.generate(model, p, pm, 8, 40, seeded_decoding(7, 3), drop_finished=False)
    dropped = engine.generate(model, p, pm, 8, 40, seeded_decoding(7, 3))
    lengths = kept["mask"].sum(1)
    assert (lengths < lengths.max()).float().mean() > 0.5  # most rows end early: rows were dropped
    assert torch.equal(kept["tokens"], dropped["tokens"]) and torch.equal(
        kept["mask"], dropped["mask"]
    )
    assert torch.allclose(kept["logprobs"], dropped["logprobs"], atol=1e-6)
    # and the generator is left where the plain sampler leaves it: the next draw is the same
    plain, fast = seeded_decoding(7, 3), seeded_decoding(7, 3)
    model.generate(p, pm, 8, 40, plain)
    engine.generate(model, p, pm, 8, 40, fast)
    next_plain = torch.rand(3, generator=plain.generator)
    assert torch.equal(next_plain, torch.rand(3, generator=fast.generator))


def _batch(widths):
    p, pm = pad_left(PROMPTS[:2], tok.eos)
    p, pm = p.repeat_interleave(3, 0), pm.repeat_interleave(3, 0)  # 2 prompts x 3 samples
    c, cm = pad_right([[20 + i] * w for i, w in enumerate(widths)], tok.eos)
    return p, pm, c, cm


@pytest.mark.parametrize("share_prompt", [True, False])
@pytest.mark.parametrize("buckets", [1, 2, 4, 6, 10])
@pytest.mark.parametrize("widths", [[1, 5, 2, 9, 3, 3], [1] * 6, [4] * 6])
def test_fast_score_equals_plain_score_with_gradients(share_prompt, buckets, widths):
    model = tiny_model().train()
    p, pm, c, cm = _batch(widths)
    plain_logp, plain_ent = model.score(p, pm, c, cm)
    (plain_logp[cm].sum() + plain_ent[cm].sum()).backward()
    plain_grads = [q.grad.clone() for q in model.parameters()]
    model.zero_grad()
    fast_logp, fast_ent = engine.score(
        model, p, pm, c, cm, share_prompt=share_prompt, buckets=buckets
    )
    assert fast_logp.shape == plain_logp.shape and fast_ent.shape == plain_ent.shape
    assert torch.allclose(fast_logp[cm], plain_logp[cm], atol=1e-5)
    assert torch.allclose(fast_ent[cm], plain_ent[cm], atol=1e-4)
    (fast_logp[cm].sum() + fast_ent[cm].sum()).backward()
    for plain_grad, q in zip(plain_grads, model.parameters()):
        assert torch.allclose(q.grad, plain_grad, atol=1e-4, rtol=1e-3)


def test_bucketed_scoring_runs_fewer_padded_positions():
    """What bucketing buys: each bucket is padded only to its own longest row."""
    model = tiny_model()
    p, pm, c, cm = _batch([1, 2, 2, 3, 30, 30])
    positions = []
    real = model.hidden

    def hidden(idx, *args, **kwargs):
        positions.append(idx.numel())
        return real(idx, *args, **kwargs)

    model.hidden = hidden
    engine.score(model, p, pm, c, cm, buckets=1)
    one = sum(positions[1:])  # the completion forwards, after the one prompt forward
    positions.clear()
    engine.score(model, p, pm, c, cm, buckets=3)
    assert sum(positions[1:]) < one / 2


@pytest.mark.parametrize(
    "sampling", [dict(), dict(temperature=0.7, top_k=20), dict(top_p=0.9), dict(temperature=0)]
)
def test_static_generate_samples_what_generate_samples(sampling):
    """The fixed-shape step (CUDA graphs' form) run eagerly: the same random numbers give the same
    tokens (attention over the whole cache rounds differently in the last bits, too little to move a
    draw of this tiny model), and its log-probs are the plain scorer's for the tokens it wrote."""
    model = tiny_model()
    p, pm = pad_left(PROMPTS, tok.eos)
    fast = engine.generate(model, p, pm, 4, 14, seeded_decoding(tok.eos, 1, **sampling))
    # no CUDA here: capture falls back to eager
    decoding = seeded_decoding(tok.eos, 1, **sampling)
    static = engine.generate_static(model, p, pm, 4, 14, decoding, capture=True)
    assert torch.equal(static["tokens"], fast["tokens"]) and torch.equal(
        static["mask"], fast["mask"]
    )
    assert torch.allclose(static["logprobs"], fast["logprobs"], atol=1e-5)
    assert torch.allclose(static["entropy"], fast["entropy"], atol=1e-4)
    rows = pm.repeat_interleave(4, 0)
    scored, _ = model.score(p.repeat_interleave(4, 0), rows, static["tokens"], static["mask"])
    assert torch.allclose(scored * static["mask"], static["logprobs"], atol=1e-5)


def test_static_generate_keeps_every_buffer_in_place_and_stops_when_all_rows_end(monkeypatch):
    """What a captured graph needs: every decode step reads and writes the same tensors (no buffer
    is replaced between steps), and the loop ends within CHECK_EVERY steps of the last row
    ending."""
    model = tiny_model(vocab=8)
    p, pm = pad_left([[1, 2, 3], [4, 5]], pad_id=7)
    seen = []
    real = model_module.sample_from_logits

    def spy(logits, *args, **kwargs):
        seen.append(logits.data_ptr())
        return real(logits, *args, **kwargs)

    # Decoding.pick draws through model.sample_from_logits
    monkeypatch.setattr(model_module, "sample_from_logits", spy)
    monkeypatch.setattr(engine, "CHECK_EVERY", 4)
    out = engine.generate_static(model, p, pm, 8, 60, seeded_decoding(7, 3))
    assert len(set(seen)) == 1  # one logits buffer for every step
    longest = int(out["mask"].sum(1).max())
    assert longest < 60 and longest <= len(seen) < longest + 4 + 1
    kept = engine.generate(model, p, pm, 8, 60, seeded_decoding(7, 3))
    assert torch.equal(out["tokens"], kept["tokens"])


def test_static_generate_leaves_the_generator_where_generate_leaves_it():
    """generate draws one number per row a step until every row has ended; generate_static draws all
    steps' numbers up front, then rewinds the generator: the next call samples what it would after
    generate (training draws many batches from one generator)."""
    model = tiny_model(vocab=8)
    p, pm = pad_left([[1, 2, 3], [4, 5]], pad_id=7)
    outs = {}
    for name, sampler in (("generate", engine.generate), ("static", engine.generate_static)):
        decoding = seeded_decoding(7, 5)  # one generator for all three calls
        outs[name] = [sampler(model, p, pm, 8, 60, decoding)["tokens"] for _ in range(3)]
        outs[name].append(decoding.generator.get_state())
    # the rows ended early: the rewind is exercised
    assert int((outs["generate"][0] != 7).sum(1).max()) < 59
    for a, b in zip(outs["generate"], outs["static"]):
        assert torch.equal(a, b)


def sampler_called(monkeypatch, policy):
    """Which engine function policy.sample calls: spies stand in for both and return at once, so a
    "cuda" policy touches no GPU."""
    for name in ("generate", "generate_static"):
        monkeypatch.setattr(engine, name, lambda *args, name=name, **kwargs: name)
    p, pm = pad_left(PROMPTS, tok.eos)
    return policy.sample(p, pm, 2, 4)


def test_cuda_graph_setting_captures_on_cuda_only_and_changes_no_answer_on_the_cpu(monkeypatch):
    import random

    import rollouts
    import train
    from policy import Policy
    from rewards import PersonaTask

    on, off = (train.resolve_config(overrides=[f"cuda_graph={flag}"]) for flag in ("true", "false"))
    # a checkpoint trained before the setting existed saved a config without it: sampled as before
    legacy = {k: v for k, v in on.items() if k != "cuda_graph"}
    model = tiny_model()
    policies = {
        name: Policy.from_config(model, tok, cfg, "cpu", 3)
        for name, cfg in (("on", on), ("off", off), ("legacy", legacy))
    }
    with monkeypatch.context() as patched:
        called = {
            (name, device): sampler_called(patched, dataclasses.replace(policy, device=device))
            for name, policy in policies.items()
            for device in ("cuda", "cuda:1", "cpu", "mps")
        }
    # the captured sampler only with cuda_graph on and on CUDA; everywhere else the eager one
    expected = {key: "generate" for key in called}
    expected.update({("on", "cuda"): "generate_static", ("on", "cuda:1"): "generate_static"})
    assert len(called) == 12 and called == expected
    task = PersonaTask()
    problems = task.problems("train", 3, random.Random(0))
    batches = [
        rollouts.sample_rollouts(policies[name].seeded(0), task, problems, 4)
        for name in ("off", "on")
    ]
    assert batches[0]["answers"] == batches[1]["answers"]
    assert torch.equal(batches[0]["rewards"], batches[1]["rewards"])


def test_a_failed_capture_says_how_to_run_without_it(monkeypatch):
    """A capture that fails (an op that waits for the host, another torch or GPU) names the setting
    that turns capturing off, instead of a bare CUDA error deep inside a worker."""

    class FailingGraph:
        def __enter__(self):
            raise RuntimeError("operation not permitted when stream is capturing")

        def __exit__(self, *exc):
            return False

    monkeypatch.setattr(engine, "on_side_stream", lambda step: step())
    monkeypatch.setattr(torch.cuda, "CUDAGraph", lambda: None)
    monkeypatch.setattr(torch.cuda, "graph", lambda graph: FailingGraph())
    with pytest.raises(RuntimeError, match="cuda_graph=false"):
        engine.captured(lambda: None)
