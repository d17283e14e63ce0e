"""Auto-parallel: choose the layouts of a traced step's ops to minimise its predicted time
under a memory limit per rank (`nn.Graph`'s `config.enable_auto_parallel`). The problem is
recorded by `parallel._auto_session`, priced with `parallel.cost`, searched here."""

from ._problem import Node, PlanCounts, Problem, Value, build_problem
from ._report import describe
from ._search import Solution, search

__all__ = [
    "Node",
    "PlanCounts",
    "Problem",
    "Solution",
    "Value",
    "build_problem",
    "describe",
    "search",
]
