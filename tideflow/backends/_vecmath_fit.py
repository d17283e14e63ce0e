"""Where `vecmath`'s polynomial coefficients come from: minimax fits in float64.

Each fit is linear in the coefficients: minimize max_i |s_i * (B_i @ c - t_i)| over a dense
grid, where B are basis functions, t the target and s turns the residual into the error of
the final float32 function (relative error for exp/log/tanh, the erf result's relative
error for erf's tail). Lawson's algorithm (iteratively reweighted least squares: each
point's weight grows with its error) converges to the minimax solution; the coefficients are
then rounded to float32, as the kernels use them. `tests/unit/test_vecmath.py` reruns the
fits and compares with the coefficients in `vecmath.py`.

    python -m tideflow.backends._vecmath_fit
"""

from __future__ import annotations

import math

import numpy as np

LN2 = math.log(2.0)


def minimax(basis: np.ndarray, target: np.ndarray, scale: np.ndarray, iters: int = 200):
    """Coefficients c minimizing max |scale * (basis @ c - target)| (Lawson's algorithm)."""
    a = basis * scale[:, None]
    b = target * scale
    w = np.full(len(b), 1.0 / len(b))
    for _ in range(iters):
        sw = np.sqrt(w)
        c = np.linalg.lstsq(a * sw[:, None], b * sw, rcond=None)[0]
        err = np.abs(a @ c - b)
        w = w * err
        w /= w.sum()
    return c, float(np.max(np.abs(a @ c - b)))


def _grid(lo: float, hi: float, n: int = 4001) -> np.ndarray:
    # Chebyshev-spaced points: dense near the ends, where minimax errors peak
    k = np.arange(n)
    return (lo + hi) / 2 + (hi - lo) / 2 * np.cos(np.pi * (k + 0.5) / n)[::-1]


def fit_exp(degree: int = 4):
    """exp(r) = 1 + r + r^2 * Q(r) on the reduced range |r| <= ln2/2 (a little beyond, as
    k = round(x / ln2) is computed in float32); Q of `degree`, error relative to exp(r)."""
    r = _grid(-0.3466 * 1.01, 0.3466 * 1.01)
    basis = np.stack([r**j for j in range(degree + 1)], axis=1)
    target = np.where(r == 0, 0.5, (np.expm1(r) - r) / np.where(r == 0, 1, r * r))
    return minimax(basis, target, r * r / np.exp(r))


def fit_log(degree: int = 8):
    """log1p(f) = f + f^2 * Q(f) on f = m - 1, m in [sqrt(1/2), sqrt(2)); error relative to
    log1p(f)."""
    f = _grid(math.sqrt(0.5) - 1, math.sqrt(2.0) - 1)
    f = f[f != 0]
    basis = np.stack([f**j for j in range(degree + 1)], axis=1)
    target = (np.log1p(f) - f) / (f * f)
    return minimax(basis, target, f * f / np.log1p(f))


TANH_SMALL = 0.55  # below it a polynomial; above, 1 - 2 / (exp(2|x|) + 1) loses < 1 bit


def fit_tanh(degree: int = 4):
    """tanh(x) = x + x^3 * Q(x^2) on [0, TANH_SMALL]; error relative to tanh(x)."""
    x = _grid(0.0, TANH_SMALL)
    x = x[x > 1e-4]
    u = x * x
    basis = np.stack([u**j for j in range(degree + 1)], axis=1)
    target = (np.tanh(x) - x) / (x * u)
    return minimax(basis, target, x * u / np.tanh(x))


ERF_SMALL = 0.875  # below it erf = x * Q(x^2); above, 1 - exp(P(x - ERF_MID))
ERF_ONE = 3.925  # erf(x) rounds to 1 in float32 from about 3.92 on
ERF_MID = (ERF_SMALL + ERF_ONE) / 2

_erf = np.vectorize(math.erf)
_erfc = np.vectorize(math.erfc)


def fit_erf_small(degree: int = 6):
    """erf(x) = x + x * Q(x^2) on [0, ERF_SMALL]; error relative to erf(x). (Q rather than
    1 + Q: x is exact and Q's float32 rounding costs a factor 2/sqrt(pi) - 1 less.)"""
    x = _grid(0.0, ERF_SMALL)
    x = x[x > 1e-4]
    u = x * x
    basis = np.stack([u**j for j in range(degree + 1)], axis=1)
    target = _erf(x) / x - 1
    return minimax(basis, target, x / _erf(x))


def fit_erf_tail(degree: int = 6):
    """log(erfc(x)) = P(x - ERF_MID) on [ERF_SMALL, ERF_ONE]. An error d in P is a relative
    error d in erfc, so erf = 1 - erfc is off by d * erfc / erf relative to itself."""
    x = _grid(ERF_SMALL, ERF_ONE)
    t = x - ERF_MID
    basis = np.stack([t**j for j in range(degree + 1)], axis=1)
    ec = _erfc(x)
    return minimax(basis, np.log(ec), ec / _erf(x))


ERFC_SMALL = 0.5  # below it erfc = 1 - erf(x) (erf < 0.53: the subtraction loses < 1 bit)
ERFC_TAIL = 2.0  # erfcx's polynomial in x below, in 1/x above
ERFC_ZERO = 10.054195  # the least float32 whose erfc rounds to 0 in float32
ERFCX_MID = (ERFC_SMALL + ERFC_TAIL) / 2


def fit_erfcx_mid(degree: int = 9):
    """erfcx(x) = exp(x^2) erfc(x) = Q(x - ERFCX_MID) on [ERFC_SMALL, ERFC_TAIL]; error
    relative to erfcx(x). (erfc itself is exp(-x^2) erfcx(x): erfcx is smooth and bounded
    where erfc spans 38 decades.)"""
    from scipy.special import erfcx

    x = _grid(ERFC_SMALL, ERFC_TAIL)
    basis = np.stack([(x - ERFCX_MID) ** j for j in range(degree + 1)], axis=1)
    target = erfcx(x)
    return minimax(basis, target, 1 / target)


def fit_erfcx_tail(degree: int = 7):
    """erfcx(x) = t * Q(t^2), t = 1/x, on [ERFC_TAIL, ERFC_ZERO] (erfcx's asymptotic form,
    t / sqrt(pi) * (1 - t^2/2 + ...)); error relative to erfcx(x)."""
    from scipy.special import erfcx

    x = _grid(ERFC_TAIL, ERFC_ZERO)
    t = 1 / x
    basis = np.stack([t * (t * t) ** j for j in range(degree + 1)], axis=1)
    target = erfcx(x)
    return minimax(basis, target, 1 / target)


NDTR_ZERO = 14.6  # exp(-x^2 / 2) rounds to 0 in float32 from about 14.5 on


def fit_ndtr_ratio(degree: int = 4):
    """exp(a^2 / 2) Phi(-a) = P(a) / Q(a) on [0, NDTR_ZERO], P of `degree`, Q of one more
    with Q(0) = 1; error relative to the ratio. (The ratio, a Mills ratio, falls smoothly from
    1/2 like 1 / (sqrt(2 pi) a): both polynomials have positive coefficients, so Horner's rule
    in float32 adds no cancellation.) Returns P's coefficients, then Q's after its 1.
    Linearized: P - R Q is fitted with weights 1 / (R Q) of the previous Q, which converges
    to the rational minimax in a few rounds."""
    from scipy.special import erfcx

    a = _grid(0.0, NDTR_ZERO)
    ratio = erfcx(a / math.sqrt(2.0)) / 2
    powers = np.stack([a**j for j in range(degree + 2)], axis=1)
    basis = np.concatenate([powers[:, : degree + 1], -ratio[:, None] * powers[:, 1:]], axis=1)
    q = np.ones_like(a)
    for _ in range(5):
        c, _ = minimax(basis, ratio, 1 / (ratio * q), iters=50)
        q = 1 + powers[:, 1:] @ c[degree + 1 :]
    p = powers[:, : degree + 1] @ c[: degree + 1]
    return c, float(np.max(np.abs(p / q - ratio) / ratio))


FITS = {
    "EXP_Q": fit_exp,
    "LOG_Q": fit_log,
    "TANH_Q": fit_tanh,
    "ERF_SMALL_Q": fit_erf_small,
    "ERF_TAIL_P": fit_erf_tail,
    "ERFCX_MID_Q": fit_erfcx_mid,
    "ERFCX_TAIL_Q": fit_erfcx_tail,
    "NDTR_PQ": fit_ndtr_ratio,
}


def coefficients(name: str) -> tuple[float, ...]:
    """The fit's coefficients (lowest power first) rounded to float32, as Python floats."""
    c, _ = FITS[name]()
    return tuple(float(np.float32(v)) for v in c)


if __name__ == "__main__":
    for name, fit in FITS.items():
        c, err = fit()
        print(f"{name}: max error {err:.3g} = 2^{math.log2(err):.1f}")
        print("    " + ", ".join(repr(float(np.float32(v))) for v in c))
