"""Creating global tensors: `flow.zeros(..., placement=p, sbp=s)` and the other creators.

Every rank runs the local creator for the logical shape (so random generators stay in step
across ranks, and a seeded program gives the single-process values) and keeps its shard.
Broadcast axes then take the first rank's values, so the copies agree even where the ranks'
generators do not.
"""

from __future__ import annotations

from collections.abc import Callable

from ..framework.errors import TideflowError
from ..framework.sbp import B
from ..framework.tensor import Tensor, make_tensor
from . import _comm
from .boxing import box, empty_shard
from .dispatch import install
from .global_tensor import GlobalTensor, wrap
from .placement import placement as Placement
from .sbp import nd_sbp
from .to_global import broadcast_axes

__all__ = ["create_global"]


def create_global(
    local_creator: Callable[[tuple], Tensor],
    shape: tuple,
    placement,
    sbp,
    *,
    requires_grad: bool = False,
    synchronize: bool = True,
) -> GlobalTensor:
    """A global leaf of logical `shape` with the values `local_creator(shape)` makes.
    `synchronize=False` skips sending the first rank's values along broadcast axes, for
    creators that make the same values on every rank (zeros, arange, ...).

    >>> p = flow.placement("cpu", ranks=[0])
    >>> create_global(flow.ones, (4, 2), p, flow.sbp.split(0)).to_local().shape
    tideflow.Size([4, 2])
    """
    if not isinstance(placement, Placement) or sbp is None:
        raise TideflowError(
            "creating a global tensor needs a flow.placement and an sbp, got "
            f"placement={placement!r}, sbp={sbp!r}"
        )
    placement.check_device("global tensor creation")
    shape = tuple(shape)
    nd = nd_sbp(sbp, len(shape), placement.ndim, "global tensor creation")
    whole = local_creator(shape)
    coord = placement.coordinate(_comm.world_rank())
    if coord is None:
        shard = empty_shard(shape, whole._data.dtype)
    else:
        # NOTE: boxing from broadcast cuts each rank's shard out of the whole (a graph traces it)
        shard = box(whole, shape, placement, (B,) * placement.ndim, nd)
        if synchronize:
            shard = broadcast_axes(shard, placement, nd, coord)
        shard = shard._data
    install()
    t = wrap(make_tensor(shard), placement, nd, shape)
    if requires_grad:
        t.requires_grad_(True)
    return t


# NOTE: the creators of tideflow.ops (zeros, randn, ...) sit below this package: called with
# placement= and sbp=, they reach it through this binding, as ops reach autograd's backward.
Tensor._create_global = staticmethod(create_global)
