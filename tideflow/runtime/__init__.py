"""The streaming actor runtime: runs a compiled plan (`PlanSpec`) with one actor per task and
one thread per stream. Actors own output registers with a quota, act when their inputs are
ready and a register is free, and tell their neighbours; nothing else schedules them.

>>> import numpy as np
>>> from tideflow.runtime import Executor, PlanSpec, TaskSpec
>>> plan = PlanSpec(
...     tasks=(
...         TaskSpec("x", fn=None, inputs=(), n_out=1),
...         TaskSpec("square", fn=lambda x: (x * x,), inputs=(("x", 0),), n_out=1),
...     ),
...     feeds=("x",),
...     fetches=(("square", 0),),
...     variables={},
... )
>>> with Executor(plan) as executor:
...     executor.run((np.arange(3),)).result()
(array([0, 1, 4]),)
"""

from .boundary import DataSource
from .errors import ExecutorClosed, PlanError, SourceExhausted, StepError, TaskError
from .executor import Executor
from .plan import PlanSpec, TaskSpec, check_plan

__all__ = [
    "DataSource",
    "Executor",
    "ExecutorClosed",
    "PlanError",
    "PlanSpec",
    "SourceExhausted",
    "StepError",
    "TaskError",
    "TaskSpec",
    "check_plan",
]
