"""bfloat16 through float32: conversions in one vectorized loop, and the float32 loops of
the other kernels serving bfloat16 operands.

ml_dtypes converts bfloat16 one element at a time and computes bfloat16 ufuncs the same way,
so under bf16 autocast the elementwise work around the GEMMs costs more than the GEMMs save.
A bfloat16 is the upper half of a float32: widening is a shift, narrowing rounds the lower
half away to nearest even (NaN stays a quiet NaN, overflow goes to inf), as ml_dtypes does.

- `cast`: float32 <-> bfloat16 in one loop (other pairs: the NumPy kernel).
- `through_float32(make)`: a generated kernel's `make` whose kernels also take bfloat16
  operands: widened, computed by the float32 loop, outputs rounded once. This is what the
  NumPy kernels of these ops do for half precision (compute in float32, round once), with
  the same numerics and without ml_dtypes' element-at-a-time loops. `sum_to_size` (bias
  gradients), `relu` and max pooling run their own NumPy kernels so.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from .. import jit, vecmath

BF16 = np.dtype(ml_dtypes.bfloat16)
_F32 = np.dtype(np.float32)


@jit.jit
def _widen(h, x):
    for i in range(h.size):
        x[i] = vecmath.bf16_widen(h[i])


@jit.jit
def _narrow(x, h):
    for i in range(x.size):
        h[i] = vecmath.bf16_bits(vecmath.bf16_round(x[i]))


def widen(a: np.ndarray) -> np.ndarray:
    """A bfloat16 array as float32 (exact)."""
    vecmath.register()  # before the first compilation; idempotent
    out = np.empty(a.shape, _F32)
    _widen(np.ascontiguousarray(a).view(np.uint16).ravel(), out.ravel())
    return out


def narrow(x: np.ndarray) -> np.ndarray:
    """A float32 array rounded to bfloat16 (nearest even)."""
    vecmath.register()
    out = np.empty(x.shape, BF16)
    _narrow(np.ascontiguousarray(x).ravel(), out.view(np.uint16).ravel())
    return out


def cast(numpy_kernel):
    """The `cast` kernel: float32 <-> bfloat16 in one loop, other conversions by NumPy."""

    def kernel(x, *, dtype):
        to = np.dtype(dtype.np)
        if x.dtype == _F32 and to == BF16:
            return narrow(x)
        if x.dtype == BF16 and to == _F32:
            return widen(x)
        return numpy_kernel(x, dtype=dtype)

    return kernel


def through_float32(make):
    """`make` (a generated kernel's maker) with bfloat16 operands computed in float32: when
    every floating array operand is bfloat16 (integer ones, like indices, pass as they are),
    they are widened, the float32 kernel runs, and its float32 outputs are rounded to
    bfloat16."""

    def make_with_bfloat16(numpy_kernel):
        generated = make(numpy_kernel)

        def kernel(*args, **attrs):
            floats = [a for a in args if isinstance(a, np.ndarray) and a.dtype.kind not in "biu"]
            if not floats or any(a.dtype != BF16 for a in floats):
                return generated(*args, **attrs)
            # NOTE: the results are rounded from float32 ones: fresh arrays, whatever the
            # caller gave to write into (`OpDef.out_kernels`)
            attrs.pop("out", None)
            wide = [widen(a) if isinstance(a, np.ndarray) and a.dtype == BF16 else a for a in args]
            out = generated(*wide, **attrs)
            if isinstance(out, tuple):
                return tuple(_narrowed(o) for o in out)
            return _narrowed(out)

        return kernel

    return make_with_bfloat16


def _narrowed(out):
    # (a ufunc on a 0-d array returns a NumPy scalar)
    if isinstance(out, np.ndarray | np.generic) and out.dtype == _F32:
        return narrow(np.asarray(out))
    return out


def _numpy(numpy_kernel):
    return numpy_kernel


# NOTE: these NumPy kernels compute half precision in float32 already (or select values):
# through_float32 replaces only ml_dtypes' conversions (or its bfloat16 ufuncs) around them
KERNELS = {
    "cast": cast,
    "sum_to_size": through_float32(_numpy),  # bias gradients
    "relu": through_float32(_numpy),
    "max_pool": through_float32(_numpy),
    "pool_scatter": through_float32(_numpy),
}
WRITES_OUT = frozenset({"sum_to_size"})  # their NumPy kernels take `out=` (`OpDef.out_kernels`)
