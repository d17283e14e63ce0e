"""`export`: an nn.Module or inference nn.Graph as an ONNX model, from the graph IR.

The model is traced exactly as `nn.Graph` traces it for a plan, the passes that keep every
result (constant folding, simplification, CSE, DCE) run over the program, and each node is
handed to its op's lowering (`OpDef.onnx`). With dynamic axes the model is traced a second
time with those axes one longer: the two traces tell which dims of each value follow them
(what a reshape's target must leave open), and the two graphs they lower to must be the
same, or a size was fixed in Python and the export refuses."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import onnx

from ..framework.errors import ArgumentError, TideflowError
from ..framework.tensor import Tensor
from ..nn.graph import Graph
from ..nn.graph.structure import flatten_inputs
from ..nn.modules.module import Module
from ._build import Signature, build, same_graph
from ._trace import dynamic_dims, fills, resized, trace_error, traced

OPSETS = range(13, 21)  # the opsets lowerings are written for
_PROTOBUF_LIMIT = 2**31  # a ModelProto larger than this cannot be serialized in one piece


class _ModuleGraph(Graph):
    """A module's forward as an inference graph."""

    def __init__(self, model: Module) -> None:
        super().__init__()
        self.model = model

    def build(self, *args, **kwargs):
        return self.model(*args, **kwargs)


def export(
    model,
    args,
    f,
    *,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
    dynamic_axes: Mapping | None = None,
    opset_version: int = 17,
    do_constant_folding: bool = True,
    export_params: bool = True,
    kwargs: dict | None = None,
) -> onnx.ModelProto:
    """Export `model` (an `nn.Module`, run in eval mode, or an inference `nn.Graph`) called
    on `args` (a tensor or a tuple of arguments; a trailing dict holds keyword arguments,
    as in PyTorch) to the ONNX file `f` (a path or a binary file object).

    Tensor arguments become the graph's inputs, in order (nested tuples, lists and dicts
    flattened), named by `input_names`; the returned tensors its outputs, named by
    `output_names`. `dynamic_axes` maps an input or output name to the axes whose size may
    change (a list, or a dict of axis -> symbolic name); outputs' dims that follow dynamic
    input axes are dynamic whether named or not. Weights are initializers (graph inputs with
    `export_params=False`); a model over 2 GB is written with its weights in `<f>.data`
    beside the file. Returns the ModelProto.

    >>> model = flow.nn.Sequential(flow.nn.Linear(4, 8), flow.nn.ReLU(), flow.nn.Linear(8, 2))
    >>> tideflow.onnx.export(model, flow.randn(3, 4), "mlp.onnx", input_names=["x"],
    ...                      output_names=["y"], dynamic_axes={"x": {0: "batch"}, "y": [0]})
    """
    if opset_version not in OPSETS:
        raise ArgumentError(
            f"onnx.export: opset_version {opset_version} is not supported (choose one of "
            f"{OPSETS.start}..{OPSETS.stop - 1})"
        )
    graph, prefix = as_graph(model)
    tensors, spec = flatten_inputs(*split_args(args, kwargs))
    sites: dict = {}
    program = traced(graph, tensors, spec, do_constant_folding, sites)
    in_names = _names(input_names, len(program.feeds), "input", "input_names")
    out_names = _names(output_names, len(program.fetches), "output", "output_names")
    axes = _dynamic_axes(dynamic_axes, in_names, out_names)
    sig = Signature(in_names, out_names, axes, opset_version, export_params, prefix)
    in_axes = [
        _input_axes(name, t, axes.get(name, {})) for name, t in zip(in_names, tensors, strict=True)
    ]
    if not any(in_axes):
        proto = build(program, sig, {}, sites)
    else:
        other = _retraced(graph, tensors, spec, in_axes, do_constant_folding)
        dynamic, other_dynamic = dynamic_dims(program, other)
        filled, other_filled = fills(program, other)
        proto = build(program, sig, dynamic, sites, filled)
        same_graph(proto, build(other, sig, other_dynamic, sites, other_filled))
    _save(proto, f)
    return proto


def _retraced(graph, tensors, spec, in_axes, folding: bool):
    """The model traced with its dynamic axes one longer (one shorter where that fails)."""
    try:
        return traced(graph, resized(tensors, in_axes, 1), spec, folding, {})
    except TideflowError as longer:
        if min(t.shape[d] for t, dims in zip(tensors, in_axes, strict=True) for d in dims) < 3:
            raise trace_error(longer, 1) from longer
        try:
            return traced(graph, resized(tensors, in_axes, -1), spec, folding, {})
        except TideflowError as shorter:
            raise trace_error(shorter, -1) from shorter


def split_args(args, kwargs: dict | None) -> tuple[tuple, dict]:
    if isinstance(args, Tensor):
        args = (args,)
    elif not isinstance(args, tuple | list):
        raise ArgumentError(
            f"onnx.export: args must be a tensor or a tuple of arguments, not {type(args).__name__}"
        )
    args = tuple(args)
    call_kwargs = dict(kwargs or {})
    if args and isinstance(args[-1], dict):
        call_kwargs.update(args[-1])
        args = args[:-1]
    return args, call_kwargs


def as_graph(model) -> tuple[Graph, str]:
    """The graph to trace and the prefix its variable names carry beyond `state_dict()`'s."""
    if isinstance(model, Graph):
        if model._optimizers:
            raise TideflowError(
                f"onnx.export: nn.Graph {model.name} has an optimizer: export an inference "
                "graph (or the module itself)"
            )
        return model, ""
    if isinstance(model, Module):
        return _ModuleGraph(model), "model."
    raise ArgumentError(
        f"onnx.export: model must be an nn.Module or an nn.Graph, not {type(model).__name__}"
    )


def _names(given: Sequence[str] | None, n: int, kind: str, arg: str) -> list[str]:
    given = list(given or ())
    if len(given) > n:
        raise ArgumentError(f"onnx.export: {len(given)} {arg} for {n} {kind}s: {given}")
    names = given + [f"{kind}_{i}" for i in range(len(given), n)]
    if len(set(names)) != n:
        raise ArgumentError(f"onnx.export: {arg} repeat a name: {names}")
    return names


def _dynamic_axes(dynamic_axes, in_names, out_names) -> dict[str, dict[int, str]]:
    """name -> {axis: symbolic name}, from PyTorch's list or dict form."""
    axes: dict[str, dict[int, str]] = {}
    for name, spec in (dynamic_axes or {}).items():
        if name not in in_names and name not in out_names:
            raise ArgumentError(
                f"onnx.export: dynamic_axes names {name!r}, which is neither an input "
                f"({in_names}) nor an output ({out_names})"
            )
        if isinstance(spec, Mapping):
            axes[name] = {int(a): str(s) for a, s in spec.items()}
        else:
            axes[name] = {int(a): f"{name}_dynamic_axes_{i + 1}" for i, a in enumerate(spec)}
    return axes


def _input_axes(name: str, t: Tensor, axes: dict[int, str]) -> list[int]:
    """The dynamic axes of input `name`, checked against its shape and made non-negative."""
    if any(not -t.ndim <= a < t.ndim for a in axes):
        raise ArgumentError(
            f"onnx.export: dynamic axes {sorted(axes)} of {name!r}, which has shape {list(t.shape)}"
        )
    return sorted(a % t.ndim for a in axes)


def _save(proto: onnx.ModelProto, f) -> None:
    large = sum(len(t.raw_data) for t in proto.graph.initializer) >= _PROTOBUF_LIMIT
    if isinstance(f, str | os.PathLike):
        path = os.fspath(f)
        if large:
            location = os.path.basename(path) + ".data"
            onnx.save_model(proto, path, save_as_external_data=True, location=location)
        else:
            onnx.save_model(proto, path)
        return
    if large:
        raise ArgumentError(
            "onnx.export: a model over 2 GB keeps its weights in a file beside the model: "
            "give f as a path, not a file object"
        )
    f.write(proto.SerializeToString())
