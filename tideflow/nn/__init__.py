"""Neural-network building blocks: Module and layers, `functional` (the stateless ops)."""

from . import functional, init, utils
from .modules import *  # noqa: F403
from .modules import __all__ as _modules_all
from .parameter import Buffer, Parameter

__all__ = ["Buffer", "Parameter", "functional", "init", "utils", *_modules_all]
