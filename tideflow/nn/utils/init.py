"""`skip_init`: PyTorch's way to build a module whose parameters will be overwritten."""

from __future__ import annotations

import inspect

from ...framework.errors import TideflowError

__all__ = ["skip_init"]


def skip_init(module_cls, *args, **kwargs):
    """`module_cls(*args, **kwargs)`, for parameters that will be loaded or set before use.
    PyTorch leaves them uninitialized (built on the meta device); tideflow runs the
    constructor's initialization, which those values never depend on. As in PyTorch, the class
    must take a `device` argument.

    >>> m = flow.nn.utils.skip_init(flow.nn.Linear, 5, 1)
    """
    if "device" not in inspect.signature(module_cls).parameters:
        raise TideflowError("Module must support a 'device' arg to skip initialization")
    return module_cls(*args, **kwargs)
