"""Choosing one layout per node: dynamic programming over chains, then node-by-node
refinement, under a per-rank memory limit.

The op graph is covered by chains (each node continues the chain of the node producing its
first operand, if that chain still ends there). On a chain, with every node off it held at
its current choice, the best choices are an exact dynamic program (the chain's nodes only
meet through the edges between neighbours; edges to nodes further along use their current
choice). Chains are solved in trace order, then each node alone is moved to its best choice
given all others (which catches what chains cannot see: residual branches, a value with
many consumers); sweeps repeat until nothing improves. A change is kept only when the whole
objective drops, so the result is never worse than its start.

The search runs from several starts and keeps the best: the global mode's greedy choice,
and one uniform start per layout (every node that can give all its outputs in that layout
does, at its cheapest such choice). Uniform starts reach what moves of one chain or node
cannot: a residual stream (each block's add reads the previous add) held broadcast from a
broadcast batch is only split by changing every add and block at once.

Memory enters as a Lagrangian price: minimise time + lam * bytes, with lam = 0 when the
fastest plan fits, else the least lam (doubled, then bisected) whose plan fits.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from ...framework.errors import TideflowError
from ._problem import PlanCounts, Problem

_MAX_SWEEPS = 20
_BISECTIONS = 20


@dataclass(frozen=True)
class Solution:
    """`time` is the search's prediction of the step, with the plan's nodes, tasks and
    collectives counted from the op graph; `lowered` adds `step_time`, the same work priced
    with the counts of the plan compiled from it."""

    assign: tuple  # per node: the index of its chosen layout
    time: float  # predicted step time, seconds
    memory: float  # predicted bytes per rank
    greedy_time: float
    greedy_memory: float
    problem: Problem | None = field(default=None, repr=False, compare=False)
    step_time: float | None = None

    def lowered(self, counts: PlanCounts) -> Solution:
        work = self.problem.work(list(self.assign))
        return dataclasses.replace(self, step_time=work + self.problem.overhead(counts))


def search(problem: Problem, memory_limit: float | None = None) -> Solution:
    """The fastest assignment found whose memory per rank is within `memory_limit` bytes."""
    greedy = [node.greedy for node in problem.nodes]
    chains = _chains(problem)
    found = [_minimize(problem, chains, start, 0.0) for start in _starts(problem, greedy)]
    best = min(found, key=problem.total)  # the first of equals: greedy's, when it is as fast
    if memory_limit is not None and problem.memory(best) > memory_limit:
        best = _fit(problem, chains, greedy, memory_limit)
    return Solution(
        tuple(best),
        problem.total(best),
        problem.memory(best),
        problem.total(greedy),
        problem.memory(greedy),
        problem,
    )


def _starts(problem: Problem, greedy: list) -> list[list]:
    """The greedy assignment, then one uniform start per layout that some node can give all
    its outputs in (nodes that cannot keep their greedy choice)."""
    layouts = dict.fromkeys(
        out
        for node in problem.nodes
        for choice in node.choices
        for out in choice.outs
        if out is not None
    )
    starts = [greedy]
    for layout in layouts:
        start = [
            min(
                (c for c, choice in enumerate(node.choices) if set(choice.outs) == {layout}),
                key=node.compute.__getitem__,
                default=node.greedy,
            )
            for node in problem.nodes
        ]
        if start not in starts:
            starts.append(start)
    return starts


def _fit(problem: Problem, chains: list, start: list, limit: float) -> list:
    lam = problem.total(start) / max(problem.memory(start), 1.0)  # seconds per byte, a scale
    low, fitting = 0.0, None
    for _ in range(60):
        assign = _minimize(problem, chains, start, lam)
        if problem.memory(assign) <= limit:
            fitting = assign
            break
        low, lam = lam, 2 * lam
    if fitting is None:
        leanest = problem.memory(assign)
        raise TideflowError(
            f"auto_parallel: no layout found fits the memory limit of {limit:,.0f} bytes per "
            f"rank; the leanest needs {leanest:,.0f} bytes"
        )
    high = lam
    for _ in range(_BISECTIONS):
        middle = (low + high) / 2
        assign = _minimize(problem, chains, start, middle)
        if problem.memory(assign) <= limit:
            high, fitting = middle, assign
        else:
            low = middle
    return fitting


def _minimize(problem: Problem, chains: list, start: list, lam: float) -> list:
    assign = list(start)

    def objective(a: list) -> float:
        return problem.total(a) + lam * problem.memory(a)

    current = objective(assign)
    for _ in range(_MAX_SWEEPS):
        before = current
        for chain in chains:
            proposal = _chain_dp(problem, chain, assign, lam)
            if proposal != assign and (value := objective(proposal)) < current:
                assign, current = proposal, value
        for v, node in enumerate(problem.nodes):
            costs = [problem.local_cost(v, c, assign, lam) for c in range(len(node.choices))]
            best = min(range(len(costs)), key=costs.__getitem__)
            if costs[best] < costs[assign[v]]:
                assign[v] = best
        current = objective(assign)
        if current >= before:
            break
    return assign


def _chains(problem: Problem) -> list[list[int]]:
    """A cover of the nodes by paths along producer -> consumer edges, in trace order."""
    chain_of: dict[int, list[int]] = {}
    chains = []
    for v, node in enumerate(problem.nodes):
        producers = [
            problem.values[value].producer
            for _, value in node.inputs
            if problem.values[value].producer is not None
        ]
        chain = None
        if producers and chain_of[producers[0]][-1] == producers[0]:
            chain = chain_of[producers[0]]
        if chain is None:
            chain = []
            chains.append(chain)
        chain.append(v)
        chain_of[v] = chain
    return chains


def _chain_dp(problem: Problem, chain: list[int], assign: list, lam: float) -> list:
    """The best choices along `chain` with every other node at its choice in `assign`."""
    work = list(assign)
    # per position: (cost so far, back pointer) per choice
    table: list[list[tuple[float, int]]] = []
    for i, v in enumerate(chain):
        prev = chain[i - 1] if i else None
        nxt = chain[i + 1] if i + 1 < len(chain) else None
        row = []
        for c in range(len(problem.nodes[v].choices)):
            work[v] = c
            unary = _unary(problem, v, c, work, lam, prev, nxt)
            if prev is None:
                row.append((unary, -1))
                continue
            best = None
            for cp, (so_far, _) in enumerate(table[-1]):
                work[prev] = cp
                total = so_far + _between(problem, prev, v, work)
                if best is None or total < best[0]:
                    best = (total, cp)
            work[prev] = assign[prev]
            row.append((best[0] + unary, best[1]))
        work[v] = assign[v]
        table.append(row)
    proposal = list(assign)
    c = min(range(len(table[-1])), key=lambda k: table[-1][k][0])
    for i in range(len(chain) - 1, -1, -1):
        proposal[chain[i]] = c
        c = table[i][c][1]
    return proposal


def _between(problem: Problem, u: int, v: int, assign: list) -> float:
    """Boxing time of the values `u` produces that `v` consumes."""
    c = problem.nodes[v].choices[assign[v]]
    time = 0.0
    for arg, value in problem.nodes[v].inputs:
        if problem.values[value].producer == u:
            time += problem.edge_time(value, assign, v, arg, c)
    return time


def _unary(problem: Problem, v: int, c: int, assign: list, lam: float, prev, nxt) -> float:
    """Node `v`'s terms under choice `c`, less the edges to its chain neighbours."""
    node = problem.nodes[v]
    choice = node.choices[c]
    cost = node.compute[c] + lam * node.memory[c]
    for arg, value in node.inputs:
        if prev is None or problem.values[value].producer != prev:
            cost += problem.edge_time(value, assign, v, arg, choice)
    for value in node.outputs:
        for consumer, arg in problem.consumers[value]:
            if consumer != nxt:
                d = problem.nodes[consumer].choices[assign[consumer]]
                cost += problem.edge_time(value, assign, consumer, arg, d)
    return cost
