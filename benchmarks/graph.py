"""nn.Graph against eager, in the same run: training-step time of W1 (MLP + Adam) and W3
(GPT + AdamW) in tideflow eager, tideflow graph and PyTorch eager (medians, interleaved), the
graph's compile time, and peak memory of one step (tracemalloc, which sees NumPy's arrays).
"graph" reads the loss after every step, as eager code printing it would; "streamed" reads
it every STREAM steps (a logging interval), so calls overlap the steps in flight.

    python benchmarks/graph.py
"""

from __future__ import annotations

import statistics
import time
import tracemalloc
from collections.abc import Callable

import train_workloads as tw

import tideflow as flow

WARMUP_STEPS = 3
TIMED_STEPS = 15
STREAM = 5


Step = Callable[[], None]


def _graph_step(workload: tw.Workload, model) -> tuple[Step, Step, float]:
    """The graph's training step, STREAM steps reading only the last loss, and how long the
    first call (the compilation) took."""
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
    compile_seconds = time.perf_counter() - start

    def step():
        graph(x, y).numpy()  # reading the loss waits for the step, as `.item()` in a loop

    def streamed():
        losses = [graph(x, y) for _ in range(STREAM)]
        losses[-1].numpy()

    return step, streamed, compile_seconds


def _peak_bytes(step: Callable[[], None]) -> int:
    """The most bytes allocated at once during one call of `step` (after a warm call)."""
    step()
    tracemalloc.start()
    try:
        step()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _medians(steps: list[Callable[[], None]]) -> list[float]:
    for _ in range(WARMUP_STEPS):
        for step in steps:
            step()
    times: list[list[float]] = [[] for _ in steps]
    for _ in range(TIMED_STEPS):
        for step, sink in zip(steps, times, strict=True):
            start = time.perf_counter()
            step()
            sink.append(time.perf_counter() - start)
    return [statistics.median(t) * 1e3 for t in times]


def run() -> list[dict]:
    try:
        import torch
    except ImportError:
        print("graph: skipped, PyTorch (the reference) is not installed")
        return []
    print(tw.thread_setup(torch))
    flow.manual_seed(0)
    rows = []
    for workload in tw._workloads():
        if workload.name.startswith("W2"):
            continue
        eager, theirs = tw._steps(torch, workload)
        model = workload.model(flow)
        graph, streamed, compile_seconds = _graph_step(workload, model)
        eager_ms, graph_ms, streamed_ms, torch_ms = _medians([eager, graph, streamed, theirs])
        rows.append(
            dict(
                name=workload.name,
                eager=eager_ms,
                graph=graph_ms,
                streamed=streamed_ms / STREAM,
                torch=torch_ms,
                compile=compile_seconds,
                eager_peak=_peak_bytes(eager),
                graph_peak=_peak_bytes(graph),
            )
        )
    return rows


def report(rows: list[dict]) -> str:
    header = (
        f"{'training step (ms, median)':34} {'eager':>7} {'graph':>7} {'streamed':>8} "
        f"{'torch':>7} {'eager/graph':>11} {'graph/torch':>11} {'compile s':>9} "
        f"{'peak MiB eager/graph':>21}"
    )
    lines = [header]
    for r in rows:
        peaks = f"{r['eager_peak'] / 2**20:.1f} / {r['graph_peak'] / 2**20:.1f}"
        lines.append(
            f"{r['name']:34} {r['eager']:7.1f} {r['graph']:7.1f} {r['streamed']:8.1f} "
            f"{r['torch']:7.1f} {r['eager'] / r['graph']:11.2f} {r['graph'] / r['torch']:11.2f} "
            f"{r['compile']:9.2f} {peaks:>21}"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    print(report(run()))
