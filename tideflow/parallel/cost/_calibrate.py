"""The `local` profile: this machine measured, cached in
`$XDG_CACHE_HOME/tideflow/cost_profile.json` (default `~/.cache`).

- GEMMs: NumPy float32 matmuls whose smallest dimension d runs 16..1024 (square, and thin
  ones as attention's), with the BLAS threads this process has (recorded: ranks started
  alike run as many); their rates r(d) are fitted to the devices' curve r = R d / (d + c).
  The profile's peak is R with max_efficiency 1. Batches of small products, (b, 32, 16) @
  (b, 16, 64) for three b, give what each matrix costs beyond its FLOPs (the slope over b
  less the curve's time of one).
- Fused attention: its kernel and its backward's on a causal (8, 4 heads, 128, 32) batch;
  what each score element costs beyond the tiles' products (priced with the curve above).
- Bandwidth: a NumPy add of 32 MB operands (two read, one written).
- Op overhead: a tideflow add of one-element tensors, less NumPy's own.
- Graph overheads: per node, per task and per hand-over between stream threads of a
  compiled plan (`nn.graph._overhead_probe`, in a process of its own).
- Links: ping-pong of 8 bytes and 16 MB between two ranks of `mpiexec -n 2` through
  tideflow's MPI communicator (`_mpi_probe`); one machine has no second node, so the same
  link stands for both levels.
- Collective waits: jobs of 2 ranks, a rank per core and two and four per core alternate
  a slab of small kernels with an 8-byte all-reduce; what an iteration takes beyond its
  work (the slabs' CPU time, over the cores where ranks share them) is what a collective
  costs a step of a job that size.
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
from ...framework.registry import get_op, kernel_for
from ...ops.binary import add
from ...ops.creation import tensor
from ._cluster import Cluster
from ._devices import DeviceProfile
from ._network import Link, Network
from ._ops import AttentionShape, attention_gemm_times

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


def _clock():
    """This thread's CPU time where the kernels run on it alone (one BLAS thread): other
    processes' load then takes cores away without lengthening what is measured. With more
    BLAS threads, their work is the wall clock's."""
    return time.thread_time if blas_threads() == 1 else time.perf_counter


def _best_time(fn, repeats: int = 5, min_seconds: float = 0.05) -> float:
    """The best of `repeats` timings, each of as many calls as fill `min_seconds`."""
    clock = _clock()
    fn()  # warm caches and thread pools
    start = clock()
    fn()
    calls = max(1, int(min_seconds / max(clock() - start, 1e-9)))
    best = float("inf")
    for _ in range(repeats):
        start = clock()
        for _ in range(calls):
            fn()
        best = min(best, (clock() - start) / calls)
    return best


def cores() -> int:
    """The CPU cores this process may run on (its affinity mask, else the machine's)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def blas_threads() -> int:
    """The threads NumPy's BLAS runs a GEMM on: threadpoolctl's reading when installed,
    else the environment OpenBLAS and OpenMP read, else one per core (their default)."""
    try:
        import threadpoolctl
    except ImportError:
        threadpoolctl = None
    if threadpoolctl is not None:
        counts = [
            p["num_threads"] for p in threadpoolctl.threadpool_info() if p["user_api"] == "blas"
        ]
        if counts:
            return max(counts)
    for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
        value = os.environ.get(variable, "")
        if value.isdigit() and int(value) > 0:
            return int(value)
    return cores()


def fit_gemm_curve(sizes, rates) -> tuple[float, float]:
    """(R, c) of r = R d / (d + c), from 1/r = 1/R + (c/R)(1/d), linear in 1/d, by
    non-negative least squares on relative errors: each row is weighted by its rate, so
    the residual is r / r_fit - 1. Unweighted, the slowest rate (a thin GEMM, or one a busy
    machine slowed) outweighs the others by its 1/r and drags the peak down to it.
    With no slope left the peak is the best rate seen."""
    from scipy.optimize import nnls

    rates = np.asarray(rates, float)
    inverse_sizes = 1 / np.asarray(sizes, float)
    design = np.stack([np.ones_like(inverse_sizes), inverse_sizes], axis=1) * rates[:, None]
    (inverse_peak, slope), _ = nnls(design, np.ones_like(rates))
    if inverse_peak <= 0:
        return float(rates.max()), 0.0
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


SMALL_GEMM = (32, 64, 16)  # (m, n, k) of one matrix of a batch, as attention's per head
BATCHES = (16, 64, 256)


def fit_gemm_call(batches, seconds, flop_seconds: float) -> float:
    """Per matrix of a batched product: the slope of its time over the batch size, less the
    FLOP time of one matrix (never below zero)."""
    slope = np.polyfit(np.asarray(batches, float), np.asarray(seconds, float), 1)[0]
    return max(float(slope) - flop_seconds, 0.0)


def measure_gemm_call(peak: float, half_size: float) -> float:
    m, n, k = SMALL_GEMM
    rng = np.random.default_rng(0)
    seconds = []
    for b in BATCHES:
        a = rng.standard_normal((b, m, k), dtype=np.float32)
        w = rng.standard_normal((b, k, n), dtype=np.float32)
        out = np.empty((b, m, n), np.float32)
        seconds.append(_best_time(lambda a=a, w=w, out=out: np.matmul(a, w, out=out)))
    d = min(m, n, k)
    return fit_gemm_call(BATCHES, seconds, 2 * m * n * k / (peak * d / (d + half_size)))


# NOTE: not the char-GPT's shape: the rates are the kernel's, whatever shape prices them
ATTENTION_PROBE = AttentionShape(batch=32, rows=128, keys=128, dim=32, value_dim=32, causal=True)


def measure_attention(device: DeviceProfile) -> tuple[float, float]:
    """(forward, backward) seconds per score element of the fused attention beyond its
    tiles' products, which `device` prices. The operands are heads of a (sequences, tokens,
    heads * dim) activation, strided as a GPT's are."""
    shape = ATTENTION_PROBE
    heads, sequences = 4, shape.batch // 4
    width = heads * shape.dim
    qkv = np.random.default_rng(0).standard_normal((sequences, shape.rows, 3 * width), np.float32)
    q, k, v = (
        qkv[..., i * width : (i + 1) * width]
        .reshape(sequences, shape.rows, heads, shape.dim)
        .transpose(0, 2, 1, 3)
        for i in range(3)
    )
    forward, backward = kernel_for(get_op("attention")), kernel_for(get_op("attention_backward"))
    attrs = {"scale": shape.dim**-0.5, "is_causal": True}
    out, probs = forward(q, k, v, **attrs)
    grad = np.ones_like(out)
    forward_s = _best_time(lambda: forward(q, k, v, **attrs))
    backward_s = _best_time(lambda: backward(grad, q, k, v, probs, **attrs))
    gemm_forward, gemm_backward = attention_gemm_times(device, shape, itemsize=4)
    scores = shape.scores()
    forward_rate = max(forward_s - gemm_forward, 0.0) / scores
    return forward_rate, max(backward_s - gemm_backward, 0.0) / scores


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


def _mpi_probe(ranks: int, timeout_s: float) -> dict:
    mpiexec = Path(sys.executable).parent / "mpiexec"
    command = [str(mpiexec), "-n", str(ranks), sys.executable, "-m",
               "tideflow.parallel.cost._mpi_probe"]  # fmt: skip
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout_s, check=True
        )
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError) as e:
        raise TideflowError(f"plan: cannot measure MPI links with {mpiexec}: {e!r}") from None


def measure_link(timeout_s: float = 120) -> tuple[Link, dict]:
    """The link between two ranks, and everything the two-rank probe measured."""
    measured = _mpi_probe(2, timeout_s)
    return Link(measured["bandwidth"], measured["latency_s"]), measured


def collective_wait(measured: dict, ranks: int, cores: int) -> float:
    """What an iteration of the probe's slabs and all-reduces took beyond its work: the
    busiest rank's slab, or, where the ranks time-share the cores, every rank's slab over
    the cores."""
    busy = max(measured["work_max_s"], measured["work_sum_s"] / min(ranks, cores))
    return max(measured["iteration_s"] - busy, 0.0)


def measure_collective_waits(two_ranks: dict, timeout_s: float = 120) -> dict[str, float]:
    """{ranks: seconds} of `Cluster.collective_wait_s` for jobs of 2 ranks, one per core and
    two and four per core, up to 16 ranks (a larger job is no quick measurement)."""
    n = cores()
    counts = sorted(r for r in {2, n, 2 * n, 4 * n} if 2 <= r <= 16)
    return {
        str(r): collective_wait(two_ranks if r == 2 else _mpi_probe(r, timeout_s), r, n)
        for r in counts
    }


def wait_for(waits: dict[str, float], ranks: int) -> float:
    """The measured wait of a job of `ranks`, linear between the sizes measured; beyond the
    largest it grows in proportion to the ranks; a single rank waits for no one."""
    if ranks < 2 or not waits:
        return 0.0
    sizes = sorted((int(r), s) for r, s in waits.items())
    largest, largest_s = sizes[-1]
    if ranks >= largest:
        return largest_s * ranks / largest
    return float(np.interp(ranks, [r for r, _ in sizes], [s for _, s in sizes]))


def measure_graph_overheads(timeout_s: float = 300) -> dict:
    """{"node_s", "task_s", "switch_s"} of a compiled graph on this machine.

    NOTE: graphs are built above this layer, so they are timed in a process of their own by
    module name (which also keeps this process's state out of the timings)."""
    command = [sys.executable, "-m", "tideflow.nn.graph._overhead_probe"]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout_s, check=True
        )
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError) as e:
        raise TideflowError(f"plan: cannot time compiled graphs: {e!r}") from None


def calibrate() -> dict:
    """Measure this machine and write the cache; returns what was written."""
    peak, half_size = measure_gemms()
    link, two_ranks = measure_link()
    threads = blas_threads()
    gemm_call_s = measure_gemm_call(peak, half_size)
    bandwidth = measure_bandwidth()
    kernels = DeviceProfile(
        "local", peak, bandwidth, 0.0, max_efficiency=1.0, half_size=half_size,
        gemm_call_s=gemm_call_s,
    )  # fmt: skip
    attention_score_s, attention_grad_score_s = measure_attention(kernels)
    profile = {
        "peak_flops": peak,
        "half_size": half_size,
        "gemm_call_s": gemm_call_s,
        "attention_score_s": attention_score_s,
        "attention_grad_score_s": attention_grad_score_s,
        "blas_threads": threads,
        "gemm_cores": min(threads, cores()),
        "memory_bandwidth": bandwidth,
        "memory_bytes": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"),
        "op_overhead_s": measure_op_overhead(),
        **measure_graph_overheads(),
        "link_bandwidth": link.bandwidth,
        "link_latency_s": link.latency_s,
        "collective_waits": measure_collective_waits(two_ranks),
        "cpus": cores(),
    }
    path = cache_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(profile, indent=1))
    return profile


def local_cluster(nodes: int | None = None, gpus_per_node: int | None = None) -> Cluster:
    """This machine as a cluster of `gpus_per_node` ranks (default: one per core) sharing
    its cores, measured on first use."""
    path = cache_path()
    profile = json.loads(path.read_text()) if path.exists() else calibrate()
    measured_since = {"gemm_cores", "gemm_call_s", "node_s", "task_s", "switch_s",
                      "collective_waits", "attention_score_s",
                      "attention_grad_score_s"}  # fmt: skip
    missing = measured_since - set(profile)
    if missing:
        # NOTE: a profile cached before the graph's overheads were measured would price them
        # at zero: measure again instead.
        raise TideflowError(
            f"plan: the cached profile {path} lacks {sorted(missing)}; run "
            "`tideflow plan --cluster local --calibrate` to measure this machine again"
        )
    device = DeviceProfile(
        "local",
        profile["peak_flops"],
        profile["memory_bandwidth"],
        profile["memory_bytes"],
        max_efficiency=1.0,
        half_size=profile["half_size"],
        op_overhead_s=profile["op_overhead_s"],
        node_s=profile["node_s"],
        task_s=profile["task_s"],
        switch_s=profile["switch_s"],
        gemm_call_s=profile["gemm_call_s"],
        gemm_cores=profile["gemm_cores"],
        attention_score_s=profile["attention_score_s"],
        attention_grad_score_s=profile["attention_grad_score_s"],
    )
    link = Link(profile["link_bandwidth"], profile["link_latency_s"])
    ranks = gpus_per_node or profile["cpus"]
    # NOTE: ranks on one machine share its memory.
    device = dataclasses.replace(device, memory_bytes=device.memory_bytes / ranks)
    return Cluster(
        device, Network(link, link), ranks, nodes or 1,
        cores_per_node=profile["cpus"],
        collective_wait_s=wait_for(profile["collective_waits"], ranks * (nodes or 1)),
    )  # fmt: skip
