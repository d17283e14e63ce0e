"""The pipeline schedule of a stage's micro-batches: one forward, one backward (1F1B)."""

from __future__ import annotations

from ...framework.errors import TideflowError
from ..ir import FORWARD, Program


def one_forward_one_backward(stage: int, micro_batches: int, stages: int) -> list[tuple]:
    """The order of (phase, micro-batch) blocks on `stage` of `stages`: a warm-up of forwards
    (fewer on later stages), then alternating forward and backward, then the remaining
    backwards. The last stage runs each backward right after its forward, and no stage holds
    the activations of more than `stages - stage` micro-batches.

    >>> one_forward_one_backward(0, 3, 2)
    [('F', 0), ('F', 1), ('B', 0), ('F', 2), ('B', 1), ('B', 2)]
    """
    warmup = min(stages - stage - 1, micro_batches)
    order = [("F", k) for k in range(warmup)]
    for k in range(micro_batches - warmup):
        order += [("F", warmup + k), ("B", k)]
    return order + [("B", k) for k in range(micro_batches - warmup, micro_batches)]


def schedule_micro_batches(program: Program, stage: int, stages: int) -> Program:
    """This rank's nodes in the 1F1B order of pipeline stage `stage` of `stages`.

    Traced, each micro-batch's forward is followed by its backward, so a stage would wait for
    the later stages' backward before starting its next forward: the stages would take turns.
    In 1F1B order the stages work on different micro-batches at once (their sends do not
    wait for the receiver, see `boxing.SEND`). Every rank runs the same kind of order, so
    sends and receives meet: a stage's k-th forward receives the previous stage's k-th
    output, its k-th backward the next stage's k-th gradient. Nodes outside the micro-batches
    (the optimizer updates, packing the outputs) stay at the end, in their order. Recomputed
    forward nodes (activation checkpointing) belong to their micro-batch's backward."""
    blocks: dict[tuple, list] = {}
    head, tail = [], []
    for node in program.nodes:
        k = None if node.scope is None else node.scope.micro_batch
        if k is None:
            (tail if blocks else head).append(node)
            continue
        phase = "F" if node.scope.phase == FORWARD else "B"
        blocks.setdefault((phase, k), []).append(node)
    micro_batches = 1 + max((k for _, k in blocks), default=-1)
    order = one_forward_one_backward(stage, micro_batches, stages)
    nodes = [*head, *(n for block in order for n in blocks.get(block, ())), *tail]
    _check_defined(program, nodes)
    return program.replace(nodes=tuple(nodes))


def _check_defined(program: Program, nodes: list) -> None:
    defined = set(program.feeds) | set(program.constants)
    defined |= {var.value for var in program.variables.values()}
    if program.step_attrs is not None:
        defined.add(program.step_attrs)
    for node in nodes:
        missing = [v for v in node.inputs if v not in defined]
        if missing:
            raise TideflowError(
                f"nn.Graph: the pipeline schedule puts {node.name} ({node.scope}) before the "
                f"node computing its input {missing[0]!r}: a forward of a later micro-batch "
                "reads a value of an earlier backward"
            )
        defined.update(node.outputs)
