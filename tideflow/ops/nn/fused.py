"""OneFlow's fused functional ops (`flow._C.fused_*`) as compositions of tideflow ops, with
OneFlow's argument names. On GPUs OneFlow runs each as one kernel; here they are the unfused
programs those kernels stand for, so their gradients (of every order) come from the parts and
a compiled graph may fuse their elementwise steps itself.

Dropout draws from tideflow's default generator: a `generator` other than None is refused
rather than ignored.
"""

from __future__ import annotations

from ...framework.dtype import bool_
from ...framework.errors import ArgumentError, ShapeError
from .._rules import normalize_dim
from ..activation import gelu
from ..binary import where
from ..creation import ones_like
from .dropout import dropout
from .linear import linear
from .softmax import softmax

__all__ = [
    "fused_bias_add_dropout",
    "fused_bias_add_gelu",
    "fused_matmul_bias",
    "fused_scale_mask_softmax",
    "fused_scale_mask_softmax_dropout",
    "fused_scale_tril_softmax_mask_scale",
    "fused_self_attention",
]


def bias_along(op: str, x, bias, axis: int):
    """`bias` (1-d, as long as `x`'s dim `axis`) shaped to broadcast along that dim of `x`:
    OneFlow's `bias_add`."""
    axis = normalize_dim(op, axis, x.ndim)
    if bias.ndim != 1 or bias.shape[0] != x.shape[axis]:
        raise ShapeError(
            f"{op}: expected a bias of shape [{x.shape[axis]}] (dim {axis} of the input "
            f"{list(x.shape)}), got {list(bias.shape)}"
        )
    return bias.reshape((-1,) + (1,) * (x.ndim - axis - 1))


def default_generator_only(op: str, generator) -> None:
    if generator is not None:
        raise ArgumentError(
            f"{op}: generator= is not supported (dropout draws from the default generator; "
            f"seed it with flow.manual_seed)"
        )


def fused_bias_add_gelu(a, b, *, axis):
    """`gelu(a + b)` with the 1-d bias `b` added along dim `axis` of `a` (GELU's erf form).

    >>> flow._C.fused_bias_add_gelu(flow.tensor([[-1.0, 0.0, 1.0]]), flow.ones(3), axis=1)
    tensor([[0.0000, 0.8413, 1.9545]])
    """
    return gelu(a + bias_along("fused_bias_add_gelu", a, b, axis))


def fused_bias_add_dropout(a, b, *, p=0.5, axis, generator=None):
    """`dropout(a + b, p)` with the 1-d bias `b` added along dim `axis` of `a`."""
    default_generator_only("fused_bias_add_dropout", generator)
    return dropout(a + bias_along("fused_bias_add_dropout", a, b, axis), p)


def _scaled_softmax_dropout(keep, x, scale, fill_value, p, training):
    """(dropout(softmax(x * scale where `keep`, else fill_value)), that softmax), along the
    last dim."""
    softmax_y = softmax(where(keep, x * scale, fill_value), dim=-1)
    return dropout(softmax_y, p, training), softmax_y


def fused_scale_tril_softmax_mask_scale(
    a, *, p=0.5, diagonal=0, tril_scale_value=1.0, tril_fill_value=0.0, generator=None
):
    """Causal attention weights: `a * tril_scale_value` on and below `diagonal` of its last two
    dims, `tril_fill_value` above it, softmax along the last dim, then dropout with `p`.
    Returns `(y, softmax_y)`: the weights after and before dropout.

    >>> y, _ = flow._C.fused_scale_tril_softmax_mask_scale(flow.randn(2, 4, 4), p=0.1)
    """
    default_generator_only("fused_scale_tril_softmax_mask_scale", generator)
    keep = ones_like(a, dtype=bool_).tril(diagonal)
    return _scaled_softmax_dropout(keep, a, tril_scale_value, tril_fill_value, p, True)


def fused_scale_mask_softmax(x, mask, *, fill_value=0.0, scale=1.0):
    """`softmax(x * scale)` along the last dim, with `fill_value` where `mask` is 0/False
    (`mask` broadcasts against `x`)."""
    return softmax(where(mask != 0, x * scale, fill_value), dim=-1)


def fused_scale_mask_softmax_dropout(
    x, mask, *, fill_value=0.0, scale=1.0, p=0.5, training=True, generator=None
):
    """`fused_scale_mask_softmax` followed by dropout; returns `(y, softmax_y)`."""
    default_generator_only("fused_scale_mask_softmax_dropout", generator)
    return _scaled_softmax_dropout(mask != 0, x, scale, fill_value, p, training)


def fused_matmul_bias(x, weight, bias, _add_to_output=None):
    """`x @ weight.T + bias` (a linear layer, `weight` of shape (out, in)), plus
    `_add_to_output` when given (a residual added in the same kernel on GPUs)."""
    y = linear(x, weight, bias)
    return y if _add_to_output is None else y + _add_to_output


def fused_self_attention(hidden_states, head_size=8, alpha=1.0):
    """Attention scores and values from packed projections: `hidden_states` of shape
    (seq, batch, heads * 3 * head_size) holds each head's query, key and value side by side.
    Returns `(alpha * q @ k^T, v)` of shapes (batch, heads, seq, seq) and
    (batch, heads, seq, head_size).

    >>> qmk, v = flow._C.fused_self_attention(flow.randn(5, 2, 4 * 3 * 8), head_size=8)
    """
    op = "fused_self_attention"
    shape = tuple(hidden_states.shape)
    if len(shape) != 3 or head_size <= 0 or shape[2] % (3 * head_size):
        raise ShapeError(
            f"{op}: expected hidden_states of shape (seq, batch, heads * 3 * {head_size}), "
            f"got {list(shape)}"
        )
    seq, batch, _ = shape
    heads = hidden_states.reshape(seq, batch, -1, 3 * head_size).permute(1, 2, 0, 3)
    q, k, v = heads.split(head_size, dim=-1)
    return (q @ k.transpose(-2, -1)) * alpha, v
