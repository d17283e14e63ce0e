"""The dispatcher: the one path every op call takes.

`dispatch(op, args, attrs)`:
1. the thread's dispatch modes see the call first (graph tracing, autocast, test recording:
   `modes.py`), then the base: the global mode once global tensors exist, which routes
   calls with global operands;
2. otherwise run locally: promote operand dtypes, call the device's kernel, wrap the arrays;
3. if grad mode is on and an operand requires grad, record an `OpNode`.
Nothing here validates shapes on the success path: a kernel failure asks the op's `meta` rule
for the precise user-facing error, so valid calls pay nothing for checks.
"""

from __future__ import annotations

import traceback

import numpy as np

from . import dtype as dtypes
from .errors import ArgumentError, AutogradError, DTypeError, ShapeError, TideflowError
from .grad_mode import STATE
from .modes import STACK, set_base
from .node import GRAD_NP, OpNode, carries_grad, next_seq
from .registry import Meta, OpDef, kernel_for
from .tensor import Tensor, _init, _new, accumulator, make_tensor
from .views import (
    is_stale,
    mark_views,
    multi_output_view_error,
    rebased_history,
    refresh_view,
)

_ndarray = np.ndarray


class _Anomaly:
    """`detect_anomaly`'s switch: record each op's forward stack, check gradients for NaN."""

    __slots__ = ("enabled",)

    def __init__(self) -> None:
        self.enabled = False


ANOMALY = _Anomaly()


def dispatch(op: OpDef, args: tuple, attrs: dict):
    return STACK.top(op, args, attrs)


def run_local(op: OpDef, args: tuple, attrs: dict):
    # NOTE: operands that are not tensors must be numbers (Python's or NumPy's) or None. An
    # array with dimensions is data the user forgot to convert, which PyTorch rejects as it
    # rejects a string, a list or a dict; a 0-d array is a number. Only non-tensor operands
    # pay the test, and the comprehension must not read `op` or `args` (a closure slows every
    # call).
    try:
        arrays = [a._data if isinstance(a, Tensor) else _operand(a) for a in args]
    except _NotAnOperand:
        raise operand_error(op, args, next(i for i, a in enumerate(args) if _refused(a))) from None
    if op.promote is not None and not _uniform(op, arrays):
        promote(op, args, arrays)
    try:
        out = kernel_for(op)(*arrays, **attrs)
    except TideflowError:
        raise
    except Exception as e:
        raise kernel_error(op, args, attrs, e) from e
    if op.mutates:
        for i in op.mutates:  # the kernel wrote these operands in place (optimizer updates)
            if args[i] is not None:
                args[i]._version[0] += 1
    if op.n_out == 1:
        if type(out) is not _ndarray:
            out = np.asarray(out)
        result = _new(Tensor)
        _init(result, out)
        outs = (result,)
    elif op.n_out == 0:
        return None
    else:
        outs = tuple(_wrap(o) for o in out)
        result = outs
    if op.view:
        mark_views(op, args, attrs, outs)
    if STATE.enabled and op.differentiable:
        tracked = False
        for a in args:
            if isinstance(a, Tensor):
                if a._view is not None and is_stale(a):
                    refresh_view(a)
                if a.requires_grad:
                    tracked = True
        if tracked:
            record(op, args, attrs, outs)
    return result


set_base(run_local)


def runs_locally() -> bool:
    """This thread has no dispatch mode and no global tensor exists: `dispatch` is
    `run_local`."""
    return STACK.top is run_local


class _NotAnOperand(Exception):
    """A value among an op's operands that is neither a tensor, a number nor None (turned
    into `operand_error`)."""


_NUMBERS = (bool, int, float, complex, np.number, np.bool_)


def _operand(value):
    """A non-tensor operand as kernels take it: None or a number, a 0-d array as the NumPy
    scalar it holds."""
    if value is None or isinstance(value, _NUMBERS):
        return value
    if isinstance(value, _ndarray) and not value.ndim:
        return value[()]
    raise _NotAnOperand


def _refused(value) -> bool:
    """Whether `value` is neither a tensor nor an operand `_operand` takes."""
    if isinstance(value, Tensor):
        return False
    try:
        _operand(value)
    except _NotAnOperand:
        return True
    return False


def operand_error(op: OpDef, args: tuple, i: int) -> ArgumentError:
    """PyTorch's TypeError for `args[i]`, passed where `op` takes a tensor: the op, the
    argument's name and position, and the type it got."""
    kind = type(args[i])
    what = kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__name__}"
    rest = len(op.inputs) - 1
    if op.inputs[rest].startswith("*") and i >= rest:  # an element of the trailing sequence
        return ArgumentError(
            f"{op.name}(): expected Tensor as element {i - rest} in argument {rest} "
            f"('{op.inputs[rest][1:]}'), but got {what}"
        )
    return ArgumentError(
        f"{op.name}(): argument '{op.inputs[i]}' (position {i + 1}) must be Tensor, not {what}"
    )


def _wrap(array) -> Tensor:
    t = _new(Tensor)
    _init(t, array if type(array) is _ndarray else np.asarray(array))
    return t


def _uniform(op: OpDef, arrays: list) -> bool:
    """The common case needs no cast: all operands are arrays of one dtype (a float dtype for
    "float" ops). Checked on the arrays with identity tests: it runs on every call."""
    if op.promote_args is not None:
        return False
    dt = None
    for a in arrays:
        if type(a) is not _ndarray:
            return False
        if dt is None:
            dt = a.dtype
        elif a.dtype is not dt:
            return False
    return op.promote == "common" or dt in GRAD_NP


def promote(op: OpDef, args: tuple, arrays: list) -> None:
    """Cast `arrays` (in place in the list) to the op's computation dtype (PyTorch rules)."""
    positions = op.promote_args if op.promote_args is not None else range(len(args))
    # NOTE: the result type depends only on each operand's dtype and 0-d-ness (tensors) or
    # Python type (scalars), and on the default dtype: cache it by that key.
    key = [op.promote, dtypes.get_default_dtype()]
    for i in positions:
        a = arrays[i]
        if a is None and i not in op.optional:  # NumPy would compute with it (x == None)
            raise operand_error(op, args, i)
        key.append((a.dtype, a.ndim == 0) if isinstance(a, _ndarray) else type(a))
    key = tuple(key)
    target = _RESULT_TYPES.get(key)
    if target is None:
        target = _RESULT_TYPES[key] = computation_dtype(op, [args[i] for i in positions]).np
    for i in positions:
        a = arrays[i]
        if isinstance(a, _ndarray):
            if a.dtype != target:
                arrays[i] = a.astype(target)
        elif isinstance(a, np.generic):
            arrays[i] = a.item()
    if not any(isinstance(a, _ndarray) for a in arrays):
        # NOTE: scalars only (`flow.add(1.0, 2)`): as PyTorch wraps a scalar input, the first
        # becomes a 0-d array of the result dtype, so kernels always see an array.
        i = next(i for i in positions if arrays[i] is not None)
        arrays[i] = np.asarray(arrays[i], target)


_RESULT_TYPES: dict[tuple, np.dtype] = {}


def computation_dtype(op: OpDef, operands) -> dtypes.DType:
    """The dtype `op` computes in for these operands (tensors, metas or scalars)."""
    dims, zero_dims, scalars = [], [], []
    for a in operands:
        if a is None:
            continue
        if isinstance(a, Tensor | Meta):
            (dims if len(a.shape) else zero_dims).append(a.dtype)
        else:
            scalars.append(a.item() if isinstance(a, np.generic | _ndarray) else a)
    result = dtypes.result_type(dims, zero_dims, scalars)
    if op.promote == "float" and not (result.is_floating_point or result.is_complex):
        return dtypes.get_default_dtype()
    return result


def infer(op: OpDef, operands, attrs: dict):
    """Output Meta(s) of `op` from operand metadata (Meta/Tensor/scalar), promotion applied:
    what graph tracing and global tensors use instead of running the kernel."""
    metas = [Meta(tuple(a.shape), a.dtype) if isinstance(a, Tensor | Meta) else a for a in operands]
    if op.promote is not None:
        positions = op.promote_args if op.promote_args is not None else range(len(metas))
        target = computation_dtype(op, [metas[i] for i in positions])
        for i in positions:
            if isinstance(metas[i], Meta):
                metas[i] = Meta(metas[i].shape, target)
    return op.meta(*metas, **attrs)


def record(op: OpDef, args: tuple, attrs: dict, outs: tuple) -> None:
    """Attach an OpNode to `outs` with edges to the operands that require grad."""
    # NOTE: this runs on every differentiable eager call: keep it to one pass, no helpers.
    edges = []
    in_meta = []
    for a in args:
        if isinstance(a, Tensor):
            data = a._data
            in_meta.append((data.shape, data.dtype))
            if a.requires_grad:
                fn = a.grad_fn
                edges.append((fn, a._out_nr) if fn is not None else (accumulator(a), 0))
                continue
        else:
            in_meta.append(None)
        edges.append(None)
    node = OpNode(op, attrs, tuple(edges), tuple(in_meta))
    if op.n_out != 1:
        node.out_meta = tuple((o._data.shape, o._data.dtype) for o in outs)
    if ANOMALY.enabled:
        node.trace = "".join(traceback.format_stack()[:-3])
    if op.save_spec:
        node.save(args, outs)
    state = op.state_outputs
    for i, o in enumerate(outs):
        if o._data.dtype in GRAD_NP and i not in state:
            o.requires_grad = True
            o.grad_fn = node
            o._out_nr = i


def inplace(fn, name: str):
    """The in-place method `name` (e.g. `add_`) of the out-of-place op function `fn`: compute
    out of place, then write into the tensor (`write_back`)."""

    def method(self, *args, **kwargs):
        tracking = STATE.enabled and (
            tracked(self) or any(isinstance(a, Tensor) and tracked(a) for a in args)
        )
        if not tracking:
            assign(self, fn(self, *args, **kwargs), name)
            return self
        check_inplace(self, name)
        first_node = next_seq()
        write_back(self, fn(self, *args, **kwargs), name, first_node)
        return self

    method.__name__ = name
    method.__doc__ = f"In-place version of `{fn.__name__}`."
    return method


def tracked(t: Tensor) -> bool:
    """`t` requires grad, its history brought up to date first if it is a stale view."""
    if t._view is not None and is_stale(t):
        refresh_view(t)
    return t.requires_grad


def check_inplace(self: Tensor, opname: str) -> None:
    """Raise PyTorch's errors for in-place writes autograd cannot record: to a leaf that
    requires grad, or to a view of one. Views of graph (lazy) or global tensors are not
    rebased (a graph's SSA values cannot share memory)."""
    if self.requires_grad and self.grad_fn is None:
        raise AutogradError(
            f"{opname}: a leaf Variable that requires grad is being used in an in-place "
            "operation; wrap it in `with flow.no_grad():` or use the out-of-place op"
        )
    view = self._view
    if view is not None:
        base = view[0]
        if base.requires_grad and base.grad_fn is None:
            raise AutogradError(
                f"{opname}: a view of a leaf Variable that requires grad is being used in an "
                f"in-place operation (view of shape {list(self.shape)}, leaf of shape "
                f"{list(base.shape)}); write into a clone of the leaf"
            )
        multi_output_view_error(
            self, f"{opname}: output {{i}} of {{op}} is a view and is being modified in place"
        )
        if base.requires_grad and self.grad_fn is None:
            raise AutogradError(
                f"{opname}: a view was created in no_grad mode and is being modified in place "
                "with grad mode enabled; create the view and write it both inside the no_grad "
                "block or both outside it"
            )
    elif self._base is not None and (self.is_global or type(self._data) is not _ndarray):
        raise AutogradError(
            f"{opname}: in-place modification of a view that takes part in autograd is "
            "supported on local eager tensors only, not in nn.Graph or on global tensors; "
            "build the result out of place (cat, stack, where, index_put)"
        )


def write_back(self: Tensor, result: Tensor, opname: str, first_node: int) -> None:
    """The end of an in-place op that autograd records: `result` (computed out of place from
    `self` by nodes numbered from `first_node`) is written into `self`. `self` takes over its
    history; a view's base takes the history of its region's replacement (`views.py`), and
    so does a tensor whose history a value without one (`fill_`, `zero_`) replaces: its
    earlier history then gets zero gradients, as in PyTorch. Nodes of this call that saved
    the old value get a copy of it (as PyTorch saves `original_self`); older nodes that
    saved it raise at backward."""
    _keep_saved_value(self, result, first_node)
    had_history = self.requires_grad
    assign(self, result, opname)
    view = self._view
    if view is not None:
        base, steps, _ = view
        if result.requires_grad or base.requires_grad:
            _take_history(base, rebased_history(base, steps, result))
            refresh_view(self)
    elif had_history and not result.requires_grad:
        _take_history(self, rebased_history(self, (), result))


def _take_history(t: Tensor, history: Tensor) -> None:
    t.requires_grad = True
    t.grad_fn = history.grad_fn
    t._out_nr = history._out_nr


def _keep_saved_value(self: Tensor, result: Tensor, first_node: int) -> None:
    """Nodes created since `first_node` that saved `self` get a snapshot of its current value
    (with its autograd identity), since `self` is about to be overwritten. A global `self`'s
    nodes saved its shard: a tensor holding the same array."""
    snapshot = None
    stack = [result.grad_fn]
    seen = set()
    while stack:
        node = stack.pop()
        if node is None or node in seen or node.seq < first_node:
            continue
        seen.add(node)
        saved = getattr(node, "saved", None)
        for key, entry in (saved or {}).items():
            held = entry[1]
            if entry[0] == 0 and (held is self or getattr(held, "_data", None) is self._data):
                if snapshot is None:
                    snapshot = make_tensor(held._data.copy(), held.requires_grad)
                    snapshot.grad_fn = held.grad_fn
                    snapshot._out_nr = held._out_nr
                saved[key] = (0, snapshot, 0)
        stack.extend(e[0] for e in node.edges if e is not None)


def assign(self: Tensor, result: Tensor, opname: str) -> None:
    """Write `result` into `self`'s memory (views see it) and give `self` its history."""
    if self.is_global:  # the global dispatch may have chosen another layout for the result
        if result.is_global:
            result = result.to_global(placement=self.placement, sbp=self.sbp)
        else:  # a local value of the full logical shape (load_state_dict into a global model)
            value = result
            result = Tensor._create_global(
                lambda _: value, tuple(self.shape), self.placement, self.sbp
            )
    src = result._data
    dst = self._data
    if src.shape != dst.shape:
        raise ShapeError(
            f"{opname}: the result of shape {list(src.shape)} does not match the shape "
            f"{list(dst.shape)} of the tensor written in place"
        )
    # NOTE: a floating result cannot go into an integer tensor, nor a complex one into a real
    if src.dtype != dst.dtype and carries_grad(src.dtype) and _narrows(src.dtype, dst.dtype):
        raise DTypeError(
            f"{opname}: result type {dtypes.from_numpy(src.dtype)} can't be cast to the "
            f"dtype {dtypes.from_numpy(dst.dtype)} of the tensor written in place"
        )
    if not dst.flags.writeable:
        raise TideflowError(
            f"{opname}: the tensor is a read-only (expanded/broadcast) view; clone() it first"
        )
    np.copyto(dst, src, casting="unsafe")
    self._version[0] += 1
    if result.requires_grad:
        self.requires_grad = True
        self.grad_fn = result.grad_fn
        self._out_nr = result._out_nr


def _narrows(src, dst) -> bool:
    """Whether writing `src` values into `dst` would drop a category (imaginary parts,
    fractions)."""
    return dtypes.from_numpy(src).category > dtypes.from_numpy(dst).category


def kernel_error(op: OpDef, args: tuple, attrs: dict, err: Exception) -> TideflowError:
    """A user-facing error for a failed kernel: the meta rule's message when it rejects the
    call, else the op, the operands' shapes/dtypes and the backend's message."""
    try:
        infer(op, args, attrs)
    except TideflowError as e:
        return e
    except Exception:  # NOTE: a meta rule that breaks on these operands adds nothing
        pass
    if isinstance(err, AttributeError | TypeError):
        # NOTE: a kernel that reads None as an array or a number was given None for a tensor
        missing = [i for i, a in enumerate(args) if a is None and i not in op.optional]
        if missing:
            return operand_error(op, args, missing[0])
    return TideflowError(f"{op.name}: {describe(args, attrs)}: {type(err).__name__}: {err}")


def describe(args: tuple, attrs: dict) -> str:
    parts = []
    for a in args:
        if isinstance(a, Tensor):
            parts.append(f"Tensor(shape={list(a.shape)}, dtype={a.dtype.name})")
        else:
            parts.append(repr(a))
    parts += [f"{k}={v!r}" for k, v in attrs.items()]
    return f"({', '.join(parts)})"
