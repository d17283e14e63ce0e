"""softmax, safe_softmax and log_softmax along the last axis in one kernel: per row the max,
the sum of the shifted exponentials and the output, the row staying in cache. Other axes go to
the NumPy kernels (attention and cross entropy reduce the last axis).

As in the NumPy kernels: the max is subtracted first, rows of all -inf give nan (safe_softmax:
0), a nan or +inf anywhere in a row makes the row nan. Sums are reassociated (so they
vectorize): rounding differs within a float sum's error bound. float32 rows take vecmath's
exp32/log32 at any size; float64's libm exp runs only below SCALAR_MATH_LIMIT elements.

Their backward ops likewise, per row: softmax_backward `y * (gy - sum(gy * y))` (no
transcendentals: any size), log_softmax_backward `gy - exp(y) * sum(gy)` (float32 through
vecmath's exp32, which vectorizes; float64's libm exp only below SCALAR_MATH_LIMIT).
"""

from __future__ import annotations

import numpy as np

from .. import jit, vecmath
from ._common import FLOATS, consts
from ._math import SCALAR_MATH_LIMIT, VECTORIZED, exp, log
from .bfloat16 import through_float32

_REDUCE = frozenset({"contract", "reassoc"})
_SOFTMAX, _SAFE, _LOG = 0, 1, 2


@jit.jit(fastmath=_REDUCE, error_model="numpy")
def _softmax_rows(x, y, c, kind):
    rows, n = x.shape
    ninf, zero, one = c[0], c[1], c[2]
    for r in range(rows):
        xr = x[r]
        yr = y[r]
        m = ninf
        for j in range(n):
            # NOTE: a nan is skipped here but still makes the row's sum (and output) nan.
            if xr[j] > m:
                m = xr[j]
        if kind == _SAFE and m == ninf:
            m = zero  # a fully masked row: every exp is 0, the output too
        total = zero
        for j in range(n):
            e = exp(xr[j] - m)
            yr[j] = e
            total += e
        if kind == _LOG:
            lse = log(total)
            for j in range(n):
                yr[j] = (xr[j] - m) - lse
        else:
            if kind == _SAFE and total == zero:
                total = one
            for j in range(n):
                yr[j] = yr[j] / total


_LANES = 16  # one AVX-512 register of float32


# NOTE: without `reassoc` (vecmath's NaN/inf selects need it off), LLVM vectorizes no float
# reduction; so each row's max and sum run in _LANES independent lanes (a loop over lanes
# that vectorizes) combined at the end. Deterministic: the same order every call. The
# exponentials run in a plain loop of their own (see vecmath: a call in the lanes loop, which
# LLVM unrolls, would stay scalar).
@jit.jit(error_model="numpy")
def _softmax_rows32(x, y, c, kind):
    rows, n = x.shape
    ninf, zero, one = c[0], c[1], c[2]
    lanes = np.empty(_LANES, np.float32)
    body = n - n % _LANES
    for r in range(rows):
        xr = x[r]
        yr = y[r]
        lanes[:] = ninf
        for j in range(0, body, _LANES):
            for k in range(_LANES):
                v = xr[j + k]
                # NOTE: a nan is skipped here but still makes the row's sum (and output) nan.
                lanes[k] = v if v > lanes[k] else lanes[k]
        m = ninf
        for k in range(_LANES):
            m = lanes[k] if lanes[k] > m else m
        for j in range(body, n):
            m = xr[j] if xr[j] > m else m
        if kind == _SAFE and m == ninf:
            m = zero  # a fully masked row: every exp is 0, the output too
        for j in range(n):
            yr[j] = vecmath.exp32(xr[j] - m)
        lanes[:] = zero
        for j in range(0, body, _LANES):
            for k in range(_LANES):
                lanes[k] += yr[j + k]
        total = zero
        for k in range(_LANES):
            total += lanes[k]
        for j in range(body, n):
            total += yr[j]
        if kind == _LOG:
            lse = vecmath.log32(total)
            for j in range(n):
                yr[j] = (xr[j] - m) - lse
        else:
            if kind == _SAFE and total == zero:
                total = one
            inv = one / total
            for j in range(n):
                yr[j] = yr[j] * inv


def _make(kind: int):
    def make(numpy_kernel):
        def kernel(x, *, dim, out=None):
            dt = x.dtype
            if (
                dt not in FLOATS
                or x.ndim == 0
                or dim not in (-1, x.ndim - 1)
                or (dt != np.float32 and x.size > SCALAR_MATH_LIMIT and not VECTORIZED)
            ):
                return numpy_kernel(x, dim=dim)
            n = x.shape[-1]
            y = np.empty(x.shape, dt) if out is None else out
            if y.size:
                rows = np.ascontiguousarray(x).reshape(-1, n)
                c = consts(dt, -np.inf, 0, 1)
                if dt == np.float32:
                    vecmath.register()  # before the first compilation; idempotent
                    _softmax_rows32(rows, y.reshape(-1, n), c, kind)
                else:
                    _softmax_rows(rows, y.reshape(-1, n), c, kind)
            return y

        return kernel

    return make


@jit.jit(fastmath=_REDUCE, error_model="numpy")
def _softmax_backward_rows(gy, y, gx, c):
    rows, n = y.shape
    zero = c[0]
    for r in range(rows):
        gyr, yr, gxr = gy[r], y[r], gx[r]
        total = zero
        for j in range(n):
            total += gyr[j] * yr[j]
        for j in range(n):
            gxr[j] = gyr[j] * yr[j] - yr[j] * total


@jit.jit(fastmath=_REDUCE, error_model="numpy")
def _row_sums(a, out, c):
    rows, n = a.shape
    for r in range(rows):
        total = c[0]
        for j in range(n):
            total += a[r, j]
        out[r] = total


# NOTE: without `reassoc` (vecmath's NaN/inf selects need it off): the sums run in _row_sums.
@jit.jit(error_model="numpy")
def _log_softmax_backward_rows32(gy, y, sums, gx):
    rows, n = y.shape
    for r in range(rows):
        s = sums[r]
        for j in range(n):
            gx[r, j] = gy[r, j] - vecmath.exp32(y[r, j]) * s


@jit.jit(error_model="numpy")
def _log_softmax_backward_rows64(gy, y, sums, gx):
    rows, n = y.shape
    for r in range(rows):
        s = sums[r]
        for j in range(n):
            gx[r, j] = gy[r, j] - exp(y[r, j]) * s


def _make_backward(log: bool):
    def make(numpy_kernel):
        def kernel(gy, y, *, dim, out=None):
            dt = y.dtype
            if (
                dt not in FLOATS
                or gy.dtype != dt
                or gy.shape != y.shape
                or y.ndim == 0
                or dim not in (-1, y.ndim - 1)
                or (log and dt != np.float32 and y.size > SCALAR_MATH_LIMIT and not VECTORIZED)
            ):
                return numpy_kernel(gy, y, dim=dim)
            n = y.shape[-1]
            gx = np.empty(y.shape, dt) if out is None else out
            if not gx.size:
                return gx
            g = np.ascontiguousarray(gy).reshape(-1, n)
            out = np.ascontiguousarray(y).reshape(-1, n)
            if not log:
                _softmax_backward_rows(g, out, gx.reshape(-1, n), consts(dt, 0))
                return gx
            sums = np.empty(g.shape[0], dt)
            _row_sums(g, sums, consts(dt, 0))
            if dt == np.float32:
                vecmath.register()  # before the first compilation; idempotent
                _log_softmax_backward_rows32(g, out, sums, gx.reshape(-1, n))
            else:
                _log_softmax_backward_rows64(g, out, sums, gx.reshape(-1, n))
            return gx

        return kernel

    return make


KERNELS = {
    "softmax": through_float32(_make(_SOFTMAX)),
    "safe_softmax": through_float32(_make(_SAFE)),
    "log_softmax": through_float32(_make(_LOG)),
    "softmax_backward": through_float32(_make_backward(log=False)),
    "log_softmax_backward": through_float32(_make_backward(log=True)),
}
WRITES_OUT = frozenset(KERNELS)  # the kernels taking `out=` (`OpDef.out_kernels`)
