"""Neural-network building blocks: Module and layers, `functional` (the stateless ops)."""

from . import functional, graph, init, parallel, utils
from .graph import Graph, GraphConfig
from .modules import *  # noqa: F403
from .modules import __all__ as _modules_all
from .parallel import DataParallel
from .parameter import Buffer, Parameter, UninitializedBuffer, UninitializedParameter

__all__ = [
    "Buffer", "DataParallel", "Graph", "GraphConfig", "Parameter", "UninitializedBuffer",
    "UninitializedParameter", "functional", "graph", "init", "parallel", "utils",
    *_modules_all,
]  # fmt: skip
