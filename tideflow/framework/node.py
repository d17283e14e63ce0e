"""Autograd graph nodes. The dispatcher records an `OpNode` per differentiable op call; a leaf
that requires grad gets an `AccumulateGrad`. `tideflow.autograd`'s engine walks them."""

from __future__ import annotations

import itertools
import weakref

import ml_dtypes
import numpy as np

from .errors import AutogradError
from .tensor import Tensor, make_tensor

_seq = itertools.count()


def next_seq() -> int:
    """A sequence number: every node created later has a larger one."""
    return next(_seq)


FLOAT_NP = frozenset(np.dtype(d) for d in ("float16", "float32", "float64", ml_dtypes.bfloat16))
# NOTE: gradients flow through floating and complex values (a complex tensor's gradient is the
# conjugate Wirtinger derivative, as in PyTorch).
GRAD_NP = FLOAT_NP | {np.dtype(np.complex64), np.dtype(np.complex128)}


def is_float(np_dtype) -> bool:
    """Whether this NumPy dtype is a floating one (bfloat16 reports kind 'V')."""
    return np_dtype in FLOAT_NP


def carries_grad(np_dtype) -> bool:
    """Whether values of this NumPy dtype carry gradients: floating or complex."""
    return np_dtype in GRAD_NP


class RemovableHandle:
    __slots__ = ("_hooks", "_key")

    def __init__(self, hooks: dict, key) -> None:
        self._hooks = hooks
        self._key = key

    def remove(self) -> None:
        self._hooks.pop(self._key, None)


class Node:
    """A backward function: gradients of its outputs in, gradients of its inputs out."""

    __slots__ = ("__weakref__", "_posthooks", "_prehooks", "edges", "seq")

    def __init__(self, edges: tuple) -> None:
        self.edges = edges  # per input: (node, output_nr) or None
        self.seq = next(_seq)
        self._prehooks: dict | None = None
        self._posthooks: dict | None = None

    def name(self) -> str:
        return type(self).__name__

    @property
    def next_functions(self) -> tuple:
        return tuple((None, 0) if e is None else e for e in self.edges)

    def register_prehook(self, output_nr: int, hook, last: bool = False) -> RemovableHandle:
        """`hook(grad)` runs before this node uses output `output_nr`'s gradient; `last` hooks
        (retain_grad) run after all others, whatever the registration order."""
        if self._prehooks is None:
            self._prehooks = {}
        key = (output_nr, float("inf") if last else next(_seq))
        self._prehooks[key] = hook
        return RemovableHandle(self._prehooks, key)

    def register_posthook(self, hook) -> RemovableHandle:
        if self._posthooks is None:
            self._posthooks = {}
        key = next(_seq)
        self._posthooks[key] = hook
        return RemovableHandle(self._posthooks, key)

    def run_prehooks(self, grads: list) -> None:
        for (nr, _), hook in sorted(self._prehooks.items(), key=lambda kv: kv[0]):
            if grads[nr] is not None:
                new = hook(grads[nr])
                if new is not None:
                    grads[nr] = new

    def __repr__(self) -> str:
        return f"<{self.name()} object>"


class OpNode(Node):
    """The backward of one op call. It is the `ctx` of the op's grad rule: `ctx.x` reads a
    saved operand or output (checking it was not modified in place), `ctx.alpha` an attr."""

    __slots__ = (
        "attrs",
        "in_meta",
        "op",
        "out_meta",
        "saved",
        "trace",
    )

    def __init__(self, op, attrs: dict, edges: tuple, in_meta: tuple) -> None:
        # NOTE: no super().__init__(): this runs on every differentiable eager call.
        self.edges = edges
        self.seq = next(_seq)
        self._prehooks = None
        self._posthooks = None
        self.op = op
        self.attrs = attrs
        self.in_meta = in_meta  # per operand: (shape, numpy dtype) for tensors, else None
        self.out_meta: tuple = ()  # per output (shape, numpy dtype), kept for multi-output ops
        self.saved: dict | None = {}
        self.trace = None

    @property
    def needs_input_grad(self) -> tuple:
        return tuple(e is not None for e in self.edges)

    def name(self) -> str:
        return "".join(p.capitalize() for p in self.op.name.split("_")) + "Backward0"

    def input_shape(self, i: int) -> tuple:
        """The shape operand `i` had in the forward call (grad rules need it, not the data)."""
        return self.in_meta[i][0]

    def save(self, args: tuple, outs: tuple) -> None:
        saved = self.saved
        for name, kind, idx in self.op.save_spec:
            if kind == "in":
                a = args[idx]
                saved[name] = (0, a, a._version[0]) if isinstance(a, Tensor) else (2, a)
            elif kind == "rest":
                rest = args[idx:]
                versions = tuple(a._version[0] if isinstance(a, Tensor) else 0 for a in rest)
                saved[name] = (3, rest, versions)
            else:
                o = outs[idx]
                saved[name] = (1, o._data, o._version, o._version[0], idx)

    def __getattr__(self, name: str):
        saved = self.saved
        if saved is None:
            raise AutogradError(
                f"{self.name()}: trying to backward through the graph a second time (its saved "
                "tensors were freed); pass retain_graph=True to the first backward"
            )
        entry = saved.get(name)
        if entry is None:
            try:
                return self.attrs[name]
            except KeyError:
                raise AttributeError(f"{self.name()} has no saved value or attr {name!r}") from None
        kind = entry[0]
        if kind == 2:
            return entry[1]
        if kind == 3:
            for t, version in zip(entry[1], entry[2], strict=True):
                if isinstance(t, Tensor) and t._version[0] != version:
                    raise self._modified(name, t._data, t._version[0], version)
            return entry[1]
        if kind == 0:
            t, version = entry[1], entry[2]
            if t._version[0] != version:
                raise self._modified(name, t._data, t._version[0], version)
            return t
        data, counter, version, nr = entry[1], entry[2], entry[3], entry[4]
        if counter[0] != version:
            raise self._modified(name, data, counter[0], version)
        t = make_tensor(data)
        t._version = counter
        if carries_grad(data.dtype):  # saved integer outputs (indices) carry no history
            t.requires_grad = True
            t.grad_fn = self
            t._out_nr = nr
        return t

    def _modified(self, name: str, data, now: int, then: int) -> AutogradError:
        return AutogradError(
            f"one of the variables needed for gradient computation has been modified by an "
            f"inplace operation: {self.name()} saved {name!r} (shape {list(data.shape)}, "
            f"{data.dtype}) at version {then}, and it is now at version {now}. Hint: replace "
            "the in-place op that modified it with its out-of-place form."
        )

    def apply(self, grads: list) -> tuple:
        if self.saved is None:
            self.__getattr__("_")  # raises the freed-graph error
        if len(grads) > 1:  # outputs nobody used get zero gradients (PyTorch materializes too)
            state = self.op.state_outputs
            for i, (shape, np_dtype) in enumerate(self.out_meta):
                if grads[i] is None and carries_grad(np_dtype) and i not in state:
                    grads[i] = make_tensor(np.zeros(shape, np_dtype))
        return self.op.grad(self, *grads)

    def release(self) -> None:
        self.saved = None


class AccumulateGrad(Node):
    """Sink of a leaf's gradient: runs the leaf's hooks and adds the gradient to `.grad`."""

    __slots__ = ("_variable",)

    def __init__(self, variable: Tensor) -> None:
        super().__init__(())
        self._variable = weakref.ref(variable)

    @property
    def variable(self) -> Tensor | None:
        """The leaf, or None once nobody holds it (then its gradient has no reader)."""
        return self._variable()

    def name(self) -> str:
        return "AccumulateGrad"
