"""Which API's behaviour holds where OneFlow and PyTorch differ in what a call does (not in
names, which `tideflow.mock_torch` maps).

`import tideflow as flow` follows OneFlow. While `tideflow.mock_torch` is enabled, `import
torch` programs run on tideflow and expect PyTorch's behaviour; the mock switches it on for
its session. The few places that differ read `follows_pytorch()`:
- `Tensor.numpy()` on a tensor that requires grad: OneFlow returns the values, PyTorch
  raises (use `detach().numpy()`).
- `optim.lr_scheduler.PolynomialLR`'s arguments: OneFlow's `(steps, end_learning_rate,
  power, cycle)` or PyTorch's `(total_iters, power)`.
"""

from __future__ import annotations


class _Convention:
    __slots__ = ("pytorch",)

    def __init__(self) -> None:
        self.pytorch = False


_CONVENTION = _Convention()


def follow_pytorch(enabled: bool) -> None:
    """Follow PyTorch (True) or OneFlow (False) where they differ; `mock_torch` calls it."""
    _CONVENTION.pytorch = enabled


def follows_pytorch() -> bool:
    """Whether PyTorch's behaviour holds (a `mock_torch` session is active)."""
    return _CONVENTION.pytorch
