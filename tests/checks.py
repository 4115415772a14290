"""Small checks the exact tests share: a failure says a few numbers, not two tensor dumps."""

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
        raise AssertionError(f"{what}: got {[round(x, 4) for x in flat_got[:6]]}, expected "
                             f"{[round(x, 4) for x in flat_want[:6]]}; worst at position {worst}: "
                             f"{flat_got[worst]:.4g} instead of {flat_want[worst]:.4g}")
