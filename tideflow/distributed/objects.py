"""Collectives on picklable Python objects, as in `torch.distributed`: a metric dict, a
random seed, a file name chosen on rank 0.

Objects travel pickled, and unpickling runs code the sender chose: like PyTorch's, these
calls are for the ranks of one job, which trust each other, never for outside data.
"""

from __future__ import annotations

import pickle
from itertools import accumulate

import numpy as np

from ..framework.errors import TideflowError
from . import faults
from .arguments import group_rank, member_group


def all_gather_object(object_list: list, obj, group=None) -> None:
    """Fill `object_list` (one slot per rank) with every rank's `obj`.

    >>> import tideflow.distributed as dist
    >>> seen = [None] * dist.get_world_size()
    >>> dist.all_gather_object(seen, {"loss": 0.5})
    >>> seen
    [{'loss': 0.5}]
    """
    pg = member_group(group, "all_gather_object")
    if pg is None:
        return
    _check_slots(object_list, pg.size(), "all_gather_object")
    payload = _pickled(obj)
    sizes = np.empty(pg.size(), np.int64)
    pg.comm.allgather(np.array([payload.size], np.int64), sizes)
    if faults.armed:
        faults.reached("mid_collective", "all_gather_object, sizes exchanged")
    received = np.empty(int(sizes.sum()), np.uint8)
    pg.comm.allgather(payload, received, sizes.tolist())
    starts = [0, *accumulate(sizes.tolist())]
    for i in range(pg.size()):
        object_list[i] = pickle.loads(received[starts[i] : starts[i + 1]].tobytes())


def broadcast_object_list(
    object_list: list, src=None, group=None, device=None, group_src=None
) -> None:
    """Replace the entries of `object_list` on every rank with those of rank `src`'s list,
    which has the same length.

    >>> import tideflow.distributed as dist
    >>> config = [{"lr": 0.1}, "run-7"] if dist.get_rank() == 0 else [None, None]
    >>> dist.broadcast_object_list(config, src=0)
    >>> config
    [{'lr': 0.1}, 'run-7']
    """
    pg = member_group(group, "broadcast_object_list")
    if pg is None:
        return
    _check_slots(object_list, None, "broadcast_object_list")
    root = group_rank(pg, src, group_src, "broadcast_object_list", "src", default=None)
    at_root = pg.rank() == root
    payload = _pickled(list(object_list)) if at_root else None
    size = np.array([payload.size if at_root else 0], np.int64)
    pg.comm.bcast(size, root)
    if faults.armed:
        faults.reached("mid_collective", "broadcast_object_list, size broadcast")
    if not at_root:
        payload = np.empty(int(size[0]), np.uint8)
    pg.comm.bcast(payload, root)
    if not at_root:
        sent = pickle.loads(payload.tobytes())
        if len(sent) != len(object_list):
            raise TideflowError(
                f"broadcast_object_list: rank {pg.ranks[root]} sent {len(sent)} objects, but "
                f"this rank's object_list has {len(object_list)} slots"
            )
        object_list[:] = sent


def _pickled(obj) -> np.ndarray:
    return np.frombuffer(bytearray(pickle.dumps(obj)), np.uint8)


def _check_slots(object_list, size: int | None, call: str) -> None:
    if not isinstance(object_list, list):
        raise TypeError(f"{call}: object_list must be a list, got {type(object_list).__name__}")
    if size is not None and len(object_list) != size:
        raise TideflowError(
            f"{call}: object_list has {len(object_list)} slots, expected one per rank of the "
            f"group ({size})"
        )
