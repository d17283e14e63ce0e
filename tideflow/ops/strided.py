"""Strided views: `as_strided` (any sizes and strides over a tensor's elements) and
`Tensor.unfold` (sliding windows along one dim).

Both are views of their input (they share its memory and version counter) and may read an
element more than once, so their gradients scatter-add: `index_add` over the flat positions
each output element reads, whose own gradient (a gather) keeps higher orders exact.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.lib.stride_tricks import as_strided as _np_as_strided
from numpy.lib.stride_tricks import sliding_window_view

from ..framework.errors import ArgumentError, Rejected, ShapeError
from ._rules import (
    Meta,
    broadcast_only,
    defop,
    dispatch,
    int_arg,
    methods,
    normalize_dim,
    tensor_arg,
)
from .creation import on_placement_of, tensor
from .indexing import index_add

__all__ = ["as_strided"]


# -- as_strided -----------------------------------------------------------------------------
def _strided_extent(size: tuple, stride: tuple, offset: int) -> int:
    """How many elements a strided view reaches: one past its furthest element."""
    if any(s == 0 for s in size):
        return 0
    return offset + sum((n - 1) * s for n, s in zip(size, stride, strict=True)) + 1


def _as_strided_meta(x: Meta, *, size, stride, storage_offset) -> Meta:
    numel = math.prod(x.shape)
    if _strided_extent(size, stride, storage_offset) > numel:
        raise ShapeError(
            f"as_strided: sizes {list(size)}, strides {list(stride)} and storage offset "
            f"{storage_offset} reach element {_strided_extent(size, stride, storage_offset) - 1}, "
            f"past the {numel} elements of the input of shape {list(x.shape)}"
        )
    return Meta(tuple(size), x.dtype)


def _as_strided_kernel(x, *, size, stride, storage_offset):
    if _strided_extent(size, stride, storage_offset) > x.size:
        raise Rejected  # NOTE: NumPy's as_strided would read past the array
    flat = x.reshape(-1)[storage_offset:]
    return _np_as_strided(flat, size, tuple(s * x.itemsize for s in stride))


def _read_positions(shape: tuple, size: tuple, stride: tuple, offset: int) -> np.ndarray:
    """The flat position in the input of every element of the view, in the view's order."""
    positions = np.arange(math.prod(shape), dtype=np.int64)
    return _as_strided_kernel(positions, size=size, stride=stride, storage_offset=offset)


def _as_strided_grad(ctx, gy):
    shape = ctx.input_shape(0)
    positions = _read_positions(shape, ctx.size, ctx.stride, ctx.storage_offset).reshape(-1)
    zeros = gy.new_zeros((math.prod(shape),))
    index = tensor(positions, **on_placement_of(gy))
    return (index_add(zeros, 0, index, gy.reshape(-1)).reshape(shape),)


_as_strided = defop(
    "as_strided",
    inputs=("input",),
    meta=_as_strided_meta,
    sbp=broadcast_only,
    kernels={"cpu": _as_strided_kernel},
    grad=_as_strided_grad,
    view=True,
)


def _ints(name: str, values) -> tuple:
    if not isinstance(values, tuple | list):
        raise ArgumentError(
            f"as_strided(): argument '{name}' must be a tuple of ints, not {type(values).__name__}"
        )
    return tuple(int_arg("as_strided", name, v) for v in values)


def as_strided(input, size, stride, storage_offset=None):
    """A view of `input` with the given sizes and strides (in elements), starting
    `storage_offset` elements in: element (i, j, ...) reads the input's element number
    `storage_offset + i * stride[0] + j * stride[1] + ...` in row-major order. For a
    contiguous input that is PyTorch's storage; a non-contiguous one is first made
    contiguous (a copy), so the view then aliases that copy.
    `flow.arange(6.0).as_strided((2, 2), (1, 2))`"""
    tensor_arg("as_strided", "input", 1, input)
    size, stride = _ints("size", size), _ints("stride", stride)
    offset = 0 if storage_offset is None else storage_offset
    offset = int_arg("as_strided", "storage_offset", offset)
    if len(size) != len(stride):
        raise ShapeError(
            f"as_strided: got {len(size)} sizes {list(size)} but {len(stride)} strides "
            f"{list(stride)}"
        )
    if any(v < 0 for v in (*size, *stride, offset)):
        raise ShapeError(
            f"as_strided: sizes {list(size)}, strides {list(stride)} and storage offset "
            f"{offset} must not be negative"
        )
    attrs = {"size": size, "stride": stride, "storage_offset": offset}
    return dispatch(_as_strided, (input.contiguous(),), attrs)


# -- Tensor.unfold: sliding windows ---------------------------------------------------------
def _window_count(op: str, shape: tuple, dim: int, size: int, step: int) -> int:
    length = shape[dim] if shape else 1
    if size > length:
        raise ShapeError(
            f"{op}: the window size {size} is larger than dim {dim} (of size {length}) of the "
            f"input of shape {list(shape)}"
        )
    return (length - size) // step + 1


def _unfold_meta(x: Meta, *, dim, size, step) -> Meta:
    count = _window_count("unfold", x.shape, dim, size, step)
    shape = list(x.shape)
    shape[dim] = count
    return Meta((*shape, size), x.dtype)


def _unfold_kernel(x, *, dim, size, step):
    windows = sliding_window_view(x, size, axis=dim, writeable=x.flags.writeable)
    index = (slice(None),) * dim + (slice(None, None, step),)
    return windows[index]


def _unfold_grad(ctx, gy):
    shape = ctx.input_shape(0)
    dim, size, step = ctx.dim, ctx.size, ctx.step
    count = gy.shape[dim]
    # every (window, offset) pair reads input position window * step + offset along dim
    positions = (np.arange(count)[:, None] * step + np.arange(size)).reshape(-1)
    pieces = gy.movedim(-1, dim + 1).flatten(dim, dim + 1)
    index = tensor(positions, **on_placement_of(gy))
    return (index_add(gy.new_zeros(shape), dim, index, pieces),)


_unfold = defop(
    "unfold",
    inputs=("input",),
    meta=_unfold_meta,
    sbp=broadcast_only,
    kernels={"cpu": _unfold_kernel},
    grad=_unfold_grad,
    view=True,
)


def _tensor_unfold(self, dimension, size, step):
    """Windows of `size` elements every `step` along `dimension`, as a new last dim: a view
    of shape (..., (n - size) // step + 1, ..., size).
    `flow.arange(7.0).unfold(0, 3, 2)  # [[0, 1, 2], [2, 3, 4], [4, 5, 6]]`"""
    size = int_arg("unfold", "size", size)
    step = int_arg("unfold", "step", step)
    if size < 0 or step <= 0:
        raise ShapeError(f"unfold: size must be >= 0 and step > 0, got size {size}, step {step}")
    if self.ndim == 0:  # NOTE: PyTorch unfolds a 0-d tensor as one element along dim 0
        normalize_dim("unfold", dimension, 0)
        _window_count("unfold", (), 0, size, step)
        return self.reshape(1).narrow(0, 0, size)
    dim = normalize_dim("unfold", dimension, self.ndim)
    return dispatch(_unfold, (self,), {"dim": dim, "size": size, "step": step})


methods(as_strided=as_strided, unfold=_tensor_unfold)
