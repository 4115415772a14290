"""Small helpers the tests share: a closeness check that fails with a few numbers (not two tensor
dumps), and a result file's record built by hand for the lab's report tests."""

import torch


def assert_close(got, want, atol=1e-8, what="result"):
    """torch.allclose's check, failing with a few numbers instead of two tensor dumps."""
    __tracebackhide__ = True  # pytest: show the test's line, not this one
    got, want = torch.as_tensor(got), torch.as_tensor(want, dtype=torch.as_tensor(got).dtype)
    if got.shape != want.shape:
        raise AssertionError(f"{what} has shape {tuple(got.shape)}, expected {tuple(want.shape)}")
    if not torch.allclose(got, want, atol=atol):
        worst = int((got - want).abs().flatten().nan_to_num(float("inf")).argmax())
        flat_got, flat_want = got.flatten().tolist(), want.flatten().tolist()
        raise AssertionError(
            f"{what}: got {[round(x, 4) for x in flat_got[:6]]}, expected "
            f"{[round(x, 4) for x in flat_want[:6]]}; worst at position {worst}: "
            f"{flat_got[worst]:.4g} instead of {flat_want[worst]:.4g}"
        )


def record(task, method, seed, best, passed=None, diversity=1.0, m=1, per_problem_diversity=None):
    """A result file's record with per-problem values `best` (and `passed`, and diversities) at the
    largest k."""
    passed = passed if passed is not None else [0.0] * len(best)
    curve = [sum(best) / len(best)] * 2
    pools = {
        "ks": [1, 2],
        "best_at_k": curve,
        "heldout_weight_best_at_k": curve,
        "pass_at_k": [0.0, sum(passed) / len(passed)],
        "diversity": diversity,
        "distinct_answers": 2.0,
        "wasted": 0.0,
        "per_problem": {"best": best, "w_best": best, "pass": passed},
    }
    if per_problem_diversity is not None:
        pools["per_problem"]["diversity"] = per_problem_diversity
    return {"task": task, "method": method, "seed": seed, "m": m, "pools": pools}
