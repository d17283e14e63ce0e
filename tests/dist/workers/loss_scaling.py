"""Run on every rank under mpiexec -n 2 or 4: loss scaling (float16 autocast + GradScaler) of
global parameters, in nn.Graph and eagerly, against the same steps on one process. Layouts:
data parallel, Megatron tensor parallel, the first layer split by input features, a 2-stage
pipeline with gradient accumulation (one rank per stage on 2 ranks, two data-parallel ranks
per stage on 4) and, on 4 ranks, data x tensor parallel. Losses, the scale after every
step and the weights (each rank's own replica of a broadcast one) equal one process's.

The model never uses the inputs' last feature (its weights' column is zero, and so is the
feature), except in step HOT_STEP, where one sample holds a huge value there: the forward
does not change, but that feature's weight gradient overflows float16, on the ranks holding
that sample or that feature only (the last rank's features, or the first pipeline stage).
One process skips the step and halves the scale, and so must every rank."""

from __future__ import annotations

import numpy as np
from global_checks import RANK, SIZE, S, close, data_parallel, done, global_of, tensor_parallel

import tideflow as flow
import tideflow.parallel as par
from tideflow.distributed.backend import ReduceOp
from tideflow.nn.graph import GraphModule
from tideflow.parallel.agreement import agree

STEPS, HOT_STEP = 4, 1
BATCH, FEATURES, HIDDEN, OUT = 8, 4, 8, 3
INIT_SCALE, GROWTH_INTERVAL = 2.0**10, 2
# clean, overflow (halved), clean, clean (grown after GROWTH_INTERVAL clean steps)
SCALES = [INIT_SCALE, INIT_SCALE / 2, INIT_SCALE / 2, INIT_SCALE]
# NOTE: shards round their float16 partial products and sums apart: within one float16 ulp
# (2**-10) of the O(1) losses and weights
ATOL = 2.0**-10

rng = np.random.default_rng(0)
DATA = []
for step in range(STEPS):
    x = rng.standard_normal((BATCH, FEATURES)).astype(np.float32)
    x[:, -1] = 0.0
    if step == HOT_STEP:
        x[-1, -1] = 6e4  # float16 holds it; times a gradient times the scale, it does not
    DATA.append((x, rng.standard_normal((BATCH, OUT)).astype(np.float32)))


def mlp():
    flow.manual_seed(0)
    model = flow.nn.Sequential(
        flow.nn.Linear(FEATURES, HIDDEN), flow.nn.Tanh(), flow.nn.Linear(HIDDEN, OUT)
    )
    with flow.no_grad():
        model[0].weight[:, -1] = 0.0
    return model


def new_scaler():
    return flow.amp.GradScaler(init_scale=INIT_SCALE, growth_interval=GROWTH_INTERVAL)


def squared_error(out, y):
    return ((out.float() - y) ** 2).mean()


def optimizers(model, per_stage: bool):
    """One Adam (whose step count a skipped step must not advance), or (per_stage) one for the
    first two modules and one for the last."""
    groups = [model[:2].parameters(), model[2:].parameters()] if per_stage else [model.parameters()]
    return [flow.optim.Adam(params, lr=0.01) for params in groups]


def one_process(micro_batches: int = 1, per_stage: bool = False):
    """Eager float16 training on local tensors: (losses, scale after each step, weights)."""
    model = mlp()
    opts, scaler = optimizers(model, per_stage), new_scaler()
    losses, scales = [], []
    for x, y in DATA:
        for opt in opts:
            opt.zero_grad()
        for xs, ys in zip(np.split(x, micro_batches), np.split(y, micro_batches), strict=True):
            with flow.autocast("cpu", dtype=flow.float16):
                loss = squared_error(model(flow.tensor(xs)), flow.tensor(ys))
            scaler.scale(loss).backward()
            losses.append(loss.item())
        for opt in opts:
            scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
    assert scales == SCALES, f"one process: scales {scales}, expected {SCALES}"
    return np.array(losses), scales, [p.detach().numpy() for p in model.parameters()]


class Layout:
    """How the model and the data lie on the ranks: `shard(model)` lays the model out,
    `x`/`y` are (placement, sbp) of the inputs and targets, `stages` the pipeline stages."""

    def __init__(self, name, shard, x, y, stages=None, inf_ranks=None):
        self.name, self.shard, self.x, self.y, self.stages = name, shard, x, y, stages
        # the ranks whose own gradient shards overflow in HOT_STEP
        self.inf_ranks = set(range(SIZE)) if inf_ranks is None else inf_ranks

    def forward(self, model, x):
        if self.stages is None:
            return model(x)
        h = model[:2](x)
        return model[2](h.to_global(placement=self.stages[1], sbp=self.y[1]))


def eager_global(layout: Layout, micro_batches: int = 1, per_stage: bool = False):
    model = layout.shard(mlp())
    opts, scaler = optimizers(model, per_stage), new_scaler()
    losses, scales = [], []
    for step, (x, y) in enumerate(DATA):
        for opt in opts:
            opt.zero_grad()
        for xs, ys in zip(np.split(x, micro_batches), np.split(y, micro_batches), strict=True):
            gx, gy = global_of(xs, *layout.x), global_of(ys, *layout.y)
            with flow.autocast("cpu", dtype=flow.float16):
                loss = squared_error(layout.forward(model, gx), gy)
            scaler.scale(loss).backward()
            losses.append(loss.item())
        if step == HOT_STEP:
            check_overflow_is_on(layout, model)
        for opt in opts:
            scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
    return np.array(losses), scales, [p.detach().numpy() for p in model.parameters()]


def check_overflow_is_on(layout: Layout, model) -> None:
    """The premise: before the ranks agree, only `layout.inf_ranks` see an overflow."""
    mine = any(
        not np.isfinite(p.grad.to_local().numpy()).all()
        for p in model.parameters()
        if p.grad is not None
    )
    flags = [flow.zeros(1, dtype=flow.int64) for _ in range(SIZE)]
    flow.comm.all_gather(flags, flow.tensor([int(mine)]))
    seen = {r for r, f in enumerate(flags) if f.item()}
    assert seen == layout.inf_ranks, f"{layout.name}: {seen} overflow, not {layout.inf_ranks}"


class ScaledGraph(flow.nn.Graph):
    def __init__(self, model, layout: Layout, accumulation: int):
        super().__init__()
        self.model = model
        self.layout = layout
        (opt,) = optimizers(model, per_stage=False)
        self.add_optimizer(opt)
        self.scaler = new_scaler()
        self.set_grad_scaler(self.scaler)
        self.config.enable_amp(True, dtype=flow.float16)
        if accumulation > 1:
            self.config.set_gradient_accumulation_steps(accumulation)
        if layout.stages is not None:
            for i, stage in enumerate((0, 0, 1)):
                self.model[i].to(GraphModule).set_stage(stage, layout.stages[stage])

    def build(self, x, y):
        loss = squared_error(self.model(x), y)
        loss.backward()
        return loss


def graph_global(layout: Layout, accumulation: int = 1):
    model = layout.shard(mlp())
    graph = ScaledGraph(model, layout, accumulation)
    losses, scales = [], []
    for x, y in DATA:
        loss = graph(global_of(x, *layout.x), global_of(y, *layout.y))
        losses.append(np.atleast_1d(loss.numpy()))
        scales.append(graph.scaler.get_scale())
    return np.concatenate(losses), scales, [p.detach().numpy() for p in model.parameters()]


def same(got, want, what: str) -> None:
    losses, scales, weights = got
    want_losses, want_scales, want_weights = want
    assert scales == want_scales, f"{what}: scales {scales}, one process {want_scales}"
    close(losses, want_losses, f"{what}: losses", atol=ATOL)
    for g, w in zip(weights, want_weights, strict=True):
        close(g, w, f"{what}: weights", atol=ATOL)


def check(layout: Layout, micro_batches: int = 1) -> None:
    want = one_process(micro_batches)
    same(eager_global(layout, micro_batches), want, f"{layout.name}: eager")
    same(graph_global(layout, micro_batches), want, f"{layout.name}: graph")


def check_agree() -> None:
    """The all-reduce of flags over groups of ranks, eagerly."""
    last = flow.tensor(RANK == SIZE - 1)
    assert agree(last, range(SIZE)).item() is True
    total = agree(flow.tensor([RANK + 1, 1]), range(SIZE), ReduceOp.SUM)
    assert total.tolist() == [SIZE * (SIZE + 1) // 2, SIZE], total
    evens = [r for r in range(SIZE) if r % 2 == 0]  # the others take no part
    got = agree(flow.tensor(float(RANK)), evens).item()
    assert got == (max(evens) if RANK in evens else RANK), got


def feature_parallel(model):
    """The first layer split by input features (the last rank holds the last feature)."""
    par.row_parallel(model[0], LINE)
    par.module_to_global(model[2], LINE, S.broadcast)
    return model


def pipeline(stages, sbp):
    def shard(model):
        par.module_to_global(model[:2], stages[0], S.broadcast)
        par.module_to_global(model[2:], stages[1], S.broadcast)
        return model

    return Layout(
        "pipeline", shard, (stages[0], sbp), (stages[1], sbp), stages, set(stages[0].flat_ranks)
    )


LINE = par.placement("cpu", list(range(SIZE)))
SPLIT, WHOLE = (LINE, S.split(0)), (LINE, S.broadcast)
check_agree()
check(Layout("data parallel", lambda m: data_parallel(m, LINE), SPLIT, SPLIT))
check(Layout("tensor parallel", lambda m: tensor_parallel(m, LINE), WHOLE, WHOLE))
check(Layout("feature parallel", feature_parallel, WHOLE, WHOLE, inf_ranks={SIZE - 1}))
half = SIZE // 2
STAGES = [par.placement("cpu", list(range(half))), par.placement("cpu", list(range(half, SIZE)))]
staged = pipeline(STAGES, S.split(0) if half > 1 else S.broadcast)
check(staged, micro_batches=2)
# one optimizer per stage: each skips by its own gradients, as one process with two does
per_stage = eager_global(staged, 2, per_stage=True)
same(per_stage, one_process(2, per_stage=True), "pipeline, one optimizer per stage")
if SIZE == 4:
    GRID = par.placement("cpu", [[0, 1], [2, 3]])
    ROWS = (GRID, (S.split(0), S.broadcast))
    check(Layout("data x tensor parallel", lambda m: tensor_parallel(m, GRID), ROWS, ROWS))
if RANK == 0:
    print("loss scaling: every layout skips and scales like one process", flush=True)
done()
