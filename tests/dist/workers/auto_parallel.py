"""Run on every rank under mpiexec -n 2 or 4: graphs with `config.enable_auto_parallel`
train exactly as the same graphs with the global mode's greedy layouts and as one process
(an MLP, and the char-GPT data parallel, pipelined over two stages with 2 micro-batches, and
on 4 ranks data x tensor parallel: parameter layouts and stages the search must keep), and
the searched plan is predicted no slower than its start, data parallelism where the batch is
split. From a broadcast batch the search splits the computation itself: on a profile where
compute is dear, faster than every rank computing everything; on this machine's, no slower
than data parallelism but for slicing the batch."""

from __future__ import annotations

import numpy as np
from global_checks import SIZE, close, done, squared_error, train_one_process

import tideflow as flow
import tideflow.parallel as par
from tideflow.models import GPT, GPTConfig, parallelize_gpt
from tideflow.parallel.cost import Cluster, DeviceProfile, Link, Network

S = flow.sbp
ALL = flow.placement("cpu", ranks=list(range(SIZE)))
STEPS = 3
rng = np.random.default_rng(0)
# 0.1 GFLOP/s: splitting the tiny GPT's work pays for the boxing it needs
SLOW = Cluster(
    DeviceProfile("slow", 1e8, 1e9, 1e9, max_efficiency=1.0, node_s=1e-6),
    Network(Link(1e9, 1e-5), Link(1e9, 1e-5)), SIZE, 1,
)  # fmt: skip


class TrainGraph(flow.nn.Graph):
    def __init__(
        self, model, loss, auto: bool, set_stages=None, micro_batches: int = 1, cluster=None
    ):
        super().__init__()
        self.model = model
        self.loss = loss
        if set_stages is not None:
            set_stages(self.model)
        self.add_optimizer(flow.optim.AdamW(model.parameters(), lr=1e-2))
        if micro_batches > 1:
            self.config.set_gradient_accumulation_steps(micro_batches)
        if auto:
            self.config.enable_auto_parallel(True, cluster=cluster)

    def build(self, x, y):
        loss = self.loss(self.model, x, y)
        loss.backward()
        return loss


def train(make_model, loss, batches, layout, auto: bool):
    """Per-step losses and the search's solution (None without auto-parallel)."""
    model = make_model()
    inputs = lambda x, y: (x.to_global(ALL, S.broadcast).to_global(sbp=layout),  # noqa: E731
                           y.to_global(ALL, S.broadcast).to_global(sbp=layout))  # fmt: skip
    graph = TrainGraph(par.module_to_global(model, ALL, S.broadcast), loss, auto)
    losses = [graph(*inputs(flow.tensor(x), flow.tensor(y))).numpy() for x, y in batches]
    return np.array(losses), graph._latest.layout_search


def mlp():
    flow.manual_seed(0)
    return flow.nn.Sequential(flow.nn.Linear(8, 32), flow.nn.Tanh(), flow.nn.Linear(32, 4))


def check_mlp() -> None:
    batches = [
        (rng.standard_normal((16, 8)).astype(np.float32),
         rng.standard_normal((16, 4)).astype(np.float32))
        for _ in range(STEPS)
    ]  # fmt: skip
    model = mlp()
    opt = flow.optim.AdamW(model.parameters(), lr=1e-2)
    want = train_one_process(model, opt, batches, squared_error)[0]
    for layout in (S.split(0), S.broadcast):
        greedy, _ = train(mlp, squared_error, batches, layout, auto=False)
        searched, found = train(mlp, squared_error, batches, layout, auto=True)
        close(greedy, want, f"mlp, {layout}: greedy layouts", atol=2e-6)
        close(searched, want, f"mlp, {layout}: searched layouts", atol=2e-6)
        assert found.time <= found.greedy_time, found


CONFIG = GPTConfig(vocab_size=11, block_size=8, n_layer=2, n_head=2, n_embd=16)
TOKENS = [rng.integers(0, CONFIG.vocab_size, (8, CONFIG.block_size + 1)) for _ in range(STEPS)]


def gpt():
    flow.manual_seed(0)
    return GPT(CONFIG)


def gpt_loss(model, idx, targets):
    return model(idx, targets)[1]


def check_gpt(dp: int, tp: int = 1, pp: int = 1, broadcast_batch: bool = False, cluster=None):
    """The searched plan (`parallel.auto.Solution`), on `cluster` (None: this machine's
    profile). Pipelines run 2 micro-batches, whose losses come back one each."""
    micro_batches = 2 if pp > 1 else 1
    model = gpt()
    opt = flow.optim.AdamW(model.parameters(), lr=1e-2)
    batches = [(t[:, :-1], t[:, 1:]) for t in TOKENS]
    want = train_one_process(model, opt, batches, gpt_loss, micro_batches)[0]
    name = f"gpt dp={dp} tp={tp} pp={pp}" + (", broadcast batch" if broadcast_batch else "")
    found = {}
    for auto in (False, True):
        model = gpt()
        layout = parallelize_gpt(model, dp=dp, tp=tp, pp=pp)
        graph = TrainGraph(model, gpt_loss, auto, layout.set_stages, micro_batches, cluster)
        losses = []
        for idx, targets in batches:
            x, y = layout.inputs(flow.tensor(idx), flow.tensor(targets))
            if broadcast_batch:
                x, y = x.to_global(sbp=S.broadcast), y.to_global(sbp=S.broadcast)
            losses.append(graph(x, y).numpy())
        got = np.concatenate([np.atleast_1d(v) for v in losses])
        close(got, want, f"{name}, auto_parallel={auto}", atol=2e-5)
        found[auto] = graph._latest.layout_search
    plan = found[True]
    assert plan.time <= plan.greedy_time, (name, plan)
    return plan


def check_gpt_from_broadcast_batch() -> None:
    """Where compute is dear, the search splits the step from a broadcast batch as data
    parallelism does: its plan is predicted no slower than data parallelism's but for
    slicing the two inputs (data parallelism's arrive as each rank's rows)."""
    data_parallel = check_gpt(dp=SIZE, cluster=SLOW)
    plan = check_gpt(dp=SIZE, broadcast_batch=True, cluster=SLOW)
    problem = plan.problem
    shard_bytes = TOKENS[0][:, :-1].nbytes / SIZE
    slices = 2 * (problem.boxing_s + shard_bytes / problem.device.memory_bandwidth)
    assert plan.time <= data_parallel.time + slices, (plan.time, data_parallel.time, slices)


check_mlp()
check_gpt(dp=SIZE)
check_gpt_from_broadcast_batch()
check_gpt(dp=SIZE // 2, pp=2)
if SIZE == 4:
    check_gpt(dp=2, tp=2)
done()
