"""Attention: scaled_dot_product_attention.

Without a mask or dropout it is one op, `attention`, whose kernel works in tiles of query
rows: with `is_causal` a tile multiplies only the keys its rows can see, so the causal half
of the score matrix is never computed (nor masked, nor softmaxed), and the backward op skips
it likewise. Its outputs are the result and the attention probabilities (the saved state of
the backward op). Masks, dropout and second derivatives take the composite of matmul,
where, safe_softmax and dropout. For float32 a generated kernel replaces both NumPy kernels
(`backends/jit_kernels/attention.py`: one compiled loop over heads and tiles calling BLAS);
the NumPy kernels here serve float64, and every dtype where numba is unavailable.
"""

from __future__ import annotations

import math

import numpy as np

from ...framework import dtype as dtypes
from ...framework.errors import DTypeError, ShapeError, TideflowError
from ...framework.grad_mode import is_grad_enabled
from ...framework.registry import kernel_for
from ...framework.tensor import Tensor
from .. import binary
from .._rules import B, Meta, S, Signature, checked, defop, dispatch
from ..creation import on_placement_of, ones
from .dropout import dropout
from .softmax import _softmax, _softmax_backward, reject_unless, safe_softmax, softmax_backward

__all__ = ["scaled_dot_product_attention"]


def _check(query, key, value, attn_mask, is_causal: bool, enable_gqa: bool) -> None:
    shapes = f"{list(query.shape)}, {list(key.shape)} and {list(value.shape)}"
    if query.dtype is not key.dtype or query.dtype is not value.dtype:
        raise DTypeError(
            f"scaled_dot_product_attention: expected query, key and value of one dtype, got "
            f"{query.dtype.name}, {key.dtype.name} and {value.dtype.name}"
        )
    if min(query.ndim, key.ndim, value.ndim) < 2 or not (
        query.shape[-1] == key.shape[-1] and key.shape[-2] == value.shape[-2]
    ):
        raise ShapeError(
            "scaled_dot_product_attention: expected query (..., L, E), key (..., S, E) and "
            f"value (..., S, Ev), got shapes {shapes}"
        )
    if enable_gqa and (min(query.ndim, key.ndim) < 3 or query.shape[-3] % key.shape[-3]):
        raise ShapeError(
            "scaled_dot_product_attention: with enable_gqa the number of query heads (dim -3) "
            f"must be a multiple of the number of key/value heads, got shapes {shapes}"
        )
    if is_causal and attn_mask is not None:
        raise TideflowError(
            "scaled_dot_product_attention: pass either attn_mask or is_causal=True, not both"
        )


@checked
def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask=None,
    dropout_p=0.0,
    is_causal=False,
    scale=None,
    enable_gqa=False,
):
    """`softmax(query @ key.mT * scale + mask) @ value` over the last two dims (batch dims
    broadcast). `attn_mask` is boolean (True = attend) or additive float; `is_causal` masks
    keys after each query (top-left aligned); rows with every key masked give 0. `scale`
    defaults to 1 / sqrt(E); `enable_gqa` shares each key/value head among a group of query
    heads (dim -3).

    >>> q = k = v = flow.randn(2, 4, 5, 8)
    >>> F.scaled_dot_product_attention(q, k, v, is_causal=True).shape
    tideflow.Size([2, 4, 5, 8])
    """
    _check(query, key, value, attn_mask, is_causal, enable_gqa)
    if scale is None:
        scale = 1.0 / math.sqrt(query.shape[-1])
    dtype = query.dtype
    if dtype in (dtypes.float16, dtypes.bfloat16):
        # NOTE: like PyTorch's fused CPU kernel: half inputs are computed in float32, rounded once.
        query, key, value = query.float(), key.float(), value.float()
    if enable_gqa:
        groups = query.shape[-3] // key.shape[-3]
        key = key.repeat_interleave(groups, -3)
        value = value.repeat_interleave(groups, -3)
    if attn_mask is None and dropout_p == 0 and _fusable(query, key, value):
        out, _ = dispatch(_attention, (query, key, value), {"scale": scale, "is_causal": is_causal})
        return out.to(dtype)
    attn = _probabilities(query, key, attn_mask, is_causal, scale)
    if dropout_p > 0:
        attn = dropout(attn, dropout_p)
    return attn.matmul(value).to(dtype)


def _probabilities(query, key, attn_mask, is_causal: bool, scale: float) -> Tensor:
    """softmax(query @ key.mT * scale + mask) in differentiable ops."""
    scores = (query * scale).matmul(key.transpose(-2, -1))
    if is_causal:
        size = (query.shape[-2], key.shape[-2])
        attn_mask = ones(*size, dtype=dtypes.bool_, **on_placement_of(query)).tril()
    if attn_mask is not None:
        if attn_mask.dtype is dtypes.bool_:
            scores = binary.where(attn_mask, scores, -math.inf)
        else:
            scores = scores + attn_mask
    return dispatch(safe_softmax, (scores,), {"dim": scores.ndim - 1})


def _fusable(query: Tensor, key: Tensor, value: Tensor) -> bool:
    """The fused op takes batch dims that match (no broadcasting) and non-empty rows."""
    batch = query.shape[:-2]
    return (
        query.dtype in (dtypes.float32, dtypes.float64)
        and key.shape[:-2] == batch
        and value.shape[:-2] == batch
        and 0 not in query.shape[-2:]
        and 0 not in key.shape[-2:]
    )


# -- the fused op -------------------------------------------------------------------------------
# Query rows go in tiles of TILE. Causal attention is top-left aligned: row i sees keys
# j <= i, so the tile of rows [r0, r1) needs keys [0, min(r1, S)) only, and within them masks
# the triangle j > i of columns [r0, r1). Non-causal attention is one tile of every row.
TILE = 32


def _tiles(n_rows: int, n_keys: int, is_causal: bool):
    """(r0, r1, keys) per tile of query rows: the tile's rows and the keys they see."""
    if not is_causal:
        yield 0, n_rows, n_keys
        return
    for r0 in range(0, n_rows, TILE):
        r1 = min(r0 + TILE, n_rows)
        yield r0, r1, min(r1, n_keys)


def _mT(a: np.ndarray) -> np.ndarray:
    return a.swapaxes(-1, -2)


def _attention_meta(q: Meta, k: Meta, v: Meta, *, scale, is_causal) -> tuple[Meta, Meta]:
    rows = tuple(q.shape[:-1])
    return Meta((*rows, v.shape[-1]), q.dtype), Meta((*rows, k.shape[-2]), q.dtype)


def _attention_sbp(q: Meta, k: Meta, v: Meta, *, scale, is_causal) -> list[Signature]:
    """Any batch dim (heads included) split alike; rows and keys whole on a rank (a causal
    tile's mask depends on where its rows are)."""
    sigs = [Signature((S(a),) * 3, (S(a), S(a))) for a in range(len(q.shape) - 2)]
    return [*sigs, Signature((B, B, B), (B, B))]


# NOTE: the batch dims stay as they come (heads are often a transposed view): NumPy's matmul
# runs BLAS on each strided matrix, where flattening the batch would copy. Results take their
# operand's memory order (empty_like's "K"): heads split from (B, T, H*D) come back in that
# order, so merging them again is a view, not a copy.
def _attention_kernel(q, k, v, *, scale, is_causal):
    reject_unless(q.shape[:-2] == k.shape[:-2] == v.shape[:-2], "attention")
    n_rows, n_keys = q.shape[-2], k.shape[-2]
    probs = np.empty((*q.shape[:-1], n_keys), q.dtype)
    out = np.empty_like(q, shape=(*q.shape[:-1], v.shape[-1]))
    softmax = kernel_for(_softmax)
    for r0, r1, keys in _tiles(n_rows, n_keys, is_causal):
        scores = np.matmul(q[..., r0:r1, :] * q.dtype.type(scale), _mT(k[..., :keys, :]))
        if is_causal and r0 < keys:
            later = np.arange(r0, keys) > np.arange(r0, r1)[:, None]
            np.copyto(scores[..., r0:keys], -np.inf, where=later)
        p = softmax(scores, dim=-1)
        probs[..., r0:r1, :keys] = p
        probs[..., r0:r1, keys:] = 0
        np.matmul(p, v[..., :keys, :], out=out[..., r0:r1, :])
    return out, probs


def _attention_grad(ctx, grad_out, _):
    q, k, v, scale, is_causal = ctx.query, ctx.key, ctx.value, ctx.scale, ctx.is_causal
    if is_grad_enabled():
        return _composite_backward(grad_out, q, k, v, scale, is_causal)
    return dispatch(
        _attention_backward,
        (grad_out, q, k, v, ctx.out1),
        {"scale": scale, "is_causal": is_causal},
    )


def _composite_backward(grad_out, q, k, v, scale: float, is_causal: bool):
    """The backward in differentiable ops, for second derivatives: the probabilities are
    recomputed from q and k, since the saved ones are state, not a differentiable output."""
    probs = _probabilities(q, k, None, is_causal, scale)
    grad_scores = softmax_backward(grad_out.matmul(v.transpose(-2, -1)), probs, -1) * scale
    return (
        grad_scores.matmul(k),
        grad_scores.transpose(-2, -1).matmul(q),
        probs.transpose(-2, -1).matmul(grad_out),
    )


def _attention_onnx(g, q, k, v, *, scale, is_causal):
    """softmax(q k^T scale, causal keys masked) v, and the probabilities."""
    n = len(g.meta(k).shape)
    keys_t = g.op("Transpose", k, perm=[*range(n - 2), n - 1, n - 2])
    scores = g.op("MatMul", g.op("Mul", q, g.tensor(scale, q)), keys_t)
    if is_causal:  # keys after each query row, from the scores' own shape
        ones = g.op("Expand", g.tensor(1, q), g.op("Shape", scores))
        later = g.cast(g.op("Trilu", ones, g.ints(1), upper=1), dtypes.bool_)
        scores = g.op("Where", later, g.tensor(-np.inf, q), scores)
    probs = g.op("Softmax", scores, axis=-1)
    return g.op("MatMul", probs, v), probs


_attention = defop(
    "attention",
    inputs=("query", "key", "value"),
    meta=_attention_meta,
    sbp=_attention_sbp,
    kernels={"cpu": _attention_kernel},
    grad=_attention_grad,
    saves=("query", "key", "value", "out1"),
    n_out=2,
    state_outputs=(1,),  # the probabilities, for the backward op
    onnx=_attention_onnx,
)


# -- its backward op ------------------------------------------------------------------------------
# Per tile of query rows (only the keys they see): dP = dO V^T, dS = P (dP - rowsum(dP P))
# scale, dQ = dS K. Then per tile of keys (only the rows that see them, i >= j):
# dV = P^T dO, dK = dS^T Q, each written once (no accumulation across tiles).
def _attention_backward_meta(g: Meta, q: Meta, k: Meta, v: Meta, probs: Meta, *, scale, is_causal):
    expected = (*q.shape[:-1], v.shape[-1])
    if tuple(g.shape) != expected or g.dtype is not q.dtype:
        raise ShapeError(
            f"attention_backward: expected grad_out of shape {list(expected)} and dtype "
            f"{q.dtype.name}, got {list(g.shape)} and {g.dtype.name}"
        )
    return Meta(q.shape, q.dtype), Meta(k.shape, k.dtype), Meta(v.shape, v.dtype)


def _attention_backward_sbp(g: Meta, q, k, v, probs, *, scale, is_causal) -> list[Signature]:
    sigs = [Signature((S(a),) * 5, (S(a),) * 3) for a in range(len(q.shape) - 2)]
    return [*sigs, Signature((B,) * 5, (B,) * 3)]


def _attention_backward_kernel(g, q, k, v, probs, *, scale, is_causal):
    reject_unless(probs.shape == (*q.shape[:-1], k.shape[-2]), "attention_backward")
    n_rows, n_keys = q.shape[-2], k.shape[-2]
    grad_scores = np.empty(probs.shape, q.dtype)
    dq = np.empty_like(q)
    softmax_backward_kernel = kernel_for(_softmax_backward)
    for r0, r1, keys in _tiles(n_rows, n_keys, is_causal):
        grad_probs = np.matmul(g[..., r0:r1, :], _mT(v[..., :keys, :]))
        ds = softmax_backward_kernel(grad_probs, probs[..., r0:r1, :keys], dim=-1)
        ds *= q.dtype.type(scale)
        grad_scores[..., r0:r1, :keys] = ds
        grad_scores[..., r0:r1, keys:] = 0
        np.matmul(ds, k[..., :keys, :], out=dq[..., r0:r1, :])
    dk, dv = np.empty_like(k), np.empty_like(v)
    step = TILE if is_causal else n_keys
    for c0 in range(0, n_keys, step):
        c1, rows = min(c0 + step, n_keys), slice(min(c0, n_rows) if is_causal else 0, None)
        np.matmul(_mT(probs[..., rows, c0:c1]), g[..., rows, :], out=dv[..., c0:c1, :])
        np.matmul(_mT(grad_scores[..., rows, c0:c1]), q[..., rows, :], out=dk[..., c0:c1, :])
    return dq, dk, dv


_attention_backward = defop(
    "attention_backward",
    inputs=("grad_out", "query", "key", "value", "probs"),
    meta=_attention_backward_meta,
    sbp=_attention_backward_sbp,
    kernels={"cpu": _attention_backward_kernel},
    differentiable=False,  # second derivatives take the composite (see _attention_grad)
    n_out=3,
)


def attention_backward(grad_out, query, key, value, probs, scale, is_causal):
    """The gradients (query, key, value) of the fused attention given its probabilities, in
    one op. Internal (as PyTorch's _scaled_dot_product_*_backward): the grad rule and the op
    database call it."""
    return dispatch(
        _attention_backward,
        (grad_out, query, key, value, probs),
        {"scale": scale, "is_causal": is_causal},
    )
