"""How fast is training? Speed and memory of sampling rollouts, of one RL step and of one warm-start
(SFT) step, for a config of train.py: medians over repeated steps after a warm-up. A benchmark,
not a test: nothing here asserts a speed.

    python tools/bench.py                  # DEFAULTS: persona, cpu preset, 8 prompts x 8 samples
    python tools/bench.py --checkpoint out/run/final.pt --set algo=vpo     # real rollout lengths
    python tools/bench.py --device cuda    # bf16 autocast unless --set dtype=...; --json FILE
    python tools/bench.py --config configs/code.yaml --warm-start-steps 1500   # the warm start
    python tools/bench.py --step-times out/headline/runs/*/timing.jsonl   # what runs took a step
    python tools/bench.py --naive          # also without the shared prompt, without the KV cache

Measured: engine.generate for P prompts x G samples (tokens/s counts sampled tokens, eos included);
train.rl_step exactly as training runs it (sampling and rewards, advantages, update); one
warmstart.sft_step; peak memory, ru_maxrss after sampling and RL steps (and max_memory_allocated on
CUDA). Random weights rarely sample <|eos|>, so without --checkpoint rollouts run to max_new_tokens.
On a shared machine the CPU time of this process is the steadier number; the load average is
printed. tools/trl_compare.py times TRL's GRPOTrainer beside this code.
Deliberately left out: timing under torchrun, per-kernel profiles (torch.profiler's job), the
evaluation and search.
"""

import os
from pathlib import Path

# before torch: OpenMP's busy-waiting slows shared CPUs
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import contextlib
import copy
import functools
import json
import platform
import random
import resource
import statistics
import sys
import tempfile
import time

import torch

# the project's modules
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import config  # noqa: E402
import engine  # noqa: E402
import train  # noqa: E402
import warmstart  # noqa: E402
from config import make_task  # noqa: E402
from model import GPT, Decoding, Tokenizer, build_model, pad_left  # noqa: E402
from policy import Policy  # noqa: E402
from rollouts import max_completion_tokens, rollout_prompt  # noqa: E402
from runfiles import load_checkpoint, model_from_checkpoint  # noqa: E402

FAST_GENERATE = engine.generate  # the real one: a variant below replaces engine.generate


def generate_unshared(model, prompt, prompt_mask, num_samples, max_new_tokens, decoding, **options):
    """engine.generate with each sample its own copy of its prompt: num_samples prefills of the
    same text, the same samples (one per row, rows in the same order)."""
    prompt = prompt.repeat_interleave(num_samples, 0)
    prompt_mask = prompt_mask.repeat_interleave(num_samples, 0)
    return FAST_GENERATE(model, prompt, prompt_mask, 1, max_new_tokens, decoding, **options)


# --naive: engine.generate and engine.score with one trick off, then model.py's plain versions
VARIANTS = {
    "no shared prompt": (
        generate_unshared,
        functools.partial(engine.score, share_prompt=False, buckets=1),
    ),
    "naive": (GPT.generate, GPT.score),  # no KV cache either
}


@contextlib.contextmanager
def variant(name):
    """engine.generate and engine.score are variant `name`'s inside (all sample the same tokens)."""
    saved = (engine.generate, engine.score)
    engine.generate, engine.score = VARIANTS[name]
    try:
        yield
    finally:
        engine.generate, engine.score = saved


def peak_rss_gib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux


def load():
    return [round(x, 2) for x in os.getloadavg()]


def timed(fn, device, warmup, repeats):
    """fn() warmup + repeats times -> (median wall s, median CPU s, last result, the wall times)."""
    walls = []
    cpus = []
    out = None
    sync = torch.cuda.synchronize if device == "cuda" else lambda: None
    for i in range(warmup + repeats):
        sync()
        w0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        sync()
        if i >= warmup:
            walls.append(time.perf_counter() - w0)
            cpus.append(time.process_time() - c0)
    return statistics.median(walls), statistics.median(cpus), out, walls


def measure(cfg, device, warmup, repeats, checkpoint=None):
    """Every figure (sampling alone, an RL step, an SFT step); weights `checkpoint`'s, else random,
    seeded."""
    torch.manual_seed(0)
    tok = Tokenizer(cfg["tokenizer"])
    task = make_task(cfg["task"], **cfg["task_options"])
    if checkpoint:
        model = model_from_checkpoint(checkpoint, device)[0]
    else:
        model = build_model(cfg["model"], cfg["block_size"], tok.vocab_size, device)
    r = {"params": model.num_params(), "load_before": load()}
    r.update(measure_sampling(model, tok, task, cfg, device, warmup, repeats))
    # its steps train the copy
    m = train.answers_per_rollout(cfg)
    policy = Policy.from_config(copy.deepcopy(model), tok, cfg, device, m)
    run = train.make_run(cfg, task, policy)
    steps = []
    wall, cpu, _, walls = timed(
        lambda: steps.append(train.rl_step(run)[0]), device, warmup, repeats
    )
    steps = steps[warmup:]
    r.update(
        step_s=wall,
        step_cpu_s=cpu,
        step_tok_per_s=sum(s["tokens"] for s in steps) / sum(walls),
        step_sample_s=statistics.median(s["sample_s"] for s in steps),  # rl_step's own clock
        step_rest_s=statistics.median(s["step_s"] - s["sample_s"] for s in steps),
        peak_rss_gib=peak_rss_gib(),
    )
    if device == "cuda":
        r["peak_cuda_gib"] = torch.cuda.max_memory_allocated() / 2**30
    opt = warmstart.sft_optimizer(model.train(), cfg)
    rng = random.Random(1000)
    counted = []  # tokens of each step: formats alternate per batch, so tokens/s over all of them

    def demos_and_sft_step():  # making the demonstrations is part of a warm-start step
        demos = warmstart.padded_demos(task, tok, cfg, rng, device)
        counted.append(warmstart.sft_step(model, opt, demos, cfg["dtype"])[1])

    wall, cpu, _, walls = timed(demos_and_sft_step, device, warmup, repeats)
    tokens = sum(counted[warmup:])
    return dict(r, sft_s=wall, sft_cpu_s=cpu, sft_tok_per_s=tokens / sum(walls), load_after=load())


def measure_sampling(model, tok, task, cfg, device, warmup, repeats):
    """engine.generate alone, P prompts x G samples at the config's temperature."""
    m = train.answers_per_rollout(cfg)
    problems = task.problems("train", cfg["prompts_per_step"], random.Random(0))
    prompts = [tok.encode(rollout_prompt(task, p, m)) for p in problems]
    prompt, prompt_mask = pad_left(prompts, tok.eos, device)
    generator = torch.Generator(device=device).manual_seed(0)
    max_tokens = max_completion_tokens(task, m)
    G = cfg["group_size"]

    def sample():
        decoding = Decoding(tok.eos, temperature=cfg["temperature"], generator=generator)
        return engine.generate(model.eval(), prompt, prompt_mask, G, max_tokens, decoding)

    wall, cpu, out, _ = timed(sample, device, warmup, repeats)
    return dict(
        sample_s=wall,
        sample_cpu_s=cpu,
        sample_tok_per_s=int(out["mask"].sum()) / wall,
        prompt_tokens=prompt.size(1),
        completion_tokens=out["tokens"].size(1),
    )


class PhaseTimer:
    """The seconds of each warm-start step, from making its demonstrations to its update, by phase
    (single_only): warmstart.padded_demos starts a step's clock, warmstart.sft_step stops it."""

    def __init__(self, device):
        self.device = device
        self.seconds = {True: [], False: []}  # single_only -> step seconds
        self.phase = []  # single_only of every step so far
        self.started = None  # the clock of the step under way, and its phase
        self.single = None
        self.real_demos = warmstart.padded_demos
        self.real_step = warmstart.sft_step

    def settle(self):
        """CUDA steps run ahead of the GPU as in warm_start: the wait is booked where a phase
        ends."""
        if self.device == "cuda" and self.phase:
            t0 = time.perf_counter()
            torch.cuda.synchronize()
            self.seconds[self.phase[-1]][-1] += time.perf_counter() - t0

    def demos(self, task, tok, cfg, rng, device, single_only=False, parents_only=False):
        if self.phase and self.phase[-1] != single_only:
            self.settle()
        self.single = bool(single_only)
        self.started = time.perf_counter()
        return self.real_demos(task, tok, cfg, rng, device, single_only, parents_only)

    def step(self, *args, **kwargs):
        out = self.real_step(*args, **kwargs)
        self.seconds[self.single].append(time.perf_counter() - self.started)
        self.phase.append(self.single)
        return out

    @contextlib.contextmanager
    def installed(self):
        """warm_start looks both names up at each step: inside, it calls the timed ones."""
        warmstart.padded_demos, warmstart.sft_step = self.demos, self.step
        try:
            yield self
        finally:
            warmstart.padded_demos, warmstart.sft_step = self.real_demos, self.real_step


def time_warm_start(cfg, device, steps):
    """warmstart.warm_start as a run builds it (fresh weights, a throwaway cache), for `steps`
    steps: the seconds of each step in its single-answer phase and in its mixed phase, and a
    checksum of the weights it ends with (equal checksums: two versions of the code trained the same
    warm start)."""
    with PhaseTimer(device).installed() as timer, tempfile.TemporaryDirectory() as cache:
        t0 = time.time()
        model, _ = warmstart.warm_start(
            {**cfg, "sft_steps": steps, "warmstart_from": "", "warmstart_dir": cache},
            make_task(cfg["task"], **cfg["task_options"]),
            Tokenizer(cfg["tokenizer"]),
            device,
            lambda msg: None,
        )
        timer.settle()
        total = time.time() - t0
    seconds = timer.seconds
    mean_ms = {single: 1000 * statistics.mean(s) if s else None for single, s in seconds.items()}
    return {
        "warm_start_steps": steps,
        "warm_start_s": total,
        "single_steps": len(seconds[True]),
        "single_ms": mean_ms[True],
        "mixed_steps": len(seconds[False]),
        "mixed_ms": mean_ms[False],
        "checksum": sum(float(p.detach().double().sum()) for p in model.parameters()),
    }


def step_times(path):
    """A run's timing.jsonl -> one line: its steps done and median seconds a step (finished or cut
    short)."""
    lines = Path(path).read_text().splitlines() if os.path.exists(path) else []
    rows = [json.loads(line) for line in lines]
    name = os.path.basename(os.path.dirname(path)) or path
    if not rows:
        return f"{name}: no steps timed"
    return (
        f"{name}: {len(rows)} steps, median {statistics.median(r['step_s'] for r in rows):.3f} s "
        f"a step (sampling {statistics.median(r['sample_s'] for r in rows):.3f} s)"
    )


ROWS = [
    ("sampling: tokens/s", "sample_tok_per_s", 0),
    ("sampling: s", "sample_s", 3),
    ("RL step: s (train.rl_step)", "step_s", 3),
    ("RL step: CPU s", "step_cpu_s", 3),
    ("  of which sampling + rewards, s", "step_sample_s", 3),
    ("  of which advantages + update, s", "step_rest_s", 3),
    ("SFT step: tokens/s", "sft_tok_per_s", 0),
    ("SFT step: s", "sft_s", 3),
    ("peak RSS (sampling + RL steps), GiB", "peak_rss_gib", 2),
    ("peak CUDA allocated, GiB", "peak_cuda_gib", 2),
]


def table(r):
    width = max(len(label) for label, _, _ in ROWS) + 2
    return "\n".join(
        label.ljust(width) + f"{r[key]:,.{digits}f}".rjust(12)
        for label, key, digits in ROWS
        if r.get(key) is not None
    )


def parse_args(argv):
    description = __doc__.split("\n\n")[0].strip()
    parser = config.settings_parser(description, train.DEFAULTS, [(train.__file__, "DEFAULTS")])
    parser.add_argument("--device", default="cpu", help="cpu | cuda | mps | auto (default cpu)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps first (default 2)")
    parser.add_argument("--repeats", type=int, default=5, help="timed steps; medians reported")
    parser.add_argument("--checkpoint", help="a train.py checkpoint's weights, not random ones")
    # instead: the warm start as a run builds it, N steps, per phase; or finished runs' step times
    parser.add_argument("--warm-start-steps", type=int, metavar="N")
    parser.add_argument("--step-times", nargs="+", metavar="TIMING_JSONL")
    parser.add_argument("--naive", action="store_true", help="also without each trick of engine")
    parser.add_argument("--json", help="write every figure to this JSON file")
    return parser.parse_args(argv)


def bench_config(args):
    """The command line -> (train.py config, device); a config or device that cannot work exits with
    one line."""
    overrides = list(args.set)
    try:
        device = config.pick_device(args.device)
        if device == "cuda" and not any(o.startswith("dtype=") for o in overrides):
            overrides.append("dtype=bfloat16")  # autocast on CUDA, as a CUDA training run would use
        # sizes match the weights
        saved = load_checkpoint(args.checkpoint)["config"] if args.checkpoint else None
        base = {k: saved.get(k, v) for k, v in train.DEFAULTS.items()} if saved else None
        return train.resolve_config(args.config, overrides, base=base), device
    except config.ONE_LINE_ERRORS as e:
        hint = (
            f" (this torch is {torch.__version__}; run with --device cpu)"
            if "CUDA is not available" in str(e)
            else ""
        )
        print(f"error: {e}{hint}", file=sys.stderr)
        sys.exit(2)


def main(argv=None):
    args = parse_args(argv)
    if args.step_times:
        print("\n".join(map(step_times, args.step_times)))
        return
    cfg, device = bench_config(args)
    torch.set_num_threads(cfg["threads"] or torch.get_num_threads())  # --set threads=N
    machine = {
        "device": device,
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "cpu": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
        "gpu": torch.cuda.get_device_name() if device == "cuda" else None,
    }
    m = train.answers_per_rollout(cfg)
    task = make_task(cfg["task"], **cfg["task_options"])
    shape = f"P={cfg['prompts_per_step']} G={cfg['group_size']} m={m}"
    print(
        f"bench: task={cfg['task']} algo={cfg['algo']} model={cfg['model']} {shape} "
        f"max_new_tokens={max_completion_tokens(task, m)} kl_coef={cfg['kl_coef']} "
        f"dtype={cfg['dtype']}\nmachine: {machine}; load average at start {load()}"
    )
    if args.warm_start_steps:
        r = time_warm_start(cfg, device, args.warm_start_steps)
        print(
            f"warm start, {r['warm_start_steps']} steps: {r['warm_start_s']:.1f} s; single-answer "
            f"phase {r['single_steps']} steps, {r['single_ms'] or 0:.1f} ms a step; mixed phase "
            f"{r['mixed_steps']} steps, {r['mixed_ms'] or 0:.1f} ms a step; weights checksum "
            f"{r['checksum']:.10f}"
        )
        saved = {"warm_start": r}
    else:
        r = measure(cfg, device, args.warmup, args.repeats, args.checkpoint)
        print(
            f"\nmodel: {r['params'] / 1e6:.2f}M parameters; prompts {r['prompt_tokens']} tokens, "
            f"completions {r['completion_tokens']} tokens wide; medians of {args.repeats} after "
            f"{args.warmup} warm-up\n{table(r)}\nload: {r['load_before']} -> {r['load_after']}"
        )
        for name in VARIANTS if args.naive else ():
            with variant(name):
                v = r[name] = measure(cfg, device, args.warmup, args.repeats, args.checkpoint)
            print(f"{name}: sampling {v['sample_s']:.3f} s, RL step {v['step_s']:.3f} s")
        saved = {"warmup": args.warmup, "repeats": args.repeats, "results": r}
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"config": cfg, "machine": machine, **saved}, f, indent=1)
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
