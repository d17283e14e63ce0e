"""Activation checkpointing: recompute checkpointed modules' forward in backward."""

from __future__ import annotations

from dataclasses import replace

from ..ir import BACKWARD, FORWARD, OP, RECOMPUTE, Node, Program, Value, remap


def recompute_checkpointed(program: Program) -> Program:
    """Trade compute for memory in each activation-checkpointing segment (the nodes traced in
    one call of a checkpointed module, `Scope.checkpoint`): the values its pure forward nodes
    compute for backward are recomputed there instead of kept from forward to backward.

    Per segment, the values to recompute are those its pure forward nodes produce, backward
    nodes read, and no node outside the segment's forward reads (the segment's outputs stay,
    as its inputs do). The forward nodes they depend on inside the segment are cloned, with
    fresh values, right before the first backward node reading one of them, and backward
    nodes read the clones. Random draws (dropout) are effectful: never cloned, their outputs
    (the masks) are kept, so results are bit-identical to the program without checkpointing.
    The memory plan then sees each recomputed activation live only during its backward.

    Run it after CSE, which would merge the clones back into the originals.

    >>> print(recompute_checkpointed(program))  # "recompute" nodes before each block's backward
    """
    order = {node: i for i, node in enumerate(program.nodes)}
    producers: dict[Value, Node] = {}  # value -> the pure forward node of a segment making it
    escaping: set[Value] = set(program.fetches)  # read outside their segment's forward
    reads: dict[int, list[tuple[int, Value]]] = {}  # segment -> (position, value) read in backward
    for i, node in enumerate(program.nodes):
        scope = node.scope
        backward = scope is not None and scope.phase == BACKWARD
        segment_here = None if scope is None or scope.phase != FORWARD else scope.checkpoint
        for v in node.inputs:
            producer = producers.get(v)
            if producer is None:
                continue
            segment = producer.scope.checkpoint
            if backward:
                reads.setdefault(segment, []).append((i, v))
            elif segment != segment_here:
                escaping.add(v)
        if segment_here is not None and not node.effectful:
            producers.update((v, node) for v in node.outputs)

    insertions: dict[int, list[Node]] = {}  # position -> clones to insert before it
    recomputed: dict[Value, Value] = {}
    for segment_reads in reads.values():
        segment_reads = [(i, v) for i, v in segment_reads if v not in escaping]
        if not segment_reads:
            continue
        first = segment_reads[0][0]
        needed = _needed({v for _, v in segment_reads}, producers, escaping, order)
        # NOTE: a backward inside the segment's own forward (autograd.grad in a module's
        # forward) would read clones of nodes not run yet: such a segment keeps its values.
        if order[needed[-1]] < first:
            insertions.setdefault(first, []).extend(_recompute(program, needed, recomputed))
    if not insertions:
        return program

    nodes: list[Node] = []
    for i, node in enumerate(program.nodes):
        nodes.extend(insertions.get(i, ()))
        if node.scope is not None and node.scope.phase == BACKWARD:
            node = remap(node, recomputed)
        nodes.append(node)
    return program.replace(nodes=tuple(nodes))


def _needed(
    values: set[Value], producers: dict[Value, Node], kept: set[Value], order: dict[Node, int]
) -> list[Node]:
    """The segment nodes computing `values` from what is kept (the segment's inputs and
    outputs, random draws), in program order."""
    needed: set[Node] = set()
    stack = list(values)
    while stack:
        node = producers[stack.pop()]
        if node not in needed:
            needed.add(node)
            stack.extend(v for v in node.inputs if v in producers and v not in kept)
    return sorted(needed, key=order.__getitem__)


def _recompute(program: Program, nodes: list[Node], recomputed: dict[Value, Value]) -> list[Node]:
    """Clones of `nodes` with fresh outputs, reading each other's outputs; `recomputed` maps
    each original output to its clone."""
    clones = []
    for node in nodes:
        outputs = tuple(
            program.new_value(v.shape, v.dtype, OP, placement=v.placement, sbp=v.sbp)
            for v in node.outputs
        )
        clone = Node(
            next(program.ids),
            node.op,
            remap(node, recomputed).operands,
            node.attrs,
            outputs,
            scope=replace(node.scope, phase=RECOMPUTE),
        )
        recomputed.update(zip(node.outputs, outputs, strict=True))
        clones.append(clone)
    return clones
