"""The global dispatch mode: ops whose operands include global tensors.

For such a call the handler
1. checks that every tensor operand is global and on one placement;
2. infers the logical outputs with the op's meta rule (the user's shape and dtype errors);
3. picks, per placement axis, the signature from `op.sbp(...)` that needs the least boxing
   (bytes moved between ranks; local slicing costs little, keeping a layout nothing);
4. boxes the operands into it, runs the op on this rank's shards through the normal local
   path (so autograd records it, with the boxing before it) with the op's `local_attrs`;
5. wraps the outputs as global tensors.

The mode becomes the dispatcher's base (below every thread's dispatch modes, see
`framework/modes.py`) when the first global tensor is made; calls without a global operand
go on to `run_local`, so local programs never see it.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from ..autograd.function import Function
from ..framework.dispatch import infer, run_local
from ..framework.errors import TideflowError
from ..framework.grad_mode import STATE
from ..framework.modes import base, set_base
from ..framework.registry import Meta, OpDef
from ..framework.sbp import B, P, Split
from ..framework.tensor import Tensor, make_tensor
from . import _comm
from ._auto_session import active as auto_session
from ._layout import shard_shape, split_range
from .boxing import box, empty_shard
from .global_tensor import GlobalTensor, local_view, wrap
from .placement import placement as Placement
from .sbp import describe

__all__ = ["global_mode", "install"]


def install() -> None:
    """Route calls with global operands through the global mode (cheap when it already is)."""
    if base() is run_local:
        set_base(global_mode(run_local))


def global_mode(below):
    """`handler(op, args, attrs)`: calls with global operands go through the global mode,
    which runs each rank's part with `below`, and the others straight to `below`. Tracing
    puts it in front of its own handler, so that a graph records what each rank computes on
    its shards, the boxing collectives included, exactly as eager code runs it."""

    def handler(op: OpDef, args: tuple, attrs: dict):
        for a in args:
            if isinstance(a, GlobalTensor):
                return _global_call(op, args, attrs, below)
        return below(op, args, attrs)

    return handler


@dataclass(frozen=True)
class _Choice:
    ins: tuple  # per operand: an n-D sbp (tensors) or None
    outs: tuple  # per output: an n-D sbp
    attrs: dict


def _global_call(op: OpDef, args: tuple, attrs: dict, run):
    where = _placement_of(op, args)
    metas = [Meta(a._logical, a.dtype) if isinstance(a, GlobalTensor) else a for a in args]
    out_metas = infer(op, metas, attrs)
    out_metas = (out_metas,) if isinstance(out_metas, Meta) else tuple(out_metas)
    choice = _choose(op, args, metas, attrs, out_metas, where)
    if where.coordinate(_comm.world_rank()) is None:
        if op.n_out == 0:
            return None
        outs = _absent(op, args, out_metas)
    else:
        operands = tuple(
            box(local_view(a), a._logical, where, a._nd_sbp, choice.ins[i])
            if isinstance(a, GlobalTensor)
            else a
            for i, a in enumerate(args)
        )
        out = run(op, operands, choice.attrs)
        if op.n_out == 0:
            return None
        outs = (out,) if isinstance(out, Tensor) else tuple(out)
    shapes = _logical_shapes(op, out_metas, outs, choice, where)
    result = tuple(
        wrap(o, where, nd, shape) for o, nd, shape in zip(outs, choice.outs, shapes, strict=True)
    )
    for t, nd in zip(result, choice.outs, strict=True):
        note = getattr(t._data, "note_layout", None)  # a graph being traced records it
        if note is not None:
            note(where, nd)
    session = auto_session()
    if session is not None:
        session.produced(result)
    return result[0] if op.n_out == 1 else result


def _placement_of(op: OpDef, args: tuple) -> Placement:
    where = first = None
    for i, a in enumerate(args):
        if isinstance(a, GlobalTensor):
            if where is None:
                where, first = a._placement, i
            elif a._placement != where:
                raise TideflowError(
                    f"{op.name}: operands are on different placements: {where!r} (operand "
                    f"{first}) and {a._placement!r} (operand {i}); move one with "
                    "to_global(placement=...)"
                )
    for i, a in enumerate(args):
        if isinstance(a, Tensor) and not isinstance(a, GlobalTensor):
            raise TideflowError(
                f"{op.name}: operand {i} is a local tensor (shape {list(a.shape)}) and others "
                "are global; make it global with to_global(placement, sbp) first"
            )
    return where


# -- choosing a signature ----------------------------------------------------------------------
def _choose(
    op: OpDef, args: tuple, metas: list, attrs: dict, out_metas: tuple, where: Placement
) -> _Choice:
    sigs = op.sbp(*metas, **attrs)
    tensors = [(i, a) for i, a in enumerate(args) if isinstance(a, GlobalTensor)]
    hierarchy = tuple(where.hierarchy)
    per_axis = []
    for axis, n in enumerate(hierarchy):
        options = []
        for order, sig in enumerate(sigs):
            if not _fits(op, sig, args, axis) or not _shards_line_up(
                op, sig, metas, attrs, out_metas, n
            ):
                continue
            cost = sum(
                _cost(a._nd_sbp[axis], sig.ins[i], a._data.itemsize * a.numel(), n)
                for i, a in tensors
            )
            options.append((cost, order, sig))
        if not options:
            raise _no_signature(op, args, sigs)
        per_axis.append(options)
    keep = tensors[0][1]._nd_sbp  # NOTE: ties go to outputs laid out like the first operand
    session = auto_session()
    best = None
    every = []  # an auto-parallel session chooses among all of them
    for combo in itertools.product(*per_axis):
        outs = tuple(zip(*(sig.outs for _, _, sig in combo), strict=True))
        local = _local_attrs(op, attrs, [sig for _, _, sig in combo], metas)
        if local is None:
            continue
        key = (sum(c for c, _, _ in combo), not outs or outs[0] != keep, [o for _, o, _ in combo])
        if session is not None or best is None or key < best[0]:
            ins = tuple(
                tuple(sig.ins[i] for _, _, sig in combo) if isinstance(a, GlobalTensor) else None
                for i, a in enumerate(args)
            )
            if not _nested_shards_line_up(op, ins, outs, metas, local, out_metas, hierarchy):
                continue
            every.append(_Choice(ins, outs, local))
            if best is None or key < best[0]:
                best = (key, every[-1])
    if best is None:
        raise _no_signature(op, args, sigs)
    if session is not None:
        return session.choose(op, args, metas, out_metas, where, every, best[1])
    return best[1]


def _fits(op: OpDef, sig, args: tuple, axis: int) -> bool:
    """Whether `sig` can lay out these operands on placement axis `axis`: a layout for each
    tensor, and operands the op writes in place already in it (boxing would copy them)."""
    if len(sig.ins) != len(args):
        return False
    for i, (a, s) in enumerate(zip(args, sig.ins, strict=True)):
        if isinstance(a, GlobalTensor) and (
            s is None or (i in op.mutates and a._nd_sbp[axis] != s)
        ):
            return False
    return True


def _shards_line_up(op: OpDef, sig, metas: list, attrs: dict, out_metas: tuple, n: int) -> bool:
    """Whether each rank's input shards give its output shards under `sig`: a split gives the
    first (length % n) ranks one row more, and an op that changes a split dim's length
    (reshape (6, 4) -> (24,) over 4 ranks: shards of 2, 2, 1, 1 rows become 8, 8, 4, 4
    elements, not 6 each) breaks that rule unless the lengths divide evenly."""
    lengths = {m.shape[s.axis] for m, s in zip(metas, sig.ins, strict=True) if isinstance(s, Split)}
    lengths |= {
        m.shape[s.axis] for m, s in zip(out_metas, sig.outs, strict=False) if isinstance(s, Split)
    }
    if len(lengths) <= 1 or all(length % n == 0 for length in lengths):
        return True
    local_attrs = attrs if op.local_attrs is None else op.local_attrs(attrs, sig, *metas)
    for k in range(n):
        shards = [_shard_meta(m, s, n, k) for m, s in zip(metas, sig.ins, strict=True)]
        try:
            got = infer(op, shards, local_attrs)
        except TideflowError:
            return False
        got = (got,) if isinstance(got, Meta) else tuple(got)
        for g, m, s in zip(got, out_metas, sig.outs, strict=False):
            if tuple(g.shape) != tuple(_shard_meta(m, s, n, k).shape):
                return False
    return True


def _nested_shards_line_up(op, ins, outs, metas, local_attrs, out_metas, hierarchy) -> bool:
    """Where two placement axes split one dim, the second splits the first's shards, whose
    lengths `_shards_line_up` (one axis at a time, on logical lengths) does not see: (2, 8)
    split twice along dim 0 over a 2x2 grid holds rows 1, 0, 1, 0 but reshaped to (16,) it
    would need 4 elements on every rank. Check every rank's shards as the kernel gets them."""
    layouts = [nd for nd in (*ins, *outs) if nd is not None]
    if not any(_nests(nd) for nd in layouts):
        return True
    if any(-1 in m.shape for m in out_metas):
        return True
    for coord in itertools.product(*(range(n) for n in hierarchy)):
        shards = [
            Meta(shard_shape(m.shape, nd, hierarchy, coord), m.dtype) if nd is not None else m
            for m, nd in zip(metas, ins, strict=True)
        ]
        try:
            got = infer(op, shards, local_attrs)
        except TideflowError:
            return False
        got = (got,) if isinstance(got, Meta) else tuple(got)
        for g, m, nd in zip(got, out_metas, outs, strict=False):
            if tuple(g.shape) != shard_shape(m.shape, nd, hierarchy, coord):
                return False
    return True


def _nests(nd: tuple) -> bool:
    dims = [s.axis for s in nd if isinstance(s, Split)]
    return len(dims) != len(set(dims))


def _shard_meta(m, s, n: int, k: int):
    if not isinstance(s, Split) or m.shape[s.axis] == -1:
        return m
    lo, hi = split_range(m.shape[s.axis], n, k)
    return Meta((*m.shape[: s.axis], hi - lo, *m.shape[s.axis + 1 :]), m.dtype)


def _cost(src, dst, nbytes: int, n: int) -> float:
    """Bytes a rank sends to convert `src` to `dst` over `n` ranks; local copies count a
    hundredth of their size, so keeping a layout always wins a tie."""
    if src == dst:
        return 0.0
    copy = 0.01 * nbytes / n
    if n == 1 or (src is B and dst is not B) or (isinstance(src, Split) and dst is P):
        return copy
    share = nbytes * (n - 1) / n
    if dst is B:
        return 2 * share if src is P else share
    return share / n if isinstance(src, Split) else share  # S -> S all-to-all, P -> S


def _local_attrs(op: OpDef, attrs: dict, sigs: list, metas: list) -> dict | None:
    """The attributes every shard runs with, or None if the placement axes disagree (two
    axes splitting different dims of an op whose attributes name logical sizes)."""
    if op.local_attrs is None:
        return attrs
    changed = []
    for sig in sigs:
        local = op.local_attrs(attrs, sig, *metas)
        # NOTE: `attrs` itself back means no constraint; an equal copy is one: reshape(64, -1)
        # of a (S(0), S(2)) tensor needs (64, -1) over one axis and (-1, 82) over the other.
        if local is not attrs and local not in changed:
            changed.append(local)
    if len(changed) > 1:
        return None
    return changed[0] if changed else attrs


def _no_signature(op: OpDef, args: tuple, sigs: list) -> TideflowError:
    layouts = ", ".join(
        describe(a._nd_sbp) if isinstance(a, GlobalTensor) else repr(a) for a in args
    )
    return TideflowError(
        f"{op.name}: no layout the op accepts fits these operands ({layouts}); it accepts {sigs}"
    )


# -- outputs -----------------------------------------------------------------------------------
def _logical_shapes(op, out_metas: tuple, outs: tuple, choice: _Choice, where: Placement):
    """Output shapes from the meta rule; a size only the data tells (-1: nonzero, unique) is
    read off the shards of a broadcast output and sent to ranks outside the placement."""
    if all(-1 not in m.shape for m in out_metas):
        return [m.shape for m in out_metas]
    if any(s is not B for nd in choice.outs for s in nd):
        raise TideflowError(f"{op.name}: a data-dependent output shape needs broadcast outputs")
    member = where.coordinate(_comm.world_rank()) is not None
    shapes = []
    for meta, o in zip(out_metas, outs, strict=True):
        known = np.array(o._data.shape if member else meta.shape, dtype=np.int64)
        _comm.comm_for(None).bcast(known, where.flat_ranks[0])
        shapes.append(tuple(known.tolist()))
    return shapes


class _Absent(Function):
    """A rank outside the placement computes nothing, but stays in the autograd graph so
    that backward reaches the conversions it takes part in (placement moves)."""

    @staticmethod
    def forward(ctx, *operands, out_metas):
        ctx.shapes = [
            (o._data.shape, o._data.dtype) if isinstance(o, Tensor) else None for o in operands
        ]
        return tuple(make_tensor(empty_shard(m.shape, m.dtype.np)) for m in out_metas)

    @staticmethod
    def backward(ctx, *gys):
        return tuple(None if s is None else make_tensor(np.zeros(*s)) for s in ctx.shapes)


def _absent(op: OpDef, args: tuple, out_metas: tuple) -> tuple:
    operands = tuple(local_view(a) if isinstance(a, GlobalTensor) else a for a in args)
    if STATE.enabled and op.differentiable:
        return _Absent.apply(*operands, out_metas=out_metas)
    return tuple(make_tensor(empty_shard(m.shape, m.dtype.np)) for m in out_metas)
