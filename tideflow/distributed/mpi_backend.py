"""The MPI backend: mpi4py's buffer-based calls (Allreduce, Allgatherv, ...) on NumPy arrays.

MPI reads and writes the caller's arrays directly; nothing is copied except where MPI has no
arithmetic for the dtype. Data that is only moved travels as raw bytes, so every dtype
(bfloat16, bool) arrives bit for bit. Reductions of 16-bit floats run in float32 and round
once at the end (MPI has no bfloat16, and float16 arithmetic would round at every step);
bool reduces with MPI's logical ops (SUM and MAX are OR, PRODUCT and MIN are AND).

Importing this module initializes MPI; `world.py` imports it only in a launched process or
when asked to.
"""

from __future__ import annotations

import atexit
import zlib
from itertools import accumulate

import ml_dtypes
import numpy as np
from mpi4py import MPI

from .attendance import Attendance
from .backend import Communicator, ReduceOp, Request
from .failure import Watchdog

_OPS = {
    ReduceOp.SUM: MPI.SUM,
    ReduceOp.AVG: MPI.SUM,  # then divided by the group size
    ReduceOp.PRODUCT: MPI.PROD,
    ReduceOp.MIN: MPI.MIN,
    ReduceOp.MAX: MPI.MAX,
    ReduceOp.BAND: MPI.BAND,
    ReduceOp.BOR: MPI.BOR,
    ReduceOp.BXOR: MPI.BXOR,
}
_BOOL_OPS = {
    ReduceOp.SUM: MPI.LOR,
    ReduceOp.MAX: MPI.LOR,
    ReduceOp.BOR: MPI.LOR,
    ReduceOp.PRODUCT: MPI.LAND,
    ReduceOp.MIN: MPI.LAND,
    ReduceOp.BAND: MPI.LAND,
    ReduceOp.BXOR: MPI.LXOR,
}
_WIDENED = {np.dtype(ml_dtypes.bfloat16): np.float32, np.dtype(np.float16): np.float32}
_BOOL = np.dtype(np.bool_)


def connect() -> MpiCommunicator:
    """The communicator of every process in the job (MPI is initialized on import).

    NOTE: a duplicate of COMM_WORLD, so that a program's own mpi4py messages never match
    tideflow's."""
    comm = MPI.COMM_WORLD.Dup()
    return MpiCommunicator(comm, tuple(range(comm.Get_size())))


def set_timeout(timeout: float, rank: int) -> None:
    """Bound every blocking call of every MPI communicator by `timeout` seconds; a call that
    takes longer ends the job (`failure.Watchdog`). The first call is collective: it makes
    the watchdogs' own communicator."""
    global _watch
    if isinstance(_watch, Watchdog):
        _watch.set_timeout(timeout)
        return
    _watch = Watchdog(timeout, rank, Attendance(MPI.COMM_WORLD.Dup()))
    # NOTE: Python's exit handlers run before mpi4py's MPI_Finalize (a C-level Py_AtExit):
    # the watchdog thread makes MPI calls, and none may come after MPI_Finalize
    atexit.register(_watch.stop)


class MpiCommunicator(Communicator):
    backend = "mpi"

    def __init__(self, comm: MPI.Comm, ranks: tuple[int, ...]) -> None:
        self._comm = comm
        self.rank = comm.Get_rank()
        self.size = comm.Get_size()
        self.ranks = ranks

    # -- reductions -----------------------------------------------------------------------
    def allreduce(self, sendbuf, recvbuf, op) -> None:
        with _watch("allreduce", self.ranks):
            self._reduction(self._comm.Allreduce, sendbuf, recvbuf, op)

    def iallreduce(self, sendbuf, recvbuf, op) -> Request:
        """A non-blocking allreduce (MPI_Iallreduce) whose `wait()` completes it: DDP starts
        each gradient bucket's reduction with it while backward goes on. MPICH advances it
        inside later MPI calls (or in a progress thread with MPIR_CVAR_ASYNC_PROGRESS=1).
        Dtypes MPI cannot reduce natively (bfloat16/float16, bool) and AVG take the blocking
        path and return a finished request."""
        if sendbuf.dtype in _WIDENED or sendbuf.dtype == _BOOL or op is ReduceOp.AVG:
            self.allreduce(sendbuf, recvbuf, op)
            return _Finished(self.rank)
        send = MPI.IN_PLACE if recvbuf is sendbuf else sendbuf
        request = self._comm.Iallreduce(send, recvbuf, _OPS[op])
        return _MpiRequest("iallreduce", request, recvbuf, self.rank, self)

    def reduce(self, sendbuf, recvbuf, op, root) -> None:
        def call(send, recv, mpi_op):
            self._comm.Reduce(send, recv, mpi_op, root)

        with _watch("reduce", self.ranks):
            self._reduction(call, sendbuf, recvbuf if self.rank == root else None, op)

    def reduce_scatter(self, sendbuf, recvbuf, op, counts=None) -> None:
        if counts is None:
            call = self._comm.Reduce_scatter_block
        else:

            def call(send, recv, mpi_op):
                self._comm.Reduce_scatter(send, recv, list(counts), mpi_op)

        with _watch("reduce_scatter", self.ranks):
            self._reduction(call, sendbuf, recvbuf, op)

    def _reduction(self, call, sendbuf, recvbuf, op: ReduceOp) -> None:
        """call(send, recv, mpi_op) with dtypes MPI can reduce, then AVG's division."""
        dtype = sendbuf.dtype
        mpi_op = _BOOL_OPS[op] if dtype == _BOOL else _OPS[op]
        wide = _WIDENED.get(dtype)
        send, recv = sendbuf, recvbuf
        if wide is not None:
            send = sendbuf.astype(wide)
            if recvbuf is sendbuf:
                recv = send
            elif recvbuf is not None:
                recv = np.empty(recvbuf.shape, wide)
        call(MPI.IN_PLACE if recv is send else send, recv, mpi_op)
        if recv is None:
            return
        if op is ReduceOp.AVG:
            np.divide(recv, self.size, out=recv)
        if recv is not recvbuf:
            recvbuf[...] = recv

    # -- data movement (raw bytes) --------------------------------------------------------
    def allgather(self, sendbuf, recvbuf, counts=None) -> None:
        with _watch("allgather", self.ranks):
            if counts is None and isinstance(recvbuf, np.ndarray):
                self._comm.Allgather(_raw(sendbuf), _raw(recvbuf))
            else:
                self._comm.Allgatherv(_raw(sendbuf), self._vector(recvbuf, counts))

    def bcast(self, buf, root) -> None:
        with _watch("bcast", self.ranks):
            self._comm.Bcast(_raw(buf), root)

    def alltoall(self, sendbuf, recvbuf, sendcounts=None, recvcounts=None) -> None:
        with _watch("alltoall", self.ranks):
            if _even(sendbuf, sendcounts) and _even(recvbuf, recvcounts):
                self._comm.Alltoall(_raw(sendbuf), _raw(recvbuf))
            else:
                send = self._vector(sendbuf, sendcounts)
                self._comm.Alltoallv(send, self._vector(recvbuf, recvcounts))

    # NOTE: scatter and gather always take MPI's v-form: only the root knows whether the
    # blocks are even, and every rank must make the same call.
    def scatter(self, sendbuf, recvbuf, root, counts=None) -> None:
        send = self._vector(sendbuf, counts) if self.rank == root else None
        with _watch("scatter", self.ranks):
            self._comm.Scatterv(send, _raw(recvbuf), root)

    def gather(self, sendbuf, recvbuf, root, counts=None) -> None:
        recv = self._vector(recvbuf, counts) if self.rank == root else None
        with _watch("gather", self.ranks):
            self._comm.Gatherv(_raw(sendbuf), recv, root)

    def _vector(self, buf, counts) -> list:
        """An MPI vector buffer of one block per rank: the arrays of a list where they are,
        or consecutive pieces of one array (`counts` elements each; None: even)."""
        if not isinstance(buf, np.ndarray):
            # NOTE: displacements from MPI_BOTTOM are absolute addresses, so one call
            # reads or writes every array in place.
            raws = [_raw(b) for b in buf]
            return [
                MPI.BOTTOM,
                [r.size for r in raws],
                [MPI.Get_address(r) for r in raws],
                MPI.BYTE,
            ]
        counts = [buf.size // self.size] * self.size if counts is None else counts
        nbytes = [c * buf.itemsize for c in counts]
        return [_raw(buf), nbytes, [0, *accumulate(nbytes)][:-1], MPI.BYTE]

    # -- point to point -------------------------------------------------------------------
    def send(self, buf, dest, tag=0) -> None:
        with _watch("send", self.ranks):
            self._comm.Send(_raw(buf), dest, tag)

    def recv(self, buf, source=None, tag=0) -> int:
        status = MPI.Status()
        with _watch("recv", self.ranks):
            self._comm.Recv(_raw(buf), MPI.ANY_SOURCE if source is None else source, tag, status)
        return status.Get_source()

    def isend(self, buf, dest, tag=0) -> Request:
        return _MpiRequest("isend", self._comm.Isend(_raw(buf), dest, tag), buf, dest, self)

    def irecv(self, buf, source=None, tag=0) -> Request:
        req = self._comm.Irecv(_raw(buf), MPI.ANY_SOURCE if source is None else source, tag)
        return _MpiRequest("irecv", req, buf, None, self)

    def barrier(self) -> None:
        with _watch("barrier", self.ranks):
            self._comm.Barrier()

    # -- groups ---------------------------------------------------------------------------
    def subgroup(self, ranks) -> MpiCommunicator:
        group = self._comm.Get_group()
        members = group.Incl(list(ranks))
        group.Free()
        # NOTE: the tag keeps concurrent creations of different groups apart.
        tag = zlib.crc32(np.asarray(ranks, np.int64).tobytes()) % 32768
        with _watch("subgroup", tuple(self.ranks[r] for r in ranks)):
            comm = self._comm.Create_group(members, tag)
        members.Free()
        return MpiCommunicator(comm, tuple(self.ranks[r] for r in ranks))

    def dup(self) -> MpiCommunicator:
        with _watch("dup", self.ranks):
            return MpiCommunicator(self._comm.Dup(), self.ranks)

    def node_layout(self) -> tuple[int, int, int]:
        with _watch("node_layout", self.ranks):
            node = self._comm.Split_type(MPI.COMM_TYPE_SHARED)
            local_rank, local_size = node.Get_rank(), node.Get_size()
            node.Free()
            leaders = np.array([int(local_rank == 0)], np.int64)
            self._comm.Allreduce(MPI.IN_PLACE, leaders, MPI.SUM)
        return local_rank, local_size, int(leaders[0])

    def free(self) -> None:
        if self._comm != MPI.COMM_NULL:
            self._comm.Free()


class _MpiRequest(Request):
    """A pending transfer; it holds its buffer, which must outlive the transfer."""

    __slots__ = ("_buf", "_call", "_comm", "_peer", "_request")

    def __init__(
        self, call: str, request: MPI.Request, buf, peer: int | None, comm: MpiCommunicator
    ) -> None:
        self._call = call
        self._request = request
        self._buf = buf
        self._peer = peer
        self._comm = comm

    def wait(self) -> int:
        status = MPI.Status()
        with _watch(f"{self._call} (waited for)", self._comm.ranks):
            self._request.Wait(status)
        return self._peer if self._peer is not None else status.Get_source()


class _Finished(Request):
    """A request that completed before it was returned."""

    __slots__ = ("_rank",)

    def __init__(self, rank: int) -> None:
        self._rank = rank

    def wait(self) -> int:
        return self._rank


class _Unwatched:
    """The watchdog stand-in until the world is joined: a reusable no-op context."""

    __slots__ = ()

    def __call__(self, call: str, ranks: tuple[int, ...]) -> _Unwatched:
        return self

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc) -> None:
        pass


_unwatched = _Unwatched()
_watch: Watchdog | _Unwatched = _unwatched


def _raw(buf: np.ndarray) -> np.ndarray:
    return buf.reshape(-1).view(np.uint8)


def _even(buf, counts) -> bool:
    return counts is None and isinstance(buf, np.ndarray)
