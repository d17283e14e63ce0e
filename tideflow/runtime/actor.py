"""Actors: one per task, driven only by messages from their neighbours.

An actor acts when every producer has sent it a "ready" slot and its own regst has a free
slot. Acting runs the task on the arrays of the oldest ready slot of each producer, fills a
slot of its regst, sends "ready" to each consumer and "free" back to each producer. Every
actor acts once per iteration, in order, and messages between two actors arrive in the order
they were sent, so the oldest slots always belong to the same iteration: the plan's order
comes from the messages, with no scheduler deciding it.

The tasks of an in-order stream also take turns (`Turns`): a stream whose tasks talk to
other ranks must call them in the same order on every rank, iteration after iteration.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from .errors import StepError, TaskError
from .regst import Regst, Slot

if TYPE_CHECKING:
    from .iterations import Iterations
    from .stream import Stream


class Actor:
    """The protocol; subclasses say what one act computes (`_compute`)."""

    def __init__(self, name: str, stream: Stream) -> None:
        self.name = name
        self.stream = stream
        self.iteration = 0  # the iteration this actor acts for next
        self.consumers: list[tuple[Actor, int]] = []  # (consumer, its input number for us)
        self.regst = Regst(1, 0, {})  # replaced by `allocate` once the consumers are known
        self._producers: list[tuple[Actor, int]] = []  # (producer, our consumer number there)
        self._ready: list[deque] = []  # per input: ready slots (or pushed values), oldest first
        self._args: list[tuple[int, int]] = []  # per fn argument: (input number, output index)
        self._sink: Iterations | None = None  # set on sinks: they report each act
        self.turns: Turns | None = None  # set on the tasks of an in-order stream

    # wiring (by the executor, before any thread starts)
    def read(self, producer: Actor, output: int) -> None:
        """Take output `output` of `producer` as the next argument."""
        number = next((n for n, (p, _) in enumerate(self._producers) if p is producer), None)
        if number is None:
            number = len(self._producers)
            self._producers.append((producer, len(producer.consumers)))
            producer.consumers.append((self, number))
            self._ready.append(deque())
        self._args.append((number, output))

    def after(self, producer: Actor) -> None:
        """Act once per slot of `producer` too, without reading it (an order, not data)."""
        self._producers.append((producer, len(producer.consumers)))
        producer.consumers.append((self, len(self._ready)))
        self._ready.append(deque())

    def allocate(self, quota: int, gates: dict[int, tuple[int, ...]]) -> None:
        self.regst = Regst(quota, len(self.consumers), gates)

    def report_to(self, iterations: Iterations) -> None:
        """Make this actor a sink: each act completes its part of an iteration."""
        self._sink = iterations
        iterations.add_sink()

    # messages (on this actor's stream thread)
    def on_ready(self, number: int, slot: Slot) -> None:
        self._ready[number].append(slot)
        self._try_act()

    def on_free(self, slot: Slot, consumer: int) -> None:
        for gated in self.regst.release(slot, consumer):
            actor, number = self.consumers[gated]
            actor.stream.post(actor.on_ready, number, slot)
        self._try_act()

    # acting
    def _try_act(self) -> None:
        while self.regst.has_free() and all(self._ready):
            if self.turns is not None and not self.turns.holds(self):
                return
            self._act()

    def _act(self) -> None:
        inputs = [ready.popleft() for ready in self._ready]
        try:
            outputs = self._compute(inputs)
        except Exception as exc:
            self.regst.retire()  # its outputs for this iteration will never exist
            if isinstance(exc, StepError):  # name the step that failed, not its task
                raise TaskError(exc.step, self.iteration, exc.__cause__) from exc.__cause__
            raise TaskError(self.name, self.iteration, exc) from exc
        slot = self.regst.fill(outputs)
        for consumer in self.regst.immediate:
            actor, number = self.consumers[consumer]
            actor.stream.post(actor.on_ready, number, slot)
        for (producer, us), used in zip(self._producers, inputs, strict=True):
            producer.stream.post(producer.on_free, used, us)
        if self._sink is not None:
            self._report(self._sink, outputs)
        self.iteration += 1
        if self.turns is not None:
            self.turns.pass_on()

    def _compute(self, inputs: list) -> tuple:
        raise NotImplementedError

    def _report(self, iterations: Iterations, outputs: tuple) -> None:
        iterations.sink_done(self.iteration)


class Turns:
    """The tasks of one stream acting strictly in plan order, iteration-major: task 0, 1,
    ..., n-1 of iteration i, then task 0 of iteration i+1. Readiness alone would let a task
    whose inputs come early (a receive, which has none; a collective of the next iteration)
    act before an earlier one: ranks would then match different calls, or a receive would
    block the stream before the send it depends on. Used only by the stream's own thread."""

    def __init__(self) -> None:
        self._actors: list[Actor] = []
        self._next = 0

    def join(self, actor: Actor) -> None:
        """`actor` takes the next turn of the order (wiring, in plan order)."""
        actor.turns = self
        self._actors.append(actor)

    def holds(self, actor: Actor) -> bool:
        return self._actors[self._next] is actor

    def pass_on(self) -> None:
        """The actor holding the turn has acted: the next one may, if it is ready."""
        self._next = (self._next + 1) % len(self._actors)
        actor = self._actors[self._next]
        actor.stream.post(actor._try_act)


class TaskActor(Actor):
    """A task of the plan: `fn(*arrays)` returns its `n_out` outputs."""

    def __init__(self, name: str, stream: Stream, fn: Callable[..., tuple], n_out: int) -> None:
        super().__init__(name, stream)
        self._fn = fn
        self._n_out = n_out

    def _compute(self, inputs: list) -> tuple:
        outputs = self._fn(*[inputs[number].arrays[index] for number, index in self._args])
        if type(outputs) is not tuple or len(outputs) != self._n_out:
            raise TypeError(
                f"fn must return a tuple of {self._n_out} array(s), got {describe(outputs)}"
            )
        return outputs


def describe(value: object) -> str:
    """`a tuple of 3`, `a list of 1`, `ndarray`: what a task or data source gave instead."""
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of {len(value)}"
    return type(value).__name__
