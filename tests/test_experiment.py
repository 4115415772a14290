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


def _differences(task, a, b, quick=False):
    ca, cb = (experiment.run_config(task, name, 0, {}, "out/x", quick) for name in (a, b))
    return {k: (ca[k], cb[k]) for k in ca if ca[k] != cb[k] and k != "out_dir"}


def test_clip_higher_is_compared_with_grpo_at_the_same_updates_per_batch():
    # clipping binds only from a batch's second update on: grpo_2ep and grpo_clip_higher differ in
    # the upper clip alone, and both take at least two updates per batch
    for task in experiment.TASKS:
        assert _differences(task, "grpo_2ep", "grpo_clip_higher") == {"clip_high": (0.0, 0.28)}
        assert experiment.run_config(task, "grpo_2ep", 0, {}, "out/x", False)["epochs_per_batch"] >= 2
    assert {"grpo_2ep", "grpo_clip_higher"} <= set(experiment.ABLATIONS)


def test_dr_grpo_and_dapo_rows_use_every_part_of_their_method():
    assert _differences("persona", "grpo", "dr_grpo") == {"std_norm": (True, False), "loss_norm": ("tokens", "constant")}
    dapo = experiment.run_config("code", "dapo", 0, {}, "out/x", False)
    assert dapo["clip_high"] == 0.28 and dapo["epochs_per_batch"] >= 2 and dapo["dynamic_sampling"] > 1


def test_quick_mode_trains_max_at_k_with_k_below_the_group_size():
    cfg = experiment.run_config("persona", "max_at_k", 0, {}, "out/x", quick=True)
    assert 1 <= cfg["max_k"] < cfg["group_size"]
