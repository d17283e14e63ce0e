"""Which values share memory at run time: the outputs of view ops (`op.view`: reshape,
transpose, slicing, ...) are views of their first operand, so they live in its buffer and are
changed by in-place writes to it. Memory planning and lowering need this."""

from __future__ import annotations

from .ir import Program, Value


def alias_roots(program: Program) -> dict[Value, Value]:
    """Each view value -> the value owning its memory (views of views resolve to the root).
    Values that are not views are absent."""
    roots: dict[Value, Value] = {}
    for node in program.nodes:
        if node.op.view:
            base = node.operands[0]
            root = roots.get(base, base)
            for out in node.outputs:
                roots[out] = root
    return roots
