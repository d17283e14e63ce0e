"""The GPT family's work per transformer layer and micro-batch, as Megatron-LM lays it out
over t tensor-parallel ranks (column-parallel QKV and fc1, row-parallel proj and fc2, no
sequence parallelism), and Megatron's count of the FLOPs a step does."""

from __future__ import annotations

import dataclasses

from ...framework.errors import ArgumentError
from ._devices import DeviceProfile

ACTIVATION_BYTES = 2  # fp16/bf16 activations


@dataclasses.dataclass(frozen=True)
class GPTSpec:
    layers: int
    hidden: int
    heads: int
    seq: int
    vocab: int

    def __post_init__(self):
        for name in ("layers", "hidden", "heads", "seq", "vocab"):
            if getattr(self, name) < 1:
                raise ArgumentError(f"plan: {name} must be positive, got {getattr(self, name)}")
        if self.hidden % self.heads:
            raise ArgumentError(
                f"plan: hidden {self.hidden} is not divisible by heads {self.heads}"
            )

    @property
    def parameters(self) -> int:
        """Weights and biases: 12h^2 + 13h per layer, the token and position embeddings (the
        output layer shares the token embedding), the final layer norm."""
        h = self.hidden
        return self.layers * (12 * h * h + 13 * h) + (self.vocab + self.seq) * h + 2 * h


def megatron_flops(spec: GPTSpec, global_batch: int, recompute: bool) -> float:
    """FLOPs of one step as Narayanan et al. (2021) count them: 72 B s l h^2 (1 + s/6h +
    V/12lh) without recompute; recompute repeats each layer's forward: 96 (1 + s/6h +
    V/16lh)."""
    b, s, h, n_layers, v = global_batch, spec.seq, spec.hidden, spec.layers, spec.vocab
    passes = 4 if recompute else 3
    layer = 24 * passes * b * s * n_layers * h * h * (1 + s / (6 * h))
    logits = 6 * b * s * h * v
    return layer + logits


@dataclasses.dataclass(frozen=True)
class LayerWork:
    """One rank's share of one layer's forward on a micro-batch: GEMM time, elementwise
    (memory-bound) time, and the bytes of each of its two tensor-parallel all-reduces."""

    gemm_s: float
    elementwise_s: float
    allreduce_bytes: float


def layer_forward(spec: GPTSpec, device: DeviceProfile, micro_batch: int, tp: int) -> LayerWork:
    h, s, a, b = spec.hidden, spec.seq, spec.heads, micro_batch
    tokens = b * s
    head_dim = h // a
    local_heads = a // tp
    gemm = (
        device.gemm_time(tokens, 3 * h // tp, h)  # QKV
        + device.gemm_time(s, s, head_dim, batch=b * local_heads)  # Q K^T
        + device.gemm_time(s, head_dim, s, batch=b * local_heads)  # scores V
        + device.gemm_time(tokens, h, h // tp)  # proj
        + device.gemm_time(tokens, 4 * h // tp, h)  # fc1
        + device.gemm_time(tokens, h, 4 * h // tp)  # fc2
    )
    # NOTE: Megatron's fused fp16 kernels, bytes read + written per element: two layer norms
    # (2 + 2 each), two bias-dropout-adds (2 + 2 read, 2 written, a 1-byte mask), bias-gelu
    # on the 4h/t wide activations (2 + 2), softmax with scale and mask on the scores
    # (2 + 2) and dropout on the probabilities (2 + 2 + 1).
    activation_elems = tokens * h
    scores_elems = b * local_heads * s * s
    streamed = (2 * 4 + 2 * 7) * activation_elems + 4 * 4 * activation_elems / tp + 9 * scores_elems
    elementwise = device.stream_time(streamed, ops=7)
    return LayerWork(gemm, elementwise, ACTIVATION_BYTES * activation_elems)


def logits_forward(spec: GPTSpec, device: DeviceProfile, micro_batch: int, tp: int) -> float:
    """The output layer (vocabulary split over tp) and its cross-entropy on the last stage."""
    tokens = micro_batch * spec.seq
    local_vocab = -(-spec.vocab // tp)
    return device.gemm_time(tokens, local_vocab, spec.hidden) + device.stream_time(
        3 * ACTIVATION_BYTES * tokens * local_vocab, ops=3
    )
