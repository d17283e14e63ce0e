"""Run on every rank under mpiexec with $TIDEFLOW_FAULT armed (tideflow.distributed.faults):
`fault_points.py POINT [TIMEOUT_S]` reaches fault point POINT several times, doing what a
training job does there, and prints `rank R: ok` at the end, which no rank may reach when
one failed. TIMEOUT_S: pass the communication timeout as PyTorch users do,
`init_process_group(timeout=timedelta(seconds=TIMEOUT_S))`; without it, the job's
environment sets it (or the default applies)."""

from __future__ import annotations

import shutil
import sys
import tempfile
from datetime import timedelta

import numpy as np

import tideflow as flow
import tideflow.distributed as dist
import tideflow.parallel as par
from tideflow.distributed.faults import SPAN
from tideflow.nn.parallel import DistributedDataParallel as DDP

point = sys.argv[1]
if len(sys.argv) > 2:
    dist.init_process_group("gloo", timeout=timedelta(seconds=float(sys.argv[2])))
RANK, SIZE = dist.get_rank(), dist.get_world_size()
STEPS = SPAN + 1  # past the last arrival a fault may be planned at


def mlp() -> flow.nn.Module:
    flow.manual_seed(0)
    return flow.nn.Sequential(flow.nn.Linear(4, 8), flow.nn.Tanh(), flow.nn.Linear(8, 2))


def collectives() -> None:
    t = flow.ones(4)
    gathered = flow.empty(4 * SIZE)
    for _ in range(STEPS):
        dist.all_reduce(t)
        dist.all_gather_into_tensor(gathered, t)
        dist.broadcast(t, src=0)
        dist.barrier()


def ddp_buckets() -> None:
    # NOTE: a bucket of about one parameter each: several bucket all-reduces per step
    model = DDP(mlp(), bucket_cap_mb=1e-5)
    opt = flow.optim.SGD(model.parameters(), lr=0.1)
    x, y = flow.randn(6, 4), flow.randn(6, 2)
    for _ in range(STEPS):
        opt.zero_grad()
        ((model(x) - y) ** 2).mean().backward()
        opt.step()


class TrainGraph(flow.nn.Graph):
    def __init__(self, model, opt):
        super().__init__()
        self.model = model
        self.add_optimizer(opt)

    def build(self, x, y):
        loss = ((self.model(x) - y) ** 2).mean()
        loss.backward()
        return loss


def graph() -> None:
    # NOTE: data parallel: each step all-reduces the gradients' partial sums inside the plan
    where = par.placement("cpu", list(range(SIZE)))
    model = par.module_to_global(mlp(), where, (par.sbp.broadcast,))
    step = TrainGraph(model, flow.optim.SGD(model.parameters(), lr=0.1))
    rng = np.random.default_rng(0)
    for _ in range(STEPS):
        x, y = (rng.standard_normal((2 * SIZE, n)).astype(np.float32) for n in (4, 2))
        loss = step(*(_split(a, where) for a in (x, y)))
    loss.numpy()  # steps stream: wait for the last one


def _split(value: np.ndarray, where):
    return par.create_global(lambda shape: flow.tensor(value), value.shape, where,
                             (par.sbp.split(0),))  # fmt: skip


def mid_collective() -> None:
    # NOTE: arrivals 1 and 2 are the object collectives, 3 the second bucket of DDP's step
    model = DDP(mlp(), bucket_cap_mb=1e-5)
    opt = flow.optim.SGD(model.parameters(), lr=0.1)
    x, y = flow.randn(6, 4), flow.randn(6, 2)
    for step in range(STEPS):
        seen = [None] * SIZE
        dist.all_gather_object(seen, {"rank": RANK, "step": step})
        dist.broadcast_object_list(seen, src=0)
        opt.zero_grad()
        ((model(x) - y) ** 2).mean().backward()
        opt.step()


def checkpoint() -> None:
    where = par.placement("cpu", list(range(SIZE)))
    weights = _split(np.ones((2 * SIZE, 3), np.float32), where)
    directory = [tempfile.mkdtemp() if RANK == 0 else None]
    dist.broadcast_object_list(directory, src=0)  # the ranks save into one directory
    for step in range(STEPS):
        flow.save({"weights": weights, "step": step}, f"{directory[0]}/step{step}")
    dist.barrier()
    if RANK == 0:
        shutil.rmtree(directory[0])


POINTS = {
    "collective": collectives,
    "ddp_bucket": ddp_buckets,
    "graph": graph,
    "checkpoint": checkpoint,
    "mid_collective": mid_collective,
}
POINTS[point]()
print(f"rank {RANK}: ok", flush=True)
