"""`nn.MultiheadAttention`: the module holding multi-head attention's weights; the computation
is `F.multi_head_attention_forward` (ops/nn/multi_head_attention.py)."""

from __future__ import annotations

from ...ops.creation import empty
from ...ops.nn.multi_head_attention import multi_head_attention
from .. import init
from ..parameter import Parameter
from .linear import Linear
from .module import Module

__all__ = ["MultiheadAttention"]


class MultiheadAttention(Module):
    """Attention from `query` to `key`/`value` in `num_heads` parallel heads of size
    embed_dim // num_heads: in-projection (`in_proj_weight` (3E, E), or `q/k/v_proj_weight`
    when kdim/vdim differ from embed_dim), scaled dot-product attention per head, and
    `out_proj`. Optional learned key/value biases (`add_bias_kv`) and an all-zero key/value
    (`add_zero_attn`) extend the source by one position each. Dropout applies to the
    attention weights in training.

    forward(query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
    average_attn_weights=True, is_causal=False) -> (attn_output, attn_weights or None).

    >>> mha = flow.nn.MultiheadAttention(16, 4, batch_first=True)
    >>> x = flow.randn(2, 5, 16)
    >>> out, weights = mha(x, x, x)
    >>> out.shape, weights.shape
    (tideflow.Size([2, 5, 16]), tideflow.Size([2, 5, 5]))
    """

    def __init__(
        self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False,
        add_zero_attn=False, kdim=None, vdim=None, batch_first=False, device=None, dtype=None,
    ) -> None:  # fmt: skip
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(
                "embed_dim and num_heads must be greater than 0, got "
                f"embed_dim={embed_dim} and num_heads={num_heads} instead"
            )
        if embed_dim % num_heads:
            raise ValueError(
                f"embed_dim must be divisible by num_heads, got embed_dim={embed_dim} and "
                f"num_heads={num_heads}"
            )
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        if self._qkv_same_embed_dim:
            self.in_proj_weight = Parameter(empty((3 * embed_dim, embed_dim), **factory))
            for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                self.register_parameter(name, None)
        else:
            self.q_proj_weight = Parameter(empty((embed_dim, embed_dim), **factory))
            self.k_proj_weight = Parameter(empty((embed_dim, self.kdim), **factory))
            self.v_proj_weight = Parameter(empty((embed_dim, self.vdim), **factory))
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(empty(3 * embed_dim, **factory))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias, **factory)
        if add_bias_kv:
            self.bias_k = Parameter(empty((1, 1, embed_dim), **factory))
            self.bias_v = Parameter(empty((1, 1, embed_dim), **factory))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            init.xavier_uniform_(self.q_proj_weight)
            init.xavier_uniform_(self.k_proj_weight)
            init.xavier_uniform_(self.v_proj_weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
            init.xavier_normal_(self.bias_v)

    def forward(
        self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
        average_attn_weights=True, is_causal=False,
    ):  # fmt: skip
        """query (L, N, E) ((N, L, E) with batch_first, (L, E) unbatched), key/value
        (S, N, kdim/vdim). key_padding_mask (N, S) and attn_mask (L, S) or
        (N * num_heads, L, S): True (bool) or the added float marks what is not attended."""
        return multi_head_attention(
            "MultiheadAttention", query, key, value, self.embed_dim, self.num_heads,
            self.in_proj_weight, self.in_proj_bias, self.bias_k, self.bias_v,
            self.add_zero_attn, self.dropout, self.out_proj.weight, self.out_proj.bias,
            training=self.training, key_padding_mask=key_padding_mask,
            need_weights=need_weights, attn_mask=attn_mask,
            use_separate_proj_weight=not self._qkv_same_embed_dim,
            q_proj_weight=self.q_proj_weight, k_proj_weight=self.k_proj_weight,
            v_proj_weight=self.v_proj_weight, static_k=None, static_v=None,
            average_attn_weights=average_attn_weights, is_causal=is_causal,
            batch_first=self.batch_first,
        )  # fmt: skip
