"""Unary elementwise ops: exponentials and logarithms, roots, trigonometric and hyperbolic
functions, the error function, rounding, clamping, predicates, and the activations PyTorch
exposes at the top level (relu, sigmoid, tanh, selu, celu, threshold, hardshrink, prelu).
The `nn.functional`-only activations live in `activation.py` and build on these.

Kernels of floating-point functions compute float16/bfloat16 in float32 and round once, as
PyTorch's CPU kernels do; ops that only compare and select run in the tensor's own dtype, with
scalar attributes cast to it. Piecewise ops take PyTorch's gradient at their kinks
(relu'(0) = 0, abs'(0) = 0, clamp passes the gradient at its bounds).
"""

from __future__ import annotations

import builtins
import math
from collections import namedtuple

import ml_dtypes
import numpy as np
import scipy.special as sc

from ..framework import dtype as dtypes
from ..framework.dispatch import inplace
from ..framework.errors import DTypeError, ShapeError, TideflowError
from ..framework.tensor import Tensor
from . import _special
from ._onnx_rules import as_bool, nan_extremum, onnx_unary, opset_at_least
from ._rules import (
    B,
    Meta,
    S,
    Signature,
    checked,
    defop,
    dispatch,
    elementwise_meta,
    elementwise_sbp,
    methods,
)
from .binary import where
from .complex import holomorphic, reject_complex, sgn
from .creation import zeros_like
from .reduction import sum as _sum

__all__ = [
    "abs",
    "absolute",
    "neg",
    "negative",
    "exp",
    "exp2",
    "expm1",
    "log",
    "log2",
    "log10",
    "log1p",
    "sqrt",
    "rsqrt",
    "square",
    "reciprocal",
    "sin",
    "cos",
    "tan",
    "asin",
    "acos",
    "atan",
    "arcsin",
    "arccos",
    "arctan",
    "sinh",
    "cosh",
    "tanh",
    "asinh",
    "acosh",
    "atanh",
    "arcsinh",
    "arccosh",
    "arctanh",
    "sigmoid",
    "erf",
    "erfc",
    "erfinv",
    "floor",
    "ceil",
    "round",
    "trunc",
    "fix",
    "frac",
    "sign",
    "clamp",
    "clip",
    "clamp_min",
    "clamp_max",
    "nan_to_num",
    "isnan",
    "isinf",
    "isfinite",
    "logical_not",
    "bitwise_not",
    "relu",
    "selu",
    "celu",
    "threshold",
    "hardshrink",
    "prelu",
    "frexp",
]


_NO_ATTRS: dict = {}
_LN2 = math.log(2.0)
_LN10 = math.log(10.0)
_2_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_SQRT_PI_OVER_2 = math.sqrt(math.pi) / 2.0
# NOTE: SELU's constants (Klambauer et al. 2017) to PyTorch's precision.
_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


# -- dtype rules ----------------------------------------------------------------------------
_HALF = frozenset((np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)))
_FLOATING = frozenset(d.np for d in dtypes.FLOATING)
_INTEGER = frozenset(d.np for d in dtypes.INTEGRAL)
_COMPLEX = frozenset(d.np for d in dtypes.COMPLEX)
_ACCEPTS = {
    "float": (_FLOATING, "a floating point"),
    "number": (_FLOATING | _INTEGER, "a numeric (non-bool, non-complex)"),
    "number_or_complex": (_FLOATING | _INTEGER | _COMPLEX, "a numeric (non-bool)"),
    "integral": (_INTEGER | {np.dtype(np.bool_)}, "an integer or bool"),
}


def check_dtype(op: str, np_dtype, accepts: str) -> None:
    """Raise the op's DTypeError unless `np_dtype` is of the `accepts` kind (see _ACCEPTS)."""
    allowed, what = _ACCEPTS[accepts]
    if np_dtype not in allowed:
        name = dtypes.from_numpy(np_dtype).name
        raise DTypeError(f"{op}: expected {what} tensor, got {name}")


def unary_meta(op: str, accepts: str | None = None, out_dtype=None):
    """Same shape; the input's dtype (or `out_dtype`); rejects dtypes outside `accepts`."""

    def meta(x: Meta, *_, **__) -> Meta:
        if accepts is not None:
            check_dtype(op, x.dtype.np, accepts)
        return Meta(x.shape, out_dtype or x.dtype)

    return meta


# -- kernel wrappers ------------------------------------------------------------------------
def fp_kernel(fn):
    """`fn` as a kernel where float16/bfloat16 compute in float32 and round once: PyTorch's CPU
    kernels do the same, scipy.special has no half loops, and NumPy would promote bfloat16
    against Python scalars. Other dtypes go to `fn` as they are."""

    def kernel(x, **attrs):
        if x.dtype in _HALF:
            return fn(x.astype(np.float32), **attrs).astype(x.dtype)
        return fn(x, **attrs)

    return kernel


def dtype_checked(op: str, accepts: str, fn):
    """`fn` behind the op's dtype check (the dispatcher skips meta on the success path)."""
    allowed = _ACCEPTS[accepts][0]

    def kernel(x, *rest, **attrs):
        if x.dtype not in allowed:
            check_dtype(op, x.dtype, accepts)
        return fn(x, *rest, **attrs)

    return kernel


def _unary(
    name,
    kernel,
    *,
    grad=None,
    saves=(),
    promote=None,
    accepts=None,
    out_dtype=None,
    partial=None,
    differentiable=None,
    scalar=None,
    onnx=None,
):
    return defop(
        name,
        inputs=("input",),
        meta=unary_meta(name, accepts, out_dtype),
        sbp=elementwise_sbp(partial),
        kernels={"cpu": kernel if accepts is None else dtype_checked(name, accepts, kernel)},
        grad=grad,
        saves=saves,
        promote=promote,
        differentiable=differentiable,
        elementwise=True,
        scalar=scalar,
        onnx=onnx,
    )


_SAME = object()


def _math(name, fn, grad, saves, scalar=None, complex_fn=_SAME, onnx=None):
    """A floating-point function; integer and bool inputs give the default float dtype. Its
    scalar rule is the math function of the same name unless `scalar` gives another.

    The function is analytic: complex inputs run `complex_fn` (`fn` by default; None where
    PyTorch does not define it for complex numbers) and take PyTorch's conjugate gradient."""
    if scalar is None:
        scalar = _float_rule(lambda g, x: g.call(name, x))
    real_kernel = fp_kernel(fn)
    on_complex = fn if complex_fn is _SAME else complex_fn

    def kernel(x):
        if x.dtype in _COMPLEX:
            if on_complex is None:
                reject_complex(name, x.dtype)
            return on_complex(x)
        return real_kernel(x)

    return _unary(
        name,
        kernel,
        grad=holomorphic(grad),
        saves=saves,
        promote="float",
        scalar=scalar,
        onnx=onnx,
    )


def _float_rule(rule):
    """`rule` for floating-point computation dtypes only (others stay on NumPy kernels)."""
    return lambda g, *args, **attrs: rule(g, *args, **attrs) if g.floating else None


def _number_rule(rule):
    """`rule` for numbers: bool stays on NumPy kernels."""
    return lambda g, *args, **attrs: None if g.dtype.kind == "b" else rule(g, *args, **attrs)


def zero_where(mask, gy):
    """`gy` with the positions where `mask` holds set to 0: the gradient through the flat pieces
    of a piecewise op (a select, not a product, so inf/nan in `gy` do not leak through)."""
    return where(mask, 0.0, gy)


def _zero_grad(ctx, gy):
    """Rounding ops and sign are flat almost everywhere: PyTorch's gradient is zeros."""
    return (zeros_like(gy),)


# -- ONNX lowerings shared by several ops ----------------------------------------------------
def _scaled_log(scale: float):
    """log(x) * scale (log2, log10)."""
    return lambda g, x: g.op("Mul", g.op("Log", x), g.tensor(scale, x))


def _trunc_onnx(g, x):
    """ONNX has no Trunc: floor above zero, ceil below."""
    negative = g.op("Less", x, g.tensor(0, x))
    return g.op("Where", negative, g.op("Ceil", x), g.op("Floor", x))


def _whole_or(op_type: str):
    """A rounding op: integers are whole already (a copy)."""
    return lambda g, x: g.op(op_type if g.meta(x).dtype.is_floating_point else "Identity", x)


def _float_test(rule, integers: bool = False):
    """A float predicate; integers are never nan or inf (the answer is `integers`)."""

    def lower(g, x):
        if g.meta(x).dtype.is_floating_point:
            return rule(g, x)
        same = g.op("Equal", x, x)
        return same if integers else g.op("Not", same)

    return lower


def _square_onnx(g, x):
    if g.meta(x).dtype.name == "bool":
        x = g.cast(x, dtypes.int64)  # bool squares as pow(x, 2), with an integer 2
    return g.op("Mul", x, x)


def _round_onnx(g, x, *, decimals=0):
    if not g.meta(x).dtype.is_floating_point:
        return g.op("Identity", x)
    if decimals == 0:
        return g.op("Round", x)
    scale = g.tensor(10.0 ** builtins.abs(decimals), x)
    if decimals > 0:
        return g.op("Div", g.op("Round", g.op("Mul", x, scale)), scale)
    return g.op("Mul", g.op("Round", g.op("Div", x, scale)), scale)


def _clamp_onnx(g, x, lo, hi):
    if lo is not None:
        x = nan_extremum(g, "Max", x, g.tensor(lo, g.out[0].dtype))
    if hi is not None:
        x = nan_extremum(g, "Min", x, g.tensor(hi, g.out[0].dtype))
    return x


def _elu_onnx(g, x, *, alpha, scale, input_scale):
    if scale == 1 and input_scale == 1:
        return g.op("Elu", x, alpha=alpha)
    if input_scale == 1:
        return g.op("Selu", x, alpha=alpha, gamma=scale)
    if scale == 1 and input_scale * alpha == 1:
        return g.op("Celu", x, alpha=alpha)
    exp = g.op("Exp", g.op("Mul", x, g.tensor(input_scale, x)))
    negative = g.op("Mul", g.op("Sub", exp, g.tensor(1, x)), g.tensor(alpha * scale, x))
    positive = g.op("Greater", x, g.tensor(0, x))
    return g.op("Where", positive, g.op("Mul", x, g.tensor(scale, x)), negative)


def _nan_to_num_onnx(g, x, *, nan=0.0, posinf=None, neginf=None):
    dtype = g.meta(x).dtype
    if not dtype.is_floating_point:
        return g.op("Identity", x)
    info = ml_dtypes.finfo(dtype.np)
    out = g.op("Where", g.op("IsNaN", x), g.tensor(nan, x), x)
    high = info.max if posinf is None else posinf
    out = g.op("Where", g.op("IsInf", x, detect_negative=0), g.tensor(high, x), out)
    low = info.min if neginf is None else neginf
    return g.op("Where", g.op("IsInf", x, detect_positive=0), g.tensor(low, x), out)


def _bitwise_not_onnx(g, x):
    if g.meta(x).dtype is dtypes.bool_:
        return g.op("Not", x)
    opset_at_least(g, 18, "bitwise_not of integers")
    return g.op("BitwiseNot", x)


def _sign_onnx(g, x):
    dtype = g.meta(x).dtype
    if dtype is dtypes.bool_:
        return x
    sign = g.op("Sign", x)
    if not dtype.is_floating_point:
        return sign
    # NOTE: (x > 0) - (x < 0), as PyTorch: 0 for nan, where ONNX's Sign gives nan
    return g.op("Where", g.op("IsNaN", x), g.tensor(0, x), sign)


def _prelu_onnx(g, x, w):
    shape = _prelu_weight_shape(len(g.meta(x).shape), math.prod(g.meta(w).shape))
    return g.op("PRelu", x, g.op("Reshape", w, g.ints(shape)))


# -- arithmetic -----------------------------------------------------------------------------
_neg = _unary(
    "neg",
    np.negative,
    grad=lambda ctx, gy: (-gy,),
    accepts="number_or_complex",
    partial="linear",
    scalar=_number_rule(lambda g, x: f"-{x}"),
    onnx=onnx_unary("Neg"),
)


def _abs_meta(x: Meta) -> Meta:
    check_dtype("abs", x.dtype.np, "number_or_complex")
    return Meta(x.shape, dtypes.to_real(x.dtype))  # a complex modulus is real


_abs = defop(
    "abs",
    inputs=("input",),
    meta=_abs_meta,
    sbp=elementwise_sbp(),
    kernels={"cpu": dtype_checked("abs", "number_or_complex", np.abs)},
    grad=lambda ctx, gy: (gy * sgn(ctx.input),),
    saves=("input",),
    elementwise=True,
    scalar=_number_rule(lambda g, x: f"abs({x})"),
    onnx=onnx_unary("Abs"),
)


def _square_kernel(x):
    return np.square(x.astype(np.int64) if x.dtype == np.bool_ else x)


_square = defop(
    "square",
    inputs=("input",),
    # NOTE: square is pow(x, 2): bool promotes with the integer 2 to int64.
    meta=lambda x: Meta(x.shape, dtypes.int64 if x.dtype is dtypes.bool_ else x.dtype),
    sbp=elementwise_sbp(),
    kernels={"cpu": _square_kernel},
    grad=holomorphic(lambda ctx, gy: (gy * ctx.input * 2,)),
    saves=("input",),
    elementwise=True,
    scalar=_number_rule(lambda g, x: f"{x} * {x}"),
    onnx=_square_onnx,
)
_reciprocal = _math(
    "reciprocal",
    np.reciprocal,
    lambda ctx, gy: (-(gy * ctx.out * ctx.out),),
    ("out",),
    _float_rule(lambda g, x: f"{g.c(1)} / {x}"),
    onnx=onnx_unary("Reciprocal"),
)


def neg(input):
    """`-input`, elementwise. Bool tensors are rejected (use `logical_not`)."""
    return dispatch(_neg, (input,), _NO_ATTRS)


def abs(input):
    """`|input|`, elementwise; integer tensors stay integer. The gradient at 0 is 0."""
    return dispatch(_abs, (input,), _NO_ATTRS)


def square(input):
    """`input * input`; integer tensors stay integer and bool gives int64 (like `pow(x, 2)`)."""
    return dispatch(_square, (input,), _NO_ATTRS)


def reciprocal(input):
    """`1 / input`, elementwise; integer and bool inputs give the default float dtype."""
    return dispatch(_reciprocal, (input,), _NO_ATTRS)


negative = neg
absolute = abs


# -- exponentials, logarithms, roots ------------------------------------------------------
_exp = _math("exp", np.exp, lambda ctx, gy: (gy * ctx.out,), ("out",), onnx=onnx_unary("Exp"))
_exp2 = _math(
    "exp2",
    np.exp2,
    lambda ctx, gy: (gy * ctx.out * _LN2,),
    ("out",),
    _float_rule(lambda g, x: f"{g.c(2)} ** {x}"),
    onnx=lambda g, x: g.op("Pow", g.tensor(2, x), x),
)
_expm1 = _math(
    "expm1",
    np.expm1,
    lambda ctx, gy: (gy * (ctx.out + 1),),
    ("out",),
    onnx=lambda g, x: g.op("Sub", g.op("Exp", x), g.tensor(1, x)),
)
_log = _math("log", np.log, lambda ctx, gy: (gy / ctx.input,), ("input",), onnx=onnx_unary("Log"))
_log2 = _math(
    "log2",
    np.log2,
    lambda ctx, gy: (gy / (ctx.input * _LN2),),
    ("input",),
    onnx=_scaled_log(1 / _LN2),
)
_log10 = _math(
    "log10",
    np.log10,
    lambda ctx, gy: (gy / (ctx.input * _LN10),),
    ("input",),
    onnx=_scaled_log(1 / _LN10),
)
_log1p = _math(
    "log1p",
    np.log1p,
    lambda ctx, gy: (gy / (ctx.input + 1),),
    ("input",),
    onnx=lambda g, x: g.op("Log", g.op("Add", x, g.tensor(1, x))),
)
_sqrt = _math(
    "sqrt", np.sqrt, lambda ctx, gy: (gy / (ctx.out * 2),), ("out",), onnx=onnx_unary("Sqrt")
)
_rsqrt = _math(
    "rsqrt",
    lambda x: np.reciprocal(np.sqrt(x)),
    lambda ctx, gy: (gy * ctx.out * ctx.out * ctx.out * -0.5,),
    ("out",),
    _float_rule(lambda g, x: f"{g.c(1)} / {g.call('sqrt', x)}"),
    onnx=lambda g, x: g.op("Reciprocal", g.op("Sqrt", x)),
)


def exp(input):
    """`e ** input`, elementwise. Integer inputs give the default float dtype."""
    return dispatch(_exp, (input,), _NO_ATTRS)


def exp2(input):
    """`2 ** input`, elementwise."""
    return dispatch(_exp2, (input,), _NO_ATTRS)


def expm1(input):
    """`exp(input) - 1`, accurate for small `input`."""
    return dispatch(_expm1, (input,), _NO_ATTRS)


def log(input):
    """Natural logarithm; `log(0) = -inf`, negative inputs give nan."""
    return dispatch(_log, (input,), _NO_ATTRS)


def log2(input):
    """Base-2 logarithm."""
    return dispatch(_log2, (input,), _NO_ATTRS)


def log10(input):
    """Base-10 logarithm."""
    return dispatch(_log10, (input,), _NO_ATTRS)


def log1p(input):
    """`log(1 + input)`, accurate for small `input`."""
    return dispatch(_log1p, (input,), _NO_ATTRS)


def sqrt(input):
    """Square root; negative inputs give nan."""
    return dispatch(_sqrt, (input,), _NO_ATTRS)


def rsqrt(input):
    """`1 / sqrt(input)`."""
    return dispatch(_rsqrt, (input,), _NO_ATTRS)


# -- trigonometric and hyperbolic ------------------------------------------------------------
def _one_minus_square(x):
    return 1 - x * x


_sin = _math(
    "sin", np.sin, lambda ctx, gy: (gy * cos(ctx.input),), ("input",), onnx=onnx_unary("Sin")
)
_cos = _math(
    "cos", np.cos, lambda ctx, gy: (-(gy * sin(ctx.input)),), ("input",), onnx=onnx_unary("Cos")
)
_tan = _math(
    "tan", np.tan, lambda ctx, gy: (gy * (ctx.out * ctx.out + 1),), ("out",), onnx=onnx_unary("Tan")
)
_asin = _math(
    "asin",
    np.arcsin,
    lambda ctx, gy: (gy * rsqrt(_one_minus_square(ctx.input)),),
    ("input",),
    onnx=onnx_unary("Asin"),
)
_acos = _math(
    "acos",
    np.arccos,
    lambda ctx, gy: (-(gy * rsqrt(_one_minus_square(ctx.input))),),
    ("input",),
    onnx=onnx_unary("Acos"),
)
_atan = _math(
    "atan",
    np.arctan,
    lambda ctx, gy: (gy / (ctx.input * ctx.input + 1),),
    ("input",),
    onnx=onnx_unary("Atan"),
)
_sinh = _math(
    "sinh", np.sinh, lambda ctx, gy: (gy * cosh(ctx.input),), ("input",), onnx=onnx_unary("Sinh")
)
_cosh = _math(
    "cosh", np.cosh, lambda ctx, gy: (gy * sinh(ctx.input),), ("input",), onnx=onnx_unary("Cosh")
)
_tanh = _math(
    "tanh",
    np.tanh,
    lambda ctx, gy: (gy * _one_minus_square(ctx.out),),
    ("out",),
    onnx=onnx_unary("Tanh"),
)
_asinh = _math(
    "asinh",
    np.arcsinh,
    lambda ctx, gy: (gy * rsqrt(ctx.input * ctx.input + 1),),
    ("input",),
    onnx=onnx_unary("Asinh"),
)
_acosh = _math(
    "acosh",
    np.arccosh,
    lambda ctx, gy: (gy * rsqrt(ctx.input * ctx.input - 1),),
    ("input",),
    onnx=onnx_unary("Acosh"),
)
_atanh = _math(
    "atanh",
    np.arctanh,
    lambda ctx, gy: (gy / _one_minus_square(ctx.input),),
    ("input",),
    onnx=onnx_unary("Atanh"),
)


def sin(input):
    """Sine (radians)."""
    return dispatch(_sin, (input,), _NO_ATTRS)


def cos(input):
    """Cosine (radians)."""
    return dispatch(_cos, (input,), _NO_ATTRS)


def tan(input):
    """Tangent (radians)."""
    return dispatch(_tan, (input,), _NO_ATTRS)


def asin(input):
    """Arcsine; inputs outside [-1, 1] give nan."""
    return dispatch(_asin, (input,), _NO_ATTRS)


def acos(input):
    """Arccosine; inputs outside [-1, 1] give nan."""
    return dispatch(_acos, (input,), _NO_ATTRS)


def atan(input):
    """Arctangent, in (-pi/2, pi/2)."""
    return dispatch(_atan, (input,), _NO_ATTRS)


def sinh(input):
    """Hyperbolic sine."""
    return dispatch(_sinh, (input,), _NO_ATTRS)


def cosh(input):
    """Hyperbolic cosine."""
    return dispatch(_cosh, (input,), _NO_ATTRS)


def tanh(input):
    """Hyperbolic tangent, in (-1, 1)."""
    return dispatch(_tanh, (input,), _NO_ATTRS)


def asinh(input):
    """Inverse hyperbolic sine."""
    return dispatch(_asinh, (input,), _NO_ATTRS)


def acosh(input):
    """Inverse hyperbolic cosine; inputs below 1 give nan."""
    return dispatch(_acosh, (input,), _NO_ATTRS)


def atanh(input):
    """Inverse hyperbolic tangent; +-1 give +-inf, inputs outside [-1, 1] give nan."""
    return dispatch(_atanh, (input,), _NO_ATTRS)


arcsin = asin
arccos = acos
arctan = atan
arcsinh = asinh
arccosh = acosh
arctanh = atanh


# -- sigmoid and the error function ------------------------------------------------------------
# NOTE: scipy's expit is exp(-|x|)-based: no overflow for large |x|, exact 0/1 in the limits.
_sigmoid = _math(
    "sigmoid",
    sc.expit,
    lambda ctx, gy: (gy * ctx.out * (1 - ctx.out),),
    ("out",),
    _float_rule(lambda g, x: f"{g.c(1)} / ({g.c(1)} + {g.call('exp', f'-{x}')})"),
    complex_fn=lambda z: 1 / (1 + np.exp(-z)),  # expit has no complex loop
    onnx=onnx_unary("Sigmoid"),
)
_erf = _math(
    "erf",
    _special.erf,
    lambda ctx, gy: (gy * exp(-ctx.input * ctx.input) * _2_OVER_SQRT_PI,),
    ("input",),
    complex_fn=None,
    onnx=onnx_unary("Erf"),
)
_erfc = _math(
    "erfc",
    _special.erfc,
    lambda ctx, gy: (gy * exp(-ctx.input * ctx.input) * -_2_OVER_SQRT_PI,),
    ("input",),
    complex_fn=None,
    onnx=lambda g, x: g.op("Sub", g.tensor(1, x), g.op("Erf", x)),
)
_erfinv = _math(
    "erfinv",
    sc.erfinv,
    lambda ctx, gy: (gy * exp(ctx.out * ctx.out) * _SQRT_PI_OVER_2,),
    ("out",),
    lambda g, x: None,  # no scalar erfinv in numba
    complex_fn=None,
)


def sigmoid(input):
    """The logistic function `1 / (1 + exp(-input))`, computed without overflow."""
    return dispatch(_sigmoid, (input,), _NO_ATTRS)


def erf(input):
    """The error function `2/sqrt(pi) * integral_0^x exp(-t**2) dt`."""
    return dispatch(_erf, (input,), _NO_ATTRS)


def erfc(input):
    """The complementary error function `1 - erf(input)`, accurate for large inputs."""
    return dispatch(_erfc, (input,), _NO_ATTRS)


def erfinv(input):
    """The inverse error function on (-1, 1); +-1 give +-inf."""
    return dispatch(_erfinv, (input,), _NO_ATTRS)


# -- rounding ---------------------------------------------------------------------------------
def _rounding(fn):
    """Integers are already whole: they come back as a copy of the same dtype."""

    def kernel(x):
        return x.copy() if x.dtype in _INTEGER else fn(x)

    return kernel


def _round_decimals(x, *, decimals):
    # NOTE: PyTorch's formula, not numpy.round's: scale by 10**|decimals|, round half to even.
    scale = 10.0 ** builtins.abs(decimals)
    return np.rint(x * scale) / scale if decimals > 0 else np.rint(x / scale) * scale


_round_decimals_kernel = fp_kernel(_round_decimals)


def _round_kernel(x, *, decimals=0):
    if decimals == 0:
        return x.copy() if x.dtype in _INTEGER else np.rint(x)
    if x.dtype not in _FLOATING:
        raise TypeError("round with decimals needs a floating point input")
    return _round_decimals_kernel(x, decimals=decimals)


def _round_meta(x: Meta, *, decimals=0) -> Meta:
    check_dtype("round", x.dtype.np, "number" if decimals == 0 else "float")
    return Meta(x.shape, x.dtype)


def _sign_kernel(x):
    if x.dtype in _COMPLEX:
        raise DTypeError(
            f"sign: not defined for complex tensors (got {dtypes.from_numpy(x.dtype).name}); "
            "use sgn, z / |z|"
        )
    if x.dtype == np.bool_:
        return x.copy()
    if x.dtype in _INTEGER:
        return np.sign(x)
    # NOTE: PyTorch's sign is (x > 0) - (x < 0): 0 for nan, where NumPy's sign gives nan.
    return (x > 0).astype(x.dtype) - (x < 0).astype(x.dtype)


_floor = _unary(
    "floor",
    _rounding(np.floor),
    grad=_zero_grad,
    accepts="number",
    scalar=lambda g, x: f"np.floor({x})" if g.floating else x,
    onnx=_whole_or("Floor"),
)
_ceil = _unary(
    "ceil",
    _rounding(np.ceil),
    grad=_zero_grad,
    accepts="number",
    scalar=lambda g, x: f"np.ceil({x})" if g.floating else x,
    onnx=_whole_or("Ceil"),
)
_trunc = _unary(
    "trunc",
    _rounding(np.trunc),
    grad=_zero_grad,
    accepts="number",
    scalar=lambda g, x: f"np.trunc({x})" if g.floating else x,
    onnx=lambda g, x: _trunc_onnx(g, x) if g.meta(x).dtype.is_floating_point else x,
)
_round = defop(
    "round",
    inputs=("input",),
    meta=_round_meta,
    sbp=elementwise_sbp(),
    kernels={"cpu": dtype_checked("round", "number", _round_kernel)},
    grad=_zero_grad,
    elementwise=True,
    onnx=_round_onnx,
)
_sign = _unary(
    "sign",
    _sign_kernel,
    grad=_zero_grad,
    scalar=lambda g, x: (
        x
        if g.dtype.kind == "b"
        else f"({g.c(1)} if {x} > {g.c(0)} else ({g.c(-1)} if {x} < {g.c(0)} else {g.c(0)}))"
    ),
    onnx=_sign_onnx,
)
_frac = _unary(
    "frac",
    lambda x: x - np.trunc(x),
    grad=lambda ctx, gy: (gy,),
    accepts="float",
    scalar=_float_rule(lambda g, x: f"{x} - np.trunc({x})"),
    onnx=lambda g, x: g.op("Sub", x, _trunc_onnx(g, x)),
)


def floor(input):
    """The largest integer not greater than each element; integer tensors are returned as is
    (a copy). The gradient is zero."""
    return dispatch(_floor, (input,), _NO_ATTRS)


def ceil(input):
    """The smallest integer not less than each element; integer tensors are copied."""
    return dispatch(_ceil, (input,), _NO_ATTRS)


def trunc(input):
    """Rounds toward zero; integer tensors are copied."""
    return dispatch(_trunc, (input,), _NO_ATTRS)


def round(input, *, decimals=0):
    """Rounds half to even (2.5 -> 2, like PyTorch), to `decimals` decimal places (negative:
    to tens, hundreds, ...). Integer tensors are copied when `decimals=0`."""
    return dispatch(_round, (input,), {"decimals": int(decimals)})


def frac(input):
    """The fractional part `input - trunc(input)`, with the sign of `input`."""
    return dispatch(_frac, (input,), _NO_ATTRS)


def sign(input):
    """-1, 0 or 1 by the sign of each element (0 for nan, as in PyTorch); bool stays bool."""
    return dispatch(_sign, (input,), _NO_ATTRS)


fix = trunc


# -- clamp ------------------------------------------------------------------------------------
def _clamp_kernel(x, lo, hi):
    reject_complex("clamp", x.dtype)
    # NOTE: scalar bounds take the tensor's (promoted) dtype: NumPy would promote bfloat16.
    if lo is not None:
        x = np.maximum(x, lo if isinstance(lo, np.ndarray) else np.asarray(lo, x.dtype))
    if hi is not None:
        x = np.minimum(x, hi if isinstance(hi, np.ndarray) else np.asarray(hi, x.dtype))
    return x


def _clamp_scalar(g, x, lo, hi):
    if lo is not None:
        x = g.max(x, lo)
    return x if hi is None else g.min(x, hi)


def _clamp_grad(ctx, gy):
    """PyTorch's rule: the input gets `gy` inside [min, max] (bounds included); a tensor bound
    gets it where it is the value taken (min only when min <= max: past it, max wins)."""
    x, lo, hi = ctx.input, ctx.min, ctx.max
    need_x, need_lo, need_hi = ctx.needs_input_grad
    gx = glo = ghi = None
    if need_x:
        if lo is None:
            inside = x <= hi
        elif hi is None:
            inside = x >= lo
        else:
            inside = (x >= lo) & (x <= hi)
        gx = where(inside, gy, 0.0)
    if need_lo:
        taken = x < lo if hi is None else (x < lo) & (lo <= hi)
        glo = where(taken, gy, 0.0)
    if need_hi:
        taken = x > hi if lo is None else (x > hi) | (hi < lo)
        ghi = where(taken, gy, 0.0)
    return gx, glo, ghi


_clamp = defop(
    "clamp",
    inputs=("input", "min", "max"),
    optional=("min", "max"),
    meta=elementwise_meta("clamp"),
    sbp=elementwise_sbp(),
    kernels={"cpu": _clamp_kernel},
    grad=_clamp_grad,
    saves=("input", "min", "max"),
    promote="common",
    elementwise=True,
    scalar=_number_rule(_clamp_scalar),
    onnx=_clamp_onnx,
)


def clamp(input, min=None, max=None):
    """Limits each element to [min, max]; `min`/`max` are numbers or tensors (broadcast), and
    either may be None. Where min > max the result is max. The dtype is the promoted type of
    the input and the bounds (an integer tensor clamped to 0.5 is float)."""
    if min is None and max is None:
        raise TideflowError("clamp: at least one of 'min' or 'max' must not be None")
    return dispatch(_clamp, (input, min, max), _NO_ATTRS)


@checked
def clamp_min(input: Tensor, min):
    """`clamp(input, min=min)`."""
    return clamp(input, min=min)


@checked
def clamp_max(input: Tensor, max):
    """`clamp(input, max=max)`."""
    return clamp(input, max=max)


clip = clamp


# -- nan_to_num and predicates ----------------------------------------------------------------
def _nan_to_num_kernel(x, *, nan=0.0, posinf=None, neginf=None):
    if x.dtype not in _FLOATING:
        return x.copy()
    # NOTE: replacements are cast to the tensor's dtype (1e10 is inf in float16, as in
    # PyTorch); the defaults are its largest finite values. NumPy's nan_to_num skips bfloat16.
    info = ml_dtypes.finfo(x.dtype)
    nan = np.asarray(nan, x.dtype)
    posinf = np.asarray(info.max if posinf is None else posinf, x.dtype)
    neginf = np.asarray(info.min if neginf is None else neginf, x.dtype)
    out = np.where(np.isnan(x), nan, x)
    out = np.where(x == np.inf, posinf, out)
    return np.where(x == -np.inf, neginf, out)


def _nan_to_num_scalar(g, x, *, nan=0.0, posinf=None, neginf=None):
    if not g.floating:
        return x
    info = np.finfo(g.dtype)
    posinf = g.c(info.max if posinf is None else posinf)
    neginf = g.c(info.min if neginf is None else neginf)
    inf = g.c(math.inf)
    return (
        f"({g.c(nan)} if {x} != {x} else ({posinf} if {x} == {inf} else "
        f"({neginf} if {x} == -{inf} else {x})))"
    )


def _predicate(name, kernel, rule, onnx):
    return _unary(
        name,
        kernel,
        out_dtype=dtypes.bool_,
        differentiable=False,
        scalar=lambda g, x: rule(g, x) if g.floating else g.c(name == "isfinite", np.bool_),
        onnx=onnx,
    )


_nan_to_num = _unary(
    "nan_to_num",
    _nan_to_num_kernel,
    grad=lambda ctx, gy: (gy * isfinite(ctx.input),),
    saves=("input",),
    scalar=_nan_to_num_scalar,
    onnx=_nan_to_num_onnx,
)
_isnan = _predicate(
    "isnan", np.isnan, lambda g, x: f"{x} != {x}", _float_test(lambda g, x: g.op("IsNaN", x))
)
_isinf = _predicate(
    "isinf",
    np.isinf,
    lambda g, x: f"abs({x}) == {g.c(math.inf)}",
    _float_test(lambda g, x: g.op("IsInf", x)),
)
_isfinite = _predicate(
    "isfinite",
    np.isfinite,
    lambda g, x: f"abs({x}) < {g.c(math.inf)}",
    _float_test(lambda g, x: g.op("Not", g.op("Or", g.op("IsNaN", x), g.op("IsInf", x))), True),
)
_logical_not = _unary(
    "logical_not",
    np.logical_not,
    out_dtype=dtypes.bool_,
    differentiable=False,
    scalar=lambda g, x: f"not {g.truth(x, 0)}",
    onnx=lambda g, x: g.op("Not", as_bool(g, x)),
)
_bitwise_not = _unary(
    "bitwise_not",
    np.invert,
    accepts="integral",
    differentiable=False,
    onnx=_bitwise_not_onnx,
)


def nan_to_num(input, nan=0.0, posinf=None, neginf=None):
    """Replaces nan with `nan`, +inf with `posinf` and -inf with `neginf` (by default the
    largest and smallest finite values of the dtype). Integer tensors are copied."""
    # NOTE: PyTorch reads nan=None as 0.0 (the kernel would leave NaN in place)
    attrs = {"nan": 0.0 if nan is None else nan, "posinf": posinf, "neginf": neginf}
    return dispatch(_nan_to_num, (input,), attrs)


def isnan(input):
    """A bool tensor: True where `input` is nan."""
    return dispatch(_isnan, (input,), _NO_ATTRS)


def isinf(input):
    """A bool tensor: True where `input` is +inf or -inf."""
    return dispatch(_isinf, (input,), _NO_ATTRS)


def isfinite(input):
    """A bool tensor: True where `input` is neither inf nor nan (always for integers)."""
    return dispatch(_isfinite, (input,), _NO_ATTRS)


@checked
def logical_not(input: Tensor):
    """A bool tensor: True where `input` is zero (False)."""
    return dispatch(_logical_not, (input,), _NO_ATTRS)


def bitwise_not(input):
    """`~input` for integer tensors; logical not for bool tensors."""
    return dispatch(_bitwise_not, (input,), _NO_ATTRS)


# -- activations PyTorch has at the top level --------------------------------------------------
_relu = _unary(
    "relu",
    # NOTE: a zero of the tensor's dtype: NumPy would promote bfloat16 against a Python 0.
    lambda x: np.maximum(x, np.zeros((), x.dtype)),
    grad=lambda ctx, gy: (zero_where(ctx.out <= 0, gy),),
    saves=("out",),
    accepts="number",
    scalar=_number_rule(lambda g, x: g.max(x, g.c(0))),
    onnx=onnx_unary("Relu"),
)


def _elu_kernel(x, *, alpha, scale, input_scale):
    negative = np.expm1(np.minimum(x, 0) * input_scale) * (alpha * scale)
    return np.where(x > 0, x * scale, negative)


def _elu_grad(ctx, gy):
    # NOTE: exp of min(x, 0): the branch where() discards must stay finite, or its zero
    # gradient times inf would make nan in the second derivative. Not (out + alpha*scale):
    # that cancels to 0 for x << 0 in float32.
    x = ctx.input
    slope = ctx.alpha * ctx.scale * ctx.input_scale
    negative = gy * exp(clamp_max(x, 0) * ctx.input_scale) * slope
    return (where(x > 0, gy * ctx.scale, negative),)


# NOTE: elu, selu and celu are one op, as in PyTorch: scale * elu(x * input_scale, alpha).
def _elu_scalar(g, x, *, alpha, scale, input_scale):
    negative = (
        f"{g.call('expm1', f'{g.min(x, g.c(0))} * {g.c(input_scale)}')} * {g.c(alpha * scale)}"
    )
    return f"({x} * {g.c(scale)} if {x} > {g.c(0)} else {negative})"


_elu = _unary(
    "elu",
    fp_kernel(_elu_kernel),
    grad=_elu_grad,
    saves=("input",),
    accepts="float",
    scalar=_float_rule(_elu_scalar),
    onnx=_elu_onnx,
)


def elu_call(input, alpha: float, scale: float, input_scale: float):
    """`scale * (x if x > 0 else alpha * (exp(x * input_scale) - 1))` (shared with F.elu)."""
    attrs = {"alpha": float(alpha), "scale": float(scale), "input_scale": float(input_scale)}
    return dispatch(_elu, (input,), attrs)


def relu(input):
    """`max(input, 0)`, elementwise; integer tensors stay integer. The gradient at 0 is 0."""
    return dispatch(_relu, (input,), _NO_ATTRS)


@checked
def selu(input: Tensor):
    """Scaled ELU with the self-normalizing constants (alpha ~ 1.6733, scale ~ 1.0507)."""
    return elu_call(input, _SELU_ALPHA, _SELU_SCALE, 1.0)


@checked
def celu(input: Tensor, alpha=1.0):
    """`max(0, x) + min(0, alpha * (exp(x / alpha) - 1))`; alpha must not be 0."""
    if alpha == 0:
        raise TideflowError("celu: alpha must not be 0 (the input is divided by it)")
    return elu_call(input, alpha, 1.0, 1.0 / alpha)


def _threshold_kernel(x, *, threshold, value):
    # NOTE: PyTorch tests `x <= threshold`: nan is not replaced.
    return np.where(x <= np.asarray(threshold, x.dtype), np.asarray(value, x.dtype), x)


_threshold = _unary(
    "threshold",
    _threshold_kernel,
    grad=lambda ctx, gy: (zero_where(ctx.input <= ctx.threshold, gy),),
    saves=("input",),
    accepts="number",
    scalar=_number_rule(
        lambda g, x, *, threshold, value: f"({g.c(value)} if {x} <= {g.c(threshold)} else {x})"
    ),
    onnx=lambda g, x, *, threshold, value: g.op(
        "Where", g.op("LessOrEqual", x, g.tensor(threshold, x)), g.tensor(value, x), x
    ),
)


def threshold(input, threshold, value):
    """`input` where it is greater than `threshold`, else `value`."""
    return dispatch(_threshold, (input,), {"threshold": threshold, "value": value})


def _shrunk(x, lambd):
    """Where hardshrink and softshrink give 0: x in [-lambd, lambd]."""
    return (x >= -lambd) & (x <= lambd)


def _hardshrink_kernel(x, *, lambd):
    return np.where(_shrunk(x, np.asarray(lambd, x.dtype)), np.zeros((), x.dtype), x)


_hardshrink = _unary(
    "hardshrink",
    _hardshrink_kernel,
    grad=lambda ctx, gy: (zero_where(_shrunk(ctx.input, ctx.lambd), gy),),
    saves=("input",),
    accepts="float",
    scalar=_float_rule(
        lambda g, x, *, lambd: (
            f"({g.c(0)} if ({x} >= {g.c(-lambd)}) & ({x} <= {g.c(lambd)}) else {x})"
        )
    ),
    onnx=lambda g, x, *, lambd: g.op("Shrink", x, lambd=lambd),
)


def hardshrink(input, lambd=0.5):
    """`input` where `|input| > lambd`, else 0."""
    return dispatch(_hardshrink, (input,), {"lambd": float(lambd)})


# -- prelu --------------------------------------------------------------------------------------
def _prelu_weight_shape(x_ndim: int, w_numel: int) -> tuple:
    """The weight reshaped to broadcast along the channel dim (dim 1), or a single slope."""
    if w_numel == 1:
        return ()
    return (w_numel,) + (1,) * (x_ndim - 2)


def _prelu_meta(x: Meta, w: Meta) -> Meta:
    check_dtype("prelu", x.dtype.np, "float")
    if w.dtype is not x.dtype:
        raise DTypeError(
            f"prelu: the weight's dtype {w.dtype.name} must match the input's {x.dtype.name}"
        )
    if len(w.shape) > 1:
        raise ShapeError(
            f"prelu: the weight must be a scalar or 1-d tensor, got shape {list(w.shape)}"
        )
    numel = int(np.prod(w.shape, dtype=np.int64))
    if numel != 1:
        if len(x.shape) == 0:
            raise ShapeError(f"prelu: a 0-d input takes a single weight, got {numel}")
        channels = x.shape[1] if len(x.shape) >= 2 else 1
        if numel != channels:
            raise ShapeError(
                f"prelu: the weight has {numel} elements but the input of shape "
                f"{list(x.shape)} has {channels} channels (dim 1)"
            )
    return Meta(x.shape, x.dtype)


def _prelu_kernel(x, w):
    channels = x.shape[1] if x.ndim >= 2 else 1
    if x.dtype not in _FLOATING or w.dtype != x.dtype or w.ndim > 1 or w.size not in (1, channels):
        raise ValueError("invalid prelu operands")  # the meta rule names the problem
    slope = w.reshape(_prelu_weight_shape(x.ndim, w.size))
    return np.where(x > 0, x, x * slope)


def _prelu_sbp(x: Meta, w: Meta) -> list[Signature]:
    """Split any input axis; the channel axis (1) splits the per-channel weight along with it."""
    sigs = [Signature((B, B), (B,))]
    per_channel = int(np.prod(w.shape, dtype=np.int64)) != 1
    for axis in range(len(x.shape)):
        if axis == 1 and per_channel:
            sigs.append(Signature((S(1), S(0)), (S(1),)))
        else:
            sigs.append(Signature((S(axis), B), (S(axis),)))
    return sigs


def _prelu_grad(ctx, gy):
    x, w = ctx.input, ctx.weight
    need_x, need_w = ctx.needs_input_grad
    slope = w.reshape(_prelu_weight_shape(x.ndim, w.numel()))
    positive = x > 0
    gx = where(positive, gy, gy * slope) if need_x else None
    gw = None
    if need_w:
        per_element = zero_where(positive, gy * x)
        if w.numel() == 1:
            gw = _sum(per_element).reshape(tuple(w.shape))
        else:
            gw = _sum(per_element, [d for d in range(x.ndim) if d != 1])
    return gx, gw


_prelu = defop(
    "prelu",
    inputs=("input", "weight"),
    meta=_prelu_meta,
    sbp=_prelu_sbp,
    kernels={"cpu": _prelu_kernel},
    grad=_prelu_grad,
    saves=("input", "weight"),
    onnx=_prelu_onnx,
)


def prelu(input, weight):
    """`input` where positive, else `weight * input`; `weight` is one slope or one per channel
    (dim 1 of the input), as in `nn.PReLU`."""
    return dispatch(_prelu, (input, weight), _NO_ATTRS)


# -- frexp ----------------------------------------------------------------------------------
_FrexpResult = namedtuple("frexp", ["mantissa", "exponent"])


def _frexp_meta(x: Meta) -> tuple[Meta, Meta]:
    check_dtype("frexp", x.dtype.np, "float")
    return Meta(x.shape, x.dtype), Meta(x.shape, dtypes.int32)


def _frexp_kernel(x):
    # halves split exactly in float32 (the mantissa keeps the input's bits); NumPy's frexp
    # has no bfloat16 loop
    mantissa, exponent = np.frexp(x.astype(np.float32) if x.dtype in _HALF else x)
    return mantissa.astype(x.dtype, copy=False), exponent.astype(np.int32, copy=False)


def _frexp_sbp(x: Meta) -> list[Signature]:
    """elementwise_sbp's layouts, for both outputs."""
    return [Signature((B,), (B, B))] + [
        Signature((S(axis),), (S(axis), S(axis))) for axis in range(len(x.shape))
    ]


def _frexp_grad(ctx, g_mantissa, _g_exponent):
    # mantissa = x / 2**exponent, the exponent piecewise constant; 2**exponent in float32 at
    # least (a half would overflow from 2**16)
    wide = dtypes.float64 if g_mantissa.dtype is dtypes.float64 else dtypes.float32
    return (g_mantissa / exp2(ctx.out1.to(wide)),)


_frexp = defop(
    "frexp",
    inputs=("input",),
    meta=_frexp_meta,
    sbp=_frexp_sbp,
    kernels={"cpu": dtype_checked("frexp", "float", _frexp_kernel)},
    grad=_frexp_grad,
    saves=("out1",),
    n_out=2,
)


def frexp(input):
    """Splits `input` into a mantissa in (-1, -0.5] or [0.5, 1) (0, inf and nan as they are)
    and an int32 exponent, `input = mantissa * 2**exponent`. Floating point inputs only.

    >>> flow.frexp(flow.tensor([8.0, -3.5]))
    frexp(mantissa=tensor([ 0.5000, -0.8750]), exponent=tensor([4, 2], dtype=tideflow.int32))
    """
    return _FrexpResult(*dispatch(_frexp, (input,), _NO_ATTRS))


# -- Tensor methods -----------------------------------------------------------------------------
def _methods_with_inplace(fns: dict) -> None:
    """Bind `x.name(...)` and `x.name_(...)` for each op."""
    bound = {}
    for name, fn in fns.items():
        bound[name] = fn
        bound[name + "_"] = inplace(fn, name + "_")
    methods(**bound)


_methods_with_inplace(
    {
        "abs": abs,
        "absolute": abs,
        "neg": neg,
        "negative": neg,
        "exp": exp,
        "exp2": exp2,
        "expm1": expm1,
        "log": log,
        "log2": log2,
        "log10": log10,
        "log1p": log1p,
        "sqrt": sqrt,
        "rsqrt": rsqrt,
        "square": square,
        "reciprocal": reciprocal,
        "sin": sin,
        "cos": cos,
        "tan": tan,
        "asin": asin,
        "acos": acos,
        "atan": atan,
        "arcsin": asin,
        "arccos": acos,
        "arctan": atan,
        "sinh": sinh,
        "cosh": cosh,
        "tanh": tanh,
        "asinh": asinh,
        "acosh": acosh,
        "atanh": atanh,
        "arcsinh": asinh,
        "arccosh": acosh,
        "arctanh": atanh,
        "sigmoid": sigmoid,
        "erf": erf,
        "erfc": erfc,
        "erfinv": erfinv,
        "floor": floor,
        "ceil": ceil,
        "round": round,
        "trunc": trunc,
        "fix": trunc,
        "frac": frac,
        "sign": sign,
        "clamp": clamp,
        "clip": clamp,
        "clamp_min": clamp_min,
        "clamp_max": clamp_max,
        "nan_to_num": nan_to_num,
        "logical_not": logical_not,
        "bitwise_not": bitwise_not,
        "relu": relu,
    },
)
methods(
    frexp=frexp,
    isnan=isnan,
    isinf=isinf,
    isfinite=isfinite,
    hardshrink=hardshrink,
    prelu=prelu,
    __neg__=neg,
    __abs__=abs,
    __invert__=bitwise_not,
)
