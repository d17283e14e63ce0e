"""The graph IR: a program of SSA values and the op nodes that compute them.

A `Program` is what tracing `nn.Graph.build` produces and what every pass maps to a new
program. Values are defined once: by a node, or as a source of the program:

- feeds: the graph's tensor inputs, in call order;
- variables: state that outlives one call (parameters, buffers, optimizer state), read from a
  holder's `.array` at the start of each call and written in place by nodes that mutate them;
- constants: arrays fixed at compile time (tensors captured from Python, folded results).

A node applies one registered op (`framework.registry.OpDef`) to its operands (values, Python
scalars or None, in the op's positional order) with keyword attributes, exactly as the eager
dispatcher would call its kernel. Operand dtypes are explicit: tracing inserts the casts that
eager promotion performs, so a node's kernel sees arrays of the dtypes its inputs declare.

A global tensor's value is this rank's shard (its shape is the shard's) and carries the
tensor's placement and n-D SBP; they are None for local values. Nodes
traced from `nn.Graph.build` carry a `Scope`: the module that produced them and its config.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

import numpy as np

from ..framework.dtype import DType
from ..framework.random import Generator
from ..framework.registry import Meta, OpDef
from ..framework.tensor import raw_data
from ..parallel.sbp import describe

FEED, VARIABLE, CONSTANT, OP = "feed", "variable", "constant", "op"
FORWARD, BACKWARD, RECOMPUTE = "forward", "backward", "recompute"


class Value:
    """One SSA value: shape, dtype, layout, and where it comes from (`kind`: feed, variable,
    constant, or op). Values are immutable and shared between a program and the programs
    passes derive from it."""

    __slots__ = ("dtype", "id", "kind", "label", "placement", "sbp", "shape")

    def __init__(
        self,
        id: int,
        shape: tuple[int, ...],
        dtype: DType | None,
        kind: str,
        *,
        label: str = "",
        placement=None,
        sbp=None,
    ) -> None:
        self.id = id
        self.shape = tuple(shape)
        self.dtype = dtype  # None only for the per-call attribute feed (host objects)
        self.kind = kind
        self.label = label  # a feed's position or a variable's name, for printing
        self.placement = placement
        self.sbp = sbp

    @property
    def meta(self) -> Meta:
        return Meta(self.shape, self.dtype)

    @property
    def nbytes(self) -> int:
        return 0 if self.dtype is None else math.prod(self.shape) * self.dtype.itemsize

    def type_str(self) -> str:
        if self.dtype is None:
            return "attrs"
        layout = (
            ""
            if self.placement is None
            else f" on {self.placement.ranks.tolist()} {describe(self.sbp)}"
        )
        return f"{self.dtype.name}[{', '.join(map(str, self.shape))}]{layout}"

    def __repr__(self) -> str:
        return f"%{self.id}"


@dataclass(frozen=True)
class Scope:
    """Where a traced node comes from: the module whose forward was running (its dotted path
    in the graph, "" for build() itself), that module's pipeline stage (inherited from the
    enclosing modules when it sets none), the activation-checkpointing segment it belongs to
    (one per call of the outermost checkpointed module, None outside them), the phase: the
    forward computation, the backward of a forward node of that scope, or a forward node
    recomputed for the backward (`passes.checkpoint`), the micro-batch of gradient
    accumulation it computes (None without accumulation), and whether it all-gathers a
    parameter that ZeRO stage 3 keeps sharded between steps (`passes.regather`)."""

    module: str = ""
    stage_id: int | None = None
    checkpoint: int | None = None
    phase: str = FORWARD
    micro_batch: int | None = None
    gather: bool = False

    def __str__(self) -> str:
        parts = [self.module or "build"]
        if self.micro_batch is not None:
            parts.append(f"micro-batch {self.micro_batch}")
        if self.stage_id is not None:
            parts.append(f"stage {self.stage_id}")
        if self.checkpoint is not None:
            parts.append(f"checkpoint {self.checkpoint}")
        if self.phase != FORWARD:
            parts.append(self.phase)
        if self.gather:
            parts.append("parameter gather")
        return ", ".join(parts)


class Node:
    """`outputs = op(*operands, **attrs)`. `step_attrs` is set on optimizer updates, whose
    attributes (learning rate, step count) change from call to call: the node then reads
    them from the program's per-call attribute feed at that position. `scope` is None for
    nodes made by the compiler rather than traced from a graph's build()."""

    __slots__ = ("attrs", "id", "op", "operands", "outputs", "scope", "step_attrs")

    def __init__(
        self,
        id: int,
        op: OpDef,
        operands: tuple,
        attrs: dict,
        outputs: tuple[Value, ...] = (),
        step_attrs: int | None = None,
        scope: Scope | None = None,
    ) -> None:
        self.id = id
        self.op = op
        self.operands = operands
        self.attrs = attrs
        self.outputs = outputs
        self.step_attrs = step_attrs
        self.scope = scope

    @property
    def name(self) -> str:
        """The op name and node id: how tasks and errors refer to this node."""
        return f"{self.op.name}_{self.id}"

    @property
    def inputs(self) -> tuple[Value, ...]:
        return tuple(a for a in self.operands if isinstance(a, Value))

    def with_operands(self, operands: tuple) -> Node:
        """This node with other operands: same id, attributes, output values and scope."""
        return Node(
            self.id, self.op, operands, self.attrs, self.outputs, self.step_attrs, self.scope
        )

    @property
    def effectful(self) -> bool:
        """Whether running the node matters beyond its outputs: it writes operands in place,
        draws from a random generator (removing or merging it would change the stream of
        numbers later draws see, and with it graph == eager), or takes part in a collective
        (every rank of its group must run it)."""
        return (
            bool(self.op.mutates)
            or self.op.communicates
            or self.op.n_out == 0
            or self.step_attrs is not None
            or any(isinstance(v, Generator) for v in self.attrs.values())
        )

    def __repr__(self) -> str:
        return f"<node {self.name}>"


@dataclass(frozen=True)
class Variable:
    """A state tensor the program reads (and may write in place) every call; `holder.array`
    is its current NumPy array, shared with the eager tensor it came from."""

    name: str
    value: Value
    holder: object


class TensorHolder:
    """A variable's holder for a tensor: its current array, whatever replaced it since (read
    from the slot: the plan must not wait for its own runs, see `tensor.raw_data`)."""

    __slots__ = ("tensor",)

    def __init__(self, tensor) -> None:
        self.tensor = tensor

    @property
    def array(self) -> np.ndarray:
        return raw_data(self.tensor)


@dataclass(frozen=True)
class MemoryPlan:
    """Buffer assignment by liveness (see `passes.memory`): `buffers[value]` is the index of
    the buffer a value's array may live in; `buffer_bytes[i]` the size of buffer i."""

    buffers: dict[Value, int]
    buffer_bytes: tuple[int, ...]
    peak_bytes: int  # the most bytes of transient arrays alive at once
    unshared_bytes: int  # the bytes of transient arrays without any reuse
    persistent_bytes: int  # variables and constants

    @property
    def pool_bytes(self) -> int:
        return sum(self.buffer_bytes)

    def summary(self) -> str:
        return (
            f"memory: peak {_bytes(self.peak_bytes)} of transient arrays, "
            f"{len(self.buffer_bytes)} buffers of {_bytes(self.pool_bytes)} "
            f"(without reuse {_bytes(self.unshared_bytes)}), "
            f"persistent {_bytes(self.persistent_bytes)}"
        )


def _bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB"):
        if n < 1024:
            return f"{n:.4g} {unit}"
        n /= 1024
    return f"{n:.4g} GiB"


@dataclass(frozen=True)
class Program:
    """A traced graph. Passes return new programs (`replace`) and never edit one in place,
    so `graph.debug()` can print the program before and after each pass."""

    feeds: tuple[Value, ...]
    variables: dict[str, Variable]
    constants: dict[Value, np.ndarray]
    nodes: tuple[Node, ...]
    fetches: tuple[Value, ...]
    step_attrs: Value | None = None  # the per-call attribute feed of optimizer updates
    memory: MemoryPlan | None = None
    ids: Iterator[int] = field(default_factory=itertools.count, repr=False, compare=False)

    def replace(self, **changes) -> Program:
        return replace(self, **changes)

    # -- building -----------------------------------------------------------------------
    def new_value(self, shape, dtype, kind: str, **kw) -> Value:
        return Value(next(self.ids), shape, dtype, kind, **kw)

    def new_node(self, op: OpDef, operands: tuple, attrs: dict, metas, **kw) -> Node:
        """A node whose outputs are fresh values with the given metas."""
        node = Node(next(self.ids), op, operands, attrs, **kw)
        node.outputs = tuple(self.new_value(m.shape, m.dtype, OP) for m in metas)
        return node

    def new_constant(self, array: np.ndarray, dtype: DType) -> Value:
        return self.new_value(array.shape, dtype, CONSTANT)

    # -- printing -----------------------------------------------------------------------
    def __str__(self) -> str:
        lines = ["program("]
        for v in self.feeds:
            lines.append(f"    {v}: {v.type_str()} = feed {v.label}")
        if self.step_attrs is not None:
            lines.append(f"    {self.step_attrs}: attrs = per-call attributes")
        for var in self.variables.values():
            v = var.value
            lines.append(f"    {v}: {v.type_str()} = variable {var.name}")
        for v in self.constants:
            lines.append(f"    {v}: {v.type_str()} = constant")
        lines.append("):")
        for node in self.nodes:
            lines.append("    " + _format_node(node))
        lines.append(f"    return ({', '.join(map(repr, self.fetches))})")
        if self.memory is not None:
            lines.append("# " + self.memory.summary())
        return "\n".join(lines)


def remap(node: Node, mapping: dict[Value, Value]) -> Node:
    """`node` with each operand that is a key of `mapping` replaced by its value."""
    if not any(isinstance(a, Value) and a in mapping for a in node.operands):
        return node
    return node.with_operands(
        tuple(mapping.get(a, a) if isinstance(a, Value) else a for a in node.operands)
    )


def _format_node(node: Node) -> str:
    args = ", ".join(map(repr, node.operands))
    attrs = ", ".join(f"{k}={_format_attr(v)}" for k, v in node.attrs.items())
    call = f"{node.op.name}({args})" + (f" {{{attrs}}}" if attrs else "")
    if node.step_attrs is not None:
        call += f" per-call attrs [{node.step_attrs}]"
    if node.scope is not None:
        call += f"  # {node.scope}"
    if not node.outputs:
        return call
    outs = ", ".join(f"{v}: {v.type_str()}" for v in node.outputs)
    return f"{outs} = {call}"


def _format_attr(v) -> str:
    if isinstance(v, DType):
        return v.name
    if isinstance(v, Generator):
        return "<generator>"
    return repr(v)
