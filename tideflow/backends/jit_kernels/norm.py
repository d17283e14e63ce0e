"""layer_norm forward as one kernel: per row, the mean, the variance of the centered row and
the normalized, scaled and shifted output, the row staying in cache between the passes.
layer_norm_backward likewise: per row the two sums of the input gradient's coefficients, then
the gradient, the row in cache; the parameter gradients accumulate across rows.

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
    """The `layer_norm` kernel: `numpy_kernel` for half inputs, other layouts, empty rows.
    It writes (y, mean, rstd) into `out` when given (the loop's cases only)."""

    def kernel(x, w, b, *, normalized_shape, eps, out=None):
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
        if out is None:
            out = (np.empty_like(x), np.empty(lead + (1,) * k, dt), np.empty(lead + (1,) * k, dt))
        y, mean, rstd = out
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


@jit.jit(fastmath=_REDUCE, error_model="numpy")
def _layer_norm_backward_rows(gy, x, w, mean, rstd, gm, gr, c, gx, gw, gb):
    rows, n = x.shape
    has_gm = gm.size > 0
    has_gr = gr.size > 0
    count, zero = c[0], c[1]
    for j in range(n):
        gw[j] = zero
        gb[j] = zero
    for r in range(rows):
        xr, gyr, gxr = x[r], gy[r], gx[r]
        mu = mean[r]
        rs = rstd[r]
        s1 = zero
        s2 = zero
        for j in range(n):
            xh = (xr[j] - mu) * rs
            g = gyr[j] * w[j]
            s1 += g
            s2 += g * xh
            gw[j] += gyr[j] * xh
            gb[j] += gyr[j]
        # NOTE: as the NumPy kernel: gx = g * rstd - c1 - xhat * c2, per-row coefficients
        c1 = s1 / count * rs
        c2 = s2 / count * rs
        if has_gm:
            c1 -= gm[r] / count
        if has_gr:
            c2 += gr[r] * rs * rs / count
        for j in range(n):
            xh = (xr[j] - mu) * rs
            gxr[j] = gyr[j] * w[j] * rs - c1 - xh * c2


def layer_norm_backward(numpy_kernel):
    """The `layer_norm_backward` kernel: `numpy_kernel` for half inputs, other layouts, empty
    rows. It writes (gx, gw, gb) into `out` when given (the loop's cases only)."""

    def kernel(gy, x, w, mean, rstd, gm, gr, *, normalized_shape, out=None):
        dt = x.dtype
        k = len(normalized_shape)
        n = math.prod(normalized_shape)
        lead = x.shape[: x.ndim - k]
        stat = lead + (1,) * k
        if (
            dt not in FLOATS
            or n == 0
            or gy.dtype != dt
            or gy.shape != x.shape
            or x.shape[x.ndim - k :] != normalized_shape
            or not _param_ok(w, dt, normalized_shape)
            or not all(_param_ok(s, dt, stat) for s in (mean, rstd, gm, gr))
            or mean is None
            or rstd is None
        ):
            return numpy_kernel(gy, x, w, mean, rstd, gm, gr, normalized_shape=normalized_shape)
        rows = math.prod(lead)
        if out is None:
            out = (
                np.empty(x.shape, dt),
                np.empty(normalized_shape, dt),
                np.empty(normalized_shape, dt),
            )
        gx, gw, gb = out
        # NOTE: a weight of ones when absent: one multiply per element costs less than a
        # second copy of the loop.
        _layer_norm_backward_rows(
            np.ascontiguousarray(gy).reshape(rows, n), np.ascontiguousarray(x).reshape(rows, n),
            np.ones(n, dt) if w is None else w.ravel(), mean.ravel(), rstd.ravel(),
            empty_of(dt) if gm is None else gm.ravel(), empty_of(dt) if gr is None else gr.ravel(),
            consts(dt, n, 0), gx.reshape(rows, n), gw.reshape(n), gb.reshape(n),
        )  # fmt: skip
        return gx, gw, gb

    return kernel


KERNELS = {"layer_norm": layer_norm, "layer_norm_backward": layer_norm_backward}
WRITES_OUT = frozenset(KERNELS)  # the kernels taking `out=` (`OpDef.out_kernels`)
