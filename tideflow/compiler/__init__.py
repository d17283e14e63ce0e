"""The graph compiler: trace `nn.Graph.build` into an IR program, run passes over it, and
lower it to a plan of tasks for the runtime (see docs/architecture.md, "Graphs")."""

from .ir import MemoryPlan, Node, Program, TensorHolder, Value, Variable
from .lazy import LazyTensor
from .trace import Tracer, UpdateCall, capture_updates, local_updates

__all__ = [
    "LazyTensor",
    "MemoryPlan",
    "Node",
    "Program",
    "TensorHolder",
    "Tracer",
    "UpdateCall",
    "Value",
    "Variable",
    "capture_updates",
    "local_updates",
]
