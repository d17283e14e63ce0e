"""GELU forward and backward (`gy * gelu'(x)`) in one loop each, the erf form and the tanh
form: float32 through vecmath's gelu32/gelu_grad32/tanh32 (which vectorize); bfloat16
in float32 (the erf form in one loop over the bits, the tanh form through float32 arrays).
float64 stays with the NumPy kernels in the forward (a loop of libm calls, one element at a
time, is slower than NumPy's ufuncs) and in the backward's tanh form; its erf form runs a
loop (scipy's erfc is scalar too)."""

from __future__ import annotations

import math

import numpy as np

from .. import jit, vecmath
from ._common import FLOATS, consts
from ._math import VECTORIZED, erfc, exp, tanh
from .bfloat16 import BF16, through_float32


@jit.jit(error_model="numpy")
def _gelu_erf32(x, y):
    for i in range(x.size):
        # NOTE: x * Phi(x) with Phi accurate where it is tiny: (1 + erf(x / sqrt 2)) / 2 would
        # cancel to 0 for very negative x.
        y[i] = vecmath.gelu32(x[i])


@jit.jit(error_model="numpy")
def _gelu_erf_bf16(h, y):
    for i in range(h.size):
        y[i] = vecmath.bf16_bits(vecmath.bf16_round(vecmath.gelu32(vecmath.bf16_widen(h[i]))))


@jit.jit(error_model="numpy")
def _gelu_tanh32(x, y, c):
    sqrt_2_over_pi, k, half, one = c[0], c[1], c[2], c[3]
    for i in range(x.size):
        xi = x[i]
        inner = sqrt_2_over_pi * (xi + k * xi * xi * xi)
        y[i] = half * xi * (one + vecmath.tanh32(inner))


def gelu(numpy_kernel):
    """The `gelu` kernel: `numpy_kernel` for dtypes other than float32 (it checks and widens
    them). It writes into `out` when given (float32)."""

    def kernel(x, *, approximate, out=None):
        if x.dtype != np.float32:
            return numpy_kernel(x, approximate=approximate)
        vecmath.register()  # before the first compilation; idempotent
        y = np.empty(x.shape, np.float32) if out is None else out
        flat = np.ascontiguousarray(x).ravel()
        if approximate == "tanh":
            c = consts(x.dtype, math.sqrt(2 / math.pi), 0.044715, 0.5, 1)
            _gelu_tanh32(flat, y.ravel(), c)
        else:
            _gelu_erf32(flat, y.ravel())
        return y

    return kernel


@jit.jit(error_model="numpy")
def _gelu_backward_erf32(gy, x, gx):
    for i in range(x.size):
        gx[i] = gy[i] * vecmath.gelu_grad32(x[i])


@jit.jit(error_model="numpy")
def _gelu_backward_erf_bf16(gy, x, gx):
    for i in range(x.size):
        gxi = vecmath.bf16_widen(gy[i]) * vecmath.gelu_grad32(vecmath.bf16_widen(x[i]))
        gx[i] = vecmath.bf16_bits(vecmath.bf16_round(gxi))


@jit.jit(error_model="numpy")
def _gelu_backward_erf64(gy, x, gx, c):
    neg_sqrt1_2, half, inv_sqrt_2pi, neg_half = c[0], c[1], c[2], c[3]
    for i in range(x.size):
        xi = x[i]
        cdf = erfc(xi * neg_sqrt1_2) * half
        gx[i] = gy[i] * (cdf + xi * exp(xi * xi * neg_half) * inv_sqrt_2pi)


@jit.jit(error_model="numpy")
def _gelu_backward_tanh32(gy, x, gx, c):
    sqrt_2_over_pi, k, k3, half, one = c[0], c[1], c[2], c[3], c[4]
    for i in range(x.size):
        xi = x[i]
        x_sq = xi * xi
        t = vecmath.tanh32((xi + x_sq * xi * k) * sqrt_2_over_pi)
        d_inner = (x_sq * k3 + one) * sqrt_2_over_pi
        gx[i] = gy[i] * ((t + one) * half + xi * half * (one - t * t) * d_inner)


@jit.jit(error_model="numpy")
def _gelu_backward_tanh64(gy, x, gx, c):
    sqrt_2_over_pi, k, k3, half, one = c[0], c[1], c[2], c[3], c[4]
    for i in range(x.size):
        xi = x[i]
        x_sq = xi * xi
        t = tanh((xi + x_sq * xi * k) * sqrt_2_over_pi)
        d_inner = (x_sq * k3 + one) * sqrt_2_over_pi
        gx[i] = gy[i] * ((t + one) * half + xi * half * (one - t * t) * d_inner)


def gelu_backward(numpy_kernel):
    """The `gelu_backward` kernel: `numpy_kernel` for other dtypes and mismatched operands.
    It writes into `out` when given (the loops' cases)."""

    def kernel(gy, x, *, approximate, out=None):
        dt = x.dtype
        f32 = dt == np.float32
        # NOTE: float64's tanh form with libm's tanh per element is slower than NumPy's
        # (2.5x at W3's 1024x1024); its erf form is not (erfc is scalar in scipy too).
        if (
            dt not in FLOATS
            or gy.dtype != dt
            or gy.shape != x.shape
            or (approximate == "tanh" and not f32 and not VECTORIZED)
        ):
            return numpy_kernel(gy, x, approximate=approximate)
        gx = np.empty(x.shape, dt) if out is None else out
        args = (np.ascontiguousarray(gy).ravel(), np.ascontiguousarray(x).ravel(), gx.ravel())
        if f32:
            vecmath.register()  # before the first compilation; idempotent
        if approximate == "tanh":
            c = consts(dt, math.sqrt(2 / math.pi), 0.044715, 3 * 0.044715, 0.5, 1)
            (_gelu_backward_tanh32 if f32 else _gelu_backward_tanh64)(*args, c)
        elif f32:
            _gelu_backward_erf32(*args)
        else:
            c = consts(dt, -math.sqrt(0.5), 0.5, 1 / math.sqrt(2 * math.pi), -0.5)
            _gelu_backward_erf64(*args, c)
        return gx

    return kernel


def erf_bfloat16(make, loop):
    """`make` (a kernel's maker) whose kernel runs the erf form on bfloat16 operands of one
    shape in `loop`, one pass over their bits: the values of `through_float32` (widened,
    computed in float32, rounded once) without its float32 copies of every operand."""

    def make_with_loop(numpy_kernel):
        kernel = make(numpy_kernel)

        def fused(*arrays, approximate, out=None):
            shape = arrays[-1].shape
            if approximate != "none" or any(a.dtype != BF16 or a.shape != shape for a in arrays):
                return kernel(*arrays, approximate=approximate, out=out)
            vecmath.register()  # before the first compilation; idempotent
            out = np.empty(shape, BF16) if out is None else out
            bits = (np.ascontiguousarray(a).view(np.uint16).ravel() for a in arrays)
            loop(*bits, out.view(np.uint16).ravel())
            return out

        return fused

    return make_with_loop


KERNELS = {
    "gelu": erf_bfloat16(through_float32(gelu), _gelu_erf_bf16),
    "gelu_backward": erf_bfloat16(through_float32(gelu_backward), _gelu_backward_erf_bf16),
}
WRITES_OUT = frozenset(KERNELS)  # the kernels taking `out=` (`OpDef.out_kernels`)
