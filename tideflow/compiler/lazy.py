"""Lazy tensors: what `nn.Graph.build` computes with while it is traced.

A lazy tensor is an ordinary `Tensor` whose `_data` is a `LazyArray`: the shape and dtype of
an IR value, and no elements. Everything that needs only metadata works unchanged (`shape`,
`dtype`, `ndim`, `size()`, ops, autograd); reading elements (`item()`, `numpy()`, `bool(t)`
in an `if`, `tolist()`) raises a `TideflowError` naming the line of user code that asked,
since a graph is traced once and its data exist only when it runs.

Two NumPy calls on lazy arrays are meaningful and forwarded to the tracer: `np.copyto`
(how the dispatcher writes the result of an in-place op, `x.add_(y)`) and `np.add(..., out=)`
(how the backward engine accumulates a second gradient into `.grad`). In SSA form an in-place
write rebinds the tensor to a new value; other tensors that shared its memory (views) would
no longer see it, so reading one of them afterwards raises.
"""

from __future__ import annotations

import math
import os
import traceback

import numpy as np

from ..framework.errors import TideflowError
from ..framework.tensor import Tensor

_FRAMEWORK_DIRS = tuple(
    os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), d) + os.sep
    for d in ("framework", "compiler", "ops", "autograd")
)


def user_line() -> str:
    """`file:line: code` of the innermost caller outside tideflow's core (the user's model
    or build code that triggered the current call)."""
    for frame in reversed(traceback.extract_stack()):
        if not frame.filename.startswith(_FRAMEWORK_DIRS):
            code = f": {frame.line}" if frame.line else ""
            return f"{frame.filename}:{frame.lineno}{code}"
    return "<unknown>"


def data_access_error(what: str) -> TideflowError:
    return TideflowError(
        f"nn.Graph: {what} needs the value of a tensor, which is not known while build() is "
        f"traced (at {user_line()}). A graph is traced once without data, so Python control "
        "flow on tensor values and reading elements cannot be compiled; use tensor ops "
        "(flow.where, masks) or return the tensor from build() and read it after the call."
    )


def _refusing(what: str):
    """A method that raises `data_access_error(what)`: what lazy arrays and tensors answer
    to every request for their elements."""

    def refuse(self, *args, **kwargs):
        raise data_access_error(what)

    return refuse


class _Flags:
    """What the dispatcher's in-place and reshape paths ask of an array's flags."""

    __slots__ = ()
    c_contiguous = True
    writeable = True


class AliasSet:
    """Lazy arrays that share memory in eager execution (a tensor and its views), and, when
    they view a real tensor (a variable or a captured constant), what that tensor is."""

    __slots__ = ("members", "owner")

    def __init__(self, members: list, owner: str | None = None) -> None:
        self.members = members
        self.owner = owner


class LazyArray:
    """The `_data` of a lazy tensor: an IR value's metadata, no elements."""

    __slots__ = ("alias", "dtype", "shape", "stale", "tracer", "value")
    base = None
    flags = _Flags()

    def __init__(self, tracer, value) -> None:
        self.tracer = tracer
        self.value = value
        self.shape = value.shape
        self.dtype = value.dtype.np
        self.alias: AliasSet | None = None
        self.stale = False  # an aliasing tensor was written in place since this one was made

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def copy(self) -> LazyArray:
        """Values are immutable: a copy is the same value in an unaliased array."""
        return LazyArray(self.tracer, self.value)

    def view(self) -> LazyArray:
        # NOTE: `reshape` probes whether a view is possible by setting a view's shape; lazily
        # every reshape is possible (the kernel copies when the runtime strides need it).
        return self.copy()

    def note_layout(self, placement, nd_sbp: tuple) -> None:
        """This array is the shard of a global tensor laid out as given (for printing)."""
        self.value.placement = placement
        self.value.sbp = nd_sbp

    def rebind(self, value) -> None:
        """Make this array hold `value` (an in-place write); arrays aliasing it go stale."""
        alias = self.alias
        if alias is not None:
            if alias.owner is not None:
                raise TideflowError(
                    f"nn.Graph: in-place write to a view of {alias.owner} (at "
                    f"{user_line()}) is not supported in a graph; write the whole tensor or "
                    "build the new value out of place"
                )
            for other in alias.members:
                if other is not self:
                    other.stale = True
            self.alias = None
        self.value = value

    # -- NumPy protocols --------------------------------------------------------------------
    def __array_function__(self, func, types, args, kwargs):
        if func is np.copyto:
            self.tracer.write(args[0], args[1])
            return None
        raise data_access_error(f"np.{func.__name__}()")

    def __array_ufunc__(self, ufunc, method, *inputs, out=None, **kwargs):
        if ufunc is np.add and method == "__call__" and out is not None and len(inputs) == 2:
            self.tracer.accumulate(out[0], inputs[0], inputs[1])
            return out[0]
        raise data_access_error(f"np.{ufunc.__name__}()")

    __array__ = _refusing("converting it to a NumPy array")
    item = _refusing("item()")
    tolist = _refusing("tolist()")
    reshape = _refusing("reading its elements")
    astype = _refusing("printing or converting its elements")
    __bool__ = _refusing("bool() (an `if` or `while` on a tensor)")
    __float__ = _refusing("float()")
    __int__ = _refusing("int()")
    __index__ = _refusing("using it as an index")

    def __repr__(self) -> str:
        return f"LazyArray({self.value!r}: {self.value.type_str()})"


class LazyTensor(Tensor):
    """A tensor of a graph being traced. Its data exist only when the graph runs."""

    __slots__ = ()

    item = _refusing("item()")
    tolist = _refusing("tolist()")
    numpy = _refusing("numpy()")
    __array__ = _refusing("converting it to a NumPy array")
    __bool__ = _refusing("bool() (an `if` or `while` on a tensor)")
    __float__ = _refusing("float()")
    __int__ = _refusing("int()")
    __index__ = _refusing("using it as an index")
    __complex__ = _refusing("complex()")

    def __reduce_ex__(self, protocol):
        raise TideflowError("nn.Graph: a lazy tensor of a graph being traced cannot be pickled")

    def __repr__(self) -> str:
        data = self._data
        value = data.value if isinstance(data, LazyArray) else None
        extra = ""
        if self.grad_fn is not None:
            extra = f", grad_fn=<{self.grad_fn.name()}>"
        elif self.requires_grad:
            extra = ", requires_grad=True"
        return f"LazyTensor(value={value!r}, shape={list(self.shape)}, dtype={self.dtype}{extra})"


def lazy_tensor(array: LazyArray) -> LazyTensor:
    t = object.__new__(LazyTensor)
    t._data = array
    t._version = [0]
    return t


def is_lazy(t: Tensor) -> bool:
    return type(t._data) is LazyArray
