"""
How fast is training? Speed and memory of sampling rollouts, of one RL step and of one warm-start
(SFT) step, for a config of train.py: medians over repeated steps after a warm-up. A benchmark,
not a test: nothing here asserts a speed.

    python lab/bench.py                        # train.py's DEFAULTS: persona, cpu preset, 8 prompts x 8 samples
    python lab/bench.py --naive                # also without the shared prompt, and without the KV cache
    python lab/bench.py --trl                  # the TRL comparison's shape, ours and TRL's GRPOTrainer
    python lab/bench.py --checkpoint out/run/final.pt --set algo=vpo   # trained weights: real rollout lengths
    python lab/bench.py --device cuda          # bf16 autocast unless --set dtype=...; --json FILE saves it all
    python lab/bench.py --config configs/code.yaml --warm-start-steps 1500   # the warm start, per phase
    python lab/bench.py --trl-config --profile # where sampling's time goes; the matmuls' FLOP rates

- sampling: engine.generate for P prompts x G samples; tokens/s counts sampled tokens (eos included).
- RL step: train.rl_step exactly as training runs it (sampling and rewards, advantages, update).
- SFT step: warmstart.sft_step, one step of the warm start.
- peak memory: ru_maxrss after sampling and RL steps (and max_memory_allocated on CUDA), then after SFT.
--naive swaps engine.generate/score for versions without one optimisation each: "no shared prompt"
(G prefills and G prompt forwards per prompt, no length buckets) and "naive" (model.py's plain
versions: no KV cache either). All sample the same tokens for the same seed.
--trl uses the shape TRL's GRPOTrainer is timed at: 8 prompts of exactly 32 tokens x 8 samples of
exactly 48 tokens, GRPO, no KL, the cpu preset (the persona task with 22 personas and answers of up
to 46 letters; no rollout ends early). TRL is never a dependency: it runs if importable, in a child
process with its own memory.
Random weights rarely sample <|eos|>, so without --checkpoint rollouts run to max_new_tokens. On a
shared machine the CPU time of this process is the steadier number; the load average is printed.
Deliberately left out: timing under torchrun, per-kernel GPU profiles (torch.profiler's job), search.py.
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch: OpenMP busy-waiting made CPU runs far slower

import argparse
import contextlib
import copy
import functools
import importlib.util
import json
import platform
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the project's modules

import config  # noqa: E402
import engine  # noqa: E402
import train  # noqa: E402
import warmstart  # noqa: E402
from checkpoint import load_checkpoint, model_from_checkpoint  # noqa: E402
from config import make_task  # noqa: E402
from model import GPT, Tokenizer, pad_left  # noqa: E402
from rollouts import rollout_prompt  # noqa: E402

TRL_CONFIG = ["task=persona", "task_options={num_personas: 22, answer_len: 46}", "algo=grpo", "kl_coef=0.0",
              "model=cpu", "prompts_per_step=8", "group_size=8", "epochs_per_batch=1"]
TRL_PROMPT_TOKENS, TRL_COMPLETION_TOKENS = 32, 48

VARIANTS = {  # name -> (generate, score), both called as fn(model, ...)
    "ours": (engine.generate, engine.score),
    "no shared prompt": (functools.partial(engine.generate, share_prompt=False),
                         functools.partial(engine.score, share_prompt=False, buckets=1)),
    "naive": (GPT.generate, GPT.score),  # model.py's plain versions: no KV cache, no sharing
}


@contextlib.contextmanager
def variant(name, force_length=False):
    """engine.generate / engine.score replaced by `name`'s while inside; force_length: an end token
    that cannot be sampled, so every rollout is exactly max_new_tokens."""
    generate, score = VARIANTS[name]
    if force_length:
        def generate(model, prompt, prompt_mask, num_samples, max_new_tokens, eos_id, *args, _g=generate, **kwargs):
            return _g(model, prompt, prompt_mask, num_samples, max_new_tokens, -1, *args, **kwargs)
    saved = engine.generate, engine.score
    engine.generate, engine.score = generate, score
    try:
        yield
    finally:
        engine.generate, engine.score = saved


def load():
    return [round(x, 2) for x in os.getloadavg()]


def peak_rss_gib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux


def timed(fn, device, warmup, repeats):
    """fn() warmup + repeats times -> (median wall s, median CPU s, last result, the wall times)."""
    walls, cpus, out = [], [], None
    for i in range(warmup + repeats):
        if device == "cuda":
            torch.cuda.synchronize()
        w0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        if device == "cuda":
            torch.cuda.synchronize()
        if i >= warmup:
            walls.append(time.perf_counter() - w0)
            cpus.append(time.process_time() - c0)
    return statistics.median(walls), statistics.median(cpus), out, walls


def setup(cfg, device, checkpoint=None):
    """(model, tokenizer, task): trained weights from `checkpoint`, else random ones of a fixed seed."""
    torch.manual_seed(0)
    tok, task = Tokenizer(cfg["tokenizer"]), make_task(cfg["task"], **cfg["task_options"])
    model = model_from_checkpoint(checkpoint, device)[0] if checkpoint else warmstart.build_model(cfg, tok, device)
    return model, tok, task


def timed_reward(reward, spent, *args):
    """task.reward(*args), its seconds added to spent[-1] (the current step's)."""
    t0 = time.perf_counter()
    out = reward(*args)
    spent[-1] += time.perf_counter() - t0
    return out


def sampler(model, tok, task, cfg, device):
    """() -> engine.generate's rollouts for cfg's prompts_per_step training prompts x group_size, and
    those prompts (P, Tp); engine.generate is looked up at each call (variant() swaps it)."""
    m = train.answers_per_rollout(cfg)
    problems = task.problems("train", cfg["prompts_per_step"], random.Random(0))
    prompt, prompt_mask = pad_left([tok.encode(rollout_prompt(task, p, m)) for p in problems], tok.eos, device)
    generator = torch.Generator(device=device).manual_seed(0)
    return lambda: engine.generate(model, prompt, prompt_mask, cfg["group_size"], m * task.max_answer_tokens + 1,
                                   tok.eos, temperature=cfg["temperature"], generator=generator), prompt


def measure(model, tok, task, cfg, device, warmup, repeats):
    """Sampling alone, then train.rl_step on a run made as training makes it (the steps train `model`)."""
    sample, prompt = sampler(model, tok, task, cfg, device)
    model.eval()
    wall, cpu, out, walls = timed(sample, device, warmup, repeats)
    tokens = int(out["mask"].sum())
    r = {"sample_s": wall, "sample_cpu_s": cpu, "sample_tokens": tokens, "sample_tok_per_s": tokens / wall,
         "prompt_tokens": prompt.size(1), "completion_tokens": out["tokens"].size(1), "sample_walls": walls}
    run = train.make_run(cfg, task, tok, model, device)
    steps, reward_s = [], []
    task.reward = functools.partial(timed_reward, type(task).reward.__get__(task), reward_s)  # this instance only

    def step():
        reward_s.append(0.0)
        steps.append(train.rl_step(run))
    wall, cpu, _, walls = timed(step, device, warmup, repeats)
    del task.reward
    steps = [(metrics, batch["completion"].size(1)) for metrics, batch in steps[warmup:]]
    tokens = [s["tokens"] for s, _ in steps]
    r.update(step_s=wall, step_cpu_s=cpu, step_walls=walls, step_tokens=statistics.median(tokens),
             step_sample_s=statistics.median(s["sample_s"] for s, _ in steps),  # rl_step's own clock
             step_rest_s=statistics.median(s["step_s"] - s["sample_s"] for s, _ in steps),
             step_reward_s=statistics.median(reward_s[warmup:]),  # the task's reward calls within sampling
             step_tok_per_s=sum(tokens) / sum(walls), step_completion_width=max(w for _, w in steps))
    return r


def measure_sft(model, tok, task, cfg, device, warmup, repeats):
    """warmstart.sft_step on a copy of the model; tokens/s over all steps (formats alternate per batch)."""
    model = copy.deepcopy(model).train()
    opt, rng, counted = warmstart.sft_optimizer(model, cfg), random.Random(1000), []
    wall, cpu, _, walls = timed(lambda: counted.append(warmstart.sft_step(model, opt, task, tok, cfg, rng, device)[1]),
                                device, warmup, repeats)
    return {"sft_s": wall, "sft_cpu_s": cpu, "sft_tok_per_s": sum(counted[warmup:]) / sum(walls)}


progress = functools.partial(print, file=sys.stderr, flush=True)


def time_warm_start(cfg, device, steps):
    """warmstart.warm_start as a run builds it (fresh weights, a throwaway cache), for `steps` steps:
    the seconds of each step in its single-answer phase and in its mixed phase, and a checksum of the
    weights it ends with (equal checksums: two versions of the code trained the same warm start)."""
    seconds = {True: [], False: []}  # single_only -> each step's seconds
    real_step = warmstart.sft_step
    phase = []  # the phase of the step before

    def settle():
        """On CUDA, wait for the GPU and book the wait on the step before: steps are not synchronised
        one by one (the host runs ahead, as in warm_start), only where a phase ends."""
        if device == "cuda" and phase:
            t0 = time.perf_counter()
            torch.cuda.synchronize()
            seconds[phase[-1]][-1] += time.perf_counter() - t0

    def timed_step(*args):
        single = bool(args[7])
        if phase and phase[-1] != single:
            settle()
        t0 = time.perf_counter()
        out = real_step(*args)
        seconds[single].append(time.perf_counter() - t0)
        phase.append(single)
        return out
    warmstart.sft_step = timed_step  # warm_start looks the name up at each step
    try:
        with tempfile.TemporaryDirectory() as cache:
            t0 = time.time()
            model, _ = warmstart.warm_start({**cfg, "sft_steps": steps, "warmstart_from": "", "warmstart_dir": cache},
                                            make_task(cfg["task"], **cfg["task_options"]), Tokenizer(cfg["tokenizer"]),
                                            device, lambda msg: None)
            settle()
            total = time.time() - t0
    finally:
        warmstart.sft_step = real_step
    checksum = sum(float(p.detach().double().sum()) for p in model.parameters())
    return {"warm_start_steps": steps, "warm_start_s": total, "single_steps": len(seconds[True]),
            "single_ms": 1000 * statistics.mean(seconds[True]) if seconds[True] else None,
            "mixed_steps": len(seconds[False]),
            "mixed_ms": 1000 * statistics.mean(seconds[False]) if seconds[False] else None, "checksum": checksum}


def matmul_rates(ops):
    """torch.profiler's op averages -> {matmul kind: (share of the CPU time, GFLOP/s)}."""
    total = sum(e.self_cpu_time_total for e in ops)
    rates = {}
    for names in (("aten::mm",), ("aten::baddbmm", "aten::bmm")):
        found = [e for e in ops if e.key in names]
        seconds = sum(e.self_cpu_time_total for e in found) / 1e6
        if seconds:
            rates[" + ".join(names)] = (seconds * 1e6 / total, sum(e.flops for e in found) / seconds / 1e9)
    return rates


def profile_sampling(cfg, device, force_length, top=12):
    """Where our sampling's and RL step's time goes at cfg's shape: torch.profiler's ops of sampling
    by self CPU time, and for both the share and FLOP rate of the matmuls (the model's linear layers;
    the cache attention's batched one-row matrices), against one large matmul's rate on this machine."""
    model, tok, task = setup(cfg, device)
    model.eval()
    sample, prompt = sampler(model, tok, task, cfg, device)
    run = train.make_run(cfg, task, tok, copy.deepcopy(model), device)
    activities = [torch.profiler.ProfilerActivity.CPU]
    with variant("ours", force_length):  # force_length: every rollout max_new_tokens long, as --trl times
        for _ in range(2):
            sample(), train.rl_step(run)
        with torch.profiler.profile(activities=activities, with_flops=True) as sampling:
            sample()
        with torch.profiler.profile(activities=activities, with_flops=True) as step:
            train.rl_step(run)
    print(sampling.key_averages().table(sort_by="self_cpu_time_total", row_limit=top))
    # the decode step's attention alone, at the middle of a rollout: what it reads, how fast
    B, nh, hs = prompt.size(0) * cfg["group_size"], model.cfg.n_head, model.cfg.n_embd // model.cfg.n_head
    max_new = train.answers_per_rollout(cfg) * task.max_answer_tokens + 1
    T = prompt.size(1) + max_new // 2
    cache = engine.KVCache(1, B, nh, prompt.size(1) + max_new, hs, device, torch.float32)
    cache.length = T - 1
    q, new_k, mask = torch.randn(B, nh, 1, hs), torch.randn(B, nh, 1, hs), torch.zeros(B, 1, 1, T)
    attend_s = timed(lambda: cache.attend(0, q, new_k, new_k, mask), "cpu", 20, 500)[0]
    x = torch.randn(2 ** 26)  # 256 MB: far beyond the caches
    y = torch.empty_like(x)
    copy_gbs = 2 * x.numel() * 4 / timed(lambda: y.copy_(x), "cpu", 1, 5)[0] / 1e9
    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    large = 2 * 1024 ** 3 / timed(lambda: a @ b, "cpu", 1, 5)[0] / 1e9
    rates = {"sampling": matmul_rates(sampling.key_averages()), "RL step": matmul_rates(step.key_averages()),
             "one 1024x1024x1024 matmul, GFLOP/s": large, "attention call, us": attend_s * 1e6,
             "attention reads, GB/s": 2 * B * nh * T * hs * 4 / attend_s / 1e9, "copy, GB/s": copy_gbs}
    for what in ("sampling", "RL step"):
        print(f"{what}: " + "; ".join(f"{k} {share:.0%} of the CPU time at {gflops:.1f} GFLOP/s"
                                      for k, (share, gflops) in rates[what].items()))
    print(f"one 1024x1024x1024 matmul: {large:.1f} GFLOP/s; one decode attention call ({B} rows x {nh} heads x {T} "
          f"keys): {attend_s * 1e6:.0f} us, its keys and values read at {rates['attention reads, GB/s']:.1f} GB/s "
          f"(copying 256 MB: {copy_gbs:.1f} GB/s)")
    return rates


def run_ours(cfg, device, variants, warmup, repeats, checkpoint=None, force_length=False, sft=True, log=progress):
    """Every measurement, for each variant -> {variant: results, "_params": parameter count}."""
    base, tok, task = setup(cfg, device, checkpoint)
    results = {"_params": base.num_params()}
    for name in variants:
        if device == "cuda":
            torch.cuda.reset_peak_memory_stats()
        log(f"  {name}: sampling and RL steps ...")
        r = {"load_before": load()}
        with variant(name, force_length):
            r.update(measure(copy.deepcopy(base), tok, task, cfg, device, warmup, repeats))
        if name == "ours":  # ru_maxrss only grows: read it before SFT and the naive variants
            r["peak_rss_gib"] = peak_rss_gib()
            if device == "cuda":
                r["peak_cuda_gib"] = torch.cuda.max_memory_allocated() / 2**30
            if sft:
                log(f"  {name}: SFT steps ...")
                r.update(measure_sft(base, tok, task, cfg, device, warmup, repeats), peak_rss_with_sft_gib=peak_rss_gib())
        results[name] = dict(r, load_after=load())
    return results


# ----------------------------------------------------------------------------------------------
# TRL's GRPOTrainer on the same shape, in a child process (its own memory, its own imports)

def trl_available():
    return importlib.util.find_spec("trl") is not None


def trl_worker(spec):
    """Time TRL's GRPOTrainer: P prompts of Tp tokens x G samples of exactly Tc tokens, no KL,
    dropout off, gradient checkpointing off, one optimizer step per generation batch."""
    torch.set_num_threads(spec["threads"])
    import datasets  # optional dependencies: only this child process needs them
    import transformers
    import trl
    from tokenizers import Tokenizer as HFTokenizer, decoders, models, pre_tokenizers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast, TrainerCallback

    P, G, Tp, Tc, device = spec["P"], spec["G"], spec["prompt_tokens"], spec["completion_tokens"], spec["device"]
    # a byte-level tokenizer with no merges: 256 byte tokens + 4 specials = our vocabulary of 260
    vocab = {ch: i for i, ch in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    vocab.update({s: 256 + i for i, s in enumerate(["<|bos|>", "<|answer|>", "<|sep|>", "<|eos|>"])})
    hf_tok = HFTokenizer(models.BPE(vocab=vocab, merges=[]))
    hf_tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    hf_tok.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=hf_tok, bos_token="<|bos|>", eos_token="<|eos|>",
                                        pad_token="<|eos|>", padding_side="left")
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(vocab), n_positions=256, n_embd=128, n_layer=4, n_head=4,
                                       resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=256,
                                       eos_token_id=259, pad_token_id=259))
    rng = random.Random(0)
    prompts = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(Tp)) for _ in range(P * 64)]
    assert all(len(tokenizer(p)["input_ids"]) == Tp for p in prompts[:8])
    args = trl.GRPOConfig(
        output_dir=tempfile.mkdtemp(prefix="bench-trl-"), per_device_train_batch_size=P * G,
        gradient_accumulation_steps=1, steps_per_generation=1, num_generations=G, max_completion_length=Tc,
        generation_kwargs={"min_new_tokens": Tc},  # exactly Tc tokens, as ours: no early stop
        temperature=1.0, top_p=1.0, top_k=0, beta=0.0, num_iterations=1, learning_rate=3e-4,
        max_steps=spec["warmup"] + spec["repeats"], logging_steps=1, save_strategy="no", report_to="none",
        use_cpu=device == "cpu", bf16=device == "cuda", disable_dropout=True, gradient_checkpointing=False, seed=0,
        dataloader_num_workers=0, log_completions=False)
    times = []

    class Timer(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            self.t0, self.c0 = time.perf_counter(), time.process_time()

        def on_step_end(self, args, state, control, **kwargs):
            if device == "cuda":
                torch.cuda.synchronize()
            times.append((time.perf_counter() - self.t0, time.process_time() - self.c0))

    trl.GRPOTrainer(model=model, reward_funcs=lambda completions, **kw: [c.count("a") / max(1, len(c)) for c in completions],
                    args=args, train_dataset=datasets.Dataset.from_dict({"prompt": prompts}),
                    processing_class=tokenizer, callbacks=[Timer()]).train()
    times = times[spec["warmup"]:]
    ids = {k: v.repeat_interleave(G, 0) for k, v in tokenizer(prompts[:P], return_tensors="pt", padding=True).items()}
    model.eval()
    wall, cpu, out, _ = timed(lambda: model.generate(**ids, do_sample=True, max_new_tokens=Tc, min_new_tokens=Tc,
                                                     top_k=0, pad_token_id=259), device, spec["warmup"], spec["repeats"])
    return {"trl": trl.__version__, "transformers": transformers.__version__, "torch": torch.__version__,
            "params": sum(p.numel() for p in model.parameters()), "step_s": statistics.median(t for t, _ in times),
            "step_cpu_s": statistics.median(c for _, c in times), "step_walls": [t for t, _ in times],
            "step_tokens": P * G * Tc, "generate_s": wall, "generate_cpu_s": cpu,
            "generate_tok_per_s": P * G * (out.size(1) - Tp) / wall, "peak_rss_gib": peak_rss_gib(),
            "load_after": load()}


def time_trl(cfg, device, args, log=progress):
    """trl_worker at cfg's shape, in a child process -> its results, or {"error": why it did not run}."""
    if device not in ("cpu", "cuda"):
        return {"error": f"TRL comparison runs on cpu or cuda, not {device}"}
    if not trl_available():
        return {"error": "TRL is not installed (pip install trl to compare; it is not a dependency)"}
    spec = {"P": cfg["prompts_per_step"], "G": cfg["group_size"], "prompt_tokens": TRL_PROMPT_TOKENS,
            "completion_tokens": TRL_COMPLETION_TOKENS, "threads": torch.get_num_threads(), "device": device,
            "warmup": args.warmup, "repeats": args.repeats}
    log("  TRL GRPOTrainer (child process) ...")
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--trl-worker", json.dumps(spec)],
                          capture_output=True, text=True)
    for line in proc.stdout.splitlines()[::-1]:
        if line.startswith("TRL_RESULT "):
            return json.loads(line[len("TRL_RESULT "):])
    return {"error": f"TRL run failed (exit {proc.returncode}): " +
            " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-5:])}


# ----------------------------------------------------------------------------------------------
# Report

ROWS = [("sampling: tokens/s", "sample_tok_per_s", 0), ("sampling: s", "sample_s", 3),
        ("RL step: s (train.rl_step)", "step_s", 3), ("RL step: CPU s", "step_cpu_s", 3),
        ("  of which sampling + rewards, s", "step_sample_s", 3), ("    of which rewards, s", "step_reward_s", 3), ("  of which advantages + update, s", "step_rest_s", 3),
        ("SFT step: tokens/s", "sft_tok_per_s", 0), ("SFT step: s", "sft_s", 3),
        ("peak RSS (sampling + RL steps), GiB", "peak_rss_gib", 2), ("peak CUDA allocated, GiB", "peak_cuda_gib", 2),
        ("peak RSS after SFT steps too, GiB", "peak_rss_with_sft_gib", 2)]


def table(results, variants, trl=None):
    cols = {v: results[v] for v in variants}
    if trl and "error" not in trl:
        cols["TRL GRPOTrainer"] = {"sample_tok_per_s": trl["generate_tok_per_s"], "sample_s": trl["generate_s"],
                                   "step_s": trl["step_s"], "step_cpu_s": trl["step_cpu_s"],
                                   "peak_rss_gib": trl["peak_rss_gib"]}
    width = max(len(label) for label, _, _ in ROWS) + 2
    lines = ["".ljust(width) + "".join(c.rjust(18) for c in cols)]
    for label, key, digits in ROWS:
        cells = [f"{r[key]:,.{digits}f}" if r.get(key) is not None else "-" for r in cols.values()]
        if any(c != "-" for c in cells):
            lines.append(label.ljust(width) + "".join(c.rjust(18) for c in cells))
    return "\n".join(lines)


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].strip())
    parser.add_argument("--config", help="YAML file of overrides to train.py's DEFAULTS")
    parser.add_argument("--set", nargs="*", action="extend", default=[], metavar="KEY=VALUE", help="override config keys")
    parser.add_argument("--device", default="cpu", help="cpu | cuda | mps | auto (default cpu)")
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: the config's threads)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps first (default 2)")
    parser.add_argument("--repeats", type=int, default=5, help="timed steps; medians are reported (default 5)")
    parser.add_argument("--naive", action="store_true", help="also time without the shared prompt / KV cache")
    parser.add_argument("--trl-config", action="store_true", help="the TRL comparison's shape (see above)")
    parser.add_argument("--trl", action="store_true", help="also time TRL's GRPOTrainer (implies --trl-config)")
    parser.add_argument("--no-sft", action="store_true", help="skip the SFT step")
    parser.add_argument("--checkpoint", help="load these weights (a train.py checkpoint) instead of random ones")
    parser.add_argument("--warm-start-steps", type=int, metavar="N", help="instead: time the config's warm start "
                        "for N steps as a run builds it, per phase (single-answer, then mixed formats)")
    parser.add_argument("--profile", action="store_true", help="instead: profile our sampling and RL step at "
                        "the shape: sampling's ops by CPU time, the matmuls' share and FLOP rate (CPU)")
    parser.add_argument("--json", help="write every figure to this JSON file")
    parser.add_argument("--trl-worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.trl_config = args.trl_config or args.trl
    return args


def bench_config(args):
    """The command line -> (train.py config, device); a config or device that cannot work exits with one line."""
    overrides = list(TRL_CONFIG if args.trl_config else []) + list(args.set)
    try:
        device = config.pick_device(args.device)
        if device == "cuda" and not any(o.startswith("dtype=") for o in overrides):
            overrides.append("dtype=bfloat16")  # autocast on CUDA, as a CUDA training run would use
        saved = load_checkpoint(args.checkpoint)["config"] if args.checkpoint else None  # sizes match the weights
        base = {k: saved.get(k, v) for k, v in train.DEFAULTS.items()} if saved else None
        return train.resolve_config(args.config, overrides, base=base), device
    except (train.ConfigError, FileNotFoundError, RuntimeError) as e:
        hint = f" (this torch is {torch.__version__}; run with --device cpu)" if "CUDA is not available" in str(e) else ""
        print(f"error: {e}{hint}", file=sys.stderr)
        sys.exit(2)


def report(results, variants, params, trl, args):
    """The table of every figure, and what to read it with: shapes, load, the ratios to TRL's."""
    ours = results["ours"]
    print(f"\nmodel: {params / 1e6:.2f}M parameters; prompts {ours['prompt_tokens']} tokens, completions "
          f"{ours['completion_tokens']} tokens wide; medians of {args.repeats} after {args.warmup} warm-up")
    print(table(results, variants, trl))
    print("load: " + "; ".join(f"{v} {results[v]['load_before']} -> {results[v]['load_after']}" for v in variants))
    if args.trl_config:
        print(f"shape check: prompts {ours['prompt_tokens']} tokens, completions {ours['step_completion_width']} tokens "
              f"(the TRL comparison's: {TRL_PROMPT_TOKENS} and {TRL_COMPLETION_TOKENS})")
    if trl and "error" in trl:
        print(f"TRL: {trl['error']}; our figures above are absolute")
    elif trl:
        print(f"TRL {trl['trl']} (transformers {trl['transformers']}), {trl['params'] / 1e6:.2f}M parameters, "
              f"load after {trl['load_after']}")
        print(f"ratio: TRL step / our step = {trl['step_s'] / ours['step_s']:.2f}x wall "
              f"({trl['step_cpu_s'] / ours['step_cpu_s']:.2f}x CPU time); "
              f"HF generate / our sampling = {trl['generate_s'] / ours['sample_s']:.2f}x")


def main(argv=None):
    args = parse_args(argv)
    if args.trl_worker:  # the child process of --trl
        print("TRL_RESULT " + json.dumps(trl_worker(json.loads(args.trl_worker))), flush=True)
        return
    cfg, device = bench_config(args)
    torch.set_num_threads(args.threads or cfg["threads"] or torch.get_num_threads())
    variants = list(VARIANTS) if args.naive else ["ours"]
    machine = {"device": device, "threads": torch.get_num_threads(), "torch": torch.__version__,
               "cpu": platform.processor() or platform.machine(), "cpu_count": os.cpu_count(),
               "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
               "gpu": torch.cuda.get_device_name() if device == "cuda" else None}
    m, task = train.answers_per_rollout(cfg), make_task(cfg["task"], **cfg["task_options"])
    print(f"bench: task={cfg['task']} algo={cfg['algo']} model={cfg['model']} P={cfg['prompts_per_step']} "
          f"G={cfg['group_size']} m={m} max_new_tokens={m * task.max_answer_tokens + 1} kl_coef={cfg['kl_coef']} "
          f"dtype={cfg['dtype']}" + (" (TRL comparison shape)" if args.trl_config else ""))
    print(f"machine: {machine}; load average at start {load()}")
    if args.warm_start_steps:
        r = time_warm_start(cfg, device, args.warm_start_steps)
        print(f"warm start, {r['warm_start_steps']} steps: {r['warm_start_s']:.1f} s; single-answer phase "
              f"{r['single_steps']} steps, {r['single_ms'] or 0:.1f} ms a step; mixed phase {r['mixed_steps']} "
              f"steps, {r['mixed_ms'] or 0:.1f} ms a step; weights checksum {r['checksum']:.10f}")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"config": cfg, "machine": machine, "warm_start": r}, f, indent=1)
        return
    if args.profile:
        rates = profile_sampling(cfg, device, force_length=args.trl_config)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"config": cfg, "machine": machine, "matmuls": rates}, f, indent=1)
        return
    results = run_ours(cfg, device, variants, args.warmup, args.repeats, args.checkpoint,
                       force_length=args.trl_config, sft=not args.no_sft)
    params = results.pop("_params")
    trl = time_trl(cfg, device, args) if args.trl else None
    report(results, variants, params, trl, args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"config": cfg, "machine": machine, "params": params, "warmup": args.warmup,
                       "repeats": args.repeats, "trl_config": args.trl_config, "results": results, "trl": trl}, f,
                      indent=1)
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
