"""Where this process stands in the job (`oneflow.env`).

>>> import tideflow as flow
>>> flow.env.get_rank(), flow.env.get_world_size()  # a plain process: a world of one
(0, 1)
"""

from __future__ import annotations

from .distributed.world import get_world
from .parallel.placement import placement


def get_rank() -> int:
    """This process's rank: 0 to get_world_size() - 1."""
    return get_world().rank


def get_world_size() -> int:
    """The number of processes in the job."""
    return get_world().size


def get_local_rank() -> int:
    """This process's rank among the processes on its node (machine)."""
    return get_world().local_rank


def get_node_size() -> int:
    """The number of nodes (machines) the job runs on."""
    return get_world().node_size


def all_device_placement(device_type: str) -> placement:
    """Every rank of the job on `device_type` ("cpu" or "cuda"), as `placement.all`.

    >>> flow.env.all_device_placement("cpu")
    tideflow.placement(type="cpu", ranks=[0])
    """
    return placement.all(device_type)


def barrier() -> None:
    """Wait until every process of the job has called `barrier`."""
    get_world().user_comm.barrier()
