"""Binary elementwise ops: arithmetic, comparison, logical, bitwise, and their relatives.

Operands are tensors or Python scalars and broadcast like NumPy/PyTorch. Gradients are
returned at the broadcast shape; the autograd engine reduces them to each operand's shape.
"""

from __future__ import annotations

import numpy as np

from ..framework.dispatch import inplace
from ..framework.tensor import Tensor
from ._rules import defop, dispatch, elementwise_meta, elementwise_sbp, methods

__all__ = ["add", "sub", "mul", "div", "subtract", "multiply", "divide", "true_divide"]


_NO_ATTRS: dict = {}


def _binary(name, kernel, *, grad=None, saves=(), promote="common", partial=None, out_dtype=None):
    return defop(
        name,
        inputs=("input", "other"),
        meta=elementwise_meta(name, out_dtype),
        sbp=elementwise_sbp(partial),
        kernels={"cpu": kernel},
        grad=grad,
        saves=saves,
        promote=promote,
    )


def _mul_grad(ctx, gy):
    need_x, need_y = ctx.needs_input_grad
    return (gy * ctx.other if need_x else None, gy * ctx.input if need_y else None)


def _div_grad(ctx, gy):
    need_x, need_y = ctx.needs_input_grad
    gx = gy / ctx.other if need_x else None
    gother = -gy * ctx.out / ctx.other if need_y else None
    return gx, gother


_add = _binary("add", np.add, grad=lambda ctx, gy: (gy, gy), partial="linear")
_sub = _binary("sub", np.subtract, grad=lambda ctx, gy: (gy, -gy), partial="linear")
_mul = _binary("mul", np.multiply, grad=_mul_grad, saves=("input", "other"), partial="one")
_div = _binary(
    "div",
    np.true_divide,
    grad=_div_grad,
    saves=("other", "out"),
    promote="float",
    partial=None,
)


def add(input, other, *, alpha=1):
    """`input + alpha * other`, broadcasting. `flow.add(x, y, alpha=2)`"""
    if alpha != 1:
        other = mul(other, alpha) if isinstance(other, Tensor) else other * alpha
    return dispatch(_add, (input, other), _NO_ATTRS)


def sub(input, other, *, alpha=1):
    """`input - alpha * other`, broadcasting."""
    if alpha != 1:
        other = mul(other, alpha) if isinstance(other, Tensor) else other * alpha
    return dispatch(_sub, (input, other), _NO_ATTRS)


def mul(input, other):
    """Elementwise product, broadcasting."""
    return dispatch(_mul, (input, other), _NO_ATTRS)


def div(input, other, *, rounding_mode=None):
    """True division (`rounding_mode=None`), or 'trunc' / 'floor' rounding."""
    if rounding_mode is None:
        return dispatch(_div, (input, other), _NO_ATTRS)
    raise NotImplementedError("div rounding_mode")


subtract = sub
multiply = mul
divide = div
true_divide = div


def _rsub(self, other):
    return sub(other, self)


def _rdiv(self, other):
    return div(other, self)


methods(
    add=add,
    sub=sub,
    mul=mul,
    div=div,
    subtract=sub,
    multiply=mul,
    divide=div,
    true_divide=div,
    __add__=add,
    __radd__=add,
    __sub__=sub,
    __rsub__=_rsub,
    __mul__=mul,
    __rmul__=mul,
    __truediv__=div,
    __rtruediv__=_rdiv,
    add_=inplace(add, "add_"),
    sub_=inplace(sub, "sub_"),
    mul_=inplace(mul, "mul_"),
    div_=inplace(div, "div_"),
    __iadd__=inplace(add, "__iadd__"),
    __isub__=inplace(sub, "__isub__"),
    __imul__=inplace(mul, "__imul__"),
    __itruediv__=inplace(div, "__itruediv__"),
)
