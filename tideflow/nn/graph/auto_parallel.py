"""`config.enable_auto_parallel(True)`: search the layouts of build's ops before compiling.

Build is traced once under a `Recorder` (the global mode's greedy layouts, every valid
alternative written down), the layouts are searched (`parallel.auto`), and the graph is then
traced for real under a `Planned` session that hands each op call its searched layout. The
second trace thus records the program, boxing and backward included, exactly as the global
mode builds it for those layouts: the rewrite cannot disagree with eager global tensors.

Constraints: the layouts of build's inputs, of parameters and of every `to_global` in build
are the user's; only the layouts of values computed by ops are searched (parameters keep
theirs, so the optimizer and checkpoints see them unchanged).
"""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np

from ...compiler.chain import Chain
from ...compiler.ir import Value
from ...distributed.world import get_world
from ...framework.errors import TideflowError
from ...framework.random import get_rng_state, set_rng_state
from ...framework.sbp import B, P
from ...parallel._auto_session import Planned, Recorder
from ...parallel._comm import comm_for
from ...parallel.auto import PlanCounts, Problem, Solution, build_problem, describe, search
from ...parallel.boxing import BOXING
from ...parallel.cost._calibrate import cache_path, local_cluster


def searched_layouts(graph, trace) -> tuple[Planned, Solution, str]:
    """The planned session for `graph`, the search's solution and the report `debug(0)`
    prints. `trace(session)` traces build with the session active (its result unused)."""
    options = graph.config.auto_parallel_options
    if graph.config.zero and graph.config.zero_options.get("stage") == 3:
        raise TideflowError(
            "enable_auto_parallel: ZeRO stage 3 re-lays parameters out at the first call; "
            "use stage 1 or 2 with auto-parallel"
        )
    recorder = Recorder()
    state = get_rng_state()  # the recording trace must not move the generator
    try:
        trace(recorder)
    finally:
        set_rng_state(state)
    cluster = options.get("cluster") or _local(get_world().size)
    steps = graph.config.gradient_accumulation_steps
    problem = build_problem(recorder.calls, cluster, recorder.pins, steps)
    solution = _agreed(problem, search(problem, options.get("memory_limit")))
    plan = [
        (node.op, node.choices[c])
        for node, c in zip(problem.nodes, solution.assign, strict=True)
        if node.searched
    ]
    return Planned(plan), solution, describe(problem, solution)


def plan_counts(plan, program) -> PlanCounts:
    """The nodes, tasks, hand-overs between stream threads, collectives and optimizer
    updates' bytes of a lowered plan: what the cost model prices beyond the kernels and
    transfers of build's ops (`Solution.lowered`)."""
    streams = [task.stream for task in plan.tasks if isinstance(task.fn, Chain)]
    return PlanCounts(
        nodes=len(program.nodes),
        tasks=len(plan.tasks),
        switches=sum(a != b for a, b in itertools.pairwise(streams)),
        collectives=sum(node.op.communicates and _exchanges(node) for node in program.nodes),
        update_bytes=sum(_update_bytes(node) for node in program.nodes if node.op.mutates),
    )


def _update_bytes(node) -> int:
    """An update reads each array it is given once and writes back those it updates in
    place (Adam: parameter, gradient and moments read, all but the gradient written)."""
    read = sum(a.nbytes for a in node.operands if isinstance(a, Value))
    written = sum(
        node.operands[i].nbytes for i in node.op.mutates if isinstance(node.operands[i], Value)
    )
    return read + written


def _exchanges(node) -> bool:
    """Whether a communicating node waits for other ranks: not a boxing that only slices or
    zeroes its shard (B->S, B->P, S->P), nor one on a single rank."""
    if node.op is not BOXING:
        return True
    step = node.attrs["step"]
    return len(step.group) > 1 and step.src is not B and step.dst is not P


def _agreed(problem: Problem, solution: Solution) -> Solution:
    """Rank 0's plan on every rank: ranks on machines whose measured profiles differ could
    choose differently, and their collectives would then not match."""
    if get_world().size == 1:
        return solution
    assign = np.array(solution.assign, dtype=np.int64)
    comm_for(None).bcast(assign, 0)
    chosen = [int(c) for c in assign]
    if tuple(chosen) == solution.assign:
        return solution
    return dataclasses.replace(
        solution,
        assign=tuple(chosen),
        time=problem.total(chosen),
        memory=problem.memory(chosen),
    )


def _local(ranks: int):
    # NOTE: calibrating starts an MPI job of its own, which must not happen inside every rank
    # of this one; the profile is measured once, beforehand.
    if not cache_path().exists():
        raise TideflowError(
            "enable_auto_parallel: this machine's cost profile is not measured yet; run "
            "`tideflow plan --cluster local --calibrate` once, or pass cluster="
        )
    return local_cluster(gpus_per_node=ranks)
