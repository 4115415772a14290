"""checkpoint.py's per-step logs: what a training log says must compare across runs."""

import types

import torch

import checkpoint
import vpo
from config import make_task


def _step(weights, set_algo=True):
    task = make_task("persona")
    g = torch.Generator().manual_seed(0)
    rewards = torch.rand(2, 4, 3, task.dim, generator=g)  # (P, G, m, D): the same answers for both runs
    batch = {"answers": [[("a",) * 3] * 4] * 2, "completion_mask": torch.ones(8, 5), "entropy": torch.ones(8, 5)}
    run = types.SimpleNamespace(task=task, cfg={"group_size": 4})
    return checkpoint.step_metrics(run, batch, rewards, rewards.mean(-1), weights, torch.zeros(2, 4), set_algo)


def test_the_logged_set_score_is_the_same_for_every_weight_sampler_and_count():
    g = torch.Generator().manual_seed(1)
    dirichlet = vpo.sample_weights(2, 100, 4, sampler="dirichlet", generator=g)
    sobol = vpo.sample_weights(2, 16, 4, sampler="sobol", generator=g)
    vertices = torch.eye(4)[None].expand(2, -1, -1)  # one-hot weightings: a sampler a student might add
    logged = [_step(w) for w in (dirichlet, sobol, vertices)]
    assert logged[0]["set_score"] == logged[1]["set_score"] == logged[2]["set_score"]  # fixed weightings
    trained = [m["set_score_train"] for m in logged]
    assert len(set(trained)) == 3  # the run's own weightings, logged under another name
    assert _step(dirichlet, set_algo=False)["set_score"] == logged[0]["set_score"]
    assert "set_score_train" not in _step(dirichlet, set_algo=False)
