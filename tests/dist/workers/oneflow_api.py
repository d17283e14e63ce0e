"""Run on every rank under mpiexec (2 ranks): OneFlow's API details on real processes:
placement ranks as arrays, sbp values called as functions, global_mode's creators, numpy()
of global tensors that require grad, DLPack of shards, autograd.grad of global tensors, and
DistributedDataParallel's use_bucket and attribute forwarding."""

from __future__ import annotations

import numpy as np
from global_checks import RANK, SIZE, S, close, done, raises

import tideflow as flow
from tideflow.nn.parallel import DistributedDataParallel as DDP
from tideflow.utils.global_view import current_global_mode, global_mode

ALL = flow.placement("cpu", list(range(SIZE)))


def check_placements() -> None:
    assert flow.placement.all("cpu") == ALL == flow.env.all_device_placement("cpu")
    assert ALL.ranks.tolist() == list(range(SIZE)) and ALL.ranks.dtype == np.int64
    grid = flow.placement("cpu", np.arange(SIZE).reshape(SIZE // 2, 2))
    assert grid.ranks.shape == (SIZE // 2, 2) and tuple(grid.hierarchy) == grid.ranks.shape


def check_sbp_called_as_functions() -> None:
    local = flow.full((2, 3), float(RANK + 1))
    summed = local.to_global(ALL, flow.sbp.partial_sum()).to_global(sbp=flow.sbp.broadcast())
    assert summed.sbp == (S.broadcast,)
    close(summed.to_local().numpy(), np.full((2, 3), SIZE * (SIZE + 1) / 2), "P -> B")


def check_global_mode() -> None:
    with global_mode(True, placement=ALL, sbp=flow.sbp.split(0)):
        assert current_global_mode().is_enabled and current_global_mode().placement == ALL
        x = flow.arange(2.0 * SIZE, device="cpu")  # device= is ignored, as in OneFlow
        noise = flow.randn(2 * SIZE, 3)
        with global_mode(False):
            assert not flow.ones(2).is_global and not current_global_mode().is_enabled
    assert not current_global_mode().is_enabled and not flow.zeros(1).is_global
    assert x.is_global and x.sbp == (S.split(0),)
    close(x.to_local().numpy(), [2.0 * RANK, 2.0 * RANK + 1], "this rank's rows")
    whole = noise.numpy()  # the same logical tensor on every rank
    rows = noise.to_local().numpy()
    close(rows, whole[2 * RANK : 2 * RANK + 2], "randn's shard")


def check_numpy_and_dlpack_of_global_tensors() -> None:
    w = flow.ones(2, 2).to_global(ALL, S.split(0)).requires_grad_()  # 2 rows a rank
    close(w.numpy(), np.ones((2 * SIZE, 2)), "numpy() of a global tensor that requires grad")
    raises(flow.TideflowError, "export its shard", lambda: np.from_dlpack(w.detach()))
    shard = w.detach().to_local()
    close(np.from_dlpack(shard), np.ones((2, 2)), "the shard through DLPack")


def check_autograd_grad() -> None:
    for layout in (S.broadcast, S.split(0)):
        x = flow.arange(2.0 * SIZE).to_global(ALL, S.broadcast).to_global(sbp=layout)
        x.requires_grad_()
        (gx,) = flow.autograd.grad((x * x).sum(), x, create_graph=True)
        assert gx.is_global and gx.sbp == (layout,)
        close(gx.numpy(), 2 * np.arange(2.0 * SIZE), f"grad in {layout}")
        (ggx,) = flow.autograd.grad(gx.sum(), x)
        close(ggx.numpy(), np.full(2 * SIZE, 2.0), f"second order in {layout}")


def _grads(model, x) -> list:
    model(x).pow(2).sum().backward()
    return [p.grad.numpy().copy() for p in model.module.parameters()]


def check_ddp() -> None:
    x = flow.tensor(np.random.default_rng(RANK).standard_normal((3, 4)).astype(np.float32))
    flow.manual_seed(0)
    bucketed = DDP(flow.nn.Sequential(flow.nn.Linear(4, 5), flow.nn.Linear(5, 2)), bucket_size=2)
    flow.manual_seed(0)
    alone = DDP(flow.nn.Sequential(flow.nn.Linear(4, 5), flow.nn.Linear(5, 2)), use_bucket=False)
    for a, b in zip(_grads(bucketed, x), _grads(alone, x), strict=True):
        close(b, a, "use_bucket=False averages the same gradients")
    linear = DDP(flow.nn.Linear(4, 2))
    assert linear.in_features == 4 and linear.weight is linear.module.weight


check_placements()
check_sbp_called_as_functions()
check_global_mode()
check_numpy_and_dlpack_of_global_tensors()
check_autograd_grad()
check_ddp()
done()
