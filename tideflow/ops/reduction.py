"""Reductions over dimensions: sum, mean, prod, var/std, max/min, norms, cumulative ops, ..."""

from __future__ import annotations

import numpy as np

from ..framework import dtype as dtypes
from ..framework.errors import ShapeError
from ..framework.sbp import Split
from ._rules import (
    B,
    Meta,
    P,
    S,
    Signature,
    defop,
    dispatch,
    methods,
    normalize_dims,
    reduce_meta_shape,
    reduce_sbp,
)

__all__ = ["sum", "sum_to_size"]


def _keep_shape(shape: tuple, dims: tuple) -> tuple:
    return tuple(1 if i in dims else d for i, d in enumerate(shape))


def expand_reduced(gy, in_shape: tuple, dim, keepdim: bool):
    """Broadcast a reduction's output gradient back over the reduced dims of `in_shape`."""
    dims = normalize_dims("grad", dim, len(in_shape))
    if not keepdim:
        gy = gy.reshape(_keep_shape(in_shape, dims))
    return gy.expand(in_shape)


def _sum_dtype(x: Meta, dtype) -> dtypes.DType:
    if dtype is not None:
        return dtype
    return x.dtype if x.dtype.is_floating_point else dtypes.int64


def _sum_meta(x: Meta, *, dim=None, keepdim=False, dtype=None) -> Meta:
    dims = normalize_dims("sum", dim, len(x.shape))
    return Meta(reduce_meta_shape(x.shape, dims, keepdim), _sum_dtype(x, dtype))


def _sum_kernel(x, *, dim=None, keepdim=False, dtype=None):
    dims = normalize_dims("sum", dim, x.ndim)
    if dtype is None and x.dtype.kind in "biu":
        dtype = dtypes.int64
    return np.sum(x, axis=dims, keepdims=keepdim, dtype=None if dtype is None else dtype.np)


_sum = defop(
    "sum",
    inputs=("input",),
    meta=_sum_meta,
    sbp=reduce_sbp(partial=True),
    kernels={"cpu": _sum_kernel},
    grad=lambda ctx, gy: (expand_reduced(gy, ctx.input_shape(0), ctx.dim, ctx.keepdim),),
)


def sum(input, dim=None, keepdim=False, *, dtype=None):
    """Sum over `dim` (all dims when None). Integer and bool inputs sum to int64."""
    dtype = None if dtype is None else dtypes.to_dtype(dtype)
    return dispatch(_sum, (input,), {"dim": dim, "keepdim": keepdim, "dtype": dtype})


def _sum_to_meta(x: Meta, *, shape) -> Meta:
    lead = len(x.shape) - len(shape)
    ok = lead >= 0 and all(t in (1, s) for s, t in zip(x.shape[lead:], shape, strict=True))
    if not ok:
        raise ShapeError(f"sum_to_size: size {list(shape)} is not expandable to {list(x.shape)}")
    return Meta(tuple(shape), x.dtype)


def _sum_to_kernel(x, *, shape):
    lead = x.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, t in enumerate(shape) if t == 1 and x.shape[lead + i] != 1
    )
    out = np.sum(x, axis=axes, keepdims=True) if axes else x.copy()
    return out.reshape(shape)


def _sum_to_sbp(x: Meta, *, shape) -> list[Signature]:
    lead = len(x.shape) - len(shape)
    sigs = [Signature((B,), (B,))]
    for axis in range(len(x.shape)):
        reduced = axis < lead or shape[axis - lead] == 1
        sigs.append(Signature((S(axis),), (P,) if reduced else (S(axis - lead),)))
    sigs.append(Signature((P,), (P,)))
    return sigs


def _sum_to_local_attrs(attrs: dict, sig: Signature, x: Meta) -> dict:
    """A split kept dim takes its local size (-1) in the target shape."""
    s = sig.ins[0]
    lead = len(x.shape) - len(attrs["shape"])
    if isinstance(s, Split) and s.axis >= lead and attrs["shape"][s.axis - lead] != 1:
        shape = list(attrs["shape"])
        shape[s.axis - lead] = -1
        return {**attrs, "shape": tuple(shape)}
    return attrs


_sum_to_size = defop(
    "sum_to_size",
    inputs=("input",),
    meta=_sum_to_meta,
    sbp=_sum_to_sbp,
    local_attrs=_sum_to_local_attrs,
    kernels={"cpu": _sum_to_kernel},
    grad=lambda ctx, gy: (gy.expand(ctx.input_shape(0)),),
)


def sum_to_size(input, *size):
    """Sum `input` down to `size`, undoing broadcasting (the gradient of `expand`)."""
    shape = tuple(size[0]) if len(size) == 1 and isinstance(size[0], tuple | list) else size
    if tuple(input.shape) == tuple(shape):
        return input
    return dispatch(_sum_to_size, (input,), {"shape": tuple(shape)})


methods(sum=sum, sum_to_size=sum_to_size)
