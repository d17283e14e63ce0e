"""`torch.distributed`'s process-group calls, on tideflow's world.

tideflow's world always exists (a launched job is an MPI world, a plain process a world of
one), so `init_process_group` only joins it early and remembers that it was called:
`is_initialized()` answers as PyTorch does, while `get_rank()` and the collectives work with
or without it. The MPI launcher does the rendezvous that `init_method`, `store`, `rank` and
`world_size` configure in PyTorch; given values are checked against the launched world.
"""

from __future__ import annotations

import datetime

from ..framework.errors import TideflowError
from .groups import ProcessGroup, group
from .world import get_world, init

WORLD = group.WORLD

# PyTorch's backend names; tideflow carries each of them over its own backend (MPI).
_TORCH_BACKENDS = ("mpi", "gloo", "nccl", "ucc")
_state: dict = {"initialized": False, "groups": []}


def init_process_group(
    backend: str | None = None,
    init_method: str | None = None,
    timeout: datetime.timedelta | None = None,
    world_size: int = -1,
    rank: int = -1,
    store=None,
    group_name: str = "",
    pg_options=None,
    device_id=None,
) -> None:
    """Join the world now (`torch.distributed.init_process_group`).

    Any PyTorch backend name is accepted ('gloo', 'nccl', 'mpi', 'ucc', or per-device
    'cpu:gloo,cuda:nccl'); processes talk over MPI. `timeout`: a collective or receive that
    takes longer ends the whole job with a message naming it, instead of hanging.

    >>> import tideflow.distributed as dist
    >>> dist.init_process_group("gloo")
    >>> dist.is_initialized(), dist.get_rank(), dist.get_world_size()
    (True, 0, 1)
    >>> dist.destroy_process_group()
    """
    if _state["initialized"]:
        raise ValueError("trying to initialize the default process group twice!")
    _check_backend(backend)
    if store is not None:
        raise TideflowError(
            "init_process_group: tideflow's ranks meet through the MPI launcher, not a store; "
            "start the job with mpiexec or `python -m tideflow.distributed.launch`"
        )
    seconds = None if timeout is None else _seconds(timeout)
    world = init(backend="mpi" if backend == "mpi" else None, timeout=seconds)
    for name, given, actual in (("world_size", world_size, world.size), ("rank", rank, world.rank)):
        if given != -1 and given != actual:
            raise ValueError(
                f"init_process_group: {name}={given}, but the launched world has {name} {actual}"
            )
    _state["initialized"] = True


def is_initialized() -> bool:
    """Whether `init_process_group` was called (and not undone by `destroy_process_group`)."""
    return _state["initialized"]


def destroy_process_group(group: ProcessGroup | None = None) -> None:
    """Free the communicator of `group`, or with no group, of every group `new_group` made
    and forget the `init_process_group` call. The world itself lives as long as the process,
    so `group.WORLD` stays usable."""
    if group is not None:
        group.destroy()
        return
    for made in _state["groups"]:
        made.destroy()
    _state["groups"].clear()
    _state["initialized"] = False


def is_available() -> bool:
    """tideflow always has inter-process communication."""
    return True


def is_mpi_available() -> bool:
    return True


def is_nccl_available() -> bool:
    return False


def get_rank(group: ProcessGroup | None = None) -> int:
    """This process's rank in `group` (the world by default); -1 if it is not a member."""
    return get_world().rank if group is None else group.rank()


def get_world_size(group: ProcessGroup | None = None) -> int:
    """The number of ranks in `group` (the world by default)."""
    return get_world().size if group is None else group.size()


def get_backend(group: ProcessGroup | None = None) -> str:
    """'mpi' in a launched job, 'local' in a world of one without MPI."""
    return get_world().comm.backend


def new_group(
    ranks=None,
    timeout=None,
    backend=None,
    pg_options=None,
    use_local_synchronization: bool = False,
    group_desc=None,
    device_id=None,
    sort_ranks: bool = True,
) -> ProcessGroup:
    """A group of `ranks` (world ranks; None: all) for collectives. Like PyTorch, every rank
    calls it, with the same ranks and in the same order of calls; the members create the
    group's communicator together here, and only they may use the group.

    >>> import tideflow.distributed as dist
    >>> dist.new_group([0]).size()
    1
    """
    _check_backend(backend)
    if ranks is None:
        return WORLD
    ranks = list(ranks)
    made = ProcessGroup(sorted(ranks) if sort_ranks else ranks)
    if made.is_member():
        made.connect()  # now, while every member is here
    _state["groups"].append(made)
    return made


def get_process_group_ranks(group: ProcessGroup | None) -> list[int]:
    return list((WORLD if group is None else group).ranks)


def get_group_rank(group: ProcessGroup, global_rank: int) -> int:
    """The rank within `group` of world rank `global_rank`."""
    return group.group_rank(global_rank, "get_group_rank: global_rank")


def get_global_rank(group: ProcessGroup, group_rank: int) -> int:
    """The world rank of rank `group_rank` of `group`."""
    return group.global_rank(group_rank, "get_global_rank: group_rank")


def _check_backend(backend) -> None:
    if backend is None:
        return
    names = [part.rpartition(":")[2] for part in str(backend).lower().split(",")]
    unknown = [n for n in names if n not in _TORCH_BACKENDS]
    if unknown:
        raise ValueError(
            f"unknown backend {backend!r}; tideflow accepts PyTorch's backend names "
            f"{list(_TORCH_BACKENDS)} and runs all of them over MPI"
        )


def _seconds(timeout) -> float:
    if isinstance(timeout, datetime.timedelta):
        return timeout.total_seconds()
    raise TypeError(f"timeout must be a datetime.timedelta, got {type(timeout).__name__}")
