"""Memory per device of a GPT layout: model states under ZeRO and activations under 1F1B.

Model states, mixed-precision Adam (Rajbhandari et al. 2020): 2 bytes of fp16/bf16 weights,
2 of gradients and 12 of fp32 master weights, momentum and variance per parameter. ZeRO
stage 1 shards the 12 optimizer bytes over the data-parallel group, stage 2 the gradients
too, stage 3 the weights too.

Activations per layer and micro-batch with tensor parallelism t and no sequence parallelism
(Korthikanti et al. 2022, eq. 2): s b h (10 + 24/t + 5 a s / (h t)) bytes. With activation
recompute a layer keeps only its 2 s b h bytes of input, and the layer being recomputed
holds its full set. Under 1F1B the first stage has min(p, m) micro-batches in flight, each
through L/p layers; the interleaved schedule with v chunks holds (1 + (p-1)/(p v)) times
that (ibid., section 4.2.3). Not counted: framework workspace and fragmentation.
"""

from __future__ import annotations

import dataclasses

from ._gpt import ACTIVATION_BYTES, GPTSpec

WEIGHT_BYTES = 2
GRAD_BYTES = 2
OPTIMIZER_BYTES = 12


def model_state_bytes(parameters: float, dp: int, zero: int) -> float:
    """Bytes per rank of `parameters` weights (already divided by tp and pp)."""
    weights, grads, optimizer = (
        WEIGHT_BYTES * parameters,
        GRAD_BYTES * parameters,
        OPTIMIZER_BYTES * parameters,
    )
    if zero >= 1:
        optimizer /= dp
    if zero >= 2:
        grads /= dp
    if zero >= 3:
        weights /= dp
    return weights + grads + optimizer


def layer_activation_bytes(spec: GPTSpec, micro_batch: int, tp: int) -> float:
    s, b, h, a = spec.seq, micro_batch, spec.hidden, spec.heads
    return s * b * h * (10 + 24 / tp + 5 * a * s / (h * tp))


def stage_activation_bytes(
    spec: GPTSpec, micro_batch: int, tp: int, pp: int, micro_batches: int, recompute: bool,
    interleave: int = 1,
) -> float:  # fmt: skip
    """Peak activation bytes on the first pipeline stage (the one with the most in flight)."""
    in_flight = min(pp, micro_batches)
    if interleave > 1:
        in_flight *= 1 + (pp - 1) / (pp * interleave)
    layers_per_stage = -(-spec.layers // pp)
    full_layer = layer_activation_bytes(spec, micro_batch, tp)
    if not recompute:
        return in_flight * layers_per_stage * full_layer
    kept_input = ACTIVATION_BYTES * spec.seq * micro_batch * spec.hidden
    return in_flight * layers_per_stage * kept_input + full_layer


@dataclasses.dataclass(frozen=True)
class MemoryBreakdown:
    model_states: float
    activations: float
    logits: float

    @property
    def total(self) -> float:
        return self.model_states + self.activations + self.logits


def stage_parameters(spec: GPTSpec, tp: int, pp: int) -> tuple[float, float]:
    """Parameters per rank on the first and on the last stage: each holds the (tied) token
    embedding's vocabulary shard, the first also the position embedding, the last the final
    layer norm. Both are counted with the fullest stage's layers (an upper bound where the
    layers do not divide evenly)."""
    h = spec.hidden
    layers = -(-spec.layers // pp) * (12 * h * h / tp + 7 * h / tp + 6 * h)
    embedding = spec.vocab * h / tp
    first = layers + embedding + spec.seq * h
    last = layers + embedding + 2 * h
    if pp == 1:
        return first + 2 * h, first + 2 * h
    return first, last


def memory_per_device(
    spec: GPTSpec, micro_batch: int, tp: int, pp: int, dp: int, micro_batches: int,
    recompute: bool, zero: int, interleave: int = 1,
) -> MemoryBreakdown:  # fmt: skip
    """The larger of the first stage (most activations) and the last (the logits, fp32 for
    the loss); with one stage they are the same rank."""
    first_params, last_params = stage_parameters(spec, tp, pp)
    logits = 4 * micro_batch * spec.seq * spec.vocab / tp
    first = MemoryBreakdown(
        model_state_bytes(first_params, dp, zero),
        stage_activation_bytes(spec, micro_batch, tp, pp, micro_batches, recompute, interleave),
        logits if pp == 1 else 0.0,
    )
    if pp == 1:
        return first
    last = MemoryBreakdown(
        model_state_bytes(last_params, dp, zero),
        stage_activation_bytes(spec, micro_batch, tp, pp, 1, recompute),
        logits,
    )
    return max(first, last, key=lambda m: m.total)
