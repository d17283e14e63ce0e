"""Boxing: converting a global tensor's layout, on the local shards, with its gradient.

Each conversion of one placement axis is the collective of its kind:

    S(i) -> B     all-gather            P -> B     all-reduce
    P -> S(i)     reduce-scatter        S(i) -> S(j)  all-to-all
    B -> S(i)     local slice           B -> P     rank 0 of the axis keeps, others zero
    S(i) -> P     local: zeros around the shard

A placement change (`move`) gathers on the old ranks, sends to the new ones and cuts there.
One axis's conversion is the `BOXING` op, dispatched like any other (so `nn.Graph` traces it
into a node that runs the collective), whose gradient is the *dual* conversion: gradients
of a global tensor are held on the ranks in the dual layout (`_layout.dual`: split stays
split, the gradients of a broadcast tensor are partial, a partial tensor's gradient is
broadcast), so S->B has P->S as backward, B->S has S->P, P->B has P->B, and so on. The
backward of a conversion is itself a conversion, so higher-order gradients work.

On an n-D placement conversions go axis by axis. Converting one axis alone is correct unless a
later axis splits a dim this one splits or gathers (nested splits do not commute); then the
tensor goes through broadcast on every axis instead.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, replace

import numpy as np

from ..autograd.function import Function
from ..framework.dispatch import dispatch
from ..framework.dtype import from_numpy as dtype_of
from ..framework.registry import Meta, OpDef
from ..framework.sbp import B, P, SbpParallel, Split
from ..framework.tensor import Tensor, make_tensor
from ..ops._rules import broadcast_only
from . import _comm
from ._layout import dual, dual_nd, shard_shape, split_range, split_sizes
from .placement import placement as Placement

_MOVE_TAG = 0x7F10  # the tag of placement-move messages on the world communicator


@dataclass(frozen=True, repr=False)
class AxisStep:
    """Convert placement axis `axis` from `src` to `dst`. `group`: the world ranks that
    convert together (this rank is `group[index]`); `lengths`: for each tensor dim that `src`
    or `dst` splits, its length before this axis splits it; `channel`: which of the group's
    communicators carries it ("" for eager code, "graph" for compiled plans, whose stream
    threads run collectives while eager code may run its own)."""

    group: tuple[int, ...]
    index: int
    src: SbpParallel
    dst: SbpParallel
    lengths: tuple[tuple[int, int], ...]  # (dim, length) pairs
    channel: str = ""

    def dual(self) -> AxisStep:
        return replace(self, src=dual(self.dst), dst=dual(self.src))

    def sizes(self, dim: int) -> list[int]:
        return split_sizes(dict(self.lengths)[dim], len(self.group))

    def out_shape(self, shape: tuple) -> tuple:
        """The shard shape after the step, from the shard shape before it."""
        out = list(shape)
        if len(self.group) > 1:
            if isinstance(self.src, Split):
                out[self.src.axis] = sum(self.sizes(self.src.axis))
            if isinstance(self.dst, Split):
                out[self.dst.axis] = self.sizes(self.dst.axis)[self.index]
        return tuple(out)

    def __repr__(self) -> str:
        channel = f" ({self.channel})" if self.channel else ""
        return f"{_sbp_str(self.src)}->{_sbp_str(self.dst)} over ranks {list(self.group)}{channel}"


def _sbp_str(s: SbpParallel) -> str:
    return f"S({s.axis})" if isinstance(s, Split) else "B" if s is B else "P"


def _boxing_meta(x: Meta, *, step: AxisStep) -> Meta:
    return Meta(step.out_shape(tuple(x.shape)), x.dtype)


def _boxing_grad(ctx, gy):
    return (dispatch(BOXING, (gy,), {"step": ctx.attrs["step"].dual()}),)


def _convert(a: np.ndarray, *, step: AxisStep) -> np.ndarray:
    src, dst = step.src, step.dst
    if len(step.group) == 1:  # a world of one: every layout holds the whole tensor
        return a.copy()
    if isinstance(src, Split) and dst is B:
        return _allgather(a, step, src.axis)
    if src is P and dst is B:
        out = np.empty(a.shape, a.dtype)  # C order, like the contiguous send buffer
        _comm.comm_for(step.group, step.channel).allreduce(
            np.asarray(a, order="C"), out, _comm.ReduceOp.SUM
        )
        return out
    if src is P and isinstance(dst, Split):
        return _reduce_scatter(a, step, dst.axis)
    if isinstance(src, Split) and isinstance(dst, Split):
        return _alltoall(a, step, src.axis, dst.axis)
    if src is B and isinstance(dst, Split):
        lo, hi = split_range(a.shape[dst.axis], len(step.group), step.index)
        return a[(slice(None),) * dst.axis + (slice(lo, hi),)].copy()
    if src is B and dst is P:
        return a.copy() if step.index == 0 else np.zeros_like(a)
    if isinstance(src, Split) and dst is P:
        sizes = step.sizes(src.axis)
        shape = list(a.shape)
        shape[src.axis] = sum(sizes)
        out = np.zeros(shape, a.dtype)
        lo = sum(sizes[: step.index])
        out[(slice(None),) * src.axis + (slice(lo, lo + a.shape[src.axis]),)] = a
        return out
    raise AssertionError(f"no conversion from {src} to {dst}")


# NOTE: not registered: only `box` dispatches it, on a rank's shard (one collective of one
# placement axis), never user code; its layouts are the step's, not SBP signatures.
BOXING = OpDef(
    "boxing",
    inputs=("input",),
    meta=_boxing_meta,
    sbp=broadcast_only,
    kernels={"cpu": _convert},
    grad=_boxing_grad,
    communicates=True,
)


def _front(a: np.ndarray, dim: int) -> np.ndarray:
    """`dim` moved first, C-contiguous: the blocks of a split along `dim` are then contiguous
    runs of elements, the layout MPI's variable-count collectives take."""
    return np.asarray(np.moveaxis(a, dim, 0), order="C")


def _back(a: np.ndarray, dim: int) -> np.ndarray:
    return np.asarray(np.moveaxis(a, 0, dim), order="C")


def _allgather(a: np.ndarray, step: AxisStep, dim: int) -> np.ndarray:
    front = _front(a, dim)
    inner = math.prod(front.shape[1:])
    sizes = step.sizes(dim)
    out = np.empty((sum(sizes), *front.shape[1:]), a.dtype)
    _comm.comm_for(step.group, step.channel).allgather(
        front.reshape(-1), out.reshape(-1), [n * inner for n in sizes]
    )
    return _back(out, dim)


def _reduce_scatter(a: np.ndarray, step: AxisStep, dim: int) -> np.ndarray:
    front = _front(a, dim)
    inner = math.prod(front.shape[1:])
    sizes = step.sizes(dim)
    out = np.empty((sizes[step.index], *front.shape[1:]), a.dtype)
    counts = [n * inner for n in sizes]
    _comm.comm_for(step.group, step.channel).reduce_scatter(
        front.reshape(-1), out.reshape(-1), _comm.ReduceOp.SUM, counts
    )
    return _back(out, dim)


def _alltoall(a: np.ndarray, step: AxisStep, src_dim: int, dst_dim: int) -> np.ndarray:
    """Rank q receives from every rank its shard of `src_dim` cut to q's range of `dst_dim`,
    and stacks them along `src_dim`."""
    n = len(step.group)
    src_sizes, dst_sizes = step.sizes(src_dim), step.sizes(dst_dim)
    front = np.moveaxis(a, src_dim, 0)
    cut_dim = dst_dim + (dst_dim < src_dim)  # where dst_dim is after moving src_dim first
    bounds = np.cumsum([0, *dst_sizes])
    blocks = [
        np.asarray(front[(slice(None),) * cut_dim + (slice(bounds[q], bounds[q + 1]),)], order="C")
        for q in range(n)
    ]
    sendbuf = np.concatenate([b.reshape(-1) for b in blocks])
    mine = list(front.shape)
    mine[cut_dim] = dst_sizes[step.index]
    inner = math.prod(mine[1:])  # elements per row of src_dim, once cut to this rank's range
    out = np.empty((sum(src_sizes), *mine[1:]), a.dtype)
    _comm.comm_for(step.group, step.channel).alltoall(
        sendbuf,
        out.reshape(-1),
        [b.size for b in blocks],
        [m * inner for m in src_sizes],
    )
    return _back(out, src_dim)


# -- n-D conversions ---------------------------------------------------------------------------
def _plan(src: tuple, dst: tuple) -> list[tuple[int, SbpParallel, SbpParallel, tuple]]:
    """(axis, from, to, layout before the step) for each step from `src` to `dst`."""
    state = list(src)
    steps = []
    for axis in reversed(range(len(src))):  # inner axes first: they split what outer ones left
        if src[axis] == dst[axis]:
            continue
        touched = {s.axis for s in (src[axis], dst[axis]) if isinstance(s, Split)}
        later = {s.axis for s in state[axis + 1 :] if isinstance(s, Split)}
        if touched & later:
            return _plan_through_broadcast(src, dst)
        steps.append((axis, src[axis], dst[axis], tuple(state)))
        state[axis] = dst[axis]
    return steps


def _plan_through_broadcast(src: tuple, dst: tuple) -> list:
    state = list(src)
    steps = []
    for axis in reversed(range(len(src))):
        if state[axis] is not B:
            steps.append((axis, state[axis], B, tuple(state)))
            state[axis] = B
    for axis in range(len(dst)):
        if dst[axis] is not B:
            steps.append((axis, B, dst[axis], tuple(state)))
            state[axis] = dst[axis]
    return steps


def box(x: Tensor, shape: tuple, where: Placement, src: tuple, dst: tuple) -> Tensor:
    """The local shard `x` of a tensor of logical `shape` laid out as `src` on `where`,
    converted to `dst` (differentiably). Ranks outside the placement get `x` back."""
    if src == dst:
        return x
    coord = where.coordinate(_comm.world_rank())
    if coord is None:
        return x
    hierarchy = tuple(where.hierarchy)
    for axis, a, b, state in _plan(src, dst):
        parent = shard_shape(shape, state, hierarchy, coord, upto=axis)
        lengths = tuple((s.axis, parent[s.axis]) for s in {a, b} if isinstance(s, Split))
        step = AxisStep(where.axis_group(axis, coord), coord[axis], a, b, lengths)
        x = dispatch(BOXING, (x,), {"step": step})
    return x


# -- placement changes -------------------------------------------------------------------------
@dataclass(frozen=True)
class Move:
    shape: tuple
    dtype: np.dtype
    src: Placement
    src_sbp: tuple
    dst: Placement
    dst_sbp: tuple

    def reverse(self) -> Move:
        return Move(
            self.shape, self.dtype, self.dst, dual_nd(self.dst_sbp), self.src, dual_nd(self.src_sbp)
        )


class _PlacementMove(Function):
    @staticmethod
    def forward(ctx, x: Tensor, move: Move) -> Tensor:
        ctx.move = move
        return _move(x, move)

    @staticmethod
    def backward(ctx, gy: Tensor):
        return _PlacementMove.apply(gy, ctx.move.reverse()), None


@dataclass(frozen=True, repr=False)
class Transfer:
    """A point-to-point message of a placement move: the whole tensor (`shape`, `dtype`) to
    or from world rank `peer`, on `channel` (as `AxisStep.channel`)."""

    peer: int
    shape: tuple
    dtype: np.dtype
    channel: str = ""
    group = None  # the world's communicator

    def __repr__(self) -> str:
        channel = f" ({self.channel})" if self.channel else ""
        return f"{list(self.shape)} with rank {self.peer}{channel}"


# NOTE: per stream thread, the sends a plan posted and has not waited for yet
_posted = threading.local()


def _send_kernel(a: np.ndarray, *, step: Transfer) -> tuple:
    """Eager code sends and waits; a plan (channel set) only posts the message, so that a
    stage can go on to its next micro-batch while the next stage receives, and waits for its
    sends at the end of the step (`WAIT_SENDS`)."""
    comm = _comm.comm_for(None, step.channel)
    buf = np.asarray(a, order="C")
    if not step.channel:
        comm.send(buf, step.peer, _MOVE_TAG)
        return ()
    if not hasattr(_posted, "requests"):
        _posted.requests = []
    _posted.requests.append(comm.isend(buf, step.peer, _MOVE_TAG))
    return ()


def _wait_sends_kernel() -> tuple:
    requests = getattr(_posted, "requests", [])
    while requests:
        requests.pop().wait()
    return ()


def _recv_kernel(*, step: Transfer) -> np.ndarray:
    out = np.empty(step.shape, step.dtype)
    _comm.comm_for(None, step.channel).recv(out, step.peer, _MOVE_TAG)
    return out


@dataclass(frozen=True, repr=False)
class Broadcast:
    """The first rank's array sent to every rank of `group` (this rank is `group[index]`),
    on `channel` (as `AxisStep.channel`): local values becoming a broadcast global tensor."""

    group: tuple[int, ...]
    index: int
    channel: str = ""

    def __repr__(self) -> str:
        channel = f" ({self.channel})" if self.channel else ""
        return f"from rank {self.group[0]} over ranks {list(self.group)}{channel}"


def _bcast_kernel(a: np.ndarray, *, step: Broadcast) -> np.ndarray:
    buf = np.asarray(a, order="C") if step.index == 0 else np.empty(a.shape, a.dtype)
    _comm.comm_for(step.group, step.channel).bcast(buf, 0)
    return buf


# NOTE: not registered, as BOXING: `to_global` of local tensors and the creators dispatch it;
# its gradient is theirs to give (see `to_global._LocalToGlobal`).
BCAST = OpDef(
    "bcast",
    inputs=("input",),
    meta=lambda x, *, step: Meta(tuple(x.shape), x.dtype),
    sbp=broadcast_only,
    kernels={"cpu": _bcast_kernel},
    communicates=True,
)


# NOTE: not registered, as BOXING: `_move` dispatches them, on whole tensors of one move.
SEND = OpDef(
    "send",
    inputs=("input",),
    meta=lambda x, *, step: (),
    sbp=broadcast_only,
    kernels={"cpu": _send_kernel},
    n_out=0,
    communicates=True,
)
# the end of a plan's step: its posted sends have arrived (their buffers may be freed)
WAIT_SENDS = OpDef(
    "wait_sends",
    inputs=(),
    meta=lambda: (),
    sbp=broadcast_only,
    kernels={"cpu": _wait_sends_kernel},
    n_out=0,
    communicates=True,
)
RECV = OpDef(
    "recv",
    inputs=(),
    meta=lambda *, step: Meta(step.shape, dtype_of(step.dtype)),
    sbp=broadcast_only,
    kernels={"cpu": _recv_kernel},
    communicates=True,
)


def _move(x: Tensor, move: Move) -> Tensor:
    """Gather on the old ranks, send from them to each new rank (round robin), cut there:
    ops all the way, so a graph traces the messages too."""
    me = _comm.world_rank()
    whole = None
    if move.src.coordinate(me) is not None:
        whole = box(x, move.shape, move.src, move.src_sbp, (B,) * move.src.ndim)
    senders = move.src.flat_ranks
    receivers = [r for r in move.dst.flat_ranks if r not in senders]
    for k, r in enumerate(receivers):
        sender = senders[k % len(senders)]
        if me == sender:
            dispatch(SEND, (whole,), {"step": Transfer(r, move.shape, move.dtype)})
        elif me == r:
            whole = dispatch(RECV, (), {"step": Transfer(sender, move.shape, move.dtype)})
    coord = move.dst.coordinate(me)
    if coord is None:
        return make_tensor(empty_shard(move.shape, move.dtype))
    return box(whole, move.shape, move.dst, (B,) * move.dst.ndim, move.dst_sbp)


def move(x: Tensor, move: Move) -> Tensor:
    """`x` (a shard on `move.src`) as a shard on `move.dst`, differentiably."""
    return _PlacementMove.apply(x, move)


def empty_shard(shape: tuple, dtype) -> np.ndarray:
    """What a rank outside a tensor's placement holds: nothing, with the tensor's rank."""
    return np.empty((0,) * max(len(shape), 1), dtype)
