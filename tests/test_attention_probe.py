"""tools/attention_probe.py's cache that keeps a prompt's keys once: it must attend to what
engine.KVCache attends to (to float rounding), or the speed it reports is of a wrong sampler."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools"))
import attention_probe  # noqa: E402


def test_prompt_keys_once_per_prompt_sample_what_the_engine_samples():
    r = attention_probe.probe(preset="nano", P=3, G=4, prompt_len=6, new_tokens=10, repeats=1)
    assert r["token_agreement"] == 1.0 and r["max_logprob_diff"] < 1e-5  # not bit-exact, but close
    assert r["engine_s"] > 0 and r["shared_s"] > 0
