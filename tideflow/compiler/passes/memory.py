"""Memory planning: buffer reuse by liveness."""

from __future__ import annotations

import bisect

from ..aliases import alias_roots
from ..ir import MemoryPlan, Program, Value


def plan_memory(program: Program) -> Program:
    """Assign every transient array (feeds and node outputs that are not views) a buffer,
    reusing the buffers of arrays no longer needed, and measure the peak.

    A value is live from the node that defines it (feeds: from the start) to its last use;
    views extend the life of the array they view; fetched values live to the end. Buffers are
    reused best-fit: the smallest free buffer at least as large. Variables and constants are
    persistent and counted apart. The plan annotates the program (`program.memory`); it does
    not change what runs.

    >>> print(plan_memory(program).memory.summary())
    """
    roots = alias_roots(program)
    end = len(program.nodes)
    last_use: dict[Value, int] = {}
    for i, node in enumerate(program.nodes):
        for v in node.inputs:
            last_use[roots.get(v, v)] = i
    for v in program.fetches:
        last_use[roots.get(v, v)] = end

    free: list[tuple[int, int]] = []  # (size, buffer index), sorted
    sizes: list[int] = []
    buffers: dict[Value, int] = {}
    dying: dict[int, list[Value]] = {}
    live = peak = unshared = 0

    def allocate(v: Value, step: int) -> None:
        nonlocal live, peak, unshared
        size = v.nbytes
        i = bisect.bisect_left(free, (size, -1))
        if i < len(free):
            buffers[v] = free.pop(i)[1]
        else:
            buffers[v] = len(sizes)
            sizes.append(size)
        live += size
        unshared += size
        peak = max(peak, live)
        dying.setdefault(last_use.get(v, step), []).append(v)

    for v in program.feeds:
        allocate(v, -1)
    for step, node in enumerate(program.nodes):
        for v in node.outputs:
            if v not in roots:
                allocate(v, step)
        for v in dying.pop(step, ()):
            live -= v.nbytes
            bisect.insort(free, (sizes[buffers[v]], buffers[v]))

    persistent = sum(var.value.nbytes for var in program.variables.values()) + sum(
        a.nbytes for a in program.constants.values()
    )
    plan = MemoryPlan(buffers, tuple(sizes), peak, unshared, persistent)
    return program.replace(memory=plan)
