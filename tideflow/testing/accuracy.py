"""How far a half-precision result may lie from the exact value, derived from the dtype's
precision and the reduction length, not from what passed on one machine.

tideflow's half-precision kernels compute in float32 and round once (as PyTorch documents
for its CPU kernels, though some of its kernels still sum in half precision on some CPUs), so
a correct result is within

    one ulp of the exact value          (the final rounding, u = eps / 2, with a factor of 2
                                         for the float32 error that can tip it over a tie)
  + n * u32 * M                          (a float32 sum of n terms of magnitude at most M)

where `exact` is the op evaluated in float64 on the same, exactly representable, inputs.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

HALVES = ("float16", "bfloat16")


def unit_roundoff(dtype: str) -> float:
    """Half the gap between 1 and the next number: the largest relative rounding error."""
    info = ml_dtypes.finfo(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.finfo(dtype)
    return float(info.eps) / 2


def operand_bounds(args) -> tuple[int, float]:
    """(n, M) for the operands of one call: no sum inside an op is longer than its largest
    operand (n), and no term of a sum of products of two operands exceeds M."""
    arrays = [np.asarray(a) for a in args if isinstance(a, np.ndarray)]
    floats = [a.astype(np.float64) for a in arrays if a.dtype.kind == "f" or a.dtype == "bfloat16"]
    n = max((a.size for a in arrays), default=1)
    largest = max((float(np.abs(a[np.isfinite(a)]).max(initial=0.0)) for a in floats), default=0.0)
    return max(n, 1), max(1.0, largest) ** 2


def half_error_bound(exact: np.ndarray, dtype: str, n: int, magnitude: float) -> np.ndarray:
    """The largest error of a `dtype` result computed in float32 and rounded once: see the
    module docstring. `magnitude` is at least the largest |exact|."""
    scale = max(magnitude, float(np.abs(exact[np.isfinite(exact)]).max(initial=0.0)))
    accumulation = n * unit_roundoff("float32") * scale
    return 2 * unit_roundoff(dtype) * np.abs(exact) + accumulation


def assert_accurate(actual: np.ndarray, exact: np.ndarray, dtype: str, n: int, magnitude: float,
                    what: str) -> None:  # fmt: skip
    """`actual` (a `dtype` result) within `half_error_bound` of `exact`, with NaN where
    `exact` is NaN and infinities where `exact` is infinite or beyond the dtype's range."""
    a, e = np.asarray(actual, np.float64), np.asarray(exact, np.float64)
    if a.shape != e.shape:
        raise AssertionError(f"{what}: shape {list(a.shape)} != expected {list(e.shape)}")
    rounded = e.astype(ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype).astype(np.float64)
    e = np.where(np.isinf(rounded), rounded, e)  # overflows where float64's value does
    finite = np.isfinite(e)
    special_ok = (np.isnan(a) & np.isnan(e)) | (np.isinf(e) & (a == e))
    err = np.where(finite, np.abs(a - e), np.inf)
    bound = np.where(finite, half_error_bound(e, dtype, n, magnitude), 0.0)
    bad = ~special_ok & ~(err <= bound)
    if bad.any():
        worst = np.unravel_index(np.argmax(np.where(bad, err - bound, -np.inf)), bad.shape)
        raise AssertionError(
            f"{what}: {int(bad.sum())} of {bad.size} values beyond the {dtype} error bound "
            f"(n={n}, M={magnitude:.3g}); worst at {tuple(map(int, worst))}: {a[worst]!r} vs "
            f"exact {e[worst]!r}, error {err[worst]:.3g} > {bound[worst]:.3g}\n"
            f"actual:\n{a}\nexact:\n{e}"
        )
