"""`flow.utils.dlpack`: share a tensor's memory with other array libraries through DLPack
(NumPy's `np.from_dlpack`, PyTorch's `torch.from_dlpack`, CuPy, JAX), without a copy.

>>> t = flow.utils.dlpack.from_dlpack(np.arange(3.0))  # shares the array's memory
>>> np.from_dlpack(t)
array([0., 1., 2.])
"""

from __future__ import annotations

import numpy as np

from ..framework.errors import TideflowError
from ..framework.tensor import Tensor
from ..ops.creation import from_numpy

__all__ = ["from_dlpack", "to_dlpack"]


def to_dlpack(tensor: Tensor):
    """A DLPack capsule sharing `tensor`'s memory (see `Tensor.to_dlpack`); it can be
    consumed once."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"to_dlpack: expected a tensor, got {type(tensor).__name__}")
    return tensor.to_dlpack()


class _Capsule:
    """A bare capsule as the producer object `np.from_dlpack` expects."""

    def __init__(self, capsule) -> None:
        self.capsule = capsule

    def __dlpack__(self, **kwargs):
        return self.capsule

    def __dlpack_device__(self) -> tuple:
        return (1, 0)  # kDLCPU: the capsules this process can read are in host memory


def from_dlpack(ext_tensor) -> Tensor:
    """A tensor sharing memory with `ext_tensor`: any object with `__dlpack__` (a NumPy
    array, a PyTorch tensor, a tensor) or a capsule from `to_dlpack`. Memory a legacy
    (unversioned) capsule shares comes read-only: it cannot say whether writing is allowed.

    >>> a = np.zeros(2)
    >>> flow.from_dlpack(a).add_(1.0)
    tensor([1., 1.], dtype=tideflow.float64)
    >>> a
    array([1., 1.])
    """
    source = _Capsule(ext_tensor) if type(ext_tensor).__name__ == "PyCapsule" else ext_tensor
    if not hasattr(source, "__dlpack__"):
        raise TypeError(
            f"from_dlpack: expected an object with __dlpack__ or a DLPack capsule, got "
            f"{type(ext_tensor).__name__}"
        )
    try:
        array = np.from_dlpack(source)
    except (BufferError, RuntimeError) as e:
        raise TideflowError(f"from_dlpack: {e}") from None
    return from_numpy(array)
