"""Run on every rank under mpiexec -n 2 or 4: ZeRO stages 1 and 2 in nn.Graph. Training
with sharded optimizer state equals training without it (and one process); the state is
split over the data-parallel axis (each rank holds 1/n), gradients reach the sharded
updates as reduce-scatters, and parameters stay whole. On 4 ranks also data x tensor
parallel, with ZeRO over the data-parallel axis of the 2x2 placement. The sharded state
saves and reloads with the graph's state dict."""

from __future__ import annotations

import os
import tempfile

import numpy as np
from global_checks import SIZE, S, close, data_parallel, done, global_of, tensor_parallel

import tideflow as flow
import tideflow.distributed as dist
import tideflow.parallel as par

STEPS = 3
rng = np.random.default_rng(0)
DATA = [
    (rng.standard_normal((8, 6)).astype(np.float32), rng.standard_normal((8, 4)).astype(np.float32))
    for _ in range(STEPS)
]


def mlp():
    flow.manual_seed(0)
    return flow.nn.Sequential(flow.nn.Linear(6, 12), flow.nn.Tanh(), flow.nn.Linear(12, 4))


class TrainGraph(flow.nn.Graph):
    def __init__(self, model, zero_stage: int | None, min_size: int):
        super().__init__()
        self.model = model
        self.add_optimizer(flow.optim.Adam(model.parameters(), lr=0.01))
        if zero_stage is not None:
            self.config.enable_zero(True, stage=zero_stage, shard_min_size=min_size)

    def build(self, x, y):
        loss = ((self.model(x) - y) ** 2).mean()
        loss.backward()
        return loss


def train(layout, where, data_sbp, zero_stage, min_size=1):
    model = layout(mlp(), where)
    graph = TrainGraph(model, zero_stage, min_size)
    losses = [graph(global_of(x, where, data_sbp), global_of(y, where, data_sbp)) for x, y in DATA]
    losses = np.array([loss.numpy() for loss in losses])
    return losses, model, graph


def state_bytes(graph) -> int:
    """Bytes of optimizer state this rank holds."""
    opt = graph._optimizers[0][0]
    return sum(t.to_local().numpy().nbytes for s in opt.state.values() for t in s.values()
               if isinstance(t, flow.Tensor))  # fmt: skip


def check(name, layout, where, data_sbp, dp: int) -> None:
    want, reference, base = train(layout, where, data_sbp, None)
    for stage in (1, 2):
        losses, model, graph = train(layout, where, data_sbp, stage)
        close(losses, want, f"{name}, ZeRO {stage}: losses", atol=1e-6)
        for p, q in zip(model.parameters(), reference.parameters(), strict=True):
            assert p.sbp == q.sbp, (p.sbp, q.sbp)  # parameters stay whole
            close(p.detach().numpy(), q.detach().numpy(), f"{name}, ZeRO {stage}: weights", 1e-6)
        weight = model[2].weight
        state = graph._optimizers[0][0].state[weight]
        assert any(s == S.split(0) for s in state["exp_avg"].sbp), state["exp_avg"].sbp
        shard = state["exp_avg"].to_local().numel()
        assert shard * dp == weight.to_local().numel(), (shard, weight.to_local().shape)
        assert state_bytes(graph) < state_bytes(base), (state_bytes(graph), state_bytes(base))
        opt = graph._optimizers[0][0]
        sharded = sum(opt.state[p]["exp_avg"].sbp != p.sbp for p in model.parameters())
        text = str(graph._latest.program)
        assert text.count("P->S(") >= sharded >= 3, text  # sharded gradients reduce-scattered
    # parameters under shard_min_size elements keep their whole state
    _, model, graph = train(layout, where, data_sbp, 1, min_size=10_000)
    state = graph._optimizers[0][0].state[model[0].weight]
    assert state["exp_avg"].sbp == model[0].weight.sbp


def check_resume(where) -> None:
    """The graph's state dict with sharded optimizer state saves (a directory of shards)
    and loads into a new graph that goes on exactly as the first."""
    model = data_parallel(mlp(), where)
    graph = TrainGraph(model, 2, 1)

    def batch(i):
        x, y = DATA[i % len(DATA)]
        return global_of(x, where, S.split(0)), global_of(y, where, S.split(0))

    for i in range(2):
        graph(*batch(i)).numpy()
    box = [tempfile.mkdtemp() if dist.get_rank() == 0 else None]
    dist.broadcast_object_list(box, src=0)
    path = os.path.join(box[0], "zero")
    flow.save(graph.state_dict(), path)
    want = [graph(*batch(i)).numpy() for i in range(2, 4)]
    fresh = data_parallel(mlp(), where)
    resumed = TrainGraph(fresh, 2, 1)
    resumed.load_state_dict(flow.load(path))  # the state follows its parameter's layout
    close([resumed(*batch(i)).numpy() for i in range(2, 4)], want, "resumed losses", atol=0)
    state = resumed._optimizers[0][0].state[fresh[0].weight]
    assert state["exp_avg"].sbp == (S.split(0),), state["exp_avg"].sbp  # sharded again


LINE = par.placement("cpu", list(range(SIZE)))
check("data parallel", data_parallel, LINE, S.split(0), SIZE)
check_resume(LINE)
if SIZE == 4:
    GRID = par.placement("cpu", [[0, 1], [2, 3]])
    check("data x tensor parallel", tensor_parallel, GRID, (S.split(0), S.broadcast), 2)
done()
