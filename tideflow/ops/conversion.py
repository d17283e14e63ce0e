"""Copies and conversions: cast between dtypes, clone, contiguous, and `Tensor.to`."""

from __future__ import annotations

import numpy as np

from ..framework import dtype as dtypes
from ..framework.device import check_available
from ..framework.device import device as Device
from ..framework.dispatch import inplace
from ..framework.tensor import Tensor
from ._onnx_rules import onnx_unary
from ._rules import Meta, checked, defop, dispatch, elementwise_sbp, methods, same_meta
from .creation import full_like

__all__ = ["cast", "clone", "contiguous"]


_NO_ATTRS: dict = {}


def _cast_scalar(g, x, *, dtype):
    """Conversions that agree with NumPy's on every value: to bool, to floats, and between
    integers (wrapping); float -> int differs on nan, inf and out-of-range values."""
    # NOTE: generated loops hold bfloat16 values as float32 and round them as they store
    to = np.dtype(np.float32 if dtype is dtypes.bfloat16 else dtype.np)
    if to.kind == "b":
        return g.truth(x, 0)
    if to.kind in "iu" and g.floating:
        return None
    return f"np.{to.name}({x})" if to.kind in "fiu" else None


_LINEAR_SBP = elementwise_sbp(partial="linear")
_SPLIT_SBP = elementwise_sbp()


def _cast_sbp(x: Meta, *, dtype) -> list:
    """Partial sums survive conversions that are linear: to floating or complex dtypes and
    between integers (which wrap); to integers from floating or complex dtypes truncates each
    part and bool saturates, so those refuse P."""
    to, source = np.dtype(dtype.np).kind, np.dtype(x.dtype.np).kind
    linear = dtype.is_floating_point or to == "c" or (to in "iu" and source in "iu")
    return (_LINEAR_SBP if linear else _SPLIT_SBP)(x, dtype=dtype)


_cast = defop(
    "cast",
    inputs=("input",),
    meta=lambda x, *, dtype: Meta(x.shape, dtype),
    sbp=_cast_sbp,
    # NOTE: complex to real keeps the real part, as PyTorch does (NumPy would warn).
    kernels={"cpu": lambda x, *, dtype: (x.real if dtype.np.kind != "c" else x).astype(dtype.np)},
    # NOTE: the engine casts a gradient back to its input's dtype, so the rule passes it on.
    grad=lambda ctx, gy: (gy,),
    elementwise=True,
    scalar=_cast_scalar,
    onnx=lambda g, x, *, dtype: g.cast(x, dtype),
)
_clone = defop(
    "clone",
    inputs=("input",),
    meta=same_meta,
    sbp=elementwise_sbp(partial="linear"),
    kernels={"cpu": lambda x: np.array(x, copy=True)},
    grad=lambda ctx, gy: (gy,),
    elementwise=True,
    scalar=lambda g, x: x,
    onnx=onnx_unary("Identity"),
)
_contiguous = defop(
    "contiguous",
    inputs=("input",),
    meta=same_meta,
    sbp=elementwise_sbp(partial="linear"),
    kernels={"cpu": lambda x: np.array(x, copy=True, order="C")},
    grad=lambda ctx, gy: (gy,),
    elementwise=True,
    scalar=lambda g, x: x,
    onnx=onnx_unary("Identity"),
)


def cast(input, dtype) -> Tensor:
    """A copy of `input` converted to `dtype` (float -> int truncates toward zero)."""
    return dispatch(_cast, (input,), {"dtype": dtypes.to_dtype(dtype)})


@checked
def clone(input: Tensor, *, memory_format=None) -> Tensor:
    """A copy that is differentiable (its gradient flows back to `input`)."""
    return dispatch(_clone, (input,), _NO_ATTRS)


def contiguous(input, memory_format=None) -> Tensor:
    """`input` itself when C-contiguous, else a contiguous copy."""
    if input._data.flags.c_contiguous:
        return input
    return dispatch(_contiguous, (input,), _NO_ATTRS)


def _to(self, *args, dtype=None, device=None, copy=False, non_blocking=False):
    """`to(dtype)`, `to(device)`, `to(device, dtype)`, `to(other_tensor)`."""
    for a in args:
        if isinstance(a, Tensor):
            dtype = a.dtype
        elif isinstance(a, str | Device) and not (isinstance(a, str) and a in dtypes._NAMES):
            device = a
        else:
            dtype = a
    if device is not None:
        check_available(device)
    if dtype is not None:
        dtype = dtypes.to_dtype(dtype)
        if dtype.np != self._data.dtype:
            return cast(self, dtype)
    return clone(self) if copy else self


def _type_method(dtype):
    def method(self, memory_format=None):
        return _to(self, dtype)

    method.__name__ = dtype.name
    return method


def _type(self, dtype=None):
    if dtype is None:
        return f"tideflow.{self.dtype.name.capitalize()}Tensor"
    return _to(self, dtype)


def _copied(self, src, non_blocking=False):
    """`src` as `self` would hold it: cast to its dtype and broadcast to its shape."""
    if not isinstance(src, Tensor):
        return full_like(self, src)
    return (
        cast(src, self.dtype).expand(tuple(self.shape))
        if src.dtype != self.dtype
        else (src.expand(tuple(self.shape)))
    )


methods(
    copy_=inplace(_copied, "copy_"),
    to=_to,
    type=_type,
    clone=clone,
    contiguous=contiguous,
    float=_type_method(dtypes.float32),
    double=_type_method(dtypes.float64),
    half=_type_method(dtypes.float16),
    bfloat16=_type_method(dtypes.bfloat16),
    cfloat=_type_method(dtypes.complex64),
    cdouble=_type_method(dtypes.complex128),
    long=_type_method(dtypes.int64),
    int=_type_method(dtypes.int32),
    short=_type_method(dtypes.int16),
    char=_type_method(dtypes.int8),
    byte=_type_method(dtypes.uint8),
    bool=_type_method(dtypes.bool_),
    cpu=lambda self, memory_format=None: self,
)
