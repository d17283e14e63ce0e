"""`Tensor.to_global` and `to_local`: between a rank's local tensor and a global tensor.

Local -> global (OneFlow's rules): under `split(d)` each rank's local tensor is its shard (two
ranks holding `[0, 1]` make `[0, 1, 0, 1]`); under `broadcast` the first rank's tensor is sent
to the others; under `partial_sum` each rank's tensor is a part of the sum. The ranks
exchange their shapes first, so shards that do not fit together are an error on every rank.
Global -> global is boxing (same placement) or a placement move.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from ..autograd.function import Function
from ..framework import dtype as dtypes
from ..framework.dispatch import dispatch
from ..framework.errors import TideflowError
from ..framework.grad_mode import STATE, no_grad
from ..framework.sbp import B, P, Split
from ..framework.tensor import Tensor, make_tensor
from . import _comm
from ._auto_session import active as auto_session
from ._layout import dual_nd, shard_shape
from .boxing import BCAST, Broadcast, Move, box, empty_shard, move
from .dispatch import install
from .global_tensor import GlobalTensor, local_view, set_global, wrap
from .placement import placement as Placement
from .sbp import describe, nd_sbp, of_tensor

__all__ = ["global_class", "module_to_global", "to_global", "to_local"]

_MAX_DIMS = 64  # NumPy's limit on dims: the width of a row of the shape exchange


def to_global(self: Tensor, placement=None, sbp=None, *, grad_sbp=None, copy: bool = False):
    """This tensor as a global tensor on `placement` with `sbp` (one per placement axis).

    A local tensor needs both: under `split(d)` it is this rank's shard, under `broadcast`
    the first rank's value goes to all, under `partial_sum` it is this rank's part of the
    sum. `grad_sbp` is the layout of the gradient each rank's local tensor gets back
    (default: its `sbp`, with `broadcast` for `partial_sum`). A global tensor keeps what is
    not given and is converted (boxing, or a move to other ranks). Every rank calls it.

    >>> p = flow.placement("cpu", ranks=[0])
    >>> x = flow.arange(6).reshape(3, 2).to_global(p, flow.sbp.split(0))
    >>> x.to_global(sbp=flow.sbp.broadcast).sbp
    (tideflow.sbp.broadcast,)
    """
    if isinstance(self, GlobalTensor):
        return _global_to_global(self, placement, sbp, grad_sbp, copy)
    return _local_to_global(self, placement, sbp, grad_sbp, copy)


def to_local(self: Tensor) -> Tensor:
    """A local tensor has no shard to give: calling `to_local` on one is a mistake."""
    raise TideflowError(
        "to_local(): the tensor is already local; to_local() gives a global tensor's shard"
    )


def _check_placement(where, what: str) -> Placement:
    if not isinstance(where, Placement):
        raise TypeError(f"{what}: placement must be a flow.placement, got {where!r}")
    where.check_device(what)
    return where


# -- local -> global ---------------------------------------------------------------------------
@dataclass(frozen=True)
class _Spec:
    where: Placement
    nd: tuple
    grad_nd: tuple
    shape: tuple  # logical
    dtype: np.dtype  # of the placement's ranks' tensors (a rank outside may hold anything)
    copy: bool


def _local_to_global(x: Tensor, placement, sbp, grad_sbp, copy: bool) -> GlobalTensor:
    if placement is None or sbp is None:
        raise TideflowError(
            "to_global: a local tensor needs both placement and sbp, e.g. "
            "x.to_global(flow.placement('cpu', ranks=[0, 1]), flow.sbp.split(0))"
        )
    where = _check_placement(placement, "to_global")
    # NOTE: only the placement's ranks' tensors count, so the sbp is checked against their
    # dims (after the exchange): every rank then raises the same error, or none does.
    shapes, dtype = _exchange_shapes(x, where)
    ndim = len(shapes[where.flat_ranks[0]])
    nd = nd_sbp(sbp, ndim, where.ndim, "to_global")
    if grad_sbp is None:
        grad_nd = tuple(B if s is P else s for s in nd)
    else:
        grad_nd = nd_sbp(grad_sbp, ndim, where.ndim, "to_global (grad_sbp)")
    spec = _Spec(where, nd, grad_nd, _fit_shards(shapes, where, nd), dtype.np, copy)
    install()
    if STATE.enabled and x.requires_grad:
        local = _LocalToGlobal.apply(x, spec)
    else:
        local = _local_shard(x, spec)
    return wrap(local, where, nd, spec.shape)


class _LocalToGlobal(Function):
    @staticmethod
    def forward(ctx, x: Tensor, spec: _Spec) -> Tensor:
        ctx.spec = spec
        ctx.input = (x._data.shape, x._data.dtype)
        return _local_shard(x, spec)

    @staticmethod
    def backward(ctx, gy: Tensor):
        spec = ctx.spec
        if spec.where.coordinate(_comm.world_rank()) is None:  # the input was not used
            return make_tensor(np.zeros(*ctx.input)), None
        return box(gy, spec.shape, spec.where, dual_nd(spec.nd), spec.grad_nd), None


def _local_shard(x: Tensor, spec: _Spec) -> Tensor:
    """This rank's shard: its own data (shared unless `copy`), or the first rank's for
    broadcast axes."""
    coord = spec.where.coordinate(_comm.world_rank())
    if coord is None:
        return make_tensor(empty_shard(spec.shape, spec.dtype))
    data = make_tensor(x._data.copy()) if spec.copy else x
    out = broadcast_axes(data, spec.where, spec.nd, coord)
    if out._data is x._data:
        out = make_tensor(x._data)
        out._version = x._version
    return out


def broadcast_axes(t: Tensor, where: Placement, nd: tuple, coord: tuple) -> Tensor:
    """`t` on the first rank of each broadcast axis, sent to the other ranks of the axis
    (a dispatched collective: a graph traces it)."""
    for axis, s in enumerate(nd):
        if s is B and where.hierarchy[axis] > 1:
            step = Broadcast(where.axis_group(axis, coord), coord[axis])
            t = dispatch(BCAST, (t,), {"step": step})
    return t


def _exchange_shapes(x: Tensor, where: Placement) -> tuple[dict, dtypes.DType]:
    """The shapes of the placement's ranks' local tensors, and their common dtype. They are
    exchanged over the world: every rank gets the same table, so a mismatch is the same
    error everywhere."""
    row = np.full(2 + _MAX_DIMS, -1, np.int64)
    if where.coordinate(_comm.world_rank()) is not None:
        row[0] = x.ndim
        row[1] = dtypes.ALL.index(x.dtype)
        row[2 : 2 + x.ndim] = x._data.shape
    world = _comm.comm_for(None)
    table = np.empty((world.size, row.size), np.int64)
    world.allgather(row, table.reshape(-1))
    shapes = {r: tuple(table[r, 2 : 2 + table[r, 0]].tolist()) for r in where.flat_ranks}
    kinds = {r: dtypes.ALL[table[r, 1]] for r in where.flat_ranks}
    if len({len(s) for s in shapes.values()}) > 1 or len(set(kinds.values())) > 1:
        found = ", ".join(f"rank {r}: {list(shapes[r])} {kinds[r]}" for r in where.flat_ranks)
        raise TideflowError(
            f"to_global: the ranks' local tensors differ in number of dims or dtype ({found})"
        )
    return shapes, kinds[where.flat_ranks[0]]


def _fit_shards(local: dict, where: Placement, nd: tuple) -> tuple:
    """The logical shape whose shards are the ranks' `local` shapes, or an error naming the
    ranks whose shapes do not fit."""
    hierarchy = tuple(where.hierarchy)
    grid = where.ranks
    first = local[where.flat_ranks[0]]
    shape = []
    for dim in range(len(first)):
        axes = [k for k, s in enumerate(nd) if isinstance(s, Split) and s.axis == dim]
        ranges = [range(n) if k in axes else range(1) for k, n in enumerate(hierarchy)]
        shape.append(sum(local[int(grid[c])][dim] for c in itertools.product(*ranges)))
    shape = tuple(shape)
    wrong = []
    for c in itertools.product(*(range(n) for n in hierarchy)):
        r = int(grid[c])
        expected = shard_shape(shape, nd, hierarchy, c)
        if local[r] != expected:
            wrong.append(f"rank {r} holds {list(local[r])} where it should hold {list(expected)}")
    if wrong:
        raise TideflowError(
            f"to_global: the local tensors do not make one tensor laid out as {describe(nd)} "
            f"on ranks {where.ranks.tolist()} (logical shape {list(shape)}): "
            f"{'; '.join(wrong)}. A split gives the first (size % ranks) ranks one row more; "
            "broadcast and partial_sum need the same shape on every rank"
        )
    return shape


# -- global -> global --------------------------------------------------------------------------
def _global_to_global(x: GlobalTensor, placement, sbp, grad_sbp, copy: bool) -> GlobalTensor:
    if grad_sbp is not None:
        raise TideflowError(
            "to_global: grad_sbp applies to a local tensor becoming global; a global tensor's "
            "gradient follows its layout"
        )
    where = x._placement if placement is None else _check_placement(placement, "to_global")
    if sbp is None:
        if where.ndim != x._placement.ndim:
            raise TideflowError(
                f"to_global: moving a tensor from a {x._placement.ndim}-d to a {where.ndim}-d "
                "placement needs its new sbp"
            )
        nd = x._nd_sbp
    else:
        nd = nd_sbp(sbp, x.ndim, where.ndim, "to_global")
    if where == x._placement and nd == x._nd_sbp:
        out = x.clone() if copy else x
    else:
        local = local_view(x)
        if where == x._placement:
            local = box(local, x._logical, where, x._nd_sbp, nd)
        else:
            local = move(local, Move(x._logical, x._data.dtype, x._placement, x._nd_sbp, where, nd))
        out = wrap(local, where, nd, x._logical)
    session = auto_session()
    if session is not None and where == x._placement:  # auto-parallel keeps the user's layout
        session.converted(x, out)
    return out


# -- modules -----------------------------------------------------------------------------------
_GLOBAL_CLASSES: dict[type, type] = {Tensor: GlobalTensor}


def global_class(cls: type) -> type:
    """The global version of a tensor class (a Parameter stays a Parameter)."""
    if issubclass(cls, GlobalTensor):
        return cls
    if cls not in _GLOBAL_CLASSES:
        # NOTE: the tensor's own class first: its methods (Parameter's repr) wrap the global
        # ones through super().
        _GLOBAL_CLASSES[cls] = type(
            f"Global{cls.__name__}", (cls, GlobalTensor), {"__slots__": (), "__module__": __name__}
        )
    return _GLOBAL_CLASSES[cls]


def module_to_global(module, placement=None, sbp=None):
    """Make every parameter and buffer of `module` global, in place: parameters keep their
    identity (optimizers holding them stay valid), gradients are converted too. `sbp` may
    be a function of the tensor (e.g. split 2-d weights, broadcast the rest).

    >>> lin = flow.nn.Linear(4, 2)
    >>> module_to_global(lin, flow.placement("cpu", [0]), flow.sbp.broadcast).weight.is_global
    True
    """
    for m in module.modules():
        for p in m._parameters.values():
            if p is not None:
                _parameter_to_global(p, placement, of_tensor(sbp, p))
        for name, b in m._buffers.items():
            if b is not None:
                with no_grad():
                    m._buffers[name] = to_global(b, placement, of_tensor(sbp, b))
    return module


def _parameter_to_global(p: Tensor, placement, sbp) -> None:
    grad = p.grad
    with no_grad():
        new = to_global(p, placement, sbp)
        grad = None if grad is None else to_global(grad, placement, sbp)
    if not isinstance(p, GlobalTensor):
        p.__dict__.pop("grad", None)  # the global class keeps its gradient behind a property
        p.__class__ = global_class(type(p))
    p._data = new._data
    p._version = new._version
    set_global(p, new._placement, new._nd_sbp, new._logical)
    p.grad = grad


Tensor.to_global = to_global
Tensor.to_local = to_local
