"""Distances and normalization of vectors: cosine_similarity, pairwise_distance, normalize;
and one_hot."""

from __future__ import annotations

import numpy as np

from ...framework import dtype as dtypes
from ...framework.errors import DTypeError, ShapeError, TensorIndexError, TideflowError
from ...framework.tensor import Tensor
from .. import creation
from .._rules import (
    B,
    Meta,
    S,
    Signature,
    broadcast_shapes,
    checked,
    defop,
    dispatch,
    halves_in_float32,
    int_arg,
    normalize_dim,
)
from .softmax import reject_unless

__all__ = ["cosine_similarity", "pairwise_distance", "pdist", "normalize", "one_hot"]


def _clamped_norm(x, dim: int, eps: float):
    """The 2-norm along `dim` (kept), at least `eps`. As in PyTorch, the clamp does not
    touch the gradient: it flows as if the norm were not clamped."""
    n = x.norm(2, dim, keepdim=True)
    return n + (n.clamp_min(eps) - n).detach()


@halves_in_float32
@checked
def cosine_similarity(x1: Tensor, x2: Tensor, dim=1, eps=1e-8):
    """Cosine of the angle between `x1` and `x2` along `dim` (after broadcasting): each is
    divided by its norm (at least `eps`) before the dot product, so |result| <= 1.

    >>> F.cosine_similarity(flow.tensor([[1.0, 0.0]]), flow.tensor([[1.0, 1.0]]))
    """
    common = dtypes.promote_types(x1.dtype, x2.dtype)
    if not common.is_floating_point:
        raise DTypeError(
            f"cosine_similarity: expected a floating point common dtype, got {common.name} from "
            f"{x1.dtype.name} and {x2.dtype.name}"
        )
    shape = broadcast_shapes("cosine_similarity", tuple(x1.shape), tuple(x2.shape))
    x1, x2 = (x.to(common).expand(shape) for x in (x1, x2))
    dim = normalize_dim("cosine_similarity", dim, len(shape))
    return ((x1 / _clamped_norm(x1, dim, eps)) * (x2 / _clamped_norm(x2, dim, eps))).sum(dim)


@checked
def pairwise_distance(x1: Tensor, x2: Tensor, p=2.0, eps=1e-06, keepdim=False):
    """The p-norm of `x1 - x2 + eps` along the last dim (after broadcasting).

    >>> F.pairwise_distance(flow.tensor([[0.0, 0.0]]), flow.tensor([[3.0, 4.0]]))
    """
    return (x1 - x2 + eps).norm(p, max(x1.ndim, x2.ndim) - 1, keepdim)


@checked
def normalize(input: Tensor, p=2.0, dim=1, eps=1e-12, out=None):
    """`input / max(norm_p(input, dim), eps)`: unit p-norm slices along `dim`.

    >>> F.normalize(flow.tensor([[3.0, 4.0]]))
    """
    if out is not None:
        raise TideflowError("normalize: out= is not supported; use the returned tensor")
    return input / input.norm(p, dim, keepdim=True).clamp_min(eps)


# -- one_hot --------------------------------------------------------------------------------
def _one_hot_meta(x: Meta, *, num_classes) -> Meta:
    if x.dtype is not dtypes.int64:
        raise DTypeError(f"one_hot: expected an index tensor of dtype int64, got {x.dtype.name}")
    return Meta((*x.shape, num_classes), dtypes.int64)


def _one_hot_kernel(x, *, num_classes):
    reject_unless(x.dtype == np.int64, "one_hot")
    if x.size and (x.min() < 0 or x.max() >= num_classes):
        bad = x.min() if x.min() < 0 else x.max()
        raise TensorIndexError(
            f"one_hot: class value {bad} is out of range for {num_classes} classes"
        )
    return (x[..., None] == np.arange(num_classes)).astype(np.int64)


def _one_hot_sbp(x: Meta, *, num_classes) -> list[Signature]:
    return [Signature((S(i),), (S(i),)) for i in range(len(x.shape))] + [Signature((B,), (B,))]


_one_hot = defop(
    "one_hot",
    inputs=("input",),
    meta=_one_hot_meta,
    sbp=_one_hot_sbp,
    kernels={"cpu": _one_hot_kernel},
    differentiable=False,
    onnx=lambda g, x, *, num_classes: g.op(
        "OneHot", x, g.ints(num_classes), g.ints([0, 1]), axis=-1
    ),
)


@checked
def one_hot(tensor: Tensor, num_classes=-1):
    """int64 one-hot encoding: a new last dim of `num_classes` holding 1 at each index
    (`num_classes=-1`: one more than the largest index).

    >>> F.one_hot(flow.tensor([0, 2]), 3)
    tensor([[1, 0, 0],
            [0, 0, 1]])
    """
    if num_classes == -1:
        if tensor.numel() == 0:
            raise TideflowError(
                "one_hot: cannot infer the number of classes from an empty tensor; pass num_classes"
            )
        num_classes = int(tensor.max()) + 1
    num_classes = int_arg("one_hot", "num_classes", num_classes)
    return dispatch(_one_hot, (tensor,), {"num_classes": num_classes})


@checked
def pdist(input: Tensor, p=2.0):
    """The p-norm distances between the rows of a 2-d input, each pair once: for N rows the
    N * (N - 1) / 2 distances of (0, 1), (0, 2), ..., (N - 2, N - 1).

    >>> F.pdist(flow.tensor([[0.0, 0.0], [3.0, 4.0], [0.0, 1.0]]))
    tensor([5.0000, 1.0000, 4.2426])
    """
    if input.ndim != 2:
        raise ShapeError(f"pdist: expected a 2-d input, got shape {list(input.shape)}")
    if p < 0:
        raise ValueError(f"pdist: p must be non-negative, got {p}")
    first, second = (
        creation.tensor(rows, dtype=dtypes.int64, **creation.on_placement_of(input))
        for rows in np.triu_indices(input.shape[0], 1)
    )
    return (input[first] - input[second]).norm(p, 1)
