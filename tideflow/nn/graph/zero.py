"""ZeRO in a graph (`config.enable_zero(True, stage=...)`): each rank of a data-parallel
group keeps and updates 1/n of every parameter's optimizer state (stages 1 and 2), and with
stage 3 holds only 1/n of the parameter itself between steps.

A parameter broadcast over a placement axis of n > 1 ranks is data parallel over it. Its
state tensors are split over that axis (`opt.state[p]` holds global tensors with a split
SBP, `zero_layout`), and its update runs on shards: the rank's slice of the parameter and of
the gradient, its state shard. The gradient reaches the slice as a reduce-scatter: the
compiler fuses the gradient's all-reduce with the slicing after it
(`passes.boxing.fuse_boxing`), so stage 1 already gets stage 2's gradient traffic and
memory. Stages 1 and 2 then all-gather the updated slices back into the parameter, which
stays whole between steps.

Stage 3 lays the parameter itself out as its state (`shard_parameters`, at compilation, in
place: the optimizer and the module keep the same object, now a global tensor whose logical
value is unchanged and whose local tensor is the slice). Inside the step, build computes
with the parameter as it was laid out before (`gathered`): an all-gather at the start of
each micro-batch, which the compiler moves to right before the first node using it and
repeats before the backward instead of keeping the whole copy between them
(`passes.regather.regather_parameters`). The gather's gradient is the reduce-scatter into
the slice, so each micro-batch's gradient adds up on slices; the update runs on slices and
nothing is gathered after it.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

from ...compiler import UpdateCall, local_updates
from ...compiler.ir import Scope
from ...distributed.world import get_world
from ...framework.errors import TideflowError
from ...framework.grad_mode import no_grad
from ...framework.sbp import B, Split
from ...framework.tensor import Tensor, raw_data
from ...parallel.boxing import box
from ...parallel.global_tensor import GlobalTensor, local_view, wrap
from ...parallel.sbp import describe, public

# Stage 3's parameters by id -> (a weak reference to it, (placement, sharded layout, logical
# shape), the layout build computes with). A parameter sharded by one graph is known to the
# next graph compiled (another input signature, another graph over the model) as long as it
# is laid out so. NOTE: not a WeakKeyDictionary, whose lookups compare tensors with `==`.
_SHARDED: dict[int, tuple] = {}


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


# -- stage 3 ---------------------------------------------------------------------------------
def shard_parameters(optimizers, min_size: int) -> dict[Tensor, tuple]:
    """Stage 3, when a graph compiles: every optimized parameter `zero_layout` shards is
    laid out so in place (each rank keeps its slice: no communication), and so are its
    eager `.grad` and its optimizer state. Returns parameter -> the layout build computes
    with (the one it had before; remembered for the next compilation)."""
    compute: dict[Tensor, tuple] = {}
    for opt in optimizers:
        for group in opt.param_groups:
            for p in group["params"]:
                if p in compute or not isinstance(p, GlobalTensor):
                    continue
                layout = _compute_layout(p, min_size)
                if layout is not None:
                    compute[p] = layout
    for opt in optimizers:
        for p, state in opt.state.items():
            if p in compute:
                _shard_like(state, p, compute[p])
    return compute


def _compute_layout(p: GlobalTensor, min_size: int) -> tuple | None:
    known = _SHARDED.get(id(p))
    if known is not None and known[0]() is p and known[1] == (p._placement, p._nd_sbp, p._logical):
        return known[2]
    layout = zero_layout(p, min_size)
    if layout is None:
        return None
    compute = p._nd_sbp
    sbp = tuple(public(s) for s in layout)
    grad = p.grad
    with no_grad():
        p.data = p.detach().to_global(sbp=sbp)
        if grad is not None:
            p.grad = grad  # converted to the new layout
    key = id(p)
    ref = weakref.ref(p, lambda _: _SHARDED.pop(key, None))
    _SHARDED[key] = (ref, (p._placement, layout, p._logical), compute)
    return compute


def _shard_like(state: dict, p: GlobalTensor, compute: tuple) -> None:
    """State tensors laid out as the parameter was (made or loaded before it was sharded)
    take its sharded layout."""
    sbp = tuple(public(s) for s in p._nd_sbp)
    with no_grad():
        for key, t in state.items():
            if isinstance(t, GlobalTensor) and t._logical == p._logical and t._nd_sbp == compute:
                state[key] = t.to_global(sbp=sbp)


@contextmanager
def gathered(graph, tracer, compute: dict) -> Iterator[None]:
    """While tracing one call of build: each stage-3 parameter of the graph's modules, read
    as a module attribute (`self.weight`), is the parameter all-gathered into its compute
    layout (nodes marked as a parameter gather). The gather is differentiable: its backward
    reduce-scatters the gradient into the slice, where it accumulates in the parameter's
    `.grad`. `parameters()` still gives the parameters themselves (gradient clipping in
    build sees their sharded gradients)."""
    rank = get_world().rank
    entries = [
        (module, key, p)
        for root in graph._modules.values()
        for module in root.modules()
        for key, p in module._parameters.items()
        if p is not None and p in compute and p._placement.coordinate(rank) is not None
    ]
    if not entries:
        yield
        return
    wholes: dict[Tensor, Tensor] = {}
    scope = replace(tracer.current_scope or Scope(), gather=True)
    with tracer.scope(scope):
        for _, _, p in entries:
            if p not in wholes:
                layout = compute[p]
                local = box(local_view(p), p._logical, p._placement, p._nd_sbp, layout)
                wholes[p] = wrap(local, p._placement, layout, p._logical)
    made = {p: (whole._data, whole._data.value) for p, whole in wholes.items()}
    # NOTE: an instance attribute wins over Module.__getattr__, which reads `_parameters`
    shadowed = []
    for module, key, p in entries:
        if key not in module.__dict__:
            module.__dict__[key] = wholes[p]
            shadowed.append((module, key))
    try:
        yield
    finally:
        for module, key in shadowed:
            del module.__dict__[key]
    for p, (array, value) in made.items():
        if array.value is not value or array.stale:
            raise TideflowError(
                f"nn.Graph {graph.name}: build() writes in place to a parameter of shape "
                f"{list(p._logical)} that ZeRO stage 3 holds as {describe(p._nd_sbp)} on "
                f"{p._placement!r} between steps; build() computes with a gathered copy laid "
                f"out as {describe(compute[p])}, so the write would be lost. Change the "
                "parameter outside build(), or use ZeRO stage 1 or 2"
            )
