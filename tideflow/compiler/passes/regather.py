"""ZeRO stage 3: a sharded parameter is gathered for each block of the nodes that use it."""

from __future__ import annotations

from dataclasses import replace

from ..ir import FORWARD, RECOMPUTE, Node, Program, Value


def regather_parameters(program: Program) -> Program:
    """Keep a parameter that ZeRO stage 3 shards whole only while a block of nodes uses it.

    Tracing all-gathers each such parameter at the start of each micro-batch (nodes whose
    scope is marked `gather`); as traced, the whole copy would live from there to the last
    backward node reading it. Here each gather moves to right before its first reader, and
    a reader in another block than the previous one (forward vs backward of a micro-batch,
    build's code after its backward) reads a new gather placed right before it, so each copy
    dies with the last reader of its block. Pure forward nodes computing only from gathered
    values (the weight's transpose, its autocast copy) are recomputed from the new gather
    too, as activation checkpointing recomputes a segment's nodes (`passes.checkpoint`):
    otherwise their outputs would keep the forward's copy alive, or be a copy themselves.

    A gather nothing reads is dropped; one whose value is fetched stays where it was traced.
    Every rank of a gather's group compiles the same program, so every rank moves, adds and
    drops the same collectives.

    >>> print(regather_parameters(program))  # "parameter gather" before each block's reader
    """
    producers = _recomputable(program)
    if not producers:
        return program
    pinned = _fetched_from(program, producers)
    placed: set[Node] = set()  # gathers already placed (their first instance)
    movable: set[Node] = set()  # what the pass placed, and drops again if nothing reads it
    current: dict[Value, tuple[tuple, Value]] = {}  # value -> (block, the instance read now)

    def instance(v: Value, block: tuple, out: list[Node]) -> Value:
        known = current.get(v)
        if known is not None and known[0] == block:
            return known[1]
        node = producers[v]
        operands = tuple(
            instance(a, block, out) if isinstance(a, Value) and a in producers else a
            for a in node.operands
        )
        if node.scope.gather and node not in placed and node not in pinned:
            placed.add(node)  # the traced gather, moved here
            made = node.with_operands(operands)
        else:
            made = _clone(program, node, operands, block)
        out.append(made)
        movable.add(made)
        for old, new in zip(node.outputs, made.outputs, strict=True):
            current[old] = (block, new)
        return current[v][1]

    nodes: list[Node] = []
    for node in program.nodes:
        if node.scope is not None and node.scope.gather and node not in pinned:
            continue  # placed before its readers, or dropped
        block = _block(node)
        operands = tuple(
            instance(a, block, nodes) if isinstance(a, Value) and a in producers else a
            for a in node.operands
        )
        node = node.with_operands(operands) if operands != node.operands else node
        nodes.append(node)
        if any(v in producers for v in node.outputs):  # a recomputable node in its own place
            current.update((v, (block, v)) for v in node.outputs)
            if node not in pinned:
                movable.add(node)
    return program.replace(nodes=_unread_dropped(nodes, movable, program.fetches))


def _unread_dropped(nodes: list[Node], movable: set[Node], fetches) -> tuple[Node, ...]:
    """`nodes` without the `movable` ones whose outputs nothing reads any more (a forward
    node whose only readers were in the backward, which now reads its recomputed copy)."""
    live = set(fetches)
    kept = []
    for node in reversed(nodes):
        if node in movable and not any(v in live for v in node.outputs):
            continue
        kept.append(node)
        live.update(node.inputs)
    return tuple(reversed(kept))


def _block(node: Node) -> tuple:
    """What a reader belongs to: its micro-batch's forward or backward (recomputed forward
    nodes are the backward's), or the compiler's nodes outside any scope."""
    scope = node.scope
    if scope is None:
        return ("unscoped",)
    return (scope.micro_batch, scope.phase == FORWARD)


def _recomputable(program: Program) -> dict[Value, Node]:
    """Value -> its producer, for the gathers' outputs and those of pure forward nodes whose
    every input is such a value (or a constant)."""
    producers: dict[Value, Node] = {}
    constants = program.constants
    for node in program.nodes:
        scope = node.scope
        if scope is None:
            continue
        if scope.gather and scope.phase == FORWARD:
            producers.update((v, node) for v in node.outputs)
            continue
        inputs = node.inputs
        if (
            scope.phase == FORWARD
            and not node.effectful
            and inputs
            and all(v in producers or v in constants for v in inputs)
            and any(v in producers for v in inputs)
        ):
            producers.update((v, node) for v in node.outputs)
    return producers


def _fetched_from(program: Program, producers: dict[Value, Node]) -> set[Node]:
    """The gathers whose values are fetched: they stay where they were traced (no node may
    read them, and a fetch reads what the step computed before its updates). Other fetched
    values are made by nodes that stay in their place anyway."""
    return {producers[v] for v in program.fetches if v in producers and producers[v].scope.gather}


def _clone(program: Program, node: Node, operands: tuple, block: tuple) -> Node:
    """`node` on `operands` with fresh outputs, recomputed for a backward block."""
    outputs = tuple(
        program.new_value(v.shape, v.dtype, v.kind, placement=v.placement, sbp=v.sbp)
        for v in node.outputs
    )
    scope = node.scope if block[-1] is True else replace(node.scope, phase=RECOMPUTE)
    return Node(next(program.ids), node.op, operands, node.attrs, outputs, scope=scope)
