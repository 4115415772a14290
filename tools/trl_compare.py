"""Our RL step and sampler beside TRL's GRPOTrainer and HF generate at one shape: 8 prompts of 32
tokens x 8 samples of exactly 48 tokens, GRPO, no KL, the cpu preset's sizes (GPT-2 of those sizes
for TRL); medians after warm-up, TRL in a child process. Nothing here asserts a speed.

    python tools/trl_compare.py                     # on the CPU, 2 warm-up and 5 timed steps each
    python tools/trl_compare.py --device cuda --json out/trl_compare.json

TRL is not a dependency (pip install trl transformers datasets): without it this says which
packages are missing and exits 0. Ours is train.rl_step as training runs it, on persona with 22
personas and answers of up to 46 letters, with an end token it cannot draw, so every rollout is 48
tokens long, as TRL's min_new_tokens makes its rollouts. Left out: other shapes, vLLM, DeepSpeed.
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch: busy-waiting slows shared CPUs

import argparse
import contextlib
import dataclasses
import importlib.util
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from functools import partial

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the project

import engine  # noqa: E402
import train  # noqa: E402
from config import make_task  # noqa: E402
from model import Decoding, Tokenizer, build_model  # noqa: E402
from policy import Policy  # noqa: E402
from tools.bench import load, peak_rss_gib, timed  # noqa: E402

# the settings, as `--set` takes them: GRPO without KL at TRL's batch shape
SHAPE = ["algo=grpo", "kl_coef=0.0", "model=cpu", "prompts_per_step=8", "group_size=8"]
SHAPE += ["epochs_per_batch=1", "task=persona", "task_options={num_personas: 22, answer_len: 46}"]
PROMPT_TOKENS = 32
COMPLETION_TOKENS = 48
NEEDED = ("trl", "transformers", "datasets")


NO_END = -1  # an end token no sampler can draw: every rollout runs to max_new_tokens


def without_end(sampler):
    """`sampler` given an end token it can never draw: every rollout runs to max_new_tokens."""

    def sample(model, prompt, prompt_mask, num_samples, max_new_tokens, decoding, **options):
        decoding = dataclasses.replace(decoding, eos_id=NO_END)
        return sampler(model, prompt, prompt_mask, num_samples, max_new_tokens, decoding, **options)

    return sample


@contextlib.contextmanager
def samplers_without_end():
    """Inside, both engine samplers (Policy.sample picks one) run every rollout to its end."""
    real = engine.generate, engine.generate_static
    engine.generate, engine.generate_static = (without_end(sampler) for sampler in real)
    try:
        yield
    finally:
        engine.generate, engine.generate_static = real


def time_ours(device, warmup, repeats):
    """train.rl_step at the shape -> seconds a step (wall, CPU, of it sampling), peak memory."""
    cfg = train.resolve_config(overrides=SHAPE + [f"device={device}"])
    torch.manual_seed(0)
    tok = Tokenizer(cfg["tokenizer"])
    task = make_task(cfg["task"], **cfg["task_options"])
    model = build_model(cfg["model"], cfg["block_size"], tok.vocab_size, device)
    policy = Policy.from_config(model, tok, cfg, device, train.answers_per_rollout(cfg))
    run = train.make_run(cfg, task, policy)
    with samplers_without_end():
        wall, cpu, _, _ = timed(lambda: train.rl_step(run), device, warmup, repeats)
        metrics, batch = train.rl_step(run)  # one more, to read its shape and its own clock
    assert batch["prompt"].size(1) == PROMPT_TOKENS, batch["prompt"].shape
    assert batch["completion"].size(1) == COMPLETION_TOKENS, batch["completion"].shape
    G = cfg["group_size"]
    prompt, mask = batch["prompt"][::G], batch["prompt_mask"][::G]  # the P distinct prompts
    decoding = Decoding(NO_END, generator=policy.generator)
    sample = partial(engine.generate, model, prompt, mask, G, COMPLETION_TOKENS, decoding)
    return {
        "step_s": wall,
        "step_cpu_s": cpu,
        "sample_s": timed(sample, device, warmup, repeats)[0],
        "params": model.num_params(),
        "peak_rss_gib": peak_rss_gib(),
    }


def trl_policy():
    """(GPT-2 at the cpu preset's sizes, no dropout; a byte-level tokenizer of our 260 tokens)."""
    import transformers
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import decoders, models, pre_tokenizers

    vocab = {ch: i for i, ch in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    vocab |= {s: 256 + i for i, s in enumerate(["<|bos|>", "<|answer|>", "<|sep|>", "<|eos|>"])}
    hf_tok = HFTokenizer(models.BPE(vocab=vocab, merges=[]))
    hf_tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    hf_tok.decoder = decoders.ByteLevel()
    tokenizer = transformers.PreTrainedTokenizerFast(
        tokenizer_object=hf_tok, eos_token="<|eos|>", pad_token="<|eos|>", padding_side="left"
    )
    torch.manual_seed(0)
    sizes = dict(n_positions=256, n_embd=128, n_layer=4, n_head=4, eos_token_id=259)
    no_dropout = dict(resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, pad_token_id=259)
    config = transformers.GPT2Config(vocab_size=len(vocab), **sizes, **no_dropout)
    return transformers.GPT2LMHeadModel(config), tokenizer


def trl_worker(spec):
    """TRL's GRPOTrainer at the shape, in this (child) process -> its seconds a step."""
    import datasets
    import transformers
    import trl

    torch.set_num_threads(spec["threads"])
    P, G, device = spec["P"], spec["G"], spec["device"]
    model, tokenizer = trl_policy()
    rng = random.Random(0)
    letters = "abcdefghijklmnopqrstuvwxyz"
    prompts = ["".join(rng.choice(letters) for _ in range(PROMPT_TOKENS)) for _ in range(P * 64)]
    batch = dict(per_device_train_batch_size=P * G, num_generations=G, steps_per_generation=1)
    batch |= dict(gradient_accumulation_steps=1, max_steps=spec["warmup"] + spec["repeats"])
    # every completion exactly COMPLETION_TOKENS long, sampled at temperature 1 with nothing cut
    sampling = dict(max_completion_length=COMPLETION_TOKENS, temperature=1.0, top_p=1.0, top_k=0)
    sampling["generation_kwargs"] = {"min_new_tokens": COMPLETION_TOKENS}
    loss = dict(beta=0.0, num_iterations=1, learning_rate=3e-4, disable_dropout=True, seed=0)
    quiet = dict(logging_steps=1, save_strategy="no", report_to="none", log_completions=False)
    hardware = dict(use_cpu=device == "cpu", bf16=device == "cuda", gradient_checkpointing=False)
    output_dir = tempfile.mkdtemp(prefix="trl-compare-")
    args = trl.GRPOConfig(output_dir, **batch, **sampling, **loss, **quiet, **hardware)
    times = []

    class Timer(transformers.TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            self.t0 = time.perf_counter()
            self.c0 = time.process_time()

        def on_step_end(self, args, state, control, **kwargs):
            if device == "cuda":
                torch.cuda.synchronize()
            times.append((time.perf_counter() - self.t0, time.process_time() - self.c0))

    def reward(completions, **kwargs):
        return [c.count("a") / max(1, len(c)) for c in completions]

    dataset = datasets.Dataset.from_dict({"prompt": prompts})
    kwargs = dict(processing_class=tokenizer, callbacks=[Timer()])
    trl.GRPOTrainer(model, reward, args=args, train_dataset=dataset, **kwargs).train()
    ids = tokenizer(prompts[:P], return_tensors="pt", padding=True).to(model.device)
    ids = {k: v.repeat_interleave(G, 0) for k, v in ids.items()}
    lengths = dict(max_new_tokens=COMPLETION_TOKENS, min_new_tokens=COMPLETION_TOKENS)
    generate = partial(model.generate, **ids, **lengths, do_sample=True, top_k=0, pad_token_id=259)
    timed_steps = times[spec["warmup"] :]
    return {
        "sample_s": timed(generate, device, spec["warmup"], spec["repeats"])[0],
        "trl": trl.__version__,
        "transformers": transformers.__version__,
        "params": sum(p.numel() for p in model.parameters()),
        "step_s": statistics.median(t for t, _ in timed_steps),
        "step_cpu_s": statistics.median(c for _, c in timed_steps),
        "peak_rss_gib": peak_rss_gib(),
    }


def time_trl(device, warmup, repeats):
    """trl_worker in a child process -> its results, or {"error": why it did not run}."""
    spec = dict(P=8, G=8, device=device, warmup=warmup, repeats=repeats)
    spec["threads"] = torch.get_num_threads()
    command = [sys.executable, os.path.abspath(__file__), "--trl-worker", json.dumps(spec)]
    proc = subprocess.run(command, capture_output=True, text=True)
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("TRL_RESULT "):
            return json.loads(line[len("TRL_RESULT ") :])
    last = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-5:])
    return {"error": f"TRL's run failed (exit {proc.returncode}): {last}"}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps first")
    parser.add_argument("--repeats", type=int, default=5, help="timed steps; medians reported")
    parser.add_argument("--json", help="also write both sides' numbers to this file")
    parser.add_argument("--trl-worker", help=argparse.SUPPRESS)  # the child process's spec
    args = parser.parse_args(argv)
    if args.trl_worker:
        print("TRL_RESULT " + json.dumps(trl_worker(json.loads(args.trl_worker))))
        return
    missing = [name for name in NEEDED if importlib.util.find_spec(name) is None]
    if missing:
        print(f"skipped: the TRL comparison needs {', '.join(missing)} (pip install them)")
        return
    torch.set_num_threads(1)  # as training runs on the CPU; the child takes the same
    print(f"load average {load()}; ours, then TRL's GRPOTrainer (a child process) ...")
    ours = time_ours(args.device, args.warmup, args.repeats)
    theirs = time_trl(args.device, args.warmup, args.repeats)
    for name, r in (("ours", ours), ("TRL", theirs)):
        if "error" in r:
            print(f"{name}: {r['error']}")
        else:
            print(
                f"{name}: RL step {r['step_s']:.3f} s (CPU {r['step_cpu_s']:.3f} s), sampling "
                f"{r['sample_s']:.3f} s, peak RSS {r['peak_rss_gib']:.2f} GiB, "
                f"{r['params'] / 1e6:.2f}M parameters"
            )
    if "error" not in theirs:
        print(f"ours is {theirs['step_s'] / ours['step_s']:.2f}x faster a step")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"ours": ours, "trl": theirs, "load_after": load()}, f, indent=1)


if __name__ == "__main__":
    main()
