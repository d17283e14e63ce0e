"""nn.functional convolutions: conv1d/2d/3d and conv_transpose1d/2d/3d.

One N-d implementation serves every spatial rank. A convolution multiplies the weight with the
input's sliding windows (`im2col`: a strided view, copied once into BLAS layout); a transposed
convolution multiplies first and adds the products back into the windows (col2im). Three ops
are closed under differentiation, each one's gradient made of the others:

    conv(x, w)              y
    conv_transpose(g, w)    the gradient of conv w.r.t. x (and the public conv_transpose)
    conv_weight_grad(x, g)  the gradient of conv w.r.t. w

so gradients of every order are convolutions again. Padding is a (before, after) pair per
spatial dim; a negative amount crops, which keeps each op the exact adjoint of another.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ...backends import bf16_gemm
from ...framework.errors import ArgumentError, DTypeError, ShapeError
from ...framework.tensor import Tensor
from .._rules import B, Meta, P, S, Signature, checked, defop, dispatch, int_arg
from .padding import pad_or_crop
from .sampling import compute_array

__all__ = [
    "conv1d",
    "conv2d",
    "conv3d",
    "conv_transpose1d",
    "conv_transpose2d",
    "conv_transpose3d",
]


def ntuple(value, n: int, op: str, what: str) -> tuple:
    """An int, or a sequence of 1 or n ints, as an n-tuple (PyTorch's `_pair`/`_triple`)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return (value,) * n
    if not isinstance(value, tuple | list):
        raise ArgumentError(
            f"{op}(): argument '{what}' must be an int or a tuple of ints, not "
            f"{type(value).__name__}"
        )
    value = tuple(int_arg(op, what, v) for v in value)
    if len(value) == 1:
        return value * n
    if len(value) != n:
        raise ShapeError(f"{op}: {what} must be an int or a tuple of {n} ints, got {list(value)}")
    return value


# -- sliding windows ------------------------------------------------------------------------
def window_counts(spatial, kernel, stride, dilation) -> tuple:
    """Number of window positions per dim of an (already padded) input."""
    return tuple(
        (n - d * (k - 1) - 1) // s + 1
        for n, k, s, d in zip(spatial, kernel, stride, dilation, strict=True)
    )


def im2col(xp, kernel, stride, dilation, groups: int, batch_last: bool = False) -> np.ndarray:
    """The windows of `xp` (N, C, *spatial, padded) as matrices: (N, G, C/G * K, P) where K is
    the kernel's size and P the number of windows, or (G, C/G * K, N * P) if `batch_last`.
    A strided view reshaped: one copy, or none when the windows tile the input (1x1)."""
    nd = len(kernel)
    counts = window_counts(xp.shape[2:], kernel, stride, dilation)
    if any(c <= 0 for c in counts):
        raise ValueError("the kernel does not fit in the padded input")
    n, c = xp.shape[:2]
    sn, sc, *sp = xp.strides
    windows = as_strided(
        xp,
        (n, groups, c // groups, *kernel, *counts),
        (
            sn,
            sc * (c // groups),
            sc,
            *(t * d for t, d in zip(sp, dilation, strict=True)),
            *(t * s for t, s in zip(sp, stride, strict=True)),
        ),
        writeable=False,
    )
    rows = (c // groups) * math.prod(kernel)
    if batch_last:
        order = (1, 2, *range(3, 3 + nd), 0, *range(3 + nd, 3 + 2 * nd))
        return windows.transpose(order).reshape(groups, rows, n * math.prod(counts))
    return windows.reshape(n, groups, rows, math.prod(counts))


def window_slices(offset, stride, dilation, counts) -> tuple:
    """Where kernel offset `offset` of every window lies in an (N, C, *spatial) input."""
    spatial = (
        slice(o * d, o * d + s * (m - 1) + 1, s)
        for o, d, s, m in zip(offset, dilation, stride, counts, strict=True)
    )
    return (slice(None), slice(None), *spatial)


def col2im(cols, shape, kernel, stride, dilation) -> np.ndarray:
    """The adjoint of `im2col`: add each column back into its window of a zero array of
    `shape` (N, C, *spatial). One vectorized add per kernel offset."""
    n, c, *spatial = shape
    counts = window_counts(spatial, kernel, stride, dilation)
    cols = cols.reshape(n, c, *kernel, *counts)
    out = np.zeros(shape, cols.dtype)
    for offset in np.ndindex(*kernel):
        out[window_slices(offset, stride, dilation, counts)] += cols[(slice(None),) * 2 + offset]
    return out


# -- shapes and errors ----------------------------------------------------------------------
def _name(transposed: bool, nd: int) -> str:
    return f"conv_transpose{nd}d" if transposed else f"conv{nd}d"


def conv_shape(x_shape, w_shape, b_shape, *, stride, padding, dilation, groups, transposed,
               batched=True):  # fmt: skip
    """Output shape of a convolution; raises the user-facing errors of bad operands. For an
    input the user passed unbatched (`batched=False`), `x_shape` has the batch dim of 1 that
    the public function added, and messages show the shape without it."""
    nd = len(stride)
    op = _name(transposed, nd)
    passed = list(x_shape if batched else x_shape[1:])
    if len(x_shape) != nd + 2:
        raise ShapeError(
            f"{op}: expected a {nd + 2}-d input (batch, channels, {nd} spatial), got input of "
            f"shape {list(x_shape)}"
        )
    if len(w_shape) != nd + 2:
        raise ShapeError(f"{op}: expected a {nd + 2}-d weight, got weight of shape {list(w_shape)}")
    if groups < 1 or min(stride) < 1 or min(dilation) < 1:
        raise ShapeError(
            f"{op}: groups, stride and dilation must be positive, got groups={groups}, "
            f"stride={list(stride)}, dilation={list(dilation)}"
        )
    n, c = x_shape[:2]
    spatial, kernel = x_shape[2:], w_shape[2:]
    # conv weights are (out, in / groups, *k), transposed ones (in, out / groups, *k)
    if transposed:
        expected, out_channels = w_shape[0], w_shape[1] * groups
    else:
        expected, out_channels = w_shape[1] * groups, w_shape[0]
    if w_shape[0] % groups:
        raise ShapeError(
            f"{op}: the weight's {w_shape[0]} {'input' if transposed else 'output'} channels "
            f"are not divisible by groups={groups} (weight shape {list(w_shape)})"
        )
    if c != expected:
        raise ShapeError(
            f"{op}: expected input with {expected} channels (weight shape {list(w_shape)}, "
            f"groups={groups}), got input of shape {passed}"
        )
    extent = [d * (k - 1) + 1 for k, d in zip(kernel, dilation, strict=True)]
    if transposed:
        out = [
            (m - 1) * s + e - lo - hi
            for m, s, e, (lo, hi) in zip(spatial, stride, extent, padding, strict=True)
        ]
        if min(out, default=1) < 1:
            raise ShapeError(
                f"{op}: the output size {out} computed from the input of shape {passed}, "
                f"weight {list(w_shape)}, stride {list(stride)} and padding {list(padding)} is "
                "too small"
            )
    else:
        padded = [m + lo + hi for m, (lo, hi) in zip(spatial, padding, strict=True)]
        if any(p < e for p, e in zip(padded, extent, strict=True)):
            raise ShapeError(
                f"{op}: the kernel size {extent} (dilated) is larger than the padded input size "
                f"{padded} (input shape {passed}, padding {list(padding)})"
            )
        out = list(window_counts(padded, kernel, stride, dilation))
    if b_shape is not None and tuple(b_shape) != (out_channels,):
        raise ShapeError(
            f"{op}: expected a bias of shape [{out_channels}], got bias of shape {list(b_shape)}"
        )
    return (n, out_channels, *out)


def _check_dtypes(transposed: bool, nd: int, x, w, b) -> None:
    """Same dtype everywhere (PyTorch does not promote inside a convolution), not bool."""
    if w.dtype != x.dtype or (b is not None and b.dtype != x.dtype):
        given = f"input {x.dtype}, weight {w.dtype}" + ("" if b is None else f", bias {b.dtype}")
        raise DTypeError(f"{_name(transposed, nd)}: expected operands of one dtype, got {given}")
    if x.dtype.name == "bool":
        raise DTypeError(f"{_name(transposed, nd)}: bool tensors are not supported")


def _conv_meta(transposed: bool):
    def meta(x: Meta, w: Meta, b, *, stride, padding, dilation, groups) -> Meta:
        shape = conv_shape(
            x.shape,
            w.shape,
            None if b is None else b.shape,
            stride=stride,
            padding=padding,
            dilation=dilation,
            groups=groups,
            transposed=transposed,
        )
        _check_dtypes(transposed, len(stride), x, w, b)
        return Meta(shape, x.dtype)

    return meta


def _weight_grad_meta(x: Meta, g: Meta, *, kernel_size, stride, padding, dilation, groups):
    w_shape = (g.shape[1], x.shape[1] // groups, *kernel_size)
    geometry = {"stride": stride, "padding": padding, "dilation": dilation, "groups": groups}
    y_shape = conv_shape(x.shape, w_shape, None, transposed=False, **geometry)
    if tuple(g.shape) != y_shape:
        raise ShapeError(
            f"conv_weight_grad: expected grad_output of shape {list(y_shape)} for the input of "
            f"shape {list(x.shape)} and kernel_size {list(kernel_size)}, got {list(g.shape)}"
        )
    _check_dtypes(False, len(stride), x, g, None)
    return Meta(w_shape, x.dtype)


# -- kernels --------------------------------------------------------------------------------
def _finish(y: np.ndarray, b, dtype) -> np.ndarray:
    if b is not None:
        y += compute_array(b).reshape(-1, *(1,) * (y.ndim - 2))
    if dtype == bf16_gemm.BF16 and y.dtype == np.float32:
        return bf16_gemm.rounded(y)
    return y.astype(dtype, copy=False)


def _per_group(w: np.ndarray, groups: int) -> np.ndarray:
    """A weight (C0, C1, *k) as per-group matrices (G, C0 / G, C1 * K)."""
    return w.reshape(groups, w.shape[0] // groups, math.prod(w.shape[1:]))


def _conv_kernel(x, w, b, *, stride, padding, dilation, groups):
    shape = conv_shape(
        x.shape, w.shape, None if b is None else b.shape,
        stride=stride, padding=padding, dilation=dilation, groups=groups, transposed=False,
    )  # fmt: skip
    _check_dtypes(False, len(stride), x, w, b)
    wg = _per_group(w, groups)
    if x.dtype == bf16_gemm.BF16 and bf16_gemm.worth_it(*wg.shape[1:], math.prod(shape[2:])):
        # windows of the bfloat16 input, AVX512-BF16 products with float32 sums (see matmul)
        cols = im2col(pad_or_crop(x, padding), w.shape[2:], stride, dilation, groups)
        y = np.ascontiguousarray(bf16_gemm.bf16_gemm(wg, cols))  # (N, G, O/G, P)
        return _finish(y.reshape(shape), b, x.dtype)
    xc, wc = compute_array(x), compute_array(w)
    cols = im2col(pad_or_crop(xc, padding), w.shape[2:], stride, dilation, groups)
    y = _per_group(wc, groups) @ cols  # (N, G, O/G, P)
    return _finish(y.reshape(shape), b, x.dtype)


def _conv_transpose_kernel(g, w, b, *, stride, padding, dilation, groups):
    shape = conv_shape(
        g.shape, w.shape, None if b is None else b.shape,
        stride=stride, padding=padding, dilation=dilation, groups=groups, transposed=True,
    )  # fmt: skip
    _check_dtypes(True, len(stride), g, w, b)
    gc, wc = compute_array(g), compute_array(w)
    (n, c_in, *counts), kernel = g.shape, w.shape[2:]
    full = tuple(
        (m - 1) * s + d * (k - 1) + 1
        for m, k, s, d in zip(counts, kernel, stride, dilation, strict=True)
    )
    y = np.zeros((n, shape[1], *full), gc.dtype)  # halves accumulate in float32
    gs = gc.reshape(n, groups, c_in // groups, math.prod(counts))
    ws = wc.reshape(groups, c_in // groups, shape[1] // groups, math.prod(kernel))
    # one product per kernel offset, added into its windows: col2im without a column buffer
    # (measured faster than one GEMM into (O * K, P) columns: those do not fit in cache)
    for k, offset in enumerate(np.ndindex(*kernel)):
        part = ws[..., k].transpose(0, 2, 1) @ gs  # (N, G, O/G, P)
        part = part.reshape(n, shape[1], *counts)
        y[window_slices(offset, stride, dilation, counts)] += part
    y = np.ascontiguousarray(pad_or_crop(y, tuple((-lo, -hi) for lo, hi in padding)))
    return _finish(y, b, g.dtype)


def _weight_grad_kernel(x, g, *, kernel_size, stride, padding, dilation, groups):
    xc, gc = compute_array(x), compute_array(g)
    (n, o, *counts), c = g.shape, x.shape[1]
    p = math.prod(counts)
    xp = pad_or_crop(xc, padding)
    if o // groups * (c // groups) * math.prod(kernel_size) <= p:
        # small weights (early layers): a GEMM per sample, summed; the (N, G, O/G, C/G * K)
        # products are no larger than the columns, and short GEMMs beat one long thin one
        cols = im2col(xp, kernel_size, stride, dilation, groups)  # (N, G, C/G * K, P)
        gw = (gc.reshape(n, groups, o // groups, p) @ cols.transpose(0, 1, 3, 2)).sum(0)
    else:
        # (G, O/G, N * P) @ (G, N * P, C/G * K): one GEMM per group, the batch in the sum
        cols = im2col(xp, kernel_size, stride, dilation, groups, batch_last=True)
        gt = gc.reshape(n, groups, o // groups, p).transpose(1, 2, 0, 3)
        gw = gt.reshape(groups, o // groups, n * p) @ cols.transpose(0, 2, 1)
    return gw.reshape(o, c // groups, *kernel_size).astype(x.dtype, copy=False)


# -- gradients ------------------------------------------------------------------------------
def _geometry(ctx) -> dict:
    a = ctx.attrs
    return {k: a[k] for k in ("stride", "padding", "dilation", "groups")}


def conv_input_grad(gy, weight, input_shape, *, stride, padding, dilation, groups):
    """The gradient of conv w.r.t. its input: a transposed convolution whose right padding
    gives back the rows a strided conv skipped (PyTorch's output_padding)."""
    kernel = weight.shape[2:]
    pairs = tuple(
        (lo, hi - (n + lo + hi - d * (k - 1) - 1) % s)
        for n, k, s, d, (lo, hi) in zip(
            input_shape[2:], kernel, stride, dilation, padding, strict=True
        )
    )
    attrs = {"stride": stride, "padding": pairs, "dilation": dilation, "groups": groups}
    return dispatch(_conv_transpose, (gy, weight, None), attrs)


def conv_weight_grad(input, grad_output, kernel_size, *, stride, padding, dilation, groups):
    """The gradient of a convolution of `input` w.r.t. its weight (spatial size
    `kernel_size`) for the output gradient `grad_output`; `padding` as (before, after) pairs."""
    attrs = {"kernel_size": tuple(kernel_size), "stride": stride, "padding": padding}
    attrs.update(dilation=dilation, groups=groups)
    return dispatch(_weight_grad, (input, grad_output), attrs)


def _channel_sum(gy):
    return gy.sum(dim=(0, *range(2, gy.ndim)))


def _conv_grad(ctx, gy):
    need_x, need_w, need_b = ctx.needs_input_grad
    geo = _geometry(ctx)
    gx = conv_input_grad(gy, ctx.weight, ctx.input_shape(0), **geo) if need_x else None
    gw = conv_weight_grad(ctx.input, gy, ctx.input_shape(1)[2:], **geo) if need_w else None
    return gx, gw, _channel_sum(gy) if need_b else None


def _conv_transpose_grad(ctx, gy):
    need_g, need_w, need_b = ctx.needs_input_grad
    geo = _geometry(ctx)
    gg = dispatch(_conv, (gy, ctx.weight, None), geo) if need_g else None
    gw = conv_weight_grad(gy, ctx.input, ctx.input_shape(1)[2:], **geo) if need_w else None
    return gg, gw, _channel_sum(gy) if need_b else None


def _weight_grad_grad(ctx, gw):
    need_x, need_g = ctx.needs_input_grad
    geo = _geometry(ctx)
    gx = conv_input_grad(ctx.grad_output, gw, ctx.input_shape(0), **geo) if need_x else None
    gg = dispatch(_conv, (ctx.input, gw, None), geo) if need_g else None
    return gx, gg


# -- SBP ------------------------------------------------------------------------------------
def _with_bias(b, x_sbp, w_sbp, b_sbp, out) -> Signature:
    return Signature((x_sbp, w_sbp, None if b is None else b_sbp), (out,))


def _conv_sbp(x: Meta, w: Meta, b, *, groups, **_) -> list[Signature]:
    """Batch split; bilinear partial sums; with groups=1, out-channel split (weight dim 0)
    and in-channel split (a partial sum over the input channels)."""
    sigs = [
        _with_bias(b, B, B, B, B),
        _with_bias(b, S(0), B, B, S(0)),
        _with_bias(b, P, B, P, P),
        _with_bias(b, B, P, P, P),
    ]
    if groups == 1:
        sigs += [_with_bias(b, B, S(0), S(0), S(1)), _with_bias(b, S(1), S(1), P, P)]
    return sigs


def _conv_transpose_sbp(x: Meta, w: Meta, b, *, groups, **_) -> list[Signature]:
    """As conv, with the weight's (in, out) channel dims swapped."""
    sigs = [
        _with_bias(b, B, B, B, B),
        _with_bias(b, S(0), B, B, S(0)),
        _with_bias(b, P, B, P, P),
        _with_bias(b, B, P, P, P),
    ]
    if groups == 1:
        sigs += [_with_bias(b, B, S(1), S(0), S(1)), _with_bias(b, S(1), S(0), P, P)]
    return sigs


def _weight_grad_sbp(x: Meta, g: Meta, *, groups, **_) -> list[Signature]:
    """A sum over the batch: batch splits give partial sums; channels split the weight."""
    sigs = [
        Signature((B, B), (B,)),
        Signature((S(0), S(0)), (P,)),
        Signature((P, B), (P,)),
        Signature((B, P), (P,)),
    ]
    if groups == 1:
        sigs += [Signature((B, S(1)), (S(0),)), Signature((S(1), B), (S(1),))]
    return sigs


def _conv_onnx(g, x, w, b, *, stride, padding, dilation, groups):
    pads = [lo for lo, _ in padding] + [hi for _, hi in padding]
    attrs = {"strides": list(stride), "dilations": list(dilation), "group": groups}
    return g.op("Conv", x, w, b, pads=pads, **attrs)


def _conv_transpose_onnx(g, x, w, b, *, stride, padding, dilation, groups):
    # NOTE: a negative crop at the end is PyTorch's output_padding: zeros past the last window
    pads = [lo for lo, _ in padding] + [max(hi, 0) for _, hi in padding]
    extra = [max(-hi, 0) for _, hi in padding]
    attrs = {"strides": list(stride), "dilations": list(dilation), "group": groups}
    return g.op("ConvTranspose", x, w, b, pads=pads, output_padding=extra, **attrs)


_conv = defop(
    "conv",
    inputs=("input", "weight", "bias"),
    meta=_conv_meta(transposed=False),
    sbp=_conv_sbp,
    kernels={"cpu": _conv_kernel},
    grad=_conv_grad,
    saves=("input", "weight"),
    onnx=_conv_onnx,
)
_conv_transpose = defop(
    "conv_transpose",
    inputs=("input", "weight", "bias"),
    meta=_conv_meta(transposed=True),
    sbp=_conv_transpose_sbp,
    kernels={"cpu": _conv_transpose_kernel},
    grad=_conv_transpose_grad,
    saves=("input", "weight"),
    onnx=_conv_transpose_onnx,
)
_weight_grad = defop(
    "conv_weight_grad",
    inputs=("input", "grad_output"),
    meta=_weight_grad_meta,
    sbp=_weight_grad_sbp,
    kernels={"cpu": _weight_grad_kernel},
    grad=_weight_grad_grad,
    saves=("input", "grad_output"),
)


# -- public functions -----------------------------------------------------------------------
def _padding_pairs(op: str, padding, nd: int, weight, dilation, stride) -> tuple:
    if isinstance(padding, str):
        if padding == "valid":
            return ((0, 0),) * nd
        if padding != "same":
            raise ValueError(f"{op}: padding must be 'valid', 'same' or ints, got {padding!r}")
        if any(s != 1 for s in stride):
            raise ValueError(f"{op}: padding='same' is not supported for strided convolutions")
        kernel = tuple(weight.shape[2:])
        if len(kernel) != nd:  # the meta rule reports the weight's shape
            return ((0, 0),) * nd
        totals = [d * (k - 1) for k, d in zip(kernel, dilation, strict=True)]
        return tuple((t // 2, t - t // 2) for t in totals)  # PyTorch puts the odd one after
    amounts = ntuple(padding, nd, op, "padding")
    if min(amounts) < 0:
        raise ShapeError(f"{op}: negative padding {list(amounts)} is not supported")
    return tuple((p, p) for p in amounts)


def _batched(op: str, input, nd: int):
    """(input with a batch dim, whether it had one): unbatched (C, *spatial) is accepted."""
    if input.ndim == nd + 2:
        return input, True
    if input.ndim == nd + 1:
        return input.reshape(1, *input.shape), False
    raise ShapeError(
        f"{op}: expected a {nd + 1}-d (unbatched) or {nd + 2}-d (batched) input, got input of "
        f"shape {list(input.shape)}"
    )


def _run_conv(op_def, input, weight, bias, nd: int, attrs: dict):
    """Dispatch a convolution on `input`, batched or unbatched (C, *spatial)."""
    transposed = op_def is _conv_transpose
    x, batched = _batched(_name(transposed, nd), input, nd)
    try:
        y = dispatch(op_def, (x, weight, bias), attrs)
    except ShapeError:
        if not batched:  # NOTE: the failed check again, to show the shape the user passed
            bias_shape = None if bias is None else bias.shape
            conv_shape(x.shape, weight.shape, bias_shape, transposed=transposed, batched=False,
                       **attrs)  # fmt: skip
        raise
    return y if batched else y.reshape(y.shape[1:])


def _conv_nd(nd, input, weight, bias, stride, padding, dilation, groups):
    op = f"conv{nd}d"
    stride = ntuple(stride, nd, op, "stride")
    dilation = ntuple(dilation, nd, op, "dilation")
    pairs = _padding_pairs(op, padding, nd, weight, dilation, stride)
    attrs = {"stride": stride, "padding": pairs, "dilation": dilation, "groups": int(groups)}
    return _run_conv(_conv, input, weight, bias, nd, attrs)


@checked
def conv1d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride=1,
    padding=0,
    dilation=1,
    groups=1,
):
    """1-d convolution (cross-correlation) of a (N, C_in, L) or (C_in, L) input with a
    (C_out, C_in / groups, k) weight, plus an optional (C_out,) bias. `padding` is an int, a
    1-tuple, 'valid' (none) or 'same' (output length = input length; stride 1 only)."""
    return _conv_nd(1, input, weight, bias, stride, padding, dilation, groups)


@checked
def conv2d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride=1,
    padding=0,
    dilation=1,
    groups=1,
):
    """2-d convolution (cross-correlation) of a (N, C_in, H, W) or (C_in, H, W) input with a
    (C_out, C_in / groups, kH, kW) weight, plus an optional (C_out,) bias. `padding` is an int,
    a pair, 'valid' or 'same'. `F.conv2d(x, w, b, stride=2, padding=1)`"""
    return _conv_nd(2, input, weight, bias, stride, padding, dilation, groups)


@checked
def conv3d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride=1,
    padding=0,
    dilation=1,
    groups=1,
):
    """3-d convolution (cross-correlation) of a (N, C_in, D, H, W) or (C_in, D, H, W) input with
    a (C_out, C_in / groups, kD, kH, kW) weight, plus an optional (C_out,) bias."""
    return _conv_nd(3, input, weight, bias, stride, padding, dilation, groups)


def _conv_transpose_nd(nd, input, weight, bias, stride, padding, output_padding, groups, dilation):
    op = f"conv_transpose{nd}d"
    stride = ntuple(stride, nd, op, "stride")
    dilation = ntuple(dilation, nd, op, "dilation")
    amounts = ntuple(padding, nd, op, "padding")
    extra = ntuple(output_padding, nd, op, "output_padding")
    if min(amounts) < 0 or min(extra) < 0:
        raise ShapeError(
            f"{op}: negative padding {list(amounts)} or output_padding {list(extra)} is not "
            "supported"
        )
    for e, s, d in zip(extra, stride, dilation, strict=True):
        if e >= s and e >= d:
            raise ShapeError(
                f"{op}: output_padding {list(extra)} must be smaller than either the stride "
                f"{list(stride)} or the dilation {list(dilation)}"
            )
    pairs = tuple((p, p - e) for p, e in zip(amounts, extra, strict=True))
    attrs = {"stride": stride, "padding": pairs, "dilation": dilation, "groups": int(groups)}
    return _run_conv(_conv_transpose, input, weight, bias, nd, attrs)


@checked
def conv_transpose1d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride=1,
    padding=0,
    output_padding=0,
    groups=1,
    dilation=1,
):
    """1-d transposed convolution (the gradient of conv1d w.r.t. its input) of a (N, C_in, L)
    or (C_in, L) input with a (C_in, C_out / groups, k) weight. Output length
    (L - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1."""
    return _conv_transpose_nd(
        1, input, weight, bias, stride, padding, output_padding, groups, dilation
    )


@checked
def conv_transpose2d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride=1,
    padding=0,
    output_padding=0,
    groups=1,
    dilation=1,
):
    """2-d transposed convolution ("deconvolution", the gradient of conv2d w.r.t. its input)
    of a (N, C_in, H, W) or (C_in, H, W) input with a (C_in, C_out / groups, kH, kW) weight.
    `F.conv_transpose2d(x, w, stride=2, padding=1, output_padding=1)` doubles H and W."""
    return _conv_transpose_nd(
        2, input, weight, bias, stride, padding, output_padding, groups, dilation
    )


@checked
def conv_transpose3d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride=1,
    padding=0,
    output_padding=0,
    groups=1,
    dilation=1,
):
    """3-d transposed convolution of a (N, C_in, D, H, W) or (C_in, D, H, W) input with a
    (C_in, C_out / groups, kD, kH, kW) weight."""
    return _conv_transpose_nd(
        3, input, weight, bias, stride, padding, output_padding, groups, dilation
    )
