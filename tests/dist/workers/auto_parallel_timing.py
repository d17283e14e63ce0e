"""Run on every rank under mpiexec -n 2, 4 or 8: predicted against measured step times; rank 0
prints a markdown table (benchmarks/plan_validation.py collects them for
docs/parallel_graphs.md).

    auto_parallel_timing.py [plans|layouts] [steps] [tables.md]

`plans` (2 or 4 ranks): the plans the auto-parallel tests run, at sizes where compute
shows. `layouts` (2, 4 or 8 ranks): the char-GPT in the layouts the parallel-graph tests run
(workers/graph_gpt.py: data, tensor, pipeline and their combinations; pipelines with two
micro-batches). Every graph searches its layouts; the columns are the search's prediction for
the greedy layouts and for the searched ones, and the searched plan priced with the compiled
plan's own counts of nodes, tasks and collectives (the largest of any rank's), which the
measured median step is divided by. `layouts` adds the cluster planner's prediction for the
same layout (`parallel.cost.evaluate` of the GPT family's model on the `local` cluster).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
from global_checks import RANK, SIZE, done

import tideflow as flow
import tideflow.parallel as par
from tideflow.distributed.backend import ReduceOp
from tideflow.distributed.world import get_world
from tideflow.models import GPT, GPTConfig, parallelize_gpt
from tideflow.parallel import cost

S = flow.sbp
ALL = flow.placement("cpu", ranks=list(range(SIZE)))
MODE = sys.argv[1] if len(sys.argv) > 1 else "plans"
WARMUP, STEPS = 2, int(sys.argv[2]) if len(sys.argv) > 2 else 10
OUT = sys.argv[3] if len(sys.argv) > 3 else None
rng = np.random.default_rng(0)


class TrainGraph(flow.nn.Graph):
    def __init__(self, model, loss, set_stages=None, micro_batches: int = 1):
        super().__init__()
        self.model = model
        self.loss = loss
        if set_stages is not None:
            set_stages(self.model)
        self.add_optimizer(flow.optim.AdamW(model.parameters(), lr=1e-3))
        if micro_batches > 1:
            self.config.set_gradient_accumulation_steps(micro_batches)
        self.config.enable_auto_parallel(True)

    def build(self, x, y):
        loss = self.loss(self.model, x, y)
        loss.backward()
        return loss


def _slowest(seconds: float) -> float:
    mine, out = np.array([seconds]), np.empty(1)
    get_world().comm.allreduce(mine, out, ReduceOp.MAX)
    return float(out[0])


def measure(graph, inputs) -> tuple[float, float, float, float]:
    """(predicted greedy, predicted searched, searched as lowered, measured median) seconds."""
    for _ in range(WARMUP):
        graph(*inputs).numpy()
    times = []
    for _ in range(STEPS):
        start = time.perf_counter()
        graph(*inputs).numpy()
        times.append(time.perf_counter() - start)
    found = graph._latest.layout_search
    lowered = _slowest(found.step_time)
    return found.greedy_time, found.time, lowered, _slowest(float(np.median(times)))


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


def micro_batches(pp: int) -> int:
    return 2 if pp > 1 else 1  # a pipeline fills with one micro-batch per stage


def planner_step(dp: int, tp: int, pp: int) -> float:
    """The cluster planner's step time for the char-GPT laid out as gpt_plan lays it out."""
    spec = cost.GPTSpec(CONFIG.n_layer, CONFIG.n_embd, CONFIG.n_head, CONFIG.block_size,
                        CONFIG.vocab_size)  # fmt: skip
    micro_batch = len(TOKENS) // (dp * micro_batches(pp))
    layout = cost.Layout(tp, pp, dp, micro_batch, recompute=False)
    cluster = cost.make_cluster("local", gpus_per_node=SIZE)
    return cost.evaluate(spec, cluster, len(TOKENS), layout).step_time_s


def gpt_plan(dp: int, tp: int = 1, pp: int = 1, broadcast_batch: bool = False):
    flow.manual_seed(0)
    model = GPT(CONFIG)
    layout = parallelize_gpt(model, dp=dp, tp=tp, pp=pp)
    graph = TrainGraph(model, lambda m, x, y: m(x, y)[1], layout.set_stages, micro_batches(pp))
    inputs = layout.inputs(flow.tensor(TOKENS[:, :-1]), flow.tensor(TOKENS[:, 1:]))
    if broadcast_batch:
        inputs = [t.to_global(sbp=S.broadcast) for t in inputs]
    return measure(graph, inputs)


lines: list[str] = []
if MODE == "plans":
    rows = [
        ("MLP 256-1024-256, batch 512, split batch", mlp_plan(S.split(0))),
        ("char-GPT, data parallel", gpt_plan(SIZE)),
        ("char-GPT, broadcast batch", gpt_plan(SIZE, broadcast_batch=True)),
    ]
    if SIZE == 4:
        rows.append(("char-GPT, data x tensor parallel 2x2", gpt_plan(2, 2)))
else:
    layouts = {
        2: [("dp2", 2, 1, 1), ("tp2", 1, 2, 1), ("pp2", 1, 1, 2)],
        4: [("dp4", 4, 1, 1), ("dp2 x tp2", 2, 2, 1), ("dp2 x pp2", 2, 1, 2),
            ("tp2 x pp2", 1, 2, 2)],
        8: [("dp2 x tp2 x pp2", 2, 2, 2)],
    }[SIZE]  # fmt: skip
    rows = [(f"char-GPT {name}", gpt_plan(dp, tp, pp)) for name, dp, tp, pp in layouts]
    planned = [planner_step(dp, tp, pp) for _, dp, tp, pp in layouts]
    lines += [
        f"| layout ({SIZE} ranks) | planner predicted ms | measured ms | measured / predicted |",
        "|---|---|---|---|",
        *(f"| {name} | {predicted * 1e3:.1f} | {measured * 1e3:.1f} | "
          f"{measured / predicted:.2f} |"
          for (name, (*_, measured)), predicted in zip(rows, planned, strict=True)),
        "",
    ]  # fmt: skip
lines += [
    f"| plan ({SIZE} ranks) | predicted greedy ms | predicted searched ms | "
    "searched as compiled ms | measured ms | measured / predicted |",
    "|---|---|---|---|---|---|",
    *(f"| {name} | {greedy * 1e3:.1f} | {searched * 1e3:.1f} | {lowered * 1e3:.1f} | "
      f"{measured * 1e3:.1f} | {measured / lowered:.2f} |"
      for name, (greedy, searched, lowered, measured) in rows),
]  # fmt: skip
if RANK == 0:
    # NOTE: to a file when given one: other ranks' output can split lines printed to a pipe
    if OUT is None:
        print("\n".join(lines))
    else:
        Path(OUT).write_text("\n".join(lines) + "\n")
done()
