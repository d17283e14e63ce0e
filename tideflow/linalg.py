"""`tideflow.linalg`: PyTorch's torch.linalg namespace (re-exports of `ops.linalg`)."""

from .ops.linalg import LINALG_NAMESPACE as _names

globals().update(_names)
__all__ = sorted(_names)
