"""Layers as Modules. Each family lives in its own file; this package re-exports them."""

from .container import ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential
from .module import Module

__all__ = ["Module", "ModuleDict", "ModuleList", "ParameterDict", "ParameterList", "Sequential"]
