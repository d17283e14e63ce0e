"""Which ops have an ONNX lowering: of the registry, and of a model."""

from __future__ import annotations

from ..framework.registry import all_ops
from ..nn.graph.structure import flatten_inputs
from ._export import as_graph, split_args
from ._trace import traced


def lowered_ops() -> tuple[set[str], set[str]]:
    """(names of registered ops with a lowering, names of those without)."""
    ops = all_ops()
    lowered = {name for name, op in ops.items() if op.onnx is not None}
    return lowered, set(ops) - lowered


def coverage() -> str:
    """One line: how many registered ops have a lowering, of how many.

    >>> print(tideflow.onnx.coverage())  # e.g. 'ONNX lowerings: 150 of 270 registered ops'
    """
    lowered, missing = lowered_ops()
    total = len(lowered) + len(missing)
    return f"ONNX lowerings: {len(lowered)} of {total} registered ops ({len(lowered) / total:.1%})"


def unlowered(model, args, kwargs: dict | None = None) -> list[str]:
    """The ops without a lowering that `model` called on `args` (as `export` takes them)
    traces to, sorted: what stands between the model and an export.

    >>> tideflow.onnx.unlowered(flow.nn.Linear(3, 2), flow.randn(1, 3))
    []
    """
    graph, _ = as_graph(model)
    tensors, spec = flatten_inputs(*split_args(args, kwargs))
    program = traced(graph, tensors, spec, True, {})
    return sorted({node.op.name for node in program.nodes if node.op.onnx is None})
