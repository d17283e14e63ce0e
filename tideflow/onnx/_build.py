"""A traced program as an ONNX ModelProto: feeds, variables and constants as graph inputs and
initializers, each node lowered by its op's rule (`OpDef.onnx`)."""

from __future__ import annotations

from dataclasses import dataclass

import onnx
from onnx import helper

from ..compiler.ir import Program, Value
from ..framework.errors import ArgumentError, UnsupportedError
from ._lowering import Lowering, elem_type, tensor_proto

_STATIC: dict = {}


@dataclass(frozen=True)
class Signature:
    """How the exported graph is called: the names of its inputs and outputs, the symbolic
    names of their dynamic dims (name -> {axis: symbol}), and what it targets."""

    inputs: list[str]
    outputs: list[str]
    axes: dict[str, dict[int, str]]
    opset: int
    export_params: bool
    prefix: str  # what variable names carry beyond `state_dict()`'s ("model." for a module)


def build(
    program: Program, sig: Signature, dynamic: dict, sites: dict, fills: dict | None = None
) -> onnx.ModelProto:
    """The ModelProto of `program`. `dynamic`: value -> its dims that follow the dynamic
    axes; `sites`: value -> the user's line that made it (for unlowered ops' errors);
    `fills`: constants built when the graph runs (`_trace.Fill`)."""
    fills = fills or {}
    dynamic = {**dynamic, **{v: fill.dynamic for v, fill in fills.items()}}
    g = Lowering(sig.opset, sig.inputs)
    names: dict[Value, str] = {}
    inputs, initializers = _sources(program, sig, fills, names)
    for value, name in names.items():
        g.note(name, value.meta, dynamic.get(value, _STATIC))
    for value, fill in fills.items():
        names[value] = _filled(g, value, fill)
    for node in program.nodes:
        if node.op.onnx is None:
            raise UnsupportedError(_unlowered(node, sites, sig.prefix))
        outs = node.outputs
        path = module_path(node, sig.prefix)
        g.begin(
            f"/{path}/{node.name}" if path else f"/{node.name}",
            [v.meta for v in outs],
            [dynamic.get(v, _STATIC) for v in outs],
        )
        operands = [names[a] if isinstance(a, Value) else a for a in node.operands]
        try:
            result = node.op.onnx(g, *operands, **node.attrs)
        except UnsupportedError as refusal:  # the rule's reason, and where the call was
            raise UnsupportedError(_refused(node, sites, sig.prefix, refusal)) from refusal
        for value, name in zip(outs, (result,) if isinstance(result, str) else result, strict=True):
            names[value] = name
            g.note(name, value.meta, dynamic.get(value, _STATIC))
    outputs = []
    for value, name in zip(program.fetches, sig.outputs, strict=True):
        g.nodes.append(helper.make_node("Identity", [names[value]], [name], name=f"/{name}"))
        # NOTE: dims that follow the dynamic axes are dynamic whether declared or not
        found = {d: f"{name}_dynamic_axes_{d + 1}" for d in dynamic.get(value, ())}
        outputs.append(_value_info(name, value, {**found, **sig.axes.get(name, {})}))
    nodes, initializers = _live(g.nodes, initializers + g.initializers, sig.outputs)
    body = helper.make_graph(nodes, "tideflow", inputs, outputs, initializer=initializers)
    opsets = [helper.make_opsetid("", sig.opset)]
    return helper.make_model(
        body,
        opset_imports=opsets,
        producer_name="tideflow",
        ir_version=helper.find_min_ir_version_for(opsets),
    )


def _sources(program: Program, sig: Signature, fills: dict, names: dict) -> tuple[list, list]:
    """The graph's inputs (feeds; variables too without `export_params`) and initializers
    (variables, constants), their names recorded in `names`."""
    inputs, initializers = [], []
    for value, name in zip(program.feeds, sig.inputs, strict=True):
        names[value] = name
        inputs.append(_value_info(name, value, sig.axes.get(name, {})))
    for var in program.variables.values():
        name = names[var.value] = var.name.removeprefix(sig.prefix)
        if sig.export_params:
            initializers.append(tensor_proto(var.holder.array, var.value.dtype, name))
        else:
            inputs.append(_value_info(name, var.value, {}))
    for value, array in program.constants.items():
        if value not in fills:
            names[value] = f"constant_{value.id}"
            initializers.append(tensor_proto(array, value.dtype, names[value]))
    return inputs, initializers


def _filled(g: Lowering, value: Value, fill) -> str:
    """The fill's value expanded to its shape, the dynamic sizes read off the inputs."""
    g.begin(f"/constant_{value.id}", [value.meta], [fill.dynamic])
    sizes = [
        g.ints([d]) if isinstance(d, int) else g.out_size(0, i) for i, d in enumerate(fill.dims)
    ]
    name = g.op("Expand", g.constant(fill.value, value.dtype), g.op("Concat", *sizes, axis=0))
    g.note(name, value.meta, fill.dynamic)
    return name


def _live(nodes: list, initializers: list, outputs: list[str]) -> tuple[list, list]:
    """The nodes the outputs need and the initializers they read: rules may make values no
    output uses (layer_norm's statistics, the gradient weights of an embedding)."""
    needed = set(outputs)
    kept = []
    for node in reversed(nodes):
        if needed.intersection(node.output):
            kept.append(node)
            needed.update(node.input)
    kept.reverse()
    return kept, [t for t in initializers if t.name in needed]


def module_path(node, prefix: str) -> str:
    """The dotted path of the module that made `node`, as `named_modules()` gives it."""
    module = node.scope.module if node.scope is not None else ""
    return (module + ".").removeprefix(prefix).removesuffix(".")


def same_graph(first: onnx.ModelProto, second: onnx.ModelProto) -> None:
    """Raise unless two exports at different sizes of the dynamic axes built the same graph
    (every node, attribute and initializer): a size baked into either would be wrong at
    other sizes."""
    a, b = first.graph, second.graph
    for x, y in zip(a.node, b.node, strict=False):
        if x.SerializeToString() != y.SerializeToString():
            raise _baked(x.name, f"its {x.op_type} node's attributes or inputs")
    if len(a.node) != len(b.node):
        raise _baked(a.node[min(len(a.node), len(b.node)) - 1].name, "the nodes after it")
    second_inits = {t.name: t for t in b.initializer}
    for t in a.initializer:
        other = second_inits.get(t.name)
        if other is None or t.SerializeToString() != other.SerializeToString():
            reader = next((n.name for n in a.node if t.name in n.input), t.name)
            raise _baked(reader, f"the constant {t.name!r} it reads")


def _baked(where: str, what: str) -> UnsupportedError:
    return UnsupportedError(
        f"onnx.export: {where}: {what} change with the size of the dynamic axes. Values "
        "computed in Python from a size (arange(n), a mask built for x.shape) are fixed at "
        "export; pass them as inputs, or leave that axis static"
    )


def _value_info(name: str, value: Value, axes: dict[int, str]) -> onnx.ValueInfoProto:
    ndim = len(value.shape)
    if any(not -ndim <= a < ndim for a in axes):
        raise ArgumentError(
            f"onnx.export: dynamic axes {sorted(axes)} of {name!r}, which has shape "
            f"{list(value.shape)}"
        )
    dims = [axes.get(i, axes.get(i - ndim, d)) for i, d in enumerate(value.shape)]
    return helper.make_tensor_value_info(name, elem_type(value.dtype), dims)


def _unlowered(node, sites: dict, prefix: str) -> str:
    return (
        f"onnx.export: op {node.op.name!r} has no ONNX lowering ({_where(node, sites, prefix)}). "
        "Ops are exportable when their definition gives an onnx= rule (see tideflow.onnx)."
    )


def _refused(node, sites: dict, prefix: str, refusal: UnsupportedError) -> str:
    reason = str(refusal).removeprefix("onnx.export: ")
    return (
        f"onnx.export: op {node.op.name!r} cannot be exported here "
        f"({_where(node, sites, prefix)}): {reason}"
    )


def _where(node, sites: dict, prefix: str) -> str:
    module = module_path(node, prefix) or "(the model itself)"
    line = next((str(sites[v]) for v in node.outputs if sites.get(v)), "<unknown>")
    return f"module {module!r}, at {line}"
