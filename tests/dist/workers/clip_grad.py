"""Run on every rank under mpiexec -n 2 or 4: gradient clipping by the total norm of global
gradients, against one process: eager `clip_grad_norm_` of a model whose layers are tensor
parallel or on two placements (pipeline stages), for the 2-, 1- and inf-norms; and a graph's
`add_optimizer(..., clip_grad_max_norm=)` over pipeline stages with gradient accumulation,
which clips once, after the last micro-batch, as one process does on the whole batch."""

from __future__ import annotations

import numpy as np
from global_checks import SIZE, S, close, done, global_of, train_one_process

import tideflow as flow
import tideflow.parallel as par
from tideflow.nn.graph import GraphModule
from tideflow.nn.utils import clip_grad_norm_

rng = np.random.default_rng(0)
X = rng.standard_normal((8, 6)).astype(np.float32)
Y = rng.standard_normal((8, 3)).astype(np.float32)
MAX_NORM = 0.05  # well below the gradients' norm (checked): clipping changes every step
HALVES = [list(range(SIZE // 2)), list(range(SIZE // 2, SIZE))]
STAGES = [par.placement("cpu", ranks) for ranks in HALVES]
LINE = par.placement("cpu", list(range(SIZE)))


def mlp():
    flow.manual_seed(0)
    return flow.nn.Sequential(flow.nn.Linear(6, 8), flow.nn.Tanh(), flow.nn.Linear(8, 3))


def loss_of(model, x, y):
    return ((model(x) - y) ** 2).mean()


def staged_loss(model, x, y):
    """Eagerly, the hidden activation moves to the second stage by hand."""
    h = model[1](model[0](x)).to_global(placement=STAGES[1], sbp=S.broadcast)
    return ((model[2](h) - y) ** 2).mean()


def on_stages(model):
    par.module_to_global(model[:2], STAGES[0], S.broadcast)
    par.module_to_global(model[2:], STAGES[1], S.broadcast)
    return model


def tensor_parallel(model):
    par.column_parallel(model[0], LINE)
    par.row_parallel(model[2], LINE)
    return model


def check_eager(name, layout, loss, x, y, norm_type) -> None:
    want_model = mlp()
    loss_of(want_model, flow.tensor(X), flow.tensor(Y)).backward()
    want_norm = clip_grad_norm_(want_model.parameters(), MAX_NORM, norm_type).item()
    assert want_norm > MAX_NORM, f"{name}: the gradients' norm {want_norm} is not clipped"
    model = layout(mlp())
    loss(model, x, y).backward()
    norm = clip_grad_norm_(model.parameters(), MAX_NORM, norm_type)
    close(norm.numpy(), want_norm, f"{name}: total {norm_type}-norm")
    for p, q in zip(model.parameters(), want_model.parameters(), strict=True):
        close(p.grad.numpy(), q.grad.numpy(), f"{name}: clipped gradient", atol=1e-6)


class ClippedPipeline(flow.nn.Graph):
    def __init__(self, model):
        super().__init__()
        self.model = model
        self.model[0].to(GraphModule).set_stage(0, STAGES[0])
        self.model[2].to(GraphModule).set_stage(1, STAGES[1])
        opt = flow.optim.SGD(model.parameters(), lr=0.1)
        self.add_optimizer(opt, clip_grad_max_norm=MAX_NORM)
        self.config.set_gradient_accumulation_steps(2)

    def build(self, x, y):
        loss = loss_of(self.model, x, y)
        (loss / 2).backward()  # the two micro-batches' gradients add up to the batch's
        return loss


def check_graph_clips_once_after_accumulation() -> None:
    reference = mlp()
    opt = flow.optim.SGD(reference.parameters(), lr=0.1)
    want = []
    for _ in range(3):
        opt.zero_grad()
        loss = loss_of(reference, flow.tensor(X), flow.tensor(Y))
        loss.backward()
        clip_grad_norm_(reference.parameters(), MAX_NORM)
        opt.step()
        want.append(loss.item())
    graph = ClippedPipeline(on_stages(mlp()))
    data_sbp = S.split(0) if SIZE == 4 else S.broadcast  # data parallel inside the stages
    x, y = global_of(X, STAGES[0], data_sbp), global_of(Y, STAGES[1], data_sbp)
    got = [graph(x, y).numpy().mean() for _ in range(3)]
    close(got, want, "graph: losses of clipped steps", atol=1e-6)
    unclipped = train_one_process(mlp(), flow.optim.SGD(mlp().parameters(), lr=0.1),
                                  [(X, Y)] * 3, loss_of)[0]  # fmt: skip
    assert not np.allclose(got[1:], unclipped[1:], atol=1e-4), "clipping changed nothing"


for norm_type in (2.0, 1.0, float("inf")):
    stage_x, stage_y = global_of(X, STAGES[0], S.broadcast), global_of(Y, STAGES[1], S.broadcast)
    check_eager("two placements", on_stages, staged_loss, stage_x, stage_y, norm_type)
    whole_x, whole_y = global_of(X, LINE, S.broadcast), global_of(Y, LINE, S.broadcast)
    check_eager("tensor parallel", tensor_parallel, loss_of, whole_x, whole_y, norm_type)
check_graph_clips_once_after_accumulation()
done()
