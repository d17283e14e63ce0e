"""Multi-head attention as a function: `multi_head_attention_forward`, PyTorch's
computation of `nn.MultiheadAttention` on explicit weights, with its parameters, mask
conventions and numerics (the module in `nn.modules.attention` holds the weights).

Sequences are (L, N, E) unless `batch_first`. Masks are boolean (True = not allowed to attend)
or additive float; both kinds turn into one float mask added to the scores. With
`need_weights` the scores are computed explicitly so the attention weights can be returned;
otherwise the work goes to `scaled_dot_product_attention`.
"""

from __future__ import annotations

import math
import warnings

from ...framework import dtype as dtypes
from ...framework.errors import DTypeError, ShapeError, TideflowError
from ..creation import zeros, zeros_like
from ..linalg import baddbmm, bmm
from ..shape import cat
from .attention import scaled_dot_product_attention
from .dropout import dropout
from .linear import linear
from .padding import pad
from .softmax import softmax

__all__ = ["multi_head_attention_forward"]


def canonical_mask(mask, mask_name: str, other_type, other_name: str, target_type,
                   check_other: bool = True, *, layer: str | None = None):  # fmt: skip
    """A boolean mask (True = masked) as an additive float mask (-inf where masked) of
    `target_type`; float masks pass through. PyTorch warns when the two masks of one call
    differ in dtype, and so do we. `layer` prefixes the error message."""
    if mask is None:
        return None
    if mask.dtype is not dtypes.bool_ and not mask.dtype.is_floating_point:
        prefix = f"{layer}: " if layer else ""
        raise DTypeError(
            f"{prefix}only bool and floating types of {mask_name} are supported, got {mask.dtype}"
        )
    if check_other and other_type is not None and mask.dtype is not other_type:
        warnings.warn(
            f"Support for mismatched {mask_name} and {other_name} is deprecated. Use same "
            "type for both instead.",
            stacklevel=3,
        )
    if mask.dtype is dtypes.bool_:
        return zeros_like(mask, dtype=target_type).masked_fill(mask, -math.inf)
    return mask


def none_or_dtype(mask):
    """The dtype of an optional mask (None without one)."""
    return None if mask is None else mask.dtype


def _check_shapes(layer: str, query, key, value, key_padding_mask, attn_mask, num_heads: int,
                  separate_weights: bool, batch_first: bool) -> bool:  # fmt: skip
    """PyTorch's rank rules, and key/value lengths and batch sizes that agree, checked on the
    inputs as passed (`batch_first` says where their batch dim is). Returns whether the
    inputs are batched."""
    if query.ndim not in (2, 3):
        raise ShapeError(
            f"{layer}: query should be unbatched 2D or batched 3D tensor but received "
            f"{query.ndim}-D query tensor"
        )
    batched = query.ndim == 3
    kind, rank = ("batched (3-D)", 3) if batched else ("unbatched (2-D)", 2)
    if key.ndim != rank or value.ndim != rank:
        raise ShapeError(
            f"{layer}: For {kind} `query`, expected `key` and `value` to be {rank}-D but found "
            f"{key.ndim}-D and {value.ndim}-D tensors respectively"
        )
    if key_padding_mask is not None and key_padding_mask.ndim != rank - 1:
        raise ShapeError(
            f"{layer}: For {kind} `query`, expected `key_padding_mask` to be `None` or "
            f"{rank - 1}-D but found {key_padding_mask.ndim}-D tensor instead"
        )
    if attn_mask is not None:
        if attn_mask.ndim not in (2, 3):
            raise ShapeError(
                f"{layer}: For {kind} `query`, expected `attn_mask` to be `None`, 2-D or 3-D "
                f"but found {attn_mask.ndim}-D tensor instead"
            )
        expected = (num_heads, query.shape[0], key.shape[0])
        if not batched and attn_mask.ndim == 3 and tuple(attn_mask.shape) != expected:
            raise ShapeError(
                f"{layer}: Expected `attn_mask` shape to be {expected} but got "
                f"{list(attn_mask.shape)}"
            )
    if separate_weights:  # key and value may differ in their feature size (kdim, vdim)
        if key.shape[:-1] != value.shape[:-1]:
            raise ShapeError(
                f"{layer}: key's sequence and batch dims {list(key.shape[:-1])} do not match "
                f"value's {list(value.shape[:-1])} (key shape {list(key.shape)}, value shape "
                f"{list(value.shape)})"
            )
    elif key.shape != value.shape:
        raise ShapeError(
            f"{layer}: key shape {list(key.shape)} does not match value shape {list(value.shape)}"
        )
    batch_dim = 0 if batch_first else 1
    if batched and key.shape[batch_dim] != query.shape[batch_dim]:
        raise ShapeError(
            f"{layer}: query and key must have the same batch size (dim {batch_dim}), got "
            f"query of shape {list(query.shape)} and key of shape {list(key.shape)}"
        )
    return batched


def _seq_first(query, key, value) -> tuple:
    """Batch-first (N, L, E) inputs as (L, N, E). An input passed twice is transposed once, so
    `query is key is value` stays true for self-attention (one in-projection matmul)."""
    if key is value:
        if query is key:
            query = key = value = query.transpose(1, 0)
        else:
            query, key = (x.transpose(1, 0) for x in (query, key))
            value = key
        return query, key, value
    return tuple(x.transpose(1, 0) for x in (query, key, value))


def _in_projection(layer, query, key, value, in_proj_weight, in_proj_bias, separate_weights):
    """q, k, v = the inputs through their slices of the packed projection (or through the
    separate q/k/v weights); self-attention does it in one matmul."""
    b_q, b_k, b_v = (None,) * 3 if in_proj_bias is None else in_proj_bias.chunk(3)
    if separate_weights is not None:
        w_q, w_k, w_v = separate_weights
        embed_dim = query.shape[-1]
        for name, w, x in (("query", w_q, query), ("key", w_k, key), ("value", w_v, value)):
            if tuple(w.shape) != (embed_dim, x.shape[-1]):
                raise ShapeError(
                    f"{layer}: expecting {name} weights shape of {(embed_dim, x.shape[-1])}, "
                    f"but got {list(w.shape)}"
                )
        return linear(query, w_q, b_q), linear(key, w_k, b_k), linear(value, w_v, b_v)
    if query is key and key is value:
        return linear(query, in_proj_weight, in_proj_bias).chunk(3, -1)
    w_q, w_k, w_v = in_proj_weight.chunk(3)
    return linear(query, w_q, b_q), linear(key, w_k, b_k), linear(value, w_v, b_v)


def _check_attn_mask(layer: str, attn_mask, tgt_len: int, src_len: int, batch_heads: int):
    """The float mask as (1 or N * num_heads, L, S)."""
    if attn_mask.ndim == 2:
        if tuple(attn_mask.shape) != (tgt_len, src_len):
            raise ShapeError(
                f"{layer}: The shape of the 2D attn_mask is {list(attn_mask.shape)}, but should "
                f"be {(tgt_len, src_len)}."
            )
        return attn_mask.unsqueeze(0)
    if tuple(attn_mask.shape) != (batch_heads, tgt_len, src_len):
        raise ShapeError(
            f"{layer}: The shape of the 3D attn_mask is {list(attn_mask.shape)}, but should be "
            f"{(batch_heads, tgt_len, src_len)}."
        )
    return attn_mask


def _pad_key(mask):
    """One more key position, not masked (for bias_k/bias_v and add_zero_attn)."""
    return None if mask is None else pad(mask, (0, 1))


def _heads(x, length: int, batch_heads: int, head_dim: int):
    """(S, N, E) -> (N * num_heads, S, head_dim)."""
    return x.reshape(length, batch_heads, head_dim).transpose(0, 1)


def _static(layer: str, name: str, t, batch_heads: int, head_dim: int):
    if t.shape[0] != batch_heads or t.shape[2] != head_dim:
        raise ShapeError(
            f"{layer}: expecting {name} of shape ({batch_heads}, S, {head_dim}), got "
            f"{list(t.shape)}"
        )
    return t


def _attend(q, k, v, attn_mask, dropout_p: float, need_weights: bool, is_causal: bool,
            average_attn_weights: bool, bsz: int, num_heads: int):  # fmt: skip
    """Attention of the per-head q (N * num_heads, L, head_dim) to k and v: the heads'
    outputs as (L, N, E) rows and the attention weights (None without `need_weights`)."""
    tgt_len, head_dim = q.shape[1:]
    src_len = k.shape[1]
    if need_weights:
        scores_q = q * math.sqrt(1.0 / head_dim)
        if attn_mask is not None:
            scores = baddbmm(attn_mask, scores_q, k.transpose(-2, -1))
        else:
            scores = bmm(scores_q, k.transpose(-2, -1))
        weights = softmax(scores, dim=-1)
        if dropout_p > 0:  # NOTE: like PyTorch, the weights returned are the dropped-out ones
            weights = dropout(weights, dropout_p)
        attended = bmm(weights, v).transpose(0, 1)  # (L, N * num_heads, head_dim)
        weights = weights.view(bsz, num_heads, tgt_len, src_len)
        return attended, (weights.mean(dim=1) if average_attn_weights else weights)
    if attn_mask is not None:
        if attn_mask.shape[0] == 1:
            attn_mask = attn_mask.unsqueeze(0)
        else:
            attn_mask = attn_mask.view(bsz, num_heads, -1, src_len)
    q = q.view(bsz, num_heads, tgt_len, head_dim)
    k = k.view(bsz, num_heads, src_len, head_dim)
    v = v.view(bsz, num_heads, src_len, head_dim)
    attended = scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal)
    return attended.permute(2, 0, 1, 3), None  # (L, N, num_heads, head_dim)


def multi_head_attention_forward(
    query, key, value, embed_dim_to_check, num_heads, in_proj_weight, in_proj_bias, bias_k,
    bias_v, add_zero_attn, dropout_p, out_proj_weight, out_proj_bias, training=True,
    key_padding_mask=None, need_weights=True, attn_mask=None, use_separate_proj_weight=False,
    q_proj_weight=None, k_proj_weight=None, v_proj_weight=None, static_k=None, static_v=None,
    average_attn_weights=True, is_causal=False,
):  # fmt: skip
    """PyTorch's `F.multi_head_attention_forward`: the computation of `MultiheadAttention`
    on explicit weights. query (L, N, E), key (S, N, E_k), value (S, N, E_v), or unbatched
    without the N dim. Returns (attn_output (L, N, E), attn_weights (N, L, S) averaged over
    heads, (N, num_heads, L, S) per head, or None without `need_weights`).

    >>> q = flow.randn(5, 2, 8)
    >>> w, b = flow.randn(24, 8), flow.zeros(24)
    >>> out, weights = F.multi_head_attention_forward(
    ...     q, q, q, 8, 2, w, b, None, None, False, 0.0, flow.randn(8, 8), None)
    >>> out.shape, weights.shape
    (tideflow.Size([5, 2, 8]), tideflow.Size([2, 5, 5]))
    """
    return multi_head_attention(
        "multi_head_attention_forward", query, key, value, embed_dim_to_check, num_heads,
        in_proj_weight, in_proj_bias, bias_k, bias_v, add_zero_attn, dropout_p,
        out_proj_weight, out_proj_bias, training=training, key_padding_mask=key_padding_mask,
        need_weights=need_weights, attn_mask=attn_mask,
        use_separate_proj_weight=use_separate_proj_weight, q_proj_weight=q_proj_weight,
        k_proj_weight=k_proj_weight, v_proj_weight=v_proj_weight, static_k=static_k,
        static_v=static_v, average_attn_weights=average_attn_weights, is_causal=is_causal,
    )  # fmt: skip


def multi_head_attention(
    layer, query, key, value, embed_dim_to_check, num_heads, in_proj_weight, in_proj_bias,
    bias_k, bias_v, add_zero_attn, dropout_p, out_proj_weight, out_proj_bias, *, training,
    key_padding_mask, need_weights, attn_mask, use_separate_proj_weight, q_proj_weight,
    k_proj_weight, v_proj_weight, static_k, static_v, average_attn_weights, is_causal,
    batch_first=False,
):  # fmt: skip
    """`multi_head_attention_forward` for the caller `layer`, which its errors name, on
    inputs that are batch-first (N, L, E) when `batch_first` (and the output too)."""
    batched = _check_shapes(
        layer, query, key, value, key_padding_mask, attn_mask, num_heads,
        use_separate_proj_weight, batch_first,
    )  # fmt: skip
    if not batched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    elif batch_first:
        query, key, value = _seq_first(query, key, value)
    tgt_len, bsz, embed_dim = query.shape
    key_padding_mask = canonical_mask(
        key_padding_mask, "key_padding_mask", none_or_dtype(attn_mask), "attn_mask",
        query.dtype, layer=layer,
    )  # fmt: skip
    if is_causal and attn_mask is None:
        raise TideflowError(
            f"{layer}: Need attn_mask if specifying the is_causal hint. You may use the "
            "Transformer module method `generate_square_subsequent_mask` to create this mask."
        )
    if is_causal and key_padding_mask is None and not need_weights:
        # NOTE: like PyTorch, trust the hint: scaled_dot_product_attention masks causally.
        attn_mask = None
    else:
        attn_mask = canonical_mask(
            attn_mask, "attn_mask", None, "", query.dtype, False, layer=layer
        )
        if key_padding_mask is not None:
            is_causal = False  # the merged mask is not causal any more
    if embed_dim != embed_dim_to_check:
        raise ShapeError(
            f"{layer}: was expecting embedding dimension of {embed_dim_to_check}, but got "
            f"{embed_dim}"
        )
    head_dim = embed_dim // num_heads
    if head_dim * num_heads != embed_dim:
        raise ShapeError(f"{layer}: embed_dim {embed_dim} not divisible by num_heads {num_heads}")
    if use_separate_proj_weight:
        separate = (q_proj_weight, k_proj_weight, v_proj_weight)
        if any(w is None for w in separate):
            raise TideflowError(
                f"{layer}: use_separate_proj_weight is True but q_proj_weight, k_proj_weight "
                "or v_proj_weight is None"
            )
    else:
        if in_proj_weight is None:
            raise TideflowError(
                f"{layer}: use_separate_proj_weight is False but in_proj_weight is None"
            )
        separate = None
    q, k, v = _in_projection(layer, query, key, value, in_proj_weight, in_proj_bias, separate)

    batch_heads = bsz * num_heads
    if attn_mask is not None:
        attn_mask = _check_attn_mask(layer, attn_mask, tgt_len, key.shape[0], batch_heads)
    if (bias_k is None) != (bias_v is None):
        raise TideflowError(f"{layer}: bias_k and bias_v must be given together")
    if bias_k is not None:
        if static_k is not None or static_v is not None:
            raise TideflowError(f"{layer}: bias cannot be added to static key or value.")
        k = cat([k, bias_k.repeat(1, bsz, 1)])
        v = cat([v, bias_v.repeat(1, bsz, 1)])
        attn_mask, key_padding_mask = _pad_key(attn_mask), _pad_key(key_padding_mask)

    q = _heads(q, tgt_len, batch_heads, head_dim)
    k = _heads(k, k.shape[0], batch_heads, head_dim) if static_k is None else (
        _static(layer, "static_k", static_k, batch_heads, head_dim))  # fmt: skip
    v = _heads(v, v.shape[0], batch_heads, head_dim) if static_v is None else (
        _static(layer, "static_v", static_v, batch_heads, head_dim))  # fmt: skip
    if add_zero_attn:
        k = cat([k, zeros(batch_heads, 1, head_dim, dtype=k.dtype, device=k.device)], 1)
        v = cat([v, zeros(batch_heads, 1, head_dim, dtype=v.dtype, device=v.device)], 1)
        attn_mask, key_padding_mask = _pad_key(attn_mask), _pad_key(key_padding_mask)
    src_len = k.shape[1]

    if key_padding_mask is not None:
        if tuple(key_padding_mask.shape) != (bsz, src_len):
            raise ShapeError(
                f"{layer}: Expected key_padding_mask of shape {(bsz, src_len)} (batch, source "
                f"length), but got {list(key_padding_mask.shape)}"
            )
        per_head = key_padding_mask.view(bsz, 1, 1, src_len).expand(-1, num_heads, -1, -1)
        per_head = per_head.reshape(batch_heads, 1, src_len)
        attn_mask = per_head if attn_mask is None else attn_mask + per_head

    attended, weights = _attend(
        q, k, v, attn_mask, dropout_p if training else 0.0, need_weights, is_causal,
        average_attn_weights, bsz, num_heads,
    )  # fmt: skip
    attended = attended.reshape(tgt_len * bsz, embed_dim)
    out = linear(attended, out_proj_weight, out_proj_bias).view(tgt_len, bsz, -1)
    if not batched:
        return out.squeeze(1), (None if weights is None else weights.squeeze(0))
    return (out.transpose(1, 0) if batch_first else out), weights
