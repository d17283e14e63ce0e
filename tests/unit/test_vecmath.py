"""tideflow.backends.vecmath: accuracy in ulps against float64 libm over every binade of
float32, special values against NumPy's float32 ufuncs, in numba-compiled loops (as generated
kernels call the functions) and from plain Python."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tideflow.backends import _vecmath_fit, jit, vecmath

numba = pytest.importorskip("numba")
vecmath.register()

NAMES = (
    *("exp32", "log32", "tanh32", "erf32", "erfc32", "ndtr32", "gelu32"),
    *("expm1_32", "log1p32", "sigmoid32"),
)

# The asserted error bounds: the distance in float32 steps (ulps) from the float64 result
# rounded to float32, so 0 means correctly rounded. Measured maxima equal these bounds: the
# slow sweep checks them on a stride through all 2^32 inputs (`_sweep(...)(0, 2**32, 1)`, all
# of them, took about 2 minutes a function and found the same maxima).
MAX_ULP = {
    "exp32": 1,
    "log32": 1,
    "tanh32": 1,
    "erf32": 2,  # 1 - exp(P) just above 0.875, where erfc/erf is largest
    "erfc32": 4,  # exp(-x^2) as two exps, times erfcx: about 1 ulp each
    "ndtr32": 6,  # exp(-x^2 / 2) as two exps, times P / Q (3 ulps), or 1 minus that
    "gelu32": 6,  # ndtr32's error, rounded once more
    "expm1_32": 1,
    "log1p32": 1,
    "sigmoid32": 2,  # exp's error plus a division's rounding
}


@numba.njit
def _sigmoid64(v):
    return 1.0 / (1.0 + math.exp(-v)) if v >= 0 else math.exp(v) / (1.0 + math.exp(v))


@numba.njit
def _exp64(v):
    return math.exp(v)


@numba.njit
def _log64(v):
    # NumPy's log(-0.0) is -inf, math.log raises
    return -math.inf if v == 0 else (math.log(v) if v > 0 else math.nan)


@numba.njit
def _log1p64(v):
    return -math.inf if v == -1 else (math.log1p(v) if v > -1 else math.nan)


@numba.njit
def _tanh64(v):
    return math.tanh(v)


@numba.njit
def _erf64(v):
    return math.erf(v)


@numba.njit
def _erfc64(v):
    return math.erfc(v)


@numba.njit
def _ndtr64(v):
    return 0.5 * math.erfc(-v / math.sqrt(2.0))


@numba.njit
def _gelu64(v):
    # NOTE: for tiny x, x Phi(x) = x/2 + x^2/sqrt(2 pi) rounds to x/2 in float64, a tie
    # between two float32 denormals; the exact value lies beyond it, away from 0 for x > 0
    # and towards 0 below, where a relative nudge far below float32's precision moves it
    nudge = math.copysign(1e-9, v) if abs(v) < 1e-30 else 0.0
    return v * (_ndtr64(v) + nudge)


@numba.njit
def _expm1_64(v):
    return math.expm1(v)


REFERENCES = {
    "exp32": _exp64,
    "log32": _log64,
    "tanh32": _tanh64,
    "erf32": _erf64,
    "erfc32": _erfc64,
    "ndtr32": _ndtr64,
    "gelu32": _gelu64,
    "expm1_32": _expm1_64,
    "log1p32": _log1p64,
    "sigmoid32": _sigmoid64,
}


def _loop(fn):
    # the flags of `jit()`, the ones generated kernels use
    @numba.njit(fastmath={"contract"})
    def loop(x, out):
        for i in range(x.size):
            out[i] = fn(x[i])

    return loop


def _ref_loop(fn):
    @numba.njit
    def loop(x, out):
        for i in range(x.size):
            out[i] = fn(np.float64(x[i]))

    return loop


@pytest.fixture(scope="module")
def loops():
    return {n: (_loop(getattr(vecmath, n)), _ref_loop(REFERENCES[n])) for n in NAMES}


def _ordered(y: np.ndarray) -> np.ndarray:
    """float32 bit patterns as integers that count ulps across zero (-0.0 and 0.0 are 0)."""
    b = y.view(np.int32).astype(np.int64)
    return np.where(b < 0, -(b & 0x7FFFFFFF), b)


def _ulps(got: np.ndarray, want64: np.ndarray) -> np.ndarray:
    """ulp distance of float32 `got` from float64 `want64` rounded; NaN must match NaN."""
    with np.errstate(over="ignore"):
        want = want64.astype(np.float32)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    return np.abs(_ordered(got[~nan]) - _ordered(want[~nan]))


SPECIALS = np.array(
    [
        *(np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, 2.0, -2.0),
        # denormals, the normal/denormal boundary, the largest finite values
        *(1e-45, -1e-45, 5.9e-39, -5.9e-39, 1.1754942e-38, 1.1754944e-38, -1.1754944e-38),
        *(3.4028235e38, -3.4028235e38, 1e-30),
        # exp: overflow from 88.7228391, denormal results below -87.336544, 0 below -103.97208
        *(88.72283, 88.72284, 89.0, 100.0, -87.33654, -87.34, -103.27893, -103.97208),
        *(-103.98, -104.0, -110.0),
        # where tanh and erf switch forms or round to 1; expm1 and log1p near -1 and 0
        *(0.55, 0.875, 3.9, 3.925, 9.01, 17.4, -17.4, -0.99999994, -0.9999999),
        *(1e-8, -1e-8, 2.9e-8),
        # where erfc switches forms, becomes denormal and rounds to 0
        *(0.49999997, -0.5, 1.9999999, 2.0, 9.19, 10.054194, 10.054195, 10.06, -10.06),
        # where the normal CDF and GELU become denormal and reach 0
        *(-13.2, -14.1, -14.5, -14.6, 14.6, -20.0),
    ],
    np.float32,
)


def _samples() -> np.ndarray:
    """~1.2M float32 values: random bit patterns (every binade of both signs, ~2000 values
    each), uniform values where the functions change shape, and the special values."""
    rng = np.random.default_rng(1234)
    bits = rng.integers(0, 2**32, 1_000_000, dtype=np.uint64).astype(np.uint32)
    return np.concatenate(
        [
            bits.view(np.float32),
            rng.uniform(-120, 120, 100_000).astype(np.float32),
            rng.uniform(-5, 5, 100_000).astype(np.float32),
            rng.uniform(-1, 1, 10_000).astype(np.float32),
            SPECIALS,
        ]
    )


@pytest.fixture(scope="module")
def samples():
    return _samples()


@pytest.mark.parametrize("name", NAMES)
def test_ulp_error_in_numba_loops(name, loops, samples):
    ours, ref = loops[name]
    got = np.empty_like(samples)
    ours(samples, got)
    want = np.empty(samples.size)
    ref(samples, want)
    ulps = _ulps(got, want)
    worst = int(np.argmax(ulps))
    assert ulps.max() <= MAX_ULP[name], (name, samples[~np.isnan(want)][worst], ulps.max())


@pytest.mark.parametrize("name", NAMES)
def test_ulp_error_from_python(name, loops, samples):
    # plain Python rounds every operation (no FMA), the loops may contract: both within bounds
    x = samples[:: samples.size // 3000]
    x = np.concatenate([x, SPECIALS])
    with np.errstate(all="ignore"):
        got = np.array([getattr(vecmath, name)(v) for v in x])
    assert got.dtype == np.float32
    want = np.empty(x.size)
    loops[name][1](x, want)
    assert _ulps(got, want).max() <= MAX_ULP[name]


NUMPY = {"exp32": np.exp, "log32": np.log, "tanh32": np.tanh, "expm1_32": np.expm1}
NUMPY["log1p32"] = np.log1p


@pytest.mark.parametrize("name", NAMES)
def test_special_values_match_numpy(name, loops):
    """NaN, +-inf, +-0.0 (sign included), overflow to inf, underflow to 0: as NumPy's float32
    ufunc where it has one (else the float64 result rounded); the values themselves within
    the bound of the float64 result (NumPy's float32 functions are not correctly rounded)."""
    x = SPECIALS
    got = np.empty_like(x)
    loops[name][0](x, got)
    want64 = np.empty(x.size)
    loops[name][1](x, want64)
    with np.errstate(all="ignore"):
        want = NUMPY[name](x) if name in NUMPY else want64.astype(np.float32)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    keep = ~np.isnan(want)
    g, w = got[keep], want[keep]
    assert np.array_equal(g[np.isinf(g)], w[np.isinf(w)])
    assert np.array_equal(np.signbit(g), np.signbit(w))  # -0.0 stays -0.0
    assert np.array_equal(g == 0, w == 0)  # underflow to 0 exactly where NumPy's does
    assert _ulps(got, want64).max() <= MAX_ULP[name]


def test_special_values_by_definition(loops):
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, -1.0, -1e-45, 1e-45, 1e-38], np.float32)
    out = {}
    for name in ("exp32", "log32", "tanh32", "erf32", "erfc32", "ndtr32", "gelu32", "sigmoid32"):
        out[name] = np.empty_like(x)
        loops[name][0](x, out[name])
    nan, inf = np.nan, np.inf
    np.testing.assert_array_equal(out["exp32"][:5], [nan, inf, 0, 1, 1])
    np.testing.assert_array_equal(out["log32"][:7], [nan, inf, nan, -inf, -inf, nan, nan])
    # log of the smallest denormal: -149 ln 2
    assert out["log32"][7] == np.float32(-149 * math.log(2))
    np.testing.assert_array_equal(out["tanh32"][:5], [nan, 1, -1, 0, 0])
    np.testing.assert_array_equal(out["erf32"][:5], [nan, 1, -1, 0, 0])
    np.testing.assert_array_equal(out["erfc32"][:5], [nan, 0, 2, 1, 1])
    np.testing.assert_array_equal(out["ndtr32"][:5], [nan, 1, 0, 0.5, 0.5])
    np.testing.assert_array_equal(out["gelu32"][:5], [nan, inf, nan, 0, 0])  # -inf * 0
    np.testing.assert_array_equal(out["sigmoid32"][:5], [nan, 1, 0, 0.5, 0.5])
    for name in ("tanh32", "erf32", "gelu32"):
        assert np.signbit(out[name][4]) and not np.signbit(out[name][3])


def test_exp_underflows_gradually_like_numpy(loops):
    # every input whose exp is denormal in float32: NumPy rounds into the denormals, so do we
    x = np.linspace(-103.98, -87.34, 200_001, dtype=np.float32)
    got = np.empty_like(x)
    loops["exp32"][0](x, got)
    want64 = np.empty(x.size)
    loops["exp32"][1](x, want64)
    assert _ulps(got, want64).max() <= MAX_ULP["exp32"]
    with np.errstate(under="ignore"):
        want = np.exp(x)
    assert np.abs(_ordered(got) - _ordered(want)).max() <= MAX_ULP["exp32"] + 1
    assert (got < np.finfo(np.float32).tiny).sum() == (want < np.finfo(np.float32).tiny).sum()
    assert (got > 0).sum() == (want > 0).sum() > 0


@numba.njit(fastmath={"contract"})
def _gelu_grad_loop(x, out):
    for i in range(x.size):
        out[i] = vecmath.gelu_grad32(x[i])


@numba.njit
def _gelu_grad64_loop(x, out):
    for i in range(x.size):
        v = np.float64(x[i])
        out[i] = _ndtr64(v) + v * math.exp(-v * v / 2) / math.sqrt(2 * math.pi)


def test_gelu_grad_error(samples):
    """GELU's derivative: within 3 ulps, plus, where it crosses 0 (x = -0.75) and ulps
    shrink, a few float32 roundings of its terms, g = exp(-x^2 / 2) in size."""
    x = np.concatenate([samples, np.linspace(-0.76, -0.74, 10_001, dtype=np.float32)])
    got = np.empty_like(x)
    _gelu_grad_loop(x, got)
    want = np.empty(x.size)
    _gelu_grad64_loop(x, want)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    g = np.exp(-(x[~nan].astype(np.float64) ** 2) / 2)
    ulp = np.spacing(np.abs(want[~nan]).astype(np.float32)).astype(np.float64)
    assert (np.abs(got[~nan] - want[~nan]) <= 3 * ulp + 3 * 2.0**-24 * g).all()


@jit.jit
def _tanh_loop(x, out):
    # vecmath's docstring example: a generated kernel's use, through jit() and its cache
    for i in range(x.size):
        out[i] = vecmath.tanh32(x[i])


def test_docstring_example():
    x = np.array([-np.inf, -1.0, -0.0, 0.5, 20.0, np.nan], np.float32)
    out = np.empty_like(x)
    _tanh_loop(x, out)
    np.testing.assert_allclose(out, np.tanh(x), rtol=1e-7)
    assert np.signbit(out[2])


@pytest.mark.parametrize("name", list(_vecmath_fit.FITS))
def test_coefficients_are_the_fits(name):
    np.testing.assert_allclose(getattr(vecmath, name), _vecmath_fit.coefficients(name), rtol=1e-5)


def _sweep(ours, ref):
    """Max ulp error (and where) of `ours` over the bit patterns start, start + step, ..."""

    @numba.njit(fastmath={"contract"})
    def sweep(start, stop, step):
        worst, at = 0, start
        for i in range(start, stop, step):
            x = np.uint32(i).view(np.float32)
            got = ours(x)
            want = np.float32(ref(np.float64(x)))
            if got != got or want != want:
                if (got != got) != (want != want):
                    return 1 << 40, i
                continue
            a = np.int64(np.float32(got).view(np.int32))
            b = np.int64(np.float32(want).view(np.int32))
            a = -(a & 0x7FFFFFFF) if a < 0 else a
            b = -(b & 0x7FFFFFFF) if b < 0 else b
            if abs(a - b) > worst:
                worst, at = abs(a - b), i
        return worst, at

    return sweep


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_ulp_error_wide_sweep(name):
    """Every 61st bit pattern of all 2^32 (70M inputs, all binades, both signs); 61 is odd
    so the sweep visits every mantissa residue, not only even ones."""
    worst, at = _sweep(getattr(vecmath, name), REFERENCES[name])(0, 2**32, 61)
    assert worst <= MAX_ULP[name], (name, np.uint32(at).view(np.float32), worst)
