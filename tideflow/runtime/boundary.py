"""Actors where the plan meets the outside: feeds and variables (one act per run), the data
source (pulls batches ahead of the runs), and fetches (hand outputs to the run's Future)."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .actor import Actor, describe
from .errors import SourceExhausted, StepError, TaskError

if TYPE_CHECKING:
    from .iterations import Iterations
    from .stream import Stream


@dataclass(frozen=True)
class DataSource:
    """Feeds filled from an iterable (a DataLoader yielding arrays) instead of `run`'s
    arguments. Each item is a tuple (or list) with one array per name in `feeds`.

    Batches are pulled on a stream of their own ("data"), up to the plan's quota plus one
    ahead of the runs that use them, so loading overlaps compute. A run after the last batch
    raises `SourceExhausted`; a run after the iterator raised fails with that error.

    >>> batches = ((np.ones(2), np.zeros(2)) for _ in range(3))
    >>> source = DataSource(batches, feeds=("x", "y"))
    """

    iterable: Iterable
    feeds: tuple[str, ...]


class PerRunActor(Actor):
    """An actor that also needs the caller's turn: one value pushed by each `run`."""

    def __init__(self, name: str, stream: Stream) -> None:
        super().__init__(name, stream)
        self._pushes: deque = deque()

    def on_push(self, value: object) -> None:
        self._pushes.append(value)
        self._try_act()

    def _try_act(self) -> None:
        while self._pushes and self.regst.has_free() and all(self._ready):
            self._act()


class RunStartActor(PerRunActor):
    """Emits nothing once per run: tasks that read nothing (a receive) act after it, once
    per run started, instead of at once for runs nobody asked for."""

    def _compute(self, inputs: list) -> tuple:
        self._pushes.popleft()
        return ()


class FeedActor(PerRunActor):
    """Emits the array the caller passed to `run`."""

    def _compute(self, inputs: list) -> tuple:
        return (self._pushes.popleft(),)


class SourcedFeedActor(PerRunActor):
    """Emits its array of the data source's next batch, one per run."""

    def _compute(self, inputs: list) -> tuple:
        self._pushes.popleft()
        number, index = self._args[0]
        return (inputs[number].arrays[index],)


class VariablesActor(PerRunActor):
    """Emits the arrays of a stream's variable tasks, output i for the i-th, each as its
    holder has it when the run reaches it, so an array rebound between runs (eager code,
    `load_state_dict`) is what the next run reads. One actor for all of them: a model's
    hundreds of parameters and optimizer states cost one act and one message per consumer
    per run, not one of each per variable."""

    def __init__(self, name: str, stream: Stream) -> None:
        super().__init__(name, stream)
        self._tasks: list[tuple[str, object]] = []  # (variable task name, holder)

    def add(self, task: str, holder: object) -> int:
        """One more variable task (wiring, before any run): its output number."""
        self._tasks.append((task, holder))
        return len(self._tasks) - 1

    def _compute(self, inputs: list) -> tuple:
        self._pushes.popleft()
        arrays = []
        for task, holder in self._tasks:
            try:
                arrays.append(holder.array)
            except Exception as exc:  # the error names the variable's task, not this actor
                raise StepError(task, exc) from exc
        return tuple(arrays)


class FetchActor(Actor):
    """Hands one output to the run's Future. A value some task writes in place is copied, as
    later iterations would change it under the caller."""

    def __init__(self, name: str, stream: Stream, position: int, copy: bool) -> None:
        super().__init__(name, stream)
        self._position = position
        self._copy = copy

    def _compute(self, inputs: list) -> tuple:
        number, index = self._args[0]
        value = inputs[number].arrays[index]
        return (value.copy() if self._copy else value,)

    def _report(self, iterations: Iterations, outputs: tuple) -> None:
        iterations.sink_done(self.iteration, self._position, outputs[0])


class SourceActor(Actor):
    """Pulls batches from a `DataSource` while it has a free slot, without waiting for runs.

    It pulls one batch ahead before emitting: when the iterator ends, the run that would have
    needed the next batch is refused before the current batch's run can complete.
    """

    def __init__(
        self, name: str, stream: Stream, source: DataSource, iterations: Iterations
    ) -> None:
        super().__init__(name, stream)
        self._source = source
        self._iterations = iterations
        self._iterator: Iterator = iter(())  # replaced on the data stream by `on_start`
        self._staged: deque = deque()
        self._pulled = 0

    def on_start(self) -> None:
        try:
            self._iterator = iter(self._source.iterable)
        except Exception as exc:
            self._iterations.end(0, TaskError(self.name, 0, exc))
            return
        self._pull()
        self._try_act()

    def _try_act(self) -> None:
        while self._staged and self.regst.has_free():
            self._act()

    def _compute(self, inputs: list) -> tuple:
        batch = self._staged.popleft()
        self._pull()
        return batch

    def _pull(self) -> None:
        index = self._pulled
        try:
            batch = next(self._iterator)
            if not isinstance(batch, (tuple, list)) or len(batch) != len(self._source.feeds):
                raise TypeError(
                    f"each batch must be a tuple of {len(self._source.feeds)} array(s) for "
                    f"feeds {list(self._source.feeds)}, got {describe(batch)}"
                )
        except StopIteration:
            self._iterations.end(
                index,
                SourceExhausted(
                    f"data source {self.name!r} ended after {index} batch(es): run {index} "
                    "has no data"
                ),
            )
            return
        except Exception as exc:  # the runs before this batch go on; this one and later fail
            self._iterations.end(index, TaskError(self.name, index, exc))
            return
        self._pulled += 1
        self._staged.append(tuple(batch))
