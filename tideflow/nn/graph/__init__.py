"""Static graphs: `nn.Graph` traces a step once, compiles it and runs it on the actor runtime."""

from .config import GraphConfig
from .graph import Graph
from .module_config import GraphModule, ModuleConfig
from .timeline import Timeline

__all__ = ["Graph", "GraphConfig", "GraphModule", "ModuleConfig", "Timeline"]
