"""The `local` profile: this machine measured, cached in
`$XDG_CACHE_HOME/tideflow/cost_profile.json` (default `~/.cache`).

- GEMMs: NumPy float32 matmuls whose smallest dimension d runs 16..1024 (square, and thin
  ones as attention's); their rates r(d) are fitted to the devices' curve r = R d / (d + c)
  by non-negative least squares on 1/r = 1/R + (c/R)(1/d), which is linear in 1/d. The
  profile's peak is R with max_efficiency 1.
- Bandwidth: a NumPy add of 32 MB operands (two read, one written).
- Op overhead: a tideflow add of one-element tensors, less NumPy's own.
- Links: ping-pong of 8 bytes and 16 MB between two ranks of `mpiexec -n 2` through
  tideflow's MPI communicator (`_mpi_probe`); one machine has no second node, so the same
  link stands for both levels.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from ...framework.errors import TideflowError
from ...ops.binary import add
from ...ops.creation import tensor
from ._cluster import Cluster
from ._devices import DeviceProfile
from ._network import Link, Network

GEMM_SHAPES = (
    (256, 256, 256),
    (512, 512, 512),
    (1024, 1024, 1024),
    (1024, 1024, 64),
    (1024, 1024, 16),
    (1024, 64, 1024),
    (2048, 128, 2048),
)


def cache_path() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "tideflow" / "cost_profile.json"


def _best_time(fn, repeats: int = 5) -> float:
    fn()  # warm caches and thread pools
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def fit_gemm_curve(sizes, rates) -> tuple[float, float]:
    """(R, c) of r = R d / (d + c): least squares on 1/r = 1/R + (c/R)(1/d) with both
    coefficients kept non-negative (a busy machine's noise made the unconstrained fit's
    1/R negative); with no slope the peak is the best rate seen."""
    from scipy.optimize import nnls

    inverse_sizes = 1 / np.asarray(sizes, float)
    design = np.stack([np.ones_like(inverse_sizes), inverse_sizes], axis=1)
    (inverse_peak, slope), _ = nnls(design, 1 / np.asarray(rates, float))
    if inverse_peak <= 0:
        return float(max(rates)), 0.0
    return float(1 / inverse_peak), float(slope / inverse_peak)


def measure_gemms() -> tuple[float, float]:
    rng = np.random.default_rng(0)
    sizes, rates = [], []
    for m, n, k in GEMM_SHAPES:
        a = rng.standard_normal((m, k), dtype=np.float32)
        b = rng.standard_normal((k, n), dtype=np.float32)
        out = np.empty((m, n), np.float32)
        seconds = _best_time(lambda a=a, b=b, out=out: np.matmul(a, b, out=out))
        sizes.append(min(m, n, k))
        rates.append(2 * m * n * k / seconds)
    return fit_gemm_curve(sizes, rates)


def measure_bandwidth(nbytes: int = 32 << 20) -> float:
    a = np.ones(nbytes // 4, np.float32)
    b, out = a.copy(), np.empty_like(a)
    return 3 * nbytes / _best_time(lambda: np.add(a, b, out=out))


def measure_op_overhead(calls: int = 2000) -> float:
    x = tensor(np.ones(1, np.float32))
    a = np.ones(1, np.float32)

    def many_tideflow():
        for _ in range(calls):
            add(x, x)

    def many_numpy():
        for _ in range(calls):
            np.add(a, a)

    return max(_best_time(many_tideflow, 3) - _best_time(many_numpy, 3), 0.0) / calls


def measure_link(timeout_s: float = 120) -> Link:
    mpiexec = Path(sys.executable).parent / "mpiexec"
    command = [str(mpiexec), "-n", "2", sys.executable, "-m", "tideflow.parallel.cost._mpi_probe"]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout_s, check=True
        )
        measured = json.loads(done.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError) as e:
        raise TideflowError(f"plan: cannot measure MPI links with {mpiexec}: {e!r}") from None
    return Link(measured["bandwidth"], measured["latency_s"])


def calibrate() -> dict:
    """Measure this machine and write the cache; returns what was written."""
    peak, half_size = measure_gemms()
    link = measure_link()
    profile = {
        "peak_flops": peak,
        "half_size": half_size,
        "memory_bandwidth": measure_bandwidth(),
        "memory_bytes": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"),
        "op_overhead_s": measure_op_overhead(),
        "link_bandwidth": link.bandwidth,
        "link_latency_s": link.latency_s,
        "cpus": os.cpu_count() or 1,
    }
    path = cache_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(profile, indent=1))
    return profile


def local_cluster(nodes: int | None = None, gpus_per_node: int | None = None) -> Cluster:
    """This machine as a cluster of `gpus_per_node` ranks (default: one per CPU), measured on
    first use."""
    path = cache_path()
    profile = json.loads(path.read_text()) if path.exists() else calibrate()
    device = DeviceProfile(
        "local",
        profile["peak_flops"],
        profile["memory_bandwidth"],
        profile["memory_bytes"],
        max_efficiency=1.0,
        half_size=profile["half_size"],
        op_overhead_s=profile["op_overhead_s"],
    )
    link = Link(profile["link_bandwidth"], profile["link_latency_s"])
    ranks = gpus_per_node or profile["cpus"]
    # NOTE: ranks on one machine share its memory.
    device = dataclasses.replace(device, memory_bytes=device.memory_bytes / ranks)
    return Cluster(device, Network(link, link), ranks, nodes or 1)
