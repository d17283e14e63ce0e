"""Binary (and ternary) elementwise ops: arithmetic, comparison, logical, bitwise, `where`,
`lerp`, `addcmul`/`addcdiv` and closeness tests.

Operands are tensors or Python scalars (on either side) and broadcast like NumPy/PyTorch;
dtypes combine by PyTorch's promotion rules (the dispatcher casts the arrays before the kernel
runs). Gradients are returned at the broadcast shape; the autograd engine reduces them to each
operand's shape.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from numbers import Number
from typing import NamedTuple

import numpy as np

from ..framework import dtype as dtypes
from ..framework.dispatch import computation_dtype, inplace
from ..framework.errors import ArgumentError, DTypeError, TideflowError
from ..framework.tensor import Tensor
from ._onnx_rules import as_bool, in_int32, nan_extremum, onnx_binary, operands_like, opset_at_least
from ._rules import (
    B,
    Meta,
    P,
    Signature,
    broadcast_shapes,
    checked,
    defop,
    dispatch,
    elementwise_sbp,
    halves_in_float32,
    methods,
    operand_arg,
    tensor_arg,
)
from .complex import holomorphic
from .creation import on_placement_of, tensor, zeros_like
from .indexing import _where_single

__all__ = [
    "add",
    "sub",
    "mul",
    "div",
    "subtract",
    "multiply",
    "divide",
    "true_divide",
    "floor_divide",
    "remainder",
    "fmod",
    "pow",
    "atan2",
    "arctan2",
    "hypot",
    "copysign",
    "xlogy",
    "logaddexp",
    "logaddexp2",
    "gcd",
    "lcm",
    "heaviside",
    "nextafter",
    "ldexp",
    "float_power",
    "maximum",
    "minimum",
    "fmax",
    "fmin",
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
    "greater",
    "greater_equal",
    "less",
    "less_equal",
    "not_equal",
    "logical_and",
    "logical_or",
    "logical_xor",
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "bitwise_left_shift",
    "bitwise_right_shift",
    "where",
    "lerp",
    "addcmul",
    "addcdiv",
    "isclose",
    "allclose",
    "equal",
]


_NO_ATTRS: dict = {}
_ndarray = np.ndarray
_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
_BF16 = dtypes.bfloat16.np
_HALF = (np.dtype(np.float16), _BF16)


# -- dtype classes an op accepts (checked on the computation dtype) ---------------------------
class _Kinds(NamedTuple):
    test: Callable[[dtypes.DType], bool]
    phrase: str


_NUMBERS = _Kinds(lambda d: d is not dtypes.bool_ and not d.is_complex, "integer or floating point")
_NUMBERS_OR_COMPLEX = _Kinds(lambda d: d is not dtypes.bool_, "integer, floating point or complex")
_FLOATING = _Kinds(lambda d: d.is_floating_point, "floating point")
_INTEGERS = _Kinds(lambda d: d in dtypes.INTEGRAL, "integer")
_BITS = _Kinds(lambda d: d is dtypes.bool_ or d in dtypes.INTEGRAL, "integer or bool")
# NOTE: complex numbers have no order: comparisons and extrema reject them, as in PyTorch.
_ORDERED = _Kinds(lambda d: not d.is_complex, "real (ordered)")


def _dtype_of(arrays) -> np.dtype | None:
    """The dtype of the first array operand: what a promoting op computes in."""
    for a in arrays:
        if type(a) is _ndarray:
            return a.dtype
    return None


# -- kernel wrappers ------------------------------------------------------------------------
def _accepting(kinds: _Kinds, kernel):
    """Reject the dtypes NumPy would compute anyway (hypot of ints, shifts of bools): the
    raise makes the dispatcher ask the meta rule, which words the error."""
    accepted = frozenset(d.np for d in dtypes.ALL if kinds.test(d))

    def run(*arrays, **attrs):
        dt = _dtype_of(arrays)
        if dt is not None and dt not in accepted:
            raise TypeError(f"{dt} is not {kinds.phrase}")
        return kernel(*arrays, **attrs)

    return run


def _keep_bfloat16(kernel):
    """NOTE: ml_dtypes' bfloat16 takes no part in NumPy's weak-scalar promotion: a bfloat16
    array with a Python float computes in (and returns) float32 (np.where: float64). Rounding
    the result back gives what PyTorch computes (the op in float32, rounded once). The
    dispatcher leaves Python scalars as they are (framework/dispatch.py: promote), so the
    kernels that take them fix it."""

    def run(x, y):
        out = kernel(x, y)
        if type(x) is _ndarray and type(y) is _ndarray:  # the common case: no Python scalar
            return out
        return _round_to_bfloat16(out, x if type(x) is _ndarray else y)

    return run


def _second_scalar_in_float32(kernel):
    """NOTE: PyTorch's CPU kernels of mul and div (every rounding mode) keep a number given as
    the second operand of a float16/bfloat16 tensor in float32, their "opmath": `t * 0.3`
    multiplies by float32(0.3) and rounds once. Every other op, and a number given first,
    rounds the number to the tensor's dtype before computing, as NumPy does (measured against
    torch 2.13 in tests/unit/test_half_precision.py)."""

    def run(x, y):
        if type(y) in (int, float) and type(x) is _ndarray and x.dtype in _HALF:
            return kernel(x.astype(_F32), np.float32(y)).astype(x.dtype)
        return kernel(x, y)

    return run


def _ufunc_into(ufunc: np.ufunc, kernel):
    """The out kernel of `kernel`, which runs `ufunc`: computed into `out` as `kernel`
    computes it, except a Python number beside a half-precision array, which goes through
    `kernel` (its rounding rules) into a fresh array."""

    def run(x, y, *, out):
        if (type(x) is _ndarray and type(y) is _ndarray) or not (_half(x) or _half(y)):
            return ufunc(x, y, out=out)
        return kernel(x, y)

    return run


def _half(a) -> bool:
    return type(a) is _ndarray and a.dtype in _HALF


def _round_to_bfloat16(out, array):
    widened = out.dtype is _F32 or out.dtype is _F64
    return out.astype(_BF16) if widened and array.dtype is _BF16 else out


def _opmath(kernel):
    """Run a multi-step kernel in float32 for float16/bfloat16 operands and round once at the
    end, like PyTorch's CPU kernels, instead of rounding every intermediate."""

    def run(*arrays, **attrs):
        half = _dtype_of(arrays)
        if half not in _HALF:
            return kernel(*arrays, **attrs)
        up = (a.astype(_F32) if type(a) is _ndarray and a.dtype == half else a for a in arrays)
        return kernel(*up, **attrs).astype(half)

    return run


def _is_integer_division(op: str, x, y) -> bool:
    """Whether the promoted operands are integers. Bool is rejected (the meta rule words the
    error), and so is an integer division by zero: PyTorch raises, NumPy would return 0."""
    kind = _dtype_of((x, y)).kind
    if kind == "b":
        raise TypeError(f"{op} of bool")
    if kind in "iu":
        if np.any(y == 0):
            raise TideflowError(f"{op}: integer division by zero")
        return True
    return False


# -- meta and SBP rules ---------------------------------------------------------------------
def _describe(operands) -> str:
    return ", ".join(
        f"Tensor{list(m.shape)}:{m.dtype.name}" if isinstance(m, Meta) else repr(m)
        for m in operands
    )


def _elementwise_meta(name: str, kinds: _Kinds | None = None, out_dtype=None):
    """Broadcast the tensor operands; the output has `out_dtype` or the computation dtype,
    which must be of `kinds`."""

    def meta(*operands, **_) -> Meta:
        tensors = [m for m in operands if isinstance(m, Meta)]
        if not tensors:
            raise TypeError(f"{name}: expected at least one tensor operand, got {operands}")
        shape = broadcast_shapes(name, *(m.shape for m in tensors))
        dtype = tensors[0].dtype
        if kinds is not None and not kinds.test(dtype):
            raise DTypeError(
                f"{name}: expected {kinds.phrase} operands, got {dtype.name} "
                f"(operands {_describe(operands)})"
            )
        return Meta(shape, out_dtype or dtype)

    return meta


def _elementwise_sbp(*linear: tuple[int, ...]):
    """Split any output axis (operands broadcast along it stay B) or all B; plus, for each
    group of operand positions in `linear`, P on that group (the other tensors B) gives P:
    valid where the op is linear in the group jointly (mul in either operand, add in both
    together). A group holding a scalar is skipped: P + 2.5 is not linear."""
    split = elementwise_sbp()

    def sbp(*operands, **_) -> list[Signature]:
        sigs = split(*operands)
        for group in linear:
            if all(isinstance(operands[i], Meta) for i in group):
                ins = tuple(
                    P if i in group else B if isinstance(m, Meta) else None
                    for i, m in enumerate(operands)
                )
                sigs.append(Signature(ins, (P,)))
        return sigs

    return sbp


def _binary(
    name,
    kernel,
    *,
    grad=None,
    saves=(),
    promote="common",
    kinds=None,
    out_dtype=None,
    linear=(),
    scalar=None,
    scalar_in_float32=False,
    onnx=None,
):
    """One broadcasting two-operand op. `kinds`: the computation dtypes its meta rule accepts
    (the kernel must raise for the others: NumPy does for some, `_accepting` for the rest);
    `scalar`: its rule for generated loops (`OpDef.scalar`); `scalar_in_float32`: see
    `_second_scalar_in_float32`. A bare ufunc as `kernel` also writes into given arrays
    (`OpDef.out_kernels`)."""
    ufunc = kernel if isinstance(kernel, np.ufunc) else None
    if scalar_in_float32:
        kernel = _second_scalar_in_float32(kernel)
    if out_dtype is None:
        kernel = _keep_bfloat16(kernel)
    return defop(
        name,
        inputs=("input", "other"),
        meta=_elementwise_meta(name, kinds, out_dtype),
        sbp=_elementwise_sbp(*linear),
        kernels={"cpu": kernel},
        out_kernels=None if ufunc is None else {"cpu": _ufunc_into(ufunc, kernel)},
        grad=grad,
        saves=saves,
        promote=promote,
        elementwise=True,
        scalar=scalar,
        onnx=onnx,
    )


def _arith(symbol: str):
    """The scalar rule `x <symbol> y` for numbers (bool arithmetic stays on NumPy)."""
    return lambda g, x, y: None if g.dtype.kind == "b" else f"{x} {symbol} {y}"


def _float_rule(rule):
    """`rule` for floating-point computation dtypes only."""
    return lambda g, *args, **attrs: rule(g, *args, **attrs) if g.floating else None


def _zero_grads(ctx, gy):
    """Piecewise-constant ops (rounded division): zero where the gradient is needed."""
    return tuple(zeros_like(gy) if need else None for need in ctx.needs_input_grad)


# -- ONNX lowerings shared by several ops ----------------------------------------------------
def _floor_divide_onnx(g, x, y):
    x, y = operands_like(g, x, y)
    if g.meta(x).dtype.is_floating_point:
        return g.op("Floor", g.op("Div", x, y))
    # NOTE: ONNX's integer Div truncates: one less where the signs differ and it is inexact
    zero = g.tensor(0, x)
    inexact = g.op("Not", g.op("Equal", g.op("Mod", x, y, fmod=1), zero))
    signs_differ = g.op("Xor", g.op("Less", x, zero), g.op("Less", y, zero))
    adjust = g.cast(g.op("And", inexact, signs_differ), g.meta(x).dtype)
    return g.op("Sub", g.op("Div", x, y), adjust)


def _trunc_divide_onnx(g, x, y):
    x, y = operands_like(g, x, y)
    q = g.op("Div", x, y)
    if not g.meta(x).dtype.is_floating_point:
        return q
    negative = g.op("Less", q, g.tensor(0, x))
    return g.op("Where", negative, g.op("Ceil", q), g.op("Floor", q))


def _remainder_onnx(g, x, y):
    x, y = operands_like(g, x, y)
    if g.meta(x).dtype.is_floating_point:  # ONNX's Mod takes fmod=1 only for floats
        return g.op("Sub", x, g.op("Mul", g.op("Floor", g.op("Div", x, y)), y))
    return g.op("Mod", x, y, fmod=0)


def _hypot_onnx(g, x, y):
    x, y = operands_like(g, x, y)
    return g.op("Sqrt", g.op("Add", g.op("Mul", x, x), g.op("Mul", y, y)))


def _xlogy_onnx(g, x, y):
    x, y = operands_like(g, x, y)
    product = g.op("Mul", x, g.op("Log", y))
    zero = g.tensor(0, x)
    # NOTE: 0 * log(y) is 0 unless y is nan
    return g.op("Where", g.op("And", g.op("Equal", x, zero), g.op("Not", g.op("IsNaN", y))),
                zero, product)  # fmt: skip


def _logaddexp_onnx(g, x, y):
    x, y = operands_like(g, x, y)
    top = g.op("Max", x, y)
    terms = g.op("Add", g.op("Exp", g.op("Sub", x, top)), g.op("Exp", g.op("Sub", y, top)))
    return g.op("Add", top, g.op("Log", terms))


def _where_onnx(g, condition, x, y):
    c = as_bool(g, condition)
    x, y = operands_like(g, x, y)
    if g.out[0].dtype is not dtypes.bool_:
        return g.op("Where", c, x, y)
    # NOTE: onnxruntime has no Where on bools
    return g.op("Or", g.op("And", c, x), g.op("And", g.op("Not", c), y))


def _atan2_onnx(g, y, x):
    """atan(y / x) moved to the right quadrant: +-pi where x < 0, +-pi/2 where x == 0."""
    y, x = operands_like(g, y, x)
    zero, pi = g.tensor(0, x), g.tensor(math.pi, x)
    base = g.op("Atan", g.op("Div", y, x))
    # NOTE: the sign of y, with -0.0 counting as negative (y's sign bit, as arctan2 reads it)
    below = g.op("Less", g.op("Div", g.tensor(1, x), y), zero)
    half_turn = g.op("Where", below, g.op("Neg", pi), pi)
    shifted = g.op("Where", g.op("Less", x, zero), g.op("Add", base, half_turn), base)
    on_axis = g.op("Mul", half_turn, g.tensor(0.5, x))
    vertical = g.op("And", g.op("Equal", x, zero), g.op("Not", g.op("Equal", y, zero)))
    return g.op("Where", vertical, on_axis, shifted)


def _fextremum_onnx(op_type: str):
    """fmax / fmin: the other operand where one is nan."""

    def lower(g, x, y):
        x, y = operands_like(g, x, y)
        out = in_int32(g, op_type, x, y)
        if not g.out[0].dtype.is_floating_point:
            return out
        return g.op("Where", g.op("IsNaN", x), y, g.op("Where", g.op("IsNaN", y), x, out))

    return lower


def _logaddexp2_onnx(g, x, y):
    x, y = operands_like(g, x, y)
    ln2 = g.tensor(math.log(2), x)
    return g.op("Div", _logaddexp_onnx(g, g.op("Mul", x, ln2), g.op("Mul", y, ln2)), ln2)


def _isclose_onnx(g, x, y, *, rtol, atol, equal_nan):
    x, y = operands_like(g, x, y)
    dtype = g.meta(x).dtype
    close = g.op("Equal", x, y)
    if dtype is dtypes.bool_:
        return close
    if not dtype.is_floating_point:  # exact differences, as the kernel's float64
        x, y = g.cast(x, dtypes.float64), g.cast(y, dtypes.float64)
    elif equal_nan:
        close = g.op("Or", close, g.op("And", g.op("IsNaN", x), g.op("IsNaN", y)))
    diff = g.op("Abs", g.op("Sub", x, y))
    limit = g.op("Add", g.tensor(atol, x), g.op("Mul", g.tensor(rtol, x), g.op("Abs", y)))
    finite = g.op("Not", g.op("IsInf", diff))  # inf - inf is not close
    near = g.op("And", g.op("LessOrEqual", diff, limit), finite)
    return g.op("Or", close, near)


def _copysign_onnx(g, x, y):
    """|x| with the sign bit of y (-0.0 counts as negative: 1 / -0.0 is -inf)."""
    x, y = operands_like(g, x, y)
    zero = g.tensor(0, x)
    negative = g.op("Less", g.op("Where", g.op("Equal", y, zero), g.op("Reciprocal", y), y), zero)
    size = g.op("Abs", x)
    return g.op("Where", negative, g.op("Neg", size), size)


def _heaviside_onnx(g, x, values):
    # NOTE: nan steps to 0 (OpenVINO's Greater holds for nan: asked apart)
    above = g.op("And", g.op("Greater", x, g.tensor(0, x)), g.op("Not", g.op("IsNaN", x)))
    step = g.cast(above, g.out[0].dtype)
    return g.op("Where", g.op("Equal", x, g.tensor(0, x)), g.tensor(values, x), step)


def _lerp_onnx(g, x, end, weight):
    w = g.tensor(weight, x)
    return g.op("Add", x, g.op("Mul", w, g.op("Sub", end, x)))


def _addc_onnx(op_type: str):
    def lower(g, x, t1, t2, *, value):
        x, t1, t2 = operands_like(g, x, t1, t2)
        dtype = g.meta(x).dtype
        scale = g.tensor(value if dtype.is_floating_point else int(value), x)
        return g.op("Add", x, g.op("Mul", scale, g.op(op_type, t1, t2)))

    return lower


# -- arithmetic -----------------------------------------------------------------------------
def _mul_grad(ctx, gy):
    need_x, need_y = ctx.needs_input_grad
    return (gy * ctx.other if need_x else None, gy * ctx.input if need_y else None)


def _div_grad(ctx, gy):
    need_x, need_y = ctx.needs_input_grad
    gx = gy / ctx.other if need_x else None
    gother = -gy * ctx.out / ctx.other if need_y else None
    return gx, gother


_add = _binary(
    "add",
    np.add,
    grad=lambda ctx, gy: (gy, gy),
    linear=((0, 1),),
    scalar=_arith("+"),
    onnx=onnx_binary("Add"),
)
# NOTE: bool operands of sub are rejected by its wrapper, before promotion hides them.
_sub = _binary(
    "sub",
    np.subtract,
    grad=lambda ctx, gy: (gy, -gy),
    linear=((0, 1),),
    scalar=_arith("-"),
    onnx=onnx_binary("Sub"),
)
_mul = _binary(
    "mul",
    np.multiply,
    grad=holomorphic(_mul_grad),
    saves=("input", "other"),
    linear=((0,), (1,)),
    scalar=_arith("*"),
    scalar_in_float32=True,
    onnx=onnx_binary("Mul"),
)
_div = _binary(
    "div",
    np.true_divide,
    grad=holomorphic(_div_grad),
    saves=("other", "out"),
    promote="float",
    linear=((0,),),
    scalar=_float_rule(lambda g, x, y: f"{x} / {y}"),
    scalar_in_float32=True,
    onnx=onnx_binary("Div"),
)


def _floor_divide_kernel(x, y):
    _is_integer_division("floor_divide", x, y)
    return np.floor_divide(x, y)


def _trunc_divide_kernel(x, y):
    if _is_integer_division("div", x, y):
        # x - fmod(x, y) is an exact multiple of y, so floor division truncates exactly
        return np.floor_divide(x - np.fmod(x, y), y)
    return np.trunc(np.true_divide(x, y))


def _remainder_kernel(x, y):
    _is_integer_division("remainder", x, y)
    return np.remainder(x, y)


def _fmod_kernel(x, y):
    _is_integer_division("fmod", x, y)
    return np.fmod(x, y)


def _remainder_grad(ctx, gy):
    need_x, need_y = ctx.needs_input_grad
    gother = -gy * div(ctx.input, ctx.other, rounding_mode="floor") if need_y else None
    return (gy if need_x else None), gother


def _fmod_grad(ctx, gy):
    need_x, need_y = ctx.needs_input_grad
    gother = -gy * div(ctx.input, ctx.other, rounding_mode="trunc") if need_y else None
    return (gy if need_x else None), gother


_floor_divide = _binary(
    "floor_divide",
    _floor_divide_kernel,
    grad=_zero_grads,
    kinds=_NUMBERS,
    scalar_in_float32=True,
    onnx=_floor_divide_onnx,
)
_trunc_divide = _binary(
    "trunc_divide",
    _opmath(_trunc_divide_kernel),
    grad=_zero_grads,
    kinds=_NUMBERS,
    scalar_in_float32=True,
    onnx=_trunc_divide_onnx,
)
_remainder = _binary(
    "remainder",
    _remainder_kernel,
    grad=_remainder_grad,
    saves=("input", "other"),
    kinds=_NUMBERS,
    onnx=_remainder_onnx,
)
_fmod = _binary(
    "fmod",
    _fmod_kernel,
    grad=_fmod_grad,
    saves=("input", "other"),
    kinds=_NUMBERS,
    onnx=lambda g, x, y: g.op("Mod", *operands_like(g, x, y), fmod=1),
)


def add(input, other, *, alpha=1):
    """`input + alpha * other`, broadcasting; either operand may be a Python scalar.

    >>> flow.add(flow.tensor([1.0, 2.0]), flow.tensor([10.0, 20.0]), alpha=2)  # [21., 42.]
    """
    if alpha != 1:
        return _plus_scaled(_add, input, other, alpha)
    return dispatch(_add, (input, other), _NO_ATTRS)


def sub(input, other, *, alpha=1):
    """`input - alpha * other`, broadcasting. Bool operands are rejected, as in PyTorch: use
    `^` (logical_xor) or `~` (logical_not) on masks."""
    if _is_bool(input) or _is_bool(other):
        raise DTypeError(
            f"sub: subtraction with a bool operand is not supported (operands "
            f"{_describe(_metas((input, other)))}); use ^ (logical_xor) or ~ (logical_not)"
        )
    if alpha != 1:
        return _plus_scaled(_sub, input, other, alpha)
    return dispatch(_sub, (input, other), _NO_ATTRS)


def _is_bool(a) -> bool:
    if isinstance(a, Tensor):
        return a.dtype is dtypes.bool_
    return isinstance(a, bool | np.bool_) or (isinstance(a, np.ndarray) and a.dtype == np.bool_)


def _metas(operands) -> tuple:
    return tuple(Meta(tuple(a.shape), a.dtype) if isinstance(a, Tensor) else a for a in operands)


@halves_in_float32
def _plus_scaled(op, input, other, alpha):
    """`input op alpha * other` (op: add or sub), rounded once for half operands."""
    return dispatch(op, (input, _scaled(op.name, input, other, alpha)), _NO_ATTRS)


def _scaled(op: str, input, other, alpha):
    if isinstance(alpha, float) and not computation_dtype(_add, (input, other)).is_floating_point:
        raise DTypeError(
            f"{op}: for integral input tensors, argument alpha must not be a floating point "
            f"number, got alpha={alpha}"
        )
    if isinstance(other, Tensor):
        return mul(other, alpha)
    if not isinstance(other, numbers.Number | np.ndarray):  # None, a str: not a scalar operand
        tensor_arg(op, "other", 2, other)
    return other * alpha


def mul(input, other):
    """Elementwise product, broadcasting; either operand may be a Python scalar."""
    return dispatch(_mul, (input, other), _NO_ATTRS)


_ROUNDED_DIV = {"trunc": _trunc_divide, "floor": _floor_divide}


def div(input, other, *, rounding_mode=None):
    """`input / other`. `rounding_mode=None` is true division (integers give the default
    float dtype); 'trunc' rounds toward zero and 'floor' down, keeping integer dtypes (integer
    division by zero raises). Rounded results have zero gradient.

    >>> flow.div(flow.tensor([-7, 7]), 2, rounding_mode="floor")  # tensor([-4, 3])
    """
    if rounding_mode is None:
        return dispatch(_div, (input, other), _NO_ATTRS)
    op = _ROUNDED_DIV.get(rounding_mode)
    if op is None:
        raise TideflowError(
            "div: expected rounding_mode to be one of None, 'trunc' or 'floor', "
            f"but got {rounding_mode!r}"
        )
    # NOTE: the rounded quotients are ops of their own: check here, so errors name div
    operand_arg("div", "input", 1, input)
    operand_arg("div", "other", 2, other)
    return dispatch(op, (input, other), _NO_ATTRS)


def floor_divide(input, other):
    """`input // other`: division rounded down, as `div(..., rounding_mode='floor')`."""
    return dispatch(_floor_divide, (input, other), _NO_ATTRS)


def remainder(input, other):
    """Python's modulus: `input - floor(input / other) * other`, with the sign of `other`.

    >>> flow.remainder(flow.tensor([-3, 3]), 2)  # tensor([1, 1])
    """
    return dispatch(_remainder, (input, other), _NO_ATTRS)


def fmod(input, other):
    """C's fmod: `input - trunc(input / other) * other`, with the sign of `input`.

    >>> flow.fmod(flow.tensor([-3, 3]), 2)  # tensor([-1, 1])
    """
    return dispatch(_fmod, (input, other), _NO_ATTRS)


subtract = sub
multiply = mul
divide = div
true_divide = div


# -- pow ------------------------------------------------------------------------------------
def _int_pow(x, y):
    """PyTorch's integer pow: x ** -n is 1 for x == 1, +-1 for x == -1 and 0 otherwise."""
    if np.all(y >= 0):
        return np.power(x, y)
    if type(y) is not _ndarray:
        raise ValueError("integers to negative integer powers are not allowed")
    negative = y < 0
    out = np.power(x, np.where(negative, 0, y))
    inverse = np.where(x == 1, 1, np.where(x == -1, np.where(y % 2 == 0, 1, -1), 0))
    return np.where(negative, inverse, out).astype(out.dtype)


def _pow_kernel(x, y):
    kind = _dtype_of((x, y)).kind
    if kind == "b":
        raise TypeError("pow of bool")
    return _int_pow(x, y) if kind in "iu" else np.power(x, y)


_pow_dtype_meta = _elementwise_meta("pow", _NUMBERS_OR_COMPLEX)


def _pow_meta(input, exponent) -> Meta:
    out = _pow_dtype_meta(input, exponent)
    negative_scalar = isinstance(exponent, numbers.Integral) and exponent < 0
    if out.dtype in dtypes.INTEGRAL and negative_scalar:
        raise TideflowError(
            f"pow: integers to negative integer powers are not allowed "
            f"(operands {_describe((input, exponent))})"
        )
    return out


def _pow_grad(ctx, gy):
    need_base, need_exponent = ctx.needs_input_grad
    base, exponent = ctx.input, ctx.exponent
    gbase = gexponent = None
    if need_base:
        if isinstance(exponent, Tensor):
            # where exponent == 0 the derivative is 0, not 0 * pow(0, -1) = nan
            gbase = where(exponent == 0, 0.0, gy * exponent * pow(base, exponent - 1))
        elif exponent == 0:
            gbase = zeros_like(gy)
        else:
            gbase = gy * exponent * pow(base, exponent - 1)
    if need_exponent:
        # d/dy x**y = x**y * log(x). xlogy's 0 * log(0) = 0 gives PyTorch's 0 for 0**y, y > 0;
        # PyTorch also takes 0 at 0**0, where x**y is 1.
        gexponent = where(logical_and(base == 0, exponent == 0), 0.0, gy * xlogy(ctx.out, base))
    return gbase, gexponent


_pow = defop(
    "pow",
    inputs=("input", "exponent"),
    meta=_pow_meta,
    sbp=_elementwise_sbp(),
    kernels={"cpu": _keep_bfloat16(_pow_kernel)},
    grad=holomorphic(_pow_grad),
    saves=("input", "exponent", "out"),
    promote="common",
    elementwise=True,
    scalar=_float_rule(lambda g, x, y: f"{x} ** {y}"),
    onnx=lambda g, x, y: in_int32(g, "Pow", *operands_like(g, x, y)),
)


def pow(input, exponent):
    """`input ** exponent`, elementwise: tensor ** tensor, tensor ** scalar or scalar ** tensor.
    Integer operands stay integer (a negative integer power of an integer is 0 unless the base
    is +-1; a negative Python int exponent raises).

    >>> flow.pow(flow.tensor([1.0, 2.0, 3.0]), 2)  # tensor([1., 4., 9.])
    """
    return dispatch(_pow, (input, exponent), _NO_ATTRS)


# -- floating point functions of two arguments ----------------------------------------------
def _atan2_grad(ctx, gy):
    need_x, need_y = ctx.needs_input_grad
    x, y = ctx.input, ctx.other
    denom = x * x + y * y
    scale = where(denom == 0, 0.0, gy / denom)  # PyTorch takes 0 at the origin
    return (scale * y if need_x else None), (scale * -x if need_y else None)


def _hypot_grad(ctx, gy):
    need_x, need_y = ctx.needs_input_grad
    scale = gy / ctx.out
    return (scale * ctx.input if need_x else None), (scale * ctx.other if need_y else None)


def _copysign_grad(ctx, gy):
    need_x, need_y = ctx.needs_input_grad
    x = ctx.input
    gx = gy * where(x == 0, 0.0, ctx.out / x) if need_x else None
    return gx, (zeros_like(gy) if need_y else None)


def _xlogy_kernel(x, y):
    dt = _dtype_of((x, y))
    x, y = np.asarray(x, dt), np.asarray(y, dt)  # np.log(2.5) would be a float64 scalar
    # 0 * log(y) is 0 for any y but nan, where x * log(y) gives nan for y = 0 or inf
    return np.where((x == 0) & ~np.isnan(y), 0, x * np.log(y))


def _xlogy_grad(ctx, gy):
    need_x, need_y = ctx.needs_input_grad
    x, y = ctx.input, ctx.other
    # log(y), taken as 0 where x == 0 and log(y) is -inf or nan (PyTorch's choice)
    gx = where(logical_and(x == 0, y <= 0), 0.0, xlogy(gy, y)) if need_x else None
    return gx, (gy * x / y if need_y else None)


def _logaddexp_grad(ctx, gy):
    need_x, need_y = ctx.needs_input_grad
    x, y = ctx.input, ctx.other
    gx = gy / (1 + (y - x).exp()) if need_x else None
    return gx, (gy / (1 + (x - y).exp()) if need_y else None)


def _logaddexp2_grad(ctx, gy):
    need_x, need_y = ctx.needs_input_grad
    x, y = ctx.input, ctx.other
    gx = gy / (1 + pow(2.0, y - x)) if need_x else None
    return gx, (gy / (1 + pow(2.0, x - y)) if need_y else None)


_XY = ("input", "other")


def _math2(fn: str):
    return _float_rule(lambda g, x, y: g.call(fn, x, y))


def _xlogy_scalar(g, x, y):
    return f"({g.c(0)} if {x} == {g.c(0)} and {y} == {y} else {x} * {g.call('log', y)})"


def _logaddexp_scalar(g, x, y):
    # NumPy's npy_logaddexp: equal operands (infinities too) give x + log 2
    d = f"({x} - {y})"
    log1p_exp = g.call("log1p", g.call("exp", f"-abs({d})"))
    return (
        f"({x} + {g.c(math.log(2.0))} if {x} == {y} else "
        f"({x} + {log1p_exp} if {d} > {g.c(0)} else ({y} + {log1p_exp} if {d} <= {g.c(0)} "
        f"else {d})))"
    )


_atan2 = _binary(
    "atan2",
    np.arctan2,
    grad=_atan2_grad,
    saves=_XY,
    promote="float",
    scalar=_math2("atan2"),
    onnx=_atan2_onnx,
)
_hypot = _binary(
    "hypot",
    _accepting(_FLOATING, np.hypot),
    grad=_hypot_grad,
    saves=(*_XY, "out"),
    kinds=_FLOATING,
    scalar=_math2("hypot"),
    onnx=_hypot_onnx,
)
_copysign = _binary(
    "copysign",
    np.copysign,
    grad=_copysign_grad,
    saves=("input", "out"),
    promote="float",
    scalar=_math2("copysign"),
    onnx=_copysign_onnx,
)
_xlogy = _binary(
    "xlogy",
    _opmath(_xlogy_kernel),
    grad=_xlogy_grad,
    saves=_XY,
    promote="float",
    scalar=_float_rule(_xlogy_scalar),
    onnx=_xlogy_onnx,
)
_logaddexp = _binary(
    "logaddexp",
    _accepting(_FLOATING, np.logaddexp),
    grad=_logaddexp_grad,
    saves=_XY,
    kinds=_FLOATING,
    scalar=_float_rule(_logaddexp_scalar),
    onnx=_logaddexp_onnx,
)
_logaddexp2 = _binary(
    "logaddexp2",
    _accepting(_FLOATING, np.logaddexp2),
    grad=_logaddexp2_grad,
    saves=_XY,
    kinds=_FLOATING,
    onnx=_logaddexp2_onnx,
)


def atan2(input, other):
    """The angle of the point (other, input): arctan(input / other) in the right quadrant,
    in [-pi, pi]. Integer operands give the default float dtype."""
    return dispatch(_atan2, (input, other), _NO_ATTRS)


def hypot(input, other):
    """`sqrt(input**2 + other**2)` without intermediate overflow (floating point only)."""
    return dispatch(_hypot, (input, other), _NO_ATTRS)


def copysign(input, other):
    """The magnitude of `input` with the sign bit of `other` (-0.0 counts as negative)."""
    return dispatch(_copysign, (input, other), _NO_ATTRS)


def xlogy(input, other):
    """`input * log(other)`, taken as 0 where `input` is 0 (unless `other` is nan)."""
    return dispatch(_xlogy, (input, other), _NO_ATTRS)


def logaddexp(input, other):
    """`log(exp(input) + exp(other))`, computed without overflow (floating point only)."""
    return dispatch(_logaddexp, (input, other), _NO_ATTRS)


def logaddexp2(input, other):
    """`log2(2**input + 2**other)`, computed without overflow (floating point only)."""
    return dispatch(_logaddexp2, (input, other), _NO_ATTRS)


arctan2 = atan2


# -- number theory, steps and float representation ------------------------------------------
def _heaviside_meta(input, values) -> Meta:
    # NOTE: PyTorch refuses to promote here (the step's 0/1 would take the values' dtype).
    if not isinstance(values, Meta) or input.dtype is not values.dtype or input.dtype.is_complex:
        raise DTypeError(
            f"heaviside: expected input and values of one real dtype, got "
            f"{_describe((input, values))}"
        )
    return Meta(broadcast_shapes("heaviside", input.shape, values.shape), input.dtype)


def _heaviside_kernel(x, values):
    if x.dtype != values.dtype or x.dtype.kind == "c":
        raise TypeError("heaviside dtypes")
    # NaN steps to 0, as in PyTorch (NumPy's heaviside gives NaN)
    return np.where(x == 0, values, x > 0).astype(x.dtype, copy=False)


def _next_bfloat16(x, y):
    """nextafter on bfloat16's bits: NumPy would step in float32 and round the step away."""
    bits = x.view(np.uint16).astype(np.int32)
    away_from_zero = (y > x) == (x > 0)
    stepped = np.where(away_from_zero, bits + 1, bits - 1)
    tiniest = np.where(y > 0, 1, 0x8001)  # the smallest subnormal, signed toward y
    stepped = np.where(x == 0, tiniest, stepped).astype(np.uint16).view(_BF16)
    out = np.where(x == y, y, stepped)
    return np.where(np.isnan(x) | np.isnan(y), np.asarray(np.nan, _BF16), out).astype(_BF16)


def _nextafter_kernel(x, y):
    if x.dtype == _BF16:
        return _next_bfloat16(x, y)
    return np.nextafter(x, y)


_gcd = _binary("gcd", _accepting(_INTEGERS, np.gcd), kinds=_INTEGERS)
_lcm = _binary("lcm", _accepting(_INTEGERS, np.lcm), kinds=_INTEGERS)
_heaviside = defop(
    "heaviside",
    inputs=("input", "values"),
    meta=_heaviside_meta,
    sbp=_elementwise_sbp(),
    kernels={"cpu": _heaviside_kernel},
    differentiable=False,
    promote=None,
    elementwise=True,
    onnx=_heaviside_onnx,
)
_nextafter = _binary("nextafter", _accepting(_FLOATING, _nextafter_kernel), kinds=_FLOATING)


@checked
def gcd(input: Tensor, other: Tensor):
    """Elementwise greatest common divisor of integer tensors (non-negative; gcd(0, 0) = 0).

    >>> flow.gcd(flow.tensor([4, -6, 0]), flow.tensor([6, 9, 5]))
    tensor([2, 3, 5])
    """
    return dispatch(_gcd, (input, other), _NO_ATTRS)


@checked
def lcm(input: Tensor, other: Tensor):
    """Elementwise least common multiple of integer tensors (non-negative; 0 if either is 0).

    >>> flow.lcm(flow.tensor([4, -6, 0]), flow.tensor([6, 9, 5]))
    tensor([12, 18,  0])
    """
    return dispatch(_lcm, (input, other), _NO_ATTRS)


@checked
def heaviside(input: Tensor, values: Tensor):
    """The step function: 0 where `input` < 0 (or NaN), 1 where it is > 0 and `values` where it
    is 0. `values` broadcasts against `input` and must share its dtype. No gradient.

    >>> flow.heaviside(flow.tensor([-1.5, 0.0, 2.0]), flow.tensor(0.5))
    tensor([0.0000, 0.5000, 1.0000])
    """
    return dispatch(_heaviside, (input, values), _NO_ATTRS)


@checked
def nextafter(input: Tensor, other: Tensor):
    """The next floating point value after `input` in the direction of `other` (`other` where
    they are equal). No gradient.

    >>> flow.nextafter(flow.tensor([1.0]), flow.tensor([2.0])) - 1  # float32's epsilon
    tensor([1.1921e-07])
    """
    return dispatch(_nextafter, (input, other), _NO_ATTRS)


@checked
def ldexp(input: Tensor, other: Tensor):
    """`input * 2**other`; integer operands give the default float dtype.

    >>> flow.ldexp(flow.tensor([1.0, 3.0]), flow.tensor([3, -1]))
    tensor([8.0000, 1.5000])
    """
    dtype = dtypes.promote_types(input.dtype, other.dtype)
    if not (dtype.is_floating_point or dtype.is_complex):
        dtype = dtypes.get_default_dtype()
    # NOTE: in the operands' dtype, as PyTorch: 2**other is exact there, so the product
    # rounds once (a float32 power would make a half mantissa float32)
    return mul(input.to(dtype), pow(2.0, other.to(dtype)))


def _float_power_dtype(*operands) -> dtypes.DType:
    is_complex = any(
        isinstance(a, complex) or (isinstance(a, Tensor) and a.dtype.is_complex) for a in operands
    )
    return dtypes.complex128 if is_complex else dtypes.float64


@checked
def float_power(input: Tensor | Number, exponent: Tensor | Number):
    """`pow` computed in double precision: the result is float64 (complex128 for a complex
    operand) whatever the operands' dtypes.

    >>> flow.float_power(flow.tensor([2, 3]), 2)
    tensor([4., 9.], dtype=tideflow.float64)
    """
    if not isinstance(input, Tensor) and not isinstance(exponent, Tensor):
        raise ArgumentError(
            f"float_power(): expected a tensor among input and exponent, got "
            f"{type(input).__name__} and {type(exponent).__name__}"
        )
    wide = _float_power_dtype(input, exponent)
    base, power = (a.to(wide) if isinstance(a, Tensor) else a for a in (input, exponent))
    if not isinstance(base, Tensor):
        base = tensor(base, dtype=wide, **on_placement_of(power))
    return pow(base, power)


_float_power_inplace = inplace(float_power, "float_power_")


def _float_power_(self, exponent):
    """`float_power` in place: only a float64 (complex128) tensor can hold its result."""
    wide = _float_power_dtype(self, exponent)
    if self.dtype is not wide:
        raise DTypeError(
            f"float_power_: the base has dtype {self.dtype.name} but the result is {wide.name}"
        )
    return _float_power_inplace(self, exponent)


# -- maximum / minimum ----------------------------------------------------------------------
def _extremum_grad(loses):
    """maximum/minimum: the gradient goes to the operand selected (both when nan), split
    evenly at ties, as in PyTorch. `loses(a, b)`: where `a` is not selected."""

    def grad(ctx, gy):
        need_x, need_y = ctx.needs_input_grad
        x, y = ctx.input, ctx.other
        shared = where(x == y, gy / 2, gy)
        gx = where(loses(x, y), 0.0, shared) if need_x else None
        return gx, (where(loses(y, x), 0.0, shared) if need_y else None)

    return grad


def _nan_skipping_grad(wins):
    """fmax/fmin: the whole gradient goes to the operand selected, `input` at ties (and
    `input` where `other` is nan). `wins(x, y)`: where `x` is selected over a number `y`."""

    def grad(ctx, gy):
        need_x, need_y = ctx.needs_input_grad
        x, y = ctx.input, ctx.other
        x_selected = logical_or(wins(x, y), y != y)
        gx = where(x_selected, gy, 0.0) if need_x else None
        return gx, (where(x_selected, 0.0, gy) if need_y else None)

    return grad


_maximum = _binary(
    "maximum",
    _accepting(_ORDERED, np.maximum),
    kinds=_ORDERED,
    grad=_extremum_grad(lambda a, b: a < b),
    saves=_XY,
    scalar=lambda g, x, y: g.max(x, y),
    onnx=lambda g, x, y: nan_extremum(g, "Max", x, y),
)
_minimum = _binary(
    "minimum",
    _accepting(_ORDERED, np.minimum),
    kinds=_ORDERED,
    grad=_extremum_grad(lambda a, b: a > b),
    saves=_XY,
    scalar=lambda g, x, y: g.min(x, y),
    onnx=lambda g, x, y: nan_extremum(g, "Min", x, y),
)
# NOTE: fmax/fmin take the other operand where one is nan
_fmax = _binary(
    "fmax",
    _accepting(_ORDERED, np.fmax),
    kinds=_ORDERED,
    grad=_nan_skipping_grad(lambda a, b: a >= b),
    saves=_XY,
    scalar=lambda g, x, y: f"({x} if {x} >= {y} or {y} != {y} else {y})",
    onnx=_fextremum_onnx("Max"),
)
_fmin = _binary(
    "fmin",
    _accepting(_ORDERED, np.fmin),
    kinds=_ORDERED,
    grad=_nan_skipping_grad(lambda a, b: a <= b),
    saves=_XY,
    scalar=lambda g, x, y: f"({x} if {x} <= {y} or {y} != {y} else {y})",
    onnx=_fextremum_onnx("Min"),
)


def maximum(input, other):
    """Elementwise maximum; nan if either is nan. At ties the gradient is split evenly."""
    return dispatch(_maximum, (input, other), _NO_ATTRS)


def minimum(input, other):
    """Elementwise minimum; nan if either is nan. At ties the gradient is split evenly."""
    return dispatch(_minimum, (input, other), _NO_ATTRS)


def fmax(input, other):
    """Elementwise maximum that ignores nan: nan only where both operands are nan."""
    return dispatch(_fmax, (input, other), _NO_ATTRS)


def fmin(input, other):
    """Elementwise minimum that ignores nan: nan only where both operands are nan."""
    return dispatch(_fmin, (input, other), _NO_ATTRS)


# -- comparisons ----------------------------------------------------------------------------
def _comparison(name, kernel, symbol, onnx, kinds=None):
    return _binary(
        name,
        kernel if kinds is None else _accepting(kinds, kernel),
        kinds=kinds,
        out_dtype=dtypes.bool_,
        scalar=lambda g, x, y: f"{x} {symbol} {y}",
        onnx=onnx,
    )


_eq = _comparison("eq", np.equal, "==", onnx_binary("Equal"))
_ne = _comparison("ne", np.not_equal, "!=", onnx_binary("Equal", negate=True))
_lt = _comparison("lt", np.less, "<", onnx_binary("Less"), _ORDERED)
_le = _comparison("le", np.less_equal, "<=", onnx_binary("LessOrEqual"), _ORDERED)
_gt = _comparison("gt", np.greater, ">", onnx_binary("Greater"), _ORDERED)
_ge = _comparison("ge", np.greater_equal, ">=", onnx_binary("GreaterOrEqual"), _ORDERED)


def eq(input, other):
    """`input == other` elementwise, as a bool tensor (operands promoted first)."""
    return dispatch(_eq, (input, other), _NO_ATTRS)


def ne(input, other):
    """`input != other` elementwise, as a bool tensor."""
    return dispatch(_ne, (input, other), _NO_ATTRS)


def lt(input, other):
    """`input < other` elementwise, as a bool tensor."""
    return dispatch(_lt, (input, other), _NO_ATTRS)


def le(input, other):
    """`input <= other` elementwise, as a bool tensor."""
    return dispatch(_le, (input, other), _NO_ATTRS)


def gt(input, other):
    """`input > other` elementwise, as a bool tensor."""
    return dispatch(_gt, (input, other), _NO_ATTRS)


def ge(input, other):
    """`input >= other` elementwise, as a bool tensor."""
    return dispatch(_ge, (input, other), _NO_ATTRS)


greater = gt
greater_equal = ge
less = lt
less_equal = le
not_equal = ne


# -- logical and bitwise --------------------------------------------------------------------
def _truth(a):
    """Nonzero as True (nan included), for operands of any dtype (bfloat16 too)."""
    if type(a) is _ndarray:
        return a if a.dtype == np.bool_ else a != 0
    return bool(a)


def _logical(name, ufunc, symbol, op_type):
    # No promotion: each operand is read as truth values in its own dtype.
    return _binary(
        name,
        lambda x, y: ufunc(_truth(x), _truth(y)),
        promote=None,
        out_dtype=dtypes.bool_,
        scalar=lambda g, x, y: f"{g.truth(x, 0)} {symbol} {g.truth(y, 1)}",
        onnx=lambda g, x, y: g.op(op_type, *(as_bool(g, a) for a in operands_like(g, x, y))),
    )


def _bitwise(name, ufunc, symbol, op_type):
    def lower(g, x, y):
        x, y = operands_like(g, x, y)
        if g.meta(x).dtype is dtypes.bool_:
            return g.op(op_type, x, y)
        opset_at_least(g, 18, name)
        return g.op("Bitwise" + op_type, x, y)

    return _binary(name, ufunc, kinds=_BITS, scalar=lambda g, x, y: f"{x} {symbol} {y}", onnx=lower)


_logical_and = _logical("logical_and", np.logical_and, "&", "And")
_logical_or = _logical("logical_or", np.logical_or, "|", "Or")
_logical_xor = _logical("logical_xor", np.logical_xor, "!=", "Xor")
_bitwise_and = _bitwise("bitwise_and", np.bitwise_and, "&", "And")
_bitwise_or = _bitwise("bitwise_or", np.bitwise_or, "|", "Or")
_bitwise_xor = _bitwise("bitwise_xor", np.bitwise_xor, "^", "Xor")
# NumPy and PyTorch agree past the width: << gives 0, >> the sign fill; so do negative shifts.
# NumPy shifts bools (as int8): PyTorch does not.
_left_shift = _binary("bitwise_left_shift", _accepting(_INTEGERS, np.left_shift), kinds=_INTEGERS)
_right_shift = _binary(
    "bitwise_right_shift", _accepting(_INTEGERS, np.right_shift), kinds=_INTEGERS
)


@checked
def logical_and(input: Tensor | Number, other: Tensor | Number):
    """Elementwise `input and other` of the operands' truth values (nonzero is True)."""
    return dispatch(_logical_and, (input, other), _NO_ATTRS)


@checked
def logical_or(input: Tensor | Number, other: Tensor | Number):
    """Elementwise `input or other` of the operands' truth values (nonzero is True)."""
    return dispatch(_logical_or, (input, other), _NO_ATTRS)


@checked
def logical_xor(input: Tensor | Number, other: Tensor | Number):
    """Elementwise exclusive or of the operands' truth values (nonzero is True)."""
    return dispatch(_logical_xor, (input, other), _NO_ATTRS)


def bitwise_and(input, other):
    """Bitwise AND of integer tensors; logical AND of bool tensors (`&`)."""
    return dispatch(_bitwise_and, (input, other), _NO_ATTRS)


def bitwise_or(input, other):
    """Bitwise OR of integer tensors; logical OR of bool tensors (`|`)."""
    return dispatch(_bitwise_or, (input, other), _NO_ATTRS)


def bitwise_xor(input, other):
    """Bitwise XOR of integer tensors; logical XOR of bool tensors (`^`)."""
    return dispatch(_bitwise_xor, (input, other), _NO_ATTRS)


def bitwise_left_shift(input, other):
    """`input << other` for integer tensors; shifts past the width give 0."""
    return dispatch(_left_shift, (input, other), _NO_ATTRS)


def bitwise_right_shift(input, other):
    """`input >> other` (arithmetic for signed types); shifts past the width give the sign."""
    return dispatch(_right_shift, (input, other), _NO_ATTRS)


# -- where ----------------------------------------------------------------------------------
def _where_meta(condition, input, other) -> Meta:
    if not isinstance(condition, Meta) or condition.dtype is not dtypes.bool_:
        got = condition.dtype.name if isinstance(condition, Meta) else repr(condition)
        raise DTypeError(f"where: expected condition to be a bool tensor, got {got}")
    values = [m for m in (input, other) if isinstance(m, Meta)]
    shape = broadcast_shapes("where", condition.shape, *(m.shape for m in values))
    return Meta(shape, values[0].dtype)


def _where_kernel(condition, input, other):
    if condition.dtype != np.bool_:
        raise TypeError("condition is not bool")
    out = np.where(condition, input, other)
    if type(input) is _ndarray and type(other) is _ndarray:
        return out
    return _round_to_bfloat16(out, input if type(input) is _ndarray else other)


def _where_grad(ctx, gy):
    _, need_x, need_y = ctx.needs_input_grad
    condition = ctx.condition
    gx = where(condition, gy, 0.0) if need_x else None
    return None, gx, (where(condition, 0.0, gy) if need_y else None)


_where = defop(
    "where",
    inputs=("condition", "input", "other"),
    meta=_where_meta,
    sbp=_elementwise_sbp((1, 2)),
    kernels={"cpu": _where_kernel},
    grad=_where_grad,
    saves=("condition",),
    promote="common",
    promote_args=(1, 2),
    elementwise=True,
    scalar=lambda g, condition, x, y: f"({x} if {condition} else {y})",
    onnx=_where_onnx,
)


def where(condition, input=None, other=None):
    """`input` where `condition` (a bool tensor) is True, else `other`, broadcasting all
    three. `input` and `other` (tensors or scalars) are promoted together. With the condition
    alone it is `nonzero(condition, as_tuple=True)`.

    >>> flow.where(x > 0, x, 0.0)
    """
    tensor_arg("where", "condition", 1, condition)
    if input is None and other is None:
        return _where_single(condition)
    if input is None or other is None:
        raise TypeError("where: expected both input and other, or neither")
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        # Two scalars promote like two 0-d tensors (where(c, 1, 2.5) is float32).
        input = tensor(input, **on_placement_of(condition))
    return dispatch(_where, (condition, input, other), _NO_ATTRS)


# -- lerp, addcmul, addcdiv -----------------------------------------------------------------
def _lerp_meta(input, end, weight) -> Meta:
    def bad(what: str):
        return DTypeError(
            f"lerp: {what} (operands {_describe((input, end, weight))}); input, end and a "
            "weight tensor with dimensions must share one floating point dtype"
        )

    if not isinstance(input, Meta) or not isinstance(end, Meta):
        raise bad("input and end must be tensors")
    if not input.dtype.is_floating_point:
        raise bad(f"expected a floating point input, got {input.dtype.name}")
    if end.dtype is not input.dtype:
        raise bad(f"expected dtype {input.dtype.name} for end, got {end.dtype.name}")
    if isinstance(weight, Meta):
        if weight.shape and weight.dtype is not input.dtype:
            raise bad(f"expected dtype {input.dtype.name} for weight, got {weight.dtype.name}")
        if not weight.dtype.is_floating_point:
            raise bad(f"expected a floating point weight, got {weight.dtype.name}")
    shapes = [m.shape for m in (input, end, weight) if isinstance(m, Meta)]
    return Meta(broadcast_shapes("lerp", *shapes), input.dtype)


@_opmath
def _lerp_compute(input, end, weight):
    # PyTorch's two-sided formula: exact at weight 0 and at weight 1
    diff = end - input
    if type(weight) is not _ndarray:
        return input + weight * diff if abs(weight) < 0.5 else end - diff * (1 - weight)
    weight = weight.astype(input.dtype, copy=False)  # a 0-d weight may be another float
    return np.where(np.abs(weight) < 0.5, input + weight * diff, end - diff * (1 - weight))


def _lerp_kernel(input, end, weight):
    # input and end share a float dtype (bfloat16's kind is 'V'), and so does a weight tensor
    # unless it is 0-d: that may be any float
    ok = input.dtype.kind in "fV" and end.dtype == input.dtype
    if type(weight) is _ndarray:
        ok = ok and weight.dtype.kind in "fV" and (weight.ndim == 0 or weight.dtype == input.dtype)
    if not ok:
        raise TypeError("lerp: dtypes")
    return _lerp_compute(input, end, weight)


def _lerp_grad(ctx, gy):
    need_x, need_end, need_weight = ctx.needs_input_grad
    weight = ctx.weight
    gx = gy * (1 - weight) if need_x else None
    gend = gy * weight if need_end else None
    return gx, gend, (gy * (ctx.end - ctx.input) if need_weight else None)


_lerp = defop(
    "lerp",
    inputs=("input", "end", "weight"),
    meta=_lerp_meta,
    sbp=_elementwise_sbp((0, 1)),
    kernels={"cpu": _lerp_kernel},
    grad=_lerp_grad,
    saves=("input", "end", "weight"),
    elementwise=True,
    scalar=_float_rule(
        lambda g, x, end, w: (
            f"({x} + {w} * ({end} - {x}) if abs({w}) < {g.c(0.5)} "
            f"else {end} - ({end} - {x}) * ({g.c(1)} - {w}))"
        )
    ),
    onnx=_lerp_onnx,
)


@checked
def lerp(input: Tensor, end: Tensor, weight: Tensor | Number):
    """Linear interpolation `input + weight * (end - input)`; `weight` is a scalar or a tensor,
    and all three broadcast. input and end must share a floating point dtype."""
    return dispatch(_lerp, (input, end, weight), _NO_ATTRS)


def _ternary_meta(name: str, kinds: _Kinds):
    base = _elementwise_meta(name, kinds)

    def meta(input, tensor1, tensor2, *, value) -> Meta:
        return base(input, tensor1, tensor2)

    return meta


@_opmath
def _addcmul_compute(input, tensor1, tensor2, *, value):
    return input + value * tensor1 * tensor2


def _addcmul_kernel(input, tensor1, tensor2, *, value):
    if _dtype_of((input, tensor1, tensor2)).kind in "iu":
        value = int(value)  # PyTorch casts value to the tensors' dtype (truncating)
    return _addcmul_compute(input, tensor1, tensor2, value=value)


@_opmath
def _addcdiv_kernel(input, tensor1, tensor2, *, value):
    return input + value * tensor1 / tensor2


def _addcmul_grad(ctx, gy):
    need_x, need_1, need_2 = ctx.needs_input_grad
    scaled = gy * ctx.value
    g1 = scaled * ctx.tensor2 if need_1 else None
    return (gy if need_x else None), g1, (scaled * ctx.tensor1 if need_2 else None)


def _addcdiv_grad(ctx, gy):
    need_x, need_1, need_2 = ctx.needs_input_grad
    t1, t2 = ctx.tensor1, ctx.tensor2
    scaled = gy * ctx.value
    g1 = scaled / t2 if need_1 else None
    return (gy if need_x else None), g1, (-scaled * t1 / (t2 * t2) if need_2 else None)


_T12 = ("tensor1", "tensor2")
_addcmul = defop(
    "addcmul",
    inputs=("input", *_T12),
    meta=_ternary_meta("addcmul", _NUMBERS),
    sbp=_elementwise_sbp((0, 1), (0, 2)),
    kernels={"cpu": _accepting(_NUMBERS, _addcmul_kernel)},
    grad=_addcmul_grad,
    saves=_T12,
    promote="common",
    elementwise=True,
    scalar=lambda g, x, t1, t2, *, value: (
        None
        if g.dtype.kind == "b"
        else f"{x} + {g.c(int(value) if g.integral else value)} * {t1} * {t2}"
    ),
    onnx=_addc_onnx("Mul"),
)
_addcdiv = defop(
    "addcdiv",
    inputs=("input", *_T12),
    meta=_ternary_meta("addcdiv", _NUMBERS),
    sbp=_elementwise_sbp((0, 1)),
    kernels={"cpu": _addcdiv_kernel},
    grad=_addcdiv_grad,
    saves=_T12,
    promote="common",
    elementwise=True,
    scalar=_float_rule(lambda g, x, t1, t2, *, value: f"{x} + {g.c(value)} * {t1} / {t2}"),
    onnx=_addc_onnx("Div"),
)


def addcmul(input, tensor1, tensor2, *, value=1):
    """`input + value * tensor1 * tensor2`, broadcasting all three (one fused kernel)."""
    return dispatch(_addcmul, (input, tensor1, tensor2), {"value": value})


def addcdiv(input, tensor1, tensor2, *, value=1):
    """`input + value * tensor1 / tensor2`, broadcasting all three. The quotient is a true
    division: tensor1 and tensor2 may not both be integer (PyTorch's rule)."""
    if not (_is_floating(tensor1) or _is_floating(tensor2)):
        raise DTypeError(
            f"addcdiv: integer division with addcdiv is not supported (operands "
            f"{_describe(_metas((input, tensor1, tensor2)))}); use input + value * "
            "div(tensor1, tensor2, rounding_mode='trunc') for the historic behavior"
        )
    return dispatch(_addcdiv, (input, tensor1, tensor2), {"value": value})


def _is_floating(a) -> bool:
    return isinstance(a, float) or (isinstance(a, Tensor) and a.dtype.is_floating_point)


# -- closeness ------------------------------------------------------------------------------
def _isclose_meta(input, other, *, rtol, atol, equal_nan) -> Meta:
    if not isinstance(input, Meta):
        raise TypeError(f"isclose: expected input to be a tensor, got {input!r}")
    if isinstance(other, Meta) and other.dtype is not input.dtype:
        raise DTypeError(
            f"isclose: expected both tensors to have the same dtype, got {input.dtype.name} "
            f"and {other.dtype.name}"
        )
    shapes = [m.shape for m in (input, other) if isinstance(m, Meta)]
    return Meta(broadcast_shapes("isclose", *shapes), dtypes.bool_)


def _isclose_kernel(input, other, *, rtol, atol, equal_nan):
    if type(other) is _ndarray and other.dtype != input.dtype:
        raise TypeError("isclose dtypes")
    close = input == other
    if input.dtype == np.bool_:
        return close
    if input.dtype.kind in "iu":  # no nan; differences in float64 (exact up to 2**53)
        input = input.astype(_F64)
        other = other.astype(_F64) if type(other) is _ndarray else other
    elif equal_nan:
        close |= np.isnan(input) & np.isnan(other)
    diff = np.abs(input - other)
    # finite: inf == inf was settled above, and inf - inf must not count as close
    close |= np.isfinite(diff) & (diff <= atol + rtol * np.abs(other))
    return close


_isclose = defop(
    "isclose",
    inputs=("input", "other"),
    meta=_isclose_meta,
    sbp=_elementwise_sbp(),
    kernels={"cpu": _isclose_kernel},
    elementwise=True,
    onnx=_isclose_onnx,
)


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Elementwise `|input - other| <= atol + rtol * |other|` (or equal), as a bool tensor;
    nan is close to nan only with `equal_nan`. Both tensors must have one dtype."""
    if rtol < 0 or atol < 0:
        raise TideflowError(
            f"isclose: rtol and atol must be greater than or equal to zero, got rtol={rtol}, "
            f"atol={atol}"
        )
    attrs = {"rtol": rtol, "atol": atol, "equal_nan": equal_nan}
    return dispatch(_isclose, (input, other), attrs)


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False) -> bool:
    """Whether every element of `input` is close to `other` (see `isclose`): a Python bool."""
    return bool(isclose(input, other, rtol, atol, equal_nan).all())


def equal(input, other) -> bool:
    """Whether both tensors have the same shape and the same values: a Python bool (dtypes
    may differ; nan is never equal)."""
    if tuple(input.shape) != tuple(other.shape):
        return False
    return bool(eq(input, other).all())


# -- Tensor methods -------------------------------------------------------------------------
def _swapped(fn):
    """`other <op> self` for the reflected dunders (`2 ** x`, `5 % x`)."""

    def reflected(self, other):
        return fn(other, self)

    reflected.__name__ = f"r{fn.__name__}"
    return reflected


_COMPARABLE = (Tensor, int, float, complex, np.generic)  # bool is an int


def _comparison_dunder(fn):
    """Comparisons with other types fall back to Python, as in PyTorch: `x == None` is False,
    `x != None` True and `x < None` a TypeError."""

    def compare(self, other):
        if isinstance(other, np.ndarray) and other.ndim == 0:
            other = other[()]  # a 0-d array is a number (NumPy defers to tensors' operators)
        if not isinstance(other, _COMPARABLE):
            return NotImplemented
        return fn(self, other)

    compare.__name__ = fn.__name__
    return compare


def _where_method(self, condition, other):
    """`x.where(condition, y)` is `where(condition, x, y)`."""
    return where(condition, self, other)


methods(
    add=add,
    sub=sub,
    mul=mul,
    div=div,
    subtract=sub,
    multiply=mul,
    divide=div,
    true_divide=div,
    floor_divide=floor_divide,
    remainder=remainder,
    fmod=fmod,
    pow=pow,
    atan2=atan2,
    arctan2=atan2,
    hypot=hypot,
    copysign=copysign,
    xlogy=xlogy,
    logaddexp=logaddexp,
    logaddexp2=logaddexp2,
    gcd=gcd,
    lcm=lcm,
    heaviside=heaviside,
    nextafter=nextafter,
    ldexp=ldexp,
    float_power=float_power,
    maximum=maximum,
    minimum=minimum,
    fmax=fmax,
    fmin=fmin,
    eq=eq,
    ne=ne,
    lt=lt,
    le=le,
    gt=gt,
    ge=ge,
    greater=gt,
    greater_equal=ge,
    less=lt,
    less_equal=le,
    not_equal=ne,
    logical_and=logical_and,
    logical_or=logical_or,
    logical_xor=logical_xor,
    bitwise_and=bitwise_and,
    bitwise_or=bitwise_or,
    bitwise_xor=bitwise_xor,
    bitwise_left_shift=bitwise_left_shift,
    bitwise_right_shift=bitwise_right_shift,
    where=_where_method,
    lerp=lerp,
    addcmul=addcmul,
    addcdiv=addcdiv,
    isclose=isclose,
    allclose=allclose,
    equal=equal,
    __add__=add,
    __radd__=add,
    __sub__=sub,
    __rsub__=_swapped(sub),
    __mul__=mul,
    __rmul__=mul,
    __truediv__=div,
    __rtruediv__=_swapped(div),
    __floordiv__=floor_divide,
    __rfloordiv__=_swapped(floor_divide),
    __mod__=remainder,
    __rmod__=_swapped(remainder),
    __pow__=pow,
    __rpow__=_swapped(pow),
    __eq__=_comparison_dunder(eq),
    __ne__=_comparison_dunder(ne),
    __lt__=_comparison_dunder(lt),
    __le__=_comparison_dunder(le),
    __gt__=_comparison_dunder(gt),
    __ge__=_comparison_dunder(ge),
    __and__=bitwise_and,
    __rand__=bitwise_and,
    __or__=bitwise_or,
    __ror__=bitwise_or,
    __xor__=bitwise_xor,
    __rxor__=bitwise_xor,
    __lshift__=bitwise_left_shift,
    __rlshift__=_swapped(bitwise_left_shift),
    __rshift__=bitwise_right_shift,
    __rrshift__=_swapped(bitwise_right_shift),
    add_=inplace(add, "add_"),
    sub_=inplace(sub, "sub_"),
    mul_=inplace(mul, "mul_"),
    div_=inplace(div, "div_"),
    subtract_=inplace(sub, "subtract_"),
    multiply_=inplace(mul, "multiply_"),
    divide_=inplace(div, "divide_"),
    true_divide_=inplace(div, "true_divide_"),
    floor_divide_=inplace(floor_divide, "floor_divide_"),
    remainder_=inplace(remainder, "remainder_"),
    fmod_=inplace(fmod, "fmod_"),
    pow_=inplace(pow, "pow_"),
    atan2_=inplace(atan2, "atan2_"),
    arctan2_=inplace(atan2, "arctan2_"),
    hypot_=inplace(hypot, "hypot_"),
    copysign_=inplace(copysign, "copysign_"),
    xlogy_=inplace(xlogy, "xlogy_"),
    eq_=inplace(eq, "eq_"),
    ne_=inplace(ne, "ne_"),
    lt_=inplace(lt, "lt_"),
    le_=inplace(le, "le_"),
    gt_=inplace(gt, "gt_"),
    ge_=inplace(ge, "ge_"),
    greater_=inplace(gt, "greater_"),
    greater_equal_=inplace(ge, "greater_equal_"),
    less_=inplace(lt, "less_"),
    less_equal_=inplace(le, "less_equal_"),
    not_equal_=inplace(ne, "not_equal_"),
    gcd_=inplace(gcd, "gcd_"),
    lcm_=inplace(lcm, "lcm_"),
    heaviside_=inplace(heaviside, "heaviside_"),
    nextafter_=inplace(nextafter, "nextafter_"),
    ldexp_=inplace(ldexp, "ldexp_"),
    float_power_=_float_power_,
    logical_and_=inplace(logical_and, "logical_and_"),
    logical_or_=inplace(logical_or, "logical_or_"),
    logical_xor_=inplace(logical_xor, "logical_xor_"),
    bitwise_and_=inplace(bitwise_and, "bitwise_and_"),
    bitwise_or_=inplace(bitwise_or, "bitwise_or_"),
    bitwise_xor_=inplace(bitwise_xor, "bitwise_xor_"),
    bitwise_left_shift_=inplace(bitwise_left_shift, "bitwise_left_shift_"),
    bitwise_right_shift_=inplace(bitwise_right_shift, "bitwise_right_shift_"),
    lerp_=inplace(lerp, "lerp_"),
    addcmul_=inplace(addcmul, "addcmul_"),
    addcdiv_=inplace(addcdiv, "addcdiv_"),
    __iadd__=inplace(add, "__iadd__"),
    __isub__=inplace(sub, "__isub__"),
    __imul__=inplace(mul, "__imul__"),
    __itruediv__=inplace(div, "__itruediv__"),
    __ifloordiv__=inplace(floor_divide, "__ifloordiv__"),
    __imod__=inplace(remainder, "__imod__"),
    __ipow__=inplace(pow, "__ipow__"),
    __iand__=inplace(bitwise_and, "__iand__"),
    __ior__=inplace(bitwise_or, "__ior__"),
    __ixor__=inplace(bitwise_xor, "__ixor__"),
    __ilshift__=inplace(bitwise_left_shift, "__ilshift__"),
    __irshift__=inplace(bitwise_right_shift, "__irshift__"),
)
