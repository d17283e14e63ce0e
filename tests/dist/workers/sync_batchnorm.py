"""Run on every rank under mpiexec -n 2 or 4: SyncBatchNorm on this rank's part of a batch
equals BatchNorm on the whole batch in one process — outputs, input gradients, the sum over
ranks of the parameter gradients (what DDP averages), running statistics — over steps, for
2-d, 3-d and 4-d inputs, momentum None, and without affine parameters; converted models train
under DDP as one process does on the whole batch."""

from __future__ import annotations

import numpy as np
from global_checks import RANK, SIZE, close, done

import tideflow as flow
import tideflow.distributed as dist
from tideflow.nn.parallel import DistributedDataParallel as DDP

rng = np.random.default_rng(0)


def mine(a: np.ndarray) -> np.ndarray:
    return np.split(a, SIZE)[RANK]


def check(shape, **options):
    whole = (
        flow.nn.BatchNorm1d(shape[1], **options)
        if len(shape) < 4
        else flow.nn.BatchNorm2d(shape[1], **options)
    )
    sync = flow.nn.SyncBatchNorm(shape[1], **options)
    for step in range(3):
        x = (rng.standard_normal(shape) * (step + 1) + step).astype(np.float32)
        dy = rng.standard_normal(shape).astype(np.float32)
        xw, xs = flow.tensor(x, requires_grad=True), flow.tensor(mine(x), requires_grad=True)
        yw, ys = whole(xw), sync(xs)
        yw.backward(flow.tensor(dy))
        ys.backward(flow.tensor(mine(dy)))
        what = f"{shape} {options} step {step}"
        close(ys.detach().numpy(), mine(yw.detach().numpy()), f"output {what}")
        close(xs.grad.numpy(), mine(xw.grad.numpy()), f"input grad {what}")
        for name in ("weight", "bias"):
            p = getattr(sync, name)
            if p is not None:
                summed = p.grad.clone()
                dist.all_reduce(summed)
                close(summed.numpy(), getattr(whole, name).grad.numpy(), f"{name} grad {what}")
                p.grad = None
                getattr(whole, name).grad = None
        if sync.running_mean is not None:
            close(sync.running_mean.numpy(), whole.running_mean.numpy(), f"running mean {what}")
            close(sync.running_var.numpy(), whole.running_var.numpy(), f"running var {what}")


check((8, 3))
check((8, 3, 5), momentum=None)
check((8, 2, 3, 3), affine=False)
check((4 * SIZE, 3), track_running_stats=False)


def model():
    flow.manual_seed(0)
    return flow.nn.Sequential(
        flow.nn.Linear(4, 6), flow.nn.BatchNorm1d(6), flow.nn.Tanh(), flow.nn.Linear(6, 1)
    )


X = rng.standard_normal((8, 4)).astype(np.float32)
Y = rng.standard_normal((8, 1)).astype(np.float32)
one, ddp_model = model(), DDP(flow.nn.SyncBatchNorm.convert_sync_batchnorm(model()))
opt_one = flow.optim.SGD(one.parameters(), lr=0.1)
opt_ddp = flow.optim.SGD(ddp_model.parameters(), lr=0.1)
for _ in range(3):
    for net, opt, x, y in ((one, opt_one, X, Y), (ddp_model, opt_ddp, mine(X), mine(Y))):
        opt.zero_grad()
        ((net(flow.tensor(x)) - flow.tensor(y)) ** 2).mean().backward()
        opt.step()
for a, b in zip(ddp_model.module.parameters(), one.parameters(), strict=True):
    close(a.detach().numpy(), b.detach().numpy(), "DDP + SyncBatchNorm weights")
done()
