"""Collectives on local tensors under OneFlow's names (`oneflow.comm`); each also takes
`torch.distributed`'s arguments (`op=`, `group=`, `async_op=`).

import tideflow as flow
t = flow.ones(3) * flow.env.get_rank()
flow.comm.all_reduce(t)                    # in place: the sum over the ranks
parts = [flow.empty(3) for _ in range(flow.env.get_world_size())]
flow.comm.all_gather(parts, t)
"""

from ..distributed.backend import ReduceOp
from ..distributed.collectives import (
    all_gather,
    all_gather_into_tensor,
    all_gather_single,
    all_reduce,
    all_to_all,
    all_to_all_single,
    barrier,
    broadcast,
    gather,
    reduce,
    reduce_scatter,
    reduce_scatter_single,
    reduce_scatter_tensor,
    scatter,
)
from .p2p import recv, send

__all__ = [
    "ReduceOp",
    "all_reduce",
    "all_gather",
    "all_gather_into_tensor",
    "all_gather_single",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "reduce_scatter_single",
    "broadcast",
    "reduce",
    "all_to_all",
    "all_to_all_single",
    "scatter",
    "gather",
    "barrier",
    "send",
    "recv",
]
