"""Boxing peepholes: two conversions of one placement axis in a row become one, or none."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from ...framework.sbp import B, P, Split
from ...parallel.boxing import BOXING
from ..ir import Node, Program, remap


def fuse_boxing(program: Program) -> Program:
    """An all-reduce (P -> B) whose result only a slice (B -> S) reads becomes one
    reduce-scatter (P -> S): each rank receives its part of the sum, not the whole sum.
    That is a ZeRO update's gradient, which backward all-reduces and the update slices.
    And an all-reduce of a broadcast value made partial (B -> P -> B: the first rank keeps
    it, the others zeros, then the sum) is the value itself: both go (a row-parallel
    layer's bias and its gradient take that path). Every rank compiles the same program,
    so every rank changes the same pairs.

    >>> print(fuse_boxing(program))  # boxing(%g) {step=P->S(0) over ranks [0, 1]}
    """
    readers = Counter(v for node in program.nodes for v in node.inputs)
    readers.update(program.fetches)
    producer = {v: node for node in program.nodes for v in node.outputs}
    fused: dict[Node, Node] = {}  # slice -> the reduce-scatter replacing it
    same: dict = {}  # the result of a B -> P -> B pair -> the value it started from
    gone: set[Node] = set()
    for node in program.nodes:
        if node.op is not BOXING:
            continue
        second = node.attrs["step"]
        (source,) = node.inputs
        first_node = producer.get(source)
        if first_node is None or first_node.op is not BOXING or readers[source] != 1:
            continue
        if first_node in gone or first_node in fused:  # one rewrite per node
            continue
        first = first_node.attrs["step"]
        if first.group != second.group or first.channel != second.channel:
            continue
        if first.src is B and first.dst is P and second.src is P and second.dst is B:
            start = first_node.inputs[0]
            same[node.outputs[0]] = same.get(start, start)
            gone.update((first_node, node))
        elif (
            first.src is P and first.dst is B and second.src is B and isinstance(second.dst, Split)
        ):
            step = replace(second, src=P)
            fused[node] = Node(
                node.id, BOXING, first_node.operands, {"step": step}, node.outputs,
                node.step_attrs, node.scope,
            )  # fmt: skip
            gone.add(first_node)
    if not fused and not same:
        return program
    nodes = tuple(remap(fused.get(n, n), same) for n in program.nodes if n not in gone)
    fetches = tuple(same.get(v, v) for v in program.fetches)
    return program.replace(nodes=nodes, fetches=fetches)
