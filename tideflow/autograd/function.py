"""`flow.autograd.Function`: user-defined forward/backward pairs, PyTorch's calling convention."""

from __future__ import annotations

import numpy as np

from ..framework.errors import AutogradError
from ..framework.grad_mode import STATE, no_grad
from ..framework.node import Node, carries_grad
from ..framework.tensor import Tensor, accumulator, make_tensor


class FunctionCtx:
    """The `ctx` of a custom Function: save tensors, mark outputs, read `needs_input_grad`."""

    def __init__(self) -> None:
        self._saved: tuple = ()
        self._versions: tuple = ()
        self._non_differentiable: set[int] = set()
        self._dirty: set[int] = set()
        self.needs_input_grad: tuple = ()
        self.materialize_grads = True

    def save_for_backward(self, *tensors) -> None:
        self._saved = tensors
        self._versions = tuple(t._version[0] if isinstance(t, Tensor) else None for t in tensors)

    @property
    def saved_tensors(self) -> tuple:
        for i, (t, v) in enumerate(zip(self._saved, self._versions, strict=True)):
            if isinstance(t, Tensor) and t._version[0] != v:
                raise AutogradError(
                    f"custom Function: saved tensor {i} (shape {list(t.shape)}) was modified by "
                    f"an in-place operation (version {v} -> {t._version[0]})"
                )
        return self._saved

    def mark_non_differentiable(self, *tensors) -> None:
        self._non_differentiable.update(id(t) for t in tensors)

    def mark_dirty(self, *tensors) -> None:
        self._dirty.update(id(t) for t in tensors)

    def set_materialize_grads(self, value: bool) -> None:
        self.materialize_grads = value


class FunctionNode(Node):
    __slots__ = ("ctx", "fn_cls", "in_meta", "num_outputs", "out_meta")

    def __init__(self, fn_cls, ctx: FunctionCtx, edges: tuple, in_meta: tuple, out_meta: tuple):
        super().__init__(edges)
        self.fn_cls = fn_cls
        self.ctx = ctx
        self.in_meta = in_meta
        self.out_meta = out_meta
        self.num_outputs = len(out_meta)

    def name(self) -> str:
        return f"{self.fn_cls.__name__}Backward"

    def apply(self, grads: list) -> tuple:
        if self.ctx.materialize_grads:
            for i, (shape, np_dtype) in enumerate(self.out_meta):
                if grads[i] is None and np_dtype is not None and carries_grad(np_dtype):
                    grads[i] = make_tensor(np.zeros(shape, np_dtype))
        gxs = self.fn_cls.backward(self.ctx, *grads)
        if not isinstance(gxs, tuple):
            gxs = (gxs,)
        if len(gxs) > len(self.edges) and all(g is None for g in gxs[len(self.edges) :]):
            gxs = gxs[: len(self.edges)]
        if len(gxs) != len(self.edges):
            raise AutogradError(
                f"{self.name()}: backward returned {len(gxs)} gradients, but forward took "
                f"{len(self.edges)} arguments"
            )
        return gxs

    def release(self) -> None:
        pass


class Function:
    """Subclass with static `forward(ctx, *args)` and `backward(ctx, *grads)`; call `apply`.

    >>> class Square(flow.autograd.Function):
    ...     @staticmethod
    ...     def forward(ctx, x):
    ...         ctx.save_for_backward(x)
    ...         return x * x
    ...     @staticmethod
    ...     def backward(ctx, gy):
    ...         (x,) = ctx.saved_tensors
    ...         return 2 * x * gy
    """

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError

    @staticmethod
    def backward(ctx, *grads):
        raise NotImplementedError

    @classmethod
    def apply(cls, *args, **kwargs):
        ctx = FunctionCtx()
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
        with no_grad():
            out = cls.forward(ctx, *args, **kwargs)
        if not (STATE.enabled and any(ctx.needs_input_grad)):
            return out
        single = not isinstance(out, tuple)
        outs = (out,) if single else out
        inputs = {id(a) for a in args if isinstance(a, Tensor)}
        # NOTE: an output that is an input object gets a fresh alias, so the input keeps its
        # own history while the output records this Function's.
        outs = tuple(
            o.detach()
            if isinstance(o, Tensor) and id(o) in inputs and id(o) not in ctx._dirty
            else o
            for o in outs
        )
        edges = tuple(
            ((a.grad_fn, a._out_nr) if a.grad_fn is not None else (accumulator(a), 0))
            if isinstance(a, Tensor) and a.requires_grad
            else None
            for a in args
        )
        in_meta = tuple(
            (a._data.shape, a._data.dtype) if isinstance(a, Tensor) else None for a in args
        )
        out_meta = tuple(
            (o._data.shape, o._data.dtype) if isinstance(o, Tensor) else ((), None) for o in outs
        )
        node = FunctionNode(cls, ctx, edges, in_meta, out_meta)
        for i, o in enumerate(outs):
            differentiable = isinstance(o, Tensor) and id(o) not in ctx._non_differentiable
            if differentiable and carries_grad(o._data.dtype):
                o.requires_grad = True
                o.grad_fn = node
                o._out_nr = i
        return outs[0] if single else outs
