"""Collectives of a compiled plan on communicators of their own."""

from __future__ import annotations

from dataclasses import replace

from ...distributed.groups import communicator
from ...parallel.boxing import SEND, WAIT_SENDS
from ..ir import Node, Program

GRAPH_CHANNEL = "graph"


def own_communicators(program: Program) -> Program:
    """Every communicating node (boxing collectives, a placement move's sends and receives:
    their `step` attribute says how) on the graph channel of its rank group.

    A plan's stream thread runs its collectives while eager code on the main thread may run
    its own (reading a global output gathers it): on one communicator the ranks could match
    one thread's call with the other's. The channel's communicators are created here, on the
    main thread and in program order, which is the same on every rank (creating one is
    collective over its group). A plan's sends only post their messages; a last node waits
    for them."""
    nodes = []
    for node in program.nodes:
        step = node.attrs.get("step") if node.op.communicates else None
        if step is not None and step.channel != GRAPH_CHANNEL:
            step = replace(step, channel=GRAPH_CHANNEL)
            communicator(step.group, GRAPH_CHANNEL)
            node = Node(
                node.id, node.op, node.operands, {**node.attrs, "step": step}, node.outputs,
                node.step_attrs, node.scope,
            )  # fmt: skip
        nodes.append(node)
    if any(node.op is SEND for node in nodes):
        nodes.append(program.new_node(WAIT_SENDS, (), {}, ()))
    return program.replace(nodes=tuple(nodes))
