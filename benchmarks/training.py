"""Training-step time of W1, W2 and W3 (see train_workloads.py) in every mode, side by side
with PyTorch in the same run: tideflow eager, nn.Graph, nn.Graph reading its loss only every
STREAM steps ("streamed"), nn.Graph with bf16 AMP; PyTorch eager, eager under bf16 autocast,
and `torch.compile` (the model compiled, the optimizer eager, as its tutorials do) where it
compiles within COMPILE_LIMIT_S. Medians of interleaved steps (one step of each variant per
round, so a busy machine slows all alike) with their spread (interquartile range / median),
then the compile times and memory: the peak of one step (tracemalloc sees NumPy's arrays, not
PyTorch's; a graph's buffers for kernel outputs, made by its first step and reused by every
later one, are not in it), the fresh memory a step touches (minor page faults: pages the
allocator had to map anew; both libraries), and the arrays NumPy allocates in a step (their
number and MiB, on every thread: `NumpyAllocations`).

    OPENBLAS_NUM_THREADS=1 python benchmarks/training.py     (`make bench` runs 1 and 2)
"""

from __future__ import annotations

import ctypes
import resource
import statistics
import threading
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass, field

import train_workloads as tw
from numpy._core import _multiarray_umath

import tideflow as flow

WARMUP_ROUNDS = 3
TIMED_ROUNDS = 15
STREAM = 5
COMPILE_LIMIT_S = 60.0
PAGE_KIB = resource.getpagesize() / 1024

Step = Callable[[], None]


@dataclass
class Row:
    name: str
    ms: dict[str, tuple[float, float]] = field(default_factory=dict)  # median, spread
    compile_s: dict[str, float] = field(default_factory=dict)
    peak_mib: dict[str, float] = field(default_factory=dict)
    fresh_kib: dict[str, float] = field(default_factory=dict)
    allocations: dict[str, tuple[int, float]] = field(default_factory=dict)  # count, MiB
    notes: list[str] = field(default_factory=list)


def _graph(workload: tw.Workload, amp: bool) -> tuple[Step, Step, float]:
    """A fresh model's graph training step, STREAM steps reading only the last loss, and the
    seconds the first call (tracing and compiling) took."""
    model = workload.model(flow)
    optimizer = workload.optimizer(flow, model.parameters())
    x, y = (flow.tensor(a) for a in workload.batch)

    class TrainGraph(flow.nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model
            self.add_optimizer(optimizer)
            if amp:
                self.config.enable_amp(True, dtype=flow.bfloat16)

        def build(self, x, y):
            loss = workload.loss(flow, self.model, x, y)
            loss.backward()
            return loss

    graph = TrainGraph()
    start = time.perf_counter()
    graph(x, y).numpy()
    compile_seconds = time.perf_counter() - start

    def step():
        graph(x, y).numpy()  # reading the loss waits for the step, as `.item()` in a loop

    def streamed():
        losses = [graph(x, y) for _ in range(STREAM)]
        losses[-1].numpy()

    return step, streamed, compile_seconds


def _torch_steps(torch, workload: tw.Workload, model) -> dict[str, Step]:
    optimizer = workload.optimizer(torch, model.parameters())
    x, y = (torch.tensor(a) for a in workload.batch)

    def run(forward, autocast: bool) -> Step:
        def step():
            optimizer.zero_grad(set_to_none=True)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                loss = workload.loss(torch, forward, x, y)
            loss.backward()
            optimizer.step()

        return step

    return {
        "torch": run(model, autocast=False),
        "torch bf16": run(model, autocast=True),
        "torch.compile": run(torch.compile(model), autocast=False),
    }


def _first_call_seconds(step: Step) -> float:
    start = time.perf_counter()
    step()
    return time.perf_counter() - start


def _timed(steps: dict[str, Step]) -> dict[str, tuple[float, float]]:
    """Median ms and spread (IQR / median) per step, rounds interleaving all of them."""
    for _ in range(WARMUP_ROUNDS):
        for step in steps.values():
            step()
    times: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(TIMED_ROUNDS):
        for name, step in steps.items():
            start = time.perf_counter()
            step()
            times[name].append(time.perf_counter() - start)
    result = {}
    for name, samples in times.items():
        q1, median, q3 = statistics.quantiles(samples, n=4)
        result[name] = (median * 1e3, (q3 - q1) / median)
    return result


def _peak_mib(step: Step) -> float:
    """The most memory allocated at once during one (warm) call of `step`."""
    tracemalloc.start()
    try:
        step()
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def _fresh_kib(step: Step, calls: int = 5) -> float:
    """KiB of pages touched for the first time per call: memory the allocator could not
    reuse (each first touch of a page is a minor page fault)."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(calls):
        step()
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / calls * PAGE_KIB


_MALLOC = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)
_CALLOC = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t)


class _Allocator(ctypes.Structure):  # NumPy's PyDataMemAllocator (numpy/ndarraytypes.h)
    _fields_ = [(name, ctypes.c_void_p) for name in ("ctx", "malloc", "calloc", "realloc", "free")]


class _Handler(ctypes.Structure):  # PyDataMem_Handler
    _fields_ = [("name", ctypes.c_char * 127), ("version", ctypes.c_uint8),
                ("allocator", _Allocator)]  # fmt: skip


def _default_handler() -> _Handler:
    """NumPy's default memory handler, the one every thread without a handler of its own
    uses (all of them here): `PyDataMem_GetHandler` (slot 305 of NumPy's C API) called on a
    new thread, whose context is empty."""
    capsule = ctypes.pythonapi.PyCapsule_GetPointer
    capsule.restype, capsule.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    api = ctypes.cast(capsule(_multiarray_umath._ARRAY_API, None), ctypes.POINTER(ctypes.c_void_p))
    get_handler = ctypes.PYFUNCTYPE(ctypes.py_object)(api[305])
    handler = []
    thread = threading.Thread(target=lambda: handler.append(get_handler()))
    thread.start()
    thread.join()
    return _Handler.from_address(capsule(handler[0], b"mem_handler"))


class NumpyAllocations:
    """`with NumpyAllocations() as counted: ...`: `counted.calls` and `counted.nbytes` of the
    array data NumPy allocated meanwhile, on any thread (the graph runtime's streams are
    threads). The default handler's malloc and calloc are wrapped while counting."""

    def __init__(self) -> None:
        self.calls = self.nbytes = 0
        self._handler = _default_handler()
        allocator = self._handler.allocator
        self._saved = allocator.malloc, allocator.calloc
        # NOTE: the originals called without releasing the GIL, which the callbacks hold
        malloc = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)(
            allocator.malloc
        )
        calloc = ctypes.PYFUNCTYPE(
            ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t
        )(allocator.calloc)

        def counted_malloc(ctx, size):
            self.calls += 1
            self.nbytes += size
            return malloc(ctx, size)

        def counted_calloc(ctx, n, size):
            self.calls += 1
            self.nbytes += n * size
            return calloc(ctx, n, size)

        self._wrappers = _MALLOC(counted_malloc), _CALLOC(counted_calloc)

    def __enter__(self) -> NumpyAllocations:
        allocator = self._handler.allocator
        allocator.malloc, allocator.calloc = (
            ctypes.cast(w, ctypes.c_void_p).value for w in self._wrappers
        )
        return self

    def __exit__(self, *exc) -> None:
        self._handler.allocator.malloc, self._handler.allocator.calloc = self._saved


def _allocations(step: Step, calls: int = 5) -> tuple[int, float]:
    """NumPy allocations per call of `step`, and their MiB (the median call's)."""
    counts = []
    for _ in range(calls):
        with NumpyAllocations() as counted:
            step()
        counts.append((counted.calls, counted.nbytes / 2**20))
    return sorted(counts)[calls // 2]


def _measure(torch, workload: tw.Workload) -> Row:
    row = Row(workload.name)
    ours, theirs = tw.paired_models(torch, workload)
    graph, streamed, row.compile_s["graph"] = _graph(workload, amp=False)
    graph_bf16, _, row.compile_s["graph bf16"] = _graph(workload, amp=True)
    steps = {
        "eager": tw._training_step(flow, ours, workload),
        "graph": graph,
        "streamed": streamed,
        "graph bf16": graph_bf16,
    }
    steps |= _torch_steps(torch, workload, theirs)
    try:
        row.compile_s["torch.compile"] = _first_call_seconds(steps["torch.compile"])
    except Exception as e:  # the reference failing to compile is a result, not a crash
        row.notes.append(f"torch.compile failed: {type(e).__name__}: {str(e)[:120]}")
        del steps["torch.compile"]
    else:
        if row.compile_s["torch.compile"] > COMPILE_LIMIT_S:
            row.notes.append(f"torch.compile took over {COMPILE_LIMIT_S:.0f} s: not timed")
            del steps["torch.compile"]
    row.ms = _timed(steps)
    streamed_ms, spread = row.ms["streamed"]
    row.ms["streamed"] = (streamed_ms / STREAM, spread)  # per step, as the other columns
    for name in ("eager", "graph"):  # tracemalloc does not see PyTorch's allocator
        row.peak_mib[name] = _peak_mib(steps[name])
    for name in ("eager", "graph", "torch"):
        row.fresh_kib[name] = _fresh_kib(steps[name])
    for name in ("eager", "graph"):
        row.allocations[name] = _allocations(steps[name])
    return row


def run() -> list[Row]:
    try:
        import torch
    except ImportError:
        print("training: skipped, PyTorch (the reference) is not installed")
        return []
    print(tw.thread_setup(torch))
    flow.manual_seed(0)
    return [_measure(torch, workload) for workload in tw._workloads()]


COLUMNS = ("eager", "graph", "streamed", "graph bf16", "torch", "torch bf16", "torch.compile")
RATIOS = (
    ("eager/torch", "eager", "torch"),
    ("graph/torch", "graph", "torch"),
    ("graph/compile", "graph", "torch.compile"),
    ("bf16/torch bf16", "graph bf16", "torch bf16"),
)


def _ratio(row: Row, a: str, b: str) -> str:
    return f"{row.ms[a][0] / row.ms[b][0]:.2f}" if a in row.ms and b in row.ms else "-"


def _short(row: Row) -> str:
    return row.name.split()[0]  # "W1"


def report(rows: list[Row]) -> str:
    width = 15
    lines = [f"{row.name.split()[0]}: {row.name.split(maxsplit=1)[1]}" for row in rows]
    lines.append("training step, ms: median ±spread (IQR / median)")
    lines.append(f"{'':12}" + "".join(f"{c:>{width}}" for c in COLUMNS))
    for row in rows:
        cells = [f"{row.ms[c][0]:.1f} ±{row.ms[c][1]:.0%}" if c in row.ms else "-" for c in COLUMNS]
        lines.append(f"{_short(row):12}" + "".join(f"{c:>{width}}" for c in cells))
    lines.append("")
    lines.append(
        f"{'':12}" + "".join(f"{label:>16}" for label, _, _ in RATIOS)
        + f"{'compile s graph/bf16/torch.compile':>36}"
    )  # fmt: skip
    for row in rows:
        compiled = " / ".join(
            f"{row.compile_s[k]:.1f}" if k in row.compile_s else "-"
            for k in ("graph", "graph bf16", "torch.compile")
        )
        lines.append(
            f"{_short(row):12}" + "".join(f"{_ratio(row, a, b):>16}" for _, a, b in RATIOS)
            + f"{compiled:>36}"
        )  # fmt: skip
    lines.append("")
    lines.append(
        f"{'':12}{'peak MiB eager/graph':>24}{'fresh KiB/step eager/graph/torch':>36}"
        f"{'NumPy allocations/step (MiB) eager/graph':>44}"
    )
    for row in rows:
        peaks = " / ".join(f"{row.peak_mib[k]:.1f}" for k in ("eager", "graph"))
        fresh = " / ".join(f"{row.fresh_kib[k]:.0f}" for k in ("eager", "graph", "torch"))
        allocations = " / ".join(
            f"{row.allocations[k][0]} ({row.allocations[k][1]:.1f})" for k in ("eager", "graph")
        )
        lines.append(f"{_short(row):12}{peaks:>24}{fresh:>36}{allocations:>44}")
    lines.extend(f"{_short(row)}: {note}" for row in rows for note in row.notes)
    return "\n".join(lines)


if __name__ == "__main__":
    print(report(run()))
