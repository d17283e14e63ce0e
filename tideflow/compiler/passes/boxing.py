"""Boxing peepholes: two conversions of one placement axis in a row become one."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from ...framework.sbp import B, P, Split
from ...parallel.boxing import BOXING
from ..ir import Node, Program


def fuse_boxing(program: Program) -> Program:
    """An all-reduce (P -> B) whose result only a slice (B -> S) reads becomes one
    reduce-scatter (P -> S): each rank receives its part of the sum, not the whole sum.
    That is a ZeRO update's gradient, which backward all-reduces and the update slices.
    Every rank compiles the same program, so every rank fuses the same pairs.

    >>> print(fuse_boxing(program))  # boxing(%g) {step=P->S(0) over ranks [0, 1]}
    """
    readers = Counter(v for node in program.nodes for v in node.inputs)
    readers.update(program.fetches)
    producer = {v: node for node in program.nodes for v in node.outputs}
    fused: dict[Node, Node] = {}  # slice -> the reduce-scatter replacing it
    gone: set[Node] = set()
    for node in program.nodes:
        if node.op is not BOXING:
            continue
        second = node.attrs["step"]
        (source,) = node.inputs
        first_node = producer.get(source)
        if first_node is None or first_node.op is not BOXING or readers[source] != 1:
            continue
        first = first_node.attrs["step"]
        if not (
            first.src is P and first.dst is B and second.src is B
            and isinstance(second.dst, Split) and first.group == second.group
            and first.channel == second.channel
        ):  # fmt: skip
            continue
        step = replace(second, src=P)
        fused[node] = Node(
            node.id, BOXING, first_node.operands, {"step": step}, node.outputs,
            node.step_attrs, node.scope,
        )  # fmt: skip
        gone.add(first_node)
    if not fused:
        return program
    nodes = tuple(fused.get(n, n) for n in program.nodes if n not in gone)
    return program.replace(nodes=nodes)
