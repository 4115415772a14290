"""The tokenizer and the policy: round trips, KV-cache sampling against a plain forward, seeding."""

import pytest
import torch
from hypothesis import given, settings, strategies as st

from model import GPT, GPTConfig, PRESETS, Tokenizer, pad_left, pad_right, sample_from_logits

tok = Tokenizer()


def tiny_model(seed=0):
    torch.manual_seed(seed)
    return GPT(GPTConfig(vocab_size=tok.vocab_size, block_size=64, **PRESETS["nano"])).eval()


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_tokenizer_round_trip(text):
    assert tok.decode(tok.encode(text)) == text


def test_special_tokens_are_single_ids():
    ids = tok.encode("<|bos|>ab<|answer|>c<|sep|>d<|eos|>")
    assert ids == [tok.bos, 97, 98, tok.answer, 99, tok.sep, 100, tok.eos]
    assert tok.vocab_size == 260


def test_split_answers_accepts_anything():
    assert tok.split_answers(tok.encode("ab<|sep|>cd<|eos|>ignored")) == ["ab", "cd"]
    assert tok.split_answers([]) == [""]
    assert tok.split_answers([0xE2, 0x82]) == ["\ufffd"]  # half a UTF-8 character: replaced, no crash


def test_named_encoding_fails_clearly_offline_or_works():
    try:
        Tokenizer("gpt2")
    except RuntimeError as e:
        assert "tokenizer 'gpt2' is unavailable" in str(e)


def test_padding_does_not_change_the_result():
    model = tiny_model()
    seq = torch.tensor([[5, 6, 7, 8]])
    pos = torch.arange(4)[None]
    plain = model(seq, torch.ones(1, 4, dtype=torch.bool), pos)
    padded_ids, padded_mask = pad_left([[5, 6, 7, 8], [1, 2, 3, 4, 5, 6, 7]], pad_id=0)
    positions = (padded_mask.long().cumsum(1) - 1).clamp(min=0)
    padded = model(padded_ids, padded_mask, positions)
    assert torch.isfinite(padded).all()
    assert torch.allclose(plain[0], padded[0, 3:], atol=1e-5)


def test_kv_cache_sampling_matches_a_no_cache_forward():
    model = tiny_model()
    prompts = [[tok.bos, 10, 11, tok.answer], [tok.bos, 1, 2, 3, 4, 5, tok.answer]]
    p, pm = pad_left(prompts, tok.eos)
    out = model.generate(p, pm, 3, 12, tok.eos, generator=torch.Generator().manual_seed(0))
    assert out["tokens"].shape[0] == 6
    # the log-probs recorded while sampling equal those of one batched forward over the result
    logp, ent = model.score(p.repeat_interleave(3, 0), pm.repeat_interleave(3, 0), out["tokens"], out["mask"])
    mask = out["mask"]
    assert torch.allclose(logp[mask], out["logprobs"][mask], atol=1e-5)
    assert torch.allclose(ent[mask], out["entropy"][mask], atol=1e-4)
    # and greedy decoding with the cache equals greedy decoding by re-running the whole sequence
    greedy = model.generate(p[:1], pm[:1], 1, 8, tok.eos, temperature=0)["tokens"][0].tolist()
    seq = prompts[0][:]
    for _ in range(len(greedy)):
        ids = torch.tensor([seq])
        logits = model(ids, torch.ones_like(ids, dtype=torch.bool), torch.arange(len(seq))[None])
        seq.append(int(logits[0, -1].argmax()))
        if seq[-1] == tok.eos:
            break
    assert seq[len(prompts[0]):] == greedy[:len(seq) - len(prompts[0])]


def test_generation_is_seeded_and_stops_at_eos():
    model = tiny_model()
    p, pm = pad_left([[tok.bos, 3, tok.answer]], tok.eos)
    a = model.generate(p, pm, 4, 10, tok.eos, generator=torch.Generator().manual_seed(7))
    b = model.generate(p, pm, 4, 10, tok.eos, generator=torch.Generator().manual_seed(7))
    assert torch.equal(a["tokens"], b["tokens"])
    for row, mask in zip(a["tokens"], a["mask"]):
        n = int(mask.sum())
        ended = (row[:n] == tok.eos).nonzero()
        assert len(ended) == 0 or ended[0].item() == n - 1  # the mask ends at the first eos


def test_top_k_and_top_p_restrict_the_support():
    logits = torch.tensor([[3.0, 2.0, 1.0, -5.0]]).repeat(500, 1)
    gen = torch.Generator().manual_seed(0)
    assert set(sample_from_logits(logits, top_k=2, generator=gen).tolist()) <= {0, 1}
    # probabilities .665 .245 .090 ...: top_p=.8 keeps tokens 0 and 1
    assert set(sample_from_logits(logits, top_p=0.8, generator=gen).tolist()) <= {0, 1}
    assert set(sample_from_logits(logits, temperature=0).tolist()) == {0}


def test_pad_right_mask():
    ids, mask = pad_right([[1, 2], [3]], pad_id=9)
    assert ids.tolist() == [[1, 2], [3, 9]] and mask.tolist() == [[True, True], [True, False]]


def small_vocab_model(seed=0):
    """A vocabulary of 8 with eos = 7: rollouts end after ~8 tokens, at different steps."""
    torch.manual_seed(seed)
    return GPT(GPTConfig(vocab_size=8, block_size=64, **PRESETS["nano"])).eval()


def test_dropping_finished_rows_changes_no_sample():
    model = small_vocab_model()
    p, pm = pad_left([[1, 2, 3], [4, 5], [6, 1, 2, 3, 4]], pad_id=7)
    kept = model.generate(p, pm, 8, 40, 7, generator=torch.Generator().manual_seed(3), drop_finished=False)
    dropped = model.generate(p, pm, 8, 40, 7, generator=torch.Generator().manual_seed(3))
    lengths = kept["mask"].sum(1)
    assert (lengths < lengths.max()).float().mean() > 0.5  # most rows end early: rows were dropped
    assert torch.equal(kept["tokens"], dropped["tokens"]) and torch.equal(kept["mask"], dropped["mask"])
    assert torch.allclose(kept["logprobs"], dropped["logprobs"], atol=1e-6)
    assert torch.allclose(kept["entropy"], dropped["entropy"], atol=1e-6)
    # and what was recorded while sampling is what one batched forward over the result gives
    logp, _ = model.score(p.repeat_interleave(8, 0), pm.repeat_interleave(8, 0), dropped["tokens"], dropped["mask"])
    assert torch.allclose(logp[dropped["mask"]], dropped["logprobs"][dropped["mask"]], atol=1e-5)


def test_score_shares_repeated_prompts_without_changing_the_result():
    model = tiny_model()
    p, pm = pad_left([[tok.bos, 10, 11, tok.answer], [tok.bos, 1, 2, 3, 4, 5, tok.answer]], tok.eos)
    p, pm = p.repeat_interleave(3, 0), pm.repeat_interleave(3, 0)  # 2 prompts x 3 samples: shared path
    for width in (5, 1):  # a one-token completion has no completion tokens to feed
        c, cm = pad_right([[20 + i] * (1 + i % width) for i in range(6)], tok.eos)
        shared_logp, shared_ent = model.score(p, pm, c, cm)
        for i in range(6):  # one row at a time: nothing to share
            logp, ent = model.score(p[i:i + 1], pm[i:i + 1], c[i:i + 1], cm[i:i + 1])
            assert torch.allclose(shared_logp[i][cm[i]], logp[0][cm[i]], atol=1e-5)
            assert torch.allclose(shared_ent[i][cm[i]], ent[0][cm[i]], atol=1e-4)
    # gradients flow through the shared prompt to every parameter
    model.train()
    shared_logp, _ = model.score(p, pm, c, cm)
    shared_logp[cm].sum().backward()
    assert all(q.grad is not None and torch.isfinite(q.grad).all() for q in model.parameters())


def test_sampling_follows_the_distribution_and_never_picks_a_zero_probability_token():
    probs = torch.tensor([[0.5, 0.3, 0.0, 0.2, 0.0]])
    logits = probs.log().repeat(20000, 1)  # log(0) = -inf
    ids = sample_from_logits(logits, generator=torch.Generator().manual_seed(0))
    freq = torch.bincount(ids, minlength=5).float() / len(ids)
    assert freq[2] == 0 and freq[4] == 0
    assert torch.allclose(freq, probs[0], atol=0.015)
    # the numbers used are the ones given: u in [0, .5) -> 0, [.5, .8) -> 1, [.8, 1) -> 3
    u = torch.tensor([[0.0], [0.49], [0.5], [0.79], [0.8], [0.9999999]])
    assert sample_from_logits(probs.log().repeat(6, 1), uniform=u).tolist() == [0, 0, 1, 1, 3, 3]


def test_non_finite_logits_raise_a_nan_error():
    # train.rl_step turns this RuntimeError (it must mention nan) into "the last update diverged"
    for bad in (float("nan"), float("inf")):
        with pytest.raises(RuntimeError, match="nan"):
            sample_from_logits(torch.tensor([[0.0, bad, 1.0]]))
