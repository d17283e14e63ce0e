"""softmax, safe_softmax and log_softmax along the last axis in one kernel: per row the max,
the sum of the shifted exponentials and the output, the row staying in cache. Other axes go to
the NumPy kernels (attention and cross entropy reduce the last axis).

As in the NumPy kernels: the max is subtracted first, rows of all -inf give nan (safe_softmax:
0), a nan or +inf anywhere in a row makes the row nan. Sums may be reassociated (so they
vectorize): rounding differs within a float sum's error bound.
"""

from __future__ import annotations

import numpy as np

from .. import jit
from ._common import FLOATS, consts
from ._math import SCALAR_MATH_LIMIT, VECTORIZED, exp, log

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


def _make(kind: int):
    def make(numpy_kernel):
        def kernel(x, *, dim):
            dt = x.dtype
            if (
                dt not in FLOATS
                or x.ndim == 0
                or dim not in (-1, x.ndim - 1)
                or (x.size > SCALAR_MATH_LIMIT and not VECTORIZED)
            ):
                return numpy_kernel(x, dim=dim)
            n = x.shape[-1]
            y = np.empty(x.shape, dt)
            if y.size:
                rows = np.ascontiguousarray(x).reshape(-1, n)
                _softmax_rows(rows, y.reshape(-1, n), consts(dt, -np.inf, 0, 1), kind)
            return y

        return kernel

    return make


KERNELS = {"softmax": _make(_SOFTMAX), "safe_softmax": _make(_SAFE), "log_softmax": _make(_LOG)}
