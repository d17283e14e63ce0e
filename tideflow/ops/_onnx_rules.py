"""Builders of ONNX lowering rules (`OpDef.onnx`) that many ops share: the rule kinds that
elementwise ops, reductions and views have in common. The `g` every rule receives is
`tideflow.onnx.Lowering` (see that package's docstring); nothing here imports onnx."""

from __future__ import annotations

from ..framework import dtype as dtypes
from ..framework.errors import UnsupportedError

INT64_MAX = 2**63 - 1  # "to the end" of a dim, whatever its size at run time


def onnx_unary(op_type: str, **attributes):
    """The op is the ONNX op `op_type` on its one operand."""
    return lambda g, x: g.op(op_type, x, **attributes)


def onnx_binary(op_type: str, negate: bool = False):
    """A broadcasting two-operand op: a scalar operand becomes a constant of the dtype of the
    other (tracing casts tensor operands to the computation dtype already). `negate`: the
    ONNX op computes the opposite truth value (ne is Not(Equal))."""

    def rule(g, x, y):
        out = g.op(op_type, *operands_like(g, x, y))
        return g.op("Not", out) if negate else out

    return rule


def operands_like(g, *operands) -> list[str]:
    """`operands` as value names: scalars as constants of the dtype of the first tensor
    operand (of the output when there is none)."""
    like = next((a for a in operands if isinstance(a, str)), g.out[0].dtype)
    return [g.tensor(a, like) for a in operands]


def as_bool(g, x: str) -> str:
    """`x` as a bool tensor (nonzero is true), as NumPy reads truth values."""
    return g.cast(x, dtypes.bool_)


def reshape_target(g, x: str) -> str:
    """ONNX Reshape's target for the node's output from `x`: static dims as they are; one
    that follows the export's dynamic axes 0 (copy the input's) where the input has it at
    the same position, else read off the inputs when it has the size of one of their
    dynamic axes, else -1 (what the other dims leave: one such dim at most)."""
    out, dims = g.out[0].shape, g.meta(x).shape
    open_in, open_out = g.dynamic(x), g.out_dynamic[0]
    pieces: list = []  # per dim: a size, or the name of a tensor holding it
    for i, d in enumerate(out):
        if i not in open_out:
            pieces.append(d)
        elif i in open_in and i < len(dims) and dims[i] == d:
            pieces.append(0)
        else:
            pieces.append(g.out_size(0, i) or -1)
    if pieces.count(-1) > 1:
        raise UnsupportedError(
            f"onnx.export: a reshape to {list(out)} has {pieces.count(-1)} sizes that follow "
            "the dynamic axes as products of them; ONNX's Reshape infers one"
        )
    if all(isinstance(p, int) for p in pieces):
        return g.ints(pieces)
    return g.op("Concat", *(g.ints([p]) if isinstance(p, int) else p for p in pieces), axis=0)


def opset_at_least(g, opset: int, what: str) -> None:
    """Refuse a lowering that needs a newer opset than the export targets."""
    if g.opset < opset:
        raise UnsupportedError(
            f"onnx.export: {what} needs opset {opset} or later, the export targets {g.opset}"
        )


def reduce(g, op_type: str, x: str, axes, keepdims: bool) -> str:
    """ONNX's Reduce* over `axes` (None: every axis). The axes are an input from opset 13
    for ReduceSum and from opset 18 for the others, an attribute before."""
    keep = int(keepdims)
    if axes is None:
        return g.op(op_type, x, keepdims=keep)
    axes = list(axes)
    if not axes:  # no axis: the tensor as it is
        return g.op("Identity", x)
    if op_type == "ReduceSum" or g.opset >= 18:
        return g.op(op_type, x, g.ints(axes), keepdims=keep)
    return g.op(op_type, x, axes=axes, keepdims=keep)


_NARROW_INTS = ("int8", "int16", "uint8")


def in_int32(g, op_type: str, x: str, y: str) -> str:
    """A binary ONNX op that onnxruntime implements for 32- and 64-bit integers only (Pow,
    Max, Min): narrower integers compute in int32 and convert back (exact)."""
    dtype = g.out[0].dtype
    if dtype.name not in _NARROW_INTS:
        return g.op(op_type, x, y)
    wide = g.op(op_type, g.cast(x, dtypes.int32), g.cast(y, dtypes.int32))
    return g.cast(wide, dtype)


def nan_extremum(g, op_type: str, x, y) -> str:
    """ONNX's Max or Min of two operands (scalars as the other's dtype), nan where either is
    for floats, as NumPy's maximum and PyTorch's (OpenVINO's Max returns the other one)."""
    x, y = operands_like(g, x, y)
    out = in_int32(g, op_type, x, y)
    if not g.out[0].dtype.is_floating_point:
        return out
    either = g.op("Or", g.op("IsNaN", x), g.op("IsNaN", y))
    return g.op("Where", either, g.op("Add", x, y), out)  # x + y is nan there


def scalar_of(g, x: str) -> str:
    """A tensor of one element as a 0-d tensor (Squeeze: OpenVINO crashes on Reshape's empty
    target shape)."""
    return g.op("Squeeze", x)
