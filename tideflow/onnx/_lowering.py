"""`Lowering`: what an op's ONNX rule (`OpDef.onnx`) builds the ONNX nodes with, the `g` of
`onnx=lambda g, x: g.op("Exp", x)`. It knows the node being lowered (its output metas, its
scope for naming), the metas of the values it has named, and the opset it targets."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ..framework import dtype as dtypes
from ..framework.dtype import DType
from ..framework.errors import DTypeError
from ..framework.registry import Meta

ELEM_TYPES: dict[str, int] = {
    "bool": TensorProto.BOOL,
    "uint8": TensorProto.UINT8,
    "int8": TensorProto.INT8,
    "int16": TensorProto.INT16,
    "int32": TensorProto.INT32,
    "int64": TensorProto.INT64,
    "float16": TensorProto.FLOAT16,
    "bfloat16": TensorProto.BFLOAT16,
    "float32": TensorProto.FLOAT,
    "float64": TensorProto.DOUBLE,
    "complex64": TensorProto.COMPLEX64,
    "complex128": TensorProto.COMPLEX128,
}


def elem_type(dtype: DType) -> int:
    """The ONNX element type of a tideflow dtype."""
    return ELEM_TYPES[dtype.name]


def tensor_proto(array: np.ndarray, dtype: DType, name: str) -> TensorProto:
    """`array` as an ONNX tensor of `dtype` (bfloat16 by its bits: NumPy has no such type)."""
    # NOTE: np.asarray keeps 0-d arrays 0-d (np.ascontiguousarray makes them 1-d)
    if dtype is dtypes.bfloat16:
        bits = np.asarray(array, order="C").view(np.uint16)
        return helper.make_tensor(name, TensorProto.BFLOAT16, bits.shape, bits.tobytes(), True)
    return numpy_helper.from_array(np.asarray(array, dtype=dtype.np, order="C"), name)


class Lowering:
    """The ONNX graph being built. An op's rule calls:

    - `g.op(op_type, *inputs, outputs=1, **attributes)`: one ONNX node; inputs are value
      names ("" or None for an omitted optional input); returns its output name, or a tuple
      of `outputs` names.
    - `g.constant(value, dtype)`: an initializer holding `value` (array or scalar) as `dtype`;
      `g.ints(values)`: an int64 vector (axes, shapes, pads, as ONNX takes them as inputs).
    - `g.tensor(x, like)`: `x` itself if it is a value name, else a 0-d constant of the dtype
      of `like` (a name or a DType): how scalar operands of the IR enter ONNX;
      `g.cast(x, dtype)`: `x` as a tensor of another dtype.
    - `g.meta(name)`: shape and dtype of an operand; `g.out`: metas of the node's outputs.
    - `g.dynamic(name)`: the dims of an operand whose size follows the export's dynamic axes
      (empty without them); `g.out_dynamic`: those of each output. A rule that writes a
      size into the graph (a reshape's target) must leave these open; `g.out_size(i, d)`
      reads output i's dim d off the inputs when it has the size of one of their dynamic
      axes (a 1-element int64 tensor; None when it has not).
    - `g.opset`: the target opset, for rules whose ONNX form changed between opsets.
    """

    def __init__(self, opset: int, inputs: Sequence[str] = ()) -> None:
        self.opset = opset
        self._inputs = list(inputs)  # the graph's inputs, which dynamic sizes are read off
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[TensorProto] = []
        self.out: tuple[Meta, ...] = ()
        self.out_dynamic: tuple[frozenset[int], ...] = ()
        self._out_sources: tuple[dict, ...] = ()
        self._metas: dict[str, Meta] = {}
        self._dynamic: dict[str, frozenset[int]] = {}
        self._prefix = ""
        self._count = itertools.count()

    # -- the node being lowered ----------------------------------------------------------------
    def begin(self, prefix: str, out: Sequence[Meta], dynamic: Sequence[dict]) -> None:
        """Start lowering an IR node: names made now start with `prefix`; `dynamic`: per
        output, {dim: (input position, axis) it has the size of, or None}."""
        self._prefix = prefix
        self.out = tuple(out)
        self._out_sources = tuple(dynamic)
        self.out_dynamic = tuple(frozenset(d) for d in dynamic)

    def name(self, hint: str = "") -> str:
        return f"{self._prefix}/{hint}{next(self._count)}"

    def note(self, name: str, meta: Meta, dynamic=()) -> None:
        """Record the shape and dtype of a value named `name`, and its dynamic dims."""
        self._metas[name] = meta
        self._dynamic[name] = frozenset(dynamic)

    def meta(self, name: str) -> Meta:
        return self._metas[name]

    def dynamic(self, name: str) -> frozenset[int]:
        return self._dynamic.get(name, frozenset())

    def out_size(self, i: int, d: int) -> str | None:
        source = self._out_sources[i].get(d) if i < len(self._out_sources) else None
        if source is None:
            return None
        k, axis = source
        return self.op("Gather", self.op("Shape", self._inputs[k]), self.ints([axis]))

    # -- building ---------------------------------------------------------------------------
    def op(self, op_type: str, *inputs, outputs: int = 1, **attributes):
        names = [self.name(op_type) for _ in range(outputs)]
        inputs = ["" if i is None else i for i in inputs]
        while inputs and not inputs[-1]:  # omitted trailing optional inputs are left out
            inputs.pop()
        node = helper.make_node(
            op_type,
            inputs,
            names,
            name=self.name(op_type),
            **{k: v for k, v in attributes.items() if v is not None},
        )
        self.nodes.append(node)
        return names[0] if outputs == 1 else tuple(names)

    def cast(self, x: str, dtype: DType) -> str:
        """`x` converted to `dtype` (itself if it has that dtype)."""
        if x in self._metas and self.meta(x).dtype is dtype:
            return x
        return self.op("Cast", x, to=elem_type(dtype))

    def constant(self, value, dtype: DType) -> str:
        array = np.asarray(value)
        if array.dtype.kind == "c" and not dtype.is_complex:
            raise DTypeError(f"onnx.export: a complex constant cannot be {dtype.name}")
        name = self.name("const")
        self.initializers.append(tensor_proto(array.astype(dtype.np), dtype, name))
        self.note(name, Meta(array.shape, dtype))
        return name

    def ints(self, values) -> str:
        return self.constant(np.asarray(values, dtype=np.int64), dtypes.int64)

    def tensor(self, x, like) -> str:
        if isinstance(x, str):
            return x
        dtype = like if isinstance(like, DType) else self.meta(like).dtype
        return self.constant(x, dtype)
