"""Run on every rank under mpiexec -n 2 or 4: nn.Graph pipeline stages (modules on different
placements via set_stage; the compiler turns each move between them into sends and receives)
against the same steps on one process and against eager global training. On 2 ranks one
rank per stage; on 4 ranks two stages of two data-parallel ranks each, and four stages."""

from __future__ import annotations

import numpy as np
from global_checks import RANK, SIZE, S, close, done, global_of, squared_error, train_one_process

import tideflow as flow
import tideflow.parallel as par
from tideflow.compiler.passes.pipeline import one_forward_one_backward
from tideflow.nn.graph import GraphModule

STEPS = 3
BATCH, WIDTH = 8, 5
rng = np.random.default_rng(0)
DATA = [
    (
        rng.standard_normal((BATCH, WIDTH)).astype(np.float32),
        rng.standard_normal((BATCH, WIDTH)).astype(np.float32),
    )
    for _ in range(STEPS)
]


def blocks(n: int):
    flow.manual_seed(0)
    return flow.nn.Sequential(
        *(flow.nn.Sequential(flow.nn.Linear(WIDTH, WIDTH), flow.nn.Tanh()) for _ in range(n))
    )


class PipelineGraph(flow.nn.Graph):
    def __init__(self, model, stages, opt, accumulation: int):
        super().__init__()
        self.model = model
        for i, where in enumerate(stages):
            self.model[i].to(GraphModule).set_stage(i, where)
        self.add_optimizer(opt)
        if accumulation > 1:
            self.config.set_gradient_accumulation_steps(accumulation)

    def build(self, x, y):
        loss = ((self.model(x) - y) ** 2).mean()  # y is on the last stage's placement
        loss.backward()
        return loss


def one_process(n_stages: int, accumulation: int):
    model = blocks(n_stages)
    opt = flow.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    return train_one_process(model, opt, DATA, squared_error, accumulation)


def staged(stages):
    """The blocks on their stages, parameters broadcast (data parallel within a stage)."""
    model = blocks(len(stages))
    for block, where in zip(model, stages, strict=True):
        par.module_to_global(block, where, S.broadcast)
    return model


def eager(stages, sbp):
    model = staged(stages)
    opt = flow.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    losses = []
    for x, y in DATA:
        h = global_of(x, stages[0], sbp)
        for block, where in zip(model, stages, strict=True):
            h = block(h.to_global(placement=where, sbp=sbp))
        loss = ((h - global_of(y, stages[-1], sbp)) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return np.array(losses), [p.detach().numpy() for p in model.parameters()]


def graph(stages, sbp, accumulation: int):
    model = staged(stages)
    opt = flow.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    train = PipelineGraph(model, stages, opt, accumulation)
    outputs = [
        train(global_of(x, stages[0], sbp), global_of(y, stages[-1], sbp)) for x, y in DATA
    ]
    for out in outputs:
        assert out.placement == stages[-1], out.placement
    losses = np.concatenate([np.atleast_1d(out.numpy()) for out in outputs])
    if accumulation > 1:
        check_schedule(train.timeline(), stages, accumulation)
    return losses, [p.detach().numpy() for p in model.parameters()]


def check_schedule(timeline, stages, micro_batches: int) -> None:
    """Each rank ran its stage's micro-batches in 1F1B order."""
    for rank in range(SIZE):
        stage = next(i for i, p in enumerate(stages) if rank in p.flat_ranks)
        want = one_forward_one_backward(stage, micro_batches, len(stages))
        assert timeline.order(rank) == [f"{p}{k}" for p, k in want], (rank, str(timeline))
    assert 0 <= timeline.bubble < 1


def check(name, stages, sbp) -> None:
    """`sbp`: the data's layout on every stage."""
    want_losses, want_weights = one_process(len(stages), 1)
    eager_losses, eager_weights = eager(stages, sbp)
    close(eager_losses, want_losses, f"{name}: eager losses")
    for accumulation in (1, 2, 4):
        if accumulation > 1:
            want_losses, want_weights = one_process(len(stages), accumulation)
        losses, weights = graph(stages, sbp, accumulation)
        close(losses, want_losses, f"{name} x{accumulation}: graph losses")
        for got, want in zip(weights, want_weights, strict=True):
            close(got, want, f"{name} x{accumulation}: graph weights")
        if accumulation == 1:
            for got, want in zip(weights, eager_weights, strict=True):
                close(got, want, f"{name}: graph == eager weights", atol=1e-6)


def placements(groups):
    return [par.placement("cpu", g) for g in groups]


check("one rank per stage", placements([[r] for r in range(SIZE)]), S.broadcast)
if SIZE == 4:
    check("two data-parallel stages", placements([[0, 1], [2, 3]]), S.split(0))
    check("two stages, reversed ranks", placements([[3, 2], [1, 0]]), S.broadcast)
if RANK == 0:
    print("graph pipeline: all stage layouts match one process", flush=True)
done()
