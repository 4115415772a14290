"""The checks that need a GPU, in one script: does the CUDA path compute what the CPU path computes,
and does every kind of run finish on it? Prints one PASS/FAIL line per check and writes them all
to OUT/gpu_check.json; exits 1 if any check failed. Needs a CUDA device; a few minutes on one.

    python tools/gpu_check.py --out out/gpu_check
    python tools/gpu_check.py --device cpu     # a dry run of the script itself: CPU against CPU

1. score: engine.score on CUDA against the same weights on the CPU, float32 with TF32 off:
   log-probs, entropies and gradients; under bf16 autocast how far they move (bounded loosely).
2. generate: engine.generate against model.generate on CUDA, same seed, TF32 off: the same tokens
   (as tests/test_engine.py checks on the CPU); TF32 on too: the same tokens again on a rerun.
3. graph: the captured decode step (engine.generate_static) against engine.generate, TF32 off: the
   same tokens, and uncaptured too (which of the two a difference comes from); all three timed.
4. sft: the warm start's update captured (warmstart.CapturedSFT) against warmstart.sft_step eagerly,
   TF32 off, from the same weights: the same losses and weights up to float rounding; both timed.
5. train: train.py end to end on CUDA (configs/tiny.yaml): persona and code in float32, and the
   README's GPU path (bf16, gpu preset, torch.compile); each must finish, log its device, leave a
   final.pt the CPU loads.
6. bench: tools/bench.py --device cuda at train.py's defaults, the gpu preset, and cuda_graph=false.
Left out: multi-GPU torchrun (NCCL) and any learning-quality claim; tests/ runs separately.
"""

import argparse
import copy
import functools
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import engine  # noqa: E402
import train  # noqa: E402
import warmstart  # noqa: E402
from config import make_task  # noqa: E402
from model import (  # noqa: E402
    GPT,
    PRESETS,
    Decoding,
    GPTConfig,
    Tokenizer,
    build_model,
    pad_left,
    pad_right,
)
from rollouts import max_completion_tokens  # noqa: E402
from runfiles import model_from_checkpoint  # noqa: E402

tok = Tokenizer()
DEVICE = "cuda"  # --device cpu dry-runs every check against the CPU itself
SCORE_PRESETS = ("cpu", "gpu")  # model sizes the scorer is compared at


def model_pair(preset, seed=0):
    """The same weights on the CPU and on CUDA, in train mode (gradients are compared)."""
    torch.manual_seed(seed)
    cpu = GPT(GPTConfig(vocab_size=tok.vocab_size, block_size=128, **PRESETS[preset])).train()
    return cpu, copy.deepcopy(cpu).to(DEVICE)


def score_batch(seed=1):
    """8 prompts x 4 samples of mixed lengths, as RL scores them (a prompt's samples in consecutive
    rows)."""
    g = torch.Generator().manual_seed(seed)
    prompts = [
        [tok.bos] + torch.randint(0, 256, (int(n),), generator=g).tolist() + [tok.answer]
        for n in torch.randint(3, 30, (8,), generator=g)
    ]
    p, pm = pad_left(prompts, tok.eos)
    p, pm = p.repeat_interleave(4, 0), pm.repeat_interleave(4, 0)
    lengths = torch.randint(1, 60, (32,), generator=g)
    completions = [torch.randint(0, 256, (int(n),), generator=g).tolist() for n in lengths]
    return (p, pm, *pad_right(completions, tok.eos))


def scored(model, batch, bf16=False):
    """Log-probs and entropies of the batch's completion tokens, and the gradient of their sum."""
    device = next(model.parameters()).device
    p, pm, c, cm = (x.to(device) for x in batch)
    model.zero_grad(set_to_none=True)
    with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=bf16):
        logp, ent = engine.score(model, p, pm, c, cm)
    (logp[cm].float().sum() + ent[cm].float().sum()).backward()
    grads = torch.cat([q.grad.flatten() for q in model.parameters()]).cpu()
    return logp[cm].float().detach().cpu(), ent[cm].float().detach().cpu(), grads


def set_tf32(on):
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = on


def seeded(**sampling):
    """A Decoding that draws from a fresh generator on DEVICE seeded 1: every call the same
    numbers."""
    return Decoding(tok.eos, generator=torch.Generator(DEVICE).manual_seed(1), **sampling)


def timed(fn, times):
    """fn() `times` times -> the mean seconds of one call, the device's queue included."""
    sync = torch.cuda.synchronize if DEVICE == "cuda" else lambda: None
    sync()
    t0 = time.time()
    for _ in range(times):
        fn()
    sync()
    return round((time.time() - t0) / times, 5)


def score_diffs(reference, other):
    (lr, er, gr), (lo, eo, go) = reference, other
    return {
        "max_logprob_diff": float((lr - lo).abs().max()),
        "mean_logprob_diff": float((lr - lo).abs().mean()),
        "max_entropy_diff": float((er - eo).abs().max()),
        "grad_rel_diff": float((gr - go).norm() / gr.norm()),
    }


def check_score(results):
    set_tf32(False)  # train.py turns TF32 on; the comparison with the CPU needs full float32
    for preset in SCORE_PRESETS:
        cpu, gpu = model_pair(preset)
        batch = score_batch()
        reference = scored(cpu, batch)
        d = score_diffs(reference, scored(gpu, batch))
        same = max(d["max_logprob_diff"], d["max_entropy_diff"], d["grad_rel_diff"]) < 1e-4
        record(results, f"score float32 {preset} preset: CUDA = CPU", same, **d)
        d = score_diffs(reference, scored(gpu, batch, bf16=True))
        # loose: a bug (a wrong mask, a cast in the wrong place) moves log-probs by whole nats
        near = d["mean_logprob_diff"] < 0.05 and d["grad_rel_diff"] < 0.1
        record(results, f"score bf16 autocast {preset} preset: near float32", near, **d)
    set_tf32(True)


def check_generate(results):
    """With TF32 on (as train.py runs on CUDA) the two samplers compute logits through different
    matmul shapes, a little apart, and a uniform that close to a CDF step picks the neighboring
    token: reported."""
    gpu = model_pair("cpu")[1].eval()
    p, pm = pad_left(
        [[tok.bos, 10, 11, tok.answer], [tok.bos, 1, 2, 3, 4, 5, tok.answer]], tok.eos, DEVICE
    )
    for tf32 in (False, True):
        set_tf32(tf32)
        for sampling in (dict(), dict(temperature=0.7, top_k=20), dict(top_p=0.9)):
            plain, fast, again = (
                sampler(gpu, p, pm, 8, 40, seeded(**sampling))
                for sampler in (GPT.generate, engine.generate, engine.generate)
            )
            agree = float((fast["tokens"] == plain["tokens"]).float().mean())
            rerun = torch.equal(fast["tokens"], again["tokens"])
            name = (
                f"generate on CUDA, TF32 {'on' if tf32 else 'off'}, {sampling or 'temperature 1'}"
            )
            name += ": rerun = run" if tf32 else ": fast = plain, rerun = run"
            ok = rerun and (tf32 or agree == 1.0)
            record(results, name, ok, token_agreement=agree, rerun_equal=rerun)


def check_graph(results):
    set_tf32(False)
    for preset, (P, G, new) in {"cpu": (8, 8, 48), "nano": (16, 8, 112)}.items():
        gpu = model_pair(preset)[1].eval()
        p, pm = pad_left(
            [[tok.bos, *range(10, 18 + i % 4), tok.answer] for i in range(P)], tok.eos, DEVICE
        )
        samplers = {
            "generate": engine.generate,
            "generate_static": engine.generate_static,
            "generate_static eager": functools.partial(engine.generate_static, capture=False),
        }
        tokens, seconds = {}, {}  # the uncaptured step tells a capture bug from a step bug
        for name, sampler in samplers.items():
            draw = functools.partial(sampler, gpu, p, pm, G, new)
            tokens[name] = draw(seeded())["tokens"]
            seconds[name] = timed(lambda draw=draw: draw(seeded()), 5)
        agree = {k: float((tokens["generate"] == tokens[k]).float().mean()) for k in tokens}
        details = dict(token_agreement=agree["generate_static"], **seconds)
        details["token_agreement_uncaptured"] = agree["generate_static eager"]
        name = f"generate_static captured ({preset} preset, {P}x{G} samples of {new}): same tokens"
        record(results, name, agree["generate_static"] == 1.0, **details)


def check_sft(results, steps=40):
    """Float rounding, not equality: the padded shapes and the capturable AdamW round
    differently."""
    set_tf32(False)
    cfg = train.resolve_config("configs/code.yaml")
    task = make_task(cfg["task"], **cfg["task_options"])
    torch.manual_seed(0)
    models = {"eager": build_model(cfg["model"], cfg["block_size"], tok.vocab_size, DEVICE)}
    models["eager"].train()
    models["captured"] = copy.deepcopy(models["eager"])
    capture = DEVICE == "cuda"
    width = max_completion_tokens(task, cfg["answers_per_rollout"])
    losses = {}
    seconds = {}
    graph = None
    for name, model in models.items():
        opt = warmstart.sft_optimizer(model, cfg, capturable=capture and name == "captured")
        if name == "captured":
            shape = (cfg["sft_batch"], cfg["block_size"] - width, width)
            graph = warmstart.CapturedSFT(model, opt, *shape, tok.eos, capture=capture)
        rng = random.Random(1000)
        losses[name] = []

        # the formats alternate, single answers first; a graph's batch is made on the CPU (it
        # copies the batch into its own buffers), as warm_start makes it
        def step(model=model, opt=opt, rng=rng, name=name, graph=graph):
            single = len(losses[name]) % 2 == 0
            where = "cpu" if graph is not None else DEVICE
            demos = warmstart.padded_demos(task, tok, cfg, rng, where, single)
            loss, _ = warmstart.sft_step(model, opt, demos, cfg["dtype"], graph)
            losses[name].append(loss.detach().clone())

        for _ in range(10):  # the warm-up and the capture
            step()
        seconds[name + " s a step"] = timed(step, steps - 10)
    eager, captured = (torch.stack(losses[k]).cpu() for k in models)
    loss_rel = float(((eager - captured).abs() / eager.abs()).max())
    weight_diff = max(
        float((a - b).detach().abs().max())
        for a, b in zip(models["eager"].parameters(), models["captured"].parameters())
    )
    name = f"warm-start update captured (code, {steps} steps): the eager losses and weights"
    ok = loss_rel < 1e-3 and weight_diff < 1e-4 and graph.updates == steps
    record(results, name, ok, loss_rel_diff=loss_rel, weight_max_diff=weight_diff, **seconds)


def run_script(*args):
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=900
    )


def check_train(results, out):
    gpu_path = ["task=persona", "dtype=bfloat16", "model=gpu", "compile=true"]  # the README's
    runs = {"persona float32": ["task=persona"], "code float32": ["task=code"]}
    runs["persona bf16 gpu preset compile"] = gpu_path
    for name, extra in runs.items():
        run_dir = os.path.join(out, "runs", name.replace(" ", "_"))
        t0 = time.time()
        where = [f"out_dir={run_dir}", f"warmstart_dir={out}/warmstart", f"device={DEVICE}"]
        proc = run_script("train.py", "--config", "configs/tiny.yaml", "--set", *where, *extra)
        seconds = time.time() - t0
        log_path = os.path.join(run_dir, "log.txt")
        log = Path(log_path).read_text() if os.path.exists(log_path) else ""
        loads = proc.returncode == 0 and all(
            q.device.type == "cpu" and torch.isfinite(q).all()
            for q in model_from_checkpoint(os.path.join(run_dir, "final.pt"))[0].parameters()
        )
        last_line = (log.strip().splitlines() or [""])[-1]
        details = dict(seconds=round(seconds, 1), last_log_line=last_line)
        ok = proc.returncode == 0 and f"device {DEVICE}" in log and loads
        check = f"train.py {name} on CUDA: finishes, final.pt loads on the CPU"
        record(results, check, ok, **details, stderr_tail=proc.stderr[-1500:])


def check_bench(results, out):
    runs = {"defaults": [], "gpu preset bf16": ["--set", "model=gpu"]}
    runs["no cuda_graph"] = ["--set", "cuda_graph=false"]
    for name, extra in runs.items():
        path = os.path.join(out, f"bench_{name.replace(' ', '_')}.json")
        proc = run_script(
            os.path.join("tools", "bench.py"), "--device", DEVICE, "--json", path, *extra
        )
        record(
            results,
            f"tools/bench.py --device cuda ({name}) runs",
            proc.returncode == 0,
            output_tail=proc.stdout[-2500:] + proc.stderr[-1500:],
        )


def record(results, name, ok, **details):
    ok = bool(ok)
    results.append({"check": name, "ok": ok, **details})
    shown = {k: v for k, v in details.items() if not isinstance(v, str)}
    print(f"{'PASS' if ok else 'FAIL'}  {name}  {shown}", flush=True)
    for k, v in details.items():
        if not ok and isinstance(v, str) and v:
            print(f"      {k}: {v}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].strip())
    parser.add_argument(
        "--out", default="out/gpu_check", help="folder for the runs and gpu_check.json"
    )
    parser.add_argument("--device", default="cuda", help="cuda (default); cpu dry-runs the script")
    names = ["score", "generate", "graph", "sft", "train", "bench"]
    parser.add_argument("--skip", nargs="*", default=[], metavar="CHECK", choices=names)
    args = parser.parse_args()
    global DEVICE
    DEVICE = args.device
    if DEVICE == "cuda" and not torch.cuda.is_available():
        sys.exit("gpu_check: no CUDA device here (torch.cuda.is_available() is False)")
    os.makedirs(args.out, exist_ok=True)
    device_name = torch.cuda.get_device_name() if DEVICE == "cuda" else DEVICE
    print(f"torch {torch.__version__}, {device_name}, CUDA {torch.version.cuda}", flush=True)
    results = []
    checks = {
        "score": check_score,
        "generate": check_generate,
        "graph": check_graph,
        "sft": check_sft,
        "train": functools.partial(check_train, out=args.out),
        "bench": functools.partial(check_bench, out=args.out),
    }
    for check_name, check in checks.items():
        if check_name in args.skip:
            continue
        try:
            check(results)
        except Exception as e:  # one broken check must not hide the others' results
            record(results, f"{check_name}: raised", False, error=f"{type(e).__name__}: {e}")
    summary = {
        "torch": torch.__version__,
        "device": device_name,
        "cuda": torch.version.cuda,
        "passed": sum(r["ok"] for r in results),
        "failed": sum(not r["ok"] for r in results),
        "checks": results,
    }
    with open(os.path.join(args.out, "gpu_check.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(f"{summary['passed']} passed, {summary['failed']} failed -> {args.out}/gpu_check.json")
    sys.exit(1 if summary["failed"] else 0)


if __name__ == "__main__":
    main()
