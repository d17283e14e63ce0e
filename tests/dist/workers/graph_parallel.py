"""Run on every rank under mpiexec -n 2 or 4: nn.Graph training steps over global tensors
against the same steps on one process (local tensors, eager) and against eager global
training of the same layout. Layouts: data parallel (inputs split, parameters broadcast),
Megatron tensor parallel (column- then row-parallel Linear), and on 4 ranks data x tensor
parallel on a 2x2 placement; with gradient accumulation and Adam too."""

from __future__ import annotations

import numpy as np
from global_checks import (
    RANK,
    SIZE,
    S,
    close,
    data_parallel,
    done,
    global_of,
    squared_error,
    tensor_parallel,
    train_one_process,
)

import tideflow as flow
import tideflow.parallel as par

STEPS = 4
BATCH, FEATURES, HIDDEN, OUT = 8, 4, 6, 3
rng = np.random.default_rng(0)
DATA = [
    (
        rng.standard_normal((BATCH, FEATURES)).astype(np.float32),
        rng.standard_normal((BATCH, OUT)).astype(np.float32),
    )
    for _ in range(STEPS)
]


def mlp():
    flow.manual_seed(0)
    return flow.nn.Sequential(
        flow.nn.Linear(FEATURES, HIDDEN), flow.nn.Tanh(), flow.nn.Linear(HIDDEN, OUT)
    )


class TrainGraph(flow.nn.Graph):
    def __init__(self, model, opt, accumulation: int):
        super().__init__()
        self.model = model
        self.add_optimizer(opt)
        if accumulation > 1:
            self.config.set_gradient_accumulation_steps(accumulation)

    def build(self, x, y):
        loss = ((self.model(x) - y) ** 2).mean()
        loss.backward()
        return loss


def _optimizer(kind, params):
    if kind == "adam":
        return flow.optim.Adam(params, lr=0.01)
    return flow.optim.SGD(params, lr=0.05, momentum=0.9)


def one_process(kind: str, accumulation: int):
    model = mlp()
    return train_one_process(model, _optimizer(kind, model.parameters()), DATA, squared_error,
                             accumulation)  # fmt: skip


def eager_global(layout, where, data_sbp, kind: str):
    model = layout(mlp(), where)
    opt = _optimizer(kind, model.parameters())
    losses = []
    for x, y in DATA:
        gx, gy = global_of(x, where, data_sbp), global_of(y, where, data_sbp)
        loss = ((model(gx) - gy) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return np.array(losses), [p.detach().numpy() for p in model.parameters()]


def graph_global(layout, where, data_sbp, kind: str, accumulation: int):
    model = layout(mlp(), where)
    graph = TrainGraph(model, _optimizer(kind, model.parameters()), accumulation)
    outputs = []
    for x, y in DATA:
        outputs.append(graph(global_of(x, where, data_sbp), global_of(y, where, data_sbp)))
    for out in outputs:  # streamed: the calls returned before their steps ran
        assert out.is_global and out.placement == where, out
    losses = np.concatenate([np.atleast_1d(out.numpy()) for out in outputs])
    return losses, [p.detach().numpy() for p in model.parameters()], graph


def check(name, layout, where, data_sbp) -> None:
    for kind in ("sgd", "adam"):
        want_losses, want_weights = one_process(kind, 1)
        losses, weights = eager_global(layout, where, data_sbp, kind)
        close(losses, want_losses, f"{name} {kind}: eager losses", atol=1e-5)
        got_losses, got_weights, _ = graph_global(layout, where, data_sbp, kind, 1)
        close(got_losses, want_losses, f"{name} {kind}: graph losses", atol=1e-5)
        for g, e, w in zip(got_weights, weights, want_weights, strict=True):
            close(g, w, f"{name} {kind}: graph weights", atol=1e-5)
            close(g, e, f"{name} {kind}: graph == eager weights", atol=1e-6)
    micro_losses, micro_weights = one_process("sgd", 2)
    got_losses, got_weights, _ = graph_global(layout, where, data_sbp, "sgd", 2)
    close(got_losses, micro_losses, f"{name}: accumulated losses", atol=1e-5)
    for g, w in zip(got_weights, micro_weights, strict=True):
        close(g, w, f"{name}: accumulated weights", atol=1e-5)


class FeaturesGraph(TrainGraph):
    """TrainGraph with one of a local graph's features turned on."""

    def __init__(self, model, opt, feature: str):
        super().__init__(model, opt, 1)
        if feature == "checkpointing":
            self.model[0].to(flow.nn.graph.GraphModule).activation_checkpointing = True
        elif feature == "bfloat16 autocast":
            self.config.enable_amp(True, dtype=flow.bfloat16)

    def build(self, x, y):
        loss = ((self.model(x).float() - y) ** 2).mean()
        loss.backward()
        return loss


def check_graph_features(where) -> None:
    """Activation checkpointing, a data source and autocast work on global graphs too."""
    want, _ = one_process("sgd", 1)
    batches = [(global_of(x, where, S.split(0)), global_of(y, where, S.split(0))) for x, y in DATA]
    for feature in ("checkpointing", "data source", "bfloat16 autocast"):
        model = data_parallel(mlp(), where)
        graph = FeaturesGraph(model, _optimizer("sgd", model.parameters()), feature)
        if feature == "data source":
            graph.set_data_source(batches)
            losses = [graph() for _ in batches]
        else:
            losses = [graph(x, y) for x, y in batches]
        got = np.array([loss.numpy() for loss in losses])
        # NOTE: bfloat16 products carry 2**-8 relative error, losses of O(1) a few times that
        close(got, want, f"{feature}: losses", atol=3e-2 if "bfloat16" in feature else 1e-5)


def check_local_inputs_made_global_in_build(where) -> None:
    """`to_global` of a local tensor inside build takes the first rank's values, as in eager
    code (a broadcast the graph traces)."""

    class Gathering(flow.nn.Graph):
        def build(self, x):
            return (x.to_global(where, S.broadcast) * 2).to_global(sbp=S.split(0))

    mine = np.full((4, 3), float(RANK + 1), np.float32)
    got = Gathering()(flow.tensor(mine))
    want = (flow.tensor(mine).to_global(where, S.broadcast) * 2).to_global(sbp=S.split(0))
    close(got.numpy(), want.numpy(), "local input made global")
    close(got.numpy(), np.full((4, 3), 2.0), "the first rank's values")


LINE = par.placement("cpu", list(range(SIZE)))
check_local_inputs_made_global_in_build(LINE)
check_graph_features(LINE)
check("data parallel", data_parallel, LINE, S.split(0))
check("tensor parallel", tensor_parallel, LINE, S.broadcast)
if SIZE == 4:
    GRID = par.placement("cpu", [[0, 1], [2, 3]])
    check("data x tensor parallel", tensor_parallel, GRID, (S.split(0), S.broadcast))
    check("2-D data parallel", data_parallel, GRID, (S.split(0), S.split(0)))
if RANK == 0:
    print("graph parallel: all layouts match one process", flush=True)
done()
