"""`tideflow.linalg`: PyTorch's torch.linalg namespace (re-exports of `ops.linalg`, which also take
NumPy's `axis`/`keepdims`, as PyTorch's do)."""

from .ops._rules import numpy_names
from .ops.linalg import LINALG_NAMESPACE as _names

globals().update({name: numpy_names(fn) for name, fn in _names.items()})
__all__ = sorted(_names)
