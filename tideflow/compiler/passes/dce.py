"""Dead-code elimination."""

from __future__ import annotations

from ..ir import Program, Value


def dce(program: Program) -> Program:
    """Drop nodes whose outputs reach no fetch and that have no effect of their own
    (`Node.effectful`: in-place updates, random draws), then the variables and constants
    nobody reads. Feeds stay: they are the graph's signature.

    >>> print(dce(program))  # the program without its dead nodes
    """
    live: set[Value] = set(program.fetches)
    kept = []
    for node in reversed(program.nodes):
        if node.effectful or any(v in live for v in node.outputs):
            kept.append(node)
            live.update(node.inputs)
    kept.reverse()
    return program.replace(
        nodes=tuple(kept),
        variables={k: var for k, var in program.variables.items() if var.value in live},
        constants={v: a for v, a in program.constants.items() if v in live},
    )
