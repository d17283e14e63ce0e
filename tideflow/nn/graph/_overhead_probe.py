"""Run as `python -m tideflow.nn.graph._overhead_probe` (by the cost model's calibration):
what a compiled graph costs beyond its kernels, as one JSON line {"node_s", "task_s",
"switch_s"}.

- node_s: graphs of n chained 1x1 matmuls (one node each: matmuls do not fuse), the
  slope of step time over the plan's node count; it holds the chain interpreter's step
  and the smallest kernel call.
- task_s: plans of k one-line tasks on one stream, run by the runtime as `lower` makes
  them (each an actor acting and messaging), the slope over k.
- switch_s: the same tasks alternating between the compute and the communication streams,
  as chains do around every collective: the extra slope is the hand-over between the two
  stream threads.

Each slope is a least-squares line through step times at three counts, each time the best
of several rounds of steps (a busy machine only ever slows a round down).
"""

from __future__ import annotations

import json
import time

import numpy as np

from ...framework.tensor import Tensor
from ...ops.creation import ones
from ...runtime import Executor, PlanSpec, TaskSpec
from .graph import Graph

COUNTS = (1, 100, 300)
ROUNDS, STEPS = 5, 30


def _best_step(step) -> float:
    for _ in range(3):
        step()
    best = float("inf")
    for _ in range(ROUNDS):
        start = time.perf_counter()
        for _ in range(STEPS):
            step()
        best = min(best, (time.perf_counter() - start) / STEPS)
    return best


def _slope(counts, seconds) -> float:
    return float(np.polyfit(np.asarray(counts, float), np.asarray(seconds, float), 1)[0])


class _Matmuls(Graph):
    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n

    def build(self, x: Tensor) -> Tensor:
        for _ in range(self.n):
            x = x @ x
        return x


def node_seconds() -> float:
    x = ones(1, 1)
    nodes, seconds = [], []
    for n in COUNTS:
        graph = _Matmuls(n)
        graph(x).numpy()
        nodes.append(len(graph._latest.program.nodes))
        seconds.append(_best_step(lambda graph=graph: graph(x).numpy()))
    return _slope(nodes, seconds)


def _tasks(k: int, alternate: bool) -> PlanSpec:
    tasks, previous = [TaskSpec("feed:x", None, (), 1)], "feed:x"  # type: ignore[arg-type]
    for i in range(k):
        stream = "comm" if alternate and i % 2 else "compute"
        tasks.append(TaskSpec(f"chain:{i}", lambda a: (a,), ((previous, 0),), 1, stream=stream))
        previous = f"chain:{i}"
    return PlanSpec(
        tuple(tasks), ("feed:x",), ((previous, 0),), {}, in_order=frozenset(("compute", "comm"))
    )


def task_seconds(alternate: bool) -> float:
    x = np.ones(1)
    seconds = []
    for k in COUNTS:
        with Executor(_tasks(k, alternate)) as executor:
            seconds.append(_best_step(lambda executor=executor: executor.run((x,)).result()))
    return _slope(COUNTS, seconds)


def main() -> None:
    node_s = node_seconds()
    task_s = task_seconds(alternate=False)
    switch_s = task_seconds(alternate=True) - task_s
    print(json.dumps({"node_s": max(node_s, 0.0), "task_s": max(task_s, 0.0),
                      "switch_s": max(switch_s, 0.0)}))  # fmt: skip


if __name__ == "__main__":
    main()
