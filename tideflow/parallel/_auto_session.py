"""Auto-parallel's hook in the global mode: while a session is active on this thread, every
op call with global operands asks it which of the op's valid layouts to use.

A `Recorder` takes the greedy choice and writes down the call (operands, their layouts, every
valid choice): the problem `parallel.auto` searches. A `Planned` session then gives each
call, by its position in the trace, the choice the search made; tracing again under it
records the program with exactly the boxing those layouts need, forward and backward.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from ..framework.errors import TideflowError
from .global_tensor import GlobalTensor

__all__ = ["Call", "Planned", "Recorder", "active", "session"]

_local = threading.local()


def active():
    """The session of this thread, or None (the global mode then chooses greedily)."""
    return getattr(_local, "session", None)


@contextmanager
def session(s) -> Iterator[None]:
    previous = active()
    _local.session = s
    try:
        yield
    finally:
        _local.session = previous


@dataclass
class Call:
    """One op call in the global mode, as recorded; or (`choices` of one, `searched` False)
    a `to_global` in build converting a value to the layout the user asked for."""

    name: str
    operands: tuple  # the global tensors among the arguments (None for the others)
    metas: tuple  # logical metadata of every argument (tensors) or the argument itself
    out_metas: tuple
    placement: object
    choices: list  # every valid `_Choice`
    greedy: int  # index of the choice the global mode would make
    module: str  # the module whose forward made the call ("" for build itself)
    outputs: tuple = ()  # the global tensors it returned
    searched: bool = True


class Recorder:
    """Records every call; chooses greedily. Keeps the tensors alive, so their ids name them
    for as long as the recording lasts. `module_of` names the module running now (the tracer
    sets it)."""

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.pins: list[tuple] = []  # (tensor, layout) a `to_global` found already laid out
        self.module_of: Callable[[], str] = lambda: ""

    def choose(self, op, args, metas, out_metas, where, choices, greedy):
        operands = tuple(a if isinstance(a, GlobalTensor) else None for a in args)
        index = next(i for i, c in enumerate(choices) if c is greedy)
        module = self.module_of()
        self.calls.append(
            Call(op.name, operands, tuple(metas), out_metas, where, choices, index, module)
        )
        return greedy

    def produced(self, outputs: tuple) -> None:
        self.calls[-1].outputs = outputs

    def converted(self, x: GlobalTensor, out: GlobalTensor) -> None:
        """`out = x.to_global(sbp=...)` on x's placement: the user's layout, a constraint."""
        if out._nd_sbp == x._nd_sbp:  # already so laid out: its producer must keep it
            self.pins.append((x, out._nd_sbp))
            return
        keep = _Fixed((x._nd_sbp,), (out._nd_sbp,))
        meta = (tuple(x._logical), x.dtype)
        self.calls.append(
            Call("to_global", (x,), (meta,), (meta,), x._placement, [keep], 0,
                 self.module_of(), (out,), searched=False)
        )  # fmt: skip


@dataclass(frozen=True)
class _Fixed:
    ins: tuple
    outs: tuple


class Planned:
    """Gives the k-th call the k-th planned choice, checking that build calls the same ops in
    the same order as when it was recorded."""

    def __init__(self, plan: list) -> None:
        self._plan = plan  # per call: (op name, choice)
        self._next = 0

    def choose(self, op, args, metas, out_metas, where, choices, greedy):
        k = self._next
        self._next += 1
        if k >= len(self._plan) or self._plan[k][0] != op.name:
            raise TideflowError(
                f"auto_parallel: build() called {op.name} as its op {k}, which was "
                f"{self._plan[k][0] if k < len(self._plan) else 'not called'} when its layouts "
                "were searched; build must call the same ops in the same order every time"
            )
        wanted = self._plan[k][1]
        for c in choices:
            if c.ins == wanted.ins and c.outs == wanted.outs:
                return c
        # NOTE: an op that writes an operand in place only fits its operand's layout, which
        # the plan may have changed; such ops keep the global mode's choice.
        return greedy

    def produced(self, outputs: tuple) -> None:
        pass

    def converted(self, x, out) -> None:
        pass
