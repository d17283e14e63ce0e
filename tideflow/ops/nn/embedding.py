"""Embedding lookup. Two ops that are each other's gradient: `embedding` gathers rows of the
weight, `embedding_backward` scatter-adds rows into a weight-shaped gradient. padding_idx and
scale_grad_by_freq scale the gradient per lookup by a factor (`embedding_grad_scale`) that the
lookup carries as an operand of its own."""

from __future__ import annotations

import numpy as np

from ...framework import dtype as dtypes
from ...framework.dispatch import assign
from ...framework.errors import DTypeError, ShapeError, TensorIndexError, TideflowError
from ...framework.grad_mode import no_grad
from ...framework.tensor import Tensor
from .._rules import B, Meta, P, S, Signature, broadcast_only, checked, defop, dispatch
from .softmax import reject_unless

__all__ = ["embedding"]

_INDEX_DTYPES = (dtypes.int32, dtypes.int64)


def _check_indices(op: str, idx: Meta) -> None:
    if idx.dtype not in _INDEX_DTYPES:
        raise DTypeError(f"{op}: expected indices of dtype int64 or int32, got {idx.dtype.name}")


def _embedding_meta(idx: Meta, w: Meta, scale) -> Meta:
    _check_indices("embedding", idx)
    if len(w.shape) != 2:
        raise ShapeError(
            f"embedding: expected a 2-d weight (num_embeddings, embedding_dim), got shape "
            f"{list(w.shape)}"
        )
    return Meta((*idx.shape, w.shape[1]), w.dtype)


def _embedding_kernel(idx, w, scale, *, out=None):
    reject_unless(idx.dtype in (np.int32, np.int64) and w.ndim == 2, "embedding")
    if idx.size and (idx.min() < 0 or idx.max() >= w.shape[0]):
        bad = idx.min() if idx.min() < 0 else idx.max()
        raise TensorIndexError(
            f"embedding: index {bad} is out of range for {w.shape[0]} embeddings"
        )
    # NOTE: the indices are checked: "clip" changes none, and unlike "raise" it writes `out`
    # directly instead of through a temporary
    return np.take(w, idx, axis=0, out=out, mode="clip")


def _embedding_sbp(idx: Meta, w: Meta, scale) -> list[Signature]:
    """Split the lookups (weight whole), or the embedding dim of the weight; the lookup is
    linear in the weight, so a partial weight gives a partial result."""
    whole = None if scale is None else B
    sigs = [
        Signature((S(i), B, None if scale is None else S(i)), (S(i),))
        for i in range(len(idx.shape))
    ]
    return [
        *sigs,
        Signature((B, S(1), whole), (S(len(idx.shape)),)),
        Signature((B, P, whole), (P,)),
        Signature((B, B, whole), (B,)),
    ]


def _embedding_grad(ctx, gy):
    gw = None
    if ctx.needs_input_grad[1]:
        scale = ctx.grad_scale
        attrs = {"num_weights": ctx.input_shape(1)[0]}
        gw = dispatch(_embedding_backward, (gy if scale is None else gy * scale, ctx.input), attrs)
    return None, gw, None


def _embedding_onnx(g, idx, w, grad_scale):
    # NOTE: grad_scale weighs the gradient only
    return g.op("Gather", w, idx, axis=0)


_embedding = defop(
    "embedding",
    inputs=("input", "weight", "grad_scale"),
    meta=_embedding_meta,
    sbp=_embedding_sbp,
    kernels={"cpu": _embedding_kernel},
    out_kernels={"cpu": _embedding_kernel},
    grad=_embedding_grad,
    saves=("input", "grad_scale"),
    onnx=_embedding_onnx,
)


def _backward_meta(gy: Meta, idx: Meta, *, num_weights) -> Meta:
    _check_indices("embedding_backward", idx)
    if tuple(gy.shape[:-1]) != tuple(idx.shape):
        raise ShapeError(
            f"embedding_backward: gradient of shape {list(gy.shape)} does not match indices "
            f"of shape {list(idx.shape)}"
        )
    return Meta((num_weights, gy.shape[-1]), gy.dtype)


def _backward_kernel(gy, idx, *, num_weights):
    # NOTE: rows of one index summed with one reduceat over the rows sorted by index: twice
    # as fast as np.add.at (a GPT's 1024 tokens of width 256: 1.8 ms vs 3.4 ms).
    idx, gy = idx.reshape(-1), gy.reshape(-1, gy.shape[-1])
    out = np.zeros((num_weights, gy.shape[-1]), gy.dtype)
    if idx.size:
        order = np.argsort(idx, kind="stable")
        ordered = idx[order]
        starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
        out[ordered[starts]] = np.add.reduceat(gy[order], starts, axis=0)
    return out


def _backward_sbp(gy: Meta, idx: Meta, *, num_weights) -> list[Signature]:
    """Lookups split over ranks scatter into partial sums; a split embedding dim stays split."""
    sigs = [Signature((S(i), S(i)), (P,)) for i in range(len(idx.shape))]
    return [
        *sigs,
        Signature((S(len(idx.shape)), B), (S(1),)),
        Signature((P, B), (P,)),
        Signature((B, B), (B,)),
    ]


_embedding_backward = defop(
    "embedding_backward",
    inputs=("grad_output", "indices"),
    meta=_backward_meta,
    sbp=_backward_sbp,
    kernels={"cpu": _backward_kernel},
    grad=lambda ctx, ggw: (dispatch(_embedding, (ctx.indices, ggw, None), {}), None),
    saves=("indices",),
)


# The per-lookup factor of the weight gradient: 0 at padding_idx, 1 / (occurrences of the
# index in the batch) with scale_grad_by_freq. A constant of the indices, so not differentiable.
def _scale_meta(idx: Meta, *, padding_idx, scale_grad_by_freq, dtype) -> Meta:
    _check_indices("embedding_grad_scale", idx)
    return Meta((*idx.shape, 1), dtype)


def _scale_kernel(idx, *, padding_idx, scale_grad_by_freq, dtype):
    scale = np.ones(idx.shape, dtype.np)
    if scale_grad_by_freq:
        _, inverse, counts = np.unique(idx, return_inverse=True, return_counts=True)
        scale /= counts[inverse].reshape(idx.shape)
    if padding_idx is not None:
        scale[idx == padding_idx] = 0
    return scale[..., None]


def _scale_onnx(g, idx, *, padding_idx, scale_grad_by_freq, dtype):
    shape = g.meta(idx).shape
    scale = g.cast(g.op("Equal", idx, idx), dtype)  # ones
    if scale_grad_by_freq:
        _, _, inverse, counts = g.op("Unique", idx, sorted=1, outputs=4)
        count = g.op("Reshape", g.op("Gather", counts, inverse), g.ints(list(shape)))
        scale = g.op("Div", scale, g.cast(count, dtype))
    if padding_idx is not None:
        kept = g.op("Not", g.op("Equal", idx, g.tensor(padding_idx, idx)))
        scale = g.op("Mul", scale, g.cast(kept, dtype))
    return g.op("Unsqueeze", scale, g.ints([-1]))


def _scale_sbp(idx: Meta, *, scale_grad_by_freq, **_) -> list[Signature]:
    whole = [Signature((B,), (B,))]
    if scale_grad_by_freq:  # counts over every lookup
        return whole
    return [Signature((S(i),), (S(i),)) for i in range(len(idx.shape))] + whole


_embedding_grad_scale = defop(
    "embedding_grad_scale",
    inputs=("input",),
    meta=_scale_meta,
    sbp=_scale_sbp,
    kernels={"cpu": _scale_kernel},
    differentiable=False,
    onnx=_scale_onnx,
)


# max_norm: the rows of the weight that the lookup reads are scaled down in place to a
# p-norm of at most max_norm first (not differentiable, like PyTorch's embedding_renorm_).
def _renorm_meta(w: Meta, idx: Meta, *, max_norm, norm_type) -> Meta:
    _check_indices("embedding_renorm", idx)
    return Meta(w.shape, w.dtype)


def _renorm_kernel(w, idx, *, max_norm, norm_type):
    out = w.copy()
    rows = np.unique(idx)
    norms = np.linalg.norm(w[rows].astype(np.float64), ord=norm_type, axis=1)
    big = norms > max_norm
    out[rows[big]] *= (max_norm / (norms[big] + 1e-7))[:, None].astype(w.dtype)
    return out


_embedding_renorm = defop(
    "embedding_renorm",
    inputs=("weight", "input"),
    meta=_renorm_meta,
    sbp=broadcast_only,
    kernels={"cpu": _renorm_kernel},
    differentiable=False,
)


@checked
def embedding(
    input: Tensor,
    weight: Tensor,
    padding_idx=None,
    max_norm=None,
    norm_type=2.0,
    scale_grad_by_freq=False,
    sparse=False,
):
    """Rows of `weight` (num_embeddings, embedding_dim) selected by the integer `input`:
    the output has shape `input.shape + (embedding_dim,)`. The row `padding_idx` gets no
    gradient; `scale_grad_by_freq` divides each row's gradient by its count in `input`;
    `max_norm` first rescales (in place) the rows read whose `norm_type`-norm exceeds it.

    >>> F.embedding(flow.tensor([[0, 2]]), flow.randn(3, 4)).shape
    tideflow.Size([1, 2, 4])
    """
    if sparse:
        raise TideflowError("embedding: sparse gradients are not supported (sparse=True)")
    if max_norm is not None:
        with no_grad():
            attrs = {"max_norm": float(max_norm), "norm_type": float(norm_type)}
            assign(weight, dispatch(_embedding_renorm, (weight, input), attrs), "embedding_renorm_")
    if padding_idx is not None:
        n = weight.shape[0]
        if not -n <= padding_idx < n:
            raise ShapeError(f"embedding: padding_idx {padding_idx} must be within [{-n}, {n})")
        padding_idx %= n
    scale = None
    if padding_idx is not None or scale_grad_by_freq:
        attrs = {
            "padding_idx": padding_idx,
            "scale_grad_by_freq": bool(scale_grad_by_freq),
            "dtype": weight.dtype,
        }
        scale = dispatch(_embedding_grad_scale, (input,), attrs)
    return dispatch(_embedding, (input, weight, scale), {})
