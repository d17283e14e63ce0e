"""layer_norm forward as one kernel: per row, the mean, the variance of the centered row and
the normalized, scaled and shifted output, the row staying in cache between the passes.

Like the NumPy kernel (and PyTorch's), statistics are computed in the input's dtype, centered
before squaring; sums may be reassociated (so they vectorize), which changes rounding within
the error bound of a float sum, not NaN or inf handling.
"""

from __future__ import annotations

import math

import numpy as np

from .. import jit
from ._common import FLOATS, consts, empty_of
from ._math import sqrt

_REDUCE = frozenset({"contract", "reassoc"})


@jit.jit(fastmath=_REDUCE, error_model="numpy")
def _layer_norm_rows(x, w, b, c, y, mean, rstd):
    rows, n = x.shape
    has_w = w.size > 0
    has_b = b.size > 0
    eps, count, zero, one = c[0], c[1], c[2], c[3]
    for r in range(rows):
        xr = x[r]
        total = zero
        for j in range(n):
            total += xr[j]
        mu = total / count
        sq = zero
        for j in range(n):
            d = xr[j] - mu
            sq += d * d
        rs = one / sqrt(sq / count + eps)
        mean[r] = mu
        rstd[r] = rs
        yr = y[r]
        if has_w and has_b:
            for j in range(n):
                yr[j] = (xr[j] - mu) * rs * w[j] + b[j]
        elif has_w:
            for j in range(n):
                yr[j] = (xr[j] - mu) * rs * w[j]
        elif has_b:
            for j in range(n):
                yr[j] = (xr[j] - mu) * rs + b[j]
        else:
            for j in range(n):
                yr[j] = (xr[j] - mu) * rs


def layer_norm(numpy_kernel):
    """The `layer_norm` kernel: `numpy_kernel` for half inputs, other layouts, empty rows."""

    def kernel(x, w, b, *, normalized_shape, eps):
        dt = x.dtype
        k = len(normalized_shape)
        n = math.prod(normalized_shape)
        if (
            dt not in FLOATS
            or n == 0
            or not x.flags.c_contiguous
            or x.shape[x.ndim - k :] != normalized_shape
            or not _param_ok(w, dt, normalized_shape)
            or not _param_ok(b, dt, normalized_shape)
        ):
            return numpy_kernel(x, w, b, normalized_shape=normalized_shape, eps=eps)
        lead = x.shape[: x.ndim - k]
        rows = math.prod(lead)
        y = np.empty_like(x)
        mean = np.empty(lead + (1,) * k, dt)
        rstd = np.empty(lead + (1,) * k, dt)
        _layer_norm_rows(
            x.reshape(rows, n),
            empty_of(dt) if w is None else w.ravel(),
            empty_of(dt) if b is None else b.ravel(),
            consts(dt, eps, n, 0, 1), y.reshape(rows, n), mean.reshape(rows), rstd.reshape(rows),
        )  # fmt: skip
        return y, mean, rstd

    return kernel


def _param_ok(p, dt: np.dtype, shape: tuple) -> bool:
    return p is None or (p.dtype == dt and p.shape == shape and p.flags.c_contiguous)


KERNELS = {"layer_norm": layer_norm}
