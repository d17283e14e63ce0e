"""Margin losses for classification and embeddings, composites of tideflow ops (their
gradients come from the ops'): hinge_embedding_loss, multi_margin_loss,
multilabel_margin_loss, multilabel_soft_margin_loss, triplet_margin_with_distance_loss."""

from __future__ import annotations

from ...framework import dtype as dtypes
from ...framework.errors import DTypeError, ShapeError, TensorIndexError
from ...framework.tensor import Tensor
from .. import activation, binary
from .._rules import checked
from ..indexing import gather
from .distance import one_hot, pairwise_distance
from .loss import _reduce, _reduction

__all__ = [
    "hinge_embedding_loss",
    "multi_margin_loss",
    "multilabel_margin_loss",
    "multilabel_soft_margin_loss",
    "triplet_margin_with_distance_loss",
]


@checked
def hinge_embedding_loss(
    input: Tensor, target: Tensor, margin=1.0, size_average=None, reduce=None, reduction="mean"
):
    """`input` where target is 1 and `max(0, margin - input)` where it is -1 (inputs are
    distances: small for similar pairs).

    >>> F.hinge_embedding_loss(flow.tensor([0.3, 2.0]), flow.tensor([1.0, -1.0]))
    """
    reduction = _reduction(size_average, reduce, reduction)
    dissimilar = binary.where(target != 1, (margin - input).clamp_min(0), 0.0)
    similar = binary.where(target != -1, input, 0.0)
    return _reduce(dissimilar + similar, reduction)


def _class_scores(op: str, input: Tensor, target: Tensor) -> tuple[Tensor, Tensor]:
    """input as (N, C) and target as (N,) class indices, from (C,) and () or (N, C) and (N,)."""
    if input.ndim not in (1, 2) or target.ndim != input.ndim - 1:
        raise ShapeError(
            f"{op}: expected input of shape [C] with a 0-d target, or [N, C] with a target "
            f"of shape [N], got input {list(input.shape)} and target {list(target.shape)}"
        )
    if input.ndim == 2 and target.shape[0] != input.shape[0]:
        raise ShapeError(
            f"{op}: inconsistent target size, expected {input.shape[0]} but got "
            f"{list(target.shape)}"
        )
    if target.dtype is not dtypes.int64:
        raise DTypeError(f"{op}: expected a target of int64 class indices, got {target.dtype.name}")
    n_classes = input.shape[-1]
    if target.numel() and not bool(((target >= 0) & (target < n_classes)).all()):
        raise TensorIndexError(f"{op}: target class out of range [0, {n_classes})")
    return input.reshape(-1, n_classes), target.reshape(-1)


@checked
def multi_margin_loss(
    input: Tensor,
    target: Tensor,
    p=1,
    margin=1.0,
    weight: Tensor | None = None,
    size_average=None,
    reduce=None,
    reduction="mean",
):
    """Multi-class hinge loss: per sample, the mean over classes j != y of
    `max(0, margin - x[y] + x[j]) ** p` (times `weight[y]`).

    >>> F.multi_margin_loss(flow.tensor([[0.1, 0.8, 0.3]]), flow.tensor([1]))
    """
    reduction = _reduction(size_average, reduce, reduction)
    if p not in (1, 2):
        raise ValueError(f"multi_margin_loss: only p == 1 and p == 2 supported, got p={p}")
    scores, classes = _class_scores("multi_margin_loss", input, target)
    n_classes = scores.shape[1]
    if weight is not None and tuple(weight.shape) != (n_classes,):
        raise ShapeError(
            f"multi_margin_loss: expected weight of shape [{n_classes}], got {list(weight.shape)}"
        )
    true_score = gather(scores, 1, classes.unsqueeze(1))
    margins = (margin - true_score + scores).clamp_min(0)
    if p == 2:
        margins = margins * margins
    if weight is not None:
        margins = margins * weight[classes].unsqueeze(1)
    others = 1 - one_hot(classes, n_classes).to(scores.dtype)
    loss = (margins * others).sum(1) / n_classes
    return _reduce(loss.reshape(target.shape), reduction)


@checked
def multilabel_margin_loss(
    input: Tensor, target: Tensor, size_average=None, reduce=None, reduction="mean"
):
    """Multi-label hinge loss: per sample, the sum over its target classes j and the other
    classes i of `max(0, 1 - (x[j] - x[i]))`, over the class count. A target row lists its
    classes first and ends at the first -1.

    >>> F.multilabel_margin_loss(flow.tensor([[0.1, 0.2, 0.4, 0.8]]),
    ...                          flow.tensor([[3, 0, -1, 1]]))
    """
    reduction = _reduction(size_average, reduce, reduction)
    if input.ndim not in (1, 2) or tuple(target.shape) != tuple(input.shape):
        raise ShapeError(
            f"multilabel_margin_loss: inconsistent target size: {list(target.shape)} for "
            f"input of size: {list(input.shape)}"
        )
    if target.dtype is not dtypes.int64:
        raise DTypeError(
            f"multilabel_margin_loss: expected a target of int64 class indices, got "
            f"{target.dtype.name}"
        )
    n_classes = input.shape[-1]
    scores, labels = input.reshape(-1, n_classes), target.reshape(-1, n_classes)
    if labels.numel() and not bool(((labels >= -1) & (labels < n_classes)).all()):
        raise TensorIndexError(
            f"multilabel_margin_loss: target class out of range [-1, {n_classes})"
        )
    listed = (labels != -1).to(dtypes.int64).cumprod(1)  # 1 up to the first -1
    classes = labels.clamp_min(0)
    is_target = (one_hot(classes, n_classes) * listed.unsqueeze(2)).sum(1) > 0
    target_scores = gather(scores, 1, classes)  # (N, C): x[j] for the j-th listed class
    hinge = (1 - (target_scores.unsqueeze(2) - scores.unsqueeze(1))).clamp_min(0)
    pairs = listed.unsqueeze(2).to(scores.dtype) * (~is_target).unsqueeze(1).to(scores.dtype)
    loss = (hinge * pairs).sum((1, 2)) / n_classes
    return _reduce(loss.reshape(input.shape[:-1]), reduction)


@checked
def multilabel_soft_margin_loss(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average=None,
    reduce=None,
    reduction="mean",
):
    """Multi-label one-versus-all logistic loss, averaged over the classes (the last dim):
    `-(t log(sigmoid(x)) + (1 - t) log(sigmoid(-x)))`, times `weight` per class.

    >>> F.multilabel_soft_margin_loss(flow.tensor([[0.3, -1.0]]), flow.tensor([[1.0, 0.0]]))
    """
    reduction = _reduction(size_average, reduce, reduction)
    loss = -(target * activation.logsigmoid(input) + (1 - target) * activation.logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    class_dim = input.ndim - 1
    return _reduce(loss.sum(class_dim) / input.shape[class_dim], reduction)


@checked
def triplet_margin_with_distance_loss(
    anchor: Tensor,
    positive: Tensor,
    negative: Tensor,
    *,
    distance_function=None,
    margin=1.0,
    swap=False,
    reduction="mean",
):
    """`max(0, d(anchor, positive) - d(anchor, negative) + margin)` with any distance
    `distance_function(x, y)` (default: the 2-norm `pairwise_distance`); `swap` uses the
    smaller of d(anchor, negative) and d(positive, negative).

    >>> a, p, n = flow.randn(3, 4), flow.randn(3, 4), flow.randn(3, 4)
    >>> F.triplet_margin_with_distance_loss(a, p, n, distance_function=F.pairwise_distance)
    """
    reduction = _reduction(None, None, reduction)
    if margin <= 0:
        raise ValueError(
            f"triplet_margin_with_distance_loss: margin must be greater than 0, got {margin}"
        )
    if not anchor.ndim == positive.ndim == negative.ndim:
        raise ShapeError(
            "triplet_margin_with_distance_loss: the anchor, positive, and negative tensors are "
            f"expected to have the same number of dimensions, but got: anchor {anchor.ndim}D, "
            f"positive {positive.ndim}D, and negative {negative.ndim}D inputs"
        )
    distance = distance_function if distance_function is not None else pairwise_distance
    d_pos = distance(anchor, positive)
    d_neg = distance(anchor, negative)
    if swap:
        d_neg = binary.minimum(d_neg, distance(positive, negative))
    return _reduce((margin + d_pos - d_neg).clamp_min(0), reduction)
