"""vecmath's float32 functions in numba loops (`backends/vecmath.py`), one thread, 1M float32
values: median milliseconds of the loop calling our function, of the same loop calling
`math.*` (libm, one element at a time), and of NumPy's float32 ufunc; then a fused tanh-GELU
(one loop) against the same expression as NumPy ufuncs.

    python benchmarks/vecmath.py
"""

from __future__ import annotations

import math
import statistics
import time

import numba
import numpy as np

from tideflow.backends import jit, vecmath

N = 1_000_000
REPEATS = 21

vecmath.register()


def _loop(fn):
    # without the disk cache: a cached loop would not see edits to vecmath
    @jit.jit(cache=False)
    def loop(x, out):
        for i in range(x.size):
            out[i] = fn(x[i])

    return loop


@numba.njit
def _erf_libm(v):
    return math.erf(v)


@numba.njit
def _ndtr_libm(v):
    return 0.5 * math.erfc(-v / math.sqrt(2.0))


@numba.njit
def _gelu_libm(v):
    return v * _ndtr_libm(v)


@numba.njit
def _sigmoid_libm(v):
    return 1.0 / (1.0 + math.exp(-v))


def _sigmoid_numpy(x, out):
    np.negative(x, out=out)
    np.exp(out, out=out)
    out += 1
    np.reciprocal(out, out=out)


# name, ours, libm's, NumPy's (None: NumPy has no erf, ndtr, gelu), input range
CASES = (
    ("exp", vecmath.exp32, math.exp, np.exp, (-80, 80)),
    ("log", vecmath.log32, math.log, np.log, (1e-3, 1e3)),
    ("tanh", vecmath.tanh32, math.tanh, np.tanh, (-5, 5)),
    ("erf", vecmath.erf32, _erf_libm, None, (-4, 4)),
    ("ndtr", vecmath.ndtr32, _ndtr_libm, None, (-6, 6)),
    ("gelu", vecmath.gelu32, _gelu_libm, None, (-6, 6)),
    # a quarter of the results denormal: each vector holding one pays a microcode assist
    ("gelu wide", vecmath.gelu32, _gelu_libm, None, (-30, 30)),
    ("expm1", vecmath.expm1_32, math.expm1, np.expm1, (-5, 5)),
    ("log1p", vecmath.log1p32, math.log1p, np.log1p, (-0.9, 100)),
    ("sigmoid", vecmath.sigmoid32, _sigmoid_libm, _sigmoid_numpy, (-20, 20)),
)

_C = np.float32(math.sqrt(2 / math.pi))
_A = np.float32(0.044715)
_HALF, _ONE = np.float32(0.5), np.float32(1.0)


def _gelu_loop(tanh):
    @jit.jit(cache=False)
    def gelu(x, out):
        for i in range(x.size):
            v = x[i]
            out[i] = _HALF * v * (_ONE + tanh(_C * (v + _A * v * v * v)))

    return gelu


def _gelu_numpy(x, out):
    t = x * x
    t *= _A
    t += 1
    t *= x
    t *= _C
    np.tanh(t, out=t)
    t += 1
    t *= x
    np.multiply(t, _HALF, out=out)


def _median_ms(fn, *args) -> float:
    fn(*args)  # compile / warm up
    times = []
    for _ in range(REPEATS):
        t = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def main() -> None:
    rng = np.random.default_rng(0)
    print(f"{N:,} float32 values, one thread, median of {REPEATS} (ms)")
    print(f"{'':10}{'vecmath':>10}{'math.*':>10}{'NumPy':>10}")
    for name, ours, libm, ufunc, (lo, hi) in CASES:
        x = rng.uniform(lo, hi, N).astype(np.float32)
        out = np.empty_like(x)
        row = [_median_ms(_loop(ours), x, out), _median_ms(_loop(libm), x, out)]
        row.append(_median_ms(ufunc, x, out) if ufunc is not None else float("nan"))
        print(f"{name:10}" + "".join(f"{v:10.2f}" for v in row))
    x = rng.uniform(-5, 5, N).astype(np.float32)
    out = np.empty_like(x)
    row = [
        _median_ms(_gelu_loop(vecmath.tanh32), x, out),
        _median_ms(_gelu_loop(math.tanh), x, out),
        _median_ms(_gelu_numpy, x, out),
    ]
    print(f"{'gelu-tanh':10}" + "".join(f"{v:10.2f}" for v in row) + "   (fused loop vs ufuncs)")


if __name__ == "__main__":
    main()
