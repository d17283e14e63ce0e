"""`GlobalTensor`: one logical tensor laid over the ranks of a placement.

Each rank's `GlobalTensor` holds its own shard as `_data`, and the placement, the SBP per
placement axis and the logical shape. Metadata (`shape`, `dtype`, `ndim`) is logical; values
(`numpy()`, `item()`, `repr`) gather the logical tensor, so those are collective: every rank
must call them, as every rank runs every op on global tensors.

Autograd runs on the shards: the dispatcher records each op on the local tensors, boxing
records conversions whose backward is the dual conversion (`boxing.py`), and a shard's
gradient is held in the dual layout. A leaf converts its gradient to its own layout on the
way in, so `w.grad` has `w`'s placement and SBP.
"""

from __future__ import annotations

import copy

import numpy as np

from ..autograd.function import Function
from ..framework.conventions import follows_pytorch
from ..framework.dispatch import inplace
from ..framework.errors import AutogradError, TideflowError
from ..framework.grad_mode import STATE, no_grad
from ..framework.printing import format_tensor
from ..framework.sbp import B, P
from ..framework.tensor import Size, Tensor, _new, make_tensor
from . import _comm
from ._layout import dual_nd
from .boxing import Move, box, move
from .placement import placement as Placement
from .sbp import public

__all__ = ["GlobalTensor", "local_view", "new_global", "wrap"]


class GlobalTensor(Tensor):
    """A tensor whose logical value is laid over the ranks of `placement` as `sbp` says.

    Make one with `tensor.to_global(placement, sbp)`; `to_local()` gives this rank's shard.

    >>> p = flow.placement("cpu", ranks=[0])
    >>> x = flow.ones(4, 2).to_global(p, flow.sbp.split(0))
    >>> x.shape, x.sbp
    (tideflow.Size([4, 2]), (tideflow.sbp.split(dim=0),))
    """

    # NOTE: no new slots: a Parameter becomes global in place (Module.to_global) by a class
    # change, which needs the same layout. The global metadata lives in the instance dict.
    __slots__ = ()

    _placement: Placement
    _nd_sbp: tuple
    _logical: tuple

    # -- metadata ---------------------------------------------------------------------------
    @property
    def is_global(self) -> bool:
        return True

    @property
    def is_local(self) -> bool:
        return False

    @property
    def placement(self) -> Placement:
        return self._placement

    @property
    def sbp(self) -> tuple:
        """One `flow.sbp` value per placement axis."""
        return tuple(public(s) for s in self._nd_sbp)

    @property
    def shape(self) -> Size:
        return Size(self._logical)

    def size(self, dim: int | None = None):
        if dim is None:
            return Size(self._logical)
        return self._logical[_check_dim(dim, len(self._logical), "size")]

    @property
    def ndim(self) -> int:
        return len(self._logical)

    def dim(self) -> int:
        return len(self._logical)

    ndimension = dim

    def numel(self) -> int:
        return Size(self._logical).numel()

    nelement = numel

    def __len__(self) -> int:
        if not self._logical:
            raise TypeError("len() of a 0-d tensor")
        return self._logical[0]

    # -- values (collective) ----------------------------------------------------------------
    def to_local(self) -> Tensor:
        """This rank's shard as a local tensor (empty on ranks outside the placement). Its
        gradient is taken as this rank's shard of the global gradient, in this tensor's SBP.

        >>> x = flow.ones(4).to_global(flow.placement("cpu", [0]), flow.sbp.split(0))
        >>> x.to_local().shape
        tideflow.Size([4])
        """
        if not (STATE.enabled and self.requires_grad):
            return _plain(self)
        return _ToLocal.apply(self, self.grad_fn is None)

    def numpy(self) -> np.ndarray:
        """The logical value on every rank (gathered: every rank must call it). As for local
        tensors, PyTorch's refusal of tensors that require grad holds under `mock_torch`."""
        if self.requires_grad and follows_pytorch():
            raise AutogradError(
                "numpy(): can't call numpy() on a tensor that requires grad; "
                "use tensor.detach().numpy()"
            )
        return _gather(self)

    def __array__(self, dtype=None, copy=None):
        a = _gather(self)
        return a if dtype is None else a.astype(dtype, copy=False)

    def item(self):
        if self.numel() != 1:
            raise TideflowError(
                f"item(): only one element tensors can be converted to Python scalars, "
                f"got shape {self._logical}"
            )
        return make_tensor(_gather(self)).item()

    def tolist(self):
        return make_tensor(_gather(self)).tolist()

    def __bool__(self) -> bool:
        if self.numel() != 1:
            raise TideflowError(
                f"bool(): a tensor with {self.numel()} elements is ambiguous; use .any() or .all()"
            )
        return bool(_gather(self).reshape(()))

    def __index__(self) -> int:
        return make_tensor(_gather(self)).__index__()

    def __repr__(self) -> str:
        text = format_tensor(_gather(self), requires_grad=self.requires_grad, grad_fn=self.grad_fn)
        return f"{text[:-1]}, placement={self._placement!r}, sbp={self.sbp!r})"

    # -- filling in place -------------------------------------------------------------------
    def _filled(self, value) -> GlobalTensor:
        """A tensor like this one (same layout) whose logical value is all `value`."""
        if isinstance(value, GlobalTensor):
            whole = value.to(self.dtype).expand(self._logical)
            if whole._placement != self._placement:
                raise TideflowError(
                    f"fill_: the value is on {whole._placement!r}, the tensor on "
                    f"{self._placement!r}"
                )
            where, layout = self._placement, self._nd_sbp
            shard = box(local_view(whole), self._logical, where, whole._nd_sbp, layout)
            return wrap(shard, where, layout, self._logical)
        if isinstance(value, Tensor):
            raise TideflowError(
                "fill_: the value of a global tensor must be a number or a global tensor"
            )
        coord = self._placement.coordinate(_comm.world_rank())
        part = coord is not None and any(
            s is P and c != 0 for s, c in zip(self._nd_sbp, coord, strict=True)
        )  # NOTE: a partial tensor's value is the sum: one rank per partial axis holds it
        shard = np.zeros_like(self._data) if part else np.full_like(self._data, value)
        return new_global(shard, self._placement, self._nd_sbp, self._logical)

    zero_ = inplace(lambda self: self._filled(0), "zero_")
    fill_ = inplace(lambda self, value: self._filled(value), "fill_")

    # -- autograd identity ------------------------------------------------------------------
    def detach(self) -> GlobalTensor:
        t = new_global(self._data, self._placement, self._nd_sbp, self._logical)
        t._version = self._version
        t._base = self._base if self._base is not None else self
        return t

    @property
    def data(self) -> GlobalTensor:
        return self.detach()

    @data.setter
    def data(self, value: Tensor) -> None:
        if not isinstance(value, GlobalTensor):
            raise TideflowError(
                "data: a global tensor's data must be a global tensor; convert it with "
                "to_global(placement, sbp) first"
            )
        self._data = value._data
        self._version = value._version
        set_global(self, value._placement, value._nd_sbp, value._logical)

    @property
    def grad(self):
        """The gradient, a global tensor on this placement: a leaf's in its own SBP, a
        retained non-leaf gradient in the dual one (`partial_sum` for `broadcast`)."""
        local = self.__dict__.get("_grad")
        if local is None or isinstance(local, GlobalTensor):
            return local
        layout = self._nd_sbp if self.grad_fn is None else dual_nd(self._nd_sbp)
        g = new_global(local._data, self._placement, layout, self._logical)
        g._version = local._version
        g.requires_grad = local.requires_grad
        g.grad_fn = local.grad_fn
        self.__dict__["_grad"] = g
        return g

    @grad.setter
    def grad(self, value) -> None:
        if isinstance(value, GlobalTensor):
            layout = self._nd_sbp if self.grad_fn is None else dual_nd(self._nd_sbp)
            if value._placement != self._placement or value._logical != self._logical:
                raise TideflowError(
                    f"grad: assigned gradient on {value._placement!r} with shape "
                    f"{list(value._logical)} does not match the tensor on {self._placement!r} "
                    f"with shape {list(self._logical)}"
                )
            if value._nd_sbp != layout:
                with no_grad():
                    local = _plain(value)
                    value = box(local, self._logical, self._placement, value._nd_sbp, layout)
        # NOTE: the autograd engine stores plain local gradients here (this rank's shard);
        # the getter wraps them.
        self.__dict__["_grad"] = value

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        """Backpropagate from this global tensor (every rank must call it). Without
        `gradient` the tensor must hold one element; a `gradient` must be global on the same
        placement."""
        Tensor.backward(*self._grad_root(gradient), retain_graph, create_graph, inputs)

    def _grad_root(self, gradient) -> tuple[Tensor, Tensor]:
        root, layout = _backward_root(self)
        if gradient is None:
            if self.numel() != 1:
                raise AutogradError(
                    f"backward: grad can be implicitly created only for scalar outputs, but the "
                    f"tensor has shape {list(self._logical)}; pass `gradient=` (a global tensor "
                    "of that shape)"
                )
            return root, make_tensor(np.ones(root._data.shape, root._data.dtype))
        return root, _gradient_shard(self, gradient, dual_nd(layout))

    def _grad_result(self, g: Tensor) -> GlobalTensor:
        # NOTE: as the `grad` property: a leaf's gradient arrives in its own layout, a
        # non-leaf's in the dual one.
        layout = self._nd_sbp if self.grad_fn is None else dual_nd(self._nd_sbp)
        return wrap(g, self._placement, layout, self._logical)

    def __deepcopy__(self, memo) -> GlobalTensor:
        if self.grad_fn is not None:
            raise AutogradError(
                "deepcopy: only global tensors created by the user (graph leaves) can be copied"
            )
        # NOTE: the placement and layout are immutable and shared: the framework's B and P
        # are compared by identity, so they must not be copied.
        t = new_global(self._data.copy(), self._placement, self._nd_sbp, self._logical)
        t.__class__ = type(self)
        memo[id(self)] = t
        t.requires_grad = self.requires_grad
        if self.grad is not None:
            t.grad = copy.deepcopy(self.grad, memo)
        return t


def _check_dim(dim: int, ndim: int, op: str) -> int:
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"{op}: dimension {dim} is out of range for a {ndim}-d tensor")
    return dim % n


def new_global(data: np.ndarray, where: Placement, nd: tuple, shape: tuple) -> GlobalTensor:
    """A GlobalTensor holding shard `data` (no autograd history)."""
    t = _new(GlobalTensor)
    t._data = data
    t._version = [0]
    set_global(t, where, nd, shape)
    return t


def wrap(local: Tensor, where: Placement, nd: tuple, shape: tuple) -> GlobalTensor:
    """A global tensor taking over `local`'s shard, version counter and autograd identity."""
    t = new_global(local._data, where, nd, shape)
    t._version = local._version
    if local.requires_grad:
        t.requires_grad = True
        t.grad_fn = local.grad_fn
        t._out_nr = local._out_nr
    t._base = local._base
    return t


def set_global(t: Tensor, where: Placement, nd: tuple, shape: tuple) -> None:
    d = t.__dict__
    d["_placement"] = where
    d["_nd_sbp"] = nd
    d["_logical"] = tuple(shape)


def _plain(t: Tensor) -> Tensor:
    """A plain tensor sharing `t`'s shard, version counter and autograd identity."""
    local = make_tensor(t._data, t.requires_grad)
    local._version = t._version
    local.grad_fn = t.grad_fn
    local._out_nr = t._out_nr
    local._base = t._base
    return local


class _ToLocal(Function):
    """A global tensor's shard; the shard's gradient is taken in the tensor's own layout and
    handed on in the layout its node expects (a leaf's own, else the dual)."""

    @staticmethod
    def forward(ctx, x: GlobalTensor, leaf: bool) -> Tensor:
        ctx.meta = (x._logical, x._placement, x._nd_sbp, leaf)
        out = make_tensor(x._data)
        out._version = x._version
        return out

    @staticmethod
    def backward(ctx, gy: Tensor):
        shape, where, nd, leaf = ctx.meta
        return (gy if leaf else box(gy, shape, where, nd, dual_nd(nd))), None


class _LeafEntry(Function):
    """Where a global leaf enters an op: its gradient arrives in the dual layout and goes
    on to the leaf in the leaf's own layout."""

    @staticmethod
    def forward(ctx, x: GlobalTensor) -> Tensor:
        ctx.meta = (x._logical, x._placement, x._nd_sbp)
        out = make_tensor(x._data)
        out._version = x._version
        return out

    @staticmethod
    def backward(ctx, gy: Tensor):
        shape, where, nd = ctx.meta
        return box(gy, shape, where, dual_nd(nd), nd)


def local_view(t: GlobalTensor) -> Tensor:
    """The shard of `t` as an operand of a local op, connected to `t`'s autograd graph."""
    if STATE.enabled and t.requires_grad and t.grad_fn is None:
        return _LeafEntry.apply(t)
    return _plain(t)


def _gather(t: GlobalTensor) -> np.ndarray:
    """The logical value on every rank of the world."""
    with no_grad():
        local = _plain(t)
        everyone = Placement.all(t._placement.type)
        if set(t._placement.flat_ranks) == set(everyone.flat_ranks):
            return box(local, t._logical, t._placement, t._nd_sbp, (B,) * t._placement.ndim)._data
        to_all = Move(t._logical, t._data.dtype, t._placement, t._nd_sbp, everyone, (B,))
        return move(local, to_all)._data


def _backward_root(t: GlobalTensor) -> tuple[Tensor, tuple]:
    """The shard to start backward from, and its layout. Broadcast axes become partial
    first: backward seeds each shard with the gradient in the dual layout, and the dual of
    partial is broadcast (every rank seeds the whole gradient) while the dual of broadcast
    would need the seed on one rank only."""
    layout = tuple(P if s is B else s for s in t._nd_sbp)
    root = local_view(t)
    if layout != t._nd_sbp:
        root = box(root, t._logical, t._placement, t._nd_sbp, layout)
    return root, layout


def _gradient_shard(t: GlobalTensor, gradient, layout: tuple) -> Tensor:
    if not isinstance(gradient, GlobalTensor):
        raise AutogradError(
            "backward: the gradient of a global tensor must be a global tensor on its "
            "placement; convert it with to_global(placement, sbp)"
        )
    if gradient._placement != t._placement or gradient._logical != t._logical:
        raise AutogradError(
            f"backward: gradient on {gradient._placement!r} with shape "
            f"{list(gradient._logical)} does not match the tensor on {t._placement!r} with "
            f"shape {list(t._logical)}"
        )
    # NOTE: differentiable (create_graph with a gradient that requires grad: double backward)
    return box(local_view(gradient), t._logical, t._placement, gradient._nd_sbp, layout)
