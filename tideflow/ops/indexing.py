"""Indexing, gather/scatter, masking, sorting and searching.

Subscripts follow PyTorch. A key of ints, slices, None and Ellipsis ("basic" indexing) gives a
view (`getitem`, view=True). Integer or bool tensors, lists and NumPy arrays in the key
("advanced" indexing) give a copy (`index`). Ints are applied first, as selections: unlike
NumPy, PyTorch does not count them as advanced indices. The advanced indices then follow
NumPy's placement rule on that view: their broadcast dims replace the indexed dims in place
when the indices are adjacent, and go first otherwise. The advanced indices reach the ops as
one int64 operand of shape (k, *broadcast) (built by the `index_stack` op, where a bool mask of
n dims gives n rows; a lone int64 index is just reshaped), so grad rules can save it and graph
tracing sees it.

`x[key] = value` writes into x. Without autograd it assigns straight into the memory; with
autograd it computes the result out of place (`setitem`, `index_put`) and writes it back
(`write_back`), which moves the history onto x, and onto x's base when x is a view
(framework/views.py).

Ops whose output shape depends on the values (`DATA_DEPENDENT`) report -1 for that dim in
their meta.
"""

from __future__ import annotations

import builtins
import math
import operator
import warnings
from collections import namedtuple
from numbers import Number

import numpy as np

from ..framework import dtype as dtypes
from ..framework.dispatch import (
    assign,
    check_inplace,
    inplace,
    runs_locally,
    tracked,
    write_back,
)
from ..framework.errors import (
    AutogradError,
    DTypeError,
    ShapeError,
    TensorIndexError,
    TideflowError,
    UnsupportedError,
)
from ..framework.grad_mode import STATE
from ..framework.node import next_seq
from ..framework.tensor import Tensor, make_tensor
from ._onnx_rules import INT64_MAX, as_bool, opset_at_least, scalar_of
from ._rules import (
    B,
    Meta,
    P,
    S,
    Signature,
    broadcast_only,
    broadcast_shapes,
    checked,
    defop,
    dispatch,
    elementwise_sbp,
    methods,
    normalize_dim,
    operand_arg,
    tensor_arg,
)
from .complex import reject_complex
from .creation import on_placement_of, ones, tensor, zeros

__all__ = [
    "gather",
    "batch_gather",
    "scatter",
    "scatter_add",
    "scatter_reduce",
    "index_select",
    "index_add",
    "index_copy",
    "index_fill",
    "index_put",
    "index_put_",
    "masked_fill",
    "masked_select",
    "masked_scatter",
    "take",
    "take_along_dim",
    "nonzero",
    "argwhere",
    "sort",
    "argsort",
    "topk",
    "kthvalue",
    "unique",
    "unique_consecutive",
    "searchsorted",
    "bucketize",
    "bincount",
    "histc",
    "put",
    "isin",
]

# Ops whose output shape depends on the input values: their meta gives -1 for the unknown
# dim (`index_stack` only when a bool mask is among the indices).
DATA_DEPENDENT = frozenset(
    {"index_stack", "masked_select", "nonzero", "unique", "unique_consecutive", "bincount"}
)


_SortResult = namedtuple("sort", ("values", "indices"))
_TopkResult = namedtuple("topk", ("values", "indices"))
_KthvalueResult = namedtuple("kthvalue", ("values", "indices"))

_NO_ATTRS: dict = {}
_INDEX_DTYPES = frozenset({np.dtype(np.int32), np.dtype(np.int64)})
_LONG_DTYPES = frozenset({np.dtype(np.int64)})
_MASK_DTYPES = frozenset({np.dtype(np.bool_), np.dtype(np.uint8)})


# -- shared checks and NumPy helpers ----------------------------------------------------------
def _np_dtype(x):
    """The NumPy dtype of an array, a Meta or a Tensor."""
    dt = x.dtype
    return dt.np if isinstance(dt, dtypes.DType) else dt


def _check_index_dtype(op: str, index, allowed=_INDEX_DTYPES) -> None:
    if _np_dtype(index) not in allowed:
        names = " or ".join(sorted(d.name for d in allowed))
        got = dtypes.from_numpy(_np_dtype(index))
        raise DTypeError(f"{op}: expected an index tensor of dtype {names}, got {got}")


def _check_same_dtype(op: str, x, other, what: str) -> None:
    if isinstance(other, Meta | np.ndarray) and _np_dtype(other) != _np_dtype(x):
        raise DTypeError(
            f"{op}: {what} ({dtypes.from_numpy(_np_dtype(other))}) must have the same dtype as "
            f"the input ({dtypes.from_numpy(_np_dtype(x))})"
        )


def _check_mask(op: str, mask) -> None:
    if _np_dtype(mask) != np.bool_:
        raise DTypeError(f"{op}: expected a bool mask, got {dtypes.from_numpy(_np_dtype(mask))}")


def _check_range(op: str, index: np.ndarray, dim: int, size: int) -> None:
    """Index values in [0, size): gather, scatter and the index_* ops do not wrap negative
    indices (PyTorch), so NumPy's own bounds check is not enough."""
    if index.size and (index.min() < 0 or index.max() >= size):
        bad = index[(index < 0) | (index >= size)].flat[0]
        raise TensorIndexError(
            f"{op}: index {bad} is out of bounds for dimension {dim} with size {size}"
        )


def _check_scalar_value(op: str, value) -> None:
    if isinstance(value, Tensor) and value.ndim != 0:
        raise ShapeError(
            f"{op}: only a 0-dimensional value tensor is supported, got one of shape "
            f"{list(value.shape)}"
        )


def _nd(a: np.ndarray) -> np.ndarray:
    """A 0-d array as 1-d: PyTorch's dim ops treat a scalar as a vector of one element."""
    return a.reshape(1) if a.ndim == 0 else a


def _dim_size(shape: tuple, dim: int) -> int:
    return shape[dim] if shape else 1


def _along(index: np.ndarray, dim: int) -> tuple:
    """The NumPy key that reads `index[i]` along `dim` at position i on every other axis."""
    ndim = index.ndim
    key = []
    for d, n in enumerate(index.shape):
        if d == dim:
            key.append(index)
        else:
            key.append(np.arange(n).reshape((n,) + (1,) * (ndim - d - 1)))
    return tuple(key)


def _prefix(shape: tuple) -> tuple:
    return tuple(slice(0, n) for n in shape)


def _dim_key(dim: int, index) -> tuple:
    return (slice(None),) * dim + (index,)


_HALF_FLOATS = frozenset({np.dtype(np.float16), dtypes.bfloat16.np})


def _work_dtype(dtype):
    """The dtype to accumulate in: half-precision floats add up in float32 and round once at
    the end (PyTorch's opmath), not at every step."""
    return np.dtype(np.float32) if dtype in _HALF_FLOATS else dtype


def _sort_keys(x: np.ndarray) -> np.ndarray:
    """Values NumPy sorts and compares natively (bfloat16 -> float32 is exact)."""
    return x.astype(np.float32) if x.dtype == dtypes.bfloat16.np else x


def _b(m):
    """B for a tensor operand, None for a scalar/None one (signature slots)."""
    return B if isinstance(m, Meta) else None


def _broadcast_outputs(n_out: int):
    def sbp(*operands, **_) -> list[Signature]:
        return [Signature(tuple(_b(m) for m in operands), (B,) * n_out)]

    return sbp


# -- basic subscripts: views ------------------------------------------------------------------
# A basic key is a tuple of ints, None (new axis) and (start, stop, step) tuples (slices,
# hashable as attributes).
_FULL = (None, None, None)


def _np_key(key: tuple) -> tuple:
    """The NumPy form of a basic key. The trailing Ellipsis makes NumPy return a 0-d view rather
    than a scalar copy when ints select every dim."""
    return (*(slice(*k) if type(k) is tuple else k for k in key), Ellipsis)


def _too_many(ndim: int) -> TensorIndexError:
    if ndim == 0:
        return TensorIndexError(
            "index: invalid index of a 0-dim tensor; use tensor.item() to convert a 0-dim "
            "tensor to a number"
        )
    return TensorIndexError(f"index: too many indices for tensor of dimension {ndim}")


def _basic_shape(shape: tuple, key: tuple) -> tuple:
    out = []
    d = 0
    for k in key:
        if k is None:
            out.append(1)
            continue
        if d == len(shape):
            raise _too_many(len(shape))
        n = shape[d]
        if type(k) is tuple:
            out.append(len(range(*slice(*k).indices(n))))
        elif not -n <= k < n:
            raise TensorIndexError(
                f"index: index {k} is out of bounds for dimension {d} with size {n}"
            )
        d += 1
    return (*out, *shape[d:])


def _whole_axes(shape: tuple, key: tuple) -> list[tuple[int, int]]:
    """(input axis, output axis) of the axes a basic key keeps whole. A shard of such an axis
    indexes like the whole axis, so a split there stays a split."""
    pairs = []
    d = out = 0
    for k in key:
        if k is None:
            out += 1
            continue
        if type(k) is tuple:
            if slice(*k).indices(shape[d]) == (0, shape[d], 1):
                pairs.append((d, out))
            out += 1
        d += 1
    pairs.extend((d + i, out + i) for i in range(len(shape) - d))
    return pairs


def _value_sbp(values, target: tuple, axis: int):
    """The SBP of `values` (broadcast to `target`) when the result is split along `axis`."""
    if not isinstance(values, Meta):
        return None
    a = axis - (len(target) - len(values.shape))
    if 0 <= a < len(values.shape) and values.shape[a] == target[axis]:
        return S(a)
    return B


def _check_values(op: str, values, target: tuple) -> None:
    """`values` must broadcast to the indexed shape (leading size-1 dims are ignored)."""
    if not isinstance(values, Meta):
        return
    shape = values.shape
    while len(shape) > len(target) and shape[0] == 1:
        shape = shape[1:]
    lead = len(target) - len(shape)
    if lead < 0 or builtins.any(v not in (1, t) for v, t in zip(shape, target[lead:], strict=True)):
        raise ShapeError(
            f"{op}: shape mismatch: value tensor of shape {list(values.shape)} cannot be "
            f"broadcast to indexing result of shape {list(target)}"
        )


def _getitem_sbp(x: Meta, *, key) -> list[Signature]:
    sigs = [Signature((B,), (B,)), Signature((P,), (P,))]
    sigs += [Signature((S(d),), (S(o),)) for d, o in _whole_axes(x.shape, key)]
    return sigs


def _getitem_onnx(g, x, *, key):
    """Slices for the ranges and the ints (an int i is the range [i, i + 1], then squeezed),
    then the new axes (None) unsqueezed."""
    starts, ends, axes, steps, dropped, new = [], [], [], [], [], []
    d = out = 0
    for k in key:
        if k is None:
            new.append(out)
            out += 1
            continue
        if type(k) is tuple:
            start, stop, step = k
            step = 1 if step is None else step
            if (start, stop, step) != (None, None, 1):
                starts.append(0 if start is None else start)
                ends.append(INT64_MAX if stop is None else stop)
                axes.append(d)
                steps.append(step)
            out += 1
        else:
            size = g.meta(x).shape[d]
            i = k % size
            starts.append(i)
            ends.append(i + 1)
            axes.append(d)
            steps.append(1)
            dropped.append(d)
        d += 1
    if axes:
        x = g.op("Slice", x, g.ints(starts), g.ints(ends), g.ints(axes), g.ints(steps))
    if dropped:
        x = g.op("Squeeze", x, g.ints(dropped))
    if new:
        x = g.op("Unsqueeze", x, g.ints(new))
    return x if axes or dropped or new else g.op("Identity", x)


def _scatter_onnx(reduction: str | None):
    def lower(g, x, index, src, *, dim):
        if reduction is not None:
            opset_at_least(g, 16, f"scatter with reduce={reduction!r}")
        ndim = len(g.meta(x).shape)
        src = g.tensor(src, x)
        scalar = not g.meta(src).shape
        if not ndim:  # 0-d: ONNX scatters into tensors with dims
            x, index, src = (g.op("Reshape", a, g.ints([1])) for a in (x, index, src))
        shape = g.op("Shape", index)
        if scalar:
            src = g.op("Expand", src, shape)
        else:  # src may be larger than the index: its leading block
            src = g.op("Slice", src, g.ints([0] * max(ndim, 1)), shape)
        index = g.cast(index, dtypes.int64)
        out = g.op("ScatterElements", x, index, src, axis=dim, reduction=reduction)
        return out if ndim else scalar_of(g, out)

    return lower


def _gather_onnx(g, x, index, *, dim):
    shape, index_shape = g.meta(x).shape, g.meta(index).shape
    index = g.cast(index, dtypes.int64)
    if not shape:  # a 0-d input: ONNX gathers from tensors with dims
        flat = g.ints([1])
        x, index = g.op("Reshape", x, flat), g.op("Reshape", index, flat)
        return scalar_of(g, g.op("GatherElements", x, index, axis=0))
    axis = dim % len(shape)
    if any(i != n for d, (i, n) in enumerate(zip(index_shape, shape, strict=True)) if d != axis):
        # NOTE: the index may be shorter than the input off the axis; OpenVINO wants the
        # input cut to it
        ends = [shape[d] if d == axis else i for d, i in enumerate(index_shape)]
        x = g.op("Slice", x, g.ints([0] * len(shape)), g.ints(ends))
    return g.op("GatherElements", x, index, axis=dim)


def _index_select_onnx(g, x, index, *, dim):
    flat = g.op("Reshape", index, g.ints([-1]))
    if g.meta(x).shape:
        return g.op("Gather", x, flat, axis=dim)
    return scalar_of(g, g.op("Gather", g.op("Reshape", x, g.ints([1])), flat, axis=0))


def _top_onnx(g, x, k: str, dim: int, largest: bool) -> tuple[str, str]:
    if not g.meta(x).shape:  # a 0-d tensor is its own top value, at index 0
        return g.op("Identity", x), g.constant(0, dtypes.int64)
    return g.op("TopK", x, k, axis=dim, largest=int(largest), sorted=1, outputs=2)


def _topk_onnx(g, x, *, k, dim, largest, **_):
    return _top_onnx(g, x, g.ints([k]), dim, largest)


def _sort_onnx(g, x, *, dim, descending, **_):
    every = g.op("Slice", g.op("Shape", x), g.ints([dim]), g.ints([dim + 1]))  # k: dim's size
    return _top_onnx(g, x, every, dim, descending)


_getitem = defop(
    "getitem",
    inputs=("input",),
    meta=lambda x, *, key: Meta(_basic_shape(x.shape, key), x.dtype),
    sbp=_getitem_sbp,
    kernels={"cpu": lambda x, *, key: x[_np_key(key)]},
    grad=lambda ctx, gy: (_setitem_op(zeros(ctx.input_shape(0), dtype=gy.dtype), gy, ctx.key),),
    view=True,
    onnx=_getitem_onnx,
)


def _setitem_meta(x: Meta, values, *, key) -> Meta:
    _check_values("setitem", values, _basic_shape(x.shape, key))
    return Meta(x.shape, x.dtype)


def _setitem_kernel(x, values, *, key):
    out = x.copy()
    out[_np_key(key)] = values
    return out


def _setitem_sbp(x: Meta, values, *, key) -> list[Signature]:
    sigs = [Signature((B, _b(values)), (B,))]
    if isinstance(values, Meta):  # the result is linear in (input, values) jointly
        sigs.append(Signature((P, P), (P,)))
    target = _basic_shape(x.shape, key)
    for d, o in _whole_axes(x.shape, key):
        sigs.append(Signature((S(d), _value_sbp(values, target, o)), (S(d),)))
    return sigs


def _setitem_grad(ctx, gy):
    need_x, need_v = ctx.needs_input_grad
    gx = _setitem_op(gy, 0.0, ctx.key) if need_x else None
    gv = dispatch(_getitem, (gy,), {"key": ctx.key}) if need_v else None
    return gx, gv


# The functional form of `x[key] = values` for basic keys: a copy of x with the region replaced.
def _setitem_onnx(g, x, values, *, key):
    """ScatterND of the values, broadcast to the region, at the region's positions (a
    constant: the key's sizes are the traced ones)."""
    shape = g.meta(x).shape
    target = _basic_shape(shape, key)
    positions = np.moveaxis(np.indices(shape), 0, -1)[_np_key(key)]  # (*target, ndim)
    values = g.cast(g.tensor(values, x), g.meta(x).dtype)
    extra = len(g.meta(values).shape) - len(target)
    if extra > 0:  # leading dims of 1 beyond the region's are dropped
        values = g.op("Squeeze", values, g.ints(list(range(extra))))
    if not target:  # one element: OpenVINO's ScatterND takes no 0-d updates
        target, positions = (1,), positions[None]
    updates = g.op("Expand", values, g.ints(list(target)))
    return g.op("ScatterND", x, g.constant(positions, dtypes.int64), updates)


_setitem = defop(
    "setitem",
    inputs=("input", "values"),
    meta=_setitem_meta,
    sbp=_setitem_sbp,
    kernels={"cpu": _setitem_kernel},
    grad=_setitem_grad,
    onnx=_setitem_onnx,
)


def _setitem_op(x, values, key: tuple):
    return dispatch(_setitem, (x, values), {"key": key})


# -- advanced subscripts: copies ----------------------------------------------------------------
def _bad_index_dtype(dtype) -> TensorIndexError:
    return TensorIndexError(
        f"index: tensors used as indices must be long, int, byte or bool tensors, got "
        f"{dtypes.from_numpy(dtype)}"
    )


def _broadcast_unknown(shapes: list[tuple]) -> tuple:
    """Broadcast shapes in which -1 is a size known only at run time."""
    ndim = builtins.max(len(s) for s in shapes)
    out = [1] * ndim
    for s in shapes:
        for i, d in enumerate(s, ndim - len(s)):
            o = out[i]
            if d == 1 or d == o or (d == -1 and o != 1):
                continue
            if o in (1, -1):
                out[i] = d
            else:
                listed = ", ".join(str(list(x)) for x in shapes)
                raise TensorIndexError(
                    f"index: shape mismatch: indexing tensors could not be broadcast together "
                    f"with shapes {listed}"
                )
    return tuple(out)


def _index_stack_meta(*indices: Meta) -> Meta:
    rows = []
    for m in indices:
        if m.dtype.np in _MASK_DTYPES:
            rows += [(-1,)] * len(m.shape)  # one row per mask dim, length = number of Trues
        elif m.dtype.np in _INDEX_DTYPES:
            rows.append(m.shape)
        else:
            raise _bad_index_dtype(m.dtype.np)
    return Meta((len(rows), *_broadcast_unknown(rows)), dtypes.int64)


def _index_stack_kernel(*indices):
    rows = []
    for a in indices:
        if a.dtype in _MASK_DTYPES:
            rows.extend(np.nonzero(a))
        else:
            rows.append(a)
    try:
        rows = np.broadcast_arrays(*rows)
    except ValueError:
        listed = ", ".join(str(list(r.shape)) for r in rows)
        raise TensorIndexError(
            f"index: shape mismatch: indexing tensors could not be broadcast together with "
            f"shapes {listed}"
        ) from None
    return np.stack(rows).astype(np.int64, copy=False)


# The advanced indices of one subscript as a single int64 operand of shape (k, *broadcast):
# integer index tensors broadcast together; a bool mask of n dims gives the n rows of its
# nonzero positions.
def _index_stack_onnx(g, *indices):
    """The index rows broadcast and stacked (masks, whose rows are their nonzero positions,
    have data-dependent sizes: not exportable)."""
    if any(g.meta(i).dtype.np in _MASK_DTYPES for i in indices):
        raise UnsupportedError(
            "onnx.export: indexing with a boolean mask selects a number of elements known only "
            "from the data; index with flow.where, or with integer tensors"
        )
    shape = g.ints(list(g.out[0].shape[1:]))
    rows = [g.op("Unsqueeze", g.op("Expand", i, shape), g.ints([0])) for i in indices]
    return g.cast(g.op("Concat", *rows, axis=0) if len(rows) > 1 else rows[0], dtypes.int64)


def _nd_rows(g, x, indices, dims) -> tuple[str, str, list[int], int]:
    """For GatherND/ScatterND: `x` with the indexed dims moved first, the index rows as
    (*index dims, k) within [0, size), the kept dims, and the number of index dims."""
    shape = g.meta(x).shape
    nb = len(g.meta(indices).shape) - 1
    kept = [d for d in range(len(shape)) if d not in dims]
    moved = g.op("Transpose", x, perm=[*dims, *kept])
    rows = g.op("Transpose", indices, perm=[*range(1, nb + 1), 0])
    negative = g.cast(g.op("Less", rows, g.ints(0)), dtypes.int64)
    rows = g.op("Add", rows, g.op("Mul", negative, g.ints([shape[d] for d in dims])))
    return moved, rows, kept, nb


def _numpy_layout(dims, nb: int, n_kept: int) -> list[int] | None:
    """The permutation from (*index dims, *kept dims) to NumPy's layout, which puts the index
    dims in place of adjacent indexed dims (None where that is the same)."""
    if not _adjacent(dims) or dims[0] == 0:
        return None
    before = dims[0]  # kept dims before the indexed ones come first
    return [*range(nb, nb + before), *range(nb), *range(nb + before, nb + n_kept)]


def _index_onnx(g, x, indices, *, dims):
    moved, rows, kept, nb = _nd_rows(g, x, indices, dims)
    out = g.op("GatherND", moved, rows)  # (*index dims, *kept dims)
    perm = _numpy_layout(dims, nb, len(kept))
    return out if perm is None else g.op("Transpose", out, perm=perm)


def _index_put_onnx(g, x, indices, values, *, dims, accumulate):
    if accumulate:
        opset_at_least(g, 16, "index_put with accumulate=True")
    moved, rows, kept, nb = _nd_rows(g, x, indices, dims)
    target = _index_shape(g.meta(x).shape, g.meta(indices).shape, dims)
    values = g.cast(g.tensor(values, x), g.meta(x).dtype)
    extra = len(g.meta(values).shape) - len(target)
    if extra > 0:  # leading dims of 1 beyond the indexed shape are dropped
        values = g.op("Squeeze", values, g.ints(list(range(extra))))
    updates = g.op("Expand", values, g.ints(list(target)))
    perm = _numpy_layout(dims, nb, len(kept))
    if perm is not None:  # back from NumPy's layout to (*index dims, *kept dims)
        updates = g.op("Transpose", updates, perm=[perm.index(i) for i in range(len(perm))])
    reduction = "add" if accumulate else None
    out = g.op("ScatterND", moved, rows, updates, reduction=reduction)
    order = [*dims, *kept]
    return g.op("Transpose", out, perm=[order.index(d) for d in range(len(order))])


_index_stack = defop(
    "index_stack",
    inputs=("*indices",),
    meta=_index_stack_meta,
    sbp=broadcast_only,
    kernels={"cpu": _index_stack_kernel},
    differentiable=False,
    onnx=_index_stack_onnx,
)


def _adjacent(dims: tuple) -> bool:
    return dims == tuple(range(dims[0], dims[0] + len(dims)))


def _index_layout(ndim: int, nb: int, dims: tuple) -> tuple[dict, list]:
    """Where the output puts each non-indexed input axis ({axis: out axis}) and each of the
    `nb` broadcast index axes: NumPy's rule (in place when adjacent, else first)."""
    kept = [d for d in range(ndim) if d not in dims]
    if _adjacent(dims):
        x_axes = {d: d if d < dims[0] else d - len(dims) + nb for d in kept}
        return x_axes, [dims[0] + b for b in range(nb)]
    return {d: nb + i for i, d in enumerate(kept)}, list(range(nb))


def _index_shape(shape: tuple, stack: tuple, dims: tuple) -> tuple:
    if stack[0] != len(dims) or dims[-1] >= len(shape):
        raise TensorIndexError(
            f"index: {stack[0]} index rows for dims {list(dims)} of a tensor of shape {list(shape)}"
        )
    bshape = stack[1:]
    if _adjacent(dims):
        return (*shape[: dims[0]], *bshape, *shape[dims[-1] + 1 :])
    return (*bshape, *(s for i, s in enumerate(shape) if i not in dims))


def _adv_key(indices: np.ndarray, dims: tuple) -> tuple:
    key = [slice(None)] * (dims[-1] + 1)
    for row, d in zip(indices, dims, strict=True):
        key[d] = row
    return tuple(key)


def _adv_bounds_error(op: str, shape: tuple, indices: np.ndarray, dims: tuple):
    for row, d in zip(indices, dims, strict=True):
        n = shape[d]
        bad = row[(row < -n) | (row >= n)]
        if bad.size:
            return TensorIndexError(
                f"{op}: index {bad.flat[0]} is out of bounds for dimension {d} with size {n}"
            )
    return None


def _index_kernel(x, indices, *, dims):
    try:
        return x[_adv_key(indices, dims)]
    except IndexError:
        err = _adv_bounds_error("index", x.shape, indices, dims)
        if err is None:
            raise
        raise err from None


def _index_sbp(x: Meta, indices: Meta, *, dims) -> list[Signature]:
    sigs = [Signature((B, B), (B,)), Signature((P, B), (P,))]
    x_axes, b_axes = _index_layout(len(x.shape), len(indices.shape) - 1, dims)
    sigs += [Signature((S(d), B), (S(o),)) for d, o in x_axes.items()]
    sigs += [Signature((B, S(1 + b)), (S(o),)) for b, o in enumerate(b_axes)]
    return sigs


def _index_grad(ctx, gy):
    base = zeros(ctx.input_shape(0), dtype=gy.dtype)
    return _index_put_op(base, ctx.indices, gy, ctx.dims, accumulate=True), None


_index = defop(
    "index",
    inputs=("input", "indices"),
    meta=lambda x, idx, *, dims: Meta(_index_shape(x.shape, idx.shape, dims), x.dtype),
    sbp=_index_sbp,
    kernels={"cpu": _index_kernel},
    grad=_index_grad,
    saves=("indices",),
    onnx=_index_onnx,
)


def _index_put_meta(x: Meta, indices: Meta, values, *, dims, accumulate) -> Meta:
    _check_same_dtype("index_put", x, values, "values")
    _check_values("index_put", values, _index_shape(x.shape, indices.shape, dims))
    return Meta(x.shape, x.dtype)


def _index_put_kernel(x, indices, values, *, dims, accumulate):
    _check_same_dtype("index_put", x, values, "values")
    out = x.astype(_work_dtype(x.dtype))
    key = _adv_key(indices, dims)
    try:
        if accumulate:
            np.add.at(out, key, values)
        else:
            out[key] = values
    except IndexError:
        err = _adv_bounds_error("index_put", x.shape, indices, dims)
        if err is None:
            raise
        raise err from None
    return out.astype(x.dtype, copy=False)


def _index_put_sbp(x: Meta, indices: Meta, values, *, dims, accumulate) -> list[Signature]:
    sigs = [Signature((B, B, _b(values)), (B,))]
    if isinstance(values, Meta):  # linear in (input, values) jointly
        sigs.append(Signature((P, B, P), (P,)))
    target = _index_shape(x.shape, indices.shape, dims)
    x_axes, _ = _index_layout(len(x.shape), len(indices.shape) - 1, dims)
    for d, o in x_axes.items():
        sigs.append(Signature((S(d), B, _value_sbp(values, target, o)), (S(d),)))
    return sigs


def _index_put_grad(ctx, gy):
    need_x, _, need_v = ctx.needs_input_grad
    gx = None
    if need_x:
        gx = gy if ctx.accumulate else _index_put_op(gy, ctx.indices, 0.0, ctx.dims, False)
    gv = dispatch(_index, (gy, ctx.indices), {"dims": ctx.dims}) if need_v else None
    return gx, None, gv


_index_put = defop(
    "index_put",
    inputs=("input", "indices", "values"),
    meta=_index_put_meta,
    sbp=_index_put_sbp,
    kernels={"cpu": _index_put_kernel},
    grad=_index_put_grad,
    saves=("indices",),
    onnx=_index_put_onnx,
)


def _index_put_op(x, indices, values, dims: tuple, accumulate: bool):
    return dispatch(_index_put, (x, indices, values), {"dims": dims, "accumulate": accumulate})


# -- parsing a subscript ------------------------------------------------------------------------
_INT, _SLICE, _NONE, _ELLIPSIS, _BOOL, _TENSOR, _MASK = range(7)


def _as_index_tensor(seq, x: Tensor) -> Tensor:
    """A list/tuple/NumPy array used as an index of `x`, as a tensor (ints -> int64), global
    on `x`'s placement if `x` is global."""
    a = np.asarray(seq)
    if a.size == 0 and a.dtype.kind == "f":
        a = a.astype(np.int64)  # `x[[]]` is an empty integer index
    elif isinstance(seq, list | tuple) and a.dtype.kind in "iu":
        a = a.astype(np.int64)
    if a.dtype.kind not in "biu":
        raise TensorIndexError(
            f"index: tensors used as indices must be long, int, byte or bool tensors, got a "
            f"sequence of {a.dtype}"
        )
    return _index_constant(a, x)


def _index_constant(a: np.ndarray, x: Tensor) -> Tensor:
    """An index array the subscript made itself: it must meet a global `x` as global."""
    placed = on_placement_of(x)
    return tensor(a, **placed) if placed else make_tensor(a)


def _classify_tensor(t: Tensor, scalars_select: bool) -> tuple:
    dt = t._data.dtype
    if dt in _MASK_DTYPES:
        if t.ndim == 0 and scalars_select:
            return _BOOL, bool(t._data)
        if dt == np.uint8:
            warnings.warn(
                "indexing with dtype uint8 is deprecated, use a bool tensor instead",
                UserWarning,
                stacklevel=4,
            )
        return _MASK, t
    if dt in _INDEX_DTYPES:
        if t.ndim == 0 and scalars_select:
            return _INT, int(t._data)  # a 0-d integer tensor selects, like an int
        return _TENSOR, t
    raise _bad_index_dtype(dt)


def _slice_key(s: slice) -> tuple:
    step = None if s.step is None else operator.index(s.step)
    if step is not None and step <= 0:
        raise ValueError(
            "slice step cannot be zero" if step == 0 else "step must be greater than zero"
        )
    start = None if s.start is None else operator.index(s.start)
    stop = None if s.stop is None else operator.index(s.stop)
    return (start, stop, step)


def _classify(item, x: Tensor) -> tuple:
    t = type(item)
    if t is int:
        return _INT, item
    if t is slice:
        return _SLICE, _slice_key(item)
    if item is None:
        return _NONE, None
    if item is Ellipsis:
        return _ELLIPSIS, None
    if t is bool or t is np.bool_:
        return _BOOL, bool(item)
    if isinstance(item, Tensor):
        return _classify_tensor(item, scalars_select=True)
    if isinstance(item, np.integer):
        return _INT, int(item)
    if isinstance(item, list | tuple | np.ndarray):
        return _classify_tensor(_as_index_tensor(item, x), scalars_select=True)
    raise TensorIndexError(
        "index: only integers, slices (`:`), ellipsis (`...`), None and integer or bool "
        f"tensors are valid indices (got {t.__name__})"
    )


def _check_mask_shape(mask: Tensor, shape: tuple, d: int) -> None:
    for j, n in enumerate(mask.shape):
        if shape[d + j] != n:
            raise TensorIndexError(
                f"index: the shape of the mask {list(mask.shape)} at index {j} does not match "
                f"the shape of the indexed tensor {list(shape)} at index {d + j}"
            )


def _parse_key(x: Tensor, key) -> tuple[tuple, list]:
    """Split a subscript into a basic key for `getitem` (a view of x) and the advanced indices
    [(axis of that view, index tensor)] applied to the view."""
    items = key if type(key) is tuple else (key,)
    parsed = [_classify(item, x) for item in items]
    shape = tuple(x.shape)
    used = ellipses = 0
    for kind, v in parsed:
        if kind == _ELLIPSIS:
            ellipses += 1
        elif kind == _MASK:
            used += v.ndim
        elif kind in (_INT, _SLICE, _TENSOR):
            used += 1
    if ellipses > 1:
        raise TensorIndexError("index: an index can only have a single ellipsis ('...')")
    if used > len(shape):
        raise _too_many(len(shape))
    basic: list = []
    adv: list = []
    d = v = 0  # the next axis of x and of the view
    for kind, val in parsed:
        if kind == _INT:
            basic.append(val)
            d += 1
        elif kind == _SLICE:
            basic.append(val)
            d += 1
            v += 1
        elif kind == _NONE:
            basic.append(None)
            v += 1
        elif kind == _ELLIPSIS:
            n = len(shape) - used
            basic += [_FULL] * n
            d += n
            v += n
        elif kind == _BOOL:  # a new axis of size 1, kept (True) or emptied (False)
            basic.append(None)
            adv.append((v, _index_constant(np.zeros(1 if val else 0, np.int64), x)))
            v += 1
        elif kind == _TENSOR:
            basic.append(_FULL)
            adv.append((v, val))
            d += 1
            v += 1
        else:
            _check_mask_shape(val, shape, d)
            basic += [_FULL] * val.ndim
            adv.append((v, val))
            d += val.ndim
            v += val.ndim
    while basic and basic[-1] == _FULL:
        basic.pop()
    return tuple(basic), adv


def _advanced(adv: list) -> tuple:
    """(index stack, dims) of the advanced indices [(axis, tensor)] of a subscript."""
    dims: list[int] = []
    for v, t in adv:
        dims.extend(range(v, v + t.ndim) if t.dtype.np in _MASK_DTYPES else (v,))
    if len(adv) == 1 and adv[0][1].dtype is dtypes.int64:
        t = adv[0][1]  # the common x[idx]: a view as a one-row stack, no copy
        return t.reshape((1, *t.shape)), tuple(dims)
    return dispatch(_index_stack, tuple(t for _, t in adv), _NO_ATTRS), tuple(dims)


def _getitem_method(self, key):
    """`x[key]`: a view for ints, slices, None and Ellipsis; a copy with index tensors."""
    if type(key) is int:
        return dispatch(_getitem, (self,), {"key": (key,)})
    basic, adv = _parse_key(self, key)
    if not adv:
        return dispatch(_getitem, (self,), {"key": basic})
    view = dispatch(_getitem, (self,), {"key": basic}) if basic else self
    stack, dims = _advanced(adv)
    return dispatch(_index, (view, stack), {"dims": dims})


def _np_adv_key(adv: list) -> tuple:
    """The NumPy key of the advanced indices, for assigning in place."""
    key: list = []
    pos = 0
    for v, t in adv:
        a = t._data
        key += [slice(None)] * (v - pos)
        if a.dtype == np.uint8:
            a = a.astype(np.bool_)
        key.append(a)
        pos = v + (a.ndim if a.dtype == np.bool_ else 1)
    return tuple(key)


def _strip_leading_ones(value: Tensor) -> Tensor:
    """Leading size-1 dims of an assigned value are ignored (PyTorch, NumPy); dropping them
    keeps the value's gradient reducible to its shape."""
    shape = tuple(value.shape)
    i = 0
    while i < len(shape) and shape[i] == 1:
        i += 1
    return value.reshape(shape[i:]) if i else value


def _setitem_method(self, key, value) -> None:
    """`x[key] = value`: value (a tensor or a number) broadcast to the indexed region and cast
    to x's dtype, written into x's memory (views of x see it)."""
    if not isinstance(value, Tensor | int | float | bool | np.generic):
        raise TypeError(f"setitem: can't assign a {type(value).__name__} to a tensor")
    basic, adv = _parse_key(self, key)
    grad = STATE.enabled and (tracked(self) or (isinstance(value, Tensor) and tracked(value)))
    if not grad and runs_locally():
        src = value._data if isinstance(value, Tensor) else value
        try:
            dst = self._data[_np_key(basic)]
            if adv:
                dst[_np_adv_key(adv)] = src
            else:
                dst[...] = src
        except (IndexError, ValueError):
            pass  # the ops below raise the precise error (bounds, shapes, read-only memory)
        else:
            self._version[0] += 1
            return
    if grad:
        check_inplace(self, "setitem")
    first_node = next_seq()
    if isinstance(value, Tensor):
        if value.dtype is not self.dtype:
            value = value.to(self.dtype)
        value = _strip_leading_ones(value)
    if not adv:
        result = _setitem_op(self, value, basic)
    else:
        stack, dims = _advanced(adv)
        region = dispatch(_getitem, (self,), {"key": basic}) if basic else self
        result = _index_put_op(region, stack, value, dims, accumulate=False)
        if basic:
            result = _setitem_op(self, result, basic)
    if grad:
        write_back(self, result, "setitem", first_node)
    else:
        assign(self, result, "setitem")


# -- index_put ------------------------------------------------------------------------------------
def _index_put_items(input: Tensor, indices) -> list:
    """The advanced items [(axis, tensor)] of index_put's tuple of index tensors."""
    if not isinstance(indices, tuple | list):
        raise TypeError(
            f"index_put: indices must be a tuple of tensors, got {type(indices).__name__}"
        )
    if not indices:
        raise TensorIndexError("index_put: expected at least one index tensor")
    shape = tuple(input.shape)
    adv = []
    d = 0
    for i, t in enumerate(indices):
        if not isinstance(t, Tensor):
            raise TypeError(
                f"index_put: expected a tensor as element {i} of indices, got {type(t).__name__}"
            )
        kind, t = _classify_tensor(t, scalars_select=False)
        if kind == _MASK and t.ndim == 0:
            raise TensorIndexError("index_put: 0-dimensional bool indices are not supported")
        n = t.ndim if kind == _MASK else 1
        if d + n > len(shape):
            raise _too_many(len(shape))
        if kind == _MASK:
            _check_mask_shape(t, shape, d)
        adv.append((d, t))
        d += n
    return adv


def index_put(input, indices, values, accumulate=False):
    """A copy of `input` with `values` (broadcast) written at `input[indices]`, where `indices`
    is a tuple of integer or bool index tensors for the leading dims. With `accumulate=True`
    values add up, repeated indices included; otherwise which of several writes to one
    position wins is unspecified. `values` must have `input`'s dtype."""
    stack, dims = _advanced(_index_put_items(input, indices))
    if isinstance(values, Tensor):
        values = _strip_leading_ones(values)
    return _index_put_op(input, stack, values, dims, accumulate)


index_put_ = inplace(index_put, "index_put_")


# -- gather / scatter -----------------------------------------------------------------------------
def _check_gather_shapes(op: str, shape: tuple, index: tuple, dim: int, src=None) -> None:
    """PyTorch's rule: as many dims as the input, and no larger than the input off `dim` (and
    no larger than `src` anywhere)."""
    if builtins.max(len(index), 1) != builtins.max(len(shape), 1):
        raise ShapeError(
            f"{op}: index tensor must have the same number of dimensions as input tensor "
            f"(index {list(index)}, input {list(shape)})"
        )
    for d, (i, s) in enumerate(zip(index, shape, strict=False)):  # 0-d vs 1-d
        if d != dim and i > s:
            raise ShapeError(
                f"{op}: size does not match at dimension {d}: expected index {list(index)} to "
                f"be no larger than input {list(shape)} apart from dimension {dim}"
            )
    if src is not None and (
        builtins.max(len(src), 1) != builtins.max(len(index), 1)
        or builtins.any(i > s for i, s in zip(index, src, strict=False))
    ):
        raise ShapeError(
            f"{op}: expected index {list(index)} to be no larger than src {list(src)} "
            "(with the same number of dimensions)"
        )


def _gather_meta(x: Meta, index: Meta, *, dim) -> Meta:
    _check_index_dtype("gather", index)
    _check_gather_shapes("gather", x.shape, index.shape, dim)
    return Meta(index.shape, x.dtype)


def _gather_kernel(x, index, *, dim):
    _check_index_dtype("gather", index)
    _check_gather_shapes("gather", x.shape, index.shape, dim)
    _check_range("gather", index, dim, _dim_size(x.shape, dim))
    return _nd(x)[_along(_nd(index), dim)].reshape(index.shape)


def _gather_sbp(x: Meta, index: Meta, *, dim) -> list[Signature]:
    sigs = [Signature((B, B), (B,)), Signature((P, B), (P,))]
    if index.shape:  # each shard of the index reads the whole input along dim
        sigs.append(Signature((B, S(dim)), (S(dim),)))
    for d in range(len(x.shape)):
        if d != dim and x.shape[d] == index.shape[d]:
            sigs.append(Signature((S(d), S(d)), (S(d),)))
    return sigs


def _gather_grad(ctx, gy):
    base = zeros(ctx.input_shape(0), dtype=gy.dtype)
    return _scatter_add_op(base, ctx.index, gy, ctx.dim), None


_gather = defop(
    "gather",
    inputs=("input", "index"),
    meta=_gather_meta,
    sbp=_gather_sbp,
    kernels={"cpu": _gather_kernel},
    grad=_gather_grad,
    saves=("index",),
    onnx=_gather_onnx,
)


def _gather_op(x, index, dim: int):
    return dispatch(_gather, (x, index), {"dim": dim})


@checked
def gather(input: Tensor, dim, index: Tensor, *, sparse_grad=False):
    """Values of `input` along `dim` at `index`: `out[i][j] = input[index[i][j]][j]` for
    dim=0. `index` (int64 or int32) has `input`'s number of dims and is no larger off `dim`;
    the output has its shape. `sparse_grad` is accepted for PyTorch compatibility (gradients
    are dense)."""
    return _gather_op(input, index, normalize_dim("gather", dim, input.ndim))


def _pad_to(g, shape: tuple):
    """`g` in the leading corner of zeros of `shape`: the gradient of a src larger than its
    index (only the index-shaped corner of src is read)."""
    if tuple(g.shape) == tuple(shape):
        return g
    corner = tuple((0, n, None) for n in g.shape)
    return _setitem_op(zeros(shape, dtype=g.dtype), g, corner)


def _src_corner(src, index):
    """The index-shaped leading corner of `src`: the elements scatter ops read."""
    if tuple(src.shape) == tuple(index.shape):
        return src
    return dispatch(_getitem, (src,), {"key": tuple((0, n, None) for n in index.shape)})


def _scatter_checks(op: str, x, index, src, dim: int) -> None:
    _check_index_dtype(op, index)
    _check_gather_shapes(
        op, x.shape, index.shape, dim, src.shape if isinstance(src, Meta | np.ndarray) else None
    )
    _check_same_dtype(op, x, src, "src")


def _scatter_meta(op: str):
    def meta(x: Meta, index: Meta, src, *, dim, **_) -> Meta:
        _scatter_checks(op, x, index, src, dim)
        return Meta(x.shape, x.dtype)

    return meta


def _scatter_prepare(op: str, x, index, src, dim: int) -> tuple:
    """Check, then (output copy in the work dtype, its at-least-1-d view, NumPy key, the src
    values read). Kernels cast the output back to the input's dtype."""
    _scatter_checks(op, x, index, src, dim)
    _check_range(op, index, dim, _dim_size(x.shape, dim))
    out = x.astype(_work_dtype(x.dtype))
    idx = _nd(index)
    values = _nd(src)[_prefix(idx.shape)] if isinstance(src, np.ndarray) else src
    return out, _nd(out), _along(idx, dim), values


def _scatter_kernel(x, index, src, *, dim):
    out, flat, key, values = _scatter_prepare("scatter", x, index, src, dim)
    flat[key] = values
    return out.astype(x.dtype, copy=False)


def _scatter_add_kernel(x, index, src, *, dim):
    out, flat, key, values = _scatter_prepare("scatter_add", x, index, src, dim)
    np.add.at(flat, key, values)
    return out.astype(x.dtype, copy=False)


def _scatter_sbp(x: Meta, index: Meta, src, *, dim, reduce=None, **_) -> list[Signature]:
    """Splits off `dim` where input, index and src agree; P when src is a tensor and the op
    is linear in (input, src) jointly (replace, add, mean: the index is B)."""
    tensor_src = isinstance(src, Meta)
    sigs = [Signature((B, B, _b(src)), (B,))]
    if tensor_src and reduce in (None, "sum", "mean"):
        sigs.append(Signature((P, B, P), (P,)))
    for d in range(len(x.shape)):
        if d == dim or x.shape[d] != index.shape[d]:
            continue
        if tensor_src and src.shape[d] != x.shape[d]:
            continue
        sigs.append(Signature((S(d), S(d), S(d) if tensor_src else None), (S(d),)))
    return sigs


def _scatter_grad(ctx, gy):
    need_x, _, need_src = ctx.needs_input_grad
    gx = _scatter_op(gy, ctx.index, 0.0, ctx.dim) if need_x else None
    gsrc = _pad_to(_gather_op(gy, ctx.index, ctx.dim), ctx.input_shape(2)) if need_src else None
    return gx, None, gsrc


_scatter = defop(
    "scatter",
    inputs=("input", "index", "src"),
    meta=_scatter_meta("scatter"),
    sbp=_scatter_sbp,
    kernels={"cpu": _scatter_kernel},
    grad=_scatter_grad,
    saves=("index",),
    onnx=_scatter_onnx(None),
)


def _scatter_op(x, index, src, dim: int):
    return dispatch(_scatter, (x, index, src), {"dim": dim})


def _scatter_add_grad(ctx, gy):
    need_x, _, need_src = ctx.needs_input_grad
    gsrc = _pad_to(_gather_op(gy, ctx.index, ctx.dim), ctx.input_shape(2)) if need_src else None
    return (gy if need_x else None), None, gsrc


_scatter_add = defop(
    "scatter_add",
    inputs=("input", "index", "src"),
    meta=_scatter_meta("scatter_add"),
    sbp=_scatter_sbp,
    kernels={"cpu": _scatter_add_kernel},
    grad=_scatter_add_grad,
    saves=("index",),
    onnx=_scatter_onnx("add"),
)


def _scatter_add_op(x, index, src, dim: int):
    return dispatch(_scatter_add, (x, index, src), {"dim": dim})


_REDUCTIONS = ("sum", "prod", "mean", "amax", "amin")
_UFUNCS = {
    "sum": np.add,
    "mean": np.add,
    "prod": np.multiply,
    "amax": np.maximum,
    "amin": np.minimum,
}


def _reduce_identity(reduce: str, dtype):
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return info.min if reduce == "amax" else info.max
    return -np.inf if reduce == "amax" else np.inf


def _scatter_reduce_kernel(x, index, src, *, dim, reduce, include_self):
    out, flat, key, values = _scatter_prepare("scatter_reduce", x, index, src, dim)
    if not include_self:
        flat[key] = _reduce_identity(reduce, x.dtype)
    _UFUNCS[reduce].at(flat, key, values)
    if reduce == "mean":
        count = np.full(flat.shape, int(include_self), np.int64)
        np.add.at(count, key, 1)
        np.maximum(count, 1, out=count)
        if x.dtype.kind in "iu":
            np.floor_divide(flat, count, out=flat, casting="unsafe")  # PyTorch floors
        else:
            np.divide(flat, count, out=flat, casting="unsafe")
    return out.astype(x.dtype, copy=False)


def _scatter_counts(ctx, dtype):
    """How many values each position of a 'mean' scatter_reduce averaged (at least 1)."""
    shape = ctx.input_shape(0)
    return dispatch(
        _scatter_reduce,
        (ones(shape, dtype=dtype), ctx.index, ones(tuple(ctx.index.shape), dtype=dtype)),
        {"dim": ctx.dim, "reduce": "sum", "include_self": ctx.include_self},
    )


def _extremum_grads(ctx, gy):
    """amax/amin: the gradient is shared evenly by every element equal to its group's result."""
    index, dim, out = ctx.index, ctx.dim, ctx.out
    src = _src_corner(ctx.src, index)
    self_hits = ctx.input.eq(out).to(gy.dtype)
    if not ctx.include_self:
        self_hits = _scatter_op(self_hits, index, 0.0, dim)
    src_hits = src.eq(_gather_op(out, index, dim)).to(gy.dtype)
    share = gy / _scatter_add_op(self_hits, index, src_hits, dim)
    return self_hits * share, src_hits * _gather_op(share, index, dim)


def _scatter_reduce_grad(ctx, gy):
    need_x, _, need_src = ctx.needs_input_grad
    reduce, index, dim = ctx.reduce, ctx.index, ctx.dim
    if reduce in ("sum", "mean"):
        if reduce == "mean":
            gy = gy / _scatter_counts(ctx, gy.dtype)
        gx = gy if ctx.include_self else _scatter_op(gy, index, 0.0, dim)
        gsrc = _gather_op(gy, index, dim)
    elif reduce in ("amax", "amin"):
        gx, gsrc = _extremum_grads(ctx, gy)
    else:
        raise AutogradError("scatter_reduce: the gradient of reduce='prod' is not implemented")
    gsrc = _pad_to(gsrc, ctx.input_shape(2)) if need_src else None
    return (gx if need_x else None), None, gsrc


_ONNX_REDUCTIONS = {
    "sum": ("add", 16),
    "prod": ("mul", 16),
    "amax": ("max", 18),
    "amin": ("min", 18),
}


def _scatter_reduce_onnx(g, x, index, src, *, dim, reduce, include_self):
    if reduce not in _ONNX_REDUCTIONS:
        raise UnsupportedError(f"onnx.export: ONNX's ScatterElements has no {reduce!r} reduction")
    reduction, opset = _ONNX_REDUCTIONS[reduce]
    opset_at_least(g, opset, f"scatter_reduce with reduce={reduce!r}")
    index = g.cast(index, dtypes.int64)
    shape = g.op("Shape", index)
    src = g.op("Slice", src, g.ints([0] * len(g.meta(x).shape)), shape)
    if not include_self:  # the positions written start from the reduction's identity
        identity = g.tensor(_reduce_identity(reduce, g.meta(x).dtype.np), x)
        x = g.op("ScatterElements", x, index, g.op("Expand", identity, shape), axis=dim)
    return g.op("ScatterElements", x, index, src, axis=dim, reduction=reduction)


_scatter_reduce = defop(
    "scatter_reduce",
    inputs=("input", "index", "src"),
    meta=_scatter_meta("scatter_reduce"),
    sbp=_scatter_sbp,
    kernels={"cpu": _scatter_reduce_kernel},
    grad=_scatter_reduce_grad,
    saves=("input", "index", "src", "out"),
    onnx=_scatter_reduce_onnx,
)


@checked
def scatter(input: Tensor, dim, index: Tensor, src=None, value=None, *, reduce=None):
    """A copy of `input` with values written along `dim` at `index`:
    `out[index[i][j]][j] = src[i][j]` for dim=0. `src` is a tensor (only its index-shaped
    leading corner is read) or a number (`value`). `reduce='add'` / `'multiply'` combine
    with the existing values instead (see `scatter_reduce`). Where several writes hit one
    position without `reduce`, which one wins is unspecified."""
    if src is None:
        src = value
    if src is None:
        raise TypeError("scatter: expected a src tensor or a value")
    operand_arg("scatter", "src" if value is None else "value", None, src)
    dim = normalize_dim("scatter", dim, input.ndim)
    if reduce is None:
        return _scatter_op(input, index, src, dim)
    modes = {"add": "sum", "multiply": "prod"}
    if reduce not in modes:
        raise ValueError(f"scatter: reduce argument must be either add or multiply, got {reduce!r}")
    if not isinstance(src, Tensor):
        src = ones(tuple(index.shape), dtype=input.dtype, **on_placement_of(index)) * src
    args = {"dim": dim, "reduce": modes[reduce], "include_self": True}
    return dispatch(_scatter_reduce, (input, index, src), args)


@checked
def scatter_add(input: Tensor, dim, index: Tensor, src: Tensor):
    """A copy of `input` with `src` added along `dim` at `index` (repeated indices add up):
    `out[index[i][j]][j] += src[i][j]` for dim=0."""
    return _scatter_add_op(input, index, src, normalize_dim("scatter_add", dim, input.ndim))


@checked
def scatter_reduce(input: Tensor, dim, index: Tensor, src: Tensor, reduce, *, include_self=True):
    """A copy of `input` where each position hit by `index` along `dim` becomes the
    reduction ('sum', 'prod', 'mean', 'amax', 'amin') of the `src` values sent there, together
    with the input's own value when `include_self`. Integer 'mean' rounds down. Gradients are
    supported for every reduction but 'prod'; amax/amin share them among ties."""
    if reduce not in _REDUCTIONS:
        raise ValueError(
            f"scatter_reduce: reduce argument must be one of {', '.join(_REDUCTIONS)}, got "
            f"{reduce!r}"
        )
    dim = normalize_dim("scatter_reduce", dim, input.ndim)
    args = {"dim": dim, "reduce": reduce, "include_self": include_self}
    return dispatch(_scatter_reduce, (input, index, src), args)


# -- index_select / index_add / index_copy / index_fill -------------------------------------------
def _check_vector_index(op: str, index, allowed=_INDEX_DTYPES) -> None:
    _check_index_dtype(op, index, allowed)
    if len(index.shape) > 1:
        raise ShapeError(f"{op}: index is supposed to be a vector, got shape {list(index.shape)}")


def _index_select_shape(shape: tuple, index: tuple, dim: int) -> tuple:
    if not shape:
        return ()
    n = int(np.prod(index, dtype=np.int64))
    return (*shape[:dim], n, *shape[dim + 1 :])


def _index_select_meta(x: Meta, index: Meta, *, dim) -> Meta:
    _check_vector_index("index_select", index)
    return Meta(_index_select_shape(x.shape, index.shape, dim), x.dtype)


def _index_select_kernel(x, index, *, dim):
    _check_vector_index("index_select", index)
    idx = index.reshape(-1)
    _check_range("index_select", idx, dim, _dim_size(x.shape, dim))
    out = np.take(_nd(x), idx, axis=dim)
    return out if x.ndim else out.reshape(())


def _index_select_sbp(x: Meta, index: Meta, *, dim) -> list[Signature]:
    sigs = [Signature((B, B), (B,)), Signature((P, B), (P,))]
    if x.shape and index.shape:  # each shard of the index reads the whole input
        sigs.append(Signature((B, S(0)), (S(dim),)))
    sigs += [Signature((S(d), B), (S(d),)) for d in range(len(x.shape)) if d != dim]
    return sigs


def _index_select_grad(ctx, gy):
    base = zeros(ctx.input_shape(0), dtype=gy.dtype)
    return dispatch(_index_add, (base, ctx.index, gy), {"dim": ctx.dim, "alpha": 1}), None


_index_select = defop(
    "index_select",
    inputs=("input", "index"),
    meta=_index_select_meta,
    sbp=_index_select_sbp,
    kernels={"cpu": _index_select_kernel},
    grad=_index_select_grad,
    saves=("index",),
    onnx=_index_select_onnx,
)


def _index_select_op(x, index, dim: int):
    return dispatch(_index_select, (x, index), {"dim": dim})


@checked
def index_select(input: Tensor, dim, index: Tensor):
    """The slices of `input` at the positions `index` (a vector of int64/int32) along `dim`,
    in that order; a copy."""
    return _index_select_op(input, index, normalize_dim("index_select", dim, input.ndim))


def _check_index_source(op: str, x, index, source, dim: int, allowed=_INDEX_DTYPES) -> None:
    """index_add/index_copy: `source` is the input with `dim` resized to the index length."""
    _check_vector_index(op, index, allowed)
    _check_same_dtype(op, x, source, "source")
    # NOTE: a 0-d input or source counts as 1-d (PyTorch's dim ops treat scalars as vectors)
    expected = _index_select_shape(tuple(x.shape) or (1,), index.shape, dim)
    if (tuple(source.shape) or (1,)) != expected:
        raise ShapeError(
            f"{op}: source of shape {list(source.shape)} must be the input's shape "
            f"{list(x.shape)} with dimension {dim} of size {expected[dim]} (the number of "
            "indices), i.e. {list(expected)}"
        )


def _index_source_meta(op: str, allowed):
    def meta(x: Meta, index: Meta, source: Meta, *, dim, **_) -> Meta:
        _check_index_source(op, x, index, source, dim, allowed)
        return Meta(x.shape, x.dtype)

    return meta


def _index_source_prepare(op: str, x, index, source, dim: int, allowed) -> tuple:
    """Check, then (output copy in the work dtype, its at-least-1-d view, NumPy key, source as
    at least 1-d in the work dtype). Kernels cast the output back to the input's dtype."""
    _check_index_source(op, x, index, source, dim, allowed)
    idx = index.reshape(-1)
    _check_range(op, idx, dim, _dim_size(x.shape, dim))
    work = _work_dtype(x.dtype)
    out = x.astype(work)
    return out, _nd(out), _dim_key(dim, idx), _nd(source).astype(work, copy=False)


def _index_add_kernel(x, index, source, *, dim, alpha):
    out, flat, key, src = _index_source_prepare("index_add", x, index, source, dim, _INDEX_DTYPES)
    np.add.at(flat, key, src if alpha == 1 else src * alpha)
    return out.astype(x.dtype, copy=False)


def _index_copy_kernel(x, index, source, *, dim):
    out, flat, key, src = _index_source_prepare("index_copy", x, index, source, dim, _LONG_DTYPES)
    flat[key] = src
    return out.astype(x.dtype, copy=False)


def _index_source_sbp(linear: bool):
    def sbp(x: Meta, index: Meta, source: Meta, *, dim, **_) -> list[Signature]:
        sigs = [Signature((B, B, B), (B,))]
        if linear:
            sigs.append(Signature((P, B, P), (P,)))
        if len(source.shape) == len(x.shape):
            sigs += [Signature((S(d), B, S(d)), (S(d),)) for d in range(len(x.shape)) if d != dim]
        return sigs

    return sbp


def _index_add_grad(ctx, gy):
    need_x, _, need_src = ctx.needs_input_grad
    gsrc = None
    if need_src:
        gsrc = _index_select_op(gy, ctx.index, ctx.dim)
        if ctx.alpha != 1:
            gsrc = gsrc * ctx.alpha
        gsrc = gsrc.reshape(ctx.input_shape(2))
    return (gy if need_x else None), None, gsrc


def _vector_along(g, index: str, dim: int, shape: str, ndim: int) -> str:
    """A vector index along `dim`, expanded to `shape` (ScatterElements' index layout)."""
    column = [1] * ndim
    column[dim] = -1
    return g.op("Expand", g.op("Reshape", g.cast(index, dtypes.int64), g.ints(column)), shape)


def _index_source_onnx(reduction: str | None):
    def lower(g, x, index, source, *, dim, alpha=1):
        if reduction is not None:
            opset_at_least(g, 16, "index_add")
        ndim = len(g.meta(x).shape)
        if not ndim:
            raise UnsupportedError("onnx.export: ONNX scatters into tensors with dims, not 0-d")
        if alpha != 1:
            source = g.op("Mul", source, g.tensor(alpha, source))
        at = _vector_along(g, index, dim, g.op("Shape", source), ndim)
        return g.op("ScatterElements", x, at, source, axis=dim, reduction=reduction)

    return lower


def _index_fill_onnx(g, x, index, value, *, dim):
    shape = list(g.meta(x).shape)
    if not shape:
        raise UnsupportedError("onnx.export: ONNX scatters into tensors with dims, not 0-d")
    shape[dim] = math.prod(g.meta(index).shape)
    updates = g.op("Expand", g.cast(g.tensor(value, x), g.meta(x).dtype), g.ints(shape))
    at = _vector_along(g, index, dim, g.ints(shape), len(shape))
    return g.op("ScatterElements", x, at, updates, axis=dim)


_index_add = defop(
    "index_add",
    inputs=("input", "index", "source"),
    meta=_index_source_meta("index_add", _INDEX_DTYPES),
    sbp=_index_source_sbp(linear=True),
    kernels={"cpu": _index_add_kernel},
    grad=_index_add_grad,
    saves=("index",),
    onnx=_index_source_onnx("add"),
)


@checked
def index_add(input: Tensor, dim, index: Tensor, source: Tensor, *, alpha=1):
    """A copy of `input` with `alpha * source[i]` added to the slice `index[i]` along `dim`
    (repeated indices add up). `source` is `input` with `dim` resized to `len(index)`."""
    if not (input.dtype.is_floating_point or input.dtype.is_complex) and isinstance(alpha, float):
        raise DTypeError(
            f"index_add: for integral input tensors, alpha must not be a floating point number "
            f"(input {input.dtype}, alpha={alpha})"
        )
    dim = normalize_dim("index_add", dim, input.ndim)
    return dispatch(_index_add, (input, index, source), {"dim": dim, "alpha": alpha})


def _index_fill_op(x, index, value, dim: int):
    return dispatch(_index_fill, (x, index, value), {"dim": dim})


def _index_copy_grad(ctx, gy):
    need_x, _, need_src = ctx.needs_input_grad
    gx = _index_fill_op(gy, ctx.index, 0.0, ctx.dim) if need_x else None
    gsrc = (
        _index_select_op(gy, ctx.index, ctx.dim).reshape(ctx.input_shape(2)) if need_src else None
    )
    return gx, None, gsrc


_index_copy = defop(
    "index_copy",
    inputs=("input", "index", "source"),
    meta=_index_source_meta("index_copy", _LONG_DTYPES),
    sbp=_index_source_sbp(linear=True),
    kernels={"cpu": _index_copy_kernel},
    grad=_index_copy_grad,
    saves=("index",),
    onnx=_index_source_onnx(None),
)


@checked
def index_copy(input: Tensor, dim, index: Tensor, source: Tensor):
    """A copy of `input` whose slices `index[i]` (int64) along `dim` are replaced by
    `source[i]`; with repeated indices, which copy wins is unspecified."""
    dim = normalize_dim("index_copy", dim, input.ndim)
    return dispatch(_index_copy, (input, index, source), {"dim": dim})


def _index_fill_meta(x: Meta, index: Meta, value, *, dim) -> Meta:
    _check_vector_index("index_fill", index, _LONG_DTYPES)
    return Meta(x.shape, x.dtype)


def _index_fill_kernel(x, index, value, *, dim):
    _check_vector_index("index_fill", index, _LONG_DTYPES)
    idx = index.reshape(-1)
    _check_range("index_fill", idx, dim, _dim_size(x.shape, dim))
    out = x.copy()
    _nd(out)[_dim_key(dim, idx)] = value
    return out


def _index_fill_sbp(x: Meta, index: Meta, value, *, dim) -> list[Signature]:
    sigs = [Signature((B, B, _b(value)), (B,))]
    sigs += [Signature((S(d), B, _b(value)), (S(d),)) for d in range(len(x.shape)) if d != dim]
    return sigs


def _index_fill_grad(ctx, gy):
    need_x, _, need_value = ctx.needs_input_grad
    gx = _index_fill_op(gy, ctx.index, 0.0, ctx.dim)
    gvalue = (gy - gx).sum() if need_value else None
    return (gx if need_x else None), None, gvalue


_index_fill = defop(
    "index_fill",
    inputs=("input", "index", "value"),
    meta=_index_fill_meta,
    sbp=_index_fill_sbp,
    kernels={"cpu": _index_fill_kernel},
    grad=_index_fill_grad,
    saves=("index",),
    onnx=_index_fill_onnx,
)


@checked
def index_fill(input: Tensor, dim, index: Tensor, value: Tensor | Number):
    """A copy of `input` whose slices `index` (int64) along `dim` are filled with `value` (a
    number or a 0-d tensor, differentiable)."""
    _check_scalar_value("index_fill", value)
    return _index_fill_op(input, index, value, normalize_dim("index_fill", dim, input.ndim))


# -- masking ------------------------------------------------------------------------------------
def _masked_fill_meta(x: Meta, mask: Meta, value) -> Meta:
    _check_mask("masked_fill", mask)
    return Meta(broadcast_shapes("masked_fill", x.shape, mask.shape), x.dtype)


def _masked_fill_kernel(x, mask, value):
    _check_mask("masked_fill", mask)
    return np.where(mask, np.asarray(value).astype(x.dtype), x)


def _masked_fill_grad(ctx, gy):
    need_x, _, need_value = ctx.needs_input_grad
    gx = _masked_fill_op(gy, ctx.mask, 0.0)
    gvalue = (gy - gx).sum() if need_value else None
    return (gx if need_x else None), None, gvalue


_masked_fill = defop(
    "masked_fill",
    inputs=("input", "mask", "value"),
    meta=_masked_fill_meta,
    sbp=elementwise_sbp(),
    kernels={"cpu": _masked_fill_kernel},
    grad=_masked_fill_grad,
    saves=("mask",),
    onnx=lambda g, x, mask, value: g.op(
        "Where", as_bool(g, mask), g.cast(g.tensor(value, x), g.meta(x).dtype), x
    ),
)


def _masked_fill_op(x, mask, value):
    return dispatch(_masked_fill, (x, mask, value), _NO_ATTRS)


def masked_fill(input, mask, value):
    """A copy of `input` with `value` (a number or a 0-d tensor, cast to `input`'s dtype)
    where the bool `mask` is True; `mask` and `input` broadcast together."""
    _check_scalar_value("masked_fill", value)
    return _masked_fill_op(input, mask, value)


def _masked_select_meta(x: Meta, mask: Meta) -> Meta:
    _check_mask("masked_select", mask)
    broadcast_shapes("masked_select", x.shape, mask.shape)
    return Meta((-1,), x.dtype)


def _masked_select_kernel(x, mask):
    _check_mask("masked_select", mask)
    xb, mb = np.broadcast_arrays(x, mask)
    return xb[mb]


def _masked_select_grad(ctx, gy):
    shape = broadcast_shapes("masked_select", ctx.input_shape(0), ctx.input_shape(1))
    base = zeros(shape, dtype=gy.dtype)
    return dispatch(_masked_scatter, (base, ctx.mask, gy), _NO_ATTRS), None


_masked_select = defop(
    "masked_select",
    inputs=("input", "mask"),
    meta=_masked_select_meta,
    sbp=broadcast_only,
    kernels={"cpu": _masked_select_kernel},
    grad=_masked_select_grad,
    saves=("mask",),
)


@checked
def masked_select(input: Tensor, mask: Tensor):
    """The elements of `input` where the bool `mask` is True (both broadcast), as a 1-d copy
    in row-major order."""
    return dispatch(_masked_select, (input, mask), _NO_ATTRS)


def _masked_scatter_meta(x: Meta, mask: Meta, source: Meta) -> Meta:
    _check_mask("masked_scatter", mask)
    _check_same_dtype("masked_scatter", x, source, "source")
    return Meta(broadcast_shapes("masked_scatter", x.shape, mask.shape), x.dtype)


def _masked_scatter_kernel(x, mask, source):
    _check_mask("masked_scatter", mask)
    _check_same_dtype("masked_scatter", x, source, "source")
    shape = broadcast_shapes("masked_scatter", x.shape, mask.shape)
    out = np.array(np.broadcast_to(x, shape))
    m = np.broadcast_to(mask, shape)
    n = int(np.count_nonzero(m))
    if source.size < n:
        raise ShapeError(
            f"masked_scatter: the source has {source.size} elements, fewer than the {n} True "
            "elements of the mask"
        )
    out[m] = source.reshape(-1)[:n]
    return out


def _masked_scatter_grad(ctx, gy):
    need_x, _, need_src = ctx.needs_input_grad
    gx = _masked_fill_op(gy, ctx.mask, 0.0) if need_x else None
    gsrc = None
    if need_src:
        shape = ctx.input_shape(2)
        picked = masked_select(gy, ctx.mask)
        flat = _pad_to(picked, (int(np.prod(shape, dtype=np.int64)),))
        gsrc = flat.reshape(shape)
    return gx, None, gsrc


_masked_scatter = defop(
    "masked_scatter",
    inputs=("input", "mask", "source"),
    meta=_masked_scatter_meta,
    sbp=broadcast_only,
    kernels={"cpu": _masked_scatter_kernel},
    grad=_masked_scatter_grad,
    saves=("mask",),
)


def masked_scatter(input, mask, source):
    """A copy of `input` (broadcast with `mask`) whose positions where the bool `mask` is True
    take the leading elements of `source`, in row-major order."""
    return dispatch(_masked_scatter, (input, mask, source), _NO_ATTRS)


# -- take / take_along_dim ---------------------------------------------------------------------
def _take_meta(x: Meta, index: Meta) -> Meta:
    _check_index_dtype("take", index, _LONG_DTYPES)
    return Meta(index.shape, x.dtype)


def _take_kernel(x, index):
    _check_index_dtype("take", index, _LONG_DTYPES)
    try:
        return np.take(x, index)
    except IndexError:
        bad = index[(index < -x.size) | (index >= x.size)].flat[0]
        raise TensorIndexError(
            f"take: out of range: tried to access index {bad} on a tensor of {x.size} elements"
        ) from None


def _take_grad(ctx, gy):
    shape = ctx.input_shape(0)
    flat = zeros((int(np.prod(shape, dtype=np.int64)),), dtype=gy.dtype)
    index = ctx.index
    rows = index.reshape((1, *index.shape))
    return _index_put_op(flat, rows, gy, (0,), accumulate=True).reshape(shape), None


def _take_sbp(x: Meta, index: Meta) -> list[Signature]:
    sigs = [Signature((B, B), (B,)), Signature((P, B), (P,))]
    sigs += [Signature((B, S(d)), (S(d),)) for d in range(len(index.shape))]
    return sigs


_take = defop(
    "take",
    inputs=("input", "index"),
    meta=_take_meta,
    sbp=_take_sbp,
    kernels={"cpu": _take_kernel},
    grad=_take_grad,
    saves=("index",),
    onnx=lambda g, x, index: g.op("Gather", g.op("Reshape", x, g.ints([-1])), index, axis=0),
)


def take(input, index):
    """The elements of `input`, seen as 1-d, at `index` (int64; negative counts from the end);
    the output has the shape of `index`."""
    return dispatch(_take, (input, index), _NO_ATTRS)


@checked
def take_along_dim(input: Tensor, indices: Tensor, dim=None):
    """`gather` along `dim` with `input` and `indices` broadcast against each other off `dim`;
    with `dim=None`, both are flattened first."""
    _check_index_dtype("take_along_dim", indices, _LONG_DTYPES)
    if dim is None:
        return _gather_op(input.reshape(-1), indices.reshape(-1), 0)
    dim = normalize_dim("take_along_dim", dim, input.ndim)
    if input.ndim != indices.ndim:
        raise ShapeError(
            f"take_along_dim: input and indices should have the same number of dimensions, "
            f"but got {input.ndim} dimensions for input, and {indices.ndim} dimensions for "
            "indices"
        )
    x_shape, i_shape = list(input.shape), list(indices.shape)
    if x_shape:
        x_shape[dim] = i_shape[dim] = 1
    shape = list(broadcast_shapes("take_along_dim", tuple(x_shape), tuple(i_shape)))
    x_shape, i_shape = list(shape), list(shape)
    if shape:
        x_shape[dim], i_shape[dim] = input.shape[dim], indices.shape[dim]
    return _gather_op(input.expand(tuple(x_shape)), indices.expand(tuple(i_shape)), dim)


def batch_gather(input, indices):
    """OneFlow's batch gather: the leading `indices.ndim - 1` dims of `input` and `indices`
    are batch dims, and each batch picks the slices of `input` along the next dim at its
    indices (int32/int64). The output has shape `indices.shape + input.shape[indices.ndim:]`.
    `flow.batch_gather(flow.tensor([[1., 2.], [3., 4.]]), flow.tensor([1, 0]))  # rows swapped`"""
    tensor_arg("batch_gather", "input", 1, input)
    tensor_arg("batch_gather", "indices", 2, indices)
    _check_index_dtype("batch_gather", indices)
    batch = indices.ndim - 1
    if batch < 0 or input.ndim <= batch or tuple(input.shape[:batch]) != tuple(indices.shape[:-1]):
        raise ShapeError(
            f"batch_gather: indices of shape {list(indices.shape)} must be at least 1-d, with "
            f"its leading dims equal to those of the input of shape {list(input.shape)} and "
            "the input one dim longer"
        )
    rest = tuple(input.shape[batch + 1 :])
    batches, count = int(np.prod(input.shape[:batch], dtype=np.int64)), indices.shape[-1]
    flat = input.reshape(batches, input.shape[batch], *rest)
    picks = indices.reshape(batches, count, *(1,) * len(rest)).expand(batches, count, *rest)
    out = _gather_op(flat, picks, 1)
    return out.reshape(*indices.shape, *rest)


# -- nonzero ------------------------------------------------------------------------------------
_nonzero = defop(
    "nonzero",
    inputs=("input",),
    meta=lambda x: Meta((-1, len(x.shape)), dtypes.int64),
    sbp=broadcast_only,
    kernels={"cpu": lambda x: np.argwhere(x)},
    differentiable=False,
)


@checked
def nonzero(input: Tensor, *, as_tuple=False):
    """The indices of the nonzero elements of `input`: an int64 tensor of shape (n, ndim) in
    row-major order, or with `as_tuple=True` one 1-d tensor per dim (a 0-d input counts as
    1-d)."""
    if not as_tuple:
        return dispatch(_nonzero, (input,), _NO_ATTRS)
    found = dispatch(_nonzero, (input.reshape(1) if input.ndim == 0 else input,), _NO_ATTRS)
    return tuple(dispatch(_getitem, (found,), {"key": (_FULL, d)}) for d in range(found.shape[1]))


@checked
def argwhere(input: Tensor):
    """The indices of the nonzero elements of `input`, shape (n, ndim) (= `nonzero`)."""
    return dispatch(_nonzero, (input,), _NO_ATTRS)


def _where_single(condition):
    """`where(condition)`: `nonzero(condition, as_tuple=True)`. The 3-argument `where` lives
    in the binary ops and calls this for the 1-argument form."""
    return nonzero(condition, as_tuple=True)


# -- sorting ------------------------------------------------------------------------------------
def _argsort(x: np.ndarray, axis: int, descending: bool) -> np.ndarray:
    """Stable argsort; NaN counts as the largest value (PyTorch). Descending keeps the input
    order of ties: a stable ascending sort of the reversed array, reversed back."""
    keys = _sort_keys(x)
    if not descending:
        return np.argsort(keys, axis=axis, kind="stable")
    idx = np.argsort(np.flip(keys, axis), axis=axis, kind="stable")
    return np.ascontiguousarray(np.flip(keys.shape[axis] - 1 - idx, axis))


def _sort_kernel(x, *, dim, descending):
    reject_complex("sort", x.dtype)
    if x.ndim == 0:
        return x.copy(), np.zeros((), np.int64)
    idx = _argsort(x, dim, descending)
    return np.take_along_axis(x, idx, dim), idx


def _dim_sbp(n_out: int):
    """Ops along `dim` (sort, topk): any other axis may stay split."""

    def sbp(x: Meta, *, dim, **_) -> list[Signature]:
        sigs = [Signature((B,), (B,) * n_out)]
        sigs += [Signature((S(d),), (S(d),) * n_out) for d in range(len(x.shape)) if d != dim]
        return sigs

    return sbp


def _selection_grad(ctx, gy, _gi):
    """sort/topk: each output value came from one input position (`out1`, the indices)."""
    base = zeros(ctx.input_shape(0), dtype=gy.dtype)
    return (_scatter_op(base, ctx.out1, gy, ctx.dim),)


_sort = defop(
    "sort",
    inputs=("input",),
    meta=lambda x, **_: (Meta(x.shape, x.dtype), Meta(x.shape, dtypes.int64)),
    sbp=_dim_sbp(2),
    kernels={"cpu": _sort_kernel},
    grad=_selection_grad,
    saves=("out1",),
    n_out=2,
    onnx=_sort_onnx,
)


@checked
def sort(input: Tensor, dim=-1, descending=False, *, stable=False):
    """`(values, indices)` of `input` sorted along `dim` (ascending unless `descending`). The
    sort is always stable (ties keep their input order), which `stable=True` asks for; NaN
    sorts as the largest value."""
    dim = normalize_dim("sort", dim, input.ndim)
    args = {"dim": dim, "descending": bool(descending)}
    return _SortResult(*dispatch(_sort, (input,), args))


@checked
def argsort(input: Tensor, dim=-1, descending=False, *, stable=False):
    """The indices that sort `input` along `dim` (`sort(...).indices`)."""
    return sort(input, dim, descending, stable=stable).indices


def _check_k(op: str, k: int, size: int) -> None:
    if not 0 <= k <= size:
        raise ShapeError(f"{op}: selected index k={k} out of range for a dimension of size {size}")


def _topk_meta(x: Meta, *, k, dim, largest):
    _check_k("topk", k, _dim_size(x.shape, dim))
    shape = (*x.shape[:dim], k, *x.shape[dim + 1 :]) if x.shape else ()
    return Meta(shape, x.dtype), Meta(shape, dtypes.int64)


def _topk_kernel(x, *, k, dim, largest):
    reject_complex("topk", x.dtype)
    n = _dim_size(x.shape, dim)
    _check_k("topk", k, n)
    if x.ndim == 0:
        return x.copy(), np.zeros((), np.int64)
    lead = (slice(None),) * dim
    if k in (0, n):
        idx = _argsort(x, dim, descending=largest)[(*lead, slice(0, k))]
    else:  # partition first (O(n)) to find the k candidates, then sort only those
        keys = _sort_keys(x)
        part = np.argpartition(keys, n - k if largest else k - 1, axis=dim)
        cand = part[(*lead, slice(n - k, None) if largest else slice(0, k))]
        order = _argsort(np.take_along_axis(keys, cand, dim), dim, descending=largest)
        idx = np.take_along_axis(cand, order, dim)
    return np.take_along_axis(x, idx, dim), idx


_topk = defop(
    "topk",
    inputs=("input",),
    meta=_topk_meta,
    sbp=_dim_sbp(2),
    kernels={"cpu": _topk_kernel},
    grad=_selection_grad,
    saves=("out1",),
    n_out=2,
    onnx=_topk_onnx,
)


@checked
def topk(input: Tensor, k, dim=-1, largest=True, sorted=True):
    """`(values, indices)` of the `k` largest (or smallest) elements along `dim`. They are
    always returned sorted (largest first, or smallest first), which `sorted=True` asks for;
    NaN counts as the largest value."""
    dim = normalize_dim("topk", dim, input.ndim)
    args = {"k": k, "dim": dim, "largest": bool(largest)}
    return _TopkResult(*dispatch(_topk, (input,), args))


@checked
def kthvalue(input: Tensor, k, dim=-1, keepdim=False):
    """`(values, indices)` of the `k`-th smallest element (1-based) along `dim`."""
    dim = normalize_dim("kthvalue", dim, input.ndim)
    size = _dim_size(tuple(input.shape), dim)
    if not 1 <= k <= size:
        raise ShapeError(
            f"kthvalue: selected number k={k} out of range for dimension {dim} of size {size}"
        )
    values, indices = topk(input, k, dim, largest=False)
    if input.ndim == 0:
        return _KthvalueResult(values, indices)
    pick = (k - 1, k, None) if keepdim else k - 1
    key = (_FULL,) * dim + (pick,)
    return _KthvalueResult(
        dispatch(_getitem, (values,), {"key": key}), dispatch(_getitem, (indices,), {"key": key})
    )


# -- unique -------------------------------------------------------------------------------------
def _unique_meta(x: Meta, *, dim):
    if dim is None:
        values = (-1,)
        inverse = x.shape
    else:
        values = (*x.shape[:dim], -1, *x.shape[dim + 1 :])
        inverse = (_dim_size(x.shape, dim),)
    return Meta(values, x.dtype), Meta(inverse, dtypes.int64), Meta((-1,), dtypes.int64)


def _unique_kernel(x, *, dim):
    keys = _sort_keys(x)
    if dim is None:
        values, inverse, counts = np.unique(
            keys.reshape(-1), return_inverse=True, return_counts=True, equal_nan=False
        )
        inverse = inverse.reshape(x.shape)
    else:
        values, inverse, counts = np.unique(
            _nd(keys), axis=dim, return_inverse=True, return_counts=True
        )
        inverse = inverse.reshape(-1)
    return values.astype(x.dtype, copy=False), inverse.astype(np.int64), counts.astype(np.int64)


_unique = defop(
    "unique",
    inputs=("input",),
    meta=_unique_meta,
    sbp=_broadcast_outputs(3),
    kernels={"cpu": _unique_kernel},
    n_out=3,
    differentiable=False,
)


def _unique_result(outs: tuple, return_inverse: bool, return_counts: bool):
    values, inverse, counts = outs
    if not (return_inverse or return_counts):
        return values
    return (values, *((inverse,) if return_inverse else ()), *((counts,) if return_counts else ()))


def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """The unique elements of `input` (flattened, or the unique slices along `dim`), in
    ascending order (also for `sorted=False`: any order is allowed there). With
    `return_inverse`/`return_counts`, also where each element went and how often each unique
    value occurs. NaNs are all distinct, as in PyTorch."""
    if dim is not None:
        dim = normalize_dim("unique", dim, input.ndim)
    outs = dispatch(_unique, (input,), {"dim": dim})
    return _unique_result(outs, return_inverse, return_counts)


def _unique_consecutive_kernel(x, *, dim):
    if dim is None:
        rows = x.reshape(-1, 1)
    else:
        rows = np.moveaxis(_nd(x), dim, 0)
        rows = rows.reshape(rows.shape[0], -1)
    n = rows.shape[0]
    starts = np.ones(n, np.bool_)
    if n > 1:
        starts[1:] = np.any(rows[1:] != rows[:-1], axis=1)
    firsts = np.flatnonzero(starts)
    if dim is None:
        values = x.reshape(-1)[firsts]
        inverse = (np.cumsum(starts) - 1).reshape(x.shape)
    else:
        values = np.take(_nd(x), firsts, axis=dim)
        inverse = np.cumsum(starts) - 1
    counts = np.diff(np.append(firsts, n))
    return values, inverse.astype(np.int64), counts.astype(np.int64)


_unique_consecutive = defop(
    "unique_consecutive",
    inputs=("input",),
    meta=_unique_meta,
    sbp=_broadcast_outputs(3),
    kernels={"cpu": _unique_consecutive_kernel},
    n_out=3,
    differentiable=False,
)


def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    """`input` (flattened, or its slices along `dim`) with each run of equal consecutive
    elements kept once; optionally the inverse mapping and the run lengths."""
    if dim is not None:
        dim = normalize_dim("unique_consecutive", dim, input.ndim)
    outs = dispatch(_unique_consecutive, (input,), {"dim": dim})
    return _unique_result(outs, return_inverse, return_counts)


# -- searching ----------------------------------------------------------------------------------
def _check_searchsorted(seq, values, sorter) -> None:
    seq_shape = tuple(seq.shape)
    if not seq_shape:
        raise ShapeError("searchsorted: the boundaries tensor should have at least one dimension")
    values_shape = tuple(values.shape) if isinstance(values, Meta | np.ndarray) else None
    if len(seq_shape) > 1 and (
        values_shape is None
        or len(values_shape) != len(seq_shape)
        or values_shape[:-1] != seq_shape[:-1]
    ):
        raise ShapeError(
            f"searchsorted: the boundaries tensor should be 1-d, or its first N-1 dimensions "
            f"must match those of the input values; got boundaries {list(seq_shape)} and "
            f"values {list(values_shape) if values_shape is not None else 'a scalar'}"
        )
    if sorter is not None:
        _check_index_dtype("searchsorted", sorter, _LONG_DTYPES)
        if tuple(sorter.shape) != seq_shape:
            raise ShapeError(
                f"searchsorted: sorter of shape {list(sorter.shape)} must have the boundaries' "
                f"shape {list(seq_shape)}"
            )


def _searchsorted_meta(seq: Meta, values, sorter, *, right, out_int32) -> Meta:
    _check_searchsorted(seq, values, sorter)
    shape = values.shape if isinstance(values, Meta) else ()
    return Meta(shape, dtypes.int32 if out_int32 else dtypes.int64)


def _batched_searchsorted(seq: np.ndarray, values: np.ndarray, right: bool) -> np.ndarray:
    """Row-wise searchsorted without a loop: sort each row of boundaries and values together
    (values before equal boundaries for 'left', after for 'right'); a value's answer is the
    number of boundaries sorted before it."""
    n, m = seq.shape[-1], values.shape[-1]
    s = seq.reshape(-1, n)
    v = values.reshape(-1, m)
    is_seq = np.concatenate([np.ones(n, np.bool_), np.zeros(m, np.bool_)])
    tie = ~is_seq if right else is_seq
    keys = np.concatenate([s, v], axis=1)
    order = np.lexsort((np.broadcast_to(tie, keys.shape), keys), axis=-1)
    seq_before = np.cumsum(is_seq[order], axis=1)
    at_value = order >= n
    out = np.empty(v.shape, np.int64)
    out[np.nonzero(at_value)[0], order[at_value] - n] = seq_before[at_value]
    return out.reshape(values.shape)


def _searchsorted_kernel(seq, values, sorter, *, right, out_int32):
    _check_searchsorted(seq, values, sorter)
    if sorter is not None:
        seq = np.take_along_axis(seq, sorter, -1)
    seq = _sort_keys(seq)
    values = _sort_keys(values) if isinstance(values, np.ndarray) else values
    if seq.ndim == 1:
        out = np.searchsorted(seq, values, side="right" if right else "left")
    else:
        out = _batched_searchsorted(seq, values, right)
    return np.asarray(out, np.int32 if out_int32 else np.int64)


def _searchsorted_sbp(seq: Meta, values, sorter, *, right, out_int32) -> list[Signature]:
    sigs = [Signature((B, _b(values), _b(sorter)), (B,))]
    if not isinstance(values, Meta):
        return sigs
    if len(seq.shape) == 1:  # every value searches the whole sequence
        sigs += [Signature((B, S(d), _b(sorter)), (S(d),)) for d in range(len(values.shape))]
    else:
        for d in range(len(seq.shape) - 1):
            sorter_sbp = None if sorter is None else S(d)
            sigs.append(Signature((S(d), S(d), sorter_sbp), (S(d),)))
    return sigs


_searchsorted = defop(
    "searchsorted",
    inputs=("sorted_sequence", "input", "sorter"),
    meta=_searchsorted_meta,
    sbp=_searchsorted_sbp,
    kernels={"cpu": _searchsorted_kernel},
    promote="common",
    promote_args=(0, 1),
    differentiable=False,
)


def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None, sorter=None):
    """For each value of `input` (a tensor or a number), the index where it would be inserted
    into the innermost dim of `sorted_sequence` to keep it sorted: before equal elements, or
    after them with `right=True` / `side='right'`. An N-d `sorted_sequence` searches the row
    matching the value's leading indices; `sorter` sorts an unsorted sequence."""
    if side is not None:
        if side not in ("left", "right"):
            raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
        if right and side == "left":
            raise TideflowError(
                "searchsorted: side and right can't be set to opposites, got side of left "
                "while right was True"
            )
        right = side == "right"
    args = {"right": bool(right), "out_int32": bool(out_int32)}
    return dispatch(_searchsorted, (sorted_sequence, input, sorter), args)


@checked
def bucketize(input: Tensor | Number, boundaries: Tensor, *, out_int32=False, right=False):
    """The bucket of each value of `input` given the sorted 1-d `boundaries`:
    `boundaries[i-1] < x <= boundaries[i]`, or `boundaries[i-1] <= x < boundaries[i]` with
    `right=True` (`searchsorted(boundaries, input, right=right)`)."""
    if boundaries.ndim != 1:
        raise ShapeError(
            f"bucketize: boundaries tensor must be 1-d, got shape {list(boundaries.shape)}"
        )
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


# -- counting -----------------------------------------------------------------------------------
def _check_bincount(x, weights, minlength) -> None:
    if len(x.shape) != 1 or _np_dtype(x).kind not in "iu":
        raise TideflowError(
            f"bincount: only supports 1-d non-negative integral inputs, got shape "
            f"{list(x.shape)} of {dtypes.from_numpy(_np_dtype(x))}"
        )
    if weights is not None and tuple(weights.shape) != tuple(x.shape):
        raise ShapeError(
            f"bincount: weights of shape {list(weights.shape)} must have the input's shape "
            f"{list(x.shape)}"
        )
    if minlength < 0:
        raise TideflowError(f"bincount: minlength should be >= 0, got {minlength}")


def _bincount_dtype(weights) -> dtypes.DType:
    if weights is None:
        return dtypes.int64
    # NOTE: PyTorch keeps float32 weights as float32 and counts every other dtype in float64.
    return dtypes.float32 if _np_dtype(weights) == np.float32 else dtypes.float64


def _bincount_meta(x: Meta, weights, *, minlength) -> Meta:
    _check_bincount(x, weights, minlength)
    return Meta((-1,), _bincount_dtype(weights))


def _bincount_kernel(x, weights, *, minlength):
    _check_bincount(x, weights, minlength)
    if x.size and x.min() < 0:
        raise TideflowError(f"bincount: only supports non-negative inputs, got {x.min()}")
    if weights is None:
        return np.bincount(x, minlength=minlength).astype(np.int64, copy=False)
    counts = np.bincount(x, weights.astype(np.float64), minlength=minlength)
    return counts.astype(_bincount_dtype(weights).np, copy=False)


def _bincount_grad(ctx, gy):
    # d out[b] / d weights[i] = [input[i] == b]: each weight's gradient is its bin's
    bins = ctx.input
    if bins.dtype not in (dtypes.int32, dtypes.int64):
        bins = bins.to(dtypes.int64)
    return None, _index_select_op(gy, bins, 0)


def _bincount_sbp(x: Meta, weights, *, minlength) -> list[Signature]:
    sigs = [Signature((B, _b(weights)), (B,))]
    if isinstance(weights, Meta):  # counts are linear in the weights
        sigs.append(Signature((B, P), (P,)))
    return sigs


_bincount = defop(
    "bincount",
    inputs=("input", "weights"),
    meta=_bincount_meta,
    sbp=_bincount_sbp,
    kernels={"cpu": _bincount_kernel},
    grad=_bincount_grad,
    saves=("input",),
)


def bincount(input, weights=None, minlength=0):
    """How often each value 0..max(input) occurs in the 1-d non-negative integer `input` (at
    least `minlength` bins); with `weights`, the sum of the weights in each bin (float32
    weights give float32, other weights float64). Differentiable in `weights` (PyTorch is
    not)."""
    return dispatch(_bincount, (input, weights), {"minlength": minlength})


def _check_histc(x, bins, min, max) -> None:
    if not dtypes.from_numpy(_np_dtype(x)).is_floating_point:
        raise DTypeError(
            f"histc: expected a floating point input, got {dtypes.from_numpy(_np_dtype(x))}"
        )
    if bins <= 0:
        raise TideflowError(f"histc: bins must be > 0, got {bins}")
    if min > max:
        raise TideflowError(f"histc: max must be larger than min, got min={min} max={max}")


def _histc_meta(x: Meta, *, bins, min, max) -> Meta:
    _check_histc(x, bins, min, max)
    return Meta((bins,), x.dtype)


def _histc_kernel(x, *, bins, min, max):
    _check_histc(x, bins, min, max)
    data = x.reshape(-1)
    lo, hi = float(min), float(max)
    if lo == hi and data.size:  # PyTorch: min == max means the data's range
        lo, hi = float(data.min()), float(data.max())
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    if not (np.isfinite(lo) and np.isfinite(hi)):
        raise TideflowError(f"histc: range of [{lo}, {hi}] is not finite")
    # PyTorch's rule, in the input's dtype: bin = int((x - lo) * bins / (hi - lo)), elements
    # outside [lo, hi] ignored, the last bin closed on the right
    lo, hi = np.asarray(lo, x.dtype), np.asarray(hi, x.dtype)
    inside = data[(data >= lo) & (data <= hi)]
    pos = ((inside - lo) * np.asarray(bins, x.dtype) / (hi - lo)).astype(np.int64)
    np.minimum(pos, bins - 1, out=pos)
    return np.bincount(pos, minlength=bins).astype(x.dtype)


def _histc_sbp(x: Meta, *, bins, min, max) -> list[Signature]:
    sigs = [Signature((B,), (B,))]
    if min < max:  # a fixed range: the histograms of the shards add up
        sigs += [Signature((S(d),), (P,)) for d in range(len(x.shape))]
    return sigs


_histc = defop(
    "histc",
    inputs=("input",),
    meta=_histc_meta,
    sbp=_histc_sbp,
    kernels={"cpu": _histc_kernel},
    differentiable=False,
)


def histc(input, bins=100, min=0, max=0):
    """A histogram of `input` with `bins` equal-width bins over [min, max] (the data's range
    when min == max); elements outside are ignored. Floating inputs only; same dtype out."""
    return dispatch(_histc, (input,), {"bins": bins, "min": min, "max": max})


# -- put, isin ------------------------------------------------------------------------------
@checked
def put(input: Tensor, index: Tensor, source: Tensor, accumulate=False):
    """A copy of `input` with the elements of `source` written at the positions `index` of
    the input read as 1-d (row-major; negative positions count from the end). With
    `accumulate` they add up, repeated positions included.

    >>> flow.put(flow.zeros(2, 2), flow.tensor([0, -1]), flow.tensor([1.0, 2.0]))
    tensor([[1., 0.],
            [0., 2.]])
    """
    if index.dtype is not dtypes.int64:
        raise DTypeError(f"put: expected an int64 index, got {index.dtype.name}")
    if source.dtype is not input.dtype:
        raise DTypeError(
            f"put: expected source of the input's dtype ({input.dtype.name}), got "
            f"{source.dtype.name}"
        )
    if index.numel() != source.numel():
        raise ShapeError(
            f"put: expected as many source elements as indices, got source of shape "
            f"{list(source.shape)} and index of shape {list(index.shape)}"
        )
    n = input.numel()
    # NOTE: reads the index, as PyTorch does: a position past the end has nowhere to go
    if index.numel() and (n == 0 or bool(((index < -n) | (index >= n)).any())):
        raise TensorIndexError(
            f"put: index out of range for a tensor of {n} elements (shape {list(input.shape)})"
        )
    flat = index_put(input.reshape(-1), (index.reshape(-1),), source.reshape(-1), accumulate)
    return flat.reshape(input.shape)


def _isin_meta(elements, test_elements, *, invert) -> Meta:
    return Meta(elements.shape if isinstance(elements, Meta) else (), dtypes.bool_)


def _isin_sbp(elements, test_elements, **_) -> list[Signature]:
    """Elements split along any axis against every test element (B)."""
    test = B if isinstance(test_elements, Meta) else None
    if not isinstance(elements, Meta):
        return [Signature((None, test), (B,))]
    sigs = [Signature((B, test), (B,))]
    sigs += [Signature((S(a), test), (S(a),)) for a in range(len(elements.shape))]
    return sigs


def _isin_kernel(x, test, *, invert):
    # NOTE: as PyTorch: a number tested against takes the elements' (promoted) dtype, rounded;
    # a number as the element is compared exactly (a half test tensor widened)
    if not isinstance(test, np.ndarray):
        test = np.asarray(test, x.dtype)
    return np.isin(x, test, invert=invert)


_isin = defop(
    "isin",
    inputs=("elements", "test_elements"),
    meta=_isin_meta,
    sbp=_isin_sbp,
    kernels={"cpu": _isin_kernel},
    differentiable=False,
    promote="common",
)


@checked
def isin(elements: Tensor | Number, test_elements: Tensor | Number, *, assume_unique=False,
         invert=False):  # fmt: skip
    """A bool tensor of `elements`' shape: whether each element equals one of
    `test_elements` (compared in their promoted dtype; the opposite with `invert`).
    `assume_unique` is accepted for PyTorch's signature: the answer does not depend on it.

    >>> flow.isin(flow.tensor([1, 2, 3]), flow.tensor([2, 4]))
    tensor([False,  True, False])
    """
    tensors = [t for t in (elements, test_elements) if isinstance(t, Tensor)]
    if not tensors:
        raise TypeError("isin: expected elements or test_elements to be a tensor")
    for t in tensors:  # checked before promotion, which would read bools as integers
        if t.dtype is dtypes.bool_ or t.dtype.is_complex:
            raise DTypeError(f"isin: unsupported input dtype {t.dtype.name}")
    return dispatch(_isin, (elements, test_elements), {"invert": invert})


# -- Tensor methods -----------------------------------------------------------------------------
def _nonzero_method(self, *, as_tuple=False):
    return nonzero(self, as_tuple=as_tuple)


methods(
    __getitem__=_getitem_method,
    __setitem__=_setitem_method,
    gather=gather,
    scatter=scatter,
    scatter_=inplace(scatter, "scatter_"),
    scatter_add=scatter_add,
    scatter_add_=inplace(scatter_add, "scatter_add_"),
    scatter_reduce=scatter_reduce,
    scatter_reduce_=inplace(scatter_reduce, "scatter_reduce_"),
    index_select=index_select,
    index_add=index_add,
    index_add_=inplace(index_add, "index_add_"),
    index_copy=index_copy,
    index_copy_=inplace(index_copy, "index_copy_"),
    index_fill=index_fill,
    index_fill_=inplace(index_fill, "index_fill_"),
    index_put=index_put,
    index_put_=index_put_,
    masked_fill=masked_fill,
    masked_fill_=inplace(masked_fill, "masked_fill_"),
    masked_select=masked_select,
    masked_scatter=masked_scatter,
    masked_scatter_=inplace(masked_scatter, "masked_scatter_"),
    take=take,
    take_along_dim=take_along_dim,
    nonzero=_nonzero_method,
    argwhere=argwhere,
    sort=sort,
    argsort=argsort,
    topk=topk,
    kthvalue=kthvalue,
    unique=unique,
    unique_consecutive=unique_consecutive,
    bincount=bincount,
    histc=histc,
    put=put,
    put_=inplace(put, "put_"),
    isin=isin,
)
