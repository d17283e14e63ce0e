"""The plan: what the compiler hands the runtime.

A plan is a DAG of tasks. Each task is a function on arrays; its inputs name other tasks'
outputs. Three kinds of task have no function the runtime calls:

- feed tasks (`PlanSpec.feeds`): their one output is the array the caller passes to
  `Executor.run` (or a `DataSource` supplies);
- variable tasks, named `"var:<name>"`: their one output is `plan.variables[name].array`,
  read at each iteration, so an array rebound between runs is seen by the next one;
- every other task: `fn(*input_arrays)` returns a tuple of `n_out` fresh arrays (the
  runtime keeps them until every consumer is done, and never reuses them).

>>> plan = PlanSpec(
...     tasks=(
...         TaskSpec("x", fn=None, inputs=(), n_out=1),
...         TaskSpec("double", fn=lambda x: (2 * x,), inputs=(("x", 0),), n_out=1),
...     ),
...     feeds=("x",),
...     fetches=(("double", 0),),
...     variables={},
... )
>>> check_plan(plan)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .errors import PlanError

VARIABLE_PREFIX = "var:"


@dataclass(frozen=True)
class TaskSpec:
    """One task: a function of arrays placed on a stream.

    `fn` may write the arrays at the input positions listed in `mutates` in place (optimizer
    updates of parameters and their state); every other input is read-only.
    """

    name: str  # e.g. "matmul_12" (op name + IR id), for errors and debug
    fn: Callable[..., tuple]  # fn(*input_arrays) -> tuple of output arrays (len n_out)
    inputs: tuple[tuple[str, int], ...]  # (producer task name, output index); feeds too
    n_out: int
    stream: str = "compute"  # "compute" | "comm" | "copy"
    mutates: tuple[int, ...] = ()  # input positions written in place
    after: tuple[str, ...] = ()  # earlier tasks that act before it in each run (no data)


@dataclass(frozen=True)
class PlanSpec:
    """A compiled step: tasks, the feeds the caller supplies, the outputs it gets back.

    `tasks` is also the program order of in-place writes: a consumer of a value listed
    before a task that writes it reads the old contents, one listed after reads the new ones,
    and fetches read the value at the end of the step (the runtime adds these orderings, see
    `inplace.py`). A task must write the producer's array itself, not a view a task made.
    A fetched value that some task writes in place is copied for the caller.
    """

    tasks: tuple[TaskSpec, ...]  # topologically ordered
    feeds: tuple[str, ...]  # names of feed tasks (the runtime pushes the caller's arrays)
    fetches: tuple[tuple[str, int], ...]  # outputs returned to the caller, in order
    variables: dict[str, object]  # name -> a holder with .array; task "var:<name>" emits it
    quota: int = 2  # default regst quota per task output
    # streams whose tasks take turns: each acts once per iteration, in plan order, and a
    # later iteration's task never overtakes an earlier one's (see `actor.Turns`)
    in_order: frozenset[str] = frozenset()


def variable_name(task_name: str) -> str | None:
    """`"var:w"` -> `"w"`; None for a task that is not a variable."""
    if task_name.startswith(VARIABLE_PREFIX):
        return task_name[len(VARIABLE_PREFIX) :]
    return None


def check_plan(plan: PlanSpec) -> None:
    """Raise `PlanError` naming the task and the value when `plan` breaks a rule above."""
    if not isinstance(plan.quota, int) or plan.quota < 1:
        raise PlanError(f"plan quota must be an integer >= 1, got {plan.quota!r}")
    n_out: dict[str, int] = {}
    for task in plan.tasks:
        _check_task(task, n_out, plan)
        n_out[task.name] = task.n_out
    feeds = set(plan.feeds)
    if len(feeds) != len(plan.feeds):
        raise PlanError(f"plan feeds name a task twice: {list(plan.feeds)}")
    for name in plan.feeds:
        if name not in n_out:
            raise PlanError(f"feed {name!r} is not a task of the plan")
        if variable_name(name) is not None:
            raise PlanError(f"feed {name!r} cannot also be a variable task")
    for position, (producer, index) in enumerate(plan.fetches):
        _check_output(f"fetch {position}", producer, index, n_out)


def _check_task(task: TaskSpec, n_out: dict[str, int], plan: PlanSpec) -> None:
    if task.name in n_out:
        raise PlanError(f"two tasks are named {task.name!r}")
    if not isinstance(task.n_out, int) or task.n_out < 0:
        raise PlanError(f"task {task.name!r}: n_out must be an integer >= 0, got {task.n_out!r}")
    if not isinstance(task.stream, str) or not task.stream:
        raise PlanError(f"task {task.name!r}: stream must be a non-empty string")
    for producer, index in task.inputs:
        _check_output(f"task {task.name!r}", producer, index, n_out)
    for producer in task.after:
        if producer not in n_out:
            raise PlanError(
                f"task {task.name!r} comes after {producer!r}, which is not an earlier task"
            )
    for position in task.mutates:
        if not 0 <= position < len(task.inputs):
            raise PlanError(
                f"task {task.name!r} mutates input {position}, but it has "
                f"{len(task.inputs)} input(s)"
            )
    var = variable_name(task.name)
    is_root = task.name in plan.feeds or var is not None
    if is_root and (task.inputs or task.after or task.n_out != 1):
        kind = "variable" if var is not None else "feed"
        raise PlanError(
            f"{kind} task {task.name!r} must have no inputs and n_out=1, got "
            f"{len(task.inputs)} input(s) and n_out={task.n_out}"
        )
    if var is not None and var not in plan.variables:
        raise PlanError(f"task {task.name!r} reads variable {var!r}, which plan.variables lacks")
    if not is_root and not callable(task.fn):
        raise PlanError(f"task {task.name!r}: fn must be callable, got {task.fn!r}")


def _check_output(user: str, producer: str, index: int, n_out: dict[str, int]) -> None:
    if producer not in n_out:
        raise PlanError(
            f"{user} reads {producer!r}, which is not an earlier task (tasks must be "
            "topologically ordered)"
        )
    if not 0 <= index < n_out[producer]:
        raise PlanError(
            f"{user} reads output {index} of {producer!r}, which has {n_out[producer]} output(s)"
        )
