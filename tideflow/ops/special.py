"""Special functions: the gamma family (lgamma, digamma, polygamma, mvlgamma, the incomplete
gamma functions, Hurwitz zeta), modified Bessel functions of the first kind (i0, i1 and their
exponentially scaled forms) and Bessel functions j0/j1, the normal distribution (ndtr, ndtri,
log_ndtr), erfcx, logit, sinc, entr and xlog1py. `tideflow.special` re-exports these with the
ones defined elsewhere (erf, sigmoid, xlogy, ...) under PyTorch's `torch.special` names.

Kernels are SciPy's ufuncs, which keep float32 and float64; float16/bfloat16 compute in float32
and round once. Gradients follow PyTorch's derivatives; where PyTorch has none (zeta and the
incomplete gamma functions in their first argument) asking for one raises, as it does there.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import scipy.special as sc

from ..framework.dispatch import inplace
from ..framework.errors import ArgumentError, AutogradError, TideflowError
from ._onnx_rules import operands_like
from ._rules import (
    Meta,
    defop,
    dispatch,
    elementwise_meta,
    elementwise_sbp,
    methods,
    tensor_arg,
)
from .binary import logical_and, logical_or, where
from .unary import check_dtype, cos, dtype_checked, exp, log, sign, unary_meta

__all__ = ["digamma", "i0", "lgamma", "logit", "mvlgamma", "polygamma", "sinc"]

_NO_ATTRS: dict = {}
_SQRT_2PI = math.sqrt(2.0 * math.pi)
_2_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_LOG_PI = math.log(math.pi)
_HALF = frozenset((np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)))


# -- kernels and op builders ----------------------------------------------------------------
def _float_kernel(fn):
    """`fn` on promoted floating-point operands: float32/float64 as they are (SciPy's loops
    keep them), float16/bfloat16 in float32, rounded once to their dtype."""

    def kernel(*operands, **attrs):
        dtype = next(a.dtype for a in operands if isinstance(a, np.ndarray))
        if dtype in _HALF:
            wide = (a.astype(np.float32) if isinstance(a, np.ndarray) else a for a in operands)
            return np.asarray(fn(*wide, **attrs), np.float32).astype(dtype)
        return np.asarray(fn(*operands, **attrs), dtype)

    return kernel


def _unary(name, fn, grad=None, saves=("input",), differentiable=None, onnx=None):
    """A floating-point function of one tensor; integer and bool inputs give the default
    float dtype."""
    return defop(
        name,
        inputs=("input",),
        meta=unary_meta(name, "float"),
        sbp=elementwise_sbp(),
        kernels={"cpu": dtype_checked(name, "float", _float_kernel(fn))},
        grad=grad,
        saves=saves,
        promote="float",
        differentiable=differentiable,
        elementwise=True,
        onnx=onnx,
    )


def _binary_meta(name):
    broadcast = elementwise_meta(name)

    def meta(*operands, **attrs) -> Meta:
        out = broadcast(*operands)
        check_dtype(name, out.dtype.np, "float")
        return out

    return meta


def _binary_kernel(name, fn):
    def checked(x, y):
        for a in (x, y):
            if isinstance(a, np.ndarray) and a.dtype.kind != "f" and a.dtype not in _HALF:
                check_dtype(name, a.dtype, "float")
        return fn(x, y)

    return _float_kernel(checked)


def _binary(name, fn, grad, onnx=None):
    """A floating-point function of two broadcasting operands (tensors or Python numbers)."""
    return defop(
        name,
        inputs=("input", "other"),
        meta=_binary_meta(name),
        sbp=elementwise_sbp(),
        kernels={"cpu": _binary_kernel(name, fn)},
        grad=grad,
        saves=("input", "other"),
        promote="float",
        elementwise=True,
        onnx=onnx,
    )


def _nonzero(x):
    """`x` with its zeros replaced by 1: a denominator for the branch a `where` drops at 0, so
    that no inf/nan enters the gradient of that branch (double backward stays finite)."""
    return where(x == 0, 1.0, x)


def _no_derivative(op: str, argument: str):
    raise AutogradError(
        f"{op}: the derivative with respect to '{argument}' is not implemented (as in PyTorch); "
        f"detach it or pass it as a number"
    )


def _apply(op, input, attrs=_NO_ATTRS, position=1):
    """`op` on the tensor `input` (argument `position` of the public call): PyTorch refuses
    numbers and None here, with a TypeError naming the op and the argument."""
    return dispatch(op, (tensor_arg(op.name, "input", position, input),), attrs)


# -- the gamma function and its derivatives --------------------------------------------------
def _lgamma_kernel(x):
    # NOTE: log|Gamma(-inf)| is +inf in PyTorch (and C's lgamma); SciPy returns -inf.
    return np.where(x == -np.inf, np.inf, sc.gammaln(x))


def _polygamma_kernel(x, *, n):
    if n == 0:
        return sc.psi(x)
    # NOTE: float64 throughout: SciPy's polygamma is a composite without float32 loops.
    return sc.polygamma(n, x.astype(np.float64))


def _mvlgamma_kernel(x, *, p):
    # NOTE: PyTorch documents the function only above (p - 1) / 2 and once refused the rest;
    # so does this kernel (nan passes), which also bounds its p terms by the input's size.
    if np.any(x <= 0.5 * (p - 1)):
        raise TideflowError(
            f"mvlgamma: all elements must be greater than (p - 1) / 2 = {0.5 * (p - 1)} "
            f"(p = {p}), got {float(np.nanmin(x)):.6g}"
        )
    terms = sum(_lgamma_kernel(x - 0.5 * i) for i in range(p))
    return terms + 0.25 * p * (p - 1) * _LOG_PI


def _mvlgamma_grad(ctx, gy):
    x = ctx.input
    return (gy * sum(digamma(x - 0.5 * i) for i in range(ctx.p)),)


_lgamma = _unary("lgamma", _lgamma_kernel, lambda ctx, gy: (gy * digamma(ctx.input),))
_digamma = _unary("digamma", sc.psi, lambda ctx, gy: (gy * polygamma(1, ctx.input),))
_polygamma = _unary(
    "polygamma",
    _polygamma_kernel,
    lambda ctx, gy: (gy * polygamma(ctx.n + 1, ctx.input),),
)
_mvlgamma = _unary("mvlgamma", _mvlgamma_kernel, _mvlgamma_grad)


def lgamma(input):
    """`log|Gamma(input)|`; poles (0, -1, -2, ...) give inf.

    >>> flow.lgamma(flow.tensor([0.5, 1.0, 4.0]))  # log(sqrt(pi)), 0, log(6)
    tensor([0.5724, 0.0000, 1.7918])
    """
    return _apply(_lgamma, input)


def digamma(input):
    """The logarithmic derivative of the gamma function, `Gamma'(x) / Gamma(x)`.

    >>> flow.digamma(flow.tensor([1.0]))  # minus Euler's constant
    tensor([-0.5772])
    """
    return _apply(_digamma, input)


def polygamma(n, input):
    """The `n`-th derivative of digamma (`polygamma(0, x)` is digamma).

    >>> flow.polygamma(1, flow.tensor([1.0]))  # pi**2 / 6
    tensor([1.6449])
    """
    if type(n) is not int or n < 0:
        raise ArgumentError(f"polygamma: n must be a non-negative int, got {n!r}")
    return _apply(_polygamma, input, {"n": n}, position=2)


def mvlgamma(input, p):
    """The log of the multivariate gamma function of dimension `p`:
    `p (p - 1) / 4 * log(pi) + sum_{i < p} lgamma(input - i / 2)`.

    >>> flow.mvlgamma(flow.tensor([2.5]), p=2)
    tensor([0.8570])
    """
    if type(p) is not int or p < 1:
        raise ArgumentError(f"mvlgamma: p must be an int >= 1, got {p!r}")
    return _apply(_mvlgamma, input, {"p": p})


# -- incomplete gamma and Hurwitz zeta --------------------------------------------------------
def _gammainc_density(a, x):
    """d/dx of the regularized lower incomplete gamma P(a, x): x^(a-1) e^-x / Gamma(a)."""
    return exp((a - 1) * log(x) - x - lgamma(a))


def _incomplete_gamma_grad(name, sign_):
    def grad(ctx, gy):
        need_a, need_x = ctx.needs_input_grad
        if need_a:
            _no_derivative(name, "input")
        return None, (gy * _gammainc_density(ctx.input, ctx.other) * sign_ if need_x else None)

    return grad


def _zeta_grad(ctx, gy):
    need_x, need_q = ctx.needs_input_grad
    if need_x:
        _no_derivative("zeta", "input")
    x, q = ctx.input, ctx.other
    return None, (gy * -x * zeta(x + 1, q) if need_q else None)


def _xlog1py_grad(ctx, gy):
    need_x, need_y = ctx.needs_input_grad
    x, y = ctx.input, ctx.other
    # log1p(y), taken as 0 where x == 0 and y <= -1 (PyTorch's choice, as in xlogy)
    gx = where(logical_and(x == 0, y <= -1), 0.0, xlog1py(gy, y)) if need_x else None
    return gx, (gy * x / (y + 1) if need_y else None)


_gammainc = _binary("gammainc", sc.gammainc, _incomplete_gamma_grad("gammainc", 1.0))
_gammaincc = _binary("gammaincc", sc.gammaincc, _incomplete_gamma_grad("gammaincc", -1.0))
_zeta = _binary("zeta", sc.zeta, _zeta_grad)


# NOTE: SciPy's xlog1py is PyTorch's: 0 where x is 0, for any y but nan (as `xlogy`).
def _xlog1py_onnx(g, x, y):
    x, y = operands_like(g, x, y)
    zero = g.tensor(0, x)
    product = g.op("Mul", x, g.op("Log", g.op("Add", y, g.tensor(1, x))))
    # NOTE: 0 * log1p(y) is 0 unless y is nan
    keep_zero = g.op("And", g.op("Equal", x, zero), g.op("Not", g.op("IsNaN", y)))
    return g.op("Where", keep_zero, zero, product)


_xlog1py = _binary(
    "xlog1py",
    sc.xlog1py,
    _xlog1py_grad,
    onnx=_xlog1py_onnx,
)


def gammainc(input, other):
    """The regularized lower incomplete gamma function `P(input, other)`."""
    return dispatch(_gammainc, (input, other), _NO_ATTRS)


def gammaincc(input, other):
    """The regularized upper incomplete gamma function `Q(input, other) = 1 - P(input, other)`."""
    return dispatch(_gammaincc, (input, other), _NO_ATTRS)


def zeta(input, other):
    """The Hurwitz zeta function `sum_{k >= 0} (other + k) ** -input`; either may be a number."""
    return dispatch(_zeta, (input, other), _NO_ATTRS)


def xlog1py(input, other):
    """`input * log1p(other)`, taken as 0 where `input` is 0 (unless `other` is nan)."""
    return dispatch(_xlog1py, (input, other), _NO_ATTRS)


# -- Bessel functions -------------------------------------------------------------------------
def _i1_grad(ctx, gy):
    x = ctx.input
    # I1'(x) = I0(x) - I1(x) / x, which tends to 1/2 at 0
    return (gy * where(x == 0, 0.5, i0(x) - ctx.out / _nonzero(x)),)


def _i1e_grad(ctx, gy):
    x = ctx.input
    slope = i0e(x) - ctx.out * (sign(x) + 1 / _nonzero(x))
    return (gy * where(x == 0, 0.5, slope),)


_i0 = _unary("i0", sc.i0, lambda ctx, gy: (gy * i1(ctx.input),))
_i0e = _unary(
    "i0e",
    sc.i0e,
    lambda ctx, gy: (gy * (i1e(ctx.input) - sign(ctx.input) * ctx.out),),
    saves=("input", "out"),
)
_i1 = _unary("i1", sc.i1, _i1_grad, saves=("input", "out"))
_i1e = _unary("i1e", sc.i1e, _i1e_grad, saves=("input", "out"))
# NOTE: PyTorch gives bessel_j0/j1 no derivative: their outputs do not require grad.
_bessel_j0 = _unary("bessel_j0", sc.j0, saves=(), differentiable=False)
_bessel_j1 = _unary("bessel_j1", sc.j1, saves=(), differentiable=False)


def i0(input):
    """The modified Bessel function of the first kind of order 0.

    >>> flow.i0(flow.tensor([0.0, 1.0]))
    tensor([1.0000, 1.2661])
    """
    return _apply(_i0, input)


def i0e(input):
    """`exp(-|input|) * i0(input)`, which does not overflow for large inputs."""
    return _apply(_i0e, input)


def i1(input):
    """The modified Bessel function of the first kind of order 1."""
    return _apply(_i1, input)


def i1e(input):
    """`exp(-|input|) * i1(input)`, which does not overflow for large inputs."""
    return _apply(_i1e, input)


def bessel_j0(input):
    """The Bessel function of the first kind of order 0 (not differentiable, as in PyTorch)."""
    return _apply(_bessel_j0, input)


def bessel_j1(input):
    """The Bessel function of the first kind of order 1 (not differentiable, as in PyTorch)."""
    return _apply(_bessel_j1, input)


# -- the normal distribution and erfcx ---------------------------------------------------------
def _normal_density(x):
    return exp(x * x * -0.5) / _SQRT_2PI


def _ndtr_onnx(g, x):
    """(1 + erf(x / sqrt(2))) / 2 (ONNX has no erfc: the far left tail loses digits)."""
    erf = g.op("Erf", g.op("Mul", x, g.tensor(math.sqrt(0.5), x)))
    return g.op("Mul", g.op("Add", erf, g.tensor(1, x)), g.tensor(0.5, x))


_ndtr = _unary(
    "ndtr",
    sc.ndtr,
    lambda ctx, gy: (gy * _normal_density(ctx.input),),
    onnx=_ndtr_onnx,
)
_ndtri = _unary(
    "ndtri",
    sc.ndtri,
    lambda ctx, gy: (gy * exp(ctx.out * ctx.out * 0.5) * _SQRT_2PI,),
    saves=("out",),
)
# NOTE: exp(-x^2/2 - log_ndtr(x)) stays finite where the density and ndtr both underflow.
_log_ndtr = _unary(
    "log_ndtr",
    sc.log_ndtr,
    lambda ctx, gy: (gy * exp(ctx.input * ctx.input * -0.5 - ctx.out) / _SQRT_2PI,),
    saves=("input", "out"),
)
_erfcx = _unary(
    "erfcx",
    sc.erfcx,
    lambda ctx, gy: (gy * (ctx.input * ctx.out * 2 - _2_OVER_SQRT_PI),),
    saves=("input", "out"),
)


def ndtr(input):
    """The standard normal distribution function `P(Z <= input)`."""
    return _apply(_ndtr, input)


def ndtri(input):
    """The inverse of `ndtr` on (0, 1); 0 and 1 give -inf and inf."""
    return _apply(_ndtri, input)


def log_ndtr(input):
    """`log(ndtr(input))`, accurate far into the lower tail."""
    return _apply(_log_ndtr, input)


def erfcx(input):
    """The scaled complementary error function `exp(input**2) * erfc(input)`."""
    return _apply(_erfcx, input)


# -- logit, sinc, entr -------------------------------------------------------------------------
def _logit_kernel(x, *, eps=None):
    if eps is not None:  # NOTE: by comparisons, as PyTorch: a nan eps clamps nothing
        x = np.where(x < eps, eps, np.where(x > 1 - eps, 1 - eps, x))
    return np.log(x / (1 - x))


def _logit_grad(ctx, gy):
    x, eps = ctx.input, ctx.eps
    slope = gy / (x * (1 - x))
    if eps is None:  # outside [0, 1] logit is nan, and so is its slope
        return (where(logical_or(x < 0, x > 1), math.nan, slope),)
    return (where(logical_or(x < eps, x > 1 - eps), 0.0, slope),)


def _sinc_grad(ctx, gy):
    x = ctx.input
    # sinc'(x) = (cos(pi x) - sinc(x)) / x, which is 0 at 0
    return (gy * where(x == 0, 0.0, (cos(x * math.pi) - ctx.out) / _nonzero(x)),)


def _logit_onnx(g, x, *, eps=None):
    dtype = g.meta(x).dtype
    if eps is not None:  # by comparisons, as the kernel: a nan eps clamps nothing
        low, high = g.tensor(eps, dtype), g.tensor(1 - eps, dtype)
        x = g.op("Where", g.op("Less", x, low), low, x)
        x = g.op("Where", g.op("Greater", x, high), high, x)
    return g.op("Log", g.op("Div", x, g.op("Sub", g.tensor(1, dtype), x)))


def _sinc_onnx(g, x):
    """sin(pi x) / (pi x), 1 at 0."""
    pi_x = g.op("Mul", x, g.tensor(math.pi, x))
    zero = g.op("Equal", x, g.tensor(0, x))
    safe = g.op("Where", zero, g.tensor(1, x), pi_x)
    return g.op("Where", zero, g.tensor(1, x), g.op("Div", g.op("Sin", safe), safe))


_logit = _unary(
    "logit",
    _logit_kernel,
    _logit_grad,
    onnx=_logit_onnx,
)
_sinc = _unary(
    "sinc",
    np.sinc,
    _sinc_grad,
    saves=("input", "out"),
    onnx=_sinc_onnx,
)


# NOTE: SciPy's entr is PyTorch's: 0 at 0, -inf below it, nan for nan.
def _entr_onnx(g, x):
    """-x log(x) above 0, 0 at 0, -inf below, nan for nan."""
    zero = g.tensor(0, x)
    positive = g.op("Neg", g.op("Mul", x, g.op("Log", x)))
    below = g.op("Where", g.op("Less", x, zero), g.tensor(-math.inf, x), x)  # x: 0 or nan
    return g.op("Where", g.op("Greater", x, zero), positive, below)


_entr = _unary(
    "entr",
    sc.entr,
    lambda ctx, gy: (gy * -(log(ctx.input) + 1),),
    onnx=_entr_onnx,
)


def logit(input, eps=None):
    """`log(p / (1 - p))`, the inverse of sigmoid; with `eps >= 0`, `input` is first clamped
    to `[eps, 1 - eps]` (and the gradient is 0 outside it).

    >>> flow.logit(flow.tensor([0.25, 0.5]))  # -log(3), 0
    tensor([-1.0986,  0.0000])
    """
    if eps is not None and not isinstance(eps, int | float):
        raise ArgumentError(f"logit: eps must be a number or None, got {type(eps).__name__}")
    # NOTE: PyTorch takes a negative eps as none at all
    return _apply(_logit, input, {"eps": None if eps is None or eps < 0 else float(eps)})


def sinc(input):
    """The normalized sinc function `sin(pi x) / (pi x)`, 1 at 0."""
    return _apply(_sinc, input)


def entr(input):
    """The elementwise entropy term `-input * log(input)`: 0 at 0, -inf for negative inputs."""
    return _apply(_entr, input)


def _polygamma_method(self, n):
    """`x.polygamma(n)`: the tensor comes first."""
    return polygamma(n, self)


# NOTE: the Tensor methods PyTorch has for these, with their in-place forms.
_METHODS = {"lgamma": lgamma, "digamma": digamma, "i0": i0, "logit": logit, "sinc": sinc}
methods(
    **_METHODS,
    **{f"{name}_": inplace(fn, f"{name}_") for name, fn in _METHODS.items()},
    mvlgamma=mvlgamma,
    mvlgamma_=inplace(mvlgamma, "mvlgamma_"),
    polygamma=_polygamma_method,
    polygamma_=inplace(_polygamma_method, "polygamma_"),
    xlog1py=xlog1py,
)
