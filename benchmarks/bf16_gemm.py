"""bfloat16 matmul on CPUs with AVX512-BF16, in the same run:

1. GEMM GFLOP/s, one thread: tideflow's bf16 kernel (backends/bf16_gemm.py) against the old
   bf16 path (cast to float32, NumPy matmul, round), float32 NumPy, and PyTorch bf16/float32;
   1024^3 and W3's GEMM shapes (GPT 4x256, batch 8 x block 128 = 1024 rows).
2. W3's training step with bf16 AMP in an nn.Graph (kernel on, and off for comparison)
   against PyTorch's bf16 autocast, eager, steps interleaved (see train_workloads.py).

Times are best-of (GEMMs) or medians (steps) on a shared machine: expect 10-20% noise.
"""

from __future__ import annotations

import os
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # one thread for both libraries

import numpy as np

import tideflow as flow
from tideflow.backends import bf16_gemm

sys.path.insert(0, os.path.dirname(__file__))
import train_workloads

SHAPES = [(1024, 1024, 1024), (1024, 256, 768), (1024, 256, 256), (1024, 256, 1024),
          (1024, 1024, 256), (1024, 256, 512)]  # fmt: skip


def _best(fn, repeat: int = 7) -> float:
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def _cases(torch, a32, b32) -> dict:
    a, b = a32.astype(bf16_gemm.BF16), b32.astype(bf16_gemm.BF16)
    cases = {
        "kernel": (lambda: bf16_gemm.bf16_gemm(a, b).astype(a.dtype))
        if bf16_gemm.available()
        else None,
        "old bf16": lambda: (a.astype(np.float32) @ b.astype(np.float32)).astype(a.dtype),
        "np f32": lambda: a32 @ b32,
    }
    if torch is not None:
        ta, tb = torch.from_numpy(a32), torch.from_numpy(b32)
        tab, tbb = ta.bfloat16(), tb.bfloat16()
        cases["torch bf16"] = lambda: tab @ tbb
        cases["torch f32"] = lambda: ta @ tb
    return cases


def gemm_rates(torch) -> list[tuple]:
    rows = []
    rng = np.random.default_rng(0)
    for m, k, n in SHAPES:
        a32, b32 = (rng.standard_normal(s, dtype=np.float32) for s in ((m, k), (k, n)))
        flops = 2 * m * k * n / 1e9
        cases = _cases(torch, a32, b32)
        rates = {name: flops / _best(fn) if fn else float("nan") for name, fn in cases.items()}
        rows.append(((m, k, n), rates))
    return rows


def _w3_graph_step(model, optimizer, x, y):
    class Step(flow.nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model
            self.add_optimizer(optimizer)
            self.config.enable_amp(True, dtype=flow.bfloat16)

        def build(self, idx, targets):
            loss = self.model(idx, targets)[1]
            loss.backward()
            return loss

    graph = Step()
    return lambda: graph(x, y).numpy()


def w3_amp(torch) -> dict:
    """Median ms of W3 steps: tideflow graph bf16 AMP (kernel on / off) vs torch autocast."""
    workload = train_workloads._workloads()[2]
    ours, theirs = workload.model(flow), workload.model(torch)
    theirs.load_state_dict(
        {k: torch.from_numpy(v.numpy().copy()) for k, v in ours.state_dict().items()}
    )
    x, y = (flow.tensor(a) for a in workload.batch)
    tx, ty = (torch.tensor(a) for a in workload.batch)
    step = _w3_graph_step(ours, flow.optim.AdamW(ours.parameters(), lr=3e-4), x, y)
    topt = torch.optim.AdamW(theirs.parameters(), lr=3e-4)

    def torch_step():
        topt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = theirs(tx, ty)[1]
        loss.backward()
        topt.step()

    def kernel_off():
        old = bf16_gemm.set_enabled(False)
        try:
            step()
        finally:
            bf16_gemm.set_enabled(old)

    ours_ms, theirs_ms = train_workloads._interleaved_medians(step, torch_step)
    off_ms, _ = train_workloads._interleaved_medians(kernel_off, torch_step)
    return {"graph bf16 AMP": ours_ms, "graph bf16 AMP, kernel off": off_ms, "torch": theirs_ms}


def main() -> None:
    try:
        import torch
    except ImportError:
        torch = None
    else:
        torch.set_num_threads(1)
    print(f"bf16 kernel available: {bf16_gemm.available()}; one thread")
    rows = gemm_rates(torch)
    names = list(rows[0][1])
    print(f"{'GFLOP/s (M, K, N)':22}" + "".join(f"{n:>12}" for n in names))
    for shape, rates in rows:
        print(f"{shape!s:22}" + "".join(f"{rates[n]:12.1f}" for n in names))
    if torch is None:
        print("W3: skipped, PyTorch (the reference) is not installed")
        return
    w3 = w3_amp(torch)
    print("W3 GPT 4x256 training step, bf16 AMP (ms, median):")
    for name, ms in w3.items():
        print(f"  {name:28} {ms:8.1f}   ratio to torch {ms / w3['torch']:.2f}")


if __name__ == "__main__":
    main()
