"""Does a change move any result? Runs the smoke experiment (`python lab/experiment.py --quick`) on
an earlier commit and on the working tree, on this machine, and compares what they wrote.

    python lab/same_results.py HEAD~1           # exit 0: the same results; 1: a list of what
    differs

Compared byte for byte: every result file (results/*.json: pools, per-problem values, searches,
training summaries), every run's metrics.jsonl, samples.jsonl and config.yaml, and the weights in
every run's final.pt and every warm start. Left out, because they name the code or the clock, not
the results: the commit, machine and source fields, a search's seconds, timing.jsonl and log.txt,
the hash in a warm start's file name (it follows the code, so it changes when that code moves),
and a setting that only one side knows when it holds train.DEFAULTS' value (a new setting at its
default, such as train_problems=0, changes nothing).
A refactor that keeps every number passes this; a seed reproduces bit for bit only on one machine,
so both sides run here. Needs git (the earlier commit is checked out in a temporary worktree).
"""

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # train.DEFAULTS
from train import DEFAULTS  # noqa: E402

# the same relative path on both sides (configs name it), one per process (two checks may run at
# once)
OUT = os.path.join("out", f"same_results_{os.getpid()}")
WARM_HASH = re.compile(r"warmstart-([a-z_]+)-[0-9a-f]{12}\.pt")


def quick_run(tree):
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", PYTHONHASHSEED="0")
    # before the lab had its own folder: train.py handed over
    runner = os.path.join("lab", "experiment.py")
    runner = runner if os.path.exists(os.path.join(tree, runner)) else "train.py"
    subprocess.run(
        # the warm starts beside the results on both sides, not in the shared cache
        [sys.executable, runner, "--quick", "--set", f"out_dir={OUT}", "overwrite=true"]
        + [f"warmstart_dir={OUT}/warmstart"],
        cwd=tree,
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return os.path.join(tree, OUT)


def without_new_defaults(mine, theirs):
    """mine with every setting theirs lacks dropped where it holds train.DEFAULTS' value, nested
    dicts alike (a result file's run settings sit inside its record)."""
    if not isinstance(mine, dict) or not isinstance(theirs, dict):
        return mine
    out = {}
    for key, value in mine.items():
        if key not in theirs and key in DEFAULTS and value == DEFAULTS[key]:
            continue
        out[key] = without_new_defaults(value, theirs.get(key))
    return out


def parsed(path):
    text = Path(path).read_text()
    return json.loads(text) if path.endswith(".json") else yaml.safe_load(text)


def comparable_text(path, other=None):
    """A result file's text without what names the code or the machine, warm-start hashes masked;
    other: the same file on the other side (the settings only one side knows, at their defaults,
    are left out)."""
    text = Path(path).read_text()
    if path.endswith(".yaml") and other:
        text = json.dumps(without_new_defaults(parsed(path), parsed(other)), sort_keys=True)
    if path.endswith(".json"):
        record = json.loads(text)
        if other:
            record = without_new_defaults(record, parsed(other))
        for key in ("commit", "machine", "commits", "machines", "wall_s", "source"):
            record.pop(key, None)
        record.get("pools", {}).pop("reward_vectors", None)  # a figure's copy of the pools
        for search in (record.get(kind, {}) for kind in ("search", "search_set")):
            search.pop("seconds", None), search.pop("sampling_seconds", None)
        text = json.dumps(record, sort_keys=True)
    return WARM_HASH.sub(r"warmstart-\1-HASH.pt", text)


def weights(path):
    state = torch.load(path, map_location="cpu", weights_only=True)
    return state["model"]


def differences(a, b):
    texts = ["results/*.json", "runs/*/metrics.jsonl", "runs/*/samples.jsonl", "runs/*/config.yaml"]
    checkpoints = ["runs/*/final.pt", "warmstart/*.pt"]
    found = []
    for pattern in texts + checkpoints:
        names_a = {
            WARM_HASH.sub(r"\1", os.path.relpath(p, a)): p
            for p in glob.glob(os.path.join(a, pattern))
        }
        names_b = {
            WARM_HASH.sub(r"\1", os.path.relpath(p, b)): p
            for p in glob.glob(os.path.join(b, pattern))
        }
        found += [f"only on one side: {n}" for n in sorted(names_a.keys() ^ names_b.keys())]
        for name in sorted(names_a.keys() & names_b.keys()):
            pa, pb = names_a[name], names_b[name]
            if pattern in checkpoints:
                wa, wb = weights(pa), weights(pb)
                same = wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)
            else:
                same = comparable_text(pa, pb) == comparable_text(pb, pa)
            if not same:
                found.append(f"differs: {name}")
    return found


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].strip())
    parser.add_argument("commit", help="the earlier commit to compare the working tree with")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        tree = os.path.join(tmp, "before")
        subprocess.run(
            ["git", "worktree", "add", "--detach", tree, args.commit],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        try:
            found = differences(quick_run(tree), quick_run(ROOT))
        finally:
            shutil.rmtree(os.path.join(ROOT, OUT), ignore_errors=True)
            subprocess.run(
                ["git", "worktree", "remove", "--force", tree], cwd=ROOT, capture_output=True
            )
    print(
        "\n".join(found)
        if found
        else f"the same results as {args.commit}: every result file, log of metrics "
        f"and samples, config and weights"
    )
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
