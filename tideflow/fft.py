"""`tideflow.fft`: PyTorch's torch.fft namespace (re-exports of `ops.fft`)."""

from .ops.fft import FFT_NAMESPACE as _names

globals().update(_names)
__all__ = sorted(_names)
