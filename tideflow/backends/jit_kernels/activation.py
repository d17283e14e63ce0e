"""GELU forward in one loop (the erf form and the tanh form), in the input's dtype."""

from __future__ import annotations

import math

import numpy as np

from .. import jit
from ._common import FLOATS, consts
from ._math import VECTORIZED, erfc, tanh


@jit.jit(error_model="numpy")
def _gelu_erf(x, y, c):
    neg_sqrt1_2, half = c[0], c[1]
    for i in range(x.size):
        xi = x[i]
        # NOTE: x * Phi(x) with Phi from erfc, as the NumPy kernel: 1 + erf(x) would cancel
        # to 0 for very negative x.
        y[i] = erfc(xi * neg_sqrt1_2) * xi * half


@jit.jit(error_model="numpy")
def _gelu_tanh(x, y, c):
    sqrt_2_over_pi, k, half, one = c[0], c[1], c[2], c[3]
    for i in range(x.size):
        xi = x[i]
        inner = sqrt_2_over_pi * (xi + k * xi * xi * xi)
        y[i] = half * xi * (one + tanh(inner))


def gelu(numpy_kernel):
    """The `gelu` kernel: `numpy_kernel` for other dtypes (it checks and widens them)."""

    def kernel(x, *, approximate):
        dt = x.dtype
        if dt not in FLOATS:
            return numpy_kernel(x, approximate=approximate)
        y = np.empty(x.shape, dt)
        flat = np.ascontiguousarray(x).ravel()
        if approximate == "tanh":
            _gelu_tanh(flat, y.ravel(), consts(dt, math.sqrt(2 / math.pi), 0.044715, 0.5, 1))
        else:
            _gelu_erf(flat, y.ravel(), consts(dt, -math.sqrt(0.5), 0.5))
        return y

    return kernel


# NOTE: with scalar libm calls the loop is slower than NumPy (see ._math).
KERNELS = {"gelu": gelu} if VECTORIZED else {}
