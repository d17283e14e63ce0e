"""How long W3's nn.Graph (GPT + AdamW, float32) takes to compile: the first call, in a fresh
process, with an empty kernel cache ("cold": every generated kernel is compiled) and again in
another fresh process with the cache the first one left ("warm": kernels load from disk).
Each run gets its own temporary cache (`TIDEFLOW_KERNEL_CACHE` for the fused groups,
`NUMBA_CACHE_DIR` for the generated kernels of `backends/jit_kernels`).

    python benchmarks/compile_time.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

import train_workloads as tw


def _first_call_seconds() -> float:
    import tideflow as flow

    workload = tw._workloads()[2]
    model = workload.model(flow)
    optimizer = workload.optimizer(flow, model.parameters())
    x, y = (flow.tensor(a) for a in workload.batch)

    class TrainGraph(flow.nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model
            self.add_optimizer(optimizer)

        def build(self, x, y):
            loss = workload.loss(flow, self.model, x, y)
            loss.backward()
            return loss

    graph = TrainGraph()
    start = time.perf_counter()
    graph(x, y).numpy()
    return time.perf_counter() - start


def _in_fresh_process(cache: str) -> float:
    env = dict(os.environ, TIDEFLOW_KERNEL_CACHE=cache, NUMBA_CACHE_DIR=cache)
    out = subprocess.run(
        [sys.executable, __file__, "--child"], env=env, capture_output=True, text=True,
        check=True, cwd=os.path.dirname(os.path.abspath(__file__)),
    )  # fmt: skip
    return float(out.stdout.split()[-1])


def run() -> tuple[float, float]:
    """Seconds of the cold and the warm first call."""
    with tempfile.TemporaryDirectory(prefix="tideflow-kernels-") as cache:
        return _in_fresh_process(cache), _in_fresh_process(cache)


def report(times: tuple[float, float]) -> str:
    cold, warm = times
    return f"W3 graph compile (first call, fresh process): cold {cold:.1f} s, warm {warm:.1f} s"


if __name__ == "__main__":
    if "--child" in sys.argv:
        print(f"{_first_call_seconds():.3f}")
    else:
        print(report(run()))
