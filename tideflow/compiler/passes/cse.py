"""Common-subexpression elimination."""

from __future__ import annotations

import numpy as np

from ..ir import Node, Program, Value, remap


def cse(program: Program) -> Program:
    """Compute each distinct pure op application once: a node with the same op, the same
    operands and equal attributes as an earlier node is dropped and its outputs are replaced
    by the earlier node's. Effectful nodes (updates, random draws) are never merged.

    >>> print(cse(program))  # e.g. a weight transposed twice is transposed once
    """
    seen: dict[tuple, Node] = {}
    mapping: dict[Value, Value] = {}
    nodes = []
    for node in program.nodes:
        node = remap(node, mapping)
        key = None if node.effectful else _key(node)
        if key is not None:
            earlier = seen.get(key)
            if earlier is not None:
                mapping.update(zip(node.outputs, earlier.outputs, strict=True))
                continue
            seen[key] = node
        nodes.append(node)
    fetches = tuple(mapping.get(v, v) for v in program.fetches)
    return program.replace(nodes=tuple(nodes), fetches=fetches)


def _key(node: Node) -> tuple | None:
    """A hashable identity of what the node computes, or None if an attribute has none."""
    try:
        key = (
            node.op,
            tuple(a if isinstance(a, Value) else (type(a), a) for a in node.operands),
            tuple((k, _frozen(v)) for k, v in sorted(node.attrs.items())),
        )
        hash(key)
    except TypeError:
        return None
    return key


def _frozen(v):
    """Attribute values as hashable equivalents (type-tagged, so 1 and 1.0 and True differ)."""
    if isinstance(v, tuple | list):
        return (type(v), tuple(_frozen(x) for x in v))
    if isinstance(v, dict):
        return (dict, tuple((k, _frozen(x)) for k, x in sorted(v.items())))
    if isinstance(v, slice):
        return (slice, v.start, v.stop, v.step)
    if isinstance(v, np.ndarray):
        return (np.ndarray, v.shape, v.dtype.str, v.tobytes())
    return (type(v), v)
