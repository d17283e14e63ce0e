"""Values the ranks of a group must agree on: a local tensor all-reduced over a rank group,
as an op (`ALLREDUCE`), so that eager code runs the collective and `nn.Graph` traces it into
a node of its plan like boxing (on the graph channel, `compiler.passes.comm`).

AMP's loss scaling is the user: whether a step's gradients overflowed must be one answer on
every rank holding a part of the step, or the ranks that skip the step and the ranks that
take it drift apart (`tideflow.amp.GradScaler`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from ..framework.dispatch import dispatch
from ..framework.registry import Meta, OpDef
from ..framework.tensor import Tensor
from ..ops._rules import broadcast_only
from . import _comm

__all__ = ["ALLREDUCE", "GroupReduce", "agree", "agreeing_ranks"]


@dataclass(frozen=True, repr=False)
class GroupReduce:
    """Combine a local array element-wise with `op` over the world ranks `group` (sorted, this
    rank one of them), on `channel` (as `boxing.AxisStep.channel`)."""

    group: tuple[int, ...]
    op: _comm.ReduceOp = _comm.ReduceOp.MAX
    channel: str = ""

    def __repr__(self) -> str:
        channel = f" ({self.channel})" if self.channel else ""
        return f"{self.op.name} over ranks {list(self.group)}{channel}"


def _allreduce_kernel(a, *, step: GroupReduce) -> np.ndarray:
    a = np.asarray(a)
    out = np.empty(a.size, a.dtype)
    # NOTE: flat buffers: a 0-d array (a flag) is one element to MPI
    _comm.comm_for(step.group, step.channel).allreduce(
        np.ascontiguousarray(a).reshape(-1), out, step.op
    )
    return out.reshape(a.shape)


# NOTE: not registered, as `boxing.BOXING`: only the library dispatches it, on local tensors
# (a rank's own values), never on global ones.
ALLREDUCE = OpDef(
    "allreduce",
    inputs=("input",),
    meta=lambda x, *, step: Meta(tuple(x.shape), x.dtype),
    sbp=broadcast_only,
    kernels={"cpu": _allreduce_kernel},
    differentiable=False,
    communicates=True,
)


def agree(x: Tensor, ranks: Iterable[int], op: _comm.ReduceOp = _comm.ReduceOp.MAX) -> Tensor:
    """The local tensor `x` combined with `op` over the world `ranks` (a MAX of flags: true
    on every rank if true on any). Every rank of the group must call it, in the same order
    as its other collectives; on a rank outside the group, or a group of one, `x` itself.

    >>> agree(flow.tensor(True), [0])  # a world of one agrees with itself
    tensor(True)
    """
    group = tuple(sorted(set(ranks)))
    if len(group) < 2 or _comm.world_rank() not in group:
        return x
    return dispatch(ALLREDUCE, (x,), {"step": GroupReduce(group, op)})


def agreeing_ranks(params, loss_ranks=()) -> tuple[int, ...]:
    """The world ranks that must agree on whether the gradients of `params` overflowed: those
    of the global parameters' placements and `loss_ranks`, sorted; none (no collective) when
    every parameter is local, where each process owns its whole step, or all live on this
    rank alone."""
    ranks = set()
    for p in params:
        if p.is_global:
            ranks.update(p.placement.flat_ranks)
    if not ranks:
        return ()
    ranks.update(loss_ranks)
    return () if ranks == {_comm.world_rank()} else tuple(sorted(ranks))
