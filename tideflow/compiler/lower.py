"""Lowering: a Program becomes the runtime's `PlanSpec`, one task per node.

- each feed becomes a feed task `feed:<i>`; the per-call attributes of optimizer updates
  arrive through one more feed, `feed:attrs`, last;
- each variable becomes a variable task `var:<name>` reading its holder every run;
  constants are variables too (`var:const:<id>`), holding their array;
- each node becomes a task calling the op's CPU kernel with the node's attributes (or, for
  an update, the attributes fed for this call) and its Python-scalar operands in place.

The runtime orders in-place writes against the other consumers of the written value; it does
not know which tasks return views. So a task writing a variable also takes, as inputs it
ignores, the outputs of tasks that read views of that variable: they run before it. And a
fetched view of a written variable, or a fetched constant, is copied by a `clone` task, so the
caller never holds memory the plan writes or reuses.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..framework.errors import TideflowError
from ..framework.registry import get_op
from ..runtime import PlanSpec, TaskSpec
from .aliases import alias_roots
from .ir import CONSTANT, Node, Program, Value

ATTRS_FEED = "feed:attrs"


class _ConstantHolder:
    __slots__ = ("array",)

    def __init__(self, array: np.ndarray) -> None:
        self.array = array


def lower(program: Program, quota: int = 2) -> PlanSpec:
    """The plan running `program`: `executor.run((*feed_arrays, step_attrs))` returns its
    fetches (`step_attrs` only when the program has optimizer updates).

    >>> plan = lower(run_passes(program))
    >>> with Executor(plan) as executor:
    ...     outputs = executor.run(feed_arrays).result()
    """
    program = protect_fetches(program)
    roots = alias_roots(program)
    sources: dict[Value, tuple[str, int]] = {}
    tasks: list[TaskSpec] = []
    variables: dict[str, object] = {}

    def source(name: str, value: Value) -> None:
        tasks.append(TaskSpec(name, None, (), 1))  # type: ignore[arg-type]
        sources[value] = (name, 0)

    for v in program.feeds:
        source(f"feed:{v.label}", v)
    feeds = [f"feed:{v.label}" for v in program.feeds]
    if program.step_attrs is not None:
        source(ATTRS_FEED, program.step_attrs)
        feeds.append(ATTRS_FEED)
    for var in program.variables.values():
        source(f"var:{var.name}", var.value)
        variables[var.name] = var.holder
    for v, array in program.constants.items():
        name = f"const:{v.id}"
        source(f"var:{name}", v)
        variables[name] = _ConstantHolder(array)

    view_readers = _view_readers(program, roots)
    for node in program.nodes:
        inputs = [sources[v] for v in node.inputs]
        n_real = len(inputs)
        inputs += _ordering_inputs(node, view_readers, sources)
        if node.step_attrs is not None:
            inputs.append(sources[program.step_attrs])  # type: ignore[index]
        mutates = _mutated_inputs(node)
        tasks.append(
            TaskSpec(
                node.name,
                _kernel_call(node, n_real),
                tuple(inputs),
                len(node.outputs),
                mutates=mutates,
            )
        )
        for i, v in enumerate(node.outputs):
            sources[v] = (node.name, i)
    fetches = tuple(sources[v] for v in program.fetches)
    return PlanSpec(tuple(tasks), tuple(feeds), fetches, variables, quota)


def protect_fetches(program: Program) -> Program:
    """Fetch a copy (a `clone` node) of every fetched value whose memory the plan keeps or
    writes: constants and their views, and views of variables written in place."""
    roots = alias_roots(program)
    written = {node.operands[i] for node in program.nodes for i in node.op.mutates}
    clone = get_op("clone")
    nodes = list(program.nodes)
    fetches = []
    for v in program.fetches:
        root = roots.get(v, v)
        if root.kind == CONSTANT or (root is not v and root in written):
            node = program.new_node(clone, (v,), {}, (v.meta,))
            nodes.append(node)
            v = node.outputs[0]
        fetches.append(v)
    if len(nodes) == len(program.nodes):
        return program
    # NOTE: the copies must precede the writers: they read what the step started with.
    writers = [n for n in nodes if n.op.mutates]
    others = [n for n in nodes if not n.op.mutates]
    return program.replace(nodes=tuple(others + writers), fetches=tuple(fetches))


def _view_readers(program: Program, roots: dict[Value, Value]) -> dict[Value, list[Node]]:
    """Root value -> the nodes reading a view of it (not the root itself)."""
    readers: dict[Value, list[Node]] = {}
    for node in program.nodes:
        for root in {roots[v] for v in node.inputs if v in roots}:
            readers.setdefault(root, []).append(node)
    return readers


def _ordering_inputs(node: Node, view_readers: dict, sources: dict) -> list[tuple[str, int]]:
    """Outputs of the earlier tasks that read views of what `node` writes in place."""
    extra: list[tuple[str, int]] = []
    for i in node.op.mutates:
        for reader in view_readers.get(node.operands[i], ()):
            if reader is node:
                continue
            if not reader.outputs:
                raise TideflowError(
                    f"nn.Graph: {reader.name} and {node.name} both write "
                    f"{node.operands[i]!r} through different views; a graph orders in-place "
                    "writes to one variable only when they use it directly"
                )
            extra.append(sources[reader.outputs[0]])
    return extra


def _mutated_inputs(node: Node) -> tuple[int, ...]:
    """The op's mutated operand positions, as positions among the node's value inputs."""
    position = {}
    for i, a in enumerate(node.operands):
        if isinstance(a, Value):
            position[i] = len(position)
    return tuple(position[i] for i in node.op.mutates if i in position)


def _kernel_call(node: Node, n_inputs: int) -> Callable[..., tuple]:
    """`fn(*input_arrays)` for the node's task: its kernel on the value operands (Python
    scalars and None in their places), returning a tuple of arrays. Inputs past the first
    `n_inputs` are ordering inputs, ignored, and, for an update, this call's attributes."""
    kernel = node.op.kernels["cpu"]
    operands = node.operands
    slots = [i for i, a in enumerate(operands) if isinstance(a, Value)]
    n_out = node.op.n_out
    attrs = node.attrs
    step_slot = node.step_attrs

    def call(*inputs):
        if len(slots) == len(operands):
            args = inputs[:n_inputs]
        else:
            args = list(operands)
            for slot, array in zip(slots, inputs, strict=False):
                args[slot] = array
        kw = attrs if step_slot is None else inputs[-1][step_slot]
        out = kernel(*args, **kw)
        if n_out == 1:
            return (out if type(out) is np.ndarray else np.asarray(out),)
        if n_out == 0:
            return ()
        return tuple(o if type(o) is np.ndarray else np.asarray(o) for o in out)

    call.__name__ = node.name
    return call
