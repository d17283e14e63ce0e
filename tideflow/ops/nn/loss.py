"""Loss functions.

nll_loss (with its backward as an op of its own, so double backward works) and the two binary
cross entropies are fused ops; cross_entropy is log_softmax + nll_loss like PyTorch's, and the
simple elementwise losses are composites of existing ops.
"""

from __future__ import annotations

import math
import warnings
from numbers import Number

import numpy as np

from ...framework import dtype as dtypes
from ...framework.errors import DTypeError, ShapeError, TensorIndexError, TideflowError
from ...framework.node import is_float
from ...framework.tensor import Tensor
from .. import activation, binary, creation
from .._onnx_rules import reduce
from .._rules import (
    B,
    Meta,
    P,
    S,
    Signature,
    checked,
    defop,
    dispatch,
    elementwise_meta,
    elementwise_sbp,
    halves_in_float32,
    tensor_arg,
)
from .distance import pairwise_distance
from .softmax import compute_dtype, log_softmax, refuse_grad, reject_unless

__all__ = [
    "nll_loss",
    "cross_entropy",
    "mse_loss",
    "l1_loss",
    "smooth_l1_loss",
    "huber_loss",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "kl_div",
    "poisson_nll_loss",
    "gaussian_nll_loss",
    "soft_margin_loss",
    "margin_ranking_loss",
    "cosine_embedding_loss",
    "triplet_margin_loss",
]

_REDUCTIONS = ("none", "mean", "sum")


# -- reductions -----------------------------------------------------------------------------
def _reduction(size_average, reduce, reduction: str, allowed=_REDUCTIONS) -> str:
    """The reduction, honouring PyTorch's deprecated size_average/reduce arguments."""
    if size_average is not None or reduce is not None:
        size_average = True if size_average is None else size_average
        reduce = True if reduce is None else reduce
        reduction = ("mean" if size_average else "sum") if reduce else "none"
        warnings.warn(
            "size_average and reduce args will be deprecated, please use "
            f"reduction='{reduction}' instead.",
            stacklevel=3,
        )
    if reduction not in allowed:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return reduction


def _reduce(loss, reduction: str):
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


def _warn_broadcast(op: str, input, target) -> None:
    tensor_arg(op, "input", 1, input)
    tensor_arg(op, "target", 2, target)
    if tuple(target.shape) != tuple(input.shape):
        warnings.warn(
            f"Using a target size ({target.shape}) that is different to the input size "
            f"({input.shape}). This will likely lead to incorrect results due to "
            "broadcasting. Please ensure they have the same size.",
            stacklevel=3,
        )


# -- nll_loss -------------------------------------------------------------------------------
def _class_target_shape(x_shape: tuple) -> tuple:
    """(C,) -> (); (N, C) -> (N,); (N, C, d1, ...) -> (N, d1, ...)."""
    return x_shape[:1] + x_shape[2:] if len(x_shape) >= 2 else ()


def check_class_target(op: str, x, target, weight) -> None:
    """Validate a class-index target (and class weights) against an input of shape (C,),
    (N, C) or (N, C, d1, ...)."""
    x_shape, t_shape = tuple(x.shape), tuple(target.shape)
    if len(x_shape) == 0:
        raise ShapeError(f"{op}: expected input of shape [C], [N, C] or [N, C, d1, ...], got []")
    if target.dtype not in (dtypes.int64, dtypes.uint8):
        raise DTypeError(
            f"{op}: expected a target of class indices of dtype int64 (or uint8), or class "
            f"probabilities of the input's floating dtype, got {target.dtype.name}"
        )
    want = _class_target_shape(x_shape)
    if t_shape != want:
        n = "[N]" if len(x_shape) == 2 else "[]" if len(x_shape) == 1 else "[N, d1, ...]"
        raise ShapeError(
            f"{op}: expected target of shape {n} = {list(want)} for input of shape "
            f"{list(x_shape)}, got {list(t_shape)}"
        )
    c = x_shape[0 if len(x_shape) == 1 else 1]
    if weight is not None and tuple(weight.shape) != (c,):
        raise ShapeError(
            f"{op}: expected weight of shape [{c}] (one per class), got {list(weight.shape)}"
        )
    if weight is not None and weight.dtype is not x.dtype:
        raise DTypeError(f"{op}: expected weight of dtype {x.dtype.name}, got {weight.dtype.name}")


def _nll_loss_meta(x: Meta, t: Meta, w, *, reduction, ignore_index) -> tuple:
    check_class_target("nll_loss", x, t, w)
    shape = tuple(t.shape) if reduction == "none" else ()
    return Meta(shape, x.dtype), Meta((), x.dtype)


def _class_axis(target_ndim: int) -> int:
    return 0 if target_ndim == 0 else 1


def _target_weights(t: np.ndarray, w, ignore_index: int, num_classes: int, dtype):
    """Per-target class index (ignored ones made safe) and weight (0 where ignored)."""
    valid = t != ignore_index
    safe = np.where(valid, t, 0)
    bad = safe[(safe < 0) | (safe >= num_classes)]
    if bad.size:
        raise TensorIndexError(
            f"nll_loss: target {bad.flat[0]} is out of bounds for {num_classes} classes"
        )
    wt = valid.astype(dtype) if w is None else np.where(valid, w[safe].astype(dtype), 0)
    return safe, wt


def _class_target_ok(x: np.ndarray, t: np.ndarray, w) -> bool:
    """The array-side twin of `check_class_target`."""
    if x.ndim == 0 or t.dtype not in (np.int64, np.uint8):
        return False
    c = x.shape[_class_axis(t.ndim)]
    return t.shape == _class_target_shape(x.shape) and (
        w is None or (w.shape == (c,) and w.dtype == x.dtype)
    )


def _nll_loss_kernel(x, t, w, *, reduction, ignore_index):
    reject_unless(_class_target_ok(x, t, w), "nll_loss")
    axis = _class_axis(t.ndim)
    ct = compute_dtype(x)
    safe, wt = _target_weights(t, w, ignore_index, x.shape[axis], ct)
    picked = np.take_along_axis(x, np.expand_dims(safe, axis), axis).squeeze(axis)
    loss = -(picked.astype(ct) * wt)
    total = np.sum(wt)
    if reduction == "sum":
        loss = np.sum(loss)
    elif reduction == "mean":
        with np.errstate(invalid="ignore", divide="ignore"):  # all ignored: nan, as in torch
            loss = np.sum(loss) / total
    return np.asarray(loss).astype(x.dtype), np.asarray(total).astype(x.dtype)


def _nll_loss_sbp(x: Meta, t: Meta, w, *, reduction, ignore_index) -> list[Signature]:
    """Samples (and spatial positions) are independent: split them, the partial sums of a
    'sum' reduction and of the total weight add up. A mean is not a sum of local means."""
    wb = None if w is None else B
    sigs = [Signature((B, B, wb), (B, B))]
    if reduction == "mean" or len(x.shape) < 2:
        return sigs
    for ax in range(len(t.shape)):
        x_ax = 0 if ax == 0 else ax + 1
        out = S(ax) if reduction == "none" else P
        sigs.append(Signature((S(x_ax), S(ax), wb), (out, P)))
    return sigs


def _nll_loss_grad(ctx, gy, _gtotal):
    gx = None
    if ctx.needs_input_grad[0]:
        attrs = {
            "reduction": ctx.reduction,
            "ignore_index": ctx.ignore_index,
            "num_classes": ctx.input_shape(0)[_class_axis(len(ctx.input_shape(1)))],
        }
        gx = dispatch(_nll_loss_backward, (gy, ctx.target, ctx.weight, ctx.out1), attrs)
    return gx, None, None


def _nll_loss_onnx(g, x, t, w, *, reduction, ignore_index):
    """The input's entry at each target's class, weighted: from GatherElements (OpenVINO
    has no NegativeLogLikelihoodLoss)."""
    axis = _class_axis(len(g.meta(t).shape))
    t = g.cast(t, dtypes.int64)
    kept = g.op("Not", g.op("Equal", t, g.tensor(ignore_index, t)))
    safe = g.op("Where", kept, t, g.tensor(0, t))  # ignored targets read class 0, weigh 0
    at = g.op("Unsqueeze", safe, g.ints([axis]))
    picked = g.op("Squeeze", g.op("GatherElements", x, at, axis=axis), g.ints([axis]))
    weights = g.cast(kept, g.out[1].dtype)
    if w is not None:  # the weight of each kept target's class
        weights = g.op("Mul", weights, g.op("Gather", w, safe, axis=0))
    loss = g.op("Neg", g.op("Mul", picked, weights))
    total = reduce(g, "ReduceSum", weights, None, False)
    if reduction == "sum":
        loss = reduce(g, "ReduceSum", loss, None, False)
    elif reduction == "mean":
        loss = g.op("Div", reduce(g, "ReduceSum", loss, None, False), total)
    return loss, total


_nll_loss = defop(
    "nll_loss",
    inputs=("input", "target", "weight"),
    meta=_nll_loss_meta,
    sbp=_nll_loss_sbp,
    kernels={"cpu": _nll_loss_kernel},
    grad=_nll_loss_grad,
    saves=("target", "weight", "out1"),
    n_out=2,
    onnx=_nll_loss_onnx,
)


# The input gradient of nll_loss: -weight[target] * gy (/ total weight for 'mean') at each
# target's class, 0 elsewhere. Linear in gy; its own gradient is nll_loss again.
def _nll_backward_shape(t_shape: tuple, num_classes: int) -> tuple:
    axis = _class_axis(len(t_shape))
    return (*t_shape[:axis], num_classes, *t_shape[axis:])


def _nll_backward_meta(gy: Meta, t: Meta, w, total: Meta, *, reduction, ignore_index, num_classes):
    return Meta(_nll_backward_shape(tuple(t.shape), num_classes), gy.dtype)


def _nll_backward_kernel(gy, t, w, total, *, reduction, ignore_index, num_classes):
    axis = _class_axis(t.ndim)
    ct = compute_dtype(gy)
    safe, wt = _target_weights(t, w, ignore_index, num_classes, ct)
    coef = -wt * gy.astype(ct)
    if reduction == "mean":
        with np.errstate(invalid="ignore", divide="ignore"):
            coef /= total.astype(ct)
    gx = np.zeros(_nll_backward_shape(t.shape, num_classes), ct)
    np.put_along_axis(gx, np.expand_dims(safe, axis), np.expand_dims(coef, axis), axis)
    return gx.astype(gy.dtype, copy=False)


def _nll_backward_sbp(gy: Meta, t: Meta, w, total, **attrs) -> list[Signature]:
    """Rows split with their targets (a reduced gy, like the total weight, stays whole); the
    gradient is linear in gy."""
    wb = None if w is None else B
    sigs = [Signature((B, B, wb, B), (B,)), Signature((P, B, wb, B), (P,))]
    for ax in range(len(t.shape)):
        g = S(ax) if attrs["reduction"] == "none" else B
        sigs.append(Signature((g, S(ax), wb, B), (S(0 if ax == 0 else ax + 1),)))
    return sigs


def _nll_backward_grad(ctx, ggx):
    gy = None
    if ctx.needs_input_grad[0]:
        attrs = {"reduction": ctx.reduction, "ignore_index": ctx.ignore_index}
        gy = dispatch(_nll_loss, (ggx, ctx.target, ctx.weight), attrs)[0]
    return gy, None, None, None


_nll_loss_backward = defop(
    "nll_loss_backward",
    inputs=("grad_output", "target", "weight", "total_weight"),
    meta=_nll_backward_meta,
    sbp=_nll_backward_sbp,
    kernels={"cpu": _nll_backward_kernel},
    grad=_nll_backward_grad,
    saves=("target", "weight"),
)


def _nll(input, target, weight, ignore_index: int, reduction: str):
    """(loss, total weight of the non-ignored targets). On global tensors a 'mean' is the
    'sum' divided by the total weight: the sums of split samples add up over the ranks (P)
    where their means would not, so the samples stay split (only the total is reduced)."""
    attrs = {"reduction": reduction, "ignore_index": int(ignore_index)}
    if reduction == "mean" and input.is_global:
        loss, total = dispatch(_nll_loss, (input, target, weight), {**attrs, "reduction": "sum"})
        return loss / total, total
    return dispatch(_nll_loss, (input, target, weight), attrs)


@checked
def nll_loss(
    input: Tensor,
    target,
    weight=None,
    size_average=None,
    ignore_index=-100,
    reduce=None,
    reduction="mean",
):
    """Negative log likelihood: `-weight[t] * input[n, t]` for class-index targets `t`, with
    `input` of log-probabilities of shape (C,), (N, C) or (N, C, d1, ...). Targets equal to
    `ignore_index` contribute nothing; 'mean' divides by the total weight of the others.

    >>> F.nll_loss(F.log_softmax(flow.randn(3, 5), 1), flow.tensor([1, 0, 4]))
    """
    reduction = _reduction(size_average, reduce, reduction)
    refuse_grad("nll_loss", weight=weight)
    return _nll(input, target, weight, ignore_index, reduction)[0]


# -- cross_entropy --------------------------------------------------------------------------
def _class_weight(weight, ndim: int):
    """Class weights shaped to broadcast along the class dim of an input with `ndim` dims."""
    return weight if ndim == 1 else weight.reshape((weight.shape[0],) + (1,) * (ndim - 2))


def _cross_entropy_probs(input, logp, target, weight, reduction: str, label_smoothing: float):
    """Cross entropy against class probabilities (a target of the input's shape)."""
    class_dim = 0 if input.ndim == 1 else 1
    n_classes = input.shape[class_dim]
    if label_smoothing > 0:
        target = target * (1 - label_smoothing) + label_smoothing / n_classes
    prod = logp * target
    if weight is not None:
        prod = prod * _class_weight(weight, input.ndim)
    if reduction == "none":
        return -prod.sum(class_dim)
    total = -prod.sum()
    if reduction == "sum":
        return total
    n = input.numel() // n_classes if n_classes else 0
    return total / n if n else total * math.nan


def cross_entropy(
    input,
    target,
    weight=None,
    size_average=None,
    ignore_index=-100,
    reduce=None,
    reduction="mean",
    label_smoothing=0.0,
):
    """Cross entropy between the logits `input` (shape (C,), (N, C) or (N, C, d1, ...)) and
    `target`: class indices (int64, shape (), (N,) or (N, d1, ...)) or class probabilities
    (the input's shape). Computed as nll_loss(log_softmax(input)); `label_smoothing` mixes
    the target with the uniform distribution.

    >>> F.cross_entropy(flow.randn(3, 5), flow.tensor([1, 0, 4]))
    """
    tensor_arg("cross_entropy", "input", 1, input)
    tensor_arg("cross_entropy", "target", 2, target)
    reduction = _reduction(size_average, reduce, reduction)
    refuse_grad("cross_entropy", weight=weight)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(
            f"cross_entropy: label_smoothing must be between 0.0 and 1.0, got {label_smoothing}"
        )
    if input.ndim == 0:
        raise ShapeError("cross_entropy: expected input of shape [C], [N, C] or [N, C, d1, ...]")
    class_dim = 0 if input.ndim == 1 else 1
    if target.dtype.is_floating_point:
        if tuple(target.shape) != tuple(input.shape):
            raise ShapeError(
                f"cross_entropy: expected a target of class probabilities of the input's shape "
                f"{list(input.shape)}, got {list(target.shape)}"
            )
        if ignore_index != -100:
            raise TideflowError(
                "cross_entropy: ignore_index is not supported for class-probability targets"
            )
        logp = log_softmax(input, class_dim)
        return _cross_entropy_probs(input, logp, target, weight, reduction, label_smoothing)
    check_class_target("cross_entropy", input, target, weight)
    logp = log_softmax(input, class_dim)
    loss, total = _nll(logp, target, weight, ignore_index, reduction)
    if label_smoothing == 0:
        return loss
    # PyTorch's smoothing term: the (weighted) mean of -log p over all classes, 0 at ignored
    # targets, reduced like the nll part ('mean' divides by the same total weight).
    prod = logp if weight is None else logp * _class_weight(weight, input.ndim)
    smooth = binary.where(target == ignore_index, 0.0, -prod.sum(class_dim))
    if reduction == "sum":
        smooth = smooth.sum()
    elif reduction == "mean":
        smooth = smooth.sum() / total
    n_classes = input.shape[class_dim]
    return loss * (1 - label_smoothing) + smooth * (label_smoothing / n_classes)


# -- binary cross entropies -----------------------------------------------------------------
def _check_float_pair(op: str, x: Meta, t: Meta, name: str = "target") -> None:
    if not x.dtype.is_floating_point or t.dtype is not x.dtype:
        raise DTypeError(
            f"{op}: expected input and {name} of the same floating dtype, got {x.dtype.name} and "
            f"{t.dtype.name}"
        )


def _bce_meta(x: Meta, t: Meta) -> Meta:
    _check_float_pair("binary_cross_entropy", x, t)
    if tuple(x.shape) != tuple(t.shape):
        raise ShapeError(
            f"binary_cross_entropy: expected target of the input's shape {list(x.shape)}, got "
            f"{list(t.shape)}"
        )
    return Meta(x.shape, x.dtype)


def _bce_kernel(x, t):
    reject_unless(
        is_float(x.dtype) and t.dtype == x.dtype and t.shape == x.shape, "binary_cross_entropy"
    )
    if np.any((x < 0) | (x > 1)):
        raise TideflowError("binary_cross_entropy: all elements of input should be between 0 and 1")
    # NOTE: computed op by op in the input's dtype, as PyTorch's kernel does (half inputs round
    # alike); the logs are clamped at -100 so that x = 0 or 1 gives a finite loss.
    with np.errstate(divide="ignore"):
        log_x = np.maximum(np.log(x), -100)
        log_1mx = np.maximum(np.log1p(-x), -100)
    return (t - 1) * log_1mx - t * log_x


def _bce_grad(ctx, gy):
    need_x, need_t = ctx.needs_input_grad
    x, t = ctx.input, ctx.target
    # PyTorch's gradients: (x - t) / max(x (1 - x), 1e-12) and -logit(x).
    gx = gy * (x - t) / (x * (1 - x)).clamp_min(1e-12) if need_x else None
    gt = gy * ((1 - x).log() - x.log()) if need_t else None
    return gx, gt


def _bce_onnx(g, x, t):
    floor = g.tensor(-100, x)
    log_x = g.op("Max", g.op("Log", x), floor)
    log_1mx = g.op("Max", g.op("Log", g.op("Sub", g.tensor(1, x), x)), floor)
    return g.op("Sub", g.op("Mul", g.op("Sub", t, g.tensor(1, x)), log_1mx), g.op("Mul", t, log_x))


_binary_cross_entropy = defop(
    "binary_cross_entropy",
    inputs=("input", "target"),
    meta=_bce_meta,
    sbp=elementwise_sbp(),
    kernels={"cpu": _bce_kernel},
    grad=_bce_grad,
    saves=("input", "target"),
    onnx=_bce_onnx,
)


@checked
def binary_cross_entropy(
    input: Tensor, target: Tensor, weight=None, size_average=None, reduce=None, reduction="mean"
):
    """`-weight * (t log(x) + (1 - t) log(1 - x))` for probabilities `input` in [0, 1] and a
    `target` of the same shape; the logs are clamped at -100 like PyTorch's.

    >>> F.binary_cross_entropy(flow.tensor([0.2, 0.9]), flow.tensor([0.0, 1.0]))
    """
    reduction = _reduction(size_average, reduce, reduction)
    if tuple(target.shape) != tuple(input.shape):
        raise ShapeError(
            f"binary_cross_entropy: expected target of the input's shape {list(input.shape)}, "
            f"got {list(target.shape)}"
        )
    loss = dispatch(_binary_cross_entropy, (input, target), {})
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


def _bce_logits_meta(x: Meta, t: Meta, pw) -> Meta:
    _check_float_pair("binary_cross_entropy_with_logits", x, t)
    if pw is not None:
        _check_float_pair("binary_cross_entropy_with_logits", x, pw, "pos_weight")
    return elementwise_meta("binary_cross_entropy_with_logits")(x, t, pw)


def _log_sigmoid(x: np.ndarray) -> np.ndarray:
    """log(sigmoid(x)) = -(log(1 + exp(-|x|)) + max(-x, 0)): stable for any x."""
    xc = x.astype(compute_dtype(x), copy=False)
    return (-(np.log1p(np.exp(-np.abs(xc))) + np.maximum(-xc, 0))).astype(x.dtype, copy=False)


def _bce_logits_kernel(x, t, pw):
    dtype = x.dtype
    same = is_float(x.dtype) and t.dtype == x.dtype and (pw is None or pw.dtype == x.dtype)
    reject_unless(same, "binary_cross_entropy_with_logits")
    # (1 - t) x - log(sigmoid(x)) * (1 + (pos_weight - 1) t), rounded once
    x, t, pw = (None if a is None else a.astype(compute_dtype(a), copy=False) for a in (x, t, pw))
    log_sig = _log_sigmoid(x)
    if pw is not None:
        log_sig *= (pw - 1) * t + 1
    return ((1 - t) * x - log_sig).astype(dtype, copy=False)


def _bce_logits_grad(ctx, gy):
    need_x, need_t, need_pw = ctx.needs_input_grad
    x, t, pw = ctx.input, ctx.target, ctx.pos_weight
    gx = gt = gpw = None
    if need_x:  # sigmoid(x) - t, or (1 + (pw - 1) t) sigmoid(x) - pw t
        s = x.sigmoid()
        gx = gy * (s - t if pw is None else (1 + (pw - 1) * t) * s - pw * t)
    if need_t or need_pw:
        sp = activation.softplus(-x)
        if need_t:
            gt = gy * (-x if pw is None else (pw - 1) * sp - x)
        if need_pw:
            gpw = gy * t * sp
    return gx, gt, gpw


def _bce_logits_onnx(g, x, t, pw):
    log_sig = g.op("Neg", g.op("Softplus", g.op("Neg", x)))
    if pw is not None:
        one = g.tensor(1, x)
        log_sig = g.op("Mul", log_sig, g.op("Add", g.op("Mul", g.op("Sub", pw, one), t), one))
    return g.op("Sub", g.op("Mul", g.op("Sub", g.tensor(1, x), t), x), log_sig)


_binary_cross_entropy_with_logits = defop(
    "binary_cross_entropy_with_logits",
    inputs=("input", "target", "pos_weight"),
    meta=_bce_logits_meta,
    sbp=elementwise_sbp(),
    kernels={"cpu": _bce_logits_kernel},
    grad=_bce_logits_grad,
    saves=("input", "target", "pos_weight"),
    onnx=_bce_logits_onnx,
)


@checked
def binary_cross_entropy_with_logits(
    input: Tensor,
    target: Tensor,
    weight=None,
    size_average=None,
    reduce=None,
    reduction="mean",
    pos_weight=None,
):
    """`binary_cross_entropy(sigmoid(input), target)` computed stably from the logits;
    `pos_weight` (broadcast along the target) weighs the positive term.

    >>> F.binary_cross_entropy_with_logits(flow.tensor([-1.0, 3.0]), flow.tensor([0.0, 1.0]))
    """
    reduction = _reduction(size_average, reduce, reduction)
    if tuple(target.shape) != tuple(input.shape):
        raise ShapeError(
            f"binary_cross_entropy_with_logits: expected target of the input's shape "
            f"{list(input.shape)}, got {list(target.shape)}"
        )
    loss = dispatch(_binary_cross_entropy_with_logits, (input, target, pos_weight), {})
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


# -- regression losses ----------------------------------------------------------------------
def _weighted(loss, weight, input, reduction: str, weighted_mean: bool):
    """PyTorch's optional elementwise `weight` of mse/l1 (mean = sum / sum of weights) and
    huber (mean = plain mean of the weighted losses) losses."""
    if tuple(weight.shape) != tuple(input.shape):
        raise ValueError("Weights and input must have the same size.")
    loss = loss * weight
    if reduction == "mean" and weighted_mean:
        return loss.sum() / weight.sum()
    return _reduce(loss, reduction)


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """Mean squared error `(input - target)**2`, reduced; shapes broadcast (with a warning,
    as in PyTorch, when they differ). An elementwise `weight` makes 'mean' a weighted mean.

    >>> F.mse_loss(flow.tensor([1.0, 2.0]), flow.tensor([1.5, 1.0]))
    """
    _warn_broadcast("mse_loss", input, target)
    reduction = _reduction(size_average, reduce, reduction)
    diff = input - target
    loss = diff * diff
    if weight is not None:
        return _weighted(loss, weight, input, reduction, weighted_mean=True)
    return _reduce(loss, reduction)


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """Mean absolute error `|input - target|`, reduced; shapes broadcast like mse_loss.

    >>> F.l1_loss(flow.tensor([1.0, 2.0]), flow.tensor([1.5, 1.0]))
    """
    _warn_broadcast("l1_loss", input, target)
    reduction = _reduction(size_average, reduce, reduction)
    loss = (input - target).abs()
    if weight is not None:
        return _weighted(loss, weight, input, reduction, weighted_mean=True)
    return _reduce(loss, reduction)


def _huber(diff, delta: float):
    """0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta)."""
    a = diff.abs()
    return binary.where(a < delta, 0.5 * diff * diff, delta * (a - 0.5 * delta))


@halves_in_float32
def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """`0.5 d**2 / beta` where `|d| < beta`, else `|d| - 0.5 beta` (d = input - target):
    quadratic near 0, L1 beyond `beta` (`beta=0` is l1_loss).

    >>> F.smooth_l1_loss(flow.tensor([0.5, 3.0]), flow.tensor([0.0, 0.0]))
    """
    _warn_broadcast("smooth_l1_loss", input, target)
    reduction = _reduction(size_average, reduce, reduction)
    if beta < 0:
        raise ValueError(f"smooth_l1_loss: beta must be non-negative, got {beta}")
    diff = input - target
    loss = diff.abs() if beta == 0 else _huber(diff, beta) / beta
    return _reduce(loss, reduction)


@halves_in_float32
def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    """`0.5 d**2` where `|d| < delta`, else `delta (|d| - 0.5 delta)` (d = input - target):
    smooth_l1_loss scaled by `delta`.

    >>> F.huber_loss(flow.tensor([0.5, 3.0]), flow.tensor([0.0, 0.0]))
    """
    _warn_broadcast("huber_loss", input, target)
    reduction = _reduction(None, None, reduction)
    if delta <= 0:
        raise ValueError(f"huber_loss: delta must be positive, got {delta}")
    loss = _huber(input - target, delta)
    if weight is not None:
        return _weighted(loss, weight, input, reduction, weighted_mean=False)
    return _reduce(loss, reduction)


# -- distribution losses --------------------------------------------------------------------
@checked
def kl_div(
    input: Tensor,
    target: Tensor,
    size_average=None,
    reduce=None,
    reduction="mean",
    log_target=False,
):
    """Kullback-Leibler divergence `target * (log(target) - input)` with `input` of
    log-probabilities (`log_target=True`: `target` is log-probabilities too). 'batchmean'
    divides the sum by the batch size (the true KL divergence); 'mean' by the element count.

    >>> F.kl_div(flow.tensor([[-1.2, -0.4]]), flow.tensor([[0.3, 0.7]]), reduction="batchmean")
    """
    if size_average is None and reduce is None and reduction == "mean":
        warnings.warn(
            "reduction: 'mean' divides the total loss by both the batch size and the support "
            "size.'batchmean' divides only by the batch size, and aligns with the KL div math "
            "definition.'mean' will be changed to behave the same as 'batchmean' in the next "
            "major release.",
            stacklevel=2,
        )
    reduction = _reduction(size_average, reduce, reduction, (*_REDUCTIONS, "batchmean"))
    if log_target:
        loss = target.exp() * (target - input)
    else:  # 0 * log(0) is 0
        loss = binary.xlogy(target, target) - target * input
    if reduction == "batchmean":
        return loss.sum() / input.shape[0] if input.ndim else loss.sum()
    return _reduce(loss, reduction)


@checked
def poisson_nll_loss(
    input: Tensor,
    target: Tensor,
    log_input=True,
    full=False,
    size_average=None,
    eps=1e-08,
    reduce=None,
    reduction="mean",
):
    """Negative log likelihood of `target` under a Poisson distribution of rate `input`
    (`exp(input)` with `log_input`): `exp(x) - t x`, or `x - t log(x + eps)`; `full` adds the
    Stirling approximation of `log(t!)` for t > 1.

    >>> F.poisson_nll_loss(flow.tensor([0.5, 1.0]), flow.tensor([1.0, 3.0]))
    """
    reduction = _reduction(size_average, reduce, reduction)
    loss = input.exp() - target * input if log_input else input - target * (input + eps).log()
    if full:
        stirling = target * target.log() - target + 0.5 * (2 * math.pi * target).log()
        loss = loss + binary.where(target > 1, stirling, 0.0)
    return _reduce(loss, reduction)


@checked
def gaussian_nll_loss(
    input: Tensor, target: Tensor, var: Tensor | Number, full=False, eps=1e-06, reduction="mean"
):
    """Negative log likelihood of `target` under Gaussians of mean `input` and variance `var`:
    `0.5 * (log(var) + (input - target) ** 2 / var)` (+ `0.5 * log(2 pi)` with `full`). `var`
    has the input's shape, or lacks (or has 1 as) its last dim (one variance per row), or is
    a number; it is clamped to `eps` for stability, its gradient passing as if unclamped.

    >>> F.gaussian_nll_loss(flow.tensor([0.5, 1.0]), flow.tensor([1.0, 3.0]), 2.0)
    """
    reduction = _reduction(None, None, reduction)
    if not isinstance(var, Tensor):
        var = creation.full_like(input, float(var))
    elif tuple(var.shape) != tuple(input.shape):
        if tuple(input.shape[:-1]) == tuple(var.shape):
            var = var.unsqueeze(-1)
        elif not (tuple(input.shape[:-1]) == tuple(var.shape[:-1]) and var.shape[-1] == 1):
            raise ValueError(
                f"gaussian_nll_loss: var is of incorrect size: {list(var.shape)} for input "
                f"{list(input.shape)}"
            )
    if bool((var < 0).any()):
        raise ValueError("gaussian_nll_loss: var has negative entry/entries")
    # clamped to eps in value, with the unclamped gradient (an infinite variance stays one)
    var = binary.where(var < eps, var + (eps - var).detach(), var)
    loss = 0.5 * (var.log() + (input - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


# -- margin losses --------------------------------------------------------------------------
def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """Two-class logistic loss `log(1 + exp(-target * input))` for targets of +1 / -1.

    >>> F.soft_margin_loss(flow.tensor([0.3, -2.0]), flow.tensor([1.0, -1.0]))
    """
    reduction = _reduction(size_average, reduce, reduction)
    return _reduce((-input * target).exp().log1p(), reduction)


@checked
def margin_ranking_loss(
    input1: Tensor,
    input2: Tensor,
    target: Tensor,
    margin=0,
    size_average=None,
    reduce=None,
    reduction="mean",
):
    """`max(0, -target * (input1 - input2) + margin)`: target 1 asks for input1 to rank
    higher than input2 by `margin`, -1 the opposite.

    >>> F.margin_ranking_loss(flow.tensor([0.5]), flow.tensor([0.2]), flow.tensor([1.0]))
    """
    reduction = _reduction(size_average, reduce, reduction)
    if not input1.ndim == input2.ndim == target.ndim:
        raise ShapeError(
            f"margin_ranking_loss: all input tensors should have the same number of dims, got "
            f"input1 {list(input1.shape)}, input2 {list(input2.shape)} and target "
            f"{list(target.shape)}"
        )
    return _reduce((-target * (input1 - input2) + margin).clamp_min(0), reduction)


_EPSILON = 1e-12


@checked
def cosine_embedding_loss(
    input1: Tensor,
    input2: Tensor,
    target: Tensor,
    margin=0,
    size_average=None,
    reduce=None,
    reduction="mean",
):
    """`1 - cos(x1, x2)` where target is 1 and `max(0, cos(x1, x2) - margin)` where it is -1,
    with the cosine taken over the last dim of 1-d or 2-d inputs.

    >>> F.cosine_embedding_loss(flow.randn(3, 4), flow.randn(3, 4), flow.tensor([1, -1, 1]))
    """
    reduction = _reduction(size_average, reduce, reduction)
    if input1.ndim not in (1, 2) or target.ndim != input1.ndim - 1:
        raise ShapeError(
            f"cosine_embedding_loss: expected 1-d inputs with a 0-d target or 2-d inputs with a "
            f"1-d target, got inputs of shapes {list(input1.shape)}, {list(input2.shape)} and "
            f"target of shape {list(target.shape)}"
        )
    dim = input1.ndim - 1
    prod = (input1 * input2).sum(dim)
    mag1 = (input1 * input1).sum(dim) + _EPSILON
    mag2 = (input2 * input2).sum(dim) + _EPSILON
    cos = prod / (mag1 * mag2).sqrt()
    pos = binary.where(target == 1, 1 - cos, 0.0)
    neg = binary.where(target == -1, (cos - margin).clamp_min(0), 0.0)
    return _reduce(pos + neg, reduction)


@checked
def triplet_margin_loss(
    anchor: Tensor,
    positive: Tensor,
    negative: Tensor,
    margin=1.0,
    p=2,
    eps=1e-06,
    swap=False,
    size_average=None,
    reduce=None,
    reduction="mean",
):
    """`max(0, d(a, p) - d(a, n) + margin)` with the p-norm `pairwise_distance` d; `swap`
    uses `min(d(a, n), d(p, n))` as the negative distance.

    >>> a, p, n = flow.randn(3, 4), flow.randn(3, 4), flow.randn(3, 4)
    >>> F.triplet_margin_loss(a, p, n)
    """
    reduction = _reduction(size_average, reduce, reduction)
    if margin <= 0:
        raise ValueError(f"triplet_margin_loss: margin must be greater than 0, got {margin}")
    if not anchor.ndim == positive.ndim == negative.ndim:
        raise ShapeError(
            f"triplet_margin_loss: the anchor, positive and negative tensors must have the same "
            f"number of dims, got shapes {list(anchor.shape)}, {list(positive.shape)} and "
            f"{list(negative.shape)}"
        )
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = binary.minimum(d_neg, pairwise_distance(positive, negative, p, eps))
    return _reduce((d_pos - d_neg + margin).clamp_min(0), reduction)
