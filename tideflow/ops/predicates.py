"""Tests of values and of tensors that PyTorch has at the top level: signbit, isneginf,
isposinf, isreal (elementwise, boolean results), is_nonzero, is_same_size, is_signed."""

from __future__ import annotations

import numpy as np

from ..framework import dtype as dtypes
from ..framework.errors import DTypeError, Rejected, TideflowError
from ..framework.tensor import Tensor
from ._rules import Meta, checked, defop, dispatch, elementwise_sbp, methods
from .creation import ones_like
from .unary import isinf

__all__ = ["is_nonzero", "is_same_size", "is_signed", "isneginf", "isposinf", "isreal", "signbit"]


def _refuse_complex(op: str, x) -> None:
    if x.dtype.is_complex:
        raise DTypeError(f"{op}: does not support complex inputs, got {x.dtype.name}")


def _signbit_meta(x: Meta) -> Meta:
    _refuse_complex("signbit", x)
    return Meta(x.shape, dtypes.bool_)


def _signbit_kernel(x):
    if x.dtype.kind == "c":
        raise Rejected("signbit: complex operand")  # the meta rule names it
    if x.dtype.kind in "iub":  # integers are negative or not, bools never
        return x < 0
    # NOTE: the sign bit itself (-0.0 and a negative NaN included), read from the bits: NumPy's
    # signbit goes through float32 for the half types and loses a NaN's sign
    bits = x.view(np.dtype(f"u{x.dtype.itemsize}"))
    return (bits >> (8 * x.dtype.itemsize - 1)).astype(bool)


_signbit = defop(
    "signbit",
    inputs=("input",),
    meta=_signbit_meta,
    sbp=elementwise_sbp(),
    kernels={"cpu": _signbit_kernel},
    differentiable=False,
)


@checked
def signbit(input: Tensor):
    """Whether each element's sign bit is set: True for negative numbers, -0.0 and -nan.

    >>> flow.signbit(flow.tensor([-1.0, -0.0, 0.0, 2.0]))
    tensor([ True,  True, False, False])
    """
    return dispatch(_signbit, (input,), {})


@checked
def isneginf(input: Tensor):
    """Whether each element is -inf (never, for integers and bools).

    >>> flow.isneginf(flow.tensor([-float("inf"), 1.0, float("inf")]))
    tensor([ True, False, False])
    """
    _refuse_complex("isneginf", input)
    return isinf(input) & signbit(input)


@checked
def isposinf(input: Tensor):
    """Whether each element is +inf (never, for integers and bools).

    >>> flow.isposinf(flow.tensor([-float("inf"), 1.0, float("inf")]))
    tensor([False, False,  True])
    """
    _refuse_complex("isposinf", input)
    return isinf(input) & ~signbit(input)


@checked
def isreal(input: Tensor):
    """Whether each element is real: its imaginary part is 0 (always, for real dtypes).

    >>> flow.isreal(flow.tensor([1 + 1j, 2 + 0j]))
    tensor([False,  True])
    """
    if input.dtype.is_complex:
        return input.imag == 0
    return ones_like(input, dtype=dtypes.bool_)


@checked
def is_nonzero(input: Tensor) -> bool:
    """Whether a tensor of one element is not 0 (False, 0.0, 0j).

    >>> flow.is_nonzero(flow.tensor([1.5]))
    True
    """
    if input.numel() != 1:
        what = "no values" if input.numel() == 0 else "more than one value"
        raise TideflowError(f"is_nonzero: Boolean value of Tensor with {what} is ambiguous")
    return bool(input.item() != 0)


@checked
def is_same_size(input: Tensor, other: Tensor) -> bool:
    """Whether the two tensors have the same shape.

    >>> flow.is_same_size(flow.ones(2, 3), flow.zeros(2, 3))
    True
    """
    return tuple(input.shape) == tuple(other.shape)


@checked
def is_signed(input: Tensor) -> bool:
    """Whether the tensor's dtype holds negative numbers (not bool, not unsigned).

    >>> flow.is_signed(flow.tensor([1], dtype=flow.uint8))
    False
    """
    return input.dtype not in (dtypes.bool_, dtypes.uint8)


methods(
    signbit=signbit,
    isneginf=isneginf,
    isposinf=isposinf,
    isreal=isreal,
    is_nonzero=is_nonzero,
    is_same_size=is_same_size,
    is_signed=is_signed,
)
