"""Helpers of the global-tensor workers: global tensors from one NumPy value, and checks
that compare with the single-process result on every rank."""

from __future__ import annotations

import re

import numpy as np

import tideflow as flow
import tideflow.parallel as par
from tideflow.distributed.world import get_world

S = par.sbp
LAYOUTS = (S.split(0), S.split(1), S.broadcast, S.partial_sum)
RANK = get_world().rank
SIZE = get_world().size


def global_of(value: np.ndarray, where, sbp, requires_grad: bool = False):
    """The global tensor whose logical value is `value` (every rank knows it)."""
    return par.create_global(
        lambda shape: flow.tensor(value), value.shape, where, sbp, requires_grad=requires_grad
    )


def close(got, want, what, atol: float = 1e-5) -> None:
    got = np.asarray(got)
    assert got.shape == np.shape(want), f"{what}: shape {got.shape}, expected {np.shape(want)}"
    assert np.allclose(got, want, atol=atol, rtol=1e-5), f"{what}: {got} != {want}"


def raises(error: type, pattern: str, fn) -> None:
    """`fn()` raises `error` with a message matching `pattern` (on this rank)."""
    try:
        fn()
    except error as e:
        assert re.search(pattern, str(e)), f"message {str(e)!r} does not match {pattern!r}"
        return
    raise AssertionError(f"expected {error.__name__} matching {pattern!r}")


def train_one_process(model, opt, batches, loss, micro_batches: int = 1):
    """Per-step losses of eager local training, one per micro-batch (each array of a batch
    cut along dim 0), whose gradients add up as in a graph with gradient accumulation;
    `loss(model, *tensors)` is one micro-batch's loss. The final weights as arrays too."""
    losses = []
    for batch in batches:
        opt.zero_grad()
        for part in zip(*(np.split(a, micro_batches) for a in batch), strict=True):
            value = loss(model, *(flow.tensor(a) for a in part))
            value.backward()
            losses.append(value.item())
        opt.step()
    return np.array(losses), [p.detach().numpy() for p in model.parameters()]


def squared_error(model, x, y):
    return ((model(x) - y) ** 2).mean()


def data_parallel(model, where):
    """`model` broadcast over `where` (data parallel when the inputs are split)."""
    return par.module_to_global(model, where, tuple(S.broadcast for _ in range(where.ndim)))


def tensor_parallel(model, where):
    """Megatron's MLP: `model[0]` column-parallel, `model[2]` row-parallel over `where`'s last
    axis, broadcast over the others."""
    par.column_parallel(model[0], where)
    par.row_parallel(model[2], where)
    return model


def done() -> None:
    print(f"rank {RANK}: ok", flush=True)
