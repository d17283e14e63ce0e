"""ONNX export: a tideflow model as an ONNX file for onnxruntime, OpenVINO, TensorRT and the
other runtimes and compilers that read ONNX (docs/deployment.md).

>>> model = flow.models.MLP([784, 256, 10])
>>> tideflow.onnx.export(model, flow.randn(1, 784), "mlp.onnx", input_names=["x"],
...                      output_names=["logits"], dynamic_axes={"x": [0], "logits": [0]})

The exporter traces the model as `nn.Graph` does and lowers each node of the graph IR by its
op's rule. Needs the `onnx` package (`pip install tideflow[onnx]`).

Lowering an op (one op, one place): its `defop(...)` takes `onnx=rule`, where
`rule(g, *operands, **attrs)` receives the node's operands in the op's positional order
(ONNX value names for tensors; Python scalars and None as the IR holds them) and its
attributes, and returns the name of its output (a tuple of names for several outputs):

    _exp = defop("exp", ..., onnx=lambda g, x: g.op("Exp", x))
    _leaky_relu = defop(..., onnx=lambda g, x, *, alpha: g.op("LeakyRelu", x, alpha=alpha))

`g` is a `Lowering`: `g.op(op_type, *inputs, outputs=1, **attributes)` adds an ONNX node,
`g.constant(value, dtype)` and `g.ints(values)` add initializers, `g.tensor(x, like)` turns a
scalar operand into a constant of `like`'s dtype, `g.meta(name)` and `g.out` give operand
and output shapes and dtypes, `g.dynamic(name)` and `g.out_dynamic` the dims that follow
the export's dynamic axes (a rule writing a size into the graph must leave those open),
`g.opset` the target opset (13-20). Shared rule builders
(elementwise ops, reductions) are in `tideflow/ops/_onnx_rules.py`. An op without a rule
makes `export` raise an `UnsupportedError` naming the op, its module and the user's line;
`coverage()` tells how many registered ops have a rule, `unlowered(model, args)` which
ops a model needs that have none.
"""

from ._coverage import coverage, lowered_ops, unlowered
from ._export import OPSETS, export
from ._lowering import Lowering
from ._trace import is_in_onnx_export

__all__ = [
    "OPSETS",
    "Lowering",
    "coverage",
    "export",
    "is_in_onnx_export",
    "lowered_ops",
    "unlowered",
]
