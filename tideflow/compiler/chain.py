"""Chains: consecutive nodes of one stream run as one task.

A plan with a task per node pays the actor protocol (a "ready" and a "free" message, a
thread hand-off) for every op: on a GPT step of ~600 nodes that is more than the small
kernels themselves. OneFlow merges the ops of one device and stream into chains for the same
reason; here a chain is a straight-line interpreter over its nodes' kernels, in program
order, so in-place writes and reads of views happen in the order they were traced with no
added synchronization. Intermediates that live and die in the chain and whose kernels can
write into given arrays are written into buffers the chain keeps from run to run
(`arena.py`); every other intermediate is dropped after its last use in the chain, which lets
the allocator reuse its memory for the next kernel.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from itertools import repeat

import numpy as np

from ..distributed import faults
from ..framework.registry import kernel_for, out_kernel_for
from ..runtime import StepError
from .arena import Arena, Made, observe, plan_arena
from .ir import FORWARD, Node, Value


class Chain:
    """`chain(*input_arrays)` runs `nodes` and returns the arrays of `outputs`.

    `inputs` are the values the nodes read from outside the chain, in the order the task
    passes them; `step_attrs` (one of the inputs, or None) is the per-call attributes of
    optimizer updates. A kernel that raises fails the chain with a `StepError` naming its
    node, so errors name the op, not the chain. With `timed`, each run records its
    `timeline`: (block, start, end) for each run of consecutive nodes of one block
    (`block_of`), on `time.perf_counter`'s clock. The first run plans the buffers later runs
    on inputs of the same shapes write intermediates into (`arena`: None before it); a run
    on other shapes (a fused node's last, smaller tile), or starting while another is in
    progress (two executors of one plan), allocates its outputs instead.
    """

    def __init__(
        self,
        nodes: Sequence[Node],
        inputs: Sequence[Value],
        outputs: Sequence[Value],
        step_attrs: Value | None = None,
        timed: bool = False,
    ) -> None:
        slot: dict[Value, int] = {v: i for i, v in enumerate(inputs)}
        for node in nodes:
            for v in node.outputs:
                slot[v] = len(slot)
        last_use: dict[Value, int] = {}
        for i, node in enumerate(nodes):
            for v in node.inputs:
                last_use[v] = i
        kept = set(outputs) | set(inputs)  # the caller owns inputs; outputs are returned
        releases: list[list[int]] = [[] for _ in nodes]
        for v, i in last_use.items():
            if v not in kept:
                releases[i].append(slot[v])
        self._nodes = tuple(nodes)
        self._plain = tuple(
            (
                _kernel_call(node),
                tuple(slot[v] for v in node.inputs)
                + ((slot[step_attrs],) if node.step_attrs is not None else ()),
                tuple(slot[v] for v in node.outputs),
                tuple(releases[i]),
                node.name,
            )
            for i, node in enumerate(nodes)
        )
        self._steps = self._plain  # with the arena's buffers once planned
        self._size = len(slot)
        self._n_inputs = len(inputs)
        self._outputs = tuple(slot[v] for v in outputs)
        self._kept = frozenset(range(len(inputs))) | frozenset(self._outputs)
        # NOTE: chosen with the plain kernels, so both come from the same backend
        self._out_kernels = {
            i: fn for i, node in enumerate(nodes) if (fn := out_kernel_for(node.op)) is not None
        }
        self._writable = frozenset(self._out_kernels)
        self._in_place = frozenset(i for i in self._writable if nodes[i].op.elementwise)
        # NOTE: nothing to plan without out kernels: the first run needs no records
        self.arena: Arena | None = None if self._writable else Arena({}, 0)
        self._planned_shapes: tuple = ()  # of the inputs the arena was planned for
        self._running = threading.Lock()
        self._blocks = tuple(block_of(node) for node in nodes) if timed else None
        self.timeline: list[tuple[str, float, float]] = []  # the latest run's, when timed

    def __call__(self, *arrays) -> tuple:
        if not self._running.acquire(blocking=False):
            return self._run(self._plain, arrays)
        try:
            if self.arena is not None:
                same = not self._writable or _shapes(arrays) == self._planned_shapes
                return self._run(self._steps if same else self._plain, arrays)
            made: list[Made] = []
            outputs = self._run(self._plain, arrays, made)
            self._planned_shapes = _shapes(arrays)
            self._place(plan_arena(made, self._writable, self._kept, self._in_place))
            return outputs
        finally:
            self._running.release()

    def _place(self, arena: Arena) -> None:
        """Run the nodes `arena` places with their out kernels, writing its views."""
        self.arena = arena
        self._steps = tuple(
            step
            if i not in arena.views
            else (_kernel_call(node, self._out_kernels[i], arena.views[i]), *step[1:])
            for i, (node, step) in enumerate(zip(self._nodes, self._plain, strict=True))
        )

    def _run(self, steps: tuple, arrays: tuple, made: list[Made] | None = None) -> tuple:
        """One run of `steps`; `made` collects each node's record for planning the arena."""
        env: list = [*arrays, *([None] * (self._size - self._n_inputs))]
        blocks = self._blocks
        events: list[tuple[str, float, float]] = []
        current, start = None, 0.0
        # NOTE: untimed, every block is None: the check costs one comparison per step
        for index, ((call, reads, writes, releases, name), block) in enumerate(
            zip(steps, blocks if blocks is not None else repeat(None), strict=False)
        ):
            if block != current:
                now = time.perf_counter()
                if current is not None:
                    events.append((current, start, now))
                current, start = block, now
            try:
                outs = call(*[env[i] for i in reads])
            except StepError:  # a nested chain (a fused node's) names its own step
                raise
            except Exception as exc:
                raise StepError(name, exc) from exc
            if made is not None:
                made.append(observe(index, reads, writes, env, outs))
            for i, out in zip(writes, outs, strict=True):
                env[i] = out
            for i in releases:
                env[i] = None
        if current is not None:
            events.append((current, start, time.perf_counter()))
            self.timeline = events
        return tuple(env[i] for i in self._outputs)


def _shapes(arrays: tuple) -> tuple:
    return tuple(getattr(a, "shape", None) for a in arrays)


def block_of(node: Node) -> str:
    """What a node's time counts as in a timeline: waiting for a message (`recv`), a
    collective (`comm`), a micro-batch's forward or backward (`F3`, `B3`), or `step` (the
    rest: optimizer updates, work outside micro-batches)."""
    if node.op.name == "recv":
        return "recv"
    if node.op.communicates:
        return "comm"
    scope = node.scope
    if scope is None or scope.micro_batch is None:
        return "step"
    return f"{'F' if scope.phase == FORWARD else 'B'}{scope.micro_batch}"


def _kernel_call(
    node: Node, kernel: Callable | None = None, into: tuple[np.ndarray, ...] | None = None
) -> Callable[..., tuple]:
    """`fn(*input_arrays)`: `kernel` (default: the node's) on the node's value operands
    (Python scalars and None in their places), returning a tuple of arrays; with `into` (one
    array per output), `kernel` is an out kernel writing them. For an update, the last input
    is this call's attributes of every update, and the node takes its own from them."""
    kernel = kernel_for(node.op) if kernel is None else kernel
    operands = node.operands
    slots = [i for i, a in enumerate(operands) if isinstance(a, Value)]
    whole = len(slots) == len(operands)
    n_out = node.op.n_out
    attrs = node.attrs
    step_slot = node.step_attrs

    def call(*inputs):
        if step_slot is not None:
            kw = inputs[-1][step_slot]
            inputs = inputs[:-1]
        else:
            kw = attrs
        if whole:
            args = inputs
        else:
            args = list(operands)
            for position, array in zip(slots, inputs, strict=True):
                args[position] = array
        if into is None:
            out = kernel(*args, **kw)
        else:
            out = kernel(*args, out=into[0] if n_out == 1 else into, **kw)
        if n_out == 1:
            return (out if type(out) is np.ndarray else np.asarray(out),)
        if n_out == 0:
            return ()
        return tuple(o if type(o) is np.ndarray else np.asarray(o) for o in out)

    return faults.wrap("graph", node.name, call) if node.op.communicates else call
