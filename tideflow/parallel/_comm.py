"""The one place global tensors reach the communication layer: the world and one
communicator per rank group (`tideflow.distributed` creates and caches them)."""

from __future__ import annotations

from ..distributed.backend import Communicator, ReduceOp
from ..distributed.groups import communicator
from ..distributed.world import get_world

__all__ = ["Communicator", "ReduceOp", "comm_for", "world_rank", "world_size"]


def world_rank() -> int:
    return get_world().rank


def world_size() -> int:
    return get_world().size


def comm_for(ranks: tuple[int, ...] | None, channel: str = "") -> Communicator:
    """The communicator of `ranks` (world ranks, in group order; None: the whole world) on
    `channel` (see `groups.communicator`). Only members may ask, and all of them must (the
    first request creates it)."""
    return communicator(ranks, channel)
