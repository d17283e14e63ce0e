"""Activation functions with their `torch.nn.functional` signatures.

The activations PyTorch also has at the top level (relu, sigmoid, tanh, selu, celu, threshold,
hardshrink, prelu) are ops of `unary.py`; this module defines the others and gives every one of
them its `nn.functional` form (`inplace=` where PyTorch has it, and the `F.relu_`-style
in-place functions). Ops here follow `unary.py`'s conventions: float16/bfloat16 compute in
float32, PyTorch's gradients at the kinks, numerically stable forms for large |x|.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.special as sc

from ..framework.dispatch import inplace as inplace_method
from ..framework.errors import DTypeError, Rejected, ShapeError, TideflowError
from ..framework.tensor import Tensor
from . import _special, creation
from ._onnx_rules import onnx_unary
from ._rules import (
    B,
    Meta,
    P,
    Signature,
    checked,
    defop,
    dispatch,
    elementwise_sbp,
    halves_in_float32,
    normalize_dim,
)
from .binary import where
from .unary import (
    abs,
    check_dtype,
    dtype_checked,
    elu_call,
    exp,
    fp_kernel,
    hardshrink,
    prelu,
    sigmoid,
    tanh,
    unary_meta,
    zero_where,
)
from .unary import celu as _celu
from .unary import relu as _relu
from .unary import selu as _selu
from .unary import threshold as _threshold

__all__ = [
    "relu",
    "relu_",
    "relu6",
    "leaky_relu",
    "leaky_relu_",
    "elu",
    "elu_",
    "selu",
    "selu_",
    "celu",
    "celu_",
    "gelu",
    "silu",
    "mish",
    "softplus",
    "softsign",
    "hardtanh",
    "hardtanh_",
    "hardsigmoid",
    "hardswish",
    "logsigmoid",
    "sigmoid",
    "tanh",
    "tanhshrink",
    "softshrink",
    "hardshrink",
    "threshold",
    "threshold_",
    "prelu",
    "glu",
    "rrelu",
    "rrelu_",
]

_NO_ATTRS: dict = {}
_SQRT1_2 = math.sqrt(0.5)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_GELU_TANH_C = 0.044715


def _activation(
    name, kernel, grad, *, saves=("input",), accepts="float", exact=False, scalar=None, onnx=None
):
    """An op of one tensor. Kernels compute float16/bfloat16 in float32 (unary.fp_kernel),
    except `exact` ones, which only compare and select in the tensor's own dtype. `scalar`:
    its rule for generated loops, float dtypes only (`OpDef.scalar`)."""
    wrapped = kernel if exact else fp_kernel(kernel)
    return defop(
        name,
        inputs=("input",),
        meta=unary_meta(name, accepts),
        sbp=elementwise_sbp(),
        kernels={"cpu": dtype_checked(name, accepts, wrapped)},
        grad=grad,
        saves=saves,
        elementwise=True,
        scalar=None if scalar is None else _floating(scalar),
        onnx=onnx,
    )


def _floating(rule):
    return lambda g, *args, **attrs: rule(g, *args, **attrs) if g.floating else None


def _softplus_of(g, x: str) -> str:
    """`log(1 + exp(x))` without overflow (NumPy's logaddexp(0, x))."""
    return f"({g.max(x, g.c(0))} + {g.call('log1p', g.call('exp', f'-abs({x})'))})"


# -- ONNX lowerings ------------------------------------------------------------------------------
def _gelu_onnx(g, x, *, approximate):
    if g.opset >= 20:
        return g.op("Gelu", x, approximate=approximate)
    half_x = g.op("Mul", x, g.tensor(0.5, x))
    if approximate == "tanh":
        cube = g.op("Mul", g.op("Mul", x, x), x)
        inner = g.op("Add", x, g.op("Mul", cube, g.tensor(_GELU_TANH_C, x)))
        t = g.op("Tanh", g.op("Mul", inner, g.tensor(_SQRT_2_OVER_PI, x)))
    else:
        t = g.op("Erf", g.op("Mul", x, g.tensor(_SQRT1_2, x)))
    return g.op("Mul", half_x, g.op("Add", t, g.tensor(1, x)))


def _softplus_onnx(g, x, *, beta, threshold):
    scaled = g.op("Mul", x, g.tensor(beta, x))
    soft = g.op("Div", g.op("Softplus", scaled), g.tensor(beta, x))
    return g.op("Where", g.op("Greater", scaled, g.tensor(threshold, x)), x, soft)


def _mish_onnx(g, x):
    if g.opset >= 18:
        return g.op("Mish", x)
    return g.op("Mul", x, g.op("Tanh", g.op("Softplus", x)))


# -- relu family ------------------------------------------------------------------------------
def _hardtanh_kernel(x, *, min_val, max_val):
    # NOTE: bounds in the tensor's dtype: an integer tensor stays integer (-1.0 -> -1).
    return np.minimum(np.maximum(x, np.asarray(min_val, x.dtype)), np.asarray(max_val, x.dtype))


def _hardtanh_grad(ctx, gy):
    # The output is at a bound exactly where the input is at or past it: reading the mask off
    # the output keeps the in-place form (`inplace=True`) free of a copy of the input.
    out = ctx.out
    return (zero_where((out <= ctx.min_val) | (out >= ctx.max_val), gy),)


_hardtanh = _activation(
    "hardtanh",
    _hardtanh_kernel,
    _hardtanh_grad,
    saves=("out",),
    accepts="number",
    exact=True,
    scalar=lambda g, x, *, min_val, max_val: g.min(g.max(x, g.c(min_val)), g.c(max_val)),
    onnx=lambda g, x, *, min_val, max_val: g.op(
        "Clip", x, g.tensor(min_val, x), g.tensor(max_val, x)
    ),
)
_leaky_relu = _activation(
    "leaky_relu",
    lambda x, *, negative_slope: np.where(x > 0, x, x * negative_slope),
    lambda ctx, gy: (where(ctx.input > 0, gy, gy * ctx.negative_slope),),
    scalar=lambda g, x, *, negative_slope: (
        f"({x} if {x} > {g.c(0)} else {x} * {g.c(negative_slope)})"
    ),
    onnx=lambda g, x, *, negative_slope: g.op("LeakyRelu", x, alpha=negative_slope),
)


def relu(input, inplace=False):
    """`max(input, 0)`; the gradient at 0 is 0. Integer tensors stay integer."""
    return relu_(input) if inplace else _relu(input)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    """`input` clamped to [min_val, max_val]; the gradient is zero at and past the bounds."""
    if min_val > max_val:
        raise TideflowError(
            f"hardtanh: min_val ({min_val}) cannot be greater than max_val ({max_val})"
        )
    if inplace:
        return hardtanh_(input, min_val, max_val)
    return dispatch(_hardtanh, (input,), {"min_val": min_val, "max_val": max_val})


@checked
def relu6(input: Tensor, inplace=False):
    """`min(max(input, 0), 6)` (= `hardtanh(input, 0, 6)`)."""
    return hardtanh(input, 0.0, 6.0, inplace)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    """`input` where positive, else `negative_slope * input`."""
    if inplace:
        return leaky_relu_(input, negative_slope)
    return dispatch(_leaky_relu, (input,), {"negative_slope": float(negative_slope)})


def threshold(input, threshold, value, inplace=False):
    """`input` where it is greater than `threshold`, else `value`."""
    return threshold_(input, threshold, value) if inplace else _threshold(input, threshold, value)


# -- exponential linear units ------------------------------------------------------------------
def elu(input, alpha=1.0, inplace=False):
    """`input` where positive, else `alpha * (exp(input) - 1)`."""
    return elu_(input, alpha) if inplace else elu_call(input, alpha, 1.0, 1.0)


@checked
def selu(input: Tensor, inplace=False):
    """Scaled ELU with the self-normalizing constants (alpha ~ 1.6733, scale ~ 1.0507)."""
    return selu_(input) if inplace else _selu(input)


@checked
def celu(input: Tensor, alpha=1.0, inplace=False):
    """`max(0, x) + min(0, alpha * (exp(x / alpha) - 1))`; alpha must not be 0."""
    return celu_(input, alpha) if inplace else _celu(input, alpha)


# -- smooth activations ------------------------------------------------------------------------
def _gelu_kernel(x, *, approximate):
    if approximate == "tanh":
        inner = _SQRT_2_OVER_PI * (x + _GELU_TANH_C * x * x * x)
        return 0.5 * x * (1.0 + np.tanh(inner))
    # NOTE: x * Phi(x) with Phi from erfc: 1 + erf(x) would cancel to 0 for very negative x.
    out = _special.erfc(x * -_SQRT1_2)  # 2 Phi(x), a fresh array: finished in place
    out *= x
    out *= 0.5
    return out


def _gelu_grad(ctx, gy):
    # NOTE: one op (one pass; one generated loop) instead of a chain of elementwise ops.
    return (dispatch(_gelu_backward, (gy, ctx.input), {"approximate": ctx.approximate}),)


# -- gelu_backward: gy * gelu'(x), PyTorch's gelu_backward ------------------------------------
# erf form: gelu'(x) = Phi(x) + x phi(x); tanh form, with t = tanh(k(x)),
# k(x) = sqrt(2/pi) (x + c x^3): gelu'(x) = (1 + t) / 2 + x (1 - t^2) k'(x) / 2.
def _gelu_backward_kernel(gy, x, *, approximate):
    if approximate == "tanh":
        x_sq = x * x
        t = np.tanh((x + x_sq * x * _GELU_TANH_C) * _SQRT_2_OVER_PI)
        d_inner = (x_sq * (3 * _GELU_TANH_C) + 1) * _SQRT_2_OVER_PI
        return gy * ((t + 1) * 0.5 + x * 0.5 * (1 - t * t) * d_inner)
    # NOTE: Phi from erfc, as the forward: 1 + erf(x) would cancel to 0 for very negative x.
    d = _special.erfc(x * -_SQRT1_2)
    d *= 0.5
    d += x * np.exp(x * x * -0.5) * _INV_SQRT_2PI
    d *= gy
    return d


def _gelu_backward_meta(gy: Meta, x: Meta, *, approximate) -> Meta:
    check_dtype("gelu_backward", x.dtype.np, "float")
    if tuple(gy.shape) != tuple(x.shape) or gy.dtype is not x.dtype:
        raise DTypeError(
            f"gelu_backward: expected grad_out of shape {list(x.shape)} and dtype "
            f"{x.dtype.name}, got {list(gy.shape)} and {gy.dtype.name}"
        )
    return Meta(x.shape, x.dtype)


def _gelu_backward_checked(gy, x, *, approximate):
    if gy.shape != x.shape or gy.dtype != x.dtype:
        raise Rejected("gelu_backward: operands rejected")
    if x.itemsize < 4:  # float16/bfloat16: computed in float32, rounded once, as the forward
        f32 = np.float32
        return _gelu_backward_kernel(gy.astype(f32), x.astype(f32), approximate=approximate).astype(
            x.dtype
        )
    return _gelu_backward_kernel(gy, x, approximate=approximate)


def _gelu_backward_sbp(gy: Meta, x: Meta, *, approximate) -> list[Signature]:
    """Elementwise splits; linear in grad_out (not in input): a partial grad_out gives P."""
    return [*_ELEMENTWISE_SBP(gy, x), Signature((P, B), (P,))]


_ELEMENTWISE_SBP = elementwise_sbp()


def _gelu_backward_grad(ctx, a):
    gy, x, approximate = ctx.grad_out, ctx.input, ctx.approximate
    d_gy = dispatch(_gelu_backward, (a, x), {"approximate": approximate})
    if approximate == "tanh":
        x_sq = x * x
        t = tanh((x + x_sq * x * _GELU_TANH_C) * _SQRT_2_OVER_PI)
        k1 = (x_sq * (3 * _GELU_TANH_C) + 1) * _SQRT_2_OVER_PI
        k2 = x * (6 * _GELU_TANH_C * _SQRT_2_OVER_PI)
        # gelu'' = (1 - t^2) (k' + x (k'' - 2 t k'^2) / 2)
        second = (1 - t * t) * (k1 + x * 0.5 * (k2 - t * k1 * k1 * 2))
    else:
        # gelu'' = phi(x) (2 - x^2)
        second = exp(x * x * -0.5) * _INV_SQRT_2PI * (2 - x * x)
    return d_gy, a * gy * second


def _gelu_backward_scalar(g, gy, x, *, approximate):
    if approximate == "tanh":
        inner = f"{g.c(_SQRT_2_OVER_PI)} * ({x} + {g.c(_GELU_TANH_C)} * {x} * {x} * {x})"
        t = g.call("tanh", inner)
        d_inner = f"{g.c(_SQRT_2_OVER_PI)} * ({g.c(1)} + {g.c(3 * _GELU_TANH_C)} * {x} * {x})"
        slope = f"{x} * {g.c(0.5)} * ({g.c(1)} - {t} * {t}) * {d_inner}"
        return f"{gy} * (({g.c(1)} + {t}) * {g.c(0.5)} + {slope})"
    fused = g.fused("gelu_grad", x)
    if fused is not None:
        return f"{gy} * {fused}"
    cdf = f"{g.call('erfc', f'{x} * {g.c(-_SQRT1_2)}')} * {g.c(0.5)}"
    pdf = f"{g.call('exp', f'{x} * {x} * {g.c(-0.5)}')} * {g.c(_INV_SQRT_2PI)}"
    return f"{gy} * ({cdf} + {x} * {pdf})"


_gelu_backward = defop(
    "gelu_backward",
    inputs=("grad_out", "input"),
    meta=_gelu_backward_meta,
    sbp=_gelu_backward_sbp,
    kernels={"cpu": _gelu_backward_checked},
    grad=_gelu_backward_grad,
    saves=("grad_out", "input"),
    elementwise=True,
    scalar=_floating(_gelu_backward_scalar),
)


def gelu_backward(grad_out, input, approximate="none"):
    """`grad_out * gelu'(input)` in one kernel, PyTorch's `gelu_backward`. Internal (not in
    nn.functional, as in PyTorch): gelu's grad rule and the op database call it.

    >>> from tideflow.ops.activation import gelu_backward
    >>> gelu_backward(flow.ones(3), flow.tensor([-1.0, 0.0, 1.0]))
    """
    return dispatch(_gelu_backward, (grad_out, input), {"approximate": approximate})


def _gelu_scalar(g, x, *, approximate):
    if approximate == "tanh":
        cube = f"{g.c(_GELU_TANH_C)} * {x} * {x} * {x}"
        inner = f"{g.c(_SQRT_2_OVER_PI)} * ({x} + {cube})"
        return f"{g.c(0.5)} * {x} * ({g.c(1)} + {g.call('tanh', inner)})"
    fused = g.fused("gelu", x)
    if fused is not None:
        return fused
    return f"{g.call('erfc', f'{x} * {g.c(-_SQRT1_2)}')} * {x} * {g.c(0.5)}"


_gelu = _activation("gelu", _gelu_kernel, _gelu_grad, scalar=_gelu_scalar, onnx=_gelu_onnx)


def _silu_grad(ctx, gy):
    x = ctx.input
    s = sigmoid(x)
    return (gy * s * (x * (1 - s) + 1),)


_silu = _activation(
    "silu",
    lambda x: x * sc.expit(x),
    _silu_grad,
    scalar=lambda g, x: f"{x} * ({g.c(1)} / ({g.c(1)} + {g.call('exp', f'-{x}')}))",
    onnx=lambda g, x: g.op("Mul", x, g.op("Sigmoid", x)),
)


def _mish_grad(ctx, gy):
    x = ctx.input
    t = tanh(softplus(x))
    return (gy * (t + x * sigmoid(x) * (1 - t * t)),)


# NOTE: logaddexp(0, x) is softplus without overflow for large x.
_mish = _activation(
    "mish",
    lambda x: x * np.tanh(np.logaddexp(0, x)),
    _mish_grad,
    scalar=lambda g, x: f"{x} * {g.call('tanh', _softplus_of(g, x))}",
    onnx=_mish_onnx,
)


def _softplus_kernel(x, *, beta, threshold):
    scaled = x * beta
    return np.where(scaled > threshold, x, np.logaddexp(0, scaled) / beta)


def _softplus_grad(ctx, gy):
    scaled = ctx.input * ctx.beta
    return (where(scaled > ctx.threshold, gy, gy * sigmoid(scaled)),)


_softplus = _activation(
    "softplus",
    _softplus_kernel,
    _softplus_grad,
    scalar=lambda g, x, *, beta, threshold: (
        f"({x} if {x} * {g.c(beta)} > {g.c(threshold)} "
        f"else {_softplus_of(g, f'({x} * {g.c(beta)})')} / {g.c(beta)})"
    ),
    onnx=_softplus_onnx,
)
_logsigmoid = _activation(
    "logsigmoid",
    sc.log_expit,
    lambda ctx, gy: (gy * sigmoid(-ctx.input),),
    scalar=lambda g, x: f"-{_softplus_of(g, f'-{x}')}",
    onnx=lambda g, x: g.op("Neg", g.op("Softplus", g.op("Neg", x))),
)


def gelu(input, approximate="none"):
    """`input * Phi(input)` (Phi: the standard normal CDF); `approximate='tanh'` uses
    `0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x**3)))`."""
    if approximate not in ("none", "tanh"):
        raise TideflowError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return dispatch(_gelu, (input,), {"approximate": approximate})


def silu(input, inplace=False):
    """`input * sigmoid(input)` (swish)."""
    return _silu_inplace(input) if inplace else dispatch(_silu, (input,), _NO_ATTRS)


def mish(input, inplace=False):
    """`input * tanh(softplus(input))`."""
    return _mish_inplace(input) if inplace else dispatch(_mish, (input,), _NO_ATTRS)


def softplus(input, beta=1.0, threshold=20.0):
    """`log(1 + exp(beta * input)) / beta`, and `input` itself where `beta * input >
    threshold` (where the two agree to float precision)."""
    return dispatch(_softplus, (input,), {"beta": float(beta), "threshold": float(threshold)})


def logsigmoid(input):
    """`log(sigmoid(input))`, without overflow or log(0) for large |input|."""
    return dispatch(_logsigmoid, (input,), _NO_ATTRS)


@checked
def softsign(input: Tensor):
    """`input / (1 + |input|)`."""
    return input / (abs(input) + 1)


@halves_in_float32
@checked
def tanhshrink(input: Tensor):
    """`input - tanh(input)`."""
    return input - tanh(input)


# -- hard (piecewise linear) activations -----------------------------------------------------------
def _hardsigmoid_kernel(x):
    return np.minimum(np.maximum(x + 3.0, 0.0), 6.0) / 6.0


def _hardsigmoid_grad(ctx, gy):
    x = ctx.input
    return (where((x > -3) & (x < 3), gy / 6, 0.0),)


def _hardswish_grad(ctx, gy):
    # PyTorch's pieces: 0 up to -3, x/3 + 1/2 strictly between, 1 from 3 on.
    x = ctx.input
    return (where(x <= -3, 0.0, where(x < 3, gy * (x / 3 + 0.5), gy)),)


def _hardsigmoid_scalar(g, x):
    return f"{g.min(g.max(f'({x} + {g.c(3)})', g.c(0)), g.c(6))} / {g.c(6)}"


_hardsigmoid = _activation(
    "hardsigmoid",
    _hardsigmoid_kernel,
    _hardsigmoid_grad,
    scalar=_hardsigmoid_scalar,
    onnx=lambda g, x: g.op("HardSigmoid", x, alpha=1 / 6, beta=0.5),
)
_hardswish = _activation(
    "hardswish",
    lambda x: x * _hardsigmoid_kernel(x),
    _hardswish_grad,
    scalar=lambda g, x: f"{x} * ({_hardsigmoid_scalar(g, x)})",
    onnx=onnx_unary("HardSwish"),
)


def _softshrink_kernel(x, *, lambd):
    # NOTE: x * 0 rather than 0 in the dead zone keeps nan, as PyTorch does.
    return np.where(x > lambd, x - lambd, np.where(x < -lambd, x + lambd, x * 0))


def _softshrink_grad(ctx, gy):
    x, lambd = ctx.input, ctx.lambd
    return (zero_where((x >= -lambd) & (x <= lambd), gy),)


_softshrink = _activation(
    "softshrink",
    _softshrink_kernel,
    _softshrink_grad,
    scalar=lambda g, x, *, lambd: (
        f"({x} - {g.c(lambd)} if {x} > {g.c(lambd)} else "
        f"({x} + {g.c(lambd)} if {x} < {g.c(-lambd)} else {x} * {g.c(0)}))"
    ),
    onnx=lambda g, x, *, lambd: g.op("Shrink", x, bias=lambd, lambd=lambd),
)


def hardsigmoid(input, inplace=False):
    """`relu6(input + 3) / 6`: 0 below -3, 1 above 3, linear between."""
    return _hardsigmoid_inplace(input) if inplace else dispatch(_hardsigmoid, (input,), _NO_ATTRS)


def hardswish(input, inplace=False):
    """`input * hardsigmoid(input)`."""
    return _hardswish_inplace(input) if inplace else dispatch(_hardswish, (input,), _NO_ATTRS)


def softshrink(input, lambd=0.5):
    """`input - lambd` above `lambd`, `input + lambd` below `-lambd`, else 0; lambd >= 0."""
    if not lambd >= 0:
        raise TideflowError(f"softshrink: lambd must be non-negative, got {lambd}")
    return dispatch(_softshrink, (input,), {"lambd": float(lambd)})


# -- in-place forms (`inplace=True`, F.relu_ ...) ------------------------------------------------
relu_ = inplace_method(_relu, "relu_")
hardtanh_ = inplace_method(hardtanh, "hardtanh_")
leaky_relu_ = inplace_method(leaky_relu, "leaky_relu_")
threshold_ = inplace_method(_threshold, "threshold_")
elu_ = inplace_method(elu, "elu_")
selu_ = inplace_method(selu, "selu_")
celu_ = inplace_method(celu, "celu_")
_silu_inplace = inplace_method(silu, "silu_")
_mish_inplace = inplace_method(mish, "mish_")
_hardsigmoid_inplace = inplace_method(hardsigmoid, "hardsigmoid_")
_hardswish_inplace = inplace_method(hardswish, "hardswish_")


# -- gated and randomized units ------------------------------------------------------------------
@halves_in_float32
@checked
def glu(input: Tensor, dim=-1):
    """The gated linear unit: `a * sigmoid(b)` for the halves a, b of `input` along `dim`.

    >>> F.glu(flow.tensor([[1.0, 2.0, 0.0, 1.0]]))
    tensor([[0.5000, 1.4621]])
    """
    if input.ndim == 0:
        raise ShapeError("glu: does not support scalars because halving size must be even")
    dim = normalize_dim("glu", dim, input.ndim)
    if input.shape[dim] % 2:
        raise ShapeError(
            f"glu: Halving dimension must be even, but dimension {dim} is size {input.shape[dim]}"
        )
    a, b = input.chunk(2, dim)
    return a * sigmoid(b)


@checked
def rrelu(input: Tensor, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    """The randomized leaky ReLU: negative inputs scaled by a slope drawn uniformly from
    [lower, upper] per element in training, by the mean slope (lower + upper) / 2 otherwise.

    >>> F.rrelu(flow.tensor([-1.0, 2.0]), 0.1, 0.3)
    tensor([-0.2000,  2.0000])
    """
    if lower > upper:
        raise ValueError(
            f"rrelu: the lower bound ({lower}) should be less than or equal to the upper "
            f"bound ({upper})"
        )
    if not training:
        return leaky_relu(input, (lower + upper) / 2, inplace)
    slopes = creation.empty_like(input).uniform_(lower, upper)
    out = where(input >= 0, input, input * slopes)
    if inplace:
        input.copy_(out)
        return input
    return out


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False):
    """`rrelu` in place."""
    return rrelu(input, lower, upper, training, inplace=True)
