"""Cast/scale fusion (OneFlow's `fuse_cast_scale`): a float cast and a multiplication by a
scalar, next to each other, become one node that reads the input once and writes the result
once, as AMP's unscaling produces (a float16 gradient cast to the float32 master weight's
dtype, then multiplied by 1/scale)."""

from __future__ import annotations

import numpy as np

from ...framework import dtype as dtypes
from ...framework.registry import Meta, OpDef, get_op
from ...framework.sbp import B, S, Signature
from ..ir import Node, Program, Value

# NOTE: float32/float64 products only. NumPy computes a float16 product in float16 and
# ml_dtypes a bfloat16 one with a Python scalar in float32: a fused kernel computing in the
# product's dtype would round those differently from the pair it replaces.
_COMPUTE = (dtypes.float32, dtypes.float64)
_FLOATS = (dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64)


def _cast_scale_kernel(x: np.ndarray, scale, *, compute: dtypes.DType, dtype: dtypes.DType):
    out = np.empty(x.shape, dtype.np)
    # NOTE: `dtype=` casts the operands to the product's dtype inside the ufunc loop (as
    # `astype` would), and `out=` rounds to the result's dtype as it writes.
    return np.multiply(x, scale, out=out, dtype=compute.np, casting="unsafe")


def _cast_scale_sbp(x, scale, **_) -> list[Signature]:
    """Elementwise in `x`; the scalar scale whole everywhere."""
    other = B if isinstance(scale, Meta) else None
    splits = [Signature((S(i), other), (S(i),)) for i in range(len(x.shape))]
    return [Signature((B, other), (B,)), *splits]


# `x` cast to `compute`, times `scale`, rounded to `dtype`: a cast then a multiplication
# (`dtype` is `compute`), or a multiplication then a cast (`x` already has `compute`).
CAST_SCALE = OpDef(
    "cast_scale",
    inputs=("input", "scale"),
    meta=lambda x, scale, *, compute, dtype: Meta(x.shape, dtype),
    sbp=_cast_scale_sbp,
    kernels={"cpu": _cast_scale_kernel},
    differentiable=False,
)


def fuse_cast_scale(program: Program) -> Program:
    """Merge `mul(cast(x), s)` and `cast(mul(x, s))` into `cast_scale(x, s)` when the inner
    node's result is read by the outer one only, the casts are between float dtypes, the
    product is float32 or float64 and `s` is a Python number or a 0-d value of the product's
    dtype. Results are bit for bit those of the pair.

    >>> print(fuse_cast_scale(program))  # %7 = cast_scale(%3, %6) {compute=float32, ...}
    """
    readers = _readers(program)
    fetched = set(program.fetches)
    producer = {v: node for node in program.nodes for v in node.outputs}
    mul, cast = get_op("mul"), get_op("cast")
    fused: dict[Node, Node] = {}  # outer node -> its replacement
    absorbed: set[Node] = set()  # inner nodes merged into a replacement
    for node in program.nodes:
        if node.op is mul:  # mul(cast(x), s)
            scaled = _scaled_operand(node)
            inner = producer.get(scaled[0]) if scaled else None
            if (
                inner is not None
                and inner.op is cast
                and inner.operands[0].dtype in _FLOATS
                and _sole_reader(inner, node, readers, fetched)
            ):
                dtype = node.outputs[0].dtype
                fused[node] = _fused(node, inner.operands[0], scaled[1], dtype, dtype)
                absorbed.add(inner)
        elif node.op is cast and node.outputs[0].dtype in _FLOATS:  # cast(mul(x, s))
            inner = producer.get(node.operands[0])
            scaled = _scaled_operand(inner) if inner is not None and inner.op is mul else None
            if (
                scaled
                and inner not in fused
                and inner not in absorbed
                and _sole_reader(inner, node, readers, fetched)
            ):
                compute = inner.outputs[0].dtype
                fused[node] = _fused(node, *scaled, compute, node.outputs[0].dtype)
                absorbed.add(inner)
    if not fused:
        return program
    nodes = tuple(fused.get(n, n) for n in program.nodes if n not in absorbed)
    return program.replace(nodes=nodes)


def _scaled_operand(node: Node) -> tuple[Value, object] | None:
    """(x, s) when `node` multiplies a float32/float64 value `x` by another scalar `s`."""
    out = node.outputs[0]
    if out.dtype not in _COMPUTE:
        return None
    a, b = node.operands
    for x, s in ((a, b), (b, a)):
        if (
            isinstance(x, Value)
            and x is not s
            and x.shape == out.shape
            and x.dtype is out.dtype
            and _is_scalar(s, out.dtype)
        ):
            return x, s
    return None


def _is_scalar(s, dtype: dtypes.DType) -> bool:
    if isinstance(s, Value):
        return s.shape == () and s.dtype is dtype
    return isinstance(s, int | float) and not isinstance(s, bool)


def _sole_reader(inner: Node, outer: Node, readers: dict, fetched: set) -> bool:
    v = inner.outputs[0]
    return not inner.effectful and v not in fetched and readers.get(v) == [outer]


def _readers(program: Program) -> dict[Value, list[Node]]:
    readers: dict[Value, list[Node]] = {}
    for node in program.nodes:
        for v in dict.fromkeys(node.inputs):
            readers.setdefault(v, []).append(node)
    return readers


def _fused(outer: Node, x: Value, s, compute: dtypes.DType, dtype: dtypes.DType) -> Node:
    """The `cast_scale` node taking `outer`'s place: same id and output value."""
    return Node(outer.id, CAST_SCALE, (x, s), {"compute": compute, "dtype": dtype}, outer.outputs)
