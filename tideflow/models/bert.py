"""BERT (Devlin et al., 2018): a bidirectional transformer encoder with post-LayerNorm
blocks, word + position + token-type embeddings and a pooler; optionally a masked-LM head.
Module and parameter names follow Hugging Face's `BertModel`, so its state dicts map
key for key."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from .. import nn
from ..framework import dtype as dtypes
from ..framework.errors import ShapeError
from ..framework.grad_mode import no_grad
from ..framework.tensor import Tensor
from ..nn import functional as F
from ..nn import init
from ..nn.parameter import Parameter
from ..ops.creation import arange, zeros

_ACTIVATIONS = {
    "gelu": lambda: nn.GELU(),
    "gelu_new": lambda: nn.GELU(approximate="tanh"),
    "relu": lambda: nn.ReLU(),
}


@dataclass
class BertConfig:
    """The sizes of a BERT. The defaults are BERT-base's (110M parameters).

    >>> flow.models.BertConfig(hidden_size=64, num_attention_heads=4).intermediate_size
    3072
    """

    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"  # "gelu", "gelu_new" (tanh approximation) or "relu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12
    pad_token_id: int = 0

    def __post_init__(self) -> None:
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"BertConfig: hidden_size ({self.hidden_size}) must be divisible by "
                f"num_attention_heads ({self.num_attention_heads})"
            )
        if self.hidden_act not in _ACTIVATIONS:
            raise ValueError(
                f"BertConfig: hidden_act must be one of {sorted(_ACTIVATIONS)}, "
                f"got {self.hidden_act!r}"
            )


class BertEmbeddings(nn.Module):
    """Sum of word, position and token-type embeddings, then LayerNorm and dropout."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(
            config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id
        )
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, input_ids, token_type_ids=None):
        seq_len = input_ids.shape[1]
        if seq_len > self.position_embeddings.num_embeddings:
            raise ShapeError(
                f"BERT: cannot embed a sequence of length {seq_len}, max_position_embeddings "
                f"is only {self.position_embeddings.num_embeddings}"
            )
        if token_type_ids is None:
            token_type_ids = zeros(input_ids.shape, dtype=dtypes.int64)
        positions = arange(seq_len, dtype=dtypes.int64)
        x = (
            self.word_embeddings(input_ids)
            + self.position_embeddings(positions)
            + self.token_type_embeddings(token_type_ids)
        )
        return self.dropout(self.LayerNorm(x))


class BertSelfAttention(nn.Module):
    """Bidirectional multi-head attention with separate query, key and value projections."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.num_attention_heads = config.num_attention_heads
        self.query = nn.Linear(config.hidden_size, config.hidden_size)
        self.key = nn.Linear(config.hidden_size, config.hidden_size)
        self.value = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout_prob = config.attention_probs_dropout_prob

    def forward(self, hidden_states, attention_mask=None):
        b, t, c = hidden_states.shape
        heads = self.num_attention_heads

        def split_heads(x):  # (B, T, C) -> (B, heads, T, C / heads)
            return x.view(b, t, heads, c // heads).transpose(1, 2)

        y = F.scaled_dot_product_attention(
            split_heads(self.query(hidden_states)),
            split_heads(self.key(hidden_states)),
            split_heads(self.value(hidden_states)),
            attn_mask=attention_mask,
            dropout_p=self.dropout_prob if self.training else 0.0,
        )
        return y.transpose(1, 2).reshape(b, t, c)


class BertSelfOutput(nn.Module):
    """Output projection of the attention, dropout, then the post-LN residual."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, hidden_states, input_tensor):
        return self.LayerNorm(self.dropout(self.dense(hidden_states)) + input_tensor)


class BertAttention(nn.Module):
    """`LayerNorm(x + dropout(dense(self_attention(x))))`."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.self = BertSelfAttention(config)
        self.output = BertSelfOutput(config)

    def forward(self, hidden_states, attention_mask=None):
        return self.output(self.self(hidden_states, attention_mask), hidden_states)


class BertIntermediate(nn.Module):
    """The first half of the feed-forward network: hidden -> intermediate, activation."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.intermediate_size)
        self.intermediate_act_fn = _ACTIVATIONS[config.hidden_act]()

    def forward(self, hidden_states):
        return self.intermediate_act_fn(self.dense(hidden_states))


class BertOutput(nn.Module):
    """The second half: intermediate -> hidden, dropout, then the post-LN residual."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(config.intermediate_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, hidden_states, input_tensor):
        return self.LayerNorm(self.dropout(self.dense(hidden_states)) + input_tensor)


class BertLayer(nn.Module):
    """One encoder layer: attention block, then feed-forward block, each post-LN."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.attention = BertAttention(config)
        self.intermediate = BertIntermediate(config)
        self.output = BertOutput(config)

    def forward(self, hidden_states, attention_mask=None):
        attended = self.attention(hidden_states, attention_mask)
        return self.output(self.intermediate(attended), attended)


class BertEncoder(nn.Module):
    """`num_hidden_layers` BertLayers in sequence."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.layer = nn.ModuleList(BertLayer(config) for _ in range(config.num_hidden_layers))

    def forward(self, hidden_states, attention_mask=None):
        for layer in self.layer:
            hidden_states = layer(hidden_states, attention_mask)
        return hidden_states


class BertPooler(nn.Module):
    """`tanh(dense(h[:, 0]))`: a sequence summary from the first ([CLS]) position."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.activation = nn.Tanh()

    def forward(self, hidden_states):
        return self.activation(self.dense(hidden_states[:, 0]))


class BertModelOutput(NamedTuple):
    """What BertModel returns: the last layer's states and the pooled summary."""

    last_hidden_state: Tensor  # (B, T, hidden_size)
    pooler_output: Tensor | None  # (B, hidden_size), or None without a pooler


class BertModel(nn.Module):
    """The BERT encoder. `forward(input_ids, attention_mask=None, token_type_ids=None)` takes
    token indices (B, T), optionally a (B, T) mask (nonzero / True = a real token, 0 = padding
    that no position attends to) and segment ids (B, T) (default all 0), and returns
    `BertModelOutput(last_hidden_state, pooler_output)`, a named tuple.

    >>> config = flow.models.BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2,
    ...                                 num_attention_heads=4, intermediate_size=64)
    >>> out = flow.models.BertModel(config)(flow.randint(0, 100, (2, 7)))
    >>> out.last_hidden_state.shape, out.pooler_output.shape
    (tideflow.Size([2, 7, 32]), tideflow.Size([2, 32]))
    """

    def __init__(self, config: BertConfig, add_pooling_layer: bool = True) -> None:
        super().__init__()
        self.config = config
        self.embeddings = BertEmbeddings(config)
        self.encoder = BertEncoder(config)
        self.pooler = BertPooler(config) if add_pooling_layer else None
        self.apply(lambda m: _init_weights(m, config.initializer_range))

    def forward(self, input_ids, attention_mask=None, token_type_ids=None):
        if attention_mask is not None:
            if tuple(attention_mask.shape) != tuple(input_ids.shape):
                raise ShapeError(
                    f"BERT: attention_mask must have the shape of input_ids "
                    f"{list(input_ids.shape)}, got {list(attention_mask.shape)}"
                )
            # (B, T) -> (B, 1, 1, T): every query position and head sees the same keys.
            attention_mask = attention_mask.bool()[:, None, None, :]
        hidden = self.encoder(self.embeddings(input_ids, token_type_ids), attention_mask)
        pooled = self.pooler(hidden) if self.pooler is not None else None
        return BertModelOutput(hidden, pooled)


class BertPredictionHeadTransform(nn.Module):
    """dense -> activation -> LayerNorm, applied to every position before the decoder."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.transform_act_fn = _ACTIVATIONS[config.hidden_act]()
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)

    def forward(self, hidden_states):
        return self.LayerNorm(self.transform_act_fn(self.dense(hidden_states)))


class BertLMPredictionHead(nn.Module):
    """The transform, then a decoder to vocabulary logits (its weight is tied to the word
    embeddings by BertForMaskedLM) plus a per-token bias."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.transform = BertPredictionHeadTransform(config)
        self.decoder = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.bias = Parameter(zeros(config.vocab_size))

    def forward(self, hidden_states):
        return self.decoder(self.transform(hidden_states)) + self.bias


class BertOnlyMLMHead(nn.Module):
    """The masked-LM head (its one submodule keeps Hugging Face's `cls.predictions` keys)."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.predictions = BertLMPredictionHead(config)

    def forward(self, sequence_output):
        return self.predictions(sequence_output)


class BertForMaskedLM(nn.Module):
    """BERT with the masked-language-model head. `forward(input_ids, attention_mask=None,
    token_type_ids=None, labels=None)` returns `(logits, loss)`: logits (B, T, vocab_size) and
    the mean cross-entropy over positions whose label is not -100 (None without labels).

    >>> config = flow.models.BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=1,
    ...                                 num_attention_heads=4, intermediate_size=64)
    >>> ids = flow.randint(0, 100, (2, 7))
    >>> logits, loss = flow.models.BertForMaskedLM(config)(ids, labels=ids)
    >>> logits.shape
    tideflow.Size([2, 7, 100])
    """

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.config = config
        self.bert = BertModel(config, add_pooling_layer=False)
        self.cls = BertOnlyMLMHead(config)
        self.cls.apply(lambda m: _init_weights(m, config.initializer_range))
        self.cls.predictions.decoder.weight = self.bert.embeddings.word_embeddings.weight

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, labels=None):
        hidden = self.bert(input_ids, attention_mask, token_type_ids).last_hidden_state
        logits = self.cls(hidden)
        if labels is None:
            return logits, None
        loss = F.cross_entropy(
            logits.reshape(-1, self.config.vocab_size), labels.reshape(-1), ignore_index=-100
        )
        return logits, loss


def _init_weights(module: nn.Module, std: float) -> None:
    if isinstance(module, nn.Linear):
        init.normal_(module.weight, mean=0.0, std=std)
        if module.bias is not None:
            init.zeros_(module.bias)
    elif isinstance(module, nn.Embedding):
        init.normal_(module.weight, mean=0.0, std=std)
        if module.padding_idx is not None:
            with no_grad():
                module.weight[module.padding_idx].zero_()
    elif isinstance(module, nn.LayerNorm):
        init.ones_(module.weight)
        init.zeros_(module.bias)
