"""Point-to-point transfers of tensors: `send`/`recv` and their nonblocking forms.

A tensor travels as two messages on the same tag: a header (dtype code, ndim, shape: a few
hundred bytes) and the raw data. The header lets a receiver allocate a tensor it knows
nothing about (`flow.comm.recv(src)`) and lets `recv(tensor, src)` report a mismatch with
the sender by name instead of reading garbage. MPI delivers the messages of one sender on
one tag in order, so the data always follows its header.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..framework import dtype as dtypes
from ..framework.errors import DTypeError, ShapeError
from .arguments import array_of, check_tag, contiguous, member_group, peer_rank, write
from .groups import ProcessGroup
from .work import Work

_MAX_DIMS = 64
_HEADER_LEN = 2 + _MAX_DIMS
_CODES = {d.np: code for code, d in enumerate(dtypes.ALL)}


class Header(NamedTuple):
    """What a receiver learns before the data: who sent it (world rank), dtype and shape."""

    source: int
    dtype: dtypes.DType
    shape: tuple[int, ...]


def send(tensor, dst=None, group=None, tag: int = 0, group_dst=None) -> None:
    """Send `tensor` to rank `dst`; returns once `tensor` may be modified again.

    >>> import tideflow as flow, tideflow.distributed as dist
    >>> if dist.get_world_size() > 1:
    ...     dist.send(flow.ones(3), dst=(dist.get_rank() + 1) % dist.get_world_size())
    """
    pg = member_group(group, "send")
    if pg is None:
        return
    a = array_of(tensor, "send", "tensor")
    tag = check_tag(tag, "send")
    peer = peer_rank(pg, dst, group_dst, "send", "dst")
    pg.comm.send(_header(a, "send"), peer, tag)
    pg.comm.send(contiguous(a), peer, tag)


def recv(tensor, src=None, group=None, tag: int = 0, group_src=None) -> int:
    """Receive into `tensor` from rank `src` (None: from any rank); returns the sender's
    world rank (-1 on a rank outside `group`). The sender's tensor must have the same dtype
    and number of elements."""
    pg = member_group(group, "recv")
    if pg is None:
        return -1
    array_of(tensor, "recv", "tensor")
    tag = check_tag(tag, "recv")
    peer = None
    if src is not None or group_src is not None:
        peer = peer_rank(pg, src, group_src, "recv", "src")
    header = receive_header(pg, peer, tag)
    receive_data(pg, tensor, header, tag)
    return header.source


def isend(tensor, dst=None, group=None, tag: int = 0, group_dst=None) -> Work | None:
    """Start sending `tensor` to rank `dst`; `wait()` on the result before modifying it.

    >>> import tideflow as flow, tideflow.distributed as dist
    >>> if dist.get_world_size() > 1:  # a ring exchange: no rank blocks the next
    ...     r, n = dist.get_rank(), dist.get_world_size()
    ...     out, inp = flow.full((2,), float(r)), flow.empty(2)
    ...     works = [dist.isend(out, (r + 1) % n), dist.irecv(inp, (r - 1) % n)]
    ...     for w in works:
    ...         w.wait()
    """
    pg = member_group(group, "isend")
    if pg is None:
        return None
    a = array_of(tensor, "isend", "tensor")
    tag = check_tag(tag, "isend")
    peer = peer_rank(pg, dst, group_dst, "isend", "dst")
    requests = [
        pg.comm.isend(_header(a, "isend"), peer, tag),
        pg.comm.isend(contiguous(a), peer, tag),
    ]

    def finish() -> None:
        for r in requests:
            r.wait()

    return Work(finish)


def irecv(tensor, src=None, group=None, tag: int = 0, group_src=None) -> Work | None:
    """Start receiving into `tensor` from rank `src` (None: any rank); the data is there
    once `wait()` returns."""
    pg = member_group(group, "irecv")
    if pg is None:
        return None
    a = array_of(tensor, "irecv", "tensor")
    tag = check_tag(tag, "irecv")
    comm = pg.comm
    raw_header = np.empty(_HEADER_LEN, np.int64)
    if src is None and group_src is None:
        # NOTE: the data can only be posted once the header names the sender.
        pending = comm.irecv(raw_header, None, tag)

        def finish() -> None:
            source = pending.wait()
            receive_data(pg, tensor, _parse(raw_header, pg.ranks[source]), tag)

        return Work(finish)
    peer = peer_rank(pg, src, group_src, "irecv", "src")
    buf = contiguous(a)
    header_request = comm.irecv(raw_header, peer, tag)
    data_request = comm.irecv(buf, peer, tag)

    def finish() -> None:
        header_request.wait()
        _check(_parse(raw_header, pg.ranks[peer]), a, "irecv")
        data_request.wait()
        write(tensor, buf)

    return Work(finish)


# -- the wire protocol (also used by flow.comm.recv) -------------------------------------------
def receive_header(pg: ProcessGroup, peer: int | None, tag: int) -> Header:
    """Receive the next header from group rank `peer` (None: any rank)."""
    raw = np.empty(_HEADER_LEN, np.int64)
    source = pg.comm.recv(raw, peer, tag)
    return _parse(raw, pg.ranks[source])


def receive_data(pg: ProcessGroup, tensor, header: Header, tag: int) -> None:
    """Receive the data announced by `header` into `tensor`, which must match it."""
    a = tensor._data
    _check(header, a, "recv")
    buf = contiguous(a)
    pg.comm.recv(buf, pg.ranks.index(header.source), tag)
    write(tensor, buf)


def _header(a: np.ndarray, call: str) -> np.ndarray:
    if a.ndim > _MAX_DIMS:
        raise ShapeError(f"{call}: tensors of more than {_MAX_DIMS} dims cannot be sent")
    h = np.zeros(_HEADER_LEN, np.int64)
    h[0], h[1] = _CODES[a.dtype], a.ndim
    h[2 : 2 + a.ndim] = a.shape
    return h


def _parse(raw: np.ndarray, source: int) -> Header:
    ndim = int(raw[1])
    return Header(source, dtypes.ALL[int(raw[0])], tuple(int(d) for d in raw[2 : 2 + ndim]))


def _check(header: Header, a: np.ndarray, call: str) -> None:
    if header.dtype.np != a.dtype:
        raise DTypeError(
            f"{call}: rank {header.source} sent a {header.dtype} tensor, but the receiving "
            f"tensor is {dtypes.from_numpy(a.dtype)}"
        )
    if int(np.prod(header.shape)) != a.size:
        raise ShapeError(
            f"{call}: rank {header.source} sent a tensor of shape {list(header.shape)}, but "
            f"the receiving tensor has shape {list(a.shape)} ({a.size} elements)"
        )
