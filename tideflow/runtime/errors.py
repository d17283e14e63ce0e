"""What the runtime raises: a malformed plan, a task that failed, a data source that ran dry,
a run on a closed executor."""

from __future__ import annotations

from ..framework.errors import TideflowError


class PlanError(TideflowError, ValueError):
    """The plan breaks a rule of `PlanSpec` (names, ordering, arity, in-place writes)."""


class TaskError(TideflowError):
    """A task's function raised. `task` names it, `iteration` is the run it belonged to
    (0-based), and `__cause__` is the original exception with its traceback."""

    def __init__(self, task: str, iteration: int, cause: BaseException) -> None:
        super().__init__(
            f"task {task!r} failed in iteration {iteration}: {type(cause).__name__}: {cause}"
        )
        self.task = task
        self.iteration = iteration
        self.__cause__ = cause


class StepError(TideflowError):
    """Raised by a task function made of named steps (a compiled chain of ops) when one step
    fails, with the step's exception as `__cause__`: the task's error then names the step."""

    def __init__(self, step: str, cause: BaseException) -> None:
        super().__init__(f"{step} raised {type(cause).__name__}: {cause}")
        self.step = step


class SourceExhausted(TideflowError):
    """A run needs a batch from a `DataSource` whose iterator has ended."""


class ExecutorClosed(TideflowError):
    """`run` after `close`, or a run cancelled by `close(cancel=True)`."""
