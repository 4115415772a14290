"""experiment.py: which earlier runs the headline may reuse, and the tables it writes."""
import os

import yaml

import experiment
from experiment import finished
from train import resolve_config


def _saved_run(folder, cfg, final=True):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.yaml"), "w") as f:
        yaml.safe_dump(cfg, f)
    if final:
        open(os.path.join(folder, "final.pt"), "wb").close()


def test_finished_reuses_only_identical_finished_runs(tmp_path):
    run = str(tmp_path / "run")
    cfg = resolve_config(overrides=[f"out_dir={run}", f"warmstart_from={tmp_path}/a/warmstart-persona-abc.pt"])
    assert not finished(cfg)  # nothing there yet
    _saved_run(run, cfg, final=False)
    assert not finished(cfg)  # unfinished: no final.pt
    _saved_run(run, cfg)
    assert finished(cfg)
    # the same run copied elsewhere with its warm start (same cache key in the file name)
    moved = dict(cfg, warmstart_from=f"{tmp_path}/b/warmstart-persona-abc.pt", threads=2)
    assert finished(moved)
    assert not finished(dict(cfg, warmstart_from=f"{tmp_path}/a/warmstart-persona-xyz.pt"))
    assert not finished(dict(cfg, lr=cfg["lr"] * 2))


def test_training_table_reads_each_seed(tmp_path):
    from experiment import training_table
    import json
    paths = []
    for seed, (start, end) in enumerate([(0.25, 0.5), (0.75, 1.0)]):
        path = tmp_path / f"metrics{seed}.jsonl"
        rows = [{"kind": "eval", "step": 0, "heldout_scalar": start}]
        rows += [{"kind": "train", "step": i, "entropy": 2.0 if i <= 10 else 1.0, "distinct_first_answers": 1.0,
                  "set_score": 0.5} for i in range(1, 31)]
        rows += [{"kind": "eval", "step": 30, "heldout_scalar": end}]
        path.write_text("\n".join(json.dumps(r) for r in rows))
        paths.append(str(path))
    results = {"tasks": {"persona": {"warm_start": {}, "grpo": {"training_metrics": paths}}}}
    row = training_table(results)[-1]
    assert row == "| persona | grpo | 0.25 / 0.75 -> 0.50 / 1.00 | 2.00 / 2.00 -> 1.00 / 1.00 | " \
                  "1.00 / 1.00 -> 1.00 / 1.00 | 0.50 / 0.50 -> 0.50 / 0.50 |"


def test_mutation_table_gives_shares_of_the_children():
    mu = {"children": 40, "invalid": 10, "improved": 2}
    results = {"tasks": {"code": {"vpo": {"evolution": {"mutations": mu}}, "grpo": {}}}}
    lines = experiment.mutation_table(results)
    assert lines[-2] == "| vpo | 40 | 0.25 | 0.050 |" and not any("grpo" in line for line in lines)
    assert experiment.mutation_table({"tasks": {"persona": {}}}) == []
