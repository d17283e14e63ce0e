"""nn.functional pooling: max, average, adaptive max and adaptive average pooling, 1-d to 3-d.

Max pooling gathers every window of each spatial plane through one table of flat plane
indices (padding and ragged adaptive windows repeat an in-window position instead of reading a
sentinel), takes the argmax, and returns PyTorch's indices: flat positions in the input plane.
Its gradient scatters through those indices (`pool_scatter`), whose gradient gathers
(`pool_gather`): the pair closes double backward. Average pooling is separable, so it is a
`resample` with one box-filter table per dim.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ...framework import dtype as dtypes
from ...framework.errors import ArgumentError, DTypeError, ShapeError, UnsupportedError
from .. import indexing, unary
from .._rules import B, Meta, P, S, Signature, defop, dispatch, int_arg, tensor_arg
from .conv import ntuple
from .sampling import adaptive_avg_taps, compute_array, compute_dtype, make_taps, resample

__all__ = [
    "max_pool1d",
    "max_pool2d",
    "max_pool3d",
    "avg_pool1d",
    "avg_pool2d",
    "avg_pool3d",
    "adaptive_max_pool1d",
    "adaptive_max_pool2d",
    "adaptive_max_pool3d",
    "adaptive_avg_pool1d",
    "adaptive_avg_pool2d",
    "adaptive_avg_pool3d",
    "lp_pool1d",
    "lp_pool2d",
    "lp_pool3d",
    "max_unpool1d",
    "max_unpool2d",
    "max_unpool3d",
    "max_pool1d_with_indices",
    "max_pool2d_with_indices",
    "max_pool3d_with_indices",
    "adaptive_max_pool1d_with_indices",
    "adaptive_max_pool2d_with_indices",
    "adaptive_max_pool3d_with_indices",
]


# -- window geometry ------------------------------------------------------------------------
def pool_out_size(op, spatial, kernel, stride, padding, dilation, ceil_mode) -> tuple:
    """PyTorch's `pooling_output_shape`, with its argument checks; a ceil_mode window must
    start inside the input or its left padding."""
    if min(kernel) < 1 or min(stride) < 1 or min(dilation) < 1 or min(padding) < 0:
        raise ShapeError(
            f"{op}: kernel_size, stride and dilation must be positive and padding "
            f"non-negative, got kernel_size={list(kernel)}, stride={list(stride)}, "
            f"padding={list(padding)}, dilation={list(dilation)}"
        )
    if any(2 * p > k for p, k in zip(padding, kernel, strict=True)):
        raise ShapeError(
            f"{op}: padding {list(padding)} should be at most half of kernel_size {list(kernel)}"
        )
    out = []
    for n, k, s, p, d in zip(spatial, kernel, stride, padding, dilation, strict=True):
        span = n + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)
        o = span // s + 1
        if ceil_mode and (o - 1) * s >= n + p:
            o -= 1
        out.append(o)
    if min(out) < 1:
        raise ShapeError(
            f"{op}: the output size {out} computed from the input's spatial size "
            f"{list(spatial)} (kernel_size={list(kernel)}, stride={list(stride)}, "
            f"padding={list(padding)}, dilation={list(dilation)}) is too small"
        )
    return tuple(out)


def _flat_table(windows: list, spatial: tuple) -> np.ndarray:
    """Per-dim window positions (out_d, k_d) combined into flat plane indices (P, K)."""
    nd = len(windows)
    strides = [math.prod(spatial[d + 1 :]) for d in range(nd)]
    table = np.zeros((1,) * (2 * nd), np.int64)
    for d, w in enumerate(windows):
        shape = [1] * (2 * nd)
        shape[d], shape[nd + d] = w.shape
        table = table + w.reshape(shape) * strides[d]
    table = table.reshape(math.prod(table.shape[:nd]), -1)
    table.flags.writeable = False
    return table


@functools.lru_cache(maxsize=256)
def _max_pool_table(spatial, kernel, stride, padding, dilation, out) -> np.ndarray:
    """Window positions; those in the padding repeat the window's first inside position, which
    changes neither the max nor (as a repeated index) the argmax's input position."""
    windows = []
    for n, k, s, p, d, o in zip(spatial, kernel, stride, padding, dilation, out, strict=True):
        pos = (np.arange(o) * s - p)[:, None] + np.arange(k) * d
        inside = (pos >= 0) & (pos < n)
        first = pos[np.arange(o), inside.argmax(1)]
        windows.append(np.where(inside, pos, first[:, None]))
    return _flat_table(windows, spatial)


def _adaptive_bounds(n: int, o: int) -> tuple[np.ndarray, np.ndarray]:
    j = np.arange(o)
    return (j * n) // o, -((-(j + 1) * n) // o)


@functools.lru_cache(maxsize=256)
def _adaptive_max_table(spatial, output_size) -> np.ndarray:
    windows = []
    for n, o in zip(spatial, output_size, strict=True):
        start, end = _adaptive_bounds(n, o)
        pos = start[:, None] + np.arange(int((end - start).max(initial=1)))
        windows.append(np.where(pos < end[:, None], pos, start[:, None]))
    return _flat_table(windows, spatial)


# -- max over windows -----------------------------------------------------------------------
def _window_max(x: np.ndarray, table: np.ndarray, out_spatial: tuple):
    """(max, flat input index) of every window. Ties give the first position, NaN wins and
    the last NaN of a window gives the index, as in PyTorch's kernels."""
    nd = len(out_spatial)
    lead = x.shape[: x.ndim - nd]
    rows, plane = math.prod(lead), math.prod(x.shape[x.ndim - nd :])
    windows = np.take(compute_array(x).reshape(rows, plane), table, axis=1)  # (rows, P, K)
    arg = windows.argmax(-1)
    values = np.take_along_axis(windows, arg[..., None], -1)[..., 0]
    if values.dtype.kind == "f":
        nan = np.isnan(values)
        if nan.any():
            last = table.shape[1] - 1 - np.isnan(windows[..., ::-1]).argmax(-1)
            arg = np.where(nan, last, arg)
    indices = table[np.arange(table.shape[0]), arg]
    shape = (*lead, *out_spatial)
    return values.astype(x.dtype, copy=False).reshape(shape), indices.reshape(shape)


def _pool_meta(op_of, nd_attr: str, out_of):
    """Meta of a max pool: (values, int64 indices) of the pooled shape."""

    def meta(x: Meta, **attrs):
        nd = len(attrs[nd_attr])
        if x.ndim < nd + 1:
            raise ShapeError(
                f"{op_of(nd)}: expected a {nd + 1}-d (unbatched) or {nd + 2}-d (batched) input, "
                f"got input of shape {list(x.shape)}"
            )
        shape = (*x.shape[: x.ndim - nd], *out_of(op_of(nd), x.shape[x.ndim - nd :], **attrs))
        return Meta(shape, x.dtype), Meta(shape, dtypes.int64)

    return meta


def _leading_sbp(x: Meta, nd: int, n_in: int = 1, n_out: int = 1, partial: bool = False):
    """Pooling works plane by plane: any leading (batch, channel) dim may be split."""
    sigs = [Signature((B,) * n_in, (B,) * n_out)]
    sigs += [Signature((S(i),) * n_in, (S(i),) * n_out) for i in range(x.ndim - nd)]
    if partial:  # linear in the first operand (the others are indices)
        sigs.append(Signature((P,) + (B,) * (n_in - 1), (P,) * n_out))
    return sigs


def _max_pool_grad(nd_attr: str):
    def grad(ctx, gy, _gindices):
        size = ctx.input_shape(0)[-len(ctx.attrs[nd_attr]) :]
        return (pool_scatter(gy, ctx.out1, size),)

    return grad


def _max_pool_out(op, spatial, *, kernel_size, stride, padding, dilation, ceil_mode):
    return pool_out_size(op, spatial, kernel_size, stride, padding, dilation, ceil_mode)


def _max_pool_kernel(x, *, kernel_size, stride, padding, dilation, ceil_mode):
    nd = len(kernel_size)
    spatial = x.shape[x.ndim - nd :]
    op = f"max_pool{nd}d"
    out = pool_out_size(op, spatial, kernel_size, stride, padding, dilation, ceil_mode)
    table = _max_pool_table(spatial, kernel_size, stride, padding, dilation, out)
    return _window_max(x, table, out)


def _adaptive_out(op, spatial, *, output_size):
    if len(output_size) != len(spatial) or min(output_size) < 0:
        raise ShapeError(f"{op}: invalid output_size {list(output_size)}")
    if min(spatial) < 1 and min(output_size) > 0:
        raise ShapeError(f"{op}: cannot pool an empty spatial size {list(spatial)}")
    return tuple(output_size)


def _adaptive_max_kernel(x, *, output_size):
    nd = len(output_size)
    spatial = x.shape[x.ndim - nd :]
    _adaptive_out(f"adaptive_max_pool{nd}d", spatial, output_size=output_size)
    return _window_max(x, _adaptive_max_table(spatial, output_size), output_size)


def _pooled(g, x: str, nd: int, **attributes) -> tuple[str, str]:
    """ONNX's MaxPool over the last `nd` dims of `x`, whatever its leading dims (MaxPool
    takes (N, C, *spatial)), and the indices within each plane, as ours count."""
    shape = g.meta(x).shape
    lead = len(shape) - nd
    if lead != 2:  # the leading dims as one channel dim of one batch
        x = g.op("Reshape", x, g.ints([1, -1, *shape[lead:]]))
    y, flat = g.op("MaxPool", x, outputs=2, **attributes)
    plane = g.op("Mod", flat, g.ints(math.prod(shape[lead:])))
    if lead == 2:
        return y, plane
    out = g.ints([*shape[:lead], *g.out[0].shape[lead:]])
    return g.op("Reshape", y, out), g.op("Reshape", plane, out)


def _max_pool_onnx(g, x, *, kernel_size, stride, padding, dilation, ceil_mode):
    return _pooled(
        g,
        x,
        len(kernel_size),
        kernel_shape=list(kernel_size),
        strides=list(stride),
        pads=[*padding, *padding],
        dilations=list(dilation),
        ceil_mode=int(ceil_mode),
    )


def _adaptive_max_pool_onnx(g, x, *, output_size):
    nd = len(output_size)
    spatial = g.meta(x).shape[-nd:]
    if any(o == 0 or n % o for n, o in zip(spatial, output_size, strict=True)):
        raise UnsupportedError(
            f"onnx.export: adaptive_max_pool{nd}d to {list(output_size)} from {list(spatial)}: "
            "ONNX pools windows of one size, which needs sizes that divide the input's"
        )
    windows = [n // o for n, o in zip(spatial, output_size, strict=True)]
    return _pooled(g, x, nd, kernel_shape=windows, strides=windows)


_max_pool = defop(
    "max_pool",
    inputs=("input",),
    meta=_pool_meta(lambda nd: f"max_pool{nd}d", "kernel_size", _max_pool_out),
    sbp=lambda x, *, kernel_size, **_: _leading_sbp(x, len(kernel_size), n_out=2),
    kernels={"cpu": _max_pool_kernel},
    grad=_max_pool_grad("kernel_size"),
    saves=("out1",),
    n_out=2,
    onnx=_max_pool_onnx,
)
_adaptive_max_pool = defop(
    "adaptive_max_pool",
    inputs=("input",),
    meta=_pool_meta(lambda nd: f"adaptive_max_pool{nd}d", "output_size", _adaptive_out),
    sbp=lambda x, *, output_size: _leading_sbp(x, len(output_size), n_out=2),
    kernels={"cpu": _adaptive_max_kernel},
    grad=_max_pool_grad("output_size"),
    saves=("out1",),
    n_out=2,
    onnx=_adaptive_max_pool_onnx,
)


# -- the scatter/gather pair behind max pooling's gradients ----------------------------------
def _rows(a_shape: tuple, nd: int) -> tuple[int, int]:
    return math.prod(a_shape[: len(a_shape) - nd]), math.prod(a_shape[len(a_shape) - nd :])


def _pool_scatter_kernel(g, indices, *, size):
    """Add each window's gradient at its input index (windows may overlap)."""
    nd = len(size)
    rows, per_row = _rows(g.shape, nd)
    out = np.zeros((rows, math.prod(size)), compute_dtype(g.dtype))
    where = (np.arange(rows)[:, None], indices.reshape(rows, per_row))
    np.add.at(out, where, compute_array(g).reshape(rows, per_row))
    return out.astype(g.dtype, copy=False).reshape(*g.shape[: g.ndim - nd], *size)


def _pool_gather_kernel(x, indices, *, nd):
    rows, plane = _rows(x.shape, nd)
    flat = indices.reshape(rows, _rows(indices.shape, nd)[1])
    return np.take_along_axis(x.reshape(rows, plane), flat, 1).reshape(indices.shape)


def _pool_scatter_meta(g: Meta, indices: Meta, *, size) -> Meta:
    if g.shape != indices.shape:
        raise ShapeError(
            f"pool_scatter: gradient of shape {list(g.shape)} and indices of shape "
            f"{list(indices.shape)} differ"
        )
    return Meta((*g.shape[: g.ndim - len(size)], *size), g.dtype)


_pool_scatter = defop(
    "pool_scatter",
    inputs=("input", "indices"),
    meta=_pool_scatter_meta,
    sbp=lambda g, i, *, size: _leading_sbp(g, len(size), n_in=2, partial=True),
    kernels={"cpu": _pool_scatter_kernel},
    grad=lambda ctx, gg: (pool_gather(gg, ctx.indices, len(ctx.size)), None),
    saves=("indices",),
)
_pool_gather = defop(
    "pool_gather",
    inputs=("input", "indices"),
    meta=lambda x, i, *, nd: Meta(i.shape, x.dtype),
    sbp=lambda x, i, *, nd: _leading_sbp(x, nd, n_in=2, partial=True),
    kernels={"cpu": _pool_gather_kernel},
    grad=lambda ctx, gg: (pool_scatter(gg, ctx.indices, ctx.input_shape(0)[-ctx.nd :]), None),
    saves=("indices",),
)


def pool_scatter(grad, indices, size):
    """A zero (..., *size) tensor plus `grad` added at `indices` (flat positions in each
    trailing `size` plane): the gradient of max pooling."""
    return dispatch(_pool_scatter, (grad, indices), {"size": tuple(size)})


def pool_gather(input, indices, nd: int):
    """The values of `input` at `indices` (flat positions in each trailing nd-d plane)."""
    return dispatch(_pool_gather, (input, indices), {"nd": nd})


# -- average pooling: separable box filters ------------------------------------------------
@functools.lru_cache(maxsize=256)
def _avg_taps(size, kernel, stride, padding, out, count_include_pad, scale):
    """One dim's windows weighted 1 / count (PyTorch's divide_factor is the product of the
    per-dim counts); taps outside the input are skipped. `scale` replaces 1 / count when the
    divisor is overridden (1 on every dim but the first)."""
    start = np.arange(out) * stride - padding
    pos = start[:, None] + np.arange(kernel)
    inside = (pos >= 0) & (pos < size)
    if scale is not None:
        weight = np.full(out, scale)
    elif count_include_pad:
        weight = 1.0 / (np.minimum(start + kernel, size + padding) - start)
    else:
        weight = 1.0 / np.maximum(inside.sum(1), 1)
    return make_taps(np.where(inside, pos, -1), np.where(inside, weight[:, None], 0.0), size)


def _require_float(op: str, input) -> None:
    if not input.dtype.is_floating_point:
        raise DTypeError(f"{op}: expected a floating point input, got {input.dtype}")


def _reject_bool(op: str, input) -> None:
    if input.dtype is dtypes.bool_:
        raise DTypeError(f"{op}: bool tensors are not supported")


def _check_rank(op: str, input, nd: int) -> None:
    if tensor_arg(op, "input", 1, input).ndim not in (nd + 1, nd + 2):
        raise ShapeError(
            f"{op}: expected a {nd + 1}-d (unbatched) or {nd + 2}-d (batched) input, got input "
            f"of shape {list(input.shape)}"
        )


def _avg_pool_nd(nd, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor):
    op = f"avg_pool{nd}d"
    _check_rank(op, input, nd)
    _require_float(op, input)
    kernel = ntuple(kernel_size, nd, op, "kernel_size")
    stride = kernel if stride is None or stride == [] else ntuple(stride, nd, op, "stride")
    padding = ntuple(padding, nd, op, "padding")
    if divisor is not None and divisor == 0:
        raise ShapeError(f"{op}: divisor_override must not be zero")
    spatial = tuple(input.shape[-nd:])
    out = pool_out_size(op, spatial, kernel, stride, padding, (1,) * nd, ceil_mode)
    include = bool(count_include_pad)
    scales = [None] * nd if divisor is None else [1.0 / divisor] + [1.0] * (nd - 1)
    geometry = zip(spatial, kernel, stride, padding, out, scales, strict=True)
    taps = [_avg_taps(n, k, s, p, o, include, c) for n, k, s, p, o, c in geometry]
    return resample(input, taps)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    """1-d average pooling of a (N, C, L) or (C, L) input. `count_include_pad` counts the zero
    padding in each window's divisor."""
    return _avg_pool_nd(1, input, kernel_size, stride, padding, ceil_mode, count_include_pad, None)


def avg_pool2d(
    input,
    kernel_size,
    stride=None,
    padding=0,
    ceil_mode=False,
    count_include_pad=True,
    divisor_override=None,
):
    """2-d average pooling of a (N, C, H, W) or (C, H, W) input; `stride` defaults to
    `kernel_size`. `divisor_override` replaces every window's element count as divisor.
    `F.avg_pool2d(x, 2)` halves H and W."""
    return _avg_pool_nd(
        2, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override
    )


def avg_pool3d(
    input,
    kernel_size,
    stride=None,
    padding=0,
    ceil_mode=False,
    count_include_pad=True,
    divisor_override=None,
):
    """3-d average pooling of a (N, C, D, H, W) or (C, D, H, W) input (see `avg_pool2d`)."""
    return _avg_pool_nd(
        3, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override
    )


# -- public max pooling ---------------------------------------------------------------------
def _max_pool_nd(nd, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices):
    op = f"max_pool{nd}d"
    _check_rank(op, input, nd)
    _reject_bool(op, input)
    kernel = ntuple(kernel_size, nd, op, "kernel_size")
    attrs = {
        "kernel_size": kernel,
        "stride": kernel if stride is None or stride == [] else ntuple(stride, nd, op, "stride"),
        "padding": ntuple(padding, nd, op, "padding"),
        "dilation": ntuple(dilation, nd, op, "dilation"),
        "ceil_mode": bool(ceil_mode),
    }
    values, indices = dispatch(_max_pool, (input,), attrs)
    return (values, indices) if return_indices else values


def max_pool1d(
    input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False
):
    """1-d max pooling of a (N, C, L) or (C, L) input; `stride` defaults to `kernel_size`,
    padding is -inf. With `return_indices`, also the argmax's flat index in each input row."""
    return _max_pool_nd(1, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def max_pool2d(
    input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False
):
    """2-d max pooling of a (N, C, H, W) or (C, H, W) input; `stride` defaults to
    `kernel_size`. With `return_indices`, also each max's flat index into its input plane
    (h * W + w), as `max_unpool2d` expects. `F.max_pool2d(x, 2)` halves H and W."""
    return _max_pool_nd(2, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def max_pool3d(
    input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False
):
    """3-d max pooling of a (N, C, D, H, W) or (C, D, H, W) input (see `max_pool2d`)."""
    return _max_pool_nd(3, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


# -- adaptive pooling -----------------------------------------------------------------------
def _output_size(op: str, input, output_size, nd: int) -> tuple:
    """An int or an nd-tuple; None entries keep the input's size."""
    sizes = (output_size,) * nd if isinstance(output_size, int) else tuple(output_size)
    if len(sizes) != nd:
        raise ShapeError(f"{op}: output_size must be an int or {nd} values, got {output_size}")
    spatial = input.shape[-nd:]
    sizes = tuple(n if s is None else int(s) for n, s in zip(spatial, sizes, strict=True))
    if min(sizes) < 0:
        raise ShapeError(f"{op}: output_size {list(sizes)} must not be negative")
    return sizes


def _adaptive_avg_pool_nd(nd, input, output_size):
    op = f"adaptive_avg_pool{nd}d"
    _check_rank(op, input, nd)
    _require_float(op, input)
    sizes = _output_size(op, input, output_size, nd)
    _adaptive_out(op, tuple(input.shape[-nd:]), output_size=sizes)
    taps = [adaptive_avg_taps(n, o) for n, o in zip(input.shape[-nd:], sizes, strict=True)]
    return resample(input, taps)


def adaptive_avg_pool1d(input, output_size):
    """Average pooling of a (N, C, L) or (C, L) input to `output_size` positions: window i
    covers [floor(i * L / out), ceil((i + 1) * L / out))."""
    return _adaptive_avg_pool_nd(1, input, output_size)


def adaptive_avg_pool2d(input, output_size):
    """Average pooling of a (N, C, H, W) or (C, H, W) input to `output_size` (an int, or
    (H_out, W_out) where None keeps that size). `F.adaptive_avg_pool2d(x, 1)` is global
    average pooling."""
    return _adaptive_avg_pool_nd(2, input, output_size)


def adaptive_avg_pool3d(input, output_size):
    """Average pooling of a (N, C, D, H, W) or (C, D, H, W) input to `output_size`."""
    return _adaptive_avg_pool_nd(3, input, output_size)


def _adaptive_max_pool_nd(nd, input, output_size, return_indices):
    op = f"adaptive_max_pool{nd}d"
    _check_rank(op, input, nd)
    _reject_bool(op, input)
    sizes = _output_size(op, input, output_size, nd)
    values, indices = dispatch(_adaptive_max_pool, (input,), {"output_size": sizes})
    return (values, indices) if return_indices else values


def adaptive_max_pool1d(input, output_size, return_indices=False):
    """Max pooling of a (N, C, L) or (C, L) input to `output_size` positions (windows as in
    `adaptive_avg_pool1d`); with `return_indices`, also the argmax's index in each row."""
    return _adaptive_max_pool_nd(1, input, output_size, return_indices)


def adaptive_max_pool2d(input, output_size, return_indices=False):
    """Max pooling of a (N, C, H, W) or (C, H, W) input to `output_size`; with
    `return_indices`, also each max's flat index into its input plane."""
    return _adaptive_max_pool_nd(2, input, output_size, return_indices)


def adaptive_max_pool3d(input, output_size, return_indices=False):
    """Max pooling of a (N, C, D, H, W) or (C, D, H, W) input to `output_size`."""
    return _adaptive_max_pool_nd(3, input, output_size, return_indices)


# -- power-average (LP) pooling: composites of average pooling -------------------------------
def _lp_pool_nd(nd: int, input, norm_type, kernel_size, stride, ceil_mode):
    """PyTorch's definition: (sum over the window of x ** p) ** (1 / p), the sum taken as the
    window's average times the kernel's size (so a window cut by `ceil_mode` still counts
    the full kernel)."""
    op = f"lp_pool{nd}d"
    _check_rank(op, input, nd)
    _require_float(op, input)
    kernel = ntuple(kernel_size, nd, op, "kernel_size")
    stride = None if stride is None else ntuple(stride, nd, op, "stride")
    if isinstance(norm_type, bool) or not isinstance(norm_type, int | float):
        raise ArgumentError(
            f"{op}(): argument 'norm_type' must be a number, not {type(norm_type).__name__}"
        )
    p = float(norm_type)
    if p == 0:
        raise ValueError(f"{op}: norm_type must not be 0")
    if math.isinf(p):  # the limits: the largest or the smallest |x| of each window
        sign = 1 if p > 0 else -1
        pool = (max_pool1d, max_pool2d, max_pool3d)[nd - 1]
        return sign * pool(sign * unary.abs(input), kernel, stride, 0, 1, ceil_mode)
    mean = _avg_pool_nd(nd, input**p, kernel, stride, 0, ceil_mode, True, None)
    # NOTE: sign(m) * relu(|m|) is m, with PyTorch's gradient 0 where a window sums to 0
    total = unary.sign(mean) * unary.relu(unary.abs(mean)) * math.prod(kernel)
    return total ** (1.0 / p)


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """Power-average pooling of a (N, C, L) or (C, L) input: each window's
    (sum of x ** norm_type) ** (1 / norm_type); p = 1 is sum pooling, p -> inf max pooling.
    `F.lp_pool1d(x, 2, 3)`"""
    return _lp_pool_nd(1, input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """Power-average pooling of a (N, C, H, W) or (C, H, W) input (see `lp_pool1d`).
    `F.lp_pool2d(x, 2, (2, 3))`"""
    return _lp_pool_nd(2, input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """Power-average pooling of a (N, C, D, H, W) or (C, D, H, W) input (see `lp_pool1d`).
    `F.lp_pool3d(x, 2, 2)`"""
    return _lp_pool_nd(3, input, norm_type, kernel_size, stride, ceil_mode)


# -- max unpooling: the values back at their argmax positions --------------------------------
def _unpool_size(op: str, input, kernel, stride, padding, output_size) -> tuple:
    """The default output size inverts the pooling's formula; an explicit one (optionally
    with the leading N, C) may differ from it by less than a stride (ceil_mode's extra row)."""
    nd = len(kernel)
    spatial = tuple(input.shape[-nd:])
    geometry = zip(spatial, kernel, stride, padding, strict=True)
    default = tuple((n - 1) * s + k - 2 * p for n, k, s, p in geometry)
    if output_size is None:
        size = default
    else:
        if not isinstance(output_size, tuple | list):
            raise ArgumentError(
                f"{op}(): argument 'output_size' must be a tuple of ints, not "
                f"{type(output_size).__name__}"
            )
        size = tuple(int_arg(op, "output_size", s) for s in output_size)
        if len(size) == nd + 2 or (len(size) == nd + 1 and input.ndim == nd + 1):
            size = size[-nd:]
        if len(size) != nd:
            raise ShapeError(
                f"{op}: output_size must have {nd} or {nd + 2} elements, got {list(size)}"
            )
        for d, (o, want, s) in enumerate(zip(size, default, stride, strict=True)):
            if not want - s < o < want + s:
                raise ShapeError(
                    f"{op}: invalid output_size {list(size)}: dim {d} must be between "
                    f"{want - s} and {want + s} (exclusive) for the input of shape "
                    f"{list(input.shape)}"
                )
    if any(s <= 0 for s in size):
        raise ShapeError(
            f"{op}: the output size {list(size)} of the input of shape {list(input.shape)} "
            "must be positive"
        )
    return size


def _max_unpool_nd(nd: int, input, indices, kernel_size, stride, padding, output_size):
    op = f"max_unpool{nd}d"
    _check_rank(op, input, nd)
    tensor_arg(op, "indices", 2, indices)
    if tuple(indices.shape) != tuple(input.shape):
        raise ShapeError(
            f"{op}: indices of shape {list(indices.shape)} must have the shape of the input "
            f"{list(input.shape)}"
        )
    kernel = ntuple(kernel_size, nd, op, "kernel_size")
    stride = kernel if stride is None else ntuple(stride, nd, op, "stride")
    padding = ntuple(padding, nd, op, "padding")
    size = _unpool_size(op, input, kernel, stride, padding, output_size)
    lead = tuple(input.shape[: input.ndim - nd])
    rows, per_row = math.prod(lead), math.prod(input.shape[input.ndim - nd :])
    # NOTE: a write, not an add: overlapping windows' duplicate argmaxes hold one value
    planes = input.new_zeros((rows, math.prod(size)))
    out = indexing.scatter(planes, 1, indices.reshape(rows, per_row), input.reshape(rows, per_row))
    return out.reshape(*lead, *size)


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The partial inverse of `max_pool1d`: a zero (N, C, L_out) tensor with each value of
    `input` (N, C, L_in) at its position in `indices` (from `return_indices=True`).
    `F.max_unpool1d(*F.max_pool1d(x, 2, return_indices=True), 2)`"""
    return _max_unpool_nd(1, input, indices, kernel_size, stride, padding, output_size)


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The partial inverse of `max_pool2d`: zeros except each value at its argmax position
    (`indices`: flat positions in each output plane).
    `F.max_unpool2d(*F.max_pool2d(x, 2, return_indices=True), 2)`"""
    return _max_unpool_nd(2, input, indices, kernel_size, stride, padding, output_size)


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The partial inverse of `max_pool3d` (see `max_unpool2d`).
    `F.max_unpool3d(*F.max_pool3d(x, 2, return_indices=True), 2)`"""
    return _max_unpool_nd(3, input, indices, kernel_size, stride, padding, output_size)


# -- PyTorch's names for the pools that return their argmax ---------------------------------------
def _with_indices(pool):
    def pool_with_indices(input, *args, **kwargs):
        kwargs["return_indices"] = True
        return pool(input, *args, **kwargs)

    pool_with_indices.__name__ = f"{pool.__name__}_with_indices"
    pool_with_indices.__doc__ = f"`{pool.__name__}(..., return_indices=True)`: (values, indices)."
    return pool_with_indices


max_pool1d_with_indices = _with_indices(max_pool1d)
max_pool2d_with_indices = _with_indices(max_pool2d)
max_pool3d_with_indices = _with_indices(max_pool3d)
adaptive_max_pool1d_with_indices = _with_indices(adaptive_max_pool1d)
adaptive_max_pool2d_with_indices = _with_indices(adaptive_max_pool2d)
adaptive_max_pool3d_with_indices = _with_indices(adaptive_max_pool3d)
