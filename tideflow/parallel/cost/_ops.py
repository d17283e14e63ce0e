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
