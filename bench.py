"""
How fast is training? Speed and memory of one RL step, of sampling rollouts, and of one
warm-start (SFT) step, for a config of train.py. Medians over repeated steps after a warm-up.

    python bench.py                        # train.py's DEFAULTS: persona, cpu preset, 8 prompts x 8 samples
    python bench.py --naive                # the same step without KV cache / without the shared prompt
    python bench.py --trl-config --trl     # the shape of the TRL GRPOTrainer comparison, and TRL itself
    python bench.py --set algo=grpo model=nano --threads 2 --json bench.json
    python bench.py --checkpoint out/run/final.pt   # trained weights: rollouts end when they really end
    python bench.py --device cuda          # bf16 autocast (train.py's dtype=bfloat16) unless --set dtype=...

What is timed:
- sampling: model.generate for P prompts x G samples (the rollouts, without rewards); tokens/s
  counts sampled tokens (the eos included, padding after it not).
- RL step: train.rl_step exactly as training calls it: sample rollouts and score their rewards,
  advantages, forward/backward, AdamW step, metrics. "of which sampling" is its sample_rollouts part.
- SFT step: one step of train.warm_start's loop: a batch of demonstrations, forward/backward, AdamW.
- peak memory: ru_maxrss of this process after sampling and the RL steps (torch.cuda.
  max_memory_allocated too on CUDA), then again after the SFT steps (their batch of whole
  demonstrations can be larger). --trl runs TRL in a child process, so each side's peak is its own.

--naive adds two columns, each the same RL step with one optimisation taken away, so a reader sees
what each buys: "no shared prompt" repeats each prompt G times for sampling (G prefills) and for
scoring (G forwards over the prompt); "naive" also drops the KV cache: every new token re-runs the
whole sequence. All three sample the same tokens for the same seed.

--trl-config is the shape the issue measured TRL's GRPOTrainer at: 8 prompts of exactly 32 tokens x 8
samples of exactly 48 tokens (no early stop), GRPO, no KL, the cpu preset (4 layers, 4 heads, 128
dims, byte vocabulary of 260). It is the persona task with 22 personas (a 32-token prompt) and
answers of up to 46 letters (48 new tokens); generate never stops early there. --trl also times TRL
on that shape when `trl` is importable (it is never a dependency of this project).

The weights are random unless --checkpoint is given. Random weights rarely sample <|eos|>, so a
rollout runs to max_new_tokens: the longest (slowest) case. Rewards do not change the cost.

The machine may be shared: each figure is a median, the CPU time this process used is shown next
to wall-clock time (on a busy machine it is the steadier number), and the load average is printed
before and after every measurement. Benchmarks are not tests: nothing here asserts a speed.
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch: OpenMP busy-waiting made CPU runs far slower

import argparse
import contextlib
import copy
import functools
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

import engine
import train
from checkpoint import load_checkpoint, model_from_checkpoint
from distributed import Scorer
from model import GPT, Tokenizer, pad_left
from rewards import make_task
from rollouts import rollout_prompt

# The shape of the TRL comparison (see the docstring): 32-token prompts, 48 new tokens, 8 x 8, no KL.
TRL_CONFIG = ["task=persona", "task_options={num_personas: 22, answer_len: 46}", "algo=grpo", "kl_coef=0.0",
              "model=cpu", "prompts_per_step=8", "group_size=8", "epochs_per_batch=1"]
TRL_PROMPT_TOKENS, TRL_COMPLETION_TOKENS = 32, 48


# ----------------------------------------------------------------------------------------------
# The machine

def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_info(device):
    info = {"device": device, "threads": torch.get_num_threads(), "torch": torch.__version__,
            "cpu": cpu_model(), "cpu_count": os.cpu_count(), "python": platform.python_version(),
            "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY")}
    if device == "cuda":
        info["gpu"] = torch.cuda.get_device_name()
    return info


def load():
    return [round(x, 2) for x in os.getloadavg()]


def peak_rss_gib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # ru_maxrss is in KiB on Linux


def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def timed(fn, device, warmup, repeats):
    """Run fn warmup + repeats times -> (medians of wall and CPU seconds, last result, all wall times)."""
    walls, cpus, out = [], [], None
    for i in range(warmup + repeats):
        sync(device)
        w0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        sync(device)
        if i >= warmup:
            walls.append(time.perf_counter() - w0)
            cpus.append(time.process_time() - c0)
    return statistics.median(walls), statistics.median(cpus), out, walls


# ----------------------------------------------------------------------------------------------
# The optimisations, taken away (for --naive): engine.generate / engine.score are swapped for
# versions without them while a variant is measured. All three sample the same tokens.

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


# ----------------------------------------------------------------------------------------------
# What is measured

def setup(cfg, device, checkpoint=None, seed=0):
    torch.manual_seed(seed)
    tok = Tokenizer(cfg["tokenizer"])
    task = make_task(cfg["task"], **cfg["task_options"])
    if checkpoint:
        model, _, _, _ = model_from_checkpoint(checkpoint, device)
    else:
        model = train.build_model(cfg, tok, device)
    return model, tok, task


def make_optimizer(model, cfg, device, lr):
    return torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=cfg["weight_decay"], betas=(0.9, 0.99),
                             fused=device == "cuda")  # as train.train builds it


def bench_sampling(model, tok, task, cfg, device, warmup, repeats, seed=0):
    """engine.generate for P prompts x G samples, as sample_rollouts calls it (no rewards)."""
    m = train.answers_per_rollout(cfg)
    problems = task.problems("train", cfg["prompts_per_step"], random.Random(seed))
    prompt, prompt_mask = pad_left([tok.encode(rollout_prompt(task, p, m)) for p in problems], tok.eos, device)
    generator = torch.Generator(device=device).manual_seed(seed)
    model.eval()

    def sample():
        return engine.generate(model, prompt, prompt_mask, cfg["group_size"], m * task.max_answer_tokens + 1, tok.eos,
                              temperature=cfg["temperature"], top_k=cfg["top_k"] or None,
                              top_p=cfg["top_p"] if cfg["top_p"] < 1 else None, generator=generator)
    wall, cpu, out, walls = timed(sample, device, warmup, repeats)
    tokens = int(out["mask"].sum())
    return {"sample_s": wall, "sample_cpu_s": cpu, "sample_tokens": tokens, "sample_tok_per_s": tokens / wall,
            "prompt_tokens": prompt.size(1), "completion_tokens": out["tokens"].size(1), "sample_walls": walls}


def bench_rl_step(model, tok, task, cfg, device, warmup, repeats, seed=0):
    """train.rl_step as training runs it (it trains `model`)."""
    run = train.Run(cfg, task, tok, model, make_optimizer(model, cfg, device, cfg["lr"]), Scorer(model),
                    rng=random.Random(seed), generator=torch.Generator(device=device).manual_seed(seed), device=device)
    record = []

    def step():
        metrics, batch = train.rl_step(run)
        record.append((metrics, batch["completion"].size(1)))
        return metrics
    wall, cpu, _, walls = timed(step, device, warmup, repeats)
    measured = record[warmup:]
    sample = statistics.median(r["sample_s"] for r, _ in measured)
    rest = statistics.median(r["step_s"] - r["sample_s"] for r, _ in measured)  # rl_step's own clock
    tokens = [r["tokens"] for r, _ in measured]
    return {"step_s": wall, "step_cpu_s": cpu, "step_sample_s": sample, "step_rest_s": rest,
            "step_tokens": statistics.median(tokens), "step_tok_per_s": sum(tokens) / sum(walls),
            "step_completion_width": max(w for _, w in measured), "step_walls": walls}


def bench_sft(model, tok, task, cfg, device, warmup, repeats, seed=0):
    """One step of train.warm_start's loop, on a copy of the model."""
    model = copy.deepcopy(model).train()
    opt = make_optimizer(model, cfg, device, cfg["sft_lr"])
    rng = random.Random(seed + 1000)
    counted = []

    def step():
        loss, n = train.sft_step(model, opt, task, tok, cfg, rng, device)
        counted.append(n)
        return loss.item()
    # the batch is built inside the step, as in warm_start (a few ms); batches alternate between one
    # answer and m answers per demonstration, so tokens/s is their total over the total time
    wall, cpu, _, walls = timed(step, device, warmup, repeats)
    tokens = counted[warmup:]
    return {"sft_s": wall, "sft_cpu_s": cpu, "sft_tokens": statistics.median(tokens),
            "sft_tok_per_s": sum(tokens) / sum(walls), "sft_walls": walls}


def progress(msg):
    print(msg, file=sys.stderr, flush=True)


def run_ours(cfg, device, variants, warmup, repeats, checkpoint=None, force_length=False, sft=True, log=progress):
    """Every measurement of this project's step, for each variant; returns {variant: results}."""
    base, tok, task = setup(cfg, device, checkpoint)
    results = {}
    for name in variants:
        model = copy.deepcopy(base)
        if device == "cuda":
            torch.cuda.reset_peak_memory_stats()
        r = {"load_before": load()}
        with variant(name, force_length):
            log(f"  {name}: sampling ...")
            r.update(bench_sampling(model, tok, task, cfg, device, warmup, repeats))
            log(f"  {name}: RL step ...")
            r.update(bench_rl_step(model, tok, task, cfg, device, warmup, repeats))
        if name == "ours":  # ru_maxrss only grows: read it before SFT and the naive variants
            r["peak_rss_gib"] = peak_rss_gib()
            if device == "cuda":
                r["peak_cuda_gib"] = torch.cuda.max_memory_allocated() / 2**30
            if sft:
                log(f"  {name}: SFT step ...")
                r.update(bench_sft(base, tok, task, cfg, device, warmup, repeats))
                r["peak_rss_with_sft_gib"] = peak_rss_gib()
        r["load_after"] = load()
        results[name] = r
    results["_params"] = base.num_params()
    return results


# ----------------------------------------------------------------------------------------------
# TRL's GRPOTrainer on the same shape, in a child process (its own memory, its own imports)

def trl_available():
    try:
        import importlib.util
        return importlib.util.find_spec("trl") is not None
    except (ImportError, ValueError):
        return False


def trl_worker(spec):
    """Time TRL's GRPOTrainer: P prompts of Tp tokens x G samples of exactly Tc tokens, no KL,
    dropout off, gradient checkpointing off, one optimizer step per generation batch."""
    torch.set_num_threads(spec["threads"])
    import datasets
    import transformers
    import trl
    from tokenizers import Tokenizer as HFTokenizer, decoders, models, pre_tokenizers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast, TrainerCallback

    P, G, Tp, Tc = spec["P"], spec["G"], spec["prompt_tokens"], spec["completion_tokens"]
    # a byte-level tokenizer with no merges: 256 byte tokens + 4 specials = our vocabulary of 260
    byte_chars = pre_tokenizers.ByteLevel.alphabet()
    vocab = {ch: i for i, ch in enumerate(sorted(byte_chars))}
    specials = ["<|bos|>", "<|answer|>", "<|sep|>", "<|eos|>"]
    vocab.update({s: 256 + i for i, s in enumerate(specials)})
    hf_tok = HFTokenizer(models.BPE(vocab=vocab, merges=[]))
    hf_tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    hf_tok.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=hf_tok, bos_token="<|bos|>", eos_token="<|eos|>",
                                        pad_token="<|eos|>", padding_side="left")
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=len(vocab), n_positions=256, n_embd=128, n_layer=4, n_head=4,
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=256, eos_token_id=259,
                        pad_token_id=259)
    model = GPT2LMHeadModel(config)
    rng = random.Random(0)
    prompts = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(Tp)) for _ in range(P * 64)]
    assert all(len(tokenizer(p)["input_ids"]) == Tp for p in prompts[:8])
    dataset = datasets.Dataset.from_dict({"prompt": prompts})

    def reward(completions, **kwargs):  # cheap, like ours: the share of one letter
        return [c.count("a") / max(1, len(c)) for c in completions]

    steps = spec["warmup"] + spec["repeats"]
    out_dir = tempfile.mkdtemp(prefix="bench-trl-")
    args = trl.GRPOConfig(
        output_dir=out_dir, per_device_train_batch_size=P * G, gradient_accumulation_steps=1,
        steps_per_generation=1, num_generations=G, max_completion_length=Tc,
        generation_kwargs={"min_new_tokens": Tc},  # exactly Tc tokens, as ours: no early stop
        temperature=1.0, top_p=1.0, top_k=0, beta=0.0, num_iterations=1, learning_rate=3e-4,
        max_steps=steps, logging_steps=1, save_strategy="no", report_to="none", use_cpu=spec["device"] == "cpu",
        bf16=spec["device"] == "cuda", disable_dropout=True, gradient_checkpointing=False, seed=0,
        dataloader_num_workers=0, log_completions=False)

    step_times = []

    class Timer(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            self.t0 = time.perf_counter()
            self.c0 = time.process_time()

        def on_step_end(self, args, state, control, **kwargs):
            sync(spec["device"])
            step_times.append((time.perf_counter() - self.t0, time.process_time() - self.c0))

    trainer = trl.GRPOTrainer(model=model, reward_funcs=reward, args=args, train_dataset=dataset,
                              processing_class=tokenizer, callbacks=[Timer()])
    trainer.train()
    measured = step_times[spec["warmup"]:]
    step_s = statistics.median(t for t, _ in measured)
    result = {"trl": trl.__version__, "transformers": transformers.__version__, "torch": torch.__version__,
              "params": sum(p.numel() for p in model.parameters()), "steps": len(step_times),
              "step_s": step_s, "step_cpu_s": statistics.median(c for _, c in measured),
              "step_tokens": P * G * Tc, "step_walls": [t for t, _ in measured]}

    # HF generate alone: P*G rows of Tp tokens -> exactly Tc new tokens, sampled
    ids = tokenizer(prompts[:P], return_tensors="pt", padding=True).to(model.device)
    ids = {k: v.repeat_interleave(G, 0) for k, v in ids.items()}
    model.eval()

    def hf_generate():
        with torch.no_grad():
            return model.generate(**ids, do_sample=True, max_new_tokens=Tc, min_new_tokens=Tc, top_k=0,
                                  pad_token_id=259)
    wall, cpu, out, _ = timed(hf_generate, spec["device"], spec["warmup"], spec["repeats"])
    result.update(generate_s=wall, generate_cpu_s=cpu, generate_new_tokens=out.size(1) - Tp,
                  generate_tok_per_s=P * G * (out.size(1) - Tp) / wall,
                  peak_rss_gib=peak_rss_gib(), load_after=load())
    if spec["device"] == "cuda":
        result["peak_cuda_gib"] = torch.cuda.max_memory_allocated() / 2**30
    return result


def run_trl(spec, log=progress):
    """Run trl_worker in a child process -> its result dict, or {"error": ...}."""
    cmd = [sys.executable, os.path.abspath(__file__), "--trl-worker", json.dumps(spec)]
    log(f"  TRL GRPOTrainer (child process) ...")
    proc = subprocess.run(cmd, capture_output=True, text=True)
    for line in proc.stdout.splitlines()[::-1]:
        if line.startswith("TRL_RESULT "):
            return json.loads(line[len("TRL_RESULT "):])
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
    return {"error": f"TRL run failed (exit {proc.returncode}): " + " | ".join(tail)}


# ----------------------------------------------------------------------------------------------
# Report

def fmt(value, digits=3):
    if value is None:
        return "-"
    if isinstance(value, float) and value >= 1000:
        return f"{value:,.0f}"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def table(results, variants, trl=None):
    rows = [
        ("sampling: tokens/s", "sample_tok_per_s", 0),
        ("sampling: s (generate)", "sample_s", 3),
        ("sampling: CPU s", "sample_cpu_s", 3),
        ("RL step: s (train.rl_step)", "step_s", 3),
        ("RL step: CPU s", "step_cpu_s", 3),
        ("  of which sampling + rewards, s", "step_sample_s", 3),
        ("  of which advantages + update, s", "step_rest_s", 3),
        ("RL step: tokens/s", "step_tok_per_s", 0),
        ("SFT step: tokens/s", "sft_tok_per_s", 0),
        ("SFT step: s (median)", "sft_s", 3),
        ("peak RSS (sampling + RL steps), GiB", "peak_rss_gib", 2),
        ("peak CUDA allocated (same), GiB", "peak_cuda_gib", 2),
        ("peak RSS after SFT steps too, GiB", "peak_rss_with_sft_gib", 2),
    ]
    cols = list(variants) + (["TRL GRPOTrainer"] if trl and "error" not in trl else [])
    width = max(len(r[0]) for r in rows) + 2
    lines = ["".ljust(width) + "".join(c.rjust(18) for c in cols)]
    for label, key, digits in rows:
        cells = []
        for c in cols:
            r = results.get(c, {}) if c != "TRL GRPOTrainer" else {
                "sample_tok_per_s": trl["generate_tok_per_s"], "sample_s": trl["generate_s"],
                "sample_cpu_s": trl["generate_cpu_s"], "step_s": trl["step_s"], "step_cpu_s": trl["step_cpu_s"],
                "step_tok_per_s": trl["step_tokens"] / trl["step_s"], "peak_rss_gib": trl["peak_rss_gib"],
                "peak_cuda_gib": trl.get("peak_cuda_gib")}
            v = r.get(key)
            cells.append(fmt(float(v), digits) if v is not None else "-")
        if any(c != "-" for c in cells):
            lines.append(label.ljust(width) + "".join(c.rjust(18) for c in cells))
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].strip())
    parser.add_argument("--config", help="YAML file of overrides to train.py's DEFAULTS")
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="override config keys")
    parser.add_argument("--device", default="cpu", help="cpu | cuda | mps | auto (default cpu)")
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: the config's threads)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps first (default 2)")
    parser.add_argument("--repeats", type=int, default=5, help="timed steps; medians are reported (default 5)")
    parser.add_argument("--naive", action="store_true", help="also time the step without shared prompt / KV cache")
    parser.add_argument("--trl-config", action="store_true", help="the TRL comparison's shape (see above)")
    parser.add_argument("--trl", action="store_true", help="also time TRL's GRPOTrainer (implies --trl-config)")
    parser.add_argument("--no-sft", action="store_true", help="skip the SFT step")
    parser.add_argument("--checkpoint", help="load these weights (a train.py checkpoint) instead of random ones")
    parser.add_argument("--json", help="write every figure to this JSON file")
    parser.add_argument("--trl-worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.trl_worker:  # the child process of --trl
        print("TRL_RESULT " + json.dumps(trl_worker(json.loads(args.trl_worker))), flush=True)
        return

    args.trl_config = args.trl_config or args.trl
    overrides = list(TRL_CONFIG if args.trl_config else []) + list(args.set)
    try:
        device = train.pick_device(args.device)
        if device == "cuda" and not any(o.startswith("dtype=") for o in overrides):
            overrides.append("dtype=bfloat16")  # autocast on CUDA, as a CUDA training run would use
        base = None
        if args.checkpoint:  # that run's config, so the task and sizes match the weights
            saved = load_checkpoint(args.checkpoint)["config"]
            base = {k: saved.get(k, v) for k, v in train.DEFAULTS.items()}
        cfg = train.resolve_config(args.config, overrides, base=base)
    except (train.ConfigError, FileNotFoundError, RuntimeError) as e:
        msg = str(e)
        if "CUDA is not available" in msg:
            msg += f" (this torch is {torch.__version__}; run with --device cpu)"
        print(f"error: {msg}", file=sys.stderr)
        sys.exit(2)
    torch.set_num_threads(args.threads or cfg["threads"] or torch.get_num_threads())
    variants = list(VARIANTS) if args.naive else ["ours"]

    machine = machine_info(device)
    m = train.answers_per_rollout(cfg)
    task = make_task(cfg["task"], **cfg["task_options"])
    print(f"bench: task={cfg['task']} algo={cfg['algo']} model={cfg['model']} P={cfg['prompts_per_step']} "
          f"G={cfg['group_size']} m={m} max_new_tokens={m * task.max_answer_tokens + 1} kl_coef={cfg['kl_coef']} "
          f"dtype={cfg['dtype']}" + (" (TRL comparison shape)" if args.trl_config else ""))
    print(f"machine: {machine['cpu']} ({machine['cpu_count']} CPUs), device {device}"
          + (f" ({machine['gpu']})" if "gpu" in machine else "")
          + f", torch {machine['torch']}, {machine['threads']} thread(s), OMP_WAIT_POLICY={machine['omp_wait_policy']}")
    print(f"load average at start: {load()} (1, 5, 15 min)")
    results = run_ours(cfg, device, variants, args.warmup, args.repeats, args.checkpoint,
                       force_length=args.trl_config, sft=not args.no_sft)
    params = results.pop("_params")

    trl = None
    if args.trl:
        if device not in ("cpu", "cuda"):
            trl = {"error": f"TRL comparison runs on cpu or cuda, not {device}"}
        elif not trl_available():
            trl = {"error": "TRL is not installed (pip install trl to compare; it is not a dependency)"}
        else:
            print(f"load average before TRL: {load()}")
            trl = run_trl({"P": cfg["prompts_per_step"], "G": cfg["group_size"], "prompt_tokens": TRL_PROMPT_TOKENS,
                           "completion_tokens": TRL_COMPLETION_TOKENS,
                           "threads": torch.get_num_threads(), "device": device,
                           "warmup": args.warmup, "repeats": args.repeats})

    ours = results["ours"]
    print(f"\nmodel: {params / 1e6:.2f}M parameters; prompts {ours['prompt_tokens']} tokens, "
          f"completions {ours['completion_tokens']} tokens wide; medians of {args.repeats} after {args.warmup} warm-up")
    print(table(results, variants, trl))
    for v in variants:
        print(f"load {v}: {results[v]['load_before']} -> {results[v]['load_after']}")
    if args.trl_config:
        shape_ok = ours["prompt_tokens"] == TRL_PROMPT_TOKENS and ours["step_completion_width"] == TRL_COMPLETION_TOKENS
        print(f"shape check: prompts {ours['prompt_tokens']} tokens, completions {ours['step_completion_width']} "
              f"tokens ({'as' if shape_ok else 'NOT as'} the TRL comparison)")
    if trl is not None:
        if "error" in trl:
            print(f"TRL: {trl['error']}; our figures above are absolute")
        else:
            print(f"TRL {trl['trl']} (transformers {trl['transformers']}, torch {trl['torch']}), "
                  f"{trl['params'] / 1e6:.2f}M parameters: {trl['step_s']:.3f} s per optimizer step, "
                  f"HF generate {trl['generate_s']:.3f} s for {cfg['prompts_per_step'] * cfg['group_size']} x "
                  f"{trl['generate_new_tokens']} tokens, peak RSS {trl['peak_rss_gib']:.2f} GiB, load after {trl['load_after']}")
            print(f"ratio: TRL step / our step = {trl['step_s'] / ours['step_s']:.2f}x wall "
                  f"({trl['step_cpu_s'] / ours['step_cpu_s']:.2f}x CPU time); "
                  f"HF generate / our sampling = {trl['generate_s'] / ours['sample_s']:.2f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"config": cfg, "machine": machine, "params": params, "warmup": args.warmup,
                       "repeats": args.repeats, "trl_config": args.trl_config, "results": results, "trl": trl},
                      f, indent=1)
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
