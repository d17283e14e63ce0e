"""Reductions over dimensions: sum, mean, prod, var/std, max/min, norms, cumulative ops, ...

`dim` is an int, a tuple of ints or None (every dim) wherever PyTorch accepts it. Ops that
pick elements (max/min/median/mode with a dim, cummax/cummin) return a named tuple
(values, indices) like `torch.return_types`; the int64 indices carry no gradient.

SBP: a kept axis may stay split everywhere. A split reduced axis gives P only where the
per-shard results add up to the answer (sum, nansum, count_nonzero, and mean, whose kernel
divides by the logical count under that layout); max-like, norm and logical reductions
accept splits on kept axes and B only.
"""

from __future__ import annotations

import builtins
import math
import numbers
from collections import namedtuple

import ml_dtypes
import numpy as np

from ..framework import dtype as dtypes
from ..framework.dispatch import inplace
from ..framework.errors import (
    ArgumentError,
    DTypeError,
    ShapeError,
    TensorIndexError,
    TideflowError,
)
from ..framework.grad_mode import is_grad_enabled
from ..framework.node import is_float
from ..framework.sbp import Split
from ..framework.tensor import Tensor
from ._onnx_rules import reduce
from ._rules import (
    B,
    Meta,
    P,
    S,
    Signature,
    checked,
    defop,
    dispatch,
    halves_in_float32,
    methods,
    normalize_dim,
    normalize_dims,
    reduce_meta_shape,
)
from .binary import maximum, minimum, where
from .complex import holomorphic, reject_complex
from .creation import arange, ones_like, zeros_like
from .linalg import LINALG_NAMESPACE
from .linalg_svd import svdvals
from .shape import cat

__all__ = [
    "sum",
    "sum_to_size",
    "nansum",
    "mean",
    "nanmean",
    "prod",
    "var",
    "std",
    "var_mean",
    "std_mean",
    "amax",
    "amin",
    "aminmax",
    "max",
    "min",
    "argmax",
    "argmin",
    "logsumexp",
    "norm",
    "all",
    "any",
    "count_nonzero",
    "cumsum",
    "cumprod",
    "cummax",
    "cummin",
    "logcumsumexp",
    "renorm",
    "median",
    "nanmedian",
    "mode",
]

# Named results, like torch.return_types.<op>: a tuple type per op, named after it.
_ValuesIndices = namedtuple("_ValuesIndices", ["values", "indices"])
_AminmaxResult = namedtuple("aminmax", ["min", "max"])


def _values_indices(name: str) -> type:
    return type(name, (_ValuesIndices,), {"__slots__": ()})


_MaxResult = _values_indices("max")
_MinResult = _values_indices("min")
_MedianResult = _values_indices("median")
_NanMedianResult = _values_indices("nanmedian")
_ModeResult = _values_indices("mode")
_CummaxResult = _values_indices("cummax")
_CumminResult = _values_indices("cummin")


# -- shared helpers -------------------------------------------------------------------------
_HALF = frozenset({np.dtype(np.float16), dtypes.bfloat16.np})


def _acc(x: np.ndarray) -> np.ndarray:
    """Half floats accumulate in float32, as PyTorch's CPU reductions do."""
    return x.astype(np.float32) if x.dtype in _HALF else x


def _axes(op: str, dim, ndim: int) -> tuple[int, ...]:
    """NumPy axes for `dim` (a 0-d tensor accepts dim 0/-1 but has no axis to reduce)."""
    return tuple(d for d in normalize_dims(op, dim, ndim) if d < ndim)


def _dims(dim):
    """`dim` as an op attribute: a list (PyTorch accepts one) becomes a hashable tuple."""
    return tuple(dim) if isinstance(dim, list) else dim


def _numel(shape: tuple, dims: tuple) -> int:
    return math.prod(shape[d] for d in dims if d < len(shape))


def _keep_shape(shape: tuple, dims: tuple) -> tuple:
    return tuple(1 if i in dims else d for i, d in enumerate(shape))


def _unsqueeze_reduced(t, in_shape: tuple, dim, keepdim: bool):
    """A reduction's output (or its gradient) reshaped to broadcast against the input."""
    if keepdim:
        return t
    return t.reshape(_keep_shape(in_shape, normalize_dims("grad", dim, len(in_shape))))


def expand_reduced(gy, in_shape: tuple, dim, keepdim: bool):
    """Broadcast a reduction's output gradient back over the reduced dims of `in_shape`."""
    return _unsqueeze_reduced(gy, in_shape, dim, keepdim).expand(in_shape)


def _require_float(op: str, np_dtype, hint: str = "") -> None:
    if not is_float(np_dtype):
        name = dtypes.from_numpy(np_dtype).name
        raise DTypeError(f"{op}: expected a floating point input, got {name}{hint}")


def _require_nonempty(op: str, shape: tuple, dims: tuple) -> None:
    """Reductions without an identity (max, argmax, median, ...) need elements to pick."""
    for d in dims:
        if d < len(shape) and shape[d] == 0:
            raise TensorIndexError(
                f"{op}: expected reduction dim {d} to have non-zero size "
                f"(input of shape {list(shape)})"
            )


def _int_to_int64(x_dtype: dtypes.DType, dtype) -> dtypes.DType:
    """sum/prod/cumsum result dtype: `dtype` if given, else integers and bool give int64."""
    if dtype is not None:
        return dtype
    return x_dtype if x_dtype.is_floating_point or x_dtype.is_complex else dtypes.int64


def _ties(x, value):
    """Mask of the elements equal to the selected `value` (NaN matches NaN)."""
    return (x == value) | (x.isnan() & value.isnan())


def _evenly_distribute(gy, x, value, dim, keepdim: bool):
    """Gradient of a reduction that selects a value (amax, max(), median()): gy is split
    evenly among the elements equal to it, as PyTorch does."""
    dims = normalize_dims("grad", dim, x.ndim)
    mask = _ties(x, _unsqueeze_reduced(value, tuple(x.shape), dim, keepdim))
    share = _unsqueeze_reduced(gy, tuple(x.shape), dim, keepdim) / mask.sum(dims, keepdim=True)
    return mask * share


def _index_grad(gy, indices, in_shape: tuple, dim: int, keepdim: bool):
    """Gradient of values picked along `dim` at `indices` (max/min/median/mode with a dim)."""
    if len(in_shape) == 0:
        return gy
    d = normalize_dim("grad", dim, len(in_shape))
    gy = _unsqueeze_reduced(gy, in_shape, d, keepdim)
    indices = _unsqueeze_reduced(indices, in_shape, d, keepdim)
    positions = arange(in_shape[d]).reshape([-1 if i == d else 1 for i in range(len(in_shape))])
    return gy * (positions == indices)


def _reverse_cumsum(t, dim: int):
    return t.flip(dim).cumsum(dim).flip(dim)


def _reduction_sbp(*, split_partial: bool = False, linear: bool = False, n_out: int = 1):
    """B -> B; a kept axis stays split (shifted past dropped dims); a split reduced axis
    gives P when per-shard results add up (`split_partial`); P -> P for linear reductions.
    (`_rules.reduce_sbp` with two outputs, and with split -> P apart from P -> P.)"""

    def sbp(x: Meta, *_, dim=None, keepdim=False, **__) -> list[Signature]:
        dims = normalize_dims("sbp", dim, len(x.shape))
        sigs = [Signature((B,), (B,) * n_out)]
        kept = 0
        for axis in range(len(x.shape)):
            if axis in dims:
                if split_partial:
                    sigs.append(Signature((S(axis),), (P,) * n_out))
            else:
                sigs.append(Signature((S(axis),), (S(axis if keepdim else kept),) * n_out))
                kept += 1
        if linear:
            sigs.append(Signature((P,), (P,) * n_out))
        return sigs

    return sbp


def _scan_sbp(*, linear: bool = False, n_out: int = 1):
    """Scans along `dim` (cumsum, cummax): any other axis may be split; P -> P if linear."""

    def sbp(x: Meta, *, dim, **_) -> list[Signature]:
        d = normalize_dim("sbp", dim, len(x.shape))
        sigs = [Signature((B,), (B,) * n_out)]
        sigs += [Signature((S(a),), (S(a),) * n_out) for a in range(len(x.shape)) if a != d]
        if linear:
            sigs.append(Signature((P,), (P,) * n_out))
        return sigs

    return sbp


def _reduced_meta(op: str, x: Meta, dim, keepdim: bool, dtype: dtypes.DType) -> Meta:
    dims = normalize_dims(op, dim, len(x.shape))
    return Meta(reduce_meta_shape(x.shape, dims, keepdim), dtype)


# -- ONNX lowerings shared by the reductions -------------------------------------------------
def _onnx_axes(g, x: str, op: str, dim) -> tuple[int, ...]:
    return _axes(op, dim, len(g.meta(x).shape))


def _reduce_onnx(op_type: str, op: str, out_dtype: bool = False):
    """An ONNX Reduce* over the op's `dim` (and `keepdim`); `out_dtype`: in the result's
    dtype (sum's integers go to int64, a `dtype=` argument)."""

    def lower(g, x, *, dim=None, keepdim=False, **_):
        axes = _onnx_axes(g, x, op, dim)
        return reduce(g, op_type, g.cast(x, g.out[0].dtype) if out_dtype else x, axes, keepdim)

    return lower


def _var_onnx(root: bool):
    def lower(g, x, *, dim=None, correction=1, keepdim=False):
        axes = _onnx_axes(g, x, "var", dim)
        n = _numel(g.meta(x).shape, axes)
        dev = g.op("Sub", x, reduce(g, "ReduceMean", x, axes, True))
        total = reduce(g, "ReduceSum", g.op("Mul", dev, dev), axes, keepdim)
        var = g.op("Div", total, g.tensor(builtins.max(n - correction, 0), x))
        return g.op("Sqrt", var) if root else var

    return lower


def _extreme_reduce_onnx(op_type: str, op: str):
    def lower(g, x, *, dim=(), keepdim=False):
        return _extreme_onnx(g, op_type, x, _onnx_axes(g, x, op, dim), keepdim)

    return lower


def _extreme_onnx(g, op_type: str, x: str, axes, keepdim: bool) -> str:
    """ReduceMax/ReduceMin, nan where the reduced elements hold one (as NumPy; onnxruntime's
    reductions skip it)."""
    out = reduce(g, op_type, x, axes, keepdim)
    if not g.meta(x).dtype.is_floating_point:
        return out
    nans = reduce(g, "ReduceMax", g.cast(g.op("IsNaN", x), dtypes.int32), axes, keepdim)
    return g.op("Where", g.cast(nans, dtypes.bool_), g.tensor(math.nan, x), out)


def _arg_extreme(g, op_type: str, x: str, axis: int, keepdim: bool) -> str:
    """ArgMax/ArgMin along `axis`: the first extreme's index, the first nan's where there is
    one (as NumPy)."""
    at = g.op(op_type, x, axis=axis, keepdims=int(keepdim), select_last_index=0)
    if not g.meta(x).dtype.is_floating_point:
        return at
    nans = g.cast(g.op("IsNaN", x), dtypes.int32)
    first_nan = g.op("ArgMax", nans, axis=axis, keepdims=int(keepdim), select_last_index=0)
    any_nan = g.cast(reduce(g, "ReduceMax", nans, [axis], keepdim), dtypes.bool_)
    return g.op("Where", any_nan, first_nan, at)


def _arg_onnx(op_type: str):
    def lower(g, x, *, dim=None, keepdim=False):
        ndim = len(g.meta(x).shape)
        if dim is None:  # the index into the flattened input
            flat = g.op("Reshape", x, g.ints([-1]))
            g.note(flat, Meta((math.prod(g.meta(x).shape),), g.meta(x).dtype))
            out = _arg_extreme(g, op_type, flat, 0, False)
            return g.op("Reshape", out, g.ints([1] * ndim)) if keepdim else out
        if not ndim:
            return g.constant(0, dtypes.int64)
        return _arg_extreme(g, op_type, x, normalize_dim(op_type, dim, ndim), keepdim)

    return lower


def _selection_onnx(reduce_type: str, arg_type: str):
    """max/min along a dim: the values and the first index of each."""

    def lower(g, x, *, dim, keepdim=False):
        if not g.meta(x).shape:
            return g.op("Identity", x), g.constant(0, dtypes.int64)
        d = normalize_dim(arg_type, dim, len(g.meta(x).shape))
        values = _extreme_onnx(g, reduce_type, x, [d], keepdim)
        return values, _arg_extreme(g, arg_type, x, d, keepdim)

    return lower


def _logsumexp_onnx(g, x, *, dim, keepdim=False):
    axes = _onnx_axes(g, x, "logsumexp", dim)
    top = reduce(g, "ReduceMax", x, axes, True)
    top = g.op("Where", g.op("IsInf", top), g.tensor(0, x), top)  # inf - inf is nan
    total = reduce(g, "ReduceSum", g.op("Exp", g.op("Sub", x, top)), axes, True)
    out = g.op("Add", g.op("Log", total), top)
    return out if keepdim else g.op("Reshape", out, g.ints(list(g.out[0].shape)))


def _logical_onnx(reduce_type: str):
    """all/any: the min/max of the truth values as 0/1 integers."""

    def lower(g, x, *, dim=None, keepdim=False):
        ones = g.cast(g.cast(x, dtypes.bool_), dtypes.int32)
        out = reduce(g, reduce_type, ones, _onnx_axes(g, x, "all", dim), keepdim)
        return g.cast(out, g.out[0].dtype)

    return lower


def _cumsum_onnx(g, x, *, dim, dtype=None):
    x = g.cast(x, g.out[0].dtype)
    if not g.out[0].shape:  # a 0-d tensor is its own running sum
        return g.op("Identity", x)
    return g.op("CumSum", x, g.ints(normalize_dim("cumsum", dim, len(g.out[0].shape))))


def _nan_reduce_onnx(mean: bool):
    """nansum / nanmean: NaNs as zeros (and, for the mean, left out of the count)."""

    def lower(g, x, *, dim=None, keepdim=False, dtype=None):
        axes = _onnx_axes(g, x, "nansum", dim)
        x = g.cast(x, g.out[0].dtype)
        if not g.out[0].dtype.is_floating_point:  # integers have no NaN
            return reduce(g, "ReduceSum", x, axes, keepdim)
        valid = g.op("Not", g.op("IsNaN", x))
        total = reduce(g, "ReduceSum", g.op("Where", valid, x, g.tensor(0, x)), axes, keepdim)
        if not mean:
            return total
        count = reduce(g, "ReduceSum", g.cast(valid, g.out[0].dtype), axes, keepdim)
        return g.op("Div", total, count)

    return lower


def _vector_norm_onnx(g, x, *, ord=2, dim=None, keepdim=False):
    axes = _onnx_axes(g, x, "linalg.vector_norm", dim)
    a = g.op("Abs", x)
    if ord == math.inf:
        return reduce(g, "ReduceMax", a, axes, keepdim)
    if ord == -math.inf:
        return reduce(g, "ReduceMin", a, axes, keepdim)
    if ord == 0:
        nonzero = g.cast(g.op("Not", g.op("Equal", a, g.tensor(0, x))), g.out[0].dtype)
        return reduce(g, "ReduceSum", nonzero, axes, keepdim)
    if ord == 1:
        return reduce(g, "ReduceSum", a, axes, keepdim)
    if ord == 2:
        return g.op("Sqrt", reduce(g, "ReduceSum", g.op("Mul", a, a), axes, keepdim))
    total = reduce(g, "ReduceSum", g.op("Pow", a, g.tensor(ord, x)), axes, keepdim)
    return g.op("Pow", total, g.tensor(1 / ord, x))


def _sum_to_onnx(g, x, *, shape):
    dims = g.meta(x).shape
    lead = len(dims) - len(shape)
    axes = [
        *range(lead),
        *(lead + i for i, t in enumerate(shape) if t == 1 and dims[lead + i] != 1),
    ]
    out = reduce(g, "ReduceSum", x, axes, True) if axes else x
    return g.op("Reshape", out, g.ints(list(shape))) if lead else g.op("Identity", out)


def _count_nonzero_onnx(g, x, *, dim=None):
    nonzero = g.cast(g.op("Not", g.op("Equal", x, g.tensor(0, x))), dtypes.int64)
    return reduce(g, "ReduceSum", nonzero, _onnx_axes(g, x, "count_nonzero", dim), False)


# -- sum, nansum ----------------------------------------------------------------------------
def _sum_meta(x: Meta, *, dim=None, keepdim=False, dtype=None) -> Meta:
    return _reduced_meta("sum", x, dim, keepdim, _int_to_int64(x.dtype, dtype))


def _summing(op: str, reduce):
    """A kernel summing with `reduce` (np.sum / np.nansum) in the result dtype."""

    def kernel(x, *, dim=None, keepdim=False, dtype=None):
        target = _int_to_int64(dtypes.from_numpy(x.dtype), dtype).np
        x = _acc(x.astype(target, copy=False))
        out = reduce(x, axis=_axes(op, dim, x.ndim), keepdims=keepdim)
        return np.asarray(out).astype(target, copy=False)

    return kernel


_sum = defop(
    "sum",
    inputs=("input",),
    meta=_sum_meta,
    sbp=_reduction_sbp(split_partial=True, linear=True),
    kernels={"cpu": _summing("sum", np.sum)},
    grad=lambda ctx, gy: (expand_reduced(gy, ctx.input_shape(0), ctx.dim, ctx.keepdim),),
    onnx=_reduce_onnx("ReduceSum", "sum", out_dtype=True),
)


def sum(input, dim=None, keepdim=False, *, dtype=None):
    """Sum over `dim` (all dims when None). Integer and bool inputs sum to int64.

    >>> flow.sum(flow.tensor([[1, 2], [3, 4]]), dim=0)
    tensor([4, 6])
    """
    dtype = None if dtype is None else dtypes.to_dtype(dtype)
    return dispatch(_sum, (input,), {"dim": _dims(dim), "keepdim": keepdim, "dtype": dtype})


def _nansum_grad(ctx, gy):
    x = ctx.input
    return (where(x.isnan(), 0.0, expand_reduced(gy, tuple(x.shape), ctx.dim, ctx.keepdim)),)


_nansum = defop(
    "nansum",
    inputs=("input",),
    meta=lambda x, *, dim=None, keepdim=False, dtype=None: _reduced_meta(
        "nansum", x, dim, keepdim, _int_to_int64(x.dtype, dtype)
    ),
    # NOTE: no P -> P: a NaN in one part hides the other parts' values at that position.
    sbp=_reduction_sbp(split_partial=True),
    kernels={"cpu": _summing("nansum", np.nansum)},
    grad=_nansum_grad,
    saves=("input",),
    onnx=_nan_reduce_onnx(mean=False),
)


def nansum(input, dim=None, keepdim=False, *, dtype=None):
    """Sum over `dim` treating NaN as zero. Integer and bool inputs sum to int64.

    >>> flow.nansum(flow.tensor([1.0, float("nan"), 2.0]))
    tensor(3.)
    """
    dtype = None if dtype is None else dtypes.to_dtype(dtype)
    return dispatch(_nansum, (input,), {"dim": _dims(dim), "keepdim": keepdim, "dtype": dtype})


# -- mean, nanmean --------------------------------------------------------------------------
_MEAN_HINT = " (pass dtype= to average integers in a floating point dtype)"


def _mean_dtype(op: str, x_dtype: dtypes.DType, dtype) -> dtypes.DType:
    if dtype is None:
        if not x_dtype.is_complex:
            _require_float(op, x_dtype.np, _MEAN_HINT)
        return x_dtype
    if not dtype.is_complex:
        _require_float(op, dtype.np)
    return dtype


def _mean_kernel(x, *, dim=None, keepdim=False, dtype=None, count=None):
    """`count` is the logical number of reduced elements when a reduced axis is split over
    ranks (see `_mean_local_attrs`): each shard's sum / count then adds up to the mean."""
    target = _mean_dtype("mean", dtypes.from_numpy(x.dtype), dtype).np
    axes = _axes("mean", dim, x.ndim)
    n = _numel(x.shape, axes) if count is None else count
    total = np.sum(_acc(x.astype(target, copy=False)), axis=axes, keepdims=keepdim)
    with np.errstate(invalid="ignore", divide="ignore"):  # the mean of nothing is nan
        return np.asarray(total / n).astype(target, copy=False)


def _mean_local_attrs(attrs: dict, sig: Signature, x: Meta) -> dict:
    dims = normalize_dims("mean", attrs["dim"], len(x.shape))
    s = sig.ins[0]
    if isinstance(s, Split) and s.axis in dims:
        return {**attrs, "count": _numel(x.shape, dims)}
    return attrs


def _mean_grad(ctx, gy):
    shape = ctx.input_shape(0)
    # NOTE: on a shard of a split reduced axis `count` is the logical element count
    n = ctx.attrs.get("count") or _numel(shape, normalize_dims("mean", ctx.dim, len(shape)))
    return (expand_reduced(gy, shape, ctx.dim, ctx.keepdim) / n,)


_mean = defop(
    "mean",
    inputs=("input",),
    # NOTE: `count` (a shard's logical element count) leaves the shape as it is
    meta=lambda x, *, dim=None, keepdim=False, dtype=None, count=None: _reduced_meta(
        "mean", x, dim, keepdim, _mean_dtype("mean", x.dtype, dtype)
    ),
    sbp=_reduction_sbp(split_partial=True, linear=True),
    local_attrs=_mean_local_attrs,
    kernels={"cpu": _mean_kernel},
    grad=_mean_grad,
    onnx=_reduce_onnx("ReduceMean", "mean", out_dtype=True),
)


def mean(input, dim=None, keepdim=False, *, dtype=None):
    """Arithmetic mean over `dim` (all dims when None). Floating point inputs only, unless
    `dtype` names the floating dtype to compute in (as in PyTorch).

    >>> flow.mean(flow.tensor([[1.0, 2.0], [3.0, 4.0]]), dim=1)
    tensor([1.5000, 3.5000])
    """
    dtype = None if dtype is None else dtypes.to_dtype(dtype)
    return dispatch(_mean, (input,), {"dim": _dims(dim), "keepdim": keepdim, "dtype": dtype})


def _nanmean_kernel(x, *, dim=None, keepdim=False, dtype=None):
    target = _mean_dtype("nanmean", dtypes.from_numpy(x.dtype), dtype).np
    x = _acc(x.astype(target, copy=False))
    axes = _axes("nanmean", dim, x.ndim)
    valid = ~np.isnan(x)
    total = np.sum(np.where(valid, x, 0), axis=axes, keepdims=keepdim)
    count = np.sum(valid, axis=axes, keepdims=keepdim)
    with np.errstate(invalid="ignore", divide="ignore"):  # an all-NaN slice gives nan
        return np.asarray(total / count).astype(target, copy=False)


def _nanmean_grad(ctx, gy):
    x = ctx.input
    dims = normalize_dims("nanmean", ctx.dim, x.ndim)
    valid = x.isnan().logical_not()
    gy = expand_reduced(gy, tuple(x.shape), ctx.dim, ctx.keepdim)
    # NOTE: an all-NaN slice gets 0 / 0 = NaN gradients, as in PyTorch
    return (where(valid, gy, 0.0) / valid.sum(dims, keepdim=True),)


_nanmean = defop(
    "nanmean",
    inputs=("input",),
    meta=lambda x, *, dim=None, keepdim=False, dtype=None: _reduced_meta(
        "nanmean", x, dim, keepdim, _mean_dtype("nanmean", x.dtype, dtype)
    ),
    sbp=_reduction_sbp(),  # NOTE: the count of non-NaN elements depends on the data
    kernels={"cpu": _nanmean_kernel},
    grad=_nanmean_grad,
    saves=("input",),
    onnx=_nan_reduce_onnx(mean=True),
)


def nanmean(input, dim=None, keepdim=False, *, dtype=None):
    """Mean over `dim` of the non-NaN elements (NaN where a slice has none).

    >>> flow.nanmean(flow.tensor([1.0, float("nan"), 3.0]))
    tensor(2.)
    """
    dtype = None if dtype is None else dtypes.to_dtype(dtype)
    return dispatch(_nanmean, (input,), {"dim": _dims(dim), "keepdim": keepdim, "dtype": dtype})


# -- prod -----------------------------------------------------------------------------------
def _prod_meta(x: Meta, *, dim=None, keepdim=False, dtype=None) -> Meta:
    return _reduced_meta("prod", x, dim, keepdim, _int_to_int64(x.dtype, dtype))


def _prod_others(x, dim: int):
    """prod_{j != i} x_j along `dim`, exact when x has zeros: the product of everything
    before i times everything after i (exclusive cumulative products from both ends)."""
    n = x.shape[dim]
    if n <= 1:
        return ones_like(x)
    one = ones_like(x.narrow(dim, 0, 1))
    before = cat([one, x.narrow(dim, 0, n - 1)], dim).cumprod(dim)
    after = cat([one, x.flip(dim).narrow(dim, 0, n - 1)], dim).cumprod(dim).flip(dim)
    return before * after


def _prod_grad(ctx, gy):
    x = ctx.input
    shape = tuple(x.shape)
    if ctx.dim is None:
        others = _prod_others(x.reshape(-1), 0).reshape(shape)
    else:
        others = _prod_others(x, normalize_dim("prod", ctx.dim, x.ndim)) if x.ndim else ones_like(x)
    return (expand_reduced(gy, shape, ctx.dim, ctx.keepdim) * others,)


_prod = defop(
    "prod",
    inputs=("input",),
    meta=_prod_meta,
    sbp=_reduction_sbp(),
    kernels={"cpu": _summing("prod", np.prod)},
    grad=holomorphic(_prod_grad),
    saves=("input",),
    onnx=_reduce_onnx("ReduceProd", "prod", out_dtype=True),
)


def prod(input, dim=None, keepdim=False, *, dtype=None):
    """Product over one `dim` (all elements when None). Integer and bool inputs give int64.

    >>> flow.prod(flow.tensor([[1.0, 2.0], [3.0, 4.0]]), 1)
    tensor([ 2., 12.])
    """
    if dim is not None and not isinstance(dim, int):
        raise TypeError(f"prod: dim must be an int or None, got {dim!r}")
    dtype = None if dtype is None else dtypes.to_dtype(dtype)
    return dispatch(_prod, (input,), {"dim": dim, "keepdim": keepdim, "dtype": dtype})


# -- var, std -------------------------------------------------------------------------------
def _var_meta(op: str):
    def meta(x: Meta, *, dim=None, correction=1, keepdim=False) -> Meta:
        _require_float(op, x.dtype.np)
        return _reduced_meta(op, x, dim, keepdim, x.dtype)

    return meta


def _var_kernel(op: str, root: bool):
    def kernel(x, *, dim=None, correction=1, keepdim=False):
        _require_float(op, x.dtype)
        xf = _acc(x)
        axes = _axes(op, dim, x.ndim)
        dof = builtins.max(_numel(x.shape, axes) - correction, 0)
        with np.errstate(invalid="ignore", divide="ignore"):  # no elements / dof <= 0
            dev = xf - np.sum(xf, axis=axes, keepdims=True) / _numel(x.shape, axes)
            out = np.sum(dev * dev, axis=axes, keepdims=keepdim) / dof
        out = np.sqrt(out) if root else np.asarray(out)
        return out.astype(x.dtype, copy=False)

    return kernel


def _dof_scale(shape: tuple, dim, correction) -> float:
    dof = _numel(shape, normalize_dims("var", dim, len(shape))) - correction
    return 1.0 / dof if dof > 0 else math.inf


def _centered(x, dim):
    return x - x.mean(normalize_dims("var", dim, x.ndim), keepdim=True)


def _var_grad(ctx, gy):
    x = ctx.input
    gy = _unsqueeze_reduced(gy, tuple(x.shape), ctx.dim, ctx.keepdim)
    return (gy * (2 * _dof_scale(tuple(x.shape), ctx.dim, ctx.correction)) * _centered(x, ctx.dim),)


def _std_grad(ctx, gy):
    # d std = d var / (2 std); where std == 0 the gradient is 0 (PyTorch's choice)
    x = ctx.input
    shape = tuple(x.shape)
    out = _unsqueeze_reduced(ctx.out, shape, ctx.dim, ctx.keepdim)
    gy = _unsqueeze_reduced(gy, shape, ctx.dim, ctx.keepdim)
    zero = out == 0
    scale = where(zero, 0.0, gy / where(zero, 1.0, out))
    return (scale * _dof_scale(shape, ctx.dim, ctx.correction) * _centered(x, ctx.dim),)


_var = defop(
    "var",
    inputs=("input",),
    meta=_var_meta("var"),
    sbp=_reduction_sbp(),
    kernels={"cpu": _var_kernel("var", root=False)},
    grad=_var_grad,
    saves=("input",),
    onnx=_var_onnx(root=False),
)
_std = defop(
    "std",
    inputs=("input",),
    meta=_var_meta("std"),
    sbp=_reduction_sbp(),
    kernels={"cpu": _var_kernel("std", root=True)},
    grad=_std_grad,
    saves=("input", "out"),
    onnx=_var_onnx(root=True),
)


def _correction(op: str, dim, unbiased, correction):
    """PyTorch's overloads: var(x, unbiased), var(x, dim, unbiased, keepdim), correction=."""
    if isinstance(dim, bool):  # var(x, False): the legacy (input, unbiased) overload
        if unbiased is not None:
            raise TypeError(f"{op}: got unbiased twice ({dim!r} positionally and {unbiased!r})")
        dim, unbiased = None, dim
    if unbiased is not None and correction is not None:
        raise TypeError(f"{op}: pass either unbiased or correction, not both")
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    return dim, correction


def var(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """Variance over `dim` with Bessel's `correction` (1 by default: the sample variance;
    `unbiased=False` means correction=0).

    >>> flow.var(flow.tensor([1.0, 2.0, 3.0, 4.0]))
    tensor(1.6667)
    """
    dim, correction = _correction("var", dim, unbiased, correction)
    if isinstance(input, Tensor) and input.dtype.is_complex:  # E|z - Ez|^2: the parts' add
        re, im = (
            var(p, dim, keepdim=keepdim, correction=correction) for p in (input.real, input.imag)
        )
        return re + im
    return dispatch(
        _var, (input,), {"dim": _dims(dim), "correction": correction, "keepdim": keepdim}
    )


def std(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """Standard deviation over `dim`: the square root of `var` with the same arguments.

    >>> flow.std(flow.tensor([1.0, 2.0, 3.0, 4.0]), correction=0)
    tensor(1.1180)
    """
    dim, correction = _correction("std", dim, unbiased, correction)
    if isinstance(input, Tensor) and input.dtype.is_complex:
        return var(input, dim, keepdim=keepdim, correction=correction).sqrt()
    return dispatch(
        _std, (input,), {"dim": _dims(dim), "correction": correction, "keepdim": keepdim}
    )


@checked
def var_mean(input: Tensor, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """`(var(input, ...), mean(input, dim, keepdim))` in one call, as torch.var_mean.

    >>> flow.var_mean(flow.tensor([1.0, 2.0, 3.0]))
    (tensor(1.), tensor(2.))
    """
    dim, correction = _correction("var_mean", dim, unbiased, correction)
    return var(input, dim, keepdim=keepdim, correction=correction), mean(input, dim, keepdim)


@checked
def std_mean(input: Tensor, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """`(std(input, ...), mean(input, dim, keepdim))` in one call, as torch.std_mean.

    >>> flow.std_mean(flow.tensor([1.0, 2.0, 3.0]))
    (tensor(1.), tensor(2.))
    """
    dim, correction = _correction("std_mean", dim, unbiased, correction)
    return std(input, dim, keepdim=keepdim, correction=correction), mean(input, dim, keepdim)


# -- amax, amin, max, min, argmax, argmin ---------------------------------------------------
def _extreme_meta(op: str):
    def meta(x: Meta, *, dim=(), keepdim=False) -> Meta:
        reject_complex(op, x.dtype.np)
        dims = normalize_dims(op, dim, len(x.shape))
        _require_nonempty(op, x.shape, dims)
        return Meta(reduce_meta_shape(x.shape, dims, keepdim), x.dtype)

    return meta


def _extreme(name: str, reduce, onnx):
    def kernel(x, *, dim=(), keepdim=False):
        reject_complex(name, x.dtype)
        return np.asarray(reduce(x, axis=_axes(name, dim, x.ndim), keepdims=keepdim))

    return defop(
        name,
        inputs=("input",),
        meta=_extreme_meta(name),
        sbp=_reduction_sbp(),
        kernels={"cpu": kernel},
        grad=lambda ctx, gy: (_evenly_distribute(gy, ctx.input, ctx.out, ctx.dim, ctx.keepdim),),
        saves=("input", "out"),
        onnx=onnx,
    )


_amax = _extreme("amax", np.max, _extreme_reduce_onnx("ReduceMax", "amax"))
_amin = _extreme("amin", np.min, _extreme_reduce_onnx("ReduceMin", "amin"))


def amax(input, dim=(), keepdim=False):
    """Largest value over `dim` (all dims when empty). NaN propagates; the gradient is
    shared evenly among the elements equal to the maximum (the NaNs if it is NaN, like
    torch.max(input); torch.amax gives NaN gradients there).

    >>> flow.amax(flow.tensor([[1, 5], [7, 2]]), dim=1)
    tensor([5, 7])
    """
    return dispatch(_amax, (input,), {"dim": _dims(dim), "keepdim": keepdim})


def amin(input, dim=(), keepdim=False):
    """Smallest value over `dim` (all dims when empty); see `amax`.

    >>> flow.amin(flow.tensor([[1, 5], [7, 2]]), dim=1)
    tensor([1, 2])
    """
    return dispatch(_amin, (input,), {"dim": _dims(dim), "keepdim": keepdim})


@checked
def aminmax(input: Tensor, *, dim=None, keepdim=False):
    """`(min, max)` over `dim` (all dims when None) as a named tuple, like torch.aminmax.

    >>> flow.aminmax(flow.tensor([3, 1, 2]))
    aminmax(min=tensor(1), max=tensor(3))
    """
    dims = () if dim is None else dim
    return _AminmaxResult(amin(input, dims, keepdim), amax(input, dims, keepdim))


def _select_meta(op: str):
    """(values, indices) picked along one dim: max/min/median/mode."""

    def meta(x: Meta, *, dim, keepdim=False) -> tuple[Meta, Meta]:
        reject_complex(op, x.dtype.np)
        dims = normalize_dims(op, dim, len(x.shape))
        _require_nonempty(op, x.shape, dims)
        shape = reduce_meta_shape(x.shape, dims, keepdim)
        return Meta(shape, x.dtype), Meta(shape, dtypes.int64)

    return meta


def _take(x, indices, d: int, keepdim: bool):
    """(values, int64 indices) from indices shaped with `d` kept as 1."""
    values = np.take_along_axis(x, indices, axis=d)
    indices = indices.astype(np.int64, copy=False)
    if not keepdim:
        values, indices = values.squeeze(d), indices.squeeze(d)
    return values, indices


def _pick_kernel(op: str, pick):
    """max/min with a dim: the first index of the extreme value (NaN counts as extreme)."""

    def kernel(x, *, dim, keepdim=False):
        if x.ndim == 0:
            normalize_dim(op, dim, 0)
            return x.copy(), np.zeros((), np.int64)
        d = normalize_dim(op, dim, x.ndim)
        return _take(x, pick(x, axis=d, keepdims=True), d, keepdim)

    return kernel


def _index_grad_rule(ctx, gy, _gi):
    return (_index_grad(gy, ctx.out1, ctx.input_shape(0), ctx.dim, ctx.keepdim),)


def _selection(name: str, kernel, onnx=None):
    def ordered_kernel(x, **attrs):
        reject_complex(name, x.dtype)
        return kernel(x, **attrs)

    return defop(
        name,
        inputs=("input",),
        meta=_select_meta(name),
        sbp=_reduction_sbp(n_out=2),
        kernels={"cpu": ordered_kernel},
        grad=_index_grad_rule,
        saves=("out1",),
        n_out=2,
        onnx=onnx,
    )


_max = _selection("max", _pick_kernel("max", np.argmax), _selection_onnx("ReduceMax", "ArgMax"))
_min = _selection("min", _pick_kernel("min", np.argmin), _selection_onnx("ReduceMin", "ArgMin"))


@checked
def max(input: Tensor, dim=None, keepdim=False, *, other=None):
    """The largest element (`max(input)`), the largest values along `dim` with their
    indices as a named tuple (`max(input, dim, keepdim=False)`), or the elementwise maximum
    (`max(input, other)`), like torch.max.

    >>> flow.max(flow.tensor([[1.0, 5.0], [7.0, 2.0]]), dim=1)
    max(values=tensor([5., 7.]), indices=tensor([1, 0]))
    """
    if isinstance(dim, Tensor) or other is not None:
        return maximum(input, dim if other is None else other)
    if dim is None:
        return amax(input)
    return _MaxResult(*dispatch(_max, (input,), {"dim": dim, "keepdim": keepdim}))


@checked
def min(input: Tensor, dim=None, keepdim=False, *, other=None):
    """The smallest element, the smallest values along `dim` with their indices, or the
    elementwise minimum; see `max`.

    >>> flow.min(flow.tensor([[1.0, 5.0], [7.0, 2.0]]), dim=1)
    min(values=tensor([1., 2.]), indices=tensor([0, 1]))
    """
    if isinstance(dim, Tensor) or other is not None:
        return minimum(input, dim if other is None else other)
    if dim is None:
        return amin(input)
    return _MinResult(*dispatch(_min, (input,), {"dim": dim, "keepdim": keepdim}))


def _reject_bool(op: str, np_dtype) -> None:
    if np_dtype == np.bool_:
        raise DTypeError(f"{op}: bool inputs are not supported (as in PyTorch)")
    reject_complex(op, np_dtype)


def _arg_meta(op: str):
    def meta(x: Meta, *, dim=None, keepdim=False) -> Meta:
        _reject_bool(op, x.dtype.np)
        dims = normalize_dims(op, dim, len(x.shape))
        _require_nonempty(op, x.shape, dims)
        if dim is None:
            return Meta((1,) * len(x.shape) if keepdim else (), dtypes.int64)
        return Meta(reduce_meta_shape(x.shape, dims, keepdim), dtypes.int64)

    return meta


def _arg_kernel(op: str, pick):
    def kernel(x, *, dim=None, keepdim=False):
        _reject_bool(op, x.dtype)
        if dim is None:  # index into the flattened input
            out = np.asarray(pick(x.reshape(-1)), np.int64)
            return out.reshape((1,) * x.ndim) if keepdim else out
        if x.ndim == 0:
            normalize_dim(op, dim, 0)
            return np.zeros((), np.int64)
        d = normalize_dim(op, dim, x.ndim)
        return pick(x, axis=d, keepdims=keepdim).astype(np.int64, copy=False)

    return kernel


def _arg(name: str, pick, onnx):
    return defop(
        name,
        inputs=("input",),
        meta=_arg_meta(name),
        sbp=_reduction_sbp(),
        kernels={"cpu": _arg_kernel(name, pick)},
        differentiable=False,
        onnx=onnx,
    )


_argmax = _arg("argmax", np.argmax, _arg_onnx("ArgMax"))
_argmin = _arg("argmin", np.argmin, _arg_onnx("ArgMin"))


def argmax(input, dim=None, keepdim=False):
    """Index of the first largest value along `dim` (of the flattened input when None).

    >>> flow.argmax(flow.tensor([[1, 5], [7, 2]]), dim=1)
    tensor([1, 0])
    """
    return dispatch(_argmax, (input,), {"dim": dim, "keepdim": keepdim})


def argmin(input, dim=None, keepdim=False):
    """Index of the first smallest value along `dim` (of the flattened input when None).

    >>> flow.argmin(flow.tensor([[1, 5], [7, 2]]), dim=1)
    tensor([0, 1])
    """
    return dispatch(_argmin, (input,), {"dim": dim, "keepdim": keepdim})


# -- logsumexp ------------------------------------------------------------------------------
def _logsumexp_kernel(x, *, dim, keepdim=False):
    xf = _acc(x)
    axes = _axes("logsumexp", dim, x.ndim)
    # shift by the max so exp cannot overflow; an infinite max shifts by 0 instead (inf - inf)
    m = np.max(xf, axis=axes, keepdims=True, initial=-np.inf)
    m = np.where(np.isfinite(m), m, 0)
    with np.errstate(divide="ignore"):  # log(0) = -inf for an empty or all -inf slice
        out = np.log(np.sum(np.exp(xf - m), axis=axes, keepdims=True)) + m
    if not keepdim:
        out = out.reshape(reduce_meta_shape(x.shape, axes, False))
    return out.astype(x.dtype, copy=False)


def _logsumexp_grad(ctx, gy):
    x = ctx.input
    shape = tuple(x.shape)
    out = _unsqueeze_reduced(ctx.out, shape, ctx.dim, ctx.keepdim)
    return (_unsqueeze_reduced(gy, shape, ctx.dim, ctx.keepdim) * (x - out).exp(),)


_logsumexp = defop(
    "logsumexp",
    inputs=("input",),
    meta=lambda x, *, dim, keepdim=False: _reduced_meta("logsumexp", x, dim, keepdim, x.dtype),
    sbp=_reduction_sbp(),
    kernels={"cpu": _logsumexp_kernel},
    grad=_logsumexp_grad,
    saves=("input", "out"),
    promote="float",
    onnx=_logsumexp_onnx,
)


def logsumexp(input, dim, keepdim=False):
    """log(sum(exp(input))) over `dim`, computed stably (shifted by the maximum).

    >>> flow.logsumexp(flow.tensor([0.0, 0.0]), dim=0)
    tensor(0.6931)
    """
    return dispatch(_logsumexp, (input,), {"dim": _dims(dim), "keepdim": keepdim})


# -- norms ----------------------------------------------------------------------------------
def _check_ord(op: str, ord) -> None:
    if isinstance(ord, bool) or not isinstance(ord, int | float):
        raise TypeError(f"{op}: ord must be a number, got {ord!r}")


def _vector_norm_meta(x: Meta, *, ord=2, dim=None, keepdim=False) -> Meta:
    op = "linalg.vector_norm"
    _require_float(op, x.dtype.np)
    dims = normalize_dims(op, dim, len(x.shape))
    if math.isinf(ord) and 0 in x.shape:
        sizes = [x.shape[d] for d in dims if d < len(x.shape)]
        if not sizes or 0 in sizes:
            raise ShapeError(
                f"{op}: cannot compute the {ord} norm over an empty dimension of the input "
                f"of shape {list(x.shape)}: the reduction has no identity"
            )
    return Meta(reduce_meta_shape(x.shape, dims, keepdim), x.dtype)


def _vector_norm_kernel(x, *, ord=2, dim=None, keepdim=False):
    _require_float("linalg.vector_norm", x.dtype)
    a = np.abs(_acc(x))
    kw = {"axis": _axes("linalg.vector_norm", dim, x.ndim), "keepdims": keepdim}
    with np.errstate(divide="ignore"):  # 0 ** negative ord = inf, as in PyTorch
        if ord == math.inf:
            out = np.max(a, **kw)
        elif ord == -math.inf:
            out = np.min(a, **kw)
        elif ord == 0:
            out = np.sum(a != 0, dtype=a.dtype, **kw)
        elif ord == 1:
            out = np.sum(a, **kw)
        elif ord == 2:
            out = np.sqrt(np.sum(a * a, **kw))
        else:
            out = np.sum(a**ord, **kw) ** (1.0 / ord)
    return np.asarray(out).astype(x.dtype, copy=False)


def _vector_norm_grad(ctx, gy):
    x, ord = ctx.input, ctx.ord
    shape = tuple(x.shape)
    if ord == 0:
        return (zeros_like(x),)
    if math.isinf(ord):
        return (x.sign() * _evenly_distribute(gy, x.abs(), ctx.out, ctx.dim, ctx.keepdim),)
    gy = expand_reduced(gy, shape, ctx.dim, ctx.keepdim)
    if ord == 1:
        return (gy * x.sign(),)
    # d/dx_i (sum |x|^p)^(1/p) = sign(x_i) |x_i|^(p-1) / norm^(p-1); 0 where norm == 0
    out = _unsqueeze_reduced(ctx.out, shape, ctx.dim, ctx.keepdim)
    zero = out == 0
    if ord == 2:
        return (where(zero, 0.0, gy / where(zero, 1.0, out)) * x,)
    scale = where(zero, 0.0, gy / where(zero, 1.0, out).pow(ord - 1))
    nonzero = x != 0  # |x|^(p-1) is inf at 0 for p < 1, where sign(x) = 0 settles it
    return (scale * x.sign() * where(nonzero, x.abs(), 1.0).pow(ord - 1),)


_vector_norm = defop(
    "vector_norm",
    inputs=("input",),
    meta=_vector_norm_meta,
    sbp=_reduction_sbp(),
    kernels={"cpu": _vector_norm_kernel},
    grad=_vector_norm_grad,
    saves=("input", "out"),
    onnx=_vector_norm_onnx,
)


def _cast_for_norm(op: str, x, dtype):
    """The `dtype=` of the norms: cast first, never narrowing (as PyTorch)."""
    if dtype is None:
        return x
    dtype = dtypes.to_dtype(dtype)
    if dtypes.promote_types(x.dtype, dtype) is not dtype:
        raise DTypeError(
            f"{op}: the input dtype {x.dtype.name} cannot be converted to dtype={dtype.name} "
            "without narrowing"
        )
    return x.to(dtype)


@checked
def vector_norm(x: Tensor, ord=2, dim=None, keepdim=False, *, dtype=None):
    """The `ord`-norm of `x` over `dim` (all elements when None), like torch.linalg.vector_norm:
    `(sum |x|^ord)^(1/ord)`; inf/-inf give max/min |x| and 0 counts non-zeros.

    >>> flow.linalg.vector_norm(flow.tensor([3.0, 4.0]))
    tensor(5.)
    """
    _check_ord("linalg.vector_norm", ord)
    x = _cast_for_norm("linalg.vector_norm", x, dtype)
    if isinstance(x, Tensor) and x.dtype.is_complex:  # a norm sees only the moduli
        x = x.abs()
    return dispatch(_vector_norm, (x,), {"ord": ord, "dim": _dims(dim), "keepdim": keepdim})


@checked
@halves_in_float32
def renorm(input: Tensor, p, dim, maxnorm):
    """`input` with each slice along `dim` whose `p`-norm exceeds `maxnorm` scaled down to
    norm `maxnorm` (the others as they are).

    >>> flow.renorm(flow.tensor([[3.0, 4.0], [0.3, 0.4]]), p=2, dim=0, maxnorm=1.0)
    tensor([[0.6000, 0.8000],
            [0.3000, 0.4000]])
    """
    if input.ndim < 2:
        raise ShapeError(
            f"renorm: expected an input of at least 2 dimensions, got shape {list(input.shape)}"
        )
    if not (input.dtype.is_floating_point or input.dtype.is_complex):
        raise DTypeError(f"renorm: expected a floating point input, got {input.dtype.name}")
    for name, value in (("p", p), ("maxnorm", maxnorm)):
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise ArgumentError(
                f"renorm(): argument '{name}' must be a number, not {type(value).__name__}"
            )
    if not p > 0:
        raise TideflowError(f"renorm: expected a positive norm order p, got {p}")
    if not maxnorm >= 0:
        raise TideflowError(f"renorm: expected maxnorm >= 0, got {maxnorm}")
    d = normalize_dim("renorm", dim, input.ndim)
    norms = vector_norm(input, p, tuple(a for a in range(input.ndim) if a != d), keepdim=True)
    # NOTE: PyTorch's 1e-7 keeps the scaled norm just under maxnorm
    return input * where(norms > maxnorm, maxnorm / (norms + 1e-7), 1.0)


_SINGULAR_VALUE_ORDS = ("nuc", 2, -2)


@checked
def matrix_norm(A: Tensor, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):
    """Matrix norm over the two dims `dim`, like torch.linalg.matrix_norm: 'fro' (Frobenius),
    'nuc' (sum of singular values), 1/-1 (max/min column sum of |A|), inf/-inf (max/min row
    sum), 2/-2 (largest/smallest singular value).

    >>> flow.linalg.matrix_norm(flow.tensor([[1.0, -2.0], [3.0, 4.0]]), ord=1)
    tensor(6.)
    """
    op = "linalg.matrix_norm"
    if A.ndim < 2:
        raise ShapeError(
            f"{op}: the input must have at least 2 dimensions, got shape {list(A.shape)}"
        )
    _require_float(op, A.dtype.np)
    if ord in _SINGULAR_VALUE_ORDS and A.dtype in (dtypes.float16, dtypes.bfloat16):
        # NOTE: as PyTorch, whose singular values (LAPACK) have no half precision; it refuses
        # the input's dtype even when dtype= asks for float32
        raise DTypeError(
            f"{op}: low precision dtypes are not supported for ord={ord!r}, got {A.dtype.name}"
        )
    if len(dim) != 2:
        raise ShapeError(f"{op}: dim must name 2 dimensions, got {dim!r}")
    rows, cols = (normalize_dim(op, d, A.ndim) for d in dim)
    if rows == cols:
        raise ShapeError(f"{op}: dim {list(dim)} names dimension {rows} twice")
    A = _cast_for_norm(op, A, dtype)
    if ord == "fro":
        return vector_norm(A, 2, (rows, cols), keepdim)
    if ord in (1, -1, math.inf, -math.inf):
        # 1: the largest column sum (sum over rows, pick over columns); inf: the transpose
        summed, picked = (rows, cols) if builtins.abs(ord) == 1 else (cols, rows)
        pick = amax if ord > 0 else amin
        out = pick(A.abs().sum(summed, keepdim=True), picked, keepdim=True)
        return out if keepdim else out.reshape(reduce_meta_shape(A.shape, (rows, cols), False))
    if ord in _SINGULAR_VALUE_ORDS:
        return _singular_value_norm(A, ord, rows, cols, keepdim)
    raise ValueError(f"{op}: order {ord!r} is not supported")


def _singular_value_norm(A, ord, rows: int, cols: int, keepdim: bool):
    batch = [d for d in range(A.ndim) if d not in (rows, cols)]
    s = svdvals(A.permute(*batch, rows, cols))
    out = s.sum(-1) if ord == "nuc" else (amax(s, -1) if ord == 2 else amin(s, -1))
    return out.reshape(_keep_shape(tuple(A.shape), (rows, cols))) if keepdim else out


@checked
def linalg_norm(A: Tensor, ord=None, dim=None, keepdim=False, *, dtype=None):
    """torch.linalg.norm: a vector norm over one dim (or all elements when `ord` and `dim`
    are None), a matrix norm over two dims (or a 2-D input when only `ord` is given).

    >>> flow.linalg.norm(flow.tensor([[3.0, 0.0], [0.0, 4.0]]))
    tensor(5.)
    """
    if dim is not None:
        dims = (dim,) if isinstance(dim, int) else tuple(dim)
        if len(dims) == 1:
            return vector_norm(A, 2 if ord is None else ord, dims, keepdim, dtype=dtype)
        if len(dims) == 2:
            return matrix_norm(A, "fro" if ord is None else ord, dims, keepdim, dtype=dtype)
        raise ShapeError(f"linalg.norm: dim must name 1 or 2 dimensions, got {dim!r}")
    if ord is None:
        return vector_norm(A, 2, None, keepdim, dtype=dtype)
    if A.ndim == 1:
        return vector_norm(A, ord, None, keepdim, dtype=dtype)
    if A.ndim == 2:
        return matrix_norm(A, ord, (-2, -1), keepdim, dtype=dtype)
    raise ShapeError(
        f"linalg.norm: without dim, an ord needs a 1-D or 2-D input, got shape {list(A.shape)}"
    )


linalg_norm.__name__ = "norm"


@checked
def norm(input: Tensor, p="fro", dim=None, keepdim=False, dtype=None):
    """torch.norm: the `p`-norm over `dim` ('fro' = the 2-norm of the elements, 'nuc' = the
    nuclear norm of a matrix). Prefer `flow.linalg.vector_norm` / `matrix_norm`.

    >>> flow.norm(flow.tensor([[1.0, 2.0], [2.0, 4.0]]))
    tensor(5.)
    """
    if isinstance(p, str):
        if p == "fro" and (dim is None or isinstance(dim, int) or len(dim) <= 2):
            return vector_norm(input, 2, dim, keepdim, dtype=dtype)
        dims = tuple(range(input.ndim)) if dim is None else dim
        return matrix_norm(input, p, dims, keepdim, dtype=dtype)
    return vector_norm(input, 2 if p is None else p, dim, keepdim, dtype=dtype)


LINALG_NAMESPACE.update(vector_norm=vector_norm, matrix_norm=matrix_norm, norm=linalg_norm)


# -- all, any, count_nonzero ----------------------------------------------------------------
def _logical_meta(op: str):
    def meta(x: Meta, *, dim=None, keepdim=False) -> Meta:
        out = dtypes.uint8 if x.dtype is dtypes.uint8 else dtypes.bool_
        return _reduced_meta(op, x, dim, keepdim, out)

    return meta


def _logical_kernel(op: str, reduce):
    def kernel(x, *, dim=None, keepdim=False):
        out = np.asarray(reduce(x, axis=_axes(op, dim, x.ndim), keepdims=keepdim))
        return out.astype(np.uint8) if x.dtype == np.uint8 else out  # uint8 stays uint8

    return kernel


def _logical(name: str, reduce, onnx):
    return defop(
        name,
        inputs=("input",),
        meta=_logical_meta(name),
        sbp=_reduction_sbp(),
        kernels={"cpu": _logical_kernel(name, reduce)},
        differentiable=False,
        onnx=onnx,
    )


_all = _logical("all", np.all, _logical_onnx("ReduceMin"))
_any = _logical("any", np.any, _logical_onnx("ReduceMax"))


def all(input, dim=None, keepdim=False):
    """Whether every element over `dim` is non-zero (bool; uint8 inputs give uint8).

    >>> flow.all(flow.tensor([[True, False], [True, True]]), dim=1)
    tensor([False, True])
    """
    return dispatch(_all, (input,), {"dim": _dims(dim), "keepdim": keepdim})


def any(input, dim=None, keepdim=False):
    """Whether some element over `dim` is non-zero (bool; uint8 inputs give uint8).

    >>> flow.any(flow.tensor([[True, False], [False, False]]), dim=1)
    tensor([True, False])
    """
    return dispatch(_any, (input,), {"dim": _dims(dim), "keepdim": keepdim})


def _count_nonzero_kernel(x, *, dim=None):
    return np.asarray(np.sum(x != 0, axis=_axes("count_nonzero", dim, x.ndim), dtype=np.int64))


_count_nonzero = defop(
    "count_nonzero",
    inputs=("input",),
    meta=lambda x, *, dim=None: _reduced_meta("count_nonzero", x, dim, False, dtypes.int64),
    sbp=_reduction_sbp(split_partial=True),
    kernels={"cpu": _count_nonzero_kernel},
    differentiable=False,
    onnx=_count_nonzero_onnx,
)


def count_nonzero(input, dim=None):
    """Number of non-zero elements over `dim` (all dims when None), as int64.

    >>> flow.count_nonzero(flow.tensor([[0, 1], [2, 3]]), dim=0)
    tensor([1, 2])
    """
    return dispatch(_count_nonzero, (input,), {"dim": _dims(dim)})


# -- cumsum, cumprod, cummax, cummin --------------------------------------------------------
def _scan_meta(op: str):
    def meta(x: Meta, *, dim, dtype=None) -> Meta:
        normalize_dim(op, dim, len(x.shape))
        return Meta(x.shape, _int_to_int64(x.dtype, dtype))

    return meta


def _scan_kernel(op: str, scan):
    def kernel(x, *, dim, dtype=None):
        d = normalize_dim(op, dim, x.ndim)
        target = _int_to_int64(dtypes.from_numpy(x.dtype), dtype).np
        x = _acc(x.astype(target, copy=False))
        if x.ndim == 0:
            return x.astype(target)
        return scan(x, axis=d).astype(target, copy=False)

    return kernel


def _cumsum_grad(ctx, gy):
    if gy.ndim == 0:
        return (gy,)
    return (_reverse_cumsum(gy, normalize_dim("cumsum", ctx.dim, gy.ndim)),)


def _cumprod_grad(ctx, gy):
    x, y = ctx.input, ctx.out
    if x.ndim == 0:
        return (gy,)
    d = normalize_dim("cumprod", ctx.dim, x.ndim)
    zero = x == 0
    if not zero.any():  # d y_i / d x_k = y_i / x_k (for i >= k), smooth away from zeros
        return (_reverse_cumsum(gy * y, d) / x,)
    if is_grad_enabled():  # create_graph: this gradient is differentiated again
        return (_cumprod_grad_polynomial(x, gy, d),)
    return (_cumprod_grad_zeros(x, y, gy, d, zero),)


def _cumprod_grad_zeros(x, y, gy, d: int, zero):
    """O(n) gradient with zeros: d y_i / d x_k = prod_{j <= i, j != k} x_j for i >= k. Before
    the first zero z of a slice that is y_i / x_k; at z it is prod_{j < z} x_j times
    prod_{z < j <= i} x_j; after z it is 0. Exact in value, but not its own derivative (the
    terms after z vanish only at x_z = 0): `_cumprod_grad_polynomial` serves create_graph."""
    seen = zero.cumsum(d)  # zeros at or before each position
    before = seen == 0
    first = zero & (seen == 1)
    x_before = where(before, x, 1.0)
    g_before = where(before, _reverse_cumsum(gy * y, d) / x_before, 0.0)
    head = x_before.prod(d, keepdim=True)  # prod_{j < z}
    tail = where(before | first, 1.0, x).cumprod(d)  # prod_{z < j <= i}, for i >= z
    g_first = head * where(before, 0.0, gy * tail).sum(d, keepdim=True)
    return g_before + where(first, g_first, 0.0)


def _cumprod_grad_polynomial(x, gy, d: int):
    """The same gradient as a polynomial in x, exact to every order: for each k the running
    products of x with x_k replaced by 1, summed against gy over i >= k. O(n^2) per slice."""
    n = x.shape[d]
    k = arange(n).reshape(n, 1)
    i = arange(n).reshape(1, n)
    trailing = (1,) * (x.ndim - d - 1)
    omit = (k == i).reshape(n, n, *trailing)  # axes (k, j) at (d, d + 1)
    later = (i >= k).reshape(n, n, *trailing)  # axes (k, i)
    rows = x.unsqueeze(d)  # (..., 1, n, ...): row k of the (k, j) grid
    products = where(omit, 1.0, rows).cumprod(d + 1)  # prod_{j <= i, j != k} x_j
    return (where(later, products, 0.0) * gy.unsqueeze(d)).sum(d + 1)


_cumsum = defop(
    "cumsum",
    inputs=("input",),
    meta=_scan_meta("cumsum"),
    sbp=_scan_sbp(linear=True),
    kernels={"cpu": _scan_kernel("cumsum", np.cumsum)},
    grad=_cumsum_grad,
    onnx=_cumsum_onnx,
)
_cumprod = defop(
    "cumprod",
    inputs=("input",),
    meta=_scan_meta("cumprod"),
    sbp=_scan_sbp(),
    kernels={"cpu": _scan_kernel("cumprod", np.cumprod)},
    grad=holomorphic(_cumprod_grad),
    saves=("input", "out"),
)


def cumsum(input, dim, *, dtype=None):
    """Running sums along `dim`. Integer and bool inputs give int64.

    >>> flow.cumsum(flow.tensor([1, 2, 3]), dim=0)
    tensor([1, 3, 6])
    """
    dtype = None if dtype is None else dtypes.to_dtype(dtype)
    return dispatch(_cumsum, (input,), {"dim": dim, "dtype": dtype})


def cumprod(input, dim, *, dtype=None):
    """Running products along `dim`. Integer and bool inputs give int64; the gradient is
    exact where the input has zeros.

    >>> flow.cumprod(flow.tensor([1.0, 2.0, 3.0]), dim=0)
    tensor([1., 2., 6.])
    """
    dtype = None if dtype is None else dtypes.to_dtype(dtype)
    return dispatch(_cumprod, (input,), {"dim": dim, "dtype": dtype})


# -- logcumsumexp ---------------------------------------------------------------------------
def _logcumsumexp_meta(x: Meta, *, dim) -> Meta:
    normalize_dim("logcumsumexp", dim, len(x.shape))
    reject_complex("logcumsumexp", x.dtype)
    _require_float("logcumsumexp", x.dtype.np)
    return Meta(x.shape, x.dtype)


def _logcumsumexp_kernel(x, *, dim):
    d = normalize_dim("logcumsumexp", dim, x.ndim)
    _require_float("logcumsumexp", x.dtype)
    if x.ndim == 0:
        return x.copy()
    return np.logaddexp.accumulate(_acc(x), axis=d).astype(x.dtype, copy=False)


def _reverse_logcumsumexp(t, dim: int):
    return t.flip(dim).logcumsumexp(dim).flip(dim)


def _logcumsumexp_grad(ctx, gy):
    x, out = ctx.input, ctx.out
    if x.ndim == 0:
        return (gy,)
    d = normalize_dim("logcumsumexp", ctx.dim, x.ndim)
    # gx_i = sum_{j >= i} gy_j exp(x_i - out_j), summed in log space (a reverse
    # logcumsumexp) so nothing overflows; the positive and negative parts of gy apart, since
    # only magnitudes have logarithms. The log of a zero part is the lowest finite value, not
    # -inf: a scan of -infs has NaN derivatives, which double backward would meet
    lowest = float(ml_dtypes.finfo(gy.dtype.np).min)
    parts = []
    for sign in (gy > 0, gy < 0):
        log_magnitude = where(sign, where(sign, gy.abs(), 1.0).log(), lowest)
        parts.append((_reverse_logcumsumexp(log_magnitude - out, d) + x).exp())
    return (parts[0] - parts[1],)


_logcumsumexp = defop(
    "logcumsumexp",
    inputs=("input",),
    meta=_logcumsumexp_meta,
    sbp=_scan_sbp(),
    kernels={"cpu": _logcumsumexp_kernel},
    grad=_logcumsumexp_grad,
    saves=("input", "out"),
)


def logcumsumexp(input, dim):
    """Running `logsumexp` along `dim`: `log(cumsum(exp(input)))`, computed without overflow.
    Floating point inputs only.

    >>> flow.logcumsumexp(flow.tensor([0.0, 0.0, 0.0]), dim=0)
    tensor([0.0000, 0.6931, 1.0986])
    """
    return dispatch(_logcumsumexp, (input,), {"dim": dim})


def _cum_extreme_kernel(op: str, accumulate):
    """Running max/min with the index of its last occurrence (ties move the index forward;
    once a NaN is seen it is the running value, as in PyTorch)."""

    def kernel(x, *, dim):
        if x.ndim == 0:
            normalize_dim(op, dim, 0)
            return x.copy(), np.zeros((), np.int64)
        d = normalize_dim(op, dim, x.ndim)
        values = accumulate(x, axis=d)
        hit = x == values
        if is_float(x.dtype):
            hit |= np.isnan(x)
        positions = np.arange(x.shape[d]).reshape([-1 if i == d else 1 for i in range(x.ndim)])
        indices = np.maximum.accumulate(np.where(hit, positions, 0), axis=d)
        return values, indices.astype(np.int64, copy=False)

    return kernel


def _cum_extreme_meta(op: str):
    def meta(x: Meta, *, dim) -> tuple[Meta, Meta]:
        normalize_dim(op, dim, len(x.shape))
        return Meta(x.shape, x.dtype), Meta(x.shape, dtypes.int64)

    return meta


def _cum_extreme_grad(ctx, gy, _gi):
    if gy.ndim == 0:
        return (gy,)
    d = normalize_dim("cummax", ctx.dim, gy.ndim)
    return (zeros_like(gy).scatter_add(d, ctx.out1, gy),)


def _cum_extreme(name: str, accumulate):
    return defop(
        name,
        inputs=("input",),
        meta=_cum_extreme_meta(name),
        sbp=_scan_sbp(n_out=2),
        kernels={"cpu": _cum_extreme_kernel(name, accumulate)},
        grad=_cum_extreme_grad,
        saves=("out1",),
        n_out=2,
    )


_cummax = _cum_extreme("cummax", np.maximum.accumulate)
_cummin = _cum_extreme("cummin", np.minimum.accumulate)


def cummax(input, dim):
    """Running maximum along `dim` and the index where it was last attained, as a named
    tuple (values, indices).

    >>> flow.cummax(flow.tensor([1, 3, 2, 3]), dim=0)
    cummax(values=tensor([1, 3, 3, 3]), indices=tensor([0, 1, 1, 3]))
    """
    return _CummaxResult(*dispatch(_cummax, (input,), {"dim": dim}))


def cummin(input, dim):
    """Running minimum along `dim` and the index where it was last attained; see `cummax`.

    >>> flow.cummin(flow.tensor([3, 1, 2, 1]), dim=0)
    cummin(values=tensor([3, 1, 1, 1]), indices=tensor([0, 1, 1, 3]))
    """
    return _CumminResult(*dispatch(_cummin, (input,), {"dim": dim}))


# -- median, nanmedian, mode ----------------------------------------------------------------
def _median_meta(op: str):
    along_dim = _select_meta(op)

    def meta(x: Meta, *, dim=None, keepdim=False) -> tuple[Meta, Meta]:
        if dim is None:  # the median of all elements (an index into the flattened input)
            return Meta((), x.dtype), Meta((), dtypes.int64)
        return along_dim(x, dim=dim, keepdim=keepdim)

    return meta


def _median_kernel(op: str, skip_nan: bool):
    """The lower median: element (n - 1) // 2 in sorted order. A NaN makes the median NaN
    (its first occurrence is the index), unless `skip_nan` leaves NaNs out of n."""

    def kernel(x, *, dim=None, keepdim=False):
        if dim is None:
            x, d, keepdim = x.reshape(-1), 0, False
        elif x.ndim == 0:
            normalize_dim(op, dim, 0)
            return x.copy(), np.zeros((), np.int64)
        else:
            d = normalize_dim(op, dim, x.ndim)
        n = x.shape[d]
        if n == 0:
            _require_nonempty(op, x.shape, () if dim is None else (d,))
            return np.full((), np.nan, x.dtype), np.zeros((), np.int64)  # median of nothing
        order = np.argsort(x, axis=d, kind="stable")  # NaNs sort last
        nans = np.sum(np.isnan(x), axis=d, keepdims=True) if is_float(x.dtype) else 0
        if skip_nan:
            k = np.maximum((n - nans - 1) // 2, 0)
        else:
            k = np.where(nans > 0, n - nans, (n - 1) // 2)
        k = np.broadcast_to(k, _keep_shape(x.shape, (d,)))
        return _take(x, np.take_along_axis(order, k, axis=d), d, keepdim)

    return kernel


def _median_grad(ctx, gy, _gi):
    if ctx.dim is None:  # median(): shared evenly among ties, as PyTorch
        x = ctx.input
        return (_evenly_distribute(gy, x, ctx.out, None, False),)
    return (_index_grad(gy, ctx.out1, ctx.input_shape(0), ctx.dim, ctx.keepdim),)


def _median_op(name: str, skip_nan: bool):
    return defop(
        name,
        inputs=("input",),
        meta=_median_meta(name),
        sbp=_reduction_sbp(n_out=2),
        kernels={"cpu": _median_kernel(name, skip_nan)},
        grad=_median_grad,
        saves=("input", "out", "out1"),
        n_out=2,
    )


_median = _median_op("median", skip_nan=False)
_nanmedian = _median_op("nanmedian", skip_nan=True)


def median(input, dim=None, keepdim=False):
    """The lower median of all elements (`median(input)`), or along `dim` as a named tuple
    (values, indices). NaN propagates.

    >>> flow.median(flow.tensor([[1.0, 4.0, 2.0], [3.0, 0.0, 5.0]]), dim=1)
    median(values=tensor([2., 3.]), indices=tensor([2, 0]))
    """
    values, indices = dispatch(_median, (input,), {"dim": dim, "keepdim": keepdim})
    return values if dim is None else _MedianResult(values, indices)


def nanmedian(input, dim=None, keepdim=False):
    """`median` ignoring NaNs (NaN only where a slice is all NaN).

    >>> flow.nanmedian(flow.tensor([1.0, float("nan"), 3.0, 2.0]))
    tensor(2.)
    """
    values, indices = dispatch(_nanmedian, (input,), {"dim": dim, "keepdim": keepdim})
    return values if dim is None else _NanMedianResult(values, indices)


def _mode_kernel(x, *, dim=-1, keepdim=False):
    """Most frequent value along `dim` (the smallest among equally frequent ones) and the
    index of its last occurrence, as PyTorch."""
    if x.ndim == 0:
        normalize_dim("mode", dim, 0)
        return x.copy(), np.zeros((), np.int64)
    d = normalize_dim("mode", dim, x.ndim)
    xs = np.moveaxis(x, d, -1)
    s = np.sort(xs, axis=-1)
    positions = np.arange(s.shape[-1])
    starts = np.ones(s.shape, bool)
    starts[..., 1:] = s[..., 1:] != s[..., :-1]
    # position within the current run of equal values: its maximum ends the longest run,
    # and the first maximum belongs to the smallest such value (s is sorted)
    run = positions - np.maximum.accumulate(np.where(starts, positions, 0), axis=-1)
    best = np.argmax(run, axis=-1, keepdims=True)
    values = np.take_along_axis(s, best, axis=-1)
    hit = xs == values
    if is_float(x.dtype):
        hit |= np.isnan(xs) & np.isnan(values)
    indices = np.max(np.where(hit, positions, -1), axis=-1, keepdims=True)
    values, indices = np.moveaxis(values, -1, d), np.moveaxis(indices, -1, d)
    if not keepdim:
        values, indices = values.squeeze(d), indices.squeeze(d)
    return values.copy(), indices.astype(np.int64)


_mode = defop(
    "mode",
    inputs=("input",),
    meta=_select_meta("mode"),
    sbp=_reduction_sbp(n_out=2),
    kernels={"cpu": _mode_kernel},
    grad=_index_grad_rule,
    saves=("out1",),
    n_out=2,
)


def mode(input, dim=-1, keepdim=False):
    """The most frequent value along `dim` (the smallest on ties) and the index of its last
    occurrence, as a named tuple (values, indices).

    >>> flow.mode(flow.tensor([1, 2, 2, 3, 3]))
    mode(values=tensor(2), indices=tensor(2))
    """
    return _ModeResult(*dispatch(_mode, (input,), {"dim": dim, "keepdim": keepdim}))


# -- sum_to_size ----------------------------------------------------------------------------
def _sum_to_meta(x: Meta, *, shape) -> Meta:
    lead = len(x.shape) - len(shape)
    ok = lead >= 0 and builtins.all(t in (1, s) for s, t in zip(x.shape[lead:], shape, strict=True))
    if not ok:
        raise ShapeError(f"sum_to_size: size {list(shape)} is not expandable to {list(x.shape)}")
    return Meta(tuple(shape), x.dtype)


def _sum_to_kernel(x, *, shape, out=None):
    """The sum, written into `out` when given unless half precision (summed in float32 and
    rounded into a fresh array)."""
    lead = x.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, t in enumerate(shape) if t == 1 and x.shape[lead + i] != 1
    )
    if not axes:
        if out is None:
            return x.copy().reshape(shape)
        np.copyto(out, x.reshape(shape))
        return out
    acc = _acc(x)
    if out is None or acc is not x:
        return np.sum(acc, axis=axes, keepdims=True).astype(x.dtype, copy=False).reshape(shape)
    kept = tuple(1 if axis in axes else d for axis, d in enumerate(x.shape))
    np.sum(x, axis=axes, keepdims=True, out=out.reshape(kept))
    return out


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
    out_kernels={"cpu": _sum_to_kernel},
    grad=lambda ctx, gy: (gy.expand(ctx.input_shape(0)),),
    onnx=_sum_to_onnx,
)


@checked
def sum_to_size(input: Tensor, *size):
    """Sum `input` down to `size`, undoing broadcasting (the gradient of `expand`)."""
    shape = tuple(size[0]) if len(size) == 1 and isinstance(size[0], tuple | list) else size
    if tuple(input.shape) == tuple(shape):
        return input
    return dispatch(_sum_to_size, (input,), {"shape": tuple(shape)})


methods(
    sum=sum,
    sum_to_size=sum_to_size,
    nansum=nansum,
    mean=mean,
    nanmean=nanmean,
    prod=prod,
    var=var,
    std=std,
    amax=amax,
    amin=amin,
    aminmax=aminmax,
    max=max,
    min=min,
    argmax=argmax,
    argmin=argmin,
    logsumexp=logsumexp,
    norm=norm,
    all=all,
    any=any,
    count_nonzero=count_nonzero,
    cumsum=cumsum,
    cumprod=cumprod,
    cumsum_=inplace(cumsum, "cumsum_"),
    cumprod_=inplace(cumprod, "cumprod_"),
    cummax=cummax,
    cummin=cummin,
    logcumsumexp=logcumsumexp,
    renorm=renorm,
    renorm_=inplace(renorm, "renorm_"),
    median=median,
    nanmedian=nanmedian,
    mode=mode,
)
