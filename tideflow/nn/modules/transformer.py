"""The Transformer family: encoder and decoder layers, their stacks, and the full
encoder-decoder `Transformer` of "Attention Is All You Need", with PyTorch's submodule names
(self_attn, multihead_attn, linear1/2, norm1/2/3, dropout/dropout1/2/3), state_dict keys,
initialization, mask handling and post-norm / pre-norm (`norm_first`) variants.

PyTorch's fused inference fast paths and nested tensors change speed, not results; every call
here takes the path PyTorch takes in training.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable

from ...compiler.lazy import is_lazy
from ...framework.errors import ShapeError, TideflowError
from ...framework.tensor import Tensor
from ...ops.creation import full
from ...ops.nn.multi_head_attention import canonical_mask, none_or_dtype
from ...ops.shape import triu
from .. import functional as F
from .. import init
from .attention import MultiheadAttention
from .container import ModuleList
from .dropout import Dropout
from .linear import Linear
from .module import Module
from .normalization import LayerNorm

__all__ = [
    "Transformer",
    "TransformerEncoder",
    "TransformerDecoder",
    "TransformerEncoderLayer",
    "TransformerDecoderLayer",
]


def _generate_square_subsequent_mask(sz: int, device=None, dtype=None) -> Tensor:
    return triu(full((sz, sz), -math.inf, dtype=dtype, device=device), diagonal=1)


def _activation_fn(activation) -> Callable[[Tensor], Tensor]:
    if not isinstance(activation, str):
        return activation
    if activation == "relu":
        return F.relu
    if activation == "gelu":
        return F.gelu
    raise TideflowError(f"activation should be relu/gelu, not {activation}")


def _seq_len(x: Tensor, batch_first: bool) -> int:
    return x.shape[0] if x.ndim == 2 else x.shape[1 if batch_first else 0]


def _detect_is_causal_mask(mask, is_causal: bool | None, size: int | None) -> bool:
    """`is_causal` when given; otherwise whether `mask` equals the square subsequent mask."""
    if is_causal is not None or mask is None:
        return is_causal is True
    sz = size if size is not None else mask.shape[-2]
    causal = _generate_square_subsequent_mask(sz, device=mask.device, dtype=mask.dtype)
    # NOTE: traced in a graph (or an ONNX export) the values are unknown; the mask is applied
    # either way, the fast causal path only skips it
    if tuple(mask.shape) != (sz, sz) or is_lazy(mask) or is_lazy(causal):
        return False
    return bool((mask == causal).all())


def _clones(module: Module, n: int) -> ModuleList:
    return ModuleList([copy.deepcopy(module) for _ in range(n)])


class TransformerEncoderLayer(Module):
    """Self-attention then a feed-forward block (linear1 -> activation -> dropout ->
    linear2), each wrapped in dropout, a residual connection and LayerNorm: after the
    residual by default, before the block with `norm_first` (pre-norm).

    >>> layer = flow.nn.TransformerEncoderLayer(d_model=16, nhead=4, dim_feedforward=32)
    >>> layer(flow.randn(10, 2, 16)).shape
    tideflow.Size([10, 2, 16])
    """

    def __init__(
        self, d_model: int, nhead: int, dim_feedforward: int = 2048, dropout: float = 0.1,
        activation: str | Callable[[Tensor], Tensor] = F.relu, layer_norm_eps: float = 1e-5,
        batch_first: bool = False, norm_first: bool = False, bias: bool = True, device=None,
        dtype=None,
    ) -> None:  # fmt: skip
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.self_attn = MultiheadAttention(
            d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first, **factory
        )
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **factory)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **factory)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.activation = _activation_fn(activation)

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        """src (S, N, E) ((N, S, E) with batch_first, (S, E) unbatched); src_mask (S, S) or
        (N * nhead, S, S) and src_key_padding_mask (N, S), boolean (True = masked) or
        additive float; `is_causal` hints that src_mask is the causal mask."""
        src_key_padding_mask = canonical_mask(
            src_key_padding_mask, "src_key_padding_mask", none_or_dtype(src_mask),
            "src_mask", src.dtype,
        )  # fmt: skip
        src_mask = canonical_mask(src_mask, "src_mask", None, "", src.dtype, False)
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
            x = self.norm2(x + self._ff_block(x))
        return x

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal):
        x = self.self_attn(
            x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
            need_weights=False, is_causal=is_causal,
        )[0]  # fmt: skip
        return self.dropout1(x)

    def _ff_block(self, x):
        x = self.linear2(self.dropout(self.activation(self.linear1(x))))
        return self.dropout2(x)


class TransformerDecoderLayer(Module):
    """Self-attention over the target, attention to the encoder's output (`memory`), and a
    feed-forward block, each with dropout, a residual connection and LayerNorm (post-norm,
    or pre-norm with `norm_first`).

    >>> layer = flow.nn.TransformerDecoderLayer(d_model=16, nhead=4, dim_feedforward=32)
    >>> layer(flow.randn(7, 2, 16), flow.randn(10, 2, 16)).shape
    tideflow.Size([7, 2, 16])
    """

    def __init__(
        self, d_model: int, nhead: int, dim_feedforward: int = 2048, dropout: float = 0.1,
        activation: str | Callable[[Tensor], Tensor] = F.relu, layer_norm_eps: float = 1e-5,
        batch_first: bool = False, norm_first: bool = False, bias: bool = True, device=None,
        dtype=None,
    ) -> None:  # fmt: skip
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        attention = {"dropout": dropout, "batch_first": batch_first, "bias": bias, **factory}
        self.self_attn = MultiheadAttention(d_model, nhead, **attention)
        self.multihead_attn = MultiheadAttention(d_model, nhead, **attention)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **factory)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **factory)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory)
        self.norm3 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.dropout3 = Dropout(dropout)
        self.activation = _activation_fn(activation)

    def forward(
        self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
        memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False,
    ):  # fmt: skip
        """tgt (T, N, E) and memory (S, N, E) ((N, ·, E) with batch_first); tgt_mask (T, T),
        memory_mask (T, S) and the key padding masks (N, T), (N, S) as in
        MultiheadAttention."""
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal)
            x = x + self._mha_block(
                self.norm2(x), memory, memory_mask, memory_key_padding_mask, memory_is_causal
            )
            x = x + self._ff_block(self.norm3(x))
        else:
            x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
            x = self.norm2(
                x + self._mha_block(
                    x, memory, memory_mask, memory_key_padding_mask, memory_is_causal
                )
            )  # fmt: skip
            x = self.norm3(x + self._ff_block(x))
        return x

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal):
        x = self.self_attn(
            x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
            is_causal=is_causal, need_weights=False,
        )[0]  # fmt: skip
        return self.dropout1(x)

    def _mha_block(self, x, mem, attn_mask, key_padding_mask, is_causal):
        x = self.multihead_attn(
            x, mem, mem, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
            is_causal=is_causal, need_weights=False,
        )[0]  # fmt: skip
        return self.dropout2(x)

    def _ff_block(self, x):
        x = self.linear2(self.dropout(self.activation(self.linear1(x))))
        return self.dropout3(x)


class TransformerEncoder(Module):
    """`num_layers` copies of `encoder_layer` (deep copies, so each has its own
    parameters), then the optional `norm`. `enable_nested_tensor` and `mask_check` select
    PyTorch's nested-tensor fast path; they are kept as attributes and change nothing here.

    >>> layer = flow.nn.TransformerEncoderLayer(d_model=16, nhead=4, dim_feedforward=32)
    >>> encoder = flow.nn.TransformerEncoder(layer, num_layers=2)
    >>> encoder(flow.randn(10, 2, 16)).shape
    tideflow.Size([10, 2, 16])
    """

    def __init__(
        self, encoder_layer: Module, num_layers: int, norm: Module | None = None,
        enable_nested_tensor: bool = True, mask_check: bool = True,
    ) -> None:  # fmt: skip
        super().__init__()
        self.layers = _clones(encoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm
        self.enable_nested_tensor = enable_nested_tensor
        self.mask_check = mask_check

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        """Runs the layers in turn. `is_causal=None` detects whether `mask` is the square
        subsequent mask; True/False state it."""
        src_key_padding_mask = canonical_mask(
            src_key_padding_mask, "src_key_padding_mask", none_or_dtype(mask), "mask",
            src.dtype,
        )  # fmt: skip
        mask = canonical_mask(mask, "mask", None, "", src.dtype, False)
        batch_first = self.layers[0].self_attn.batch_first
        is_causal = _detect_is_causal_mask(mask, is_causal, _seq_len(src, batch_first))
        output = src
        for layer in self.layers:
            output = layer(
                output, src_mask=mask, is_causal=is_causal,
                src_key_padding_mask=src_key_padding_mask,
            )  # fmt: skip
        return output if self.norm is None else self.norm(output)


class TransformerDecoder(Module):
    """`num_layers` copies of `decoder_layer`, each attending to the same `memory`, then the
    optional `norm`.

    >>> layer = flow.nn.TransformerDecoderLayer(d_model=16, nhead=4, dim_feedforward=32)
    >>> decoder = flow.nn.TransformerDecoder(layer, num_layers=2)
    >>> decoder(flow.randn(7, 2, 16), flow.randn(10, 2, 16)).shape
    tideflow.Size([7, 2, 16])
    """

    def __init__(self, decoder_layer: Module, num_layers: int, norm: Module | None = None):
        super().__init__()
        self.layers = _clones(decoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(
        self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
        memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False,
    ):  # fmt: skip
        """Runs the layers in turn; `tgt_is_causal=None` detects a causal `tgt_mask`."""
        batch_first = self.layers[0].self_attn.batch_first
        tgt_is_causal = _detect_is_causal_mask(tgt_mask, tgt_is_causal, _seq_len(tgt, batch_first))
        output = tgt
        for layer in self.layers:
            output = layer(
                output, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                tgt_key_padding_mask=tgt_key_padding_mask,
                memory_key_padding_mask=memory_key_padding_mask,
                tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal,
            )  # fmt: skip
        return output if self.norm is None else self.norm(output)


class Transformer(Module):
    """The encoder-decoder Transformer: `encoder` (TransformerEncoder with a final
    LayerNorm) over `src`, then `decoder` over `tgt` attending to the encoder's output.
    Weight matrices start from xavier_uniform_. `custom_encoder`/`custom_decoder` replace
    the stacks.

    >>> model = flow.nn.Transformer(d_model=16, nhead=4, num_encoder_layers=2,
    ...                             num_decoder_layers=2, dim_feedforward=32)
    >>> src, tgt = flow.randn(10, 2, 16), flow.randn(7, 2, 16)
    >>> mask = flow.nn.Transformer.generate_square_subsequent_mask(7)
    >>> model(src, tgt, tgt_mask=mask).shape
    tideflow.Size([7, 2, 16])
    """

    def __init__(
        self, d_model: int = 512, nhead: int = 8, num_encoder_layers: int = 6,
        num_decoder_layers: int = 6, dim_feedforward: int = 2048, dropout: float = 0.1,
        activation: str | Callable[[Tensor], Tensor] = F.relu, custom_encoder=None,
        custom_decoder=None, layer_norm_eps: float = 1e-5, batch_first: bool = False,
        norm_first: bool = False, bias: bool = True, device=None, dtype=None,
    ) -> None:  # fmt: skip
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        layer_args = (d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps,
                      batch_first, norm_first, bias)  # fmt: skip
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            self.encoder = TransformerEncoder(
                TransformerEncoderLayer(*layer_args, **factory),
                num_encoder_layers,
                LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory),
            )
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            self.decoder = TransformerDecoder(
                TransformerDecoderLayer(*layer_args, **factory),
                num_decoder_layers,
                LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory),
            )
        self._reset_parameters()
        self.d_model = d_model
        self.nhead = nhead
        self.batch_first = batch_first

    def forward(
        self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None,
        src_key_padding_mask=None, tgt_key_padding_mask=None, memory_key_padding_mask=None,
        src_is_causal=None, tgt_is_causal=None, memory_is_causal=False,
    ):  # fmt: skip
        """src (S, N, E), tgt (T, N, E) ((N, ·, E) with batch_first; unbatched without N).
        Masks as in the encoder and decoder layers; returns (T, N, E)."""
        batch_dim = 0 if self.batch_first else 1
        if src.ndim == 3 and src.shape[batch_dim] != tgt.shape[batch_dim]:
            raise ShapeError(
                "the batch number of src and tgt must be equal, got src of shape "
                f"{list(src.shape)} and tgt of shape {list(tgt.shape)}"
            )
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise ShapeError(
                f"the feature number of src and tgt must be equal to d_model ({self.d_model}), "
                f"got src of shape {list(src.shape)} and tgt of shape {list(tgt.shape)}"
            )
        memory = self.encoder(
            src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
            is_causal=src_is_causal,
        )  # fmt: skip
        return self.decoder(
            tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
            tgt_key_padding_mask=tgt_key_padding_mask,
            memory_key_padding_mask=memory_key_padding_mask, tgt_is_causal=tgt_is_causal,
            memory_is_causal=memory_is_causal,
        )  # fmt: skip

    @staticmethod
    def generate_square_subsequent_mask(sz: int, device=None, dtype=None) -> Tensor:
        """The (sz, sz) causal mask: -inf above the diagonal (future positions), 0 elsewhere.

        >>> flow.nn.Transformer.generate_square_subsequent_mask(3)
        tensor([[0., -inf, -inf],
                [0., 0., -inf],
                [0., 0., 0.]])
        """
        return _generate_square_subsequent_mask(sz, device=device, dtype=dtype)

    def _reset_parameters(self) -> None:
        for p in self.parameters():
            if p.ndim > 1:
                init.xavier_uniform_(p)
