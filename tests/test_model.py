"""The tokenizer and the plain policy: round trips, padding, sampling, greedy decoding, seeding.
The fast sampler and scorer (engine.py) are held to these plain versions in test_engine.py."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from model import (
    GPT,
    PRESETS,
    Decoding,
    GPTConfig,
    Tokenizer,
    pad_left,
    pad_right,
    sample_from_logits,
)

tok = Tokenizer()


def tiny_model(seed=0):
    torch.manual_seed(seed)
    return GPT(GPTConfig(vocab_size=tok.vocab_size, block_size=64, **PRESETS["nano"])).eval()


# valid Unicode: any code point but the surrogates (category Cs), which are not characters and have
# no
# UTF-8 bytes (blacklist_/whitelist_categories: the spelling every hypothesis 6 accepts)
VALID_TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)))


@settings(max_examples=200, deadline=None)
@given(VALID_TEXT)
def test_tokenizer_round_trip(text):
    assert tok.decode(tok.encode(text)) == text


@pytest.mark.parametrize("name", ["bytes", "numbers"])
def test_surrogates_encode_as_the_replacement_character(name):
    """Text that is not valid Unicode (lone or paired surrogates) has no UTF-8 bytes: each surrogate
    is encoded as U+FFFD, as the Tokenizer docstring says: no error, and a pair is not joined into a
    character."""
    t = Tokenizer(name)
    fffd = list("\ufffd".encode())
    assert t.encode("\ud800") == fffd and t.encode("\udfff") == fffd
    assert t.decode(t.encode("a\ud800b")) == "a\ufffdb"
    # a UTF-16 pair, not the emoji U+1F600
    assert t.decode(t.encode("\ud83d\ude00")) == "\ufffd\ufffd"
    assert t.encode("\ud83d\ude00") == fffd * 2 and t.encode("\U0001f600") == list(
        "\U0001f600".encode()
    )
    # specials and digits around it unchanged
    assert t.encode("7\udc80<|sep|>") == t.encode("7\ufffd<|sep|>")


def test_special_tokens_are_single_ids():
    ids = tok.encode("<|bos|>ab<|answer|>c<|sep|>d<|eos|>")
    assert ids == [tok.bos, 97, 98, tok.answer, 99, tok.sep, 100, tok.eos]
    assert tok.vocab_size == 260


numbers_tok = Tokenizer("numbers")


@settings(max_examples=200, deadline=None)
@given(
    st.text(
        alphabet=st.sampled_from("0123456789 ()<+-x>:;")
        | st.characters(blacklist_categories=("Cs",))
    )
)
def test_numbers_tokenizer_round_trip(text):
    assert numbers_tok.decode(numbers_tok.encode(text)) == text


@settings(max_examples=200, deadline=None)
@given(
    st.text(
        alphabet=st.characters(whitelist_categories=("Cs",))
        | st.characters()
        | st.sampled_from("ab7\ufffd")
    )
)
def test_any_text_round_trips_with_surrogates_replaced(text):
    """Every str, valid Unicode or not: what decode returns is the text with each surrogate as
    U+FFFD."""
    for t in (tok, numbers_tok):
        assert t.decode(t.encode(text)) == "".join(
            "\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in text
        )


def test_numbers_tokenizer_makes_each_two_digit_string_one_token():
    pieces = [numbers_tok.decode([i]) for i in numbers_tok.encode("(< x 07) 33->2 123 5<|sep|>")]
    assert pieces == [
        "(",
        "<",
        " ",
        "x",
        " ",
        "07",
        ")",
        " ",
        "33",
        "-",
        ">",
        "2",
        " ",
        "12",
        "3",
        " ",
        "5",
        "<|sep|>",
    ]
    assert numbers_tok.vocab_size == 256 + 100 + 4
    assert numbers_tok.encode("<|eos|>") == [numbers_tok.eos] and numbers_tok.eos == 359


def test_split_answers_accepts_anything():
    assert tok.split_answers(tok.encode("ab<|sep|>cd<|eos|>ignored")) == ["ab", "cd"]
    assert tok.split_answers([]) == [""]
    # half a UTF-8 character: replaced, no crash
    assert tok.split_answers([0xE2, 0x82]) == ["\ufffd"]


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


def test_recorded_logprobs_match_a_batched_forward_and_greedy_matches_argmax():
    model = tiny_model()
    prompts = [[tok.bos, 10, 11, tok.answer], [tok.bos, 1, 2, 3, 4, 5, tok.answer]]
    p, pm = pad_left(prompts, tok.eos)
    decoding = Decoding(tok.eos, generator=torch.Generator().manual_seed(0))
    out = model.generate(p, pm, 3, 12, decoding)
    assert out["tokens"].shape[0] == 6
    # the log-probs recorded while sampling equal those of one batched forward over the result
    logp, ent = model.score(
        p.repeat_interleave(3, 0), pm.repeat_interleave(3, 0), out["tokens"], out["mask"]
    )
    mask = out["mask"]
    assert torch.allclose(logp[mask], out["logprobs"][mask], atol=1e-5)
    assert torch.allclose(ent[mask], out["entropy"][mask], atol=1e-4)
    # greedy decoding of a padded batch equals argmax decoding of the unpadded sequence
    greedy = model.generate(p[:1], pm[:1], 1, 8, Decoding(tok.eos, temperature=0))
    greedy = greedy["tokens"][0].tolist()
    seq = prompts[0][:]
    for _ in range(len(greedy)):
        ids = torch.tensor([seq])
        logits = model(ids, torch.ones_like(ids, dtype=torch.bool), torch.arange(len(seq))[None])
        seq.append(int(logits[0, -1].argmax()))
        if seq[-1] == tok.eos:
            break
    assert seq[len(prompts[0]) :] == greedy[: len(seq) - len(prompts[0])]


def test_generation_is_seeded_and_stops_at_eos():
    model = tiny_model()
    p, pm = pad_left([[tok.bos, 3, tok.answer]], tok.eos)
    a, b = (
        model.generate(p, pm, 4, 10, Decoding(tok.eos, generator=torch.Generator().manual_seed(7)))
        for _ in range(2)
    )
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


@pytest.mark.parametrize(
    "sampling", [dict(), dict(temperature=0.7, top_k=2), dict(top_p=0.8), dict(temperature=0)]
)
def test_a_decoding_picks_what_sample_from_logits_picks_with_its_settings(sampling):
    """Decoding.pick hands each setting to sample_from_logits under its own name (both samplers
    draw through it, so a swap there would pass test_engine.py unnoticed)."""
    logits = torch.tensor([[3.0, 2.0, 1.0, -5.0]]).repeat(500, 1)
    uniform = torch.rand(500, 1, generator=torch.Generator().manual_seed(0))
    picked = Decoding(eos_id=3, **sampling).pick(logits, uniform)
    assert torch.equal(picked, sample_from_logits(logits, **sampling, uniform=uniform))


def test_pad_right_mask():
    ids, mask = pad_right([[1, 2], [3]], pad_id=9)
    assert ids.tolist() == [[1, 2], [3, 9]] and mask.tolist() == [[True, True], [True, False]]


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


def test_non_finite_logits_stop_as_a_divergence():
    # train.main reports a FloatingPointError in one line and keeps the last checkpoint
    for bad in (float("nan"), float("inf")):
        with pytest.raises(FloatingPointError, match="non-finite logits"):
            sample_from_logits(torch.tensor([[0.0, bad, 1.0]]))
