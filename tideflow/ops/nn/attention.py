"""Attention: scaled_dot_product_attention, a composite of matmul, (safe) softmax and dropout."""

from __future__ import annotations

import math

from ...framework import dtype as dtypes
from ...framework.errors import DTypeError, ShapeError, TideflowError
from ...framework.tensor import Tensor
from .. import binary
from .._rules import checked, dispatch
from ..creation import on_placement_of, ones
from .dropout import dropout
from .softmax import safe_softmax

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
    dtype = query.dtype
    if dtype in (dtypes.float16, dtypes.bfloat16):
        # NOTE: like PyTorch's fused CPU kernel: half inputs are computed in float32, rounded once.
        query, key, value = query.float(), key.float(), value.float()
    if enable_gqa:
        groups = query.shape[-3] // key.shape[-3]
        key = key.repeat_interleave(groups, -3)
        value = value.repeat_interleave(groups, -3)
    if scale is None:
        scale = 1.0 / math.sqrt(query.shape[-1])
    scores = (query * scale).matmul(key.transpose(-2, -1))
    if is_causal:
        size = (query.shape[-2], key.shape[-2])
        attn_mask = ones(*size, dtype=dtypes.bool_, **on_placement_of(query)).tril()
    if attn_mask is not None:
        if attn_mask.dtype is dtypes.bool_:
            scores = binary.where(attn_mask, scores, -math.inf)
        else:
            scores = scores + attn_mask
    attn = dispatch(safe_softmax, (scores,), {"dim": scores.ndim - 1})
    if dropout_p > 0:
        attn = dropout(attn, dropout_p)
    return attn.matmul(value).to(dtype)
