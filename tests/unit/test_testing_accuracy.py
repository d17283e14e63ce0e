"""The half-precision error bound the op tests hold kernels to: it admits a result computed
in float32 and rounded once, and rejects one summed in half precision."""

import ml_dtypes
import numpy as np
import pytest

from tideflow.testing.accuracy import assert_accurate, half_error_bound, operand_bounds


def _dot_products(dtype, rows=16, length=64, seed=0):
    rng = np.random.default_rng(seed)
    np_dtype = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)
    x = rng.uniform(-3, 3, (rows, length)).astype(np_dtype)
    w = rng.uniform(-3, 3, length).astype(np_dtype)
    exact = x.astype(np.float64) @ w.astype(np.float64)
    return x, w, exact, np_dtype


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_float32_accumulation_rounded_once_is_within_the_bound(dtype):
    x, w, exact, np_dtype = _dot_products(dtype)
    once = (x.astype(np.float32) @ w.astype(np.float32)).astype(np_dtype)
    n, magnitude = operand_bounds((x, w))
    assert_accurate(once, exact, dtype, n, magnitude, "float32 dot")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_accumulation_is_beyond_the_bound(dtype):
    x, w, exact, np_dtype = _dot_products(dtype)
    acc = np.zeros(len(x), np_dtype)
    for k in range(x.shape[1]):  # a running sum rounded to the half dtype after every term
        acc = (acc.astype(np.float32) + x[:, k].astype(np.float32) * np.float32(w[k])).astype(
            np_dtype
        )
    n, magnitude = operand_bounds((x, w))
    with pytest.raises(AssertionError, match=r"beyond the \w+ error bound"):
        assert_accurate(acc, exact, dtype, n, magnitude, "half dot")


def test_two_roundings_of_a_cancelling_difference_are_rejected():
    # tanhshrink(x) = x - tanh(x) near 0: rounding tanh(x) first loses the digits
    x = np.float16(0.0999)
    exact = float(x) - np.tanh(float(x))
    twice = np.float16(x - np.float16(np.tanh(np.float32(x))))
    once = np.float16(np.float32(x) - np.tanh(np.float32(x)))
    assert_accurate(np.array(once), np.array(exact), "float16", 1, 1.0, "once")
    with pytest.raises(AssertionError):
        assert_accurate(np.array(twice), np.array(exact), "float16", 1, 1.0, "twice")


def test_specials_and_overflow():
    exact = np.array([np.nan, np.inf, 7e4, -1e6, 1.0])
    assert_accurate(np.array([np.nan, np.inf, np.inf, -np.inf, 1.0]), exact, "float16", 1, 1, "")
    with pytest.raises(AssertionError, match="2 of 5"):
        assert_accurate(np.array([0.0, 65504, np.inf, -np.inf, 1.0]), exact, "float16", 1, 1, "")


def test_the_bound_is_one_ulp_plus_float32_accumulation():
    exact = np.array([1.0, 0.0])
    bound = half_error_bound(exact, "float16", n=10, magnitude=4.0)
    u32 = np.finfo(np.float32).eps / 2
    np.testing.assert_allclose(bound, [2**-10 + 40 * u32, 40 * u32])
