"""Array backends. A backend owns the arrays of one device type and is the only place that
knows which array module (`xp`) implements them. Ops register kernels per device type; a new
backend (CuPy for 'cuda') registers from its own module without touching op definitions."""

from . import numpy_backend
from ._registry import Backend, BackendUnavailable, get_backend, register_backend

__all__ = [
    "Backend",
    "BackendUnavailable",
    "get_backend",
    "numpy_backend",
    "register_backend",
]
