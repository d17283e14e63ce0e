"""Normalization: batch_norm, layer_norm, rms_norm (fused ops), group_norm and instance_norm
(composites of the fused ones).

Like PyTorch's native_* ops, the fused ops also return the statistics they computed (mean and
rstd, or mean and var), so grad rules need not recompute them, batch_norm can update running
statistics, and second-order gradients flow through the saved statistics: each grad rule takes
the cotangents of the statistics too. Half-precision inputs are normalized in float32 (the
statistics are float32), as PyTorch's CPU kernels do.
"""

from __future__ import annotations

import math

import numpy as np

from ...framework import dtype as dtypes
from ...framework.errors import DTypeError, ShapeError, TideflowError
from ...framework.grad_mode import no_grad
from ...framework.node import is_float
from ...framework.tensor import Tensor
from .._onnx_rules import reduce
from .._rules import B, Meta, P, S, Signature, checked, defop, dispatch
from .padding import pad
from .pooling import avg_pool2d, avg_pool3d
from .softmax import compute_dtype, refuse_grad, reject_unless

__all__ = [
    "batch_norm",
    "instance_norm",
    "layer_norm",
    "group_norm",
    "rms_norm",
    "local_response_norm",
]

_HALF = (dtypes.float16, dtypes.bfloat16)


def _stat_dtype(dt: dtypes.DType) -> dtypes.DType:
    return dtypes.float32 if dt in _HALF else dt


def _check_params(op: str, x: Meta, shape: tuple, **params) -> None:
    """Parameters have `shape` and the input's dtype (or float32 for a half input)."""
    if not x.dtype.is_floating_point:
        raise DTypeError(f"{op}: expected a floating point input, got {x.dtype.name}")
    for name, m in params.items():
        if m is None:
            continue
        if tuple(m.shape) != tuple(shape):
            raise ShapeError(
                f"{op}: expected {name} of shape {list(shape)}, got {list(m.shape)} "
                f"(input of shape {list(x.shape)})"
            )
        if m.dtype is not x.dtype and not (x.dtype in _HALF and m.dtype is dtypes.float32):
            raise DTypeError(
                f"{op}: expected {name} of dtype {x.dtype.name} (or float32 for a half input), "
                f"got {m.dtype.name}"
            )


def _accepts(x: np.ndarray, shape: tuple, *params) -> bool:
    """The array-side twin of `_check_params`."""
    return is_float(x.dtype) and all(
        p is None
        or (
            p.shape == tuple(shape)
            and (p.dtype == x.dtype or (x.itemsize < 4 and p.dtype == np.float32))
        )
        for p in params
    )


def _mean(a: np.ndarray, axes: tuple, keepdims: bool = True) -> np.ndarray:
    """Mean that gives nan (not a warning) over empty axes, like PyTorch."""
    n = math.prod(a.shape[i] for i in axes)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.sum(a, axis=axes, keepdims=keepdims) / n


def _affine(xhat: np.ndarray, w, b, shape: tuple) -> np.ndarray:
    if w is not None:
        xhat *= w.reshape(shape)
    if b is not None:
        xhat += b.reshape(shape)
    return xhat


def _split_batch(n_batch: int, n_out: int, params: tuple) -> list[Signature]:
    """Splits of the leading `n_batch` axes (statistics split alike), parameters whole."""
    ps = tuple(None if p is None else B for p in params)
    sigs = [Signature((S(i), *ps), (S(i),) * n_out) for i in range(n_batch)]
    return [*sigs, Signature((B, *ps), (B,) * n_out)]


# -- layer_norm -----------------------------------------------------------------------------
def _layer_norm_meta(x: Meta, w, b, *, normalized_shape, eps) -> tuple:
    k = len(normalized_shape)
    if tuple(x.shape[len(x.shape) - k :]) != tuple(normalized_shape) or len(x.shape) < k:
        raise ShapeError(
            f"layer_norm: normalized_shape={list(normalized_shape)} expects input of shape "
            f"[*, {', '.join(map(str, normalized_shape))}], got {list(x.shape)}"
        )
    _check_params("layer_norm", x, normalized_shape, weight=w, bias=b)
    stat = Meta(x.shape[: len(x.shape) - k] + (1,) * k, _stat_dtype(x.dtype))
    return Meta(x.shape, x.dtype), stat, stat


def _layer_norm_sbp(x: Meta, w, b, *, normalized_shape, eps) -> list[Signature]:
    return _split_batch(len(x.shape) - len(normalized_shape), 3, (w, b))


def _normalized_onnx(g, x: str, axes: list, eps: float, centered: bool) -> tuple:
    """(x - mean) * rstd (x * rstd when not centered) over `axes`, and the mean, the (biased)
    variance and rstd, keeping the reduced dims, from ONNX's reductions."""
    mean = reduce(g, "ReduceMean", x, axes, True) if centered else None
    xc = g.op("Sub", x, mean) if centered else x
    var = reduce(g, "ReduceMean", g.op("Mul", xc, xc), axes, True)
    rstd = g.op("Reciprocal", g.op("Sqrt", g.op("Add", var, g.tensor(eps, x))))
    return g.op("Mul", xc, rstd), mean, var, rstd


def _layer_norm_onnx(g, x, w, b, *, normalized_shape, eps):
    k = len(normalized_shape)
    if g.opset >= 17:
        w = w or g.constant(np.ones(normalized_shape), g.meta(x).dtype)
        return g.op("LayerNormalization", x, w, b, axis=-k, epsilon=eps, outputs=3)
    ndim = len(g.meta(x).shape)
    y, mean, _, rstd = _normalized_onnx(g, x, list(range(ndim - k, ndim)), eps, True)
    if w is not None:
        y = g.op("Mul", y, w)
    if b is not None:
        y = g.op("Add", y, b)
    return y, mean, rstd


def _layer_norm_kernel(x, w, b, *, normalized_shape, eps):
    k = len(normalized_shape)
    reject_unless(
        x.shape[x.ndim - k :] == normalized_shape and _accepts(x, normalized_shape, w, b),
        "layer_norm",
    )
    axes = tuple(range(x.ndim - len(normalized_shape), x.ndim))
    xc = x.astype(compute_dtype(x), copy=False)
    mean = _mean(xc, axes)
    xhat = xc - mean
    rstd = 1.0 / np.sqrt(_mean(np.square(xhat), axes) + eps)
    xhat *= rstd
    return _affine(xhat, w, b, normalized_shape).astype(x.dtype, copy=False), mean, rstd


def _layer_norm_grad(ctx, gy, gmean, grstd):
    need_x, need_w, need_b = ctx.needs_input_grad
    # NOTE: one op (one pass over the rows) instead of a dozen; the statistics' cotangents
    # (zeros unless double backward reaches mean/rstd) fold into its per-row coefficients.
    gx, gw, gb = dispatch(
        _layer_norm_backward,
        (gy, ctx.input, ctx.weight, ctx.out1, ctx.out2, gmean, grstd),
        {"normalized_shape": ctx.normalized_shape},
    )
    return (gx if need_x else None), (gw if need_w else None), (gb if need_b else None)


_layer_norm = defop(
    "layer_norm",
    inputs=("input", "weight", "bias"),
    meta=_layer_norm_meta,
    sbp=_layer_norm_sbp,
    kernels={"cpu": _layer_norm_kernel},
    grad=_layer_norm_grad,
    saves=("input", "weight", "out1", "out2"),
    n_out=3,
    onnx=_layer_norm_onnx,
)


# -- layer_norm_backward ----------------------------------------------------------------------
# PyTorch's native_layer_norm_backward, plus the cotangents of the statistics (grad_mean,
# grad_rstd: None or zeros in a first backward) so double backward through mean/rstd stays
# exact. Per row, with g = grad_out * weight and xhat = (x - mean) * rstd:
#   gx = g * rstd - (rstd * sum(g) - grad_mean) / n - xhat * (rstd * sum(g * xhat)
#        + grad_rstd * rstd^2) / n
# and gw, gb the batch sums of grad_out * xhat and grad_out.
def _layer_norm_backward_meta(gy: Meta, x: Meta, w, mean, rstd, gmean, grstd, *, normalized_shape):
    _layer_norm_meta(x, w, None, normalized_shape=normalized_shape, eps=0.0)
    if tuple(gy.shape) != tuple(x.shape) or gy.dtype is not x.dtype:
        raise ShapeError(
            f"layer_norm_backward: expected grad_out of shape {list(x.shape)} and dtype "
            f"{x.dtype.name}, got {list(gy.shape)} and {gy.dtype.name}"
        )
    k = len(normalized_shape)
    stat = (x.shape[: len(x.shape) - k] + (1,) * k, _stat_dtype(x.dtype))
    for name, m in (("mean", mean), ("rstd", rstd), ("grad_mean", gmean), ("grad_rstd", grstd)):
        if m is not None and (tuple(m.shape), m.dtype) != stat:
            raise ShapeError(
                f"layer_norm_backward: expected {name} of shape {list(stat[0])} and dtype "
                f"{stat[1].name}, got {list(m.shape)} and {m.dtype.name}"
            )
    param = Meta(tuple(normalized_shape), x.dtype if w is None else w.dtype)
    return Meta(x.shape, x.dtype), param, param


def _layer_norm_backward_sbp(gy: Meta, x: Meta, w, mean, rstd, gmean, grstd, *, normalized_shape):
    """The forward's batch splits; the parameter gradients are then partial sums."""
    opt = tuple(None if m is None else S for m in (gmean, grstd))
    wb = None if w is None else B
    sigs = []
    for i in range(len(x.shape) - len(normalized_shape)):
        stats = tuple(None if o is None else S(i) for o in opt)
        sigs.append(Signature((S(i), S(i), wb, S(i), S(i), *stats), (S(i), P, P)))
    stats = tuple(None if o is None else B for o in opt)
    return [*sigs, Signature((B, B, wb, B, B, *stats), (B, B, B))]


def _layer_norm_backward_kernel(gy, x, w, mean, rstd, gmean, grstd, *, normalized_shape):
    k = len(normalized_shape)
    reject_unless(
        gy.shape == x.shape
        and x.shape[x.ndim - k :] == normalized_shape
        and _accepts(x, normalized_shape, w),
        "layer_norm_backward",
    )
    axes = tuple(range(x.ndim - k, x.ndim))
    n = math.prod(normalized_shape)
    ct = compute_dtype(x)
    gyc = gy.astype(ct, copy=False)
    xhat = x.astype(ct, copy=False) - mean
    xhat *= rstd
    g = gyc if w is None else gyc * w
    with np.errstate(invalid="ignore", divide="ignore"):  # empty rows: nan coefficients
        c1 = _mean(g, axes) * rstd
        c2 = _mean(g * xhat, axes) * rstd
        if gmean is not None:
            c1 -= gmean / n
        if grstd is not None:
            c2 += grstd * rstd * rstd / n
    gx = g * rstd
    gx -= c1
    gx -= xhat * c2
    lead = tuple(range(x.ndim - k))
    xhat *= gyc
    pdt = x.dtype if w is None else w.dtype
    gw = np.sum(xhat, axis=lead).astype(pdt, copy=False)
    gb = np.sum(gyc, axis=lead).astype(pdt, copy=False)
    return gx.astype(x.dtype, copy=False), gw, gb


def _layer_norm_backward_grad(ctx, a, bw, bb):
    """The vector-Jacobian product of the formula above (derivation in the comments)."""
    need = ctx.needs_input_grad
    gy, x, w, mean, rstd, grstd = (
        ctx.grad_out, ctx.input, ctx.weight, ctx.mean, ctx.rstd, ctx.grad_rstd,
    )  # fmt: skip
    axes = tuple(range(-len(ctx.normalized_shape), 0))
    n = math.prod(ctx.normalized_shape)
    xc = x - mean
    xhat = xc * rstd
    g = gy if w is None else gy * w
    sa = a.sum(axes, keepdim=True)
    sax = (a * xhat).sum(axes, keepdim=True)
    s1 = g.sum(axes, keepdim=True)
    s2 = (g * xhat).sum(axes, keepdim=True)
    # d<a, gx>/dg, through g itself and through sum(g) and sum(g * xhat)
    h = (a - sa / n - xhat * sax / n) * rstd
    ggy = (h if w is None else h * w) + bw * xhat + bb
    # d/dxhat at fixed rstd: through sum(a * xhat), sum(g * xhat) and gw's grad_out * xhat
    c2 = s2 * rstd if grstd is None else s2 * rstd + grstd * rstd * rstd
    q = bw * gy - (a * c2 + g * (sax * rstd)) / n
    # d/drstd at fixed xhat, then through xhat = (x - mean) * rstd
    d_rstd = (a * g).sum(axes, keepdim=True) - (s1 * sa + s2 * sax) / n
    if grstd is not None:
        d_rstd = d_rstd - sax * grstd * rstd * (2 / n)
    d_rstd = d_rstd + (q * xc).sum(axes, keepdim=True)
    grads = (
        ggy,
        q * rstd,
        None if w is None else h * gy,  # the engine sums it over the batch dims
        -(q.sum(axes, keepdim=True) * rstd),
        d_rstd,
        sa / n,
        -(sax * rstd * rstd) / n,
    )
    return tuple(gr if nd else None for gr, nd in zip(grads, need, strict=True))


_layer_norm_backward = defop(
    "layer_norm_backward",
    inputs=("grad_out", "input", "weight", "mean", "rstd", "grad_mean", "grad_rstd"),
    meta=_layer_norm_backward_meta,
    sbp=_layer_norm_backward_sbp,
    kernels={"cpu": _layer_norm_backward_kernel},
    grad=_layer_norm_backward_grad,
    saves=("grad_out", "input", "weight", "mean", "rstd", "grad_rstd"),
    n_out=3,
)


def layer_norm_backward(
    grad_out, input, weight, mean, rstd, normalized_shape, grad_mean=None, grad_rstd=None
):
    """(grad_input, grad_weight, grad_bias) of `layer_norm` at `input`, given its statistics
    (`mean`, `rstd`: the shape of `input` with the normalized dims 1) and, optionally, their
    cotangents; like PyTorch's `native_layer_norm_backward`, one kernel. Internal (not in
    nn.functional, as in PyTorch): layer_norm's grad rule and the op database call it.

    >>> from tideflow.ops.nn.normalization import layer_norm_backward
    >>> x, w = flow.randn(2, 3), flow.ones(3)
    >>> m = x.mean(-1, keepdim=True)
    >>> r = ((x - m) ** 2).mean(-1, keepdim=True).add(1e-5).rsqrt()
    >>> gx, gw, gb = layer_norm_backward(flow.ones(2, 3), x, w, m, r, (3,))
    """
    attrs = {"normalized_shape": _shape_arg(normalized_shape)}
    return dispatch(
        _layer_norm_backward, (grad_out, input, weight, mean, rstd, grad_mean, grad_rstd), attrs
    )


def _shape_arg(normalized_shape) -> tuple:
    if isinstance(normalized_shape, int):
        return (normalized_shape,)
    return tuple(int(d) for d in normalized_shape)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-05):
    """Normalize over the trailing `normalized_shape` dims to zero mean and unit variance
    (biased), then scale by `weight` and shift by `bias` (both of `normalized_shape`).

    >>> F.layer_norm(flow.tensor([[1.0, 2.0, 3.0]]), (3,))
    """
    attrs = {"normalized_shape": _shape_arg(normalized_shape), "eps": eps}
    return dispatch(_layer_norm, (input, weight, bias), attrs)[0]


# -- rms_norm -------------------------------------------------------------------------------
def _rms_norm_meta(x: Meta, w, *, normalized_shape, eps) -> tuple:
    k = len(normalized_shape)
    if tuple(x.shape[len(x.shape) - k :]) != tuple(normalized_shape) or len(x.shape) < k:
        raise ShapeError(
            f"rms_norm: normalized_shape={list(normalized_shape)} expects input of shape "
            f"[*, {', '.join(map(str, normalized_shape))}], got {list(x.shape)}"
        )
    _check_params("rms_norm", x, normalized_shape, weight=w)
    stat = Meta(x.shape[: len(x.shape) - k] + (1,) * k, _stat_dtype(x.dtype))
    return Meta(x.shape, x.dtype), stat


def _rms_norm_sbp(x: Meta, w, *, normalized_shape, eps) -> list[Signature]:
    return _split_batch(len(x.shape) - len(normalized_shape), 2, (w,))


def _rms_eps(x: np.ndarray, eps):
    # NOTE: PyTorch's default is the epsilon of the computation type (float32 for halves).
    return np.finfo(compute_dtype(x)).eps if eps is None else eps


def _rms_norm_onnx(g, x, w, *, normalized_shape, eps):
    ndim = len(g.meta(x).shape)
    if eps is None:
        eps = float(np.finfo(compute_dtype(np.empty(0, g.meta(x).dtype.np))).eps)
    axes = list(range(ndim - len(normalized_shape), ndim))
    y, _, _, rstd = _normalized_onnx(g, x, axes, eps, False)
    return (y if w is None else g.op("Mul", y, w)), rstd


def _rms_norm_kernel(x, w, *, normalized_shape, eps):
    k = len(normalized_shape)
    reject_unless(
        x.shape[x.ndim - k :] == normalized_shape and _accepts(x, normalized_shape, w), "rms_norm"
    )
    axes = tuple(range(x.ndim - len(normalized_shape), x.ndim))
    xc = x.astype(compute_dtype(x), copy=False)
    rstd = 1.0 / np.sqrt(_mean(np.square(xc), axes) + _rms_eps(x, eps))
    y = xc * rstd
    return _affine(y, w, None, normalized_shape).astype(x.dtype, copy=False), rstd


def _rms_norm_grad(ctx, gy, grstd):
    need_x, need_w = ctx.needs_input_grad
    axes = tuple(range(-len(ctx.normalized_shape), 0))
    n = math.prod(ctx.normalized_shape)
    w, rstd = ctx.weight, ctx.out1
    xhat = ctx.input * rstd
    gx = None
    if need_x:
        g = gy if w is None else gy * w
        # d rstd / dx = -rstd^2 * xhat / n carries the cotangent of rstd (double backward).
        coef = ((g * xhat).sum(axes, keepdim=True) * rstd + grstd * rstd * rstd) / n
        gx = g * rstd - xhat * coef
    return gx, (gy * xhat if need_w else None)


_rms_norm = defop(
    "rms_norm",
    inputs=("input", "weight"),
    meta=_rms_norm_meta,
    sbp=_rms_norm_sbp,
    kernels={"cpu": _rms_norm_kernel},
    grad=_rms_norm_grad,
    saves=("input", "weight", "out1"),
    n_out=2,
    onnx=_rms_norm_onnx,
)


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """Divide by the root mean square over the trailing `normalized_shape` dims (no
    centering), then scale by `weight`. `eps=None` uses the dtype's machine epsilon.

    >>> F.rms_norm(flow.tensor([[1.0, 2.0, 3.0]]), (3,))
    """
    attrs = {"normalized_shape": _shape_arg(normalized_shape), "eps": eps}
    return dispatch(_rms_norm, (input, weight), attrs)[0]


# -- batch_norm -----------------------------------------------------------------------------
def _channel_shape(ndim: int, c: int) -> tuple:
    return (1, c) + (1,) * (ndim - 2)


def _batch_norm_meta(x: Meta, w, b, rm, rv, *, training, eps) -> tuple:
    if len(x.shape) < 2:
        raise ShapeError(
            f"batch_norm: expected input of shape [N, C, *] (at least 2-d), got {list(x.shape)}"
        )
    c = x.shape[1]
    _check_params("batch_norm", x, (c,), weight=w, bias=b, running_mean=rm, running_var=rv)
    stat = Meta((c,), _stat_dtype(x.dtype))
    return Meta(x.shape, x.dtype), stat, stat


def _batch_norm_sbp(x: Meta, *params, training, eps) -> list[Signature]:
    """Channels may be split (statistics are per channel); in evaluation the statistics are
    given, so any axis may be split (parameters and statistics whole)."""
    split_c = tuple(None if p is None else S(0) for p in params)
    sigs = [Signature((S(1), *split_c), (S(1), S(0), S(0)))]
    whole = tuple(None if p is None else B for p in params)
    if not training:
        sigs += [Signature((S(i), *whole), (S(i), B, B)) for i in range(len(x.shape)) if i != 1]
    return [*sigs, Signature((B, *whole), (B, B, B))]


def _batch_norm_kernel(x, w, b, rm, rv, *, training, eps):
    reject_unless(x.ndim >= 2 and _accepts(x, x.shape[1:2], w, b, rm, rv), "batch_norm")
    shape = _channel_shape(x.ndim, x.shape[1])
    axes = (0, *range(2, x.ndim))
    ct = compute_dtype(x)
    xc = x.astype(ct, copy=False)
    if training:
        mean = _mean(xc, axes, keepdims=False)
        xhat = xc - mean.reshape(shape)
        var = _mean(np.square(xhat), axes, keepdims=False)
    else:
        mean, var = rm.astype(ct), rv.astype(ct)
        xhat = xc - mean.reshape(shape)
    xhat *= (1.0 / np.sqrt(var + eps)).reshape(shape)
    return _affine(xhat, w, b, shape).astype(x.dtype, copy=False), mean, var


def _batch_norm_onnx(g, x, w, b, rm, rv, *, training, eps):
    ndim = len(g.meta(x).shape)
    channels = g.meta(x).shape[1]
    dtype = g.meta(x).dtype
    if not training and ndim > 2:
        w = w or g.constant(np.ones(channels), dtype)
        b = b or g.constant(np.zeros(channels), dtype)
        return g.op("BatchNormalization", x, w, b, rm, rv, epsilon=eps), rm, rv
    shape = g.ints(_channel_shape(ndim, channels))
    axes = [0, *range(2, ndim)]
    if training:
        y, mean, var, _ = _normalized_onnx(g, x, axes, eps, True)
        mean, var = (g.op("Reshape", v, g.ints([channels])) for v in (mean, var))
    else:  # (N, C): BatchNormalization wants spatial dims
        mean, var = rm, rv
        rstd = g.op("Reciprocal", g.op("Sqrt", g.op("Add", rv, g.tensor(eps, x))))
        y = g.op("Mul", g.op("Sub", x, g.op("Reshape", rm, shape)), g.op("Reshape", rstd, shape))
    if w is not None:
        y = g.op("Mul", y, g.op("Reshape", w, shape))
    if b is not None:
        y = g.op("Add", y, g.op("Reshape", b, shape))
    return y, mean, var


def _batch_norm_grad(ctx, gy, gmean, gvar):
    need_x, need_w, need_b = ctx.needs_input_grad[:3]
    x, w = ctx.input, ctx.weight
    shape = _channel_shape(len(x.shape), x.shape[1])
    axes = (0, *range(2, len(x.shape)))
    inv = (ctx.out2 + ctx.eps).rsqrt().reshape(shape)
    xhat = (x - ctx.out1.reshape(shape)) * inv
    gx = None
    if need_x:
        g = gy if w is None else gy * w.reshape(shape)
        if ctx.training:
            n = math.prod(x.shape) // x.shape[1]
            # The batch statistics depend on x: d mean / dx = 1 / n, d var / dx = 2 (x - mean)
            # / n. Their own cotangents (nonzero in double backward) fold into the
            # per-channel coefficients.
            gv = gvar.reshape(shape)
            coef = (inv * (g * xhat).sum(axes, keepdim=True) - 2 * gv / inv) / n
            shift = (inv * g.sum(axes, keepdim=True) - gmean.reshape(shape)) / n
            gx = g * inv - shift - xhat * coef
        else:  # the running statistics are constants
            gx = g * inv
    gw = (gy * xhat).sum(axes) if need_w else None
    gb = gy.sum(axes) if need_b else None
    return gx, gw, gb, None, None


_batch_norm = defop(
    "batch_norm",
    inputs=("input", "weight", "bias", "running_mean", "running_var"),
    meta=_batch_norm_meta,
    sbp=_batch_norm_sbp,
    kernels={"cpu": _batch_norm_kernel},
    grad=_batch_norm_grad,
    saves=("input", "weight", "out1", "out2"),
    n_out=3,
    onnx=_batch_norm_onnx,
)


def _check_running_stats(op: str, input, running_mean, running_var) -> None:
    """In training the running statistics are updated in place after the kernel ran: check
    them first, so that stats that do not fit fail with nothing written."""
    if (running_mean is None) != (running_var is None):
        raise ValueError(
            f"{op}: running_mean and running_var must either both be None or neither be None"
        )
    if running_mean is not None and input.ndim >= 2:
        stats = {"running_mean": running_mean, "running_var": running_var}
        _check_params(op, input, (input.shape[1],), **stats)


def _update_running(running, stat, momentum: float) -> None:
    if running is not None:
        running.mul_(1 - momentum).add_(stat, alpha=momentum)


def batch_norm(
    input,
    running_mean,
    running_var,
    weight=None,
    bias=None,
    training=False,
    momentum=0.1,
    eps=1e-05,
):
    """Normalize each channel (dim 1) over the batch and spatial dims, then scale and shift.
    In training the batch statistics are used and the running statistics are updated in
    place (`running = (1 - momentum) * running + momentum * batch`, with the unbiased
    variance); in evaluation the running statistics are used.

    >>> x = flow.randn(4, 3)
    >>> F.batch_norm(x, flow.zeros(3), flow.ones(3), training=True)
    """
    refuse_grad("batch_norm", running_mean=running_mean, running_var=running_var)
    if training:
        _check_running_stats("batch_norm", input, running_mean, running_var)
        n = math.prod(input.shape) // input.shape[1] if input.ndim >= 2 else 0
        if n == 1:
            raise ValueError(
                "batch_norm: expected more than 1 value per channel when training, got input "
                f"of shape {list(input.shape)}"
            )
        stats = (None, None)
    elif running_mean is None or running_var is None:
        raise TideflowError(
            "batch_norm: running_mean and running_var must be given in evaluation mode "
            "(training=False)"
        )
    else:
        stats = (running_mean, running_var)
    attrs = {"training": bool(training), "eps": eps}
    out, mean, var = dispatch(_batch_norm, (input, weight, bias, *stats), attrs)
    if training:
        with no_grad():
            _update_running(running_mean, mean, momentum)
            _update_running(running_var, var * (n / (n - 1)), momentum)
    return out


# -- composites -----------------------------------------------------------------------------
def _channel_affine(y, weight, bias, input):
    """`y * weight + bias` with per-channel (dim 1) parameters, in the input's dtype."""
    shape = (input.shape[1],) + (1,) * (input.ndim - 2)
    if weight is not None:
        y = y * weight.reshape(shape)
    if bias is not None:
        y = y + bias.reshape(shape)
    return y if y.dtype is input.dtype else y.to(input.dtype)


@checked
def group_norm(
    input: Tensor, num_groups, weight: Tensor | None = None, bias: Tensor | None = None, eps=1e-05
):
    """Split the channels (dim 1) into `num_groups` groups and normalize each group of each
    sample over its channels and spatial dims; then scale and shift per channel.

    >>> F.group_norm(flow.randn(2, 4, 3), 2, flow.ones(4), flow.zeros(4)).shape
    tideflow.Size([2, 4, 3])
    """
    if input.ndim < 2 or input.shape[1] % num_groups:
        raise ShapeError(
            f"group_norm: expected the number of channels of the input (dim 1) to be "
            f"divisible by num_groups={num_groups}, got input of shape {list(input.shape)}"
        )
    # NOTE: half inputs are normalized and scaled in float32 and rounded once, like PyTorch's
    # fused kernel.
    x = input.float() if input.dtype in _HALF else input
    n = x.shape[0]
    group = math.prod(x.shape[1:]) // num_groups
    attrs = {"normalized_shape": (group,), "eps": eps}
    y = dispatch(_layer_norm, (x.reshape(n, num_groups, group), None, None), attrs)[0]
    return _channel_affine(y.reshape(x.shape), weight, bias, input)


def instance_norm(
    input,
    running_mean=None,
    running_var=None,
    weight=None,
    bias=None,
    use_input_stats=True,
    momentum=0.1,
    eps=1e-05,
):
    """Normalize each channel of each sample over its spatial dims, then scale and shift per
    channel. With running statistics and `use_input_stats`, they are updated in place with
    the batch average of the per-sample statistics; `use_input_stats=False` normalizes with
    them instead.

    >>> F.instance_norm(flow.randn(2, 3, 5)).shape
    tideflow.Size([2, 3, 5])
    """
    if not use_input_stats:
        return batch_norm(input, running_mean, running_var, weight, bias, False, momentum, eps)
    refuse_grad("instance_norm", running_mean=running_mean, running_var=running_var)
    if input.ndim < 3 or math.prod(input.shape[2:]) == 1:
        raise ValueError(
            "instance_norm: expected more than 1 spatial element when training, got input "
            f"of shape {list(input.shape)}"
        )
    _check_running_stats("instance_norm", input, running_mean, running_var)
    n, c = input.shape[:2]
    spatial = math.prod(input.shape[2:])
    # One "batch norm channel" per (sample, channel) pair.
    x = input.reshape(1, n * c, spatial)
    y, mean, var = dispatch(
        _batch_norm, (x, None, None, None, None), {"training": True, "eps": eps}
    )
    if running_mean is not None:
        with no_grad():
            _update_running(running_mean, mean.reshape(n, c).sum(0) / n, momentum)
            unbiased = var.reshape(n, c).sum(0) * (spatial / (spatial - 1) / n)
            _update_running(running_var, unbiased, momentum)
    return _channel_affine(y.reshape(input.shape), weight, bias, input)


# -- local response normalization ---------------------------------------------------------------
@checked
def local_response_norm(input: Tensor, size, alpha=1e-4, beta=0.75, k=1.0):
    """Each value divided by `(k + alpha * mean(x**2)) ** beta`, the mean over a window of
    `size` neighbouring channels (zero-padded at the ends), as in AlexNet. Inputs are (N, C,
    *) with at least one spatial dim.

    >>> F.local_response_norm(flow.ones(1, 3, 2), size=2).shape
    tideflow.Size([1, 3, 2])
    """
    if input.ndim < 3:
        raise ValueError(
            "local_response_norm: expected 3D or higher dimensionality input (got "
            f"{input.ndim} dimensions)"
        )
    if input.numel() == 0:
        return input
    before, after = size // 2, (size - 1) // 2
    square = input * input
    if input.ndim == 3:
        window = pad(square.unsqueeze(1), (0, 0, before, after))
        mean = avg_pool2d(window, (size, 1), stride=1).squeeze(1)
    else:
        n, c, first = input.shape[:3]
        window = pad(square.reshape(n, 1, c, first, -1), (0, 0, 0, 0, before, after))
        mean = avg_pool3d(window, (size, 1, 1), stride=1).squeeze(1).reshape(input.shape)
    return input / (mean * alpha + k) ** beta
