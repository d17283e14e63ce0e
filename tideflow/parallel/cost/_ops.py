"""FLOPs and bytes of single ops from their shapes, and their time on a device: what a
graph-level search prices each node with (the shapes come from the ops' meta rules)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from ...framework.errors import ShapeError
from ._devices import DeviceProfile


@dataclasses.dataclass(frozen=True)
class OpCost:
    flops: float
    bytes: float
    gemm: tuple[int, int, int, int] | None = None  # (batch, m, n, k) of a matrix product


def matmul_cost(a_shape, b_shape, itemsize: int) -> OpCost:
    """`a @ b` with NumPy's broadcasting of the leading (batch) dimensions."""
    if len(a_shape) < 2 or len(b_shape) < 2 or a_shape[-1] != b_shape[-2]:
        raise ShapeError(f"matmul cost: cannot multiply {tuple(a_shape)} by {tuple(b_shape)}")
    m, k, n = a_shape[-2], a_shape[-1], b_shape[-1]
    batch = math.prod(np.broadcast_shapes(tuple(a_shape[:-2]), tuple(b_shape[:-2])))
    moved = itemsize * (math.prod(a_shape) + math.prod(b_shape) + batch * m * n)
    return OpCost(2.0 * batch * m * n * k, moved, (batch, m, n, k))


def pointwise_cost(input_shapes, output_shape, itemsize: int, flops_per_element: int = 1):
    """An elementwise op or a reduction: every input read once, the output written once."""
    elements = math.prod(output_shape)
    read = sum(math.prod(shape) for shape in input_shapes)
    largest = max([elements, *(math.prod(shape) for shape in input_shapes)])
    return OpCost(float(flops_per_element * largest), float(itemsize * (read + elements)))


def op_time(device: DeviceProfile, cost: OpCost, itemsize: int = 2) -> float:
    if cost.gemm is not None:
        batch, m, n, k = cost.gemm
        return device.gemm_time(m, n, k, batch=batch, elem_bytes=itemsize)
    compute = cost.flops / (device.peak_flops * device.max_efficiency)
    return max(compute, cost.bytes / device.memory_bandwidth) + device.op_overhead_s


# NOTE: ops/nn/attention.py's TILE; the cost model stays free of the op modules' internals
ATTENTION_TILE = 32


@dataclasses.dataclass(frozen=True)
class AttentionShape:
    """The fused attention's operands on one rank: `batch` matrices (heads included) of
    `rows` queries and `keys` keys, head dimension `dim`, value dimension `value_dim`."""

    batch: int
    rows: int
    keys: int
    dim: int
    value_dim: int
    causal: bool

    def tiles(self) -> list[tuple[int, int]]:
        """(rows, keys seen) per tile of query rows, as the CPU kernel runs them: causal
        rows in tiles of ATTENTION_TILE seeing the keys up to their last row, else every row
        in one tile seeing every key."""
        if not self.causal:
            return [(self.rows, self.keys)]
        return [
            (min(r0 + ATTENTION_TILE, self.rows) - r0, min(r0 + ATTENTION_TILE, self.keys))
            for r0 in range(0, self.rows, ATTENTION_TILE)
        ]

    def key_tiles(self) -> list[tuple[int, int]]:
        """(keys, rows that see them) per tile of keys, as the backward kernel runs them."""
        if not self.causal:
            return [(self.keys, self.rows)]
        return [
            (min(c0 + ATTENTION_TILE, self.keys) - c0, self.rows - min(c0, self.rows))
            for c0 in range(0, self.keys, ATTENTION_TILE)
        ]

    def scores(self) -> int:
        """Score elements the tiles compute (the triangle's tiles only, when causal)."""
        return self.batch * sum(r * k for r, k in self.tiles())


def attention_gemm_times(device: DeviceProfile, shape: AttentionShape, itemsize: int):
    """(forward, backward) seconds of the fused attention's batched products, tile by tile:
    forward q k^T and p v per row tile; backward dO v^T and dS k per row tile, then p^T dO
    and dS^T q per key tile. Each product is a call (no op overhead: one node holds them)."""

    def gemm(m: int, n: int, k: int) -> float:
        if min(m, n, k) == 0:
            return 0.0
        return device.gemm_time(m, n, k, shape.batch, itemsize) - device.op_overhead_s

    d, dv = shape.dim, shape.value_dim
    forward = sum(gemm(r, k, d) + gemm(r, dv, k) for r, k in shape.tiles())
    backward = sum(gemm(r, k, dv) + gemm(r, d, k) for r, k in shape.tiles())
    backward += sum(gemm(c, dv, r) + gemm(c, d, r) for c, r in shape.key_tiles())
    return forward, backward


def attention_times(device: DeviceProfile, shape: AttentionShape, itemsize: int):
    """(forward, backward) seconds of one fused attention node and its backward node: the
    tiles' products, and the elementwise passes over each score (scale, mask, softmax and
    its backward, copies into the saved probabilities) at the device's measured rates."""
    forward, backward = attention_gemm_times(device, shape, itemsize)
    scores = shape.scores()
    return (
        forward + scores * device.attention_score_s + device.op_overhead_s,
        backward + scores * device.attention_grad_score_s + device.op_overhead_s,
    )
