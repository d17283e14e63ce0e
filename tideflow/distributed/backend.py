"""The communication backend interface: collectives on NumPy buffers, named after MPI.

A `Communicator` connects the ranks of one group. Its methods take C-contiguous NumPy arrays
and work on their elements in order; shapes are the caller's business. Every buffer of one
call has the same dtype, any dtype tideflow has (bfloat16 included): moving data is exact
whatever the dtype, and each backend reduces the dtypes its library cannot (bfloat16 on MPI)
in a wider type.

The calls that only move data take their per-rank buffer either as one array, cut into
blocks by `counts` (elements per rank, for uneven blocks; without them every block has the
same size), or as a list of one array per rank: then the blocks land in (or leave from)
those arrays directly, uncopied. Every rank of a call passes `counts` or none does, except
in `scatter`/`gather`, where only the root's matter.

Implementations: `mpi_backend.MpiCommunicator` (mpi4py) and `LocalCommunicator` below, the
world of one process that runs without any MPI library. NCCL (CuPy) will be another.
"""

from __future__ import annotations

import abc
import enum
from collections.abc import Sequence

import numpy as np

from ..framework.errors import TideflowError

Blocks = np.ndarray | Sequence[np.ndarray]  # one buffer, or one buffer per rank


class ReduceOp(enum.Enum):
    """How a reducing collective combines the ranks' values (`torch.distributed.ReduceOp`)."""

    SUM = "sum"
    PRODUCT = "product"
    MIN = "min"
    MAX = "max"
    AVG = "avg"
    BAND = "band"
    BOR = "bor"
    BXOR = "bxor"

    def __repr__(self) -> str:
        return f"ReduceOp.{self.name}"


_OP_NAMES = {op.value: op for op in ReduceOp} | {"prod": ReduceOp.PRODUCT}


def to_reduce_op(op) -> ReduceOp:
    """A `ReduceOp` from itself or its name ('sum', 'prod', 'max', 'min', 'avg', ...)."""
    if isinstance(op, ReduceOp):
        return op
    if isinstance(op, str) and op.lower() in _OP_NAMES:
        return _OP_NAMES[op.lower()]
    names = ", ".join(f"ReduceOp.{o.name}" for o in ReduceOp)
    raise ValueError(f"unknown reduce op {op!r}; expected one of {names} or its name")


class Request(abc.ABC):
    """A pending point-to-point transfer."""

    @abc.abstractmethod
    def wait(self) -> int:
        """Block until the transfer is done; returns the peer's rank in the communicator."""


class Communicator(abc.ABC):
    """The ranks of one group and the collectives among them.

    `rank` and `size` are this process's rank in the group and the group's size; `ranks[i]`
    is the world rank of group rank i. Roots, sources and destinations are group ranks.
    `recvbuf` may be `sendbuf` itself for an in-place reduction."""

    backend: str
    rank: int
    size: int
    ranks: tuple[int, ...]

    @abc.abstractmethod
    def allreduce(self, sendbuf: np.ndarray, recvbuf: np.ndarray, op: ReduceOp) -> None:
        """recvbuf = op over the ranks of sendbuf, on every rank."""

    @abc.abstractmethod
    def reduce(
        self, sendbuf: np.ndarray, recvbuf: np.ndarray | None, op: ReduceOp, root: int
    ) -> None:
        """Like `allreduce`, with the result on `root` only (recvbuf is ignored elsewhere)."""

    @abc.abstractmethod
    def allgather(
        self, sendbuf: np.ndarray, recvbuf: Blocks, counts: Sequence[int] | None = None
    ) -> None:
        """recvbuf = every rank's sendbuf, concatenated in rank order, on every rank."""

    @abc.abstractmethod
    def reduce_scatter(
        self,
        sendbuf: np.ndarray,
        recvbuf: np.ndarray,
        op: ReduceOp,
        counts: Sequence[int] | None = None,
    ) -> None:
        """Reduce sendbuf over the ranks; rank i receives block i of the result."""

    @abc.abstractmethod
    def bcast(self, buf: np.ndarray, root: int) -> None:
        """Every rank's buf = root's buf."""

    @abc.abstractmethod
    def alltoall(
        self,
        sendbuf: Blocks,
        recvbuf: Blocks,
        sendcounts: Sequence[int] | None = None,
        recvcounts: Sequence[int] | None = None,
    ) -> None:
        """Block j of rank i's sendbuf becomes block i of rank j's recvbuf."""

    @abc.abstractmethod
    def scatter(
        self,
        sendbuf: Blocks | None,
        recvbuf: np.ndarray,
        root: int,
        counts: Sequence[int] | None = None,
    ) -> None:
        """Rank i's recvbuf = block i of root's sendbuf (sendbuf is ignored elsewhere)."""

    @abc.abstractmethod
    def gather(
        self,
        sendbuf: np.ndarray,
        recvbuf: Blocks | None,
        root: int,
        counts: Sequence[int] | None = None,
    ) -> None:
        """root's recvbuf = every rank's sendbuf in rank order (recvbuf ignored elsewhere)."""

    @abc.abstractmethod
    def send(self, buf: np.ndarray, dest: int, tag: int = 0) -> None:
        """Send buf to rank `dest`; returns when buf may be reused."""

    @abc.abstractmethod
    def recv(self, buf: np.ndarray, source: int | None = None, tag: int = 0) -> int:
        """Receive into buf from `source` (None: any rank); returns the sender's rank."""

    @abc.abstractmethod
    def isend(self, buf: np.ndarray, dest: int, tag: int = 0) -> Request:
        """Start sending buf; it must not change until the request is waited for."""

    @abc.abstractmethod
    def irecv(self, buf: np.ndarray, source: int | None = None, tag: int = 0) -> Request:
        """Start receiving into buf."""

    @abc.abstractmethod
    def barrier(self) -> None:
        """Return once every rank of the group has entered the barrier."""

    @abc.abstractmethod
    def subgroup(self, ranks: tuple[int, ...]) -> Communicator:
        """A new communicator of `ranks` (ranks of this communicator, in the new group's
        order). Collective over those ranks only; others must not call it."""

    @abc.abstractmethod
    def dup(self) -> Communicator:
        """A new communicator of the same ranks whose messages never match this one's.
        Collective."""

    @abc.abstractmethod
    def node_layout(self) -> tuple[int, int, int]:
        """(rank on this node, ranks on this node, number of nodes). Collective."""

    @abc.abstractmethod
    def free(self) -> None:
        """Release the communicator; it must not be used again."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} rank {self.rank} of {list(self.ranks)}>"


class LocalCommunicator(Communicator):
    """The world of one process: collectives copy the input to the output, and there is no
    peer to send to or receive from."""

    backend = "local"
    rank = 0
    size = 1
    ranks = (0,)

    def allreduce(self, sendbuf, recvbuf, op) -> None:
        _copy(sendbuf, recvbuf)

    def reduce(self, sendbuf, recvbuf, op, root) -> None:
        _copy(sendbuf, recvbuf)

    def allgather(self, sendbuf, recvbuf, counts=None) -> None:
        _copy(sendbuf, recvbuf)

    def reduce_scatter(self, sendbuf, recvbuf, op, counts=None) -> None:
        _copy(sendbuf, recvbuf)

    def bcast(self, buf, root) -> None:
        pass

    def alltoall(self, sendbuf, recvbuf, sendcounts=None, recvcounts=None) -> None:
        _copy(sendbuf, recvbuf)

    def scatter(self, sendbuf, recvbuf, root, counts=None) -> None:
        _copy(sendbuf, recvbuf)

    def gather(self, sendbuf, recvbuf, root, counts=None) -> None:
        _copy(sendbuf, recvbuf)

    def send(self, buf, dest, tag=0) -> None:
        raise _no_peer("send")

    def recv(self, buf, source=None, tag=0) -> int:
        raise _no_peer("recv")

    def isend(self, buf, dest, tag=0) -> Request:
        raise _no_peer("isend")

    def irecv(self, buf, source=None, tag=0) -> Request:
        raise _no_peer("irecv")

    def barrier(self) -> None:
        pass

    def subgroup(self, ranks) -> Communicator:
        return self

    def dup(self) -> Communicator:
        return self

    def node_layout(self) -> tuple[int, int, int]:
        return 0, 1, 1

    def free(self) -> None:
        pass


def _copy(src: Blocks, dst: Blocks | None) -> None:
    # NOTE: in a world of one, a list of blocks holds exactly one.
    src = src if isinstance(src, np.ndarray) else src[0]
    dst = dst if dst is None or isinstance(dst, np.ndarray) else dst[0]
    if dst is not None and dst is not src:
        dst.reshape(-1)[...] = src.reshape(-1)


def _no_peer(what: str) -> TideflowError:
    return TideflowError(f"{what}: a world of one process has no peer to talk to")
