"""Device profiles: how fast one accelerator multiplies matrices and streams memory.

A GEMM of sizes (m, n, k) runs at `peak_flops * gemm_efficiency(m, n, k)`, one curve for
every device:

    efficiency(d) = max_efficiency * d / (d + half_size),   d = min(m, n, k)

the smallest dimension bounds how much each loaded tile is reused (tile and wave
quantisation, too, hurt thin GEMMs most). The published presets share `max_efficiency=0.70`
and `half_size=16`, set once for Megatron-LM's whole weak-scaling table (docs/planning.md):
0.80, what cuBLAS reaches on large GEMMs at full clocks, over-predicted every row; a head
dimension of 96-160 (the attention batched GEMMs) loses 9-14%. The `local` profile fits
the same two numbers to GEMMs it times here (see `_calibrate`).
"""

from __future__ import annotations

import dataclasses

from ...framework.errors import ArgumentError

GB = 1e9
TERA = 1e12

PRESET_MAX_EFFICIENCY = 0.70
PRESET_HALF_SIZE = 16.0


@dataclasses.dataclass(frozen=True)
class DeviceProfile:
    """One device: dense half-precision peak, memory bandwidth and size, the GEMM curve.

    `op_overhead_s` is the time an op costs beyond its FLOPs and bytes (zero on GPUs, whose
    kernels are queued ahead of execution; tideflow's dispatch cost on the `local` CPU).
    A compiled graph pays instead `node_s` per node of its plan, `task_s` per task (an
    actor's act and messages) and `switch_s` where a chain hands over to the other stream's
    thread (see `compiler.lower`). `gemm_call_s` is what each matrix of a batched product
    costs beyond its FLOPs after the first (NumPy calls BLAS once per matrix; zero on GPUs,
    whose batched kernels take the whole batch). `gemm_cores` is how many CPU cores the
    GEMM rate was measured on (min(BLAS threads, cores)); None for an accelerator.
    `attention_score_s` and `attention_grad_score_s` are what the fused attention and its
    backward cost per score element beyond their products (the CPU kernel's elementwise
    passes over each tile of scores; zero on GPUs, whose fused kernels keep scores on chip)."""

    name: str
    peak_flops: float
    memory_bandwidth: float  # bytes/s
    memory_bytes: float
    max_efficiency: float = PRESET_MAX_EFFICIENCY
    half_size: float = PRESET_HALF_SIZE
    op_overhead_s: float = 0.0
    node_s: float = 0.0
    task_s: float = 0.0
    switch_s: float = 0.0
    gemm_call_s: float = 0.0
    gemm_cores: float | None = None
    attention_score_s: float = 0.0
    attention_grad_score_s: float = 0.0

    def on_cores(self, cores: float) -> DeviceProfile:
        """This CPU as a process gets it with `cores` cores to itself (a fraction when ranks
        time-share them): BLAS spreads a GEMM over up to `gemm_cores` of them, everything
        else (elementwise kernels, dispatch, the runtime's threads under one lock) runs on
        one."""
        if self.gemm_cores is None:
            return self
        gemm = min(cores, self.gemm_cores) / self.gemm_cores
        serial = min(cores, 1.0)
        return dataclasses.replace(
            self,
            peak_flops=self.peak_flops * gemm,
            memory_bandwidth=self.memory_bandwidth * serial,
            op_overhead_s=self.op_overhead_s / serial,
            node_s=self.node_s / serial,
            task_s=self.task_s / serial,
            switch_s=self.switch_s / serial,
            gemm_call_s=self.gemm_call_s / serial,
            attention_score_s=self.attention_score_s / serial,
            attention_grad_score_s=self.attention_grad_score_s / serial,
        )

    def gemm_efficiency(self, m: int, n: int, k: int) -> float:
        d = min(m, n, k)
        return self.max_efficiency * d / (d + self.half_size)

    def gemm_time(self, m: int, n: int, k: int, batch: int = 1, elem_bytes: int = 2) -> float:
        """Roofline time of `batch` GEMMs (m x k) @ (k x n): the slower of FLOPs at the curve's
        efficiency and the bytes of both operands and the result at memory bandwidth, and
        the calls of a batch's matrices after the first."""
        flops = 2.0 * m * n * k * batch
        moved = elem_bytes * batch * (m * k + k * n + m * n)
        compute = flops / (self.peak_flops * self.gemm_efficiency(m, n, k))
        calls = (batch - 1) * self.gemm_call_s
        return max(compute, moved / self.memory_bandwidth) + calls + self.op_overhead_s

    def stream_time(self, nbytes: float, ops: int = 1) -> float:
        """Time of memory-bound (elementwise) work moving `nbytes`, in `ops` kernels."""
        return nbytes / self.memory_bandwidth + ops * self.op_overhead_s


# NOTE: dense (no sparsity) bf16 tensor-core peaks and HBM figures from NVIDIA's data sheets
# for the SXM parts.
PRESET_DEVICES = {
    "a100-80gb": DeviceProfile("a100-80gb", 312 * TERA, 2039 * GB, 80 * GB),
    "h100-80gb": DeviceProfile("h100-80gb", 989 * TERA, 3350 * GB, 80 * GB),
    "h200": DeviceProfile("h200", 989 * TERA, 4800 * GB, 141 * GB),
}


def preset_device(name: str) -> DeviceProfile:
    try:
        return PRESET_DEVICES[name]
    except KeyError:
        known = ", ".join(sorted(PRESET_DEVICES))
        raise ArgumentError(f"plan: unknown device {name!r}; known: {known}, local") from None
