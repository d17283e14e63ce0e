"""Processes and communication, with `torch.distributed`'s names.

One process per device, started by `mpiexec -n 4 python train.py`, by
`python -m tideflow.distributed.launch --nproc_per_node 4 train.py`, or by Slurm's `srun`;
a plain `python train.py` is a world of one. `flow.env` tells a process where it stands;
`flow.comm` has the collectives under OneFlow's names.

import tideflow as flow
import tideflow.distributed as dist
dist.init_process_group()            # optional: the world exists anyway
t = flow.ones(4) * dist.get_rank()
dist.all_reduce(t, op=dist.ReduceOp.SUM)
"""

from .backend import ReduceOp
from .collectives import (
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
from .groups import ProcessGroup, RankError, group
from .objects import all_gather_object, broadcast_object_list
from .p2p import irecv, isend, recv, send
from .process_group import (
    destroy_process_group,
    get_backend,
    get_global_rank,
    get_group_rank,
    get_process_group_ranks,
    get_rank,
    get_world_size,
    init_process_group,
    is_available,
    is_initialized,
    is_mpi_available,
    is_nccl_available,
    new_group,
)
from .work import Work

__all__ = [
    "ReduceOp",
    "ProcessGroup",
    "RankError",
    "Work",
    "group",
    "init_process_group",
    "destroy_process_group",
    "is_initialized",
    "is_available",
    "is_mpi_available",
    "is_nccl_available",
    "get_rank",
    "get_world_size",
    "get_backend",
    "new_group",
    "get_process_group_ranks",
    "get_group_rank",
    "get_global_rank",
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
    "isend",
    "irecv",
    "all_gather_object",
    "broadcast_object_list",
]
