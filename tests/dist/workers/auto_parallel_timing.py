"""Run on every rank under mpiexec -n 2 or 4: predicted against measured step times of the
plans the auto-parallel tests run, at sizes where compute shows (rank 0 prints the table of
docs/parallel_graphs.md). Each plan's prediction is the search's: the searched plan's, and
for greedy layouts the search's starting point."""

from __future__ import annotations

import time

import numpy as np
from global_checks import RANK, SIZE, done

import tideflow as flow
import tideflow.parallel as par
from tideflow.models import GPT, GPTConfig, parallelize_gpt

S = flow.sbp
ALL = flow.placement("cpu", ranks=list(range(SIZE)))
WARMUP, STEPS = 3, 10
rng = np.random.default_rng(0)


class TrainGraph(flow.nn.Graph):
    def __init__(self, model, loss, set_stages=None):
        super().__init__()
        self.model = model
        self.loss = loss
        if set_stages is not None:
            set_stages(self.model)
        self.add_optimizer(flow.optim.AdamW(model.parameters(), lr=1e-3))
        self.config.enable_auto_parallel(True)

    def build(self, x, y):
        loss = self.loss(self.model, x, y)
        loss.backward()
        return loss


def measure(graph, inputs) -> tuple[float, float, float]:
    """(predicted greedy, predicted searched, measured median) step seconds."""
    for _ in range(WARMUP):
        graph(*inputs).numpy()
    times = []
    for _ in range(STEPS):
        start = time.perf_counter()
        graph(*inputs).numpy()
        times.append(time.perf_counter() - start)
    found = graph._latest.layout_search
    return found.greedy_time, found.time, float(np.median(times))


def mlp_plan(layout):
    flow.manual_seed(0)
    model = flow.nn.Sequential(flow.nn.Linear(256, 1024), flow.nn.GELU(), flow.nn.Linear(1024, 256))
    graph = TrainGraph(
        par.module_to_global(model, ALL, S.broadcast), lambda m, x, y: ((m(x) - y) ** 2).mean()
    )
    x = flow.tensor(rng.standard_normal((512, 256)).astype(np.float32))
    y = flow.tensor(rng.standard_normal((512, 256)).astype(np.float32))
    inputs = [t.to_global(ALL, S.broadcast).to_global(sbp=layout) for t in (x, y)]
    return measure(graph, inputs)


CONFIG = GPTConfig(vocab_size=65, block_size=64, n_layer=2, n_head=4, n_embd=64)
TOKENS = rng.integers(0, CONFIG.vocab_size, (16, CONFIG.block_size + 1))


def gpt_plan(dp: int, tp: int, broadcast_batch: bool = False):
    flow.manual_seed(0)
    model = GPT(CONFIG)
    layout = parallelize_gpt(model, dp=dp, tp=tp)
    graph = TrainGraph(model, lambda m, x, y: m(x, y)[1], layout.set_stages)
    inputs = layout.inputs(flow.tensor(TOKENS[:, :-1]), flow.tensor(TOKENS[:, 1:]))
    if broadcast_batch:
        inputs = [t.to_global(sbp=S.broadcast) for t in inputs]
    return measure(graph, inputs)


rows = [
    ("MLP 256-1024-256, batch 512, split batch", mlp_plan(S.split(0))),
    ("char-GPT, data parallel", gpt_plan(SIZE, 1)),
    ("char-GPT, broadcast batch", gpt_plan(SIZE, 1, broadcast_batch=True)),
]
if SIZE == 4:
    rows.append(("char-GPT, data x tensor parallel 2x2", gpt_plan(2, 2)))
if RANK == 0:
    print(f"| plan ({SIZE} ranks) | predicted greedy ms | predicted searched ms | measured ms | "
          "measured / predicted |")  # fmt: skip
    for name, (greedy, searched, measured) in rows:
        print(f"| {name} | {greedy * 1e3:.1f} | {searched * 1e3:.1f} | {measured * 1e3:.1f} | "
              f"{measured / searched:.2f} |")  # fmt: skip
done()
