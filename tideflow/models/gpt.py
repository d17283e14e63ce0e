"""GPT: a decoder-only transformer language model in the style of nanoGPT (Karpathy), itself
GPT-2's architecture: pre-LayerNorm blocks of causal self-attention and a GELU MLP, learned
position embeddings, and an output head tied to the token embedding."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .. import nn
from ..framework import dtype as dtypes
from ..framework.errors import ShapeError
from ..framework.grad_mode import no_grad
from ..nn import functional as F
from ..nn import init
from ..ops.binary import where
from ..ops.creation import arange, on_placement_of
from ..ops.indexing import topk
from ..ops.random import multinomial
from ..ops.shape import cat
from ..parallel.sbp import broadcast


@dataclass
class GPTConfig:
    """The sizes of a GPT. The defaults are GPT-2 small's (124M parameters, with the vocabulary
    padded to a multiple of 64 as nanoGPT does).

    >>> flow.models.GPTConfig(vocab_size=65, block_size=64, n_layer=2, n_head=2, n_embd=32)
    GPTConfig(vocab_size=65, block_size=64, n_layer=2, n_head=2, n_embd=32, dropout=0.0, bias=True)
    """

    vocab_size: int = 50304
    block_size: int = 1024  # the longest context the model sees (position embeddings)
    n_layer: int = 12
    n_head: int = 12
    n_embd: int = 768
    dropout: float = 0.0
    bias: bool = True  # biases in Linear layers and LayerNorms, as GPT-2

    def __post_init__(self) -> None:
        for name in ("vocab_size", "block_size", "n_layer", "n_head", "n_embd"):
            if getattr(self, name) <= 0:
                raise ValueError(f"GPTConfig: {name} must be positive, got {getattr(self, name)}")
        if self.n_embd % self.n_head:
            raise ValueError(
                f"GPTConfig: n_embd ({self.n_embd}) must be divisible by n_head ({self.n_head})"
            )
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"GPTConfig: dropout must be in [0, 1), got {self.dropout}")


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention in which each position attends only to itself and earlier
    positions. One Linear projects to queries, keys and values of all heads at once."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.dropout = config.dropout
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.resid_dropout = nn.Dropout(config.dropout)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        # (B, T, C) -> (B, n_head, T, head_size): heads become a batch dim of the attention.
        q, k, v = (z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(
            q, k, v, dropout_p=self.dropout if self.training else 0.0, is_causal=True
        )
        y = y.transpose(1, 2).reshape(b, t, c)
        return self.resid_dropout(self.c_proj(y))


class FeedForward(nn.Module):
    """The position-wise feed-forward network: n_embd -> 4 n_embd -> GELU -> n_embd."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    """One transformer block with pre-LayerNorm residual branches:
    `x + attn(ln_1(x))`, then `x + mlp(ln_2(x))`."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = FeedForward(config)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """A GPT language model. `forward(idx, targets=None)` takes token indices (B, T) with
    T <= block_size and returns `(logits, loss)`: logits (B, T, vocab_size) for the next token
    at every position, and the mean cross-entropy against `targets` (B, T) (entries of -1 are
    ignored), or None without targets.

    Parameter names follow nanoGPT (`transformer.wte`, `transformer.h.0.attn.c_attn`, ...).
    `lm_head.weight` is `transformer.wte.weight` (weight tying). Weights start from
    N(0, 0.02), the residual projections from N(0, 0.02 / sqrt(2 n_layer)) (GPT-2).

    >>> config = flow.models.GPTConfig(vocab_size=65, block_size=16, n_layer=2, n_head=2,
    ...                                n_embd=32)
    >>> model = flow.models.GPT(config)
    >>> idx = flow.randint(0, 65, (4, 16))
    >>> logits, loss = model(idx, targets=idx)
    >>> logits.shape, loss.shape
    (tideflow.Size([4, 16, 65]), tideflow.Size([]))
    """

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.config = config
        self.transformer = nn.ModuleDict(
            {
                "wte": nn.Embedding(config.vocab_size, config.n_embd),
                "wpe": nn.Embedding(config.block_size, config.n_embd),
                "drop": nn.Dropout(config.dropout),
                "h": nn.ModuleList(Block(config) for _ in range(config.n_layer)),
                "ln_f": nn.LayerNorm(config.n_embd, bias=config.bias),
            }
        )
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight
        self.apply(_init_weights)
        residual_std = 0.02 / math.sqrt(2 * config.n_layer)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                init.normal_(p, mean=0.0, std=residual_std)

    def num_parameters(self, non_embedding: bool = True) -> int:
        """The number of parameters, each tied weight counted once. `non_embedding` leaves
        out the position embeddings (the token embedding counts: it is the output head)."""
        n = sum(p.numel() for p in self.parameters())
        if non_embedding:
            n -= self.transformer.wpe.weight.numel()
        return n

    def parameter_groups(self, weight_decay: float) -> list[dict]:
        """Optimizer parameter groups that decay only matrices (Linear weights, embeddings),
        not biases and LayerNorm weights, as GPT-2 trains:
        `flow.optim.AdamW(model.parameter_groups(0.1), lr=6e-4)`."""
        params = list(self.parameters())
        return [
            {"params": [p for p in params if p.ndim >= 2], "weight_decay": weight_decay},
            {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0},
        ]

    def forward(self, idx, targets=None):
        b, t = idx.shape
        if t > self.config.block_size:
            raise ShapeError(
                f"GPT: cannot forward a sequence of length {t}, block_size is only "
                f"{self.config.block_size}"
            )
        pos = arange(t, dtype=dtypes.int64, **on_placement_of(idx))
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
        for block in self.transformer.h:
            x = block(x)
        logits = self._logits(self.transformer.ln_f(x))
        if targets is None:
            return logits, None
        loss = F.cross_entropy(logits.reshape(b * t, -1), targets.reshape(b * t), ignore_index=-1)
        return logits, loss

    def _logits(self, h):
        """The output layer, whose weight is the token embedding's. Under pipeline
        parallelism the two are on different stages: the weight moves to the hidden states'
        placement, and its gradient moves back and adds to the embedding's (Megatron's tied
        embeddings)."""
        w = self.lm_head.weight
        if h.is_global and w.is_global and w.placement != h.placement:
            whole = (broadcast,) * h.placement.ndim
            return F.linear(h, w.to_global(placement=h.placement, sbp=whole))
        return self.lm_head(h)

    @no_grad()
    def generate(self, idx, max_new_tokens: int, temperature: float = 1.0,
                 top_k: int | None = None, *, generator=None):  # fmt: skip
        """Continue each row of `idx` (B, T) by `max_new_tokens` tokens, sampling each from
        the model's next-token distribution divided by `temperature` and restricted to the
        `top_k` most likely tokens. Only the last block_size tokens condition each step.
        Returns (B, T + max_new_tokens). Call `model.eval()` first to turn off dropout.

        >>> config = flow.models.GPTConfig(vocab_size=10, block_size=8, n_layer=1, n_head=1,
        ...                                n_embd=8)
        >>> flow.models.GPT(config).generate(flow.zeros(1, 1, dtype=flow.long), 5).shape
        tideflow.Size([1, 6])
        """
        if temperature <= 0:
            raise ValueError(f"GPT.generate: temperature must be positive, got {temperature}")
        if top_k is not None and top_k < 1:
            raise ValueError(f"GPT.generate: top_k must be at least 1, got {top_k}")
        for _ in range(max_new_tokens):
            context = idx[:, -self.config.block_size :]
            logits, _ = self(context)
            logits = logits[:, -1, :] / temperature
            if top_k is not None:
                kth_largest = topk(logits, min(top_k, logits.shape[-1]))[0][:, -1:]
                logits = where(logits < kth_largest, -math.inf, logits)
            probs = F.softmax(logits, dim=-1)
            idx = cat((idx, multinomial(probs, 1, generator=generator)), dim=1)
        return idx


def _init_weights(module: nn.Module) -> None:
    if isinstance(module, nn.Linear):
        init.normal_(module.weight, mean=0.0, std=0.02)
        if module.bias is not None:
            init.zeros_(module.bias)
    elif isinstance(module, nn.Embedding):
        init.normal_(module.weight, mean=0.0, std=0.02)
