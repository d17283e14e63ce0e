"""float32 math functions that numba vectorizes: exp32, log32, tanh32, erf32, erfc32,
ndtr32 (the normal CDF), gelu32 and gelu_grad32 (GELU's erf form, x ndtr(x), and its
derivative), expm1_32, log1p32, sigmoid32; and bfloat16 <-> float32 conversions on bits
(bf16_widen, bf16_round, bf16_bits), with which loops compute bfloat16 in float32.

numba compiles `math.exp`, `math.tanh`, `math.erf` to calls into libm, one element at a
time, so a fused loop calling them runs slower than NumPy's ufuncs. These functions use no
calls: range reduction through the float's exponent bits (integer views), polynomials in
float32 (multiply-adds, contracted to FMAs by numba's `contract` flag), and selects (`a if c
else b` on values computed for every element) instead of branches, so LLVM's loop
vectorizer turns a loop calling them into SIMD code. Each takes a float32 and returns a
float32 and computes in float32; the special values (NaN, +-inf, -0.0, overflow to inf,
gradual underflow into denormals, log of denormals) behave as NumPy's float32 ufuncs.
tests/unit/test_vecmath.py asserts the error bounds in ulps against float64 over every
binade of float32; `_vecmath_fit.py` derives the coefficients.

They are plain Python functions: from Python they accept NumPy float32 scalars (slowly; for
tests, and as NumPy does they may warn on overflow). numba does not know plain functions,
so a generated kernel calls `register()` (idempotent; imports numba) before its first
compilation, which registers each function as numba-jitable with LLVM's always-inline
attribute (numba's `forceinline`): LLVM inlines them before it vectorizes the caller's loop.
(numba's own `inline="always"` would inline at the level of numba's IR and type every
nested call again at every call site: compiles took seconds per kernel.) A call inside a
loop of constant trip count, which LLVM unrolls before it inlines, is not vectorized: keep
calls in plain loops over the data.
Kernels must not ask for the `nnan`, `ninf` or `reassoc` fastmath flags (`fastmath=True`
has them): those let LLVM drop the NaN/inf selects. `jit()`'s default (`contract`) is what
the tests run under. numba's disk cache keys on the kernel's own file only: after editing
this module, delete the kernels' cached `.nbi`/`.nbc` files.

A kernel module (a file: numba's disk cache needs one) calls them like any function;
tests/unit/test_vecmath.py runs this one:

    from tideflow.backends import jit, vecmath

    vecmath.register()

    @jit.jit
    def tanh_loop(x, out):
        for i in range(x.size):
            out[i] = vecmath.tanh32(x[i])
"""

from __future__ import annotations

import math

import numpy as np

F = np.float32

# Coefficients, lowest power first: `python -m tideflow.backends._vecmath_fit` prints them
# (minimax fits in float64 rounded to float32); the tests check that they still agree.
EXP_Q = (
    0.4999999403953552,
    0.16666515171527863,
    0.04166845604777336,
    0.008369424380362034,
    0.001381313311867416,
)
LOG_Q = (
    -0.49999988079071045,
    0.33333325386047363,
    -0.25001582503318787,
    0.20001976191997528,
    -0.16609077155590057,
    0.14181779325008392,
    -0.13242976367473602,
    0.12904690206050873,
    -0.07622108608484268,
)
TANH_Q = (
    -0.33333316445350647,
    0.13332585990428925,
    -0.05385230854153633,
    0.021071679890155792,
    -0.006274240091443062,
)
ERF_SMALL_Q = (
    0.12837916612625122,
    -0.37612634897232056,
    0.11283732950687408,
    -0.026861585676670074,
    0.005206748377531767,
    -0.0008211112581193447,
    8.675425488036126e-05,
)
ERF_TAIL_P = (
    -7.280977725982666,
    -5.164252281188965,
    -0.940502405166626,
    -0.011638004332780838,
    0.002678787335753441,
    -0.000197945861145854,
    0.00020099633547943085,
)
ERFCX_MID_Q = (
    0.36782291531562805,
    -0.2088218629360199,
    0.10679499059915543,
    -0.050218451768159866,
    0.02201973646879196,
    -0.009081950411200523,
    0.0035114968195557594,
    -0.001318114809691906,
    0.0005568229244090617,
    -0.00018496206030249596,
)
ERFCX_TAIL_Q = (
    0.5641894340515137,
    -0.28206777572631836,
    0.4215088188648224,
    -1.0093095302581787,
    2.865466356277466,
    -7.213584899902344,
    12.24167251586914,
    -9.705549240112305,
)
NDTR_PQ = (  # P's coefficients, then Q's after its constant 1
    0.5,
    0.43849843740463257,
    0.18338611721992493,
    0.040684185922145844,
    0.004123890772461891,
    1.6748818159103394,
    1.203129768371582,
    0.4698692262172699,
    0.10198650509119034,
    0.010336942970752716,
)
TANH_SMALL = 0.55  # the fits' ranges (see _vecmath_fit.py)
ERF_SMALL = 0.875
ERF_ONE = 3.925
ERF_MID = (ERF_SMALL + ERF_ONE) / 2
ERFC_SMALL, ERFC_TAIL, ERFC_ZERO = 0.5, 2.0, 10.054195
ERFCX_MID = (ERFC_SMALL + ERFC_TAIL) / 2
NDTR_ZERO = 14.6

# numba types a global np.float32 as a float32 constant (a Python float would be float64
# and promote the whole expression), so every constant below is one.
_E0, _E1, _E2, _E3, _E4 = (F(c) for c in EXP_Q)
_L0, _L1, _L2, _L3, _L4, _L5, _L6, _L7, _L8 = (F(c) for c in LOG_Q)
_T0, _T1, _T2, _T3, _T4 = (F(c) for c in TANH_Q)
_S0, _S1, _S2, _S3, _S4, _S5, _S6 = (F(c) for c in ERF_SMALL_Q)
_P0, _P1, _P2, _P3, _P4, _P5, _P6 = (F(c) for c in ERF_TAIL_P)
_M0, _M1, _M2, _M3, _M4, _M5, _M6, _M7, _M8, _M9 = (F(c) for c in ERFCX_MID_Q)
_R0, _R1, _R2, _R3, _R4, _R5, _R6, _R7 = (F(c) for c in ERFCX_TAIL_Q)
_N0, _N1, _N2, _N3, _N4, _D1, _D2, _D3, _D4, _D5 = (F(c) for c in NDTR_PQ)
_TANH_SMALL, _ERF_SMALL, _ERF_ONE, _ERF_MID = F(TANH_SMALL), F(ERF_SMALL), F(ERF_ONE), F(ERF_MID)
_ERFC_SMALL, _ERFC_TAIL, _ERFC_ZERO = F(ERFC_SMALL), F(ERFC_TAIL), F(ERFC_ZERO)
_ERFCX_MID = F(ERFCX_MID)
_NDTR_ZERO = F(NDTR_ZERO)
# x exp(-x^2 / 2) Phi(-x) < 2^-25 x from 5.9 on: GELU(x) and its derivative round to x and 1
_GELU_POSITIVE = F(9.0)
_GELU_ZERO = F(14.4)  # |GELU(x)| <= 2^-150 (rounds to 0) from x = -14.3562 down
_INV_SQRT_2PI = F(1 / math.sqrt(2 * math.pi))
_SQUARE_SPLIT, _SQUARE_SPLIT_INV = F(256.0), F(1 / 256)

_ZERO, _HALF, _ONE, _TWO = F(0.0), F(0.5), F(1.0), F(2.0)
_INF, _NAN = F(np.inf), F(np.nan)
_LOG2E = F(1 / math.log(2))
# ln 2 split in two (Cody and Waite): _LN2_HI has 15 significant bits, so k * _LN2_HI is
# exact for every |k| < 2^9 and x - k * _LN2_HI loses nothing
_LN2_HI = F(0.693145751953125)
_LN2_LO = F(math.log(2) - 0.693145751953125)
# exp's input range: exp(89) overflows float32, exp(-104) rounds to 0 below the smallest
# denormal; clamping keeps k = round(x / ln 2) within [-150, 128]
_EXP_HI, _EXP_LO = F(89.0), F(-104.0)
_TANH_CLAMP = F(10.0)  # tanh(x) rounds to 1 from 9.01 on
_EXPM1_LO = F(-30.0)  # expm1(x) rounds to -1 from -17.4 on
_MIN_NORMAL = F(np.finfo(np.float32).tiny)
_TWO23 = F(2.0**23)
# integer constants are int32 too: exponent arithmetic then stays in 32-bit lanes (int64
# would split each vector in two halves and back)
_I1, _I23, _I64, _EXP_BIAS = np.int32(1), np.int32(23), np.int32(64), np.int32(127)
_MANTISSA = np.int32(0x007FFFFF)
_SQRT_HALF_BITS = np.int32(0x3F3504F3)  # the bits of float32 sqrt(1/2)
_LOG1P_LO, _LOG1P_HI = F(math.sqrt(0.5) - 1), F(math.sqrt(2.0) - 1)


def _pow2(k):
    """2.0**k as float32 for integer k in [-126, 127], built from its exponent bits."""
    return np.int32((k + _EXP_BIAS) << _I23).view(np.float32)


def _exp_scaled(kf, r, factor):
    """factor 2^kf exp(r) for integral float32 kf in [-252, 128], |r| <= ln2/2 (a little
    more) and a normal `factor`. 2^k is applied last, as two factors, so that k = 128 reaches
    inf and k < -126 rounds once, into the denormals, as a correctly rounded exp would. NOTE:
    a denormal result is then the only denormal the computation touches: on Intel CPUs each
    multiply with a denormal operand or result takes a microcode assist (~100x an FMA)."""
    p = _ONE + (r + r * r * (_E0 + r * (_E1 + r * (_E2 + r * (_E3 + r * _E4)))))
    k = np.int32(kf)
    k1 = k >> _I1
    return p * factor * _pow2(k1) * _pow2(k - k1)


def _exp_core(x):
    """exp(x) for float32 x in [-104, 89] (not NaN): x = k ln2 + r with |r| <= ln2/2."""
    kf = np.rint(x * _LOG2E)
    return _exp_scaled(kf, (x - kf * _LN2_HI) - kf * _LN2_LO, _ONE)


def exp32(x):
    """exp(x) in float32."""
    x = F(x)
    # NaN fails both comparisons (and is clamped to _EXP_LO); the last select returns it
    xc = x if x < _EXP_HI else _EXP_HI
    xc = xc if xc > _EXP_LO else _EXP_LO
    y = _exp_core(xc)
    return y if x == x else x


def _log1p_reduced(f):
    """log(1 + f) for f in [sqrt(1/2) - 1, sqrt(2) - 1]."""
    q = _L4 + f * (_L5 + f * (_L6 + f * (_L7 + f * _L8)))
    q = _L0 + f * (_L1 + f * (_L2 + f * (_L3 + f * q)))
    return f + f * f * q


def _log_core(x):
    """log(x) for positive finite float32 x, denormals included: x = m 2^e with m in
    [sqrt(1/2), sqrt(2)), log(x) = e ln2 + log1p(m - 1)."""
    tiny = x < _MIN_NORMAL
    xs = x * _TWO23 if tiny else x
    # subtracting sqrt(1/2)'s bits makes the exponent field count binades from sqrt(1/2),
    # and adding them back to the remaining mantissa bits gives m in [sqrt(1/2), sqrt(2))
    ix = np.float32(xs).view(np.int32) - _SQRT_HALF_BITS
    e = (ix >> _I23) - (_I23 if tiny else np.int32(0))
    m = np.int32((ix & _MANTISSA) + _SQRT_HALF_BITS).view(np.float32)
    p = _log1p_reduced(m - _ONE)  # m - 1 is exact (Sterbenz)
    ef = F(e)
    return ef * _LN2_HI + (ef * _LN2_LO + p)


def log32(x):
    """log(x) in float32: log(+-0) = -inf, log(x < 0) = NaN, log(inf) = inf."""
    x = F(x)
    y = _log_core(x)
    y = y if x > _ZERO else (-_INF if x == _ZERO else _NAN)
    return y if x < _INF else x


def tanh32(x):
    """tanh(x) in float32: x + x^3 Q(x^2) for |x| < 0.55, 1 - 2 / (exp(2|x|) + 1) above
    (there tanh >= 0.5, so the subtraction cancels less than one bit)."""
    x = F(x)
    a = abs(x)
    u = x * x
    small = x + x * u * (_T0 + u * (_T1 + u * (_T2 + u * (_T3 + u * _T4))))
    ac = a if a < _TANH_CLAMP else _TANH_CLAMP
    # np.divide, not `/`: numba checks `/`'s divisor for zero (to raise ZeroDivisionError),
    # and that call keeps the loop from vectorizing
    big = _ONE - np.divide(_TWO, _exp_core(ac + ac) + _ONE)
    big = big if x > _ZERO else -big
    y = small if a < _TANH_SMALL else big
    # -0.0 keeps its sign (x + x*u*q gives +0.0), NaN passes through
    return y if x != _ZERO and x == x else x


def _erf_small(x):
    """erf(x) for |x| < ERF_SMALL: x + x Q(x^2)."""
    u = x * x
    return x + x * (_S0 + u * (_S1 + u * (_S2 + u * (_S3 + u * (_S4 + u * (_S5 + u * _S6))))))


def erf32(x):
    """erf(x) in float32: x + x Q(x^2) for |x| < 0.875, 1 - exp(P(|x| - mid)) above, with P
    fitted to log(erfc) (erfc decays like exp(-x^2), its log is smooth)."""
    x = F(x)
    a = abs(x)
    small = _erf_small(x)
    t = (a if a < _ERF_ONE else _ERF_ONE) - _ERF_MID
    p = _P0 + t * (_P1 + t * (_P2 + t * (_P3 + t * (_P4 + t * (_P5 + t * _P6)))))
    big = _ONE - _exp_core(p)
    big = big if x > _ZERO else -big
    y = small if a < _ERF_SMALL else big
    return y if x == x else x


def _exp_neg_square(a, s, factor):
    """factor exp(-s a^2) for a in [0, NDTR_ZERO] and s = 1 or 1/2, without the error of rounding
    a^2 (2^-24 s a^2 absolute: 50 ulps of the result at a = 10, s = 1): a = h + l with h a
    multiple of 1/256, so s h^2 (12 significant bits squared) and l = a - h are exact,
    -s a^2 = -s h^2 - s l (a + h), and the reduction -s h^2 - k ln2_hi is exact too
    (multiples of 2^-17 below 1/2). k reaches -154, which `_exp_scaled`'s two factors of
    2^(k/2) round into the denormals (or to 0) once."""
    h = np.rint(a * _SQUARE_SPLIT) * _SQUARE_SPLIT_INV
    # (negated through the factors, not the products: no sign flips left for the vector code)
    hi = h * -s * h
    lo = (h - a) * s * (a + h)
    kf = np.rint((hi + lo) * _LOG2E)
    return _exp_scaled(kf, ((hi - kf * _LN2_HI) + lo) - kf * _LN2_LO, factor)


def erfc32(x):
    """erfc(x) = 1 - erf(x) in float32, accurate where it is tiny: 1 - erf(x) for |x| < 0.5;
    above, exp(-x^2) erfcx(x) with erfcx (smooth, between 0.05 and 0.62 there) a polynomial
    in x up to 2 and t Q(t^2), t = 1/x, beyond; for x <= -0.5, 2 - erfc(-x). Underflows
    gradually, to 0 from x = 10.054195 on, as float64's erfc rounded does."""
    x = F(x)
    a = abs(x)
    ac = a if a < _ERFC_ZERO else _ERFC_ZERO  # NaN goes to _ERFC_ZERO, the last select returns it
    ac = ac if ac > _ERFC_SMALL else _ERFC_SMALL
    m = ac - _ERFCX_MID
    mid = _M5 + m * (_M6 + m * (_M7 + m * (_M8 + m * _M9)))
    mid = _M0 + m * (_M1 + m * (_M2 + m * (_M3 + m * (_M4 + m * mid))))
    t = np.divide(_ONE, ac)  # (not `/`: see tanh32)
    v = t * t
    tail = _R4 + v * (_R5 + v * (_R6 + v * _R7))
    tail = t * (_R0 + v * (_R1 + v * (_R2 + v * (_R3 + v * tail))))
    big = _exp_neg_square(ac, _ONE, _ONE) * (mid if ac < _ERFC_TAIL else tail)
    big = big if a < _ERFC_ZERO else _ZERO
    big = big if x > _ZERO else _TWO - big
    y = _ONE - _erf_small(x) if a < _ERFC_SMALL else big
    return y if x == x else x


def _ndtr_ratio(a):
    """R(a) = exp(a^2 / 2) Phi(-a) for a in [0, NDTR_ZERO]: Phi(-a) = exp(-a^2 / 2) R(a)."""
    p = _N0 + a * (_N1 + a * (_N2 + a * (_N3 + a * _N4)))
    q = _ONE + a * (_D1 + a * (_D2 + a * (_D3 + a * (_D4 + a * _D5))))
    return np.divide(p, q)  # (not `/`: see tanh32)


def ndtr32(x):
    """Phi(x), the standard normal distribution's CDF, in float32: with a = |x|, Phi(-a) =
    exp(-a^2 / 2) R(a) (exact square, see `_exp_neg_square`), R a ratio of polynomials fitted
    to exp(a^2 / 2) Phi(-a), accurate where Phi(-a) is tiny; Phi(a) = 1 - Phi(-a) (at most
    1/2: no cancellation). Underflows gradually, to 0 by x = -NDTR_ZERO."""
    x = F(x)
    a = abs(x)
    ac = a if a < _NDTR_ZERO else _NDTR_ZERO  # NaN goes to _NDTR_ZERO, the last select returns it
    lower = _exp_neg_square(ac, _HALF, _ndtr_ratio(ac))
    cdf = _ONE - lower if x >= _ZERO else lower
    return cdf if x == x else x


def _gelu_reduced(x, zero):
    """(a, a with x's sign, x > 0, whether a = |x|) for GELU and its derivative: a = |x|
    where the result depends on it, 0 from `zero` on below 0 (the result rounds to 0) and
    from _GELU_POSITIVE on above (it rounds to x, or 1): exp(-a^2 / 2) stays normal (see
    `_exp_scaled`). NaN and +-inf are outside too."""
    a = abs(x)
    positive = x > _ZERO
    inside = a < (_GELU_POSITIVE if positive else zero)
    a = a if inside else _ZERO
    return a, np.copysign(a, x), positive, inside  # (copysign: -0.0 keeps its sign)


def gelu32(x):
    """x Phi(x), GELU's erf form, in float32: with e = x exp(-x^2 / 2) R(|x|) (see ndtr32),
    e for x <= 0 (denormal from x = -13.2, rounded once) and x - e above (e <= x / 2). Where
    the result no longer depends on exp (see `_gelu_reduced`), e = 0 gives it. GELU of -inf
    is NaN (inf * 0), as NumPy's and PyTorch's are."""
    x = F(x)
    a, xa, positive, _ = _gelu_reduced(x, _GELU_ZERO)
    e = _exp_neg_square(a, _HALF, xa * _ndtr_ratio(a))
    y = x - e if positive else e
    return y if x > -_INF else x * _ZERO  # (NaN fails the comparison too)


def gelu_grad32(x):
    """GELU's derivative Phi(x) + x phi(x) in float32, phi(x) = exp(-x^2 / 2) / sqrt(2 pi):
    with g = exp(-x^2 / 2), g (R(|x|) + x / sqrt(2 pi)) for x <= 0 (one rounding into the
    denormals) and 1 + g (x / sqrt(2 pi) - R(x)) above; 1 and -0.0 where it rounds to them.
    Its error is absolute, a few ulps of g, where it crosses 0 (x = -0.75179). NaN for
    +-inf (inf * 0), as PyTorch's."""
    x = F(x)
    a, xa, positive, inside = _gelu_reduced(x, _NDTR_ZERO)
    ratio = _ndtr_ratio(a)
    slope = xa * _INV_SQRT_2PI
    e = _exp_neg_square(a, _HALF, slope - ratio if positive else slope + ratio)
    d = _ONE + e if positive else e
    outside = x * _ZERO  # -0.0 below, NaN for NaN and +-inf
    return d if inside else (_ONE + outside if positive else outside)


def expm1_32(x):
    """exp(x) - 1 in float32, accurate near 0: with x = k ln2 + r, 2^k expm1(r) + (2^k - 1)
    (2^k - 1 is exact for |k| <= 24); for large k, exp(x) itself."""
    x = F(x)
    xc = x if x < _EXP_HI else _EXP_HI
    xc = xc if xc > _EXPM1_LO else _EXPM1_LO
    kf = np.rint(xc * _LOG2E)
    r = (xc - kf * _LN2_HI) - kf * _LN2_LO
    q = r + r * r * (_E0 + r * (_E1 + r * (_E2 + r * (_E3 + r * _E4))))
    k = np.int32(kf)
    s = _pow2(k if k < _I64 else _I64)
    mid = s * q + (s - _ONE)
    k1 = k >> _I1
    big = (q + _ONE) * _pow2(k1) * _pow2(k - k1)
    y = mid if k < _I64 else big
    # -0.0 keeps its sign (r + r*r*q would give +0.0), NaN passes through
    return y if x != _ZERO and x == x else x


def log1p32(x):
    """log(1 + x) in float32, accurate near 0: for x in [sqrt(1/2) - 1, sqrt(2) - 1] the
    reduced polynomial on x itself; elsewhere (|result| > 0.34, no cancellation) u = 1 + x
    rounded, log(u) plus the rounding error's first-order term (x - (u - 1)) / u (u - 1 is
    exact there)."""
    x = F(x)
    u = _ONE + x
    c = np.divide(x - (u - _ONE), u)  # (not `/`: see tanh32)
    y = _log_core(u) + c
    y = _log1p_reduced(x) if _LOG1P_LO <= x < _LOG1P_HI else y
    y = y if x > -_ONE else (-_INF if x == -_ONE else _NAN)
    y = y if x < _INF else x
    return y if x != _ZERO else x


def sigmoid32(x):
    """1 / (1 + exp(-x)) in float32 without overflow: with e = exp(-|x|), 1 / (1 + e) for
    x >= 0 and e / (1 + e) below (denormal results for x < -87, as in float64)."""
    x = F(x)
    a = abs(x)
    e = _exp_core(-(a if a < -_EXP_LO else -_EXP_LO))
    y = np.divide(_ONE if x >= _ZERO else e, _ONE + e)  # (not `/`: see tanh32)
    return y if x == x else x


# -- bfloat16 as float32: a bfloat16 is the upper half of a float32's bits --------------------
_BF16_HALF_MINUS_ONE = np.uint32(0x7FFF)
_BF16_SHIFT = np.uint32(16)
_BF16_KEPT = np.uint32(0xFFFF0000)
_BF16_QUIET_NAN = np.uint16(0x7FC0)


def bf16_widen(h):
    """The float32 value of bfloat16 bits `h` (a uint16): exact."""
    return np.uint32(np.uint32(h) << _BF16_SHIFT).view(np.float32)


def bf16_round(x):
    """float32 `x` rounded to the nearest bfloat16 (ties to even), as a float32: adding
    0x7fff plus the lowest kept bit carries into the kept half exactly when rounding up
    (overflow goes to inf); NaN stays NaN."""
    u = np.float32(x).view(np.uint32)
    r = np.uint32((u + _BF16_HALF_MINUS_ONE + ((u >> _BF16_SHIFT) & np.uint32(1))) & _BF16_KEPT)
    return r.view(np.float32) if x == x else x


def bf16_bits(x):
    """The bfloat16 bits (uint16) of a float32 `x` that `bf16_round` returned; NaN is the
    quiet NaN."""
    return np.uint16(np.float32(x).view(np.uint32) >> _BF16_SHIFT) if x == x else _BF16_QUIET_NAN


FUNCTIONS = (
    *(exp32, log32, tanh32, erf32, erfc32, ndtr32, gelu32, gelu_grad32),
    *(expm1_32, log1p32, sigmoid32),
)
BFLOAT16 = (bf16_widen, bf16_round, bf16_bits)
_registered = False


def register() -> None:
    """Make these functions (and their helpers) callable from numba-compiled code, inlined
    into the caller so that its loop vectorizes. Idempotent; imports numba."""
    global _registered
    if _registered:
        return
    from numba.extending import register_jitable

    helpers = (
        *(_pow2, _exp_scaled, _exp_core, _log1p_reduced, _log_core),
        *(_erf_small, _exp_neg_square, _ndtr_ratio, _gelu_reduced),
    )
    for fn in (*helpers, *FUNCTIONS, *BFLOAT16):
        register_jitable(forceinline=True)(fn)
    _registered = True
