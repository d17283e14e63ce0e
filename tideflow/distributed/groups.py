"""Communicators per rank group.

For the library: `communicator(ranks)`, created once per rank set and cached. A group is a
tuple of world ranks; its order gives the ranks within the group. Global tensors ask for
the communicator of their placement's ranks on every op, so the first request creates it
(collectively, among the group's members only) and later ones are a dict lookup.

For user code: `ProcessGroup`, the `torch.distributed` face, whose communicators descend
from a duplicate of the world's, so that user messages and tags never meet the library's.
"""

from __future__ import annotations

import operator
import threading
from collections.abc import Iterable

from ..framework.errors import TideflowError
from .backend import Communicator
from .world import get_world

_cache: dict[tuple[int, ...], Communicator] = {}
_channels: dict[tuple[str, tuple[int, ...]], Communicator] = {}
_lock = threading.Lock()


class RankError(TideflowError, ValueError):
    """A rank that is not in the group, or out of range. A ValueError too, as PyTorch raises
    for ranks outside a group."""


def communicator(ranks: Iterable[int] | None = None, channel: str = "") -> Communicator:
    """The communicator of `ranks` (world ranks; None: every rank). A named `channel` is a
    communicator of its own for the same ranks: collectives that run on another thread
    (a compiled graph's plan) must not share one with eager code, or two threads' calls
    could be matched with each other across the ranks.

    Creating it is collective over its members: each of them must ask for it, and members
    of several new groups must ask for them in the same order. Only members may ask.

    >>> comm = communicator([0])
    >>> comm.rank, comm.size
    (0, 1)
    """
    if channel:
        return _channel(ranks, channel)
    world = get_world()
    if ranks is None:
        return world.comm
    key = ranks if type(ranks) is tuple and ranks in _cache else group_ranks(ranks, world.size)
    comm = _cache.get(key)
    if comm is not None:
        return comm
    if world.rank not in key:
        raise RankError(
            f"rank {world.rank} is not in the group {list(key)}: only the group's ranks "
            "can use its communicator"
        )
    with _lock:
        comm = _cache.get(key)
        if comm is None:
            whole = key == tuple(range(world.size))
            comm = _cache[key] = world.comm if whole else world.comm.subgroup(key)
    return comm


def _channel(ranks: Iterable[int] | None, channel: str) -> Communicator:
    world = get_world()
    key = (channel, tuple(range(world.size)) if ranks is None else group_ranks(ranks, world.size))
    comm = _channels.get(key)
    if comm is None:
        base = communicator(ranks)  # checks membership
        with _lock:
            comm = _channels.get(key)
            if comm is None:
                comm = _channels[key] = base.dup()
    return comm


def group_ranks(ranks: Iterable[int], world_size: int) -> tuple[int, ...]:
    """`ranks` as a tuple, checked: distinct ranks of the world, at least one."""
    try:
        key = tuple(operator.index(r) for r in ranks)
    except TypeError:
        raise TypeError(f"a group's ranks must be integers, got {ranks!r}") from None
    if not key:
        raise ValueError("a group needs at least one rank")
    if len(set(key)) != len(key):
        raise ValueError(f"a group's ranks must be distinct, got {list(key)}")
    bad = [r for r in key if not 0 <= r < world_size]
    if bad:
        raise RankError(
            f"ranks {bad} are out of range for a world of {world_size} "
            f"(ranks 0 to {world_size - 1})"
        )
    return key


class ProcessGroup:
    """Ranks that run collectives together (`torch.distributed.ProcessGroup`).

    `new_group(ranks)` makes one; `group.WORLD` holds every rank. Any rank may hold a group
    object; only its members may run collectives on it. A group has a communicator of its
    own, apart from the ones the library caches per rank set, so that the messages and tags
    of user code never meet the library's.

    >>> import tideflow.distributed as dist
    >>> g = dist.new_group([0])
    >>> g.rank(), g.size()
    (0, 1)
    """

    def __init__(self, ranks: Iterable[int] | None = None) -> None:
        self._ranks = None if ranks is None else group_ranks(ranks, get_world().size)
        self._comm: Communicator | None = None
        self._destroyed = False

    @property
    def ranks(self) -> tuple[int, ...]:
        """World ranks of the members, in group order."""
        return self._ranks if self._ranks is not None else tuple(range(get_world().size))

    def rank(self) -> int:
        """This process's rank in the group, -1 if it is not a member."""
        me = get_world().rank
        if self._ranks is None:
            return me
        return self._ranks.index(me) if me in self._ranks else -1

    def size(self) -> int:
        return len(self.ranks)

    def is_member(self) -> bool:
        return self.rank() >= 0

    @property
    def comm(self) -> Communicator:
        """The group's communicator, connected on first use."""
        comm = self._comm
        return comm if comm is not None else self.connect()

    def connect(self) -> Communicator:
        """Create the group's communicator: collective over the members (`new_group` does it
        at once, so that point-to-point calls between two members need no third)."""
        if self._destroyed:
            raise TideflowError(f"{self!r} was destroyed by destroy_process_group")
        world = get_world()
        if self._ranks is None:
            return world.user_comm
        if not self.is_member():
            raise RankError(
                f"rank {world.rank} is not in the group {list(self._ranks)}: only the "
                "group's ranks can use its communicator"
            )
        with _lock:
            if self._comm is None:
                self._comm = world.user_comm.subgroup(self._ranks)
        return self._comm

    def destroy(self) -> None:
        """Free the group's communicator; the group cannot be used again. The world group
        stays usable: the world lives as long as the process."""
        if self._ranks is None:
            return
        with _lock:
            if self._comm is not None:
                self._comm.free()
            self._comm, self._destroyed = None, True

    def group_rank(self, global_rank: int, what: str) -> int:
        """The group rank of world rank `global_rank`; `what` names it in the error."""
        ranks = self.ranks
        if global_rank not in ranks:
            raise RankError(f"{what} {global_rank} is not a rank of the group {list(ranks)}")
        return global_rank if self._ranks is None else ranks.index(global_rank)

    def global_rank(self, group_rank: int, what: str) -> int:
        """The world rank of group rank `group_rank`; `what` names it in the error."""
        ranks = self.ranks
        if not 0 <= group_rank < len(ranks):
            raise RankError(
                f"{what} {group_rank} is out of range for a group of {len(ranks)} ranks"
            )
        return ranks[group_rank]

    def __repr__(self) -> str:
        if self._ranks is None:
            return "ProcessGroup(WORLD)"
        return f"ProcessGroup(ranks={list(self._ranks)})"


class group:  # lower case: torch.distributed.group
    """`group.WORLD`: the group of every rank."""

    WORLD = ProcessGroup()
