"""Lowering: a Program becomes the runtime's `PlanSpec`.

- each feed becomes a feed task `feed:<i>`; the per-call attributes of optimizer updates
  arrive through one more feed, `feed:attrs`, last;
- each variable becomes a variable task `var:<name>` reading its holder every run;
  constants are variables too (`var:const:<id>`), holding their array;
- the nodes become chains (`chain.py`): maximal runs of consecutive nodes on one stream,
  each one task `chain:<i>` that runs its nodes' kernels in program order. Nodes that
  communicate (collectives, sends and receives) run on the communication stream, the rest
  on the compute stream, so a collective runs while the compute after it that does not
  need its result goes on (data parallelism's gradient all-reduces overlap the backward of
  the layers before). Both streams run their chains in program order, iteration after
  iteration (`PlanSpec.in_order`): every rank then calls its collectives in the order it
  traced them, and the plan keeps the step's sequential order on each stream.

A task writing a variable in place declares it (`TaskSpec.mutates`): the runtime orders the
write against the variable's other readers and gives the next iteration the variable only
after it. Inside a chain, program order already orders writes and reads of views. A fetched
view of a written variable, or a fetched constant, is copied by a `clone` node, so the caller
never holds memory the plan writes or keeps.
"""

from __future__ import annotations

import numpy as np

from ..framework.registry import get_op
from ..runtime import PlanSpec, TaskSpec
from .aliases import alias_roots
from .chain import Chain
from .ir import CONSTANT, Node, Program, Value

ATTRS_FEED = "feed:attrs"
COMPUTE_STREAM = "compute"
COMM_STREAM = "comm"


class _ConstantHolder:
    __slots__ = ("array",)

    def __init__(self, array: np.ndarray) -> None:
        self.array = array


def lower(program: Program, quota: int = 2, timed: bool = False) -> PlanSpec:
    """The plan running `program`: `executor.run((*feed_arrays, step_attrs))` returns its
    fetches (`step_attrs` only when the program has optimizer updates).

    >>> plan = lower(run_passes(program))
    >>> with Executor(plan) as executor:
    ...     outputs = executor.run(feed_arrays).result()
    """
    program = protect_fetches(program)
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

    chains = _runs_by_stream(program.nodes)
    read_later = _read_after([nodes for _, nodes in chains], program.fetches)
    for i, (stream, nodes) in enumerate(chains):
        name = f"chain:{i}"
        inputs = _chain_inputs(nodes, program.step_attrs)
        outputs = [v for node in nodes for v in node.outputs if v in read_later[i]]
        written = {node.operands[j] for node in nodes for j in node.op.mutates}
        tasks.append(
            TaskSpec(
                name,
                Chain(nodes, inputs, outputs, program.step_attrs, timed),
                tuple(sources[v] for v in inputs),
                len(outputs),
                stream=stream,
                mutates=tuple(j for j, v in enumerate(inputs) if v in written),
                after=_look_ahead(chains, i),
            )
        )
        sources.update((v, (name, j)) for j, v in enumerate(outputs))
    fetches = tuple(sources[v] for v in program.fetches)
    in_order = frozenset((COMPUTE_STREAM, COMM_STREAM))
    return PlanSpec(tuple(tasks), tuple(feeds), fetches, variables, quota, in_order)


def _runs_by_stream(nodes: tuple[Node, ...]) -> list[tuple[str, tuple[Node, ...]]]:
    """(stream, nodes) for each maximal run of consecutive nodes on one stream."""
    runs: list[tuple[str, list[Node]]] = []
    for node in nodes:
        stream = COMM_STREAM if node.op.communicates else COMPUTE_STREAM
        if not runs or runs[-1][0] != stream:
            runs.append((stream, []))
        runs[-1][1].append(node)
    return [(stream, tuple(run)) for stream, run in runs]


def _look_ahead(chains: list[tuple[str, tuple[Node, ...]]], i: int) -> tuple[str, ...]:
    """What communicating chain `i` waits for besides its inputs: the compute chain before
    the previous one. Streams alternate, so that is chain i-3, and communication runs at
    most one compute chain ahead of where the program has it (a layer's gather beside the
    layer before it). Unbounded, communication that reads only variables (ZeRO-3's gathers)
    or nothing (receives) would all run at the start of the step, holding every gathered
    parameter and received activation at once."""
    if chains[i][0] != COMM_STREAM or i < 3:
        return ()
    return (f"chain:{i - 3}",)


def _chain_inputs(nodes: tuple[Node, ...], step_attrs: Value | None) -> list[Value]:
    """The values the chain's nodes read that none of them defines, in first-use order."""
    defined = {v for node in nodes for v in node.outputs}
    inputs: dict[Value, None] = {}
    for node in nodes:
        for v in node.inputs:
            if v not in defined:
                inputs[v] = None
        if node.step_attrs is not None:
            inputs[step_attrs] = None
    return list(inputs)


def _read_after(chains: list, fetches: tuple[Value, ...]) -> list[set[Value]]:
    """Per chain, the values read by a later chain or fetched (the chain's outputs)."""
    later: set[Value] = set(fetches)
    read_after: list[set[Value]] = [set() for _ in chains]
    for i in range(len(chains) - 1, -1, -1):
        read_after[i] = set(later)
        later.update(v for node in chains[i] for v in node.inputs)
    return read_after


def protect_fetches(program: Program) -> Program:
    """Fetch a copy (a `clone` node) of every fetched value whose memory the plan keeps or
    writes: constants and their views, and views of variables written in place."""
    roots = alias_roots(program)
    written = {node.operands[i] for node in program.nodes for i in node.op.mutates}
    clone = get_op("clone")
    copies: dict[Value, Node] = {}  # fetched value -> its copy
    fetches = []
    for v in program.fetches:
        root = roots.get(v, v)
        if root.kind == CONSTANT or (root is not v and root in written):
            if v not in copies:
                copies[v] = program.new_node(clone, (v,), {}, (v.meta,))
            v = copies[v].outputs[0]
        fetches.append(v)
    if not copies:
        return program
    # NOTE: each copy right where its value is made (sources: first), before any writer
    # after it: they read what the step computed, not what a later update leaves.
    nodes = [copies[v] for v in copies if not any(v in n.outputs for n in program.nodes)]
    for node in program.nodes:
        nodes.append(node)
        nodes += [copies[v] for v in node.outputs if v in copies]
    return program.replace(nodes=tuple(nodes), fetches=tuple(fetches))
