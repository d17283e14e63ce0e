"""`tideflow.fft`: PyTorch's torch.fft namespace (re-exports of `ops.fft`, which also take NumPy's
`axis`, as PyTorch's do)."""

from .ops._rules import numpy_names
from .ops.fft import FFT_NAMESPACE as _names

globals().update({name: numpy_names(fn) for name, fn in _names.items()})
__all__ = sorted(_names)
