"""ZeRO in a graph (`config.enable_zero(True, stage=...)`): each rank of a data-parallel
group keeps and updates 1/n of every parameter's optimizer state.

A parameter broadcast over a placement axis of n > 1 ranks is data parallel over it. Its
state tensors are split over that axis (`opt.state[p]` holds global tensors with a split
SBP), and its update runs on shards: the rank's slice of the parameter and of the gradient,
its state shard, then an all-gather puts the updated slices together in the parameter. The
gradient reaches the slice as a reduce-scatter: the compiler fuses the gradient's all-reduce
with the slicing after it (`passes.boxing.fuse_boxing`), so stage 1 already gets stage 2's
gradient traffic and memory. Parameters stay whole between steps (stage 3, which would
shard them too, is not implemented).
"""

from __future__ import annotations

from ...compiler import UpdateCall, local_updates
from ...distributed.world import get_world
from ...framework.errors import TideflowError
from ...framework.grad_mode import no_grad
from ...framework.sbp import B, Split
from ...framework.tensor import Tensor, raw_data
from ...parallel.boxing import box
from ...parallel.global_tensor import GlobalTensor
from ...parallel.sbp import public


def zero_layout(p: Tensor, min_size: int) -> tuple | None:
    """`p`'s layout with each data-parallel axis (broadcast over more than one rank) split
    along the first dim long enough for it that no other axis splits (so the slice is
    local, and the gradient's all-reduce becomes one reduce-scatter; an axis without such a
    dim stays broadcast); None when `p` is local, has fewer than `min_size` elements, or
    nothing to split."""
    if not isinstance(p, GlobalTensor) or p.numel() < min_size:
        return None
    hierarchy = tuple(p.placement.hierarchy)
    layout = list(p._nd_sbp)
    for axis, (s, n) in enumerate(zip(layout, hierarchy, strict=True)):
        if s is B and n > 1:
            taken = {t.axis for t in layout if isinstance(t, Split)}
            free = (d for d, length in enumerate(p._logical) if length >= n and d not in taken)
            dim = next(free, None)
            if dim is not None:
                layout[axis] = Split(dim)
    layout = tuple(layout)
    return None if layout == p._nd_sbp else layout


def shard_state(optimizers, calls: list, min_size: int) -> tuple[dict, list]:
    """Split each optimizer state tensor laid out like its parameter as `zero_layout` says
    (a local slice on each rank). Returns parameter -> its sharded layout, and `calls` (the
    updates captured before) reading the sharded state."""
    layouts, sharded = {}, {}
    for opt in optimizers:
        for p, state in opt.state.items():
            layout = zero_layout(p, min_size)
            if layout is None:
                continue
            layouts[p] = layout
            sbp = tuple(public(s) for s in layout)
            with no_grad():
                for key, t in state.items():
                    like_p = isinstance(t, GlobalTensor) and t._logical == p._logical
                    if like_p and t._nd_sbp == p._nd_sbp:
                        state[key] = sharded[id(t)] = t.to_global(sbp=sbp)
    calls = [UpdateCall(c.op, tuple(sharded.get(id(a), a) for a in c.args), c.attrs) for c in calls]
    return layouts, calls


def sharded_updates(calls, layouts: dict) -> tuple[list, list]:
    """While tracing: the updates this rank runs (those of ZeRO parameters on shards) and,
    for each of those, (parameter, its updated slice, the slice's layout) to gather back."""
    out, gathers = [], []
    for call in calls:
        p = call.args[0]
        layout = layouts.get(p) if isinstance(p, GlobalTensor) else None
        if layout is None:
            out += local_updates([call])
        elif p.placement.coordinate(get_world().rank) is not None:
            args = tuple(_shard(a, p, layout) for a in call.args)
            out.append(UpdateCall(call.op, args, call.attrs))
            gathers.append((p, args[0], layout))
    return out, gathers


def gather_into(tracer, gathers) -> None:
    """While tracing, after the updates: each parameter is the all-gather of its slices."""
    with no_grad():
        for p, shard, layout in gathers:
            whole = box(shard, p._logical, p.placement, layout, p._nd_sbp)
            tracer.write(raw_data(p), raw_data(whole))


def _shard(a, p: GlobalTensor, layout: tuple):
    """An update's operand as this rank runs it: tensors laid out like the parameter are
    sliced to `layout` (a traced boxing; the parameter's slice is a new value the update
    writes), state tensors already in `layout` are their shards, the rest as they are."""
    if not isinstance(a, GlobalTensor):
        return a
    if a._logical != p._logical or a.placement != p.placement:
        raise TideflowError(
            f"nn.Graph: ZeRO: an update of the parameter of shape {list(p._logical)} reads a "
            f"tensor of shape {list(a._logical)} on {a.placement!r}"
        )
    with no_grad():
        local = a.to_local()
        if a._nd_sbp == layout:
            return local
        return box(local, p._logical, p.placement, a._nd_sbp, layout)
