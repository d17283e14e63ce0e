"""Algebraic simplification: rewrites that remove work and keep every result bit for bit."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ...framework import dtype as dtypes
from ...framework.dtype import DType
from ..ir import OP, Node, Program, Value, remap


def simplify(program: Program) -> Program:
    """Drop the nodes that return an operand unchanged and merge chains into one node:

    - `x * 1`, `1 * x`, `x / 1`, `x - 0`, `x + (-0.0)` (for integers any zero), `neg(neg(x))`,
      a cast to the dtype `x` has;
    - a reshape, view or expand to the shape `x` has, a permute by the identity;
    - a permute of a permute (one permute, or none when they cancel), a reshape or view of a
      reshape or view (one reshape), a cast chain whose middle dtype holds every value of
      the first exactly (one cast).

    "Unchanged" means bitwise, as NumPy computes, which rules out more than algebra suggests:
    float `x + 0.0` turns -0.0 into +0.0; `x * c1 * c2` rounds twice where `x * (c1 * c2)`
    rounds once; `x * -1` keeps a NaN's sign bit where `neg` flips it. Those stay. So does a
    copy of a value whose memory layout is unknown (see `_State.compact`), and
    `sum_to_size` to the same shape (a copy in C order, whatever the input's layout): NumPy's
    reductions round differently on differently laid out arrays of the same values.

    Effectful nodes are never rewritten. Dropped nodes' inputs stay until `dce` removes them.

    >>> print(simplify(program))  # e.g. linear's backward reshapes 2-d gradients no more
    """
    state = _State(program)
    mapping: dict[Value, Value] = {}
    nodes = []
    for node in program.nodes:
        result = _simplified(remap(node, mapping), state)
        if isinstance(result, Value):
            mapping[node.outputs[0]] = result
            continue
        state.add(result)
        nodes.append(result)
    fetches = tuple(mapping.get(v, v) for v in program.fetches)
    return program.replace(nodes=tuple(nodes), fetches=fetches)


def _simplified(node: Node, state: _State) -> Node | Value:
    """An earlier value equal to the node's output, or the cheapest node computing it."""
    while not node.effectful:
        rule = _RULES.get(node.op.name)
        result = None if rule is None else rule(node, state)
        if result is None:
            return node
        if isinstance(result, Value):
            return result
        node = result  # one node instead of a chain: it may simplify further
    return node


class _State:
    """What the rules know about the values of the program built so far."""

    def __init__(self, program: Program) -> None:
        self.constants = program.constants
        self.producers: dict[Value, Node] = {}
        self.roots: dict[Value, Value] = {}  # view -> the value owning its memory
        # Values known to be compact (no gaps, no zero strides, positive strides): kernels
        # allocate their results, and permuting or reshaping a compact array keeps it
        # compact. A copy of a compact array made by an elementwise kernel (which orders its
        # result like its input) has the same strides, so dropping the copy changes nothing
        # any later kernel can see. Feeds and variables may be strided arrays.
        self.compact: set[Value] = set()
        # Values that leave the plan's transient memory: fetched, or read by a node that
        # writes in place.
        self.escaping: set[Value] = set(program.fetches)
        for node in program.nodes:
            if node.op.mutates:
                self.escaping.update(node.inputs)

    def add(self, node: Node) -> None:
        for v in node.outputs:
            self.producers[v] = node
        if not node.op.view:
            self.compact.update(node.outputs)
            return
        base = node.operands[0]
        root = self.roots.get(base, base)
        for v in node.outputs:
            self.roots[v] = root
        if node.op.name in _COMPACT_VIEWS and base in self.compact:
            self.compact.update(node.outputs)

    def may_replace(self, out: Value, value: Value) -> bool:
        """Whether uses of `out` may read `value` instead. An escaping value may only become
        another transient op result: a fetch of a variable or constant (or a view of one)
        would hand the caller memory the plan keeps or writes (see `lower.protect_fetches`),
        and an in-place writer must not start reading what it writes."""
        root = self.roots.get(value, value)
        return out not in self.escaping or root.kind == OP

    def producer(self, value: Value, *names: str) -> Node | None:
        node = self.producers.get(value)
        return node if node is not None and node.op.name in names else None

    def scalar(self, operand):
        """`operand` as a number if it is one: a Python scalar or a one-element constant."""
        if type(operand) in (bool, int, float):
            return operand
        array = self.constants.get(operand) if isinstance(operand, Value) else None
        if array is not None and array.size == 1:
            return array.reshape(())[()]
        return None


_COMPACT_VIEWS = frozenset({"permute", "reshape", "view"})
_Rule = Callable[[Node, _State], "Node | Value | None"]


# -- views ---------------------------------------------------------------------------------
def _views(node: Node, state: _State) -> Node | Value | None:
    """Views that change nothing give their input (same strides: NumPy returns the input's
    layout for an identity reshape, permute or broadcast); chains become one view."""
    x = node.operands[0]
    (out,) = node.outputs
    if node.op.name == "permute":
        if _normalized(node.attrs["dims"]) == tuple(range(len(x.shape))):
            return x if state.may_replace(out, x) else None
        inner = state.producer(x, "permute")
        if inner is None:
            return None
        outer_dims, inner_dims = _normalized(node.attrs["dims"]), _normalized(inner.attrs["dims"])
        dims = tuple(inner_dims[d] for d in outer_dims)
        return Node(node.id, node.op, (inner.operands[0],), {"dims": dims}, node.outputs)
    if out.shape == x.shape:
        return x if state.may_replace(out, x) else None
    if node.op.name == "expand":
        return None
    inner = state.producer(x, "reshape", "view")
    if inner is None:
        return None
    # NOTE: NumPy's reshape views when the strides allow it and copies (in C order) when
    # not. A view's strides depend only on where each element lives, so a view of a view
    # is the direct view. The two-step result differs from the direct one only if the
    # first reshape copies where the direct reshape would view; that cannot happen when the
    # first only splits dims of the final shape (a split never copies).
    if inner.op.name == "reshape" and not _refines(x.shape, out.shape):
        return None
    op = node.op if node.op.name == "reshape" else inner.op  # view only if both are
    return Node(node.id, op, (inner.operands[0],), {"shape": out.shape}, node.outputs)


def _normalized(dims) -> tuple[int, ...]:
    return tuple(d % len(dims) for d in dims)


def _refines(fine: tuple[int, ...], coarse: tuple[int, ...]) -> bool:
    """Whether `coarse` merges runs of consecutive dims of `fine` (dims of size 1 aside)."""
    if 0 in fine or 0 in coarse:
        return False
    rest = iter(d for d in fine if d != 1)
    for size in (d for d in coarse if d != 1):
        product = 1
        while product < size:
            product *= next(rest, size + 1)
        if product != size:
            return False
    return next(rest, None) is None


# -- arithmetic ----------------------------------------------------------------------------
def _arithmetic(node: Node, state: _State) -> Value | None:
    """`x * 1`, `x / 1`, `x - 0`, `x + (-0.0)`: the result is `x` when no broadcasting or
    promotion happens and the other operand is a scalar (so it cannot reorder the layout of
    the kernel's result)."""
    name = node.op.name
    (out,) = node.outputs
    positions = (0, 1) if name in ("mul", "add") else (0,)
    for i in positions:
        x, other = node.operands[i], node.operands[1 - i]
        if not (
            isinstance(x, Value)
            and x.shape == out.shape
            and x.dtype is out.dtype
            and x in state.compact
            and (not isinstance(other, Value) or other.dtype is x.dtype)
        ):
            continue
        c = state.scalar(other)
        if c is not None and _neutral(name, c, x.dtype) and state.may_replace(out, x):
            return x
    return None


def _neutral(name: str, c, dtype: DType) -> bool:
    """Whether `x <name> c` is `x` bit for bit for every `x` of `dtype`."""
    if name in ("mul", "div"):
        return bool(c == 1)
    if c != 0:
        return False
    if dtype.is_complex:  # a real 0 adds +0.0 to the imaginary part too: -0.0 turns +0.0
        return False
    if not dtype.is_floating_point:
        return True
    # NOTE: -0.0 + 0.0 is +0.0 and -0.0 - (-0.0) is +0.0; x + (-0.0) and x - 0.0 are x.
    negative = bool(np.signbit(c))
    return negative if name == "add" else not negative


def _double_negation(node: Node, state: _State) -> Value | None:
    inner = state.producer(node.operands[0], "neg")
    if inner is None:
        return None
    x = inner.operands[0]
    return x if x in state.compact and state.may_replace(node.outputs[0], x) else None


# -- casts ---------------------------------------------------------------------------------
def _cast(node: Node, state: _State) -> Node | Value | None:
    x = node.operands[0]
    (out,) = node.outputs
    target = node.attrs["dtype"]
    if x.dtype is target:
        return x if x in state.compact and state.may_replace(out, x) else None
    inner = state.producer(x, "cast")
    if inner is None:
        return None
    source = inner.operands[0].dtype
    if not _chain_exact(source, x.dtype, target):
        return None
    return Node(node.id, node.op, (inner.operands[0],), {"dtype": target}, node.outputs)


_EXACTLY_IN: dict[DType, frozenset[DType]] = {
    dtypes.bool_: frozenset(dtypes.ALL) - {dtypes.bool_},
    dtypes.uint8: frozenset({dtypes.int16, dtypes.int32, dtypes.int64, *dtypes.FLOATING}),
    dtypes.int8: frozenset({dtypes.int16, dtypes.int32, dtypes.int64, *dtypes.FLOATING}),
    dtypes.int16: frozenset({dtypes.int32, dtypes.int64, dtypes.float32, dtypes.float64}),
    dtypes.int32: frozenset({dtypes.int64, dtypes.float64}),
    dtypes.int64: frozenset(),
    dtypes.float16: frozenset({dtypes.float32, dtypes.float64}),
    dtypes.bfloat16: frozenset({dtypes.float32, dtypes.float64}),
    dtypes.float32: frozenset({dtypes.float64}),
    dtypes.float64: frozenset(),
}


def _chain_exact(a: DType, b: DType, c: DType) -> bool:
    """Whether casting a -> b -> c equals casting a -> c for every value of `a`.

    When b holds every value of a exactly, both casts to c start from the same number, and
    give the same result where that conversion depends only on the number: rounding to
    float32/float64 (correctly rounded in hardware), truth to bool, and integer to integer
    (wrapping). Float to integer out of range, and conversions to float16/bfloat16 (which
    may round through another type), depend on the source type: those chains are kept."""
    if b not in _EXACTLY_IN[a]:
        return False
    if c in (dtypes.float32, dtypes.float64, dtypes.bool_):
        return True
    return c in dtypes.INTEGRAL and not b.is_floating_point


_RULES: dict[str, _Rule] = {
    "reshape": _views,
    "view": _views,
    "expand": _views,
    "permute": _views,
    "mul": _arithmetic,
    "div": _arithmetic,
    "add": _arithmetic,
    "sub": _arithmetic,
    "neg": _double_negation,
    "cast": _cast,
}
