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

import train_workloads as tw
import training


def _first_call_seconds() -> float:
    return training._graph(tw._workloads()[2], amp=False)[2]


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
