"""Memory planning: buffer reuse by liveness."""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Hashable, Iterable
from typing import NamedTuple

from ..aliases import alias_roots
from ..ir import MemoryPlan, Program, Value


class Life(NamedTuple):
    """An array's life in a sequence of steps: made at step `start`, last read at step `end`
    (reusable by arrays made after it), `nbytes` large."""

    key: Hashable
    start: int
    end: int
    nbytes: int


class Buffers(NamedTuple):
    """What `best_fit` assigns: the buffer of each key, each buffer's size, and the most
    bytes of arrays alive at once."""

    of: dict[Hashable, int]
    sizes: list[int]
    peak: int


def best_fit(lives: Iterable[Life]) -> Buffers:
    """Give each life a buffer, reusing the buffers of lives that ended before it starts:
    the smallest free buffer at least as large, else a new one. The plan of a program
    (`plan_memory`) and the buffers a chain writes its kernels' outputs into
    (`compiler/chain.py`) are both made here."""
    free: list[tuple[int, int]] = []  # (size, buffer), sorted
    ending: list[tuple[int, int, Life]] = []  # a heap of (end, order, life) of live arrays
    of: dict[Hashable, int] = {}
    sizes: list[int] = []
    live = peak = 0
    for order, life in enumerate(sorted(lives, key=lambda life: life.start)):
        while ending and ending[0][0] < life.start:
            done = heapq.heappop(ending)[2]
            live -= done.nbytes
            bisect.insort(free, (sizes[of[done.key]], of[done.key]))
        i = bisect.bisect_left(free, (life.nbytes, -1))
        if i < len(free):
            of[life.key] = free.pop(i)[1]
        else:
            of[life.key] = len(sizes)
            sizes.append(life.nbytes)
        live += life.nbytes
        peak = max(peak, live)
        heapq.heappush(ending, (life.end, order, life))
    return Buffers(of, sizes, peak)


def plan_memory(program: Program) -> Program:
    """Assign every transient array (feeds and node outputs that are not views) a buffer,
    reusing the buffers of arrays no longer needed, and measure the peak.

    A value is live from the node that defines it (feeds: from the start) to its last use;
    views extend the life of the array they view; fetched values live to the end. Variables
    and constants are persistent and counted apart. The plan annotates the program
    (`program.memory`) for the whole step, as if it ran in one sequence; what a plan's
    chains write into reused buffers is planned per chain with the same `best_fit`.

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

    lives = [Life(v, -1, last_use.get(v, -1), v.nbytes) for v in program.feeds]
    for step, node in enumerate(program.nodes):
        lives += [
            Life(v, step, last_use.get(v, step), v.nbytes) for v in node.outputs if v not in roots
        ]
    buffers = best_fit(lives)
    persistent = sum(var.value.nbytes for var in program.variables.values()) + sum(
        a.nbytes for a in program.constants.values()
    )
    unshared = sum(life.nbytes for life in lives)
    plan = MemoryPlan(buffers.of, tuple(buffers.sizes), buffers.peak, unshared, persistent)
    return program.replace(memory=plan)
