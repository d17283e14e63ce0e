"""The CPU backend: NumPy arrays, BLAS through NumPy."""

import numpy as np

from . import host_memory  # noqa: F401  (the process-wide allocator policy, on import)
from ._registry import Backend, register_backend

# NOTE: PyTorch returns inf/nan silently for 1/0, log(-1), ...; NumPy warns. Kernels run often
# enough that a per-call errstate context is measurable, so it is set once for the process.
np.seterr(all="ignore")

CPU = Backend("cpu", np)
register_backend(CPU)
