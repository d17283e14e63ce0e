"""Run on every rank under mpiexec (2 or 4 ranks): DistributedDataParallel against training on
one process. Each rank trains on its slice of the global batch with the mean loss of its
slice; averaged gradients make that the mean loss of the whole batch, so the parameters must
follow the single-process run on the full batch, and stay identical on every rank."""

from __future__ import annotations

import numpy as np
from global_checks import RANK, SIZE, close, done, raises

import tideflow as flow
import tideflow.distributed as dist
from tideflow.distributed.world import get_world
from tideflow.nn.parallel import DistributedDataParallel as DDP

BATCH = 24  # divides evenly over 2, 3 and 4 ranks
rng = np.random.default_rng(0)
DATA = rng.standard_normal((6, BATCH, 5)).astype(np.float32)
TARGETS = rng.standard_normal((6, BATCH, 3)).astype(np.float32)


def mlp(seed: int) -> flow.nn.Module:
    flow.manual_seed(seed)
    return flow.nn.Sequential(
        flow.nn.Linear(5, 16), flow.nn.Tanh(), flow.nn.Linear(16, 16), flow.nn.Tanh(),
        flow.nn.Linear(16, 3),
    )  # fmt: skip


def mine(batch: np.ndarray, ranks: int = SIZE, index: int = RANK) -> np.ndarray:
    """This rank's contiguous slice of a global batch."""
    share = len(batch) // ranks
    return batch[index * share : (index + 1) * share]


def mse(model, x: np.ndarray, y: np.ndarray):
    return ((model(flow.tensor(x)) - flow.tensor(y)) ** 2).mean()


def same_on_every_rank(model, what: str) -> None:
    """Bit-identical parameters on every rank (the replicas never drift apart)."""
    for name, p in model.named_parameters():
        mine_ = np.ascontiguousarray(p.detach().numpy())
        everyone = np.empty((SIZE, *mine_.shape), mine_.dtype)
        get_world().comm.allgather(mine_, everyone.reshape(-1))
        assert (everyone == mine_).all(), f"{what}: {name} differs between ranks"


def check_training_matches_one_process(optimizer, **ddp_kwargs) -> None:
    reference = mlp(0)
    model = DDP(mlp(RANK), **ddp_kwargs)  # each rank starts elsewhere: rank 0's values win
    close(model.module[0].weight.detach().numpy(), reference[0].weight.detach().numpy(), "init")
    opt = optimizer(model.parameters())
    ref_opt = optimizer(reference.parameters())
    for step, (x, y) in enumerate(zip(DATA, TARGETS, strict=True)):
        opt.zero_grad()
        mse(model, mine(x), mine(y)).backward()
        opt.step()
        ref_opt.zero_grad()
        mse(reference, x, y).backward()
        ref_opt.step()
        same_on_every_rank(model.module, f"step {step} {ddp_kwargs}")
        pairs = zip(model.module.named_parameters(), reference.parameters(), strict=True)
        for (name, p), q in pairs:
            close(p.detach().numpy(), q.detach().numpy(), f"{name} after step {step} {ddp_kwargs}")


def check_training() -> None:
    def sgd(params):
        return flow.optim.SGD(params, lr=0.1, momentum=0.9)

    def adam(params):
        return flow.optim.Adam(params, lr=0.01)

    check_training_matches_one_process(sgd)
    check_training_matches_one_process(adam)
    check_training_matches_one_process(sgd, bucket_size=1)  # one bucket per parameter
    check_training_matches_one_process(sgd, bucket_cap_mb=0.0005)  # ~500 bytes per bucket
    check_training_matches_one_process(adam, gradient_as_bucket_view=True)
    check_training_matches_one_process(sgd, find_unused_parameters=True)
    check_training_matches_one_process(adam, static_graph=True)


def check_no_sync_accumulates() -> None:
    """Micro-batches under no_sync then one synced: the mean of each global micro-batch,
    summed, as on one process; nothing is communicated inside no_sync."""
    reference = mlp(0)
    model = DDP(mlp(0))
    micro = [(DATA[k], TARGETS[k]) for k in range(3)]
    with model.no_sync():
        for x, y in micro[:-1]:
            mse(model, mine(x), mine(y)).backward()
    local = model.module[0].weight.grad.numpy().copy()
    mse(model, mine(micro[-1][0]), mine(micro[-1][1])).backward()
    for x, y in micro:
        mse(reference, x, y).backward()
    for p, q in zip(model.module.parameters(), reference.parameters(), strict=True):
        close(p.grad.numpy(), q.grad.numpy(), "accumulated gradient")
    # inside no_sync each rank held the gradient of its own slices only
    alone = mlp(0)
    for x, y in micro[:-1]:
        mse(alone, mine(x), mine(y)).backward()
    close(local, alone[0].weight.grad.numpy(), "gradient inside no_sync")


class WithStats(flow.nn.Module):
    """A layer whose output reads a buffer, to see which rank's buffer the forward uses."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = flow.nn.Linear(2, 2)
        self.register_buffer("shift", flow.full((2,), float(RANK)))
        self.register_buffer("count", flow.tensor(RANK))

    def forward(self, x):
        return self.lin(x) + self.shift


def check_buffers() -> None:
    model = DDP(WithStats())
    assert model.module.shift.tolist() == [0.0, 0.0] and model.module.count.item() == 0
    model.module.shift.fill_(float(RANK + 1))  # the ranks' buffers drift apart ...
    out = model(flow.zeros(1, 2))  # ... and the forward takes rank 0's again
    close(out.detach().numpy()[0], model.module.lin.bias.detach().numpy() + 1, "buffer in forward")

    quiet = DDP(WithStats(), broadcast_buffers=False)
    assert quiet.module.shift.tolist() == [float(RANK)] * 2, "broadcast_buffers=False syncs none"
    later = DDP(WithStats(), forward_sync_buffers=False)
    assert later.module.shift.tolist() == [0.0, 0.0], "forward_sync_buffers=False syncs at init"
    later.module.shift.fill_(float(RANK))
    later(flow.zeros(1, 2))
    assert later.module.shift.tolist() == [float(RANK)] * 2

    # BatchNorm: each forward starts from rank 0's running statistics, then updates them
    # with this rank's batch (momentum 0.1)
    flow.manual_seed(1)
    bn = DDP(flow.nn.Sequential(flow.nn.Linear(5, 4), flow.nn.BatchNorm1d(4)))
    bn(flow.tensor(mine(DATA[0]))).sum().backward()
    first = np.ascontiguousarray(bn.module[1].running_mean.numpy())
    rank0 = first.copy()
    get_world().comm.bcast(rank0, 0)
    x = flow.tensor(mine(DATA[1]))
    bn(x).sum().backward()
    with flow.no_grad():
        batch_mean = bn.module[0](x).mean(0).numpy()
    close(bn.module[1].running_mean.numpy(), 0.9 * rank0 + 0.1 * batch_mean, "running mean")


def check_unused_parameters() -> None:
    class TwoHeads(flow.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body = flow.nn.Linear(3, 3)
            self.head = flow.nn.Linear(3, 1)
            self.other = flow.nn.Linear(3, 1)  # used by rank 1 only
            self.never = flow.nn.Linear(3, 1)  # used by no rank

        def forward(self, x, use_other: bool):
            h = self.body(x)
            return self.head(h) + (self.other(h) if use_other else 0)

    flow.manual_seed(3)
    model = DDP(TwoHeads(), find_unused_parameters=True)
    x = flow.tensor(mine(DATA[0][:, :3]))
    model(x, RANK == 1).sum().backward()
    assert model.module.never.weight.grad is None, "a parameter no rank used keeps no gradient"
    flow.manual_seed(3)
    alone = TwoHeads()
    alone(x, RANK == 1).sum().backward()
    mine_other = alone.other.weight.grad.numpy() if RANK == 1 else np.zeros((1, 3), np.float32)
    rank1_other = np.empty((1, 3), np.float32)
    buf = np.ascontiguousarray(mine_other)
    get_world().comm.allreduce(buf, rank1_other, dist.ReduceOp.SUM)
    close(model.module.other.weight.grad.numpy(), rank1_other / SIZE, "rank 1's gradient, averaged")

    strict = DDP(TwoHeads())
    strict(x, True).sum().backward()  # `never` gets no gradient: its bucket never completes
    raises(flow.TideflowError, "expected to have finished reduction.*never.weight",
           lambda: strict(x, True))  # fmt: skip


def check_subgroups() -> None:
    """With 4 ranks: two DDP groups of two, each averaging over its own ranks only."""
    if SIZE != 4:
        return
    groups = [dist.new_group([0, 1]), dist.new_group([2, 3])]
    mine_group = groups[RANK // 2]
    model = DDP(mlp(RANK), process_group=mine_group)
    reference = mlp(2 * (RANK // 2))  # the group's first rank's initial values
    x, y = DATA[RANK // 2], TARGETS[RANK // 2]
    mse(model, mine(x, 2, RANK % 2), mine(y, 2, RANK % 2)).backward()
    mse(reference, x, y).backward()
    for p, q in zip(model.module.parameters(), reference.parameters(), strict=True):
        close(p.grad.numpy(), q.grad.numpy(), "gradient within the group")


def check_different_models_fail_everywhere() -> None:
    width = 4 if RANK == SIZE - 1 else 3
    raises(flow.TideflowError, rf"ranks \[{SIZE - 1}\] differ from rank 0's",
           lambda: DDP(flow.nn.Linear(width, 2)))  # fmt: skip


check_training()
check_no_sync_accumulates()
check_buffers()
check_unused_parameters()
check_subgroups()
check_different_models_fail_everywhere()
done()
