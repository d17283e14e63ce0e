"""Constant folding."""

from __future__ import annotations

import numpy as np

from ...framework.registry import kernel_for
from ..ir import Program, Value, remap

_MAX_BYTES = 1 << 24


def fold_constants(program: Program, max_bytes: int = _MAX_BYTES) -> Program:
    """Run at compile time every pure node whose operands are all constants (or that has
    none, like `zeros`), and use its results as constants. Results larger than `max_bytes`
    are left to compute at run time, so folding never makes a plan hold big arrays. A kernel
    that fails is left in place: it raises, with its task's name, when the graph runs.

    >>> print(fold_constants(program))  # e.g. the backward seed's expand is a constant now
    """
    constants = dict(program.constants)
    mapping: dict[Value, Value] = {}
    nodes = []
    for node in program.nodes:
        node = remap(node, mapping)
        outs = _evaluate(node, constants, max_bytes)
        if outs is None:
            nodes.append(node)
            continue
        for v, array in zip(node.outputs, outs, strict=True):
            folded = program.new_constant(array, v.dtype)
            constants[folded] = array
            mapping[v] = folded
    fetches = tuple(mapping.get(v, v) for v in program.fetches)
    return program.replace(nodes=tuple(nodes), constants=constants, fetches=fetches)


def _evaluate(node, constants: dict, max_bytes: int) -> tuple | None:
    if node.effectful or not node.outputs:
        return None
    if any(v not in constants for v in node.inputs):
        return None
    if sum(v.nbytes for v in node.outputs) > max_bytes:
        return None
    arrays = [constants[a] if isinstance(a, Value) else a for a in node.operands]
    try:
        out = kernel_for(node.op)(*arrays, **node.attrs)
    except Exception:
        return None
    outs = (out,) if node.op.n_out == 1 else tuple(out)
    return tuple(np.asarray(o) for o in outs)  # 0-d results may be NumPy scalars
