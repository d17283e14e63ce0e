"""Dispatch modes: what an op call goes through before local kernels run.

A mode is a handler `handler(op, args, attrs, below)` that sees every op its thread
dispatches while it is entered (`with dispatch_mode(handler): ...`) and decides what
happens: record the call (graph tracing), change its operands (autocast), or pass it on
with `below(op, args, attrs)`, which calls the mode entered before it. Modes stack per
thread, innermost first, and leave in the reverse order: a graph traced on one thread never
sees the ops of another (a data source collating a batch).

Below every thread's modes is the base: the local kernels, or, once a global tensor
exists, the global mode, which routes calls with global operands and runs the others
locally. The base is process-wide because global tensors are values any thread may compute
with; `dispatch` reads one thread-local attribute to find where a call starts.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from .errors import TideflowError

Handler = Callable[..., object]  # (op, args, attrs) -> the op's outputs


class _Stack(threading.local):
    # NOTE: the class attribute is the base; a thread inside modes shadows it with its
    # innermost mode, so a thread outside any reads the base as it is now
    top: Handler

    def __init__(self) -> None:
        self.levels: list[Handler] = []  # this thread's modes, innermost last


STACK = _Stack()


def set_base(handler: Handler) -> None:
    """Make `handler` what calls reach below every thread's modes."""
    _Stack.top = staticmethod(handler)  # read through an instance: not a method


def base() -> Handler:
    return _Stack.top


def _below_all(op, args: tuple, attrs: dict):
    return _Stack.top(op, args, attrs)


class dispatch_mode:
    """While entered, every op this thread dispatches goes to `handler(op, args, attrs,
    below)` first.

    >>> def log(op, args, attrs, below):
    ...     print(op.name)
    ...     return below(op, args, attrs)
    >>> x = flow.ones(2)
    >>> with dispatch_mode(log):
    ...     y = x + 1
    add
    """

    __slots__ = ("_call", "handler")

    def __init__(self, handler: Callable[..., object]) -> None:
        self.handler = handler

    def __enter__(self) -> dispatch_mode:
        levels = STACK.levels
        below = levels[-1] if levels else _below_all
        handler = self.handler

        def call(op, args: tuple, attrs: dict):
            return handler(op, args, attrs, below)

        self._call = call
        levels.append(call)
        STACK.top = call
        return self

    def __exit__(self, *exc) -> None:
        levels = STACK.levels
        if not levels or levels[-1] is not self._call:
            raise TideflowError(
                "dispatch modes must be left in the reverse order they were entered "
                f"(leaving {self.handler!r})"
            )
        levels.pop()
        if levels:
            STACK.top = levels[-1]
        else:
            del STACK.top  # back to the base
