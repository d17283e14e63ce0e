"""Run on every rank under mpiexec -n 2 or 4: ZeRO stages 1, 2 and 3 in nn.Graph. Training
with sharded optimizer state equals training without it (and one process); the state is
split over the data-parallel axis (each rank holds 1/n), gradients reach the sharded
updates as reduce-scatters, and with stages 1 and 2 parameters stay whole. With stage 3 the
parameters are split like their state after the first call (same values, 1/n on each rank),
gathered in the step before their forward and again before their backward, never after the
update; SGD with momentum and Adam, with and without gradient accumulation, train like one
process, and eager training goes on from there. On 4 ranks also data x tensor parallel,
with ZeRO over the data-parallel axis of the 2x2 placement. The sharded state (and stage
3's sharded parameters) saves and reloads with the graph's state dict."""

from __future__ import annotations

import os
import tempfile

import numpy as np
from global_checks import (
    SIZE,
    S,
    close,
    data_parallel,
    done,
    global_of,
    raises,
    squared_error,
    tensor_parallel,
    train_one_process,
)

import tideflow as flow
import tideflow.distributed as dist
import tideflow.parallel as par
from tideflow.compiler.ir import RECOMPUTE

STEPS = 3
rng = np.random.default_rng(0)
DATA = [
    (rng.standard_normal((8, 6)).astype(np.float32), rng.standard_normal((8, 4)).astype(np.float32))
    for _ in range(STEPS)
]


def mlp():
    flow.manual_seed(0)
    return flow.nn.Sequential(flow.nn.Linear(6, 12), flow.nn.Tanh(), flow.nn.Linear(12, 4))


def adam(params):
    return flow.optim.Adam(params, lr=0.01)


def momentum(params):
    return flow.optim.SGD(params, lr=0.1, momentum=0.9)


class TrainGraph(flow.nn.Graph):
    def __init__(self, model, zero_stage: int | None, min_size: int, make_opt=adam,
                 accumulation: int = 1):  # fmt: skip
        super().__init__()
        self.model = model
        self.add_optimizer(make_opt(model.parameters()))
        if zero_stage is not None:
            self.config.enable_zero(True, stage=zero_stage, shard_min_size=min_size)
        if accumulation > 1:
            self.config.set_gradient_accumulation_steps(accumulation)

    def build(self, x, y):
        loss = ((self.model(x) - y) ** 2).mean()
        loss.backward()
        return loss


def train(layout, where, data_sbp, zero_stage, min_size=1, make_opt=adam, accumulation=1):
    model = layout(mlp(), where)
    graph = TrainGraph(model, zero_stage, min_size, make_opt, accumulation)
    losses = [graph(global_of(x, where, data_sbp), global_of(y, where, data_sbp)) for x, y in DATA]
    losses = np.array([loss.numpy() for loss in losses]).reshape(-1)
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


def check_stage_3(name, layout, where, data_sbp, dp: int) -> None:
    """Stage 3 against stage 0 and one process: Adam, then SGD with momentum and Adam with
    gradient accumulation; the parameters' layout and shards, the program's communication,
    and eager steps after the graph's."""
    for make_opt, accumulation in ((adam, 1), (momentum, 2), (adam, 2)):
        what = f"{name}, ZeRO 3, {make_opt.__name__}, {accumulation} micro-batches"
        want, reference, base = train(layout, where, data_sbp, None, 1, make_opt, accumulation)
        alone = mlp()
        ref_losses, ref_weights = train_one_process(
            alone, make_opt(alone.parameters()), DATA, squared_error, accumulation
        )
        losses, model, graph = train(layout, where, data_sbp, 3, 1, make_opt, accumulation)
        close(losses, want, f"{what}: losses", atol=1e-6)
        close(losses, ref_losses, f"{what}: losses against one process", atol=1e-5)
        sharded = 0
        opt = graph._optimizers[0][0]
        for p, q, w in zip(model.parameters(), reference.parameters(), ref_weights, strict=True):
            close(p.detach().numpy(), q.detach().numpy(), f"{what}: weights", 1e-6)
            close(p.detach().numpy(), w, f"{what}: weights against one process", 1e-5)
            if p.sbp != q.sbp:  # split over the data-parallel axis: 1/dp of the elements
                sharded += 1
                assert sum(s == S.split(0) or s == S.split(1) for s in p.sbp) > sum(
                    s == S.split(0) or s == S.split(1) for s in q.sbp
                ), (p.sbp, q.sbp)
                assert p.to_local().numel() * dp == q.to_local().numel(), (
                    p.to_local().shape, q.to_local().shape)  # fmt: skip
            state = [t for t in opt.state[p].values() if isinstance(t, flow.Tensor)]
            assert all(t.sbp == p.sbp for t in state), [t.sbp for t in state]
        assert sharded >= 3, sharded
        _check_program(graph._latest.program, sharded * accumulation, what)
        if accumulation == 1:
            _check_eager_steps(model, opt, reference, base._optimizers[0][0], where, data_sbp)


def _check_program(program, reduce_scatters: int, what: str) -> None:
    """Gathers before the backward as well as the forward, gradients reduce-scattered,
    nothing communicated after the first update."""
    nodes = list(program.nodes)
    first_update = next(i for i, n in enumerate(nodes) if n.step_attrs is not None)
    assert not any(n.op.communicates for n in nodes[first_update:]), what
    gathers = [n for n in nodes if n.scope is not None and n.scope.gather]
    assert any(n.scope.phase == RECOMPUTE for n in gathers), what  # again for the backward
    assert all("->B over" in str(n.attrs["step"]) for n in gathers), what
    steps = [str(n.attrs["step"]) for n in nodes if n.op.name == "boxing"]
    assert sum(step.startswith("P->S(") for step in steps) >= reduce_scatters, (what, steps)


def _check_eager_steps(model, opt, reference, ref_opt, where, data_sbp) -> None:
    """Eager training goes on after the graph's, on the split parameters, as on whole ones."""
    for x, y in DATA[:2]:
        losses = []
        for m, o in ((model, opt), (reference, ref_opt)):
            o.zero_grad()
            loss = squared_error(m, global_of(x, where, data_sbp), global_of(y, where, data_sbp))
            loss.backward()
            o.step()
            losses.append(loss.detach().numpy())
        close(losses[0], losses[1], "eager after ZeRO 3: losses", atol=1e-6)
    for p, q in zip(model.parameters(), reference.parameters(), strict=True):
        close(p.detach().numpy(), q.detach().numpy(), "eager after ZeRO 3: weights", 1e-6)


def check_refusals(where) -> None:
    """An in-place write to a stage-3 parameter inside build would reach only the gathered
    copy: a clear error instead."""

    class Writing(TrainGraph):
        def build(self, x, y):
            with flow.no_grad():
                self.model[0].weight.mul_(0.5)
            return super().build(x, y)

    graph = Writing(data_parallel(mlp(), where), 3, 1)
    x, y = (global_of(a, where, S.split(0)) for a in DATA[0])
    raises(flow.TideflowError, r"Writing_\d+: build\(\) writes in place to a parameter of "
           r"shape \[12, 6\] that ZeRO stage 3 holds as \(split\(dim=0\),\)",
           lambda: graph(x, y))  # fmt: skip


def check_resume(where, stage: int) -> None:
    """The graph's state dict with sharded optimizer state (and, with stage 3, sharded
    parameters) saves (a directory of shards) and loads into a new graph that goes on
    exactly as the first; with stage 3 also into the graph it came from."""
    model = data_parallel(mlp(), where)
    graph = TrainGraph(model, stage, 1)

    def batch(i):
        x, y = DATA[i % len(DATA)]
        return global_of(x, where, S.split(0)), global_of(y, where, S.split(0))

    for i in range(2):
        graph(*batch(i)).numpy()
    box = [tempfile.mkdtemp() if dist.get_rank() == 0 else None]
    dist.broadcast_object_list(box, src=0)
    path = os.path.join(box[0], f"zero{stage}")
    saved = graph.state_dict()
    if stage == 3:
        assert saved["model"]["0.weight"].sbp == (S.split(0),)  # each rank saves its slice
    flow.save(saved, path)
    want = [graph(*batch(i)).numpy() for i in range(2, 4)]
    fresh = data_parallel(mlp(), where)
    resumed = TrainGraph(fresh, stage, 1)
    resumed.load_state_dict(flow.load(path))  # the state follows its parameter's layout
    close([resumed(*batch(i)).numpy() for i in range(2, 4)], want, "resumed losses", atol=0)
    state = resumed._optimizers[0][0].state[fresh[0].weight]
    assert state["exp_avg"].sbp == (S.split(0),), state["exp_avg"].sbp  # sharded again
    if stage == 3:
        assert fresh[0].weight.sbp == (S.split(0),), fresh[0].weight.sbp
        graph.load_state_dict(flow.load(path))  # into the split parameters themselves
        close([graph(*batch(i)).numpy() for i in range(2, 4)], want, "reloaded", atol=0)


LINE = par.placement("cpu", list(range(SIZE)))
check("data parallel", data_parallel, LINE, S.split(0), SIZE)
check_stage_3("data parallel", data_parallel, LINE, S.split(0), SIZE)
check_refusals(LINE)
check_resume(LINE, 2)
check_resume(LINE, 3)
if SIZE == 4:
    GRID = par.placement("cpu", [[0, 1], [2, 3]])
    check("data x tensor parallel", tensor_parallel, GRID, (S.split(0), S.broadcast), 2)
    check_stage_3("data x tensor parallel", tensor_parallel, GRID, (S.split(0), S.broadcast), 2)
done()
