"""Tracing: run `build` once in a lazy dispatch mode and record what it computes as a Program.

While a `Tracer` is active it is a dispatch mode of the tracing thread, behind the global
mode (so a graph over global tensors records each rank's part): every op call becomes an IR
node (output shapes and dtypes from the op's own `meta` rule, via `infer`) and returns lazy
tensors (`compiler.lazy`). Autograd records as in eager mode, so `loss.backward()` inside
build runs the ordinary backward engine over the recorded nodes; the grad rules dispatch
tideflow ops, which land in the program too: the backward graph comes for free, and the
gradients of variables end up in their `.grad` as lazy tensors (`Tracer.gradients`).

Real tensors met during tracing are variables when registered (`add_variable`: parameters,
buffers, optimizer state, read through a holder each call so eager and graph share memory),
and constants otherwise (tensors captured from Python scope, the backward seed `ones`).

Optimizer steps are not traced but captured (`capture_updates`): the optimizer's Python code
runs eagerly each call and its fused update ops, which write their operands in place, are
recorded instead of run; `Tracer.add_updates` turns them into update nodes whose attributes
(learning rate, step count) are fed per call.

Nodes carry the `Scope` that was current when they were recorded: `nn.Graph` pushes one per
module call (`push_scope`/`pop_scope`). The backward of a recorded op runs with that op's
scope, marked as backward: a pre-hook on its autograd node sets it when the engine reaches it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import NamedTuple

import numpy as np

from ..autograd.engine import backward_running
from ..framework import dtype as dtypes
from ..framework.dispatch import computation_dtype, infer, record
from ..framework.errors import ShapeError, TideflowError
from ..framework.grad_mode import STATE
from ..framework.modes import dispatch_mode
from ..framework.registry import Meta, OpDef, get_op
from ..framework.tensor import Tensor
from ..parallel.dispatch import global_mode
from .amp import guarded
from .internal_ops import ASSIGN
from .ir import BACKWARD, CONSTANT, FEED, VARIABLE, Node, Program, Scope, Value, Variable
from .lazy import AliasSet, LazyArray, LazyTensor, is_lazy, lazy_tensor, user_line


class UpdateCall(NamedTuple):
    """One fused optimizer update as the optimizer dispatched it."""

    op: OpDef
    args: tuple
    attrs: dict


class Tracer:
    """Records the ops dispatched while it is active (`with tracer:`) into a Program.

    >>> w = flow.randn(3, 2)
    >>> tracer = Tracer()
    >>> tracer.add_variable("w", w, holder=TensorHolder(w))
    >>> with tracer:
    ...     x = tracer.feed((4, 3), flow.float32)
    ...     y = (x @ w).relu()
    >>> print(tracer.finish([y]))
    """

    def __init__(self) -> None:
        self._draft = Program(feeds=(), variables={}, constants={}, nodes=(), fetches=())
        self._nodes: list[Node] = []
        self._feeds: list[Value] = []
        self._variables: dict[str, Variable] = {}
        self._constants: dict[Value, np.ndarray] = {}
        self._tensors: dict[str, Tensor] = {}  # variable name -> its eager tensor
        self._by_array: dict[int, str] = {}  # id of a variable's array -> its name
        self._current: dict[str, Value] = {}  # variable name -> its value after in-place writes
        self._updated: set[str] = set()  # variables written by optimizer updates
        self._views: dict[int, AliasSet] = {}  # id(array) of a real tensor -> its lazy views
        self._captured: dict[int, tuple[Tensor, Value]] = {}  # id(array) -> constant
        self._leaves: dict[int, tuple[Tensor, Tensor | None]] = {}  # leaf -> its eager .grad
        self._grads: dict[str, Tensor] = {}
        self._step_attrs: Value | None = None
        self._n_updates = 0
        self._seed_scale: Tensor | None = None  # AMP's loss scale (scale_backward_seeds)
        routed = global_mode(self.handle)
        self._mode = dispatch_mode(lambda op, args, attrs, below: routed(op, args, attrs))
        self._active = False
        self._scopes: list[Scope] = []  # the module calls being traced, innermost last
        self._backward_scope: Scope | None = None  # set while the engine runs a node's backward

    # -- sources --------------------------------------------------------------------------
    def add_variable(self, name: str, tensor: Tensor, holder) -> str:
        """Register `tensor` as the variable `name`; returns the name it is known by (an
        earlier name when the same memory is registered twice, as tied weights are)."""
        known = self._by_array.get(id(tensor._data))
        if known is not None:
            return known
        # NOTE: a global tensor's variable is this rank's shard
        shape = tensor._data.shape
        value = self._draft.new_value(shape, tensor.dtype, VARIABLE, label=name)
        if tensor.is_global:
            value.placement, value.sbp = tensor.placement, tensor._nd_sbp
        self._variables[name] = Variable(name, value, holder)
        self._tensors[name] = tensor
        self._by_array[id(tensor._data)] = name
        self._current[name] = value
        return name

    def feed(self, shape: Sequence[int], dtype: dtypes.DType) -> LazyTensor:
        """The next graph input, as a lazy tensor."""
        value = self._draft.new_value(tuple(shape), dtype, FEED, label=str(len(self._feeds)))
        self._feeds.append(value)
        return lazy_tensor(LazyArray(self, value))

    def variable_names(self) -> dict[int, str]:
        """Registered variables by the id of their tensor's array."""
        return dict(self._by_array)

    def source_ranks(self) -> set[int]:
        """The world ranks of the placements of the graph's inputs and variables so far.
        Unlike the ranks of the values ops compute, the same set on every rank: each rank
        records only its own part of the ops, but every rank has every input and variable."""
        values = [*self._feeds, *(v.value for v in self._variables.values())]
        return {r for p in {v.placement for v in values} - {None} for r in p.flat_ranks}

    # -- scopes ---------------------------------------------------------------------------
    @property
    def current_scope(self) -> Scope | None:
        """The scope nodes recorded now get: a backward's, else the innermost module call's
        (marked as backward while a backward pass runs: the backward of a custom autograd
        Function, such as a placement move's, has no scope of its own)."""
        if self._backward_scope is not None:
            return self._backward_scope
        scope = self._scopes[-1] if self._scopes else None
        if scope is not None and backward_running():
            return replace(scope, phase=BACKWARD)
        return scope

    @property
    def forward_scope(self) -> Scope | None:
        """The innermost module call's scope (what a module called now is nested in)."""
        return self._scopes[-1] if self._scopes else None

    def push_scope(self, scope: Scope) -> None:
        """Enter a module call: nodes recorded until the matching `pop_scope` get `scope`."""
        self._scopes.append(scope)
        self._backward_scope = None

    def pop_scope(self) -> None:
        self._scopes.pop()
        # NOTE: backward does not span a module's return: whatever runs next is forward code.
        self._backward_scope = None

    @contextmanager
    def scope(self, scope: Scope) -> Iterator[None]:
        self.push_scope(scope)
        try:
            yield
        finally:
            self.pop_scope()

    def _scope_backward(self, node, scope: Scope | None) -> None:
        """Make the ops `node`'s backward dispatches (and the engine's gradient additions
        after it) carry `scope`, marked as backward."""
        # NOTE: a parameter gather's backward (its gradient's reduce-scatter) is no gather
        scope = replace(scope or Scope(), phase=BACKWARD, gather=False)

        def enter(grad) -> None:
            self._backward_scope = scope

        # NOTE: the engine runs pre-hooks only for outputs that received a gradient: one per
        # output makes sure one of them runs whenever the backward itself runs.
        for i in range(max(1, len(node.out_meta))):
            node.register_prehook(i, enter)

    # -- the lazy mode --------------------------------------------------------------------
    def __enter__(self) -> Tracer:
        for tensor in self._tensors.values():
            self._own_grad(tensor)
        self._mode.__enter__()
        self._active = True
        return self

    def __exit__(self, *exc) -> None:
        self._mode.__exit__(*exc)
        self._active = False
        self._grads = {
            name: lazy_tensor(t.grad._data)
            for name, t in self._tensors.items()
            if t.grad is not None and is_lazy(t.grad)
        }
        # NOTE: eager `.grad`s are untouched by tracing: gradients inside a graph are values
        # of the program, not accumulated into tensors.
        for tensor, grad in self._leaves.values():
            tensor.grad = grad

    def _own_grad(self, tensor: Tensor) -> None:
        """Backward inside build starts each leaf's gradient from nothing; the eager `.grad`
        comes back when tracing ends."""
        if tensor.requires_grad and id(tensor) not in self._leaves:
            self._leaves[id(tensor)] = (tensor, tensor.grad)
            tensor.grad = None

    def scale_backward_seeds(self, scale: Tensor) -> None:
        """Start every backward in build from `scale` (a registered 0-d variable) instead of
        ones: AMP's loss scaling, with build calling `loss.backward()` unchanged."""
        self._seed_scale = scale

    def _scaled_seed(self, grad: Tensor) -> Tensor | None:
        """A pre-hook of every recorded node while seeds are scaled. Gradients computed in the
        trace are lazy: a real one reaching a node is a backward's seed (the engine's ones,
        or `gradient=`)."""
        if is_lazy(grad):
            return None
        return grad * self._seed_scale.to(grad.dtype)

    def gradients(self) -> dict[str, Tensor]:
        """Variable name -> its gradient (a lazy tensor) as backward left it in build."""
        return dict(self._grads)

    def handle(self, op: OpDef, args: tuple, attrs: dict):
        if op.mutates:
            raise TideflowError(
                f"nn.Graph: {op.name} writes its operands in place (an optimizer update) and "
                f"was called inside build() (at {user_line()}); add the optimizer with "
                "self.add_optimizer(optimizer) and the graph runs its step after build"
            )
        operands = [self.value_of(a) if isinstance(a, Tensor) else a for a in args]
        metas = [v.meta if isinstance(v, Value) else v for v in operands]
        out = infer(op, metas, attrs)
        if op.promote is not None:
            self._promote(op, operands, metas)
        out_metas = (out,) if op.n_out == 1 else tuple(out)
        node = self._emit(op, operands, attrs, out_metas)
        outs = tuple(lazy_tensor(LazyArray(self, v)) for v in node.outputs)
        if op.view:
            self._alias(args[0], outs)
        if STATE.enabled and op.differentiable:
            for a in args:
                if isinstance(a, Tensor) and a.requires_grad:
                    record(op, args, attrs, outs)
                    grad_fn = next((o.grad_fn for o in outs if o.grad_fn is not None), None)
                    if grad_fn is not None:
                        self._scope_backward(grad_fn, node.scope)
                        if self._seed_scale is not None:
                            for i in range(len(outs)):
                                grad_fn.register_prehook(i, self._scaled_seed)
                    break
        if op.n_out == 1:
            return outs[0]
        return None if op.n_out == 0 else outs

    def _promote(self, op: OpDef, operands: list, metas: list) -> None:
        """The casts eager promotion applies to the kernel's operands, as explicit nodes."""
        positions = op.promote_args if op.promote_args is not None else range(len(operands))
        target = computation_dtype(op, [metas[i] for i in positions])
        for i in positions:
            v = operands[i]
            if isinstance(v, Value):
                if v.dtype is not target:
                    operands[i] = self._cast(v, target)
            elif isinstance(v, np.generic):
                operands[i] = v.item()

    def _alias(self, base: Tensor, views: tuple[LazyTensor, ...]) -> None:
        """Views share the base's version counter and, lazily, its alias set."""
        root = base if base._base is None else base._base
        data = base._data
        if type(data) is LazyArray:
            alias = data.alias
            if alias is None:
                alias = data.alias = AliasSet([data])
        else:
            alias = self._views.get(id(data))
            if alias is None:
                name = self._by_array.get(id(data))
                owner = repr(name) if name else "a tensor captured from outside build()"
                alias = self._views[id(data)] = AliasSet([], owner)
        for v in views:
            v._version = base._version
            v._base = root
            v._data.alias = alias
            alias.members.append(v._data)

    # -- values of tensors and arrays -------------------------------------------------------
    def value_of(self, t: Tensor) -> Value:
        """The IR value a tensor holds at this point of the trace."""
        data = t._data
        if type(data) is LazyArray:
            return self._lazy_value(data)
        name = self._by_array.get(id(data))
        if name is not None:
            if name in self._updated:
                raise TideflowError(
                    f"nn.Graph: variable {name!r} is read after the optimizer updated it"
                )
            return self._current[name]
        entry = self._captured.get(id(data))
        if entry is None:
            value = self._draft.new_value(data.shape, t.dtype, CONSTANT)
            self._constants[value] = data
            entry = self._captured[id(data)] = (t, value)
            if self._active:
                self._own_grad(t)
        return entry[1]

    def _lazy_value(self, data: LazyArray) -> Value:
        if data.tracer is not self:
            raise TideflowError(
                f"nn.Graph: a lazy tensor of another trace is used (at {user_line()}); tensors "
                "computed inside build() exist only while it is traced: return them instead "
                "of keeping them"
            )
        if data.stale:
            raise TideflowError(
                f"nn.Graph: a tensor is read after an in-place write to a tensor sharing its "
                f"memory (a view or its base), at {user_line()}; in a graph the write does "
                "not reach the other views: clone() before writing, or write out of place"
            )
        return data.value

    def _array_value(self, a) -> Value:
        if type(a) is LazyArray:
            return self._lazy_value(a)
        a = np.asarray(a)
        value = self._draft.new_value(a.shape, dtypes.from_numpy(a.dtype), CONSTANT)
        self._constants[value] = a
        return value

    # -- in-place writes (np.copyto, np.add(out=)) forwarded by LazyArray -------------------
    def write(self, dst, src) -> None:
        """`dst[...] = src` for an in-place op: the destination holds the new value from
        here on (a variable's new value is written back at the end of the call)."""
        value = self._array_value(src)
        if value.shape != tuple(dst.shape):
            raise ShapeError(
                f"nn.Graph: in-place write of shape {list(value.shape)} into a tensor of shape "
                f"{list(dst.shape)}"
            )
        if type(dst) is LazyArray:
            dst.rebind(self._cast_to(value, dst.value.dtype))
            return
        name = self._by_array.get(id(dst))
        if name is None:
            raise TideflowError(
                f"nn.Graph: in-place write (at {user_line()}) to a tensor captured from outside "
                "build(), which is not a parameter or buffer of the graph's modules; register "
                "it as a buffer so the graph can update it"
            )
        self._current[name] = self._cast_to(value, self._variables[name].value.dtype)
        views = self._views.pop(id(dst), None)
        for view in views.members if views is not None else ():
            view.stale = True  # eager views of the variable would show the new value

    def accumulate(self, out, a, b) -> None:
        """`np.add(a, b, out=out)`: the engine adding a second backward's gradient."""
        if type(out) is not LazyArray:
            raise TideflowError("nn.Graph: gradient accumulation into a tensor outside the trace")
        va, vb = self._array_value(a), self._array_value(b)
        add = get_op("add")
        (total,) = self._emit(add, [va, vb], {}, (infer(add, [va.meta, vb.meta], {}),)).outputs
        out.rebind(self._cast_to(total, out.value.dtype))

    # -- optimizer updates ------------------------------------------------------------------
    def add_updates(self, calls: Sequence[UpdateCall], guard: Tensor | None = None) -> None:
        """Update nodes for captured optimizer updates. Their attributes come, per call,
        from the program's attribute feed (`Program.step_attrs`) in the order of `calls`.
        With `guard`, a boolean 0-d tensor of the trace (AMP's found_inf), each update does
        nothing in the calls where it is true (`amp.guarded`)."""
        skip = None if guard is None else self.value_of(guard)
        if self._step_attrs is None and calls:
            self._step_attrs = self._draft.new_value((), None, FEED, label="attrs")
        for call in calls:
            operands = []
            for i, a in enumerate(call.args):
                if not isinstance(a, Tensor):
                    operands.append(a)
                    continue
                if i in call.op.mutates and not is_lazy(a):  # a value of the trace may be
                    name = self._by_array.get(id(a._data))  # written too (ZeRO's shards)
                    if name is None:
                        raise TideflowError(
                            f"nn.Graph: {call.op.name} updates a tensor that is not a "
                            f"registered variable (operand {i}, shape {list(a.shape)})"
                        )
                    if self._current[name] is not self._variables[name].value:
                        raise TideflowError(
                            f"nn.Graph: {name!r} is written inside build() and updated by the "
                            "optimizer; a variable can have one writer per call"
                        )
                operands.append(self.value_of(a))
            op = call.op
            if skip is not None:
                op, operands = guarded(op), [skip, *operands]
            self._emit(op, operands, dict(call.attrs), (), step_attrs=self._n_updates)
            self._n_updates += 1
            self._updated.update(
                self._by_array[id(call.args[i]._data)]
                for i in call.op.mutates
                if call.args[i] is not None and not is_lazy(call.args[i])
            )

    # -- the result -------------------------------------------------------------------------
    def finish(self, outputs: Sequence[Tensor]) -> Program:
        """The program computing `outputs` (its fetches, in order), with each variable
        written in place during the trace assigned its final value."""
        fetches = tuple(self.value_of(t) for t in outputs)
        for name, value in self._current.items():
            var = self._variables[name]
            if value is not var.value:
                self._emit(ASSIGN, [var.value, value], {}, ())
        return self._draft.replace(
            feeds=tuple(self._feeds),
            variables=dict(self._variables),
            constants=dict(self._constants),
            nodes=tuple(self._nodes),
            fetches=fetches,
            step_attrs=self._step_attrs,
        )

    # -- node construction ------------------------------------------------------------------
    def _emit(self, op: OpDef, operands, attrs: dict, metas, step_attrs=None) -> Node:
        node = self._draft.new_node(
            op, tuple(operands), attrs, metas, step_attrs=step_attrs, scope=self.current_scope
        )
        self._nodes.append(node)
        return node

    def _cast(self, value: Value, dtype: dtypes.DType) -> Value:
        node = self._emit(get_op("cast"), [value], {"dtype": dtype}, (Meta(value.shape, dtype),))
        return node.outputs[0]

    def _cast_to(self, value: Value, dtype: dtypes.DType) -> Value:
        return value if value.dtype is dtype else self._cast(value, dtype)


def capture_updates(step: Callable[[], object]) -> list[UpdateCall]:
    """Run `step` (an optimizer's `step`) with its fused updates recorded instead of run, as
    the optimizer called them (global tensors stay global: `local_updates` gives what each
    rank runs, and ZeRO shards them first).

    Anything else it dispatches runs eagerly, such as creating zero state on the first step.
    Gradients it reads may be lazy tensors: only the recorded updates use them."""
    calls: list[UpdateCall] = []

    def capture(op: OpDef, args: tuple, attrs: dict, below):
        if op.mutates:
            calls.append(UpdateCall(op, args, attrs))
            return None
        if any(isinstance(a, Tensor) and is_lazy(a) for a in args):
            raise TideflowError(
                f"nn.Graph: the optimizer computes {op.name} on gradients outside its fused "
                "update ops; a graph supports optimizers whose step is one fused update per "
                "parameter (tideflow.optim's SGD, Adam, AdamW, RMSprop, Adagrad, Adadelta, LAMB)"
            )
        return below(op, args, attrs)

    with dispatch_mode(capture):
        step()
    return calls


def local_updates(calls: Sequence[UpdateCall]) -> list[UpdateCall]:
    """What this rank runs of each update: its shards, in the layout the global mode picks
    for the call (none for a parameter whose placement leaves this rank out)."""
    out: list[UpdateCall] = []
    record = global_mode(lambda op, args, attrs: out.append(UpdateCall(op, args, attrs)))
    for call in calls:
        record(call.op, call.args, call.attrs)
    return out
