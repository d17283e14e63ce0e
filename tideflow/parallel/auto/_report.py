"""What `graph.debug(0)` prints about a searched plan: its predicted cost against the global
mode's greedy choice, the layout of each module's ops, and the boxing the plan inserts."""

from __future__ import annotations

from collections import Counter

from ._problem import Problem
from ._search import Solution


def _layout(nd: tuple | None) -> str:
    if nd is None:
        return "-"
    return repr(nd[0]) if len(nd) == 1 else "(" + ", ".join(map(repr, nd)) + ")"


def _signature(choice) -> str:
    ins = ", ".join(_layout(nd) for nd in choice.ins if nd is not None)
    return f"{ins} -> {', '.join(_layout(nd) for nd in choice.outs)}"


def _bytes(n: float) -> str:
    return f"{n / 2**20:.2f} MiB" if n >= 2**20 else f"{n / 2**10:.2f} KiB"


def describe(problem: Problem, solution: Solution) -> str:
    ms = 1e3
    lines = [
        f"auto_parallel: predicted step {solution.time * ms:.3f} ms, "
        f"{_bytes(solution.memory)} per rank (greedy layouts: "
        f"{solution.greedy_time * ms:.3f} ms, {_bytes(solution.greedy_memory)})",
        "  layouts by module:",
    ]
    by_module: dict[str, Counter] = {}
    for v, node in enumerate(problem.nodes):
        choice = node.choices[solution.assign[v]]
        by_module.setdefault(node.module or "build", Counter())[
            f"{node.op} {_signature(choice)}"
        ] += 1
    for module, ops in by_module.items():
        entries = ", ".join(f"{op}" + (f" x{n}" if n > 1 else "") for op, n in ops.items())
        lines.append(f"    {module}: {entries}")
    boxing = []
    assign = list(solution.assign)
    for v, node in enumerate(problem.nodes):
        choice = node.choices[assign[v]]
        for arg, value in node.inputs:
            src, dst = problem.layout_of(value, assign), choice.ins[arg]
            if src != dst:
                seconds = problem.edge_time(value, assign, v, arg, choice)
                boxing.append(
                    f"    {node.module or 'build'} {node.op} operand {arg}: "
                    f"{_layout(src)} -> {_layout(dst)} ({seconds * ms:.3f} ms with its gradient)"
                )
    lines.append(f"  boxing inserted ({len(boxing)}):" if boxing else "  no boxing inserted")
    return "\n".join(lines + boxing)
