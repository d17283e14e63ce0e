"""The runs in flight. Each `Executor.run` starts an iteration with a Future; the iteration is
complete when every sink actor (fetches, and tasks whose outputs nobody reads, such as
optimizer updates) has acted for it, and its Future then holds the fetched arrays."""

from __future__ import annotations

import threading
from concurrent.futures import Future


class _Iteration:
    __slots__ = ("fetched", "future", "remaining")

    def __init__(self, n_sinks: int, n_fetches: int) -> None:
        self.future: Future = Future()
        self.fetched: list = [None] * n_fetches
        self.remaining = n_sinks


class Iterations:
    """Futures of the started iterations, numbered from 0 in `start` order.

    Sinks report from stream threads; `start` and `wait_all` run on the caller's. At most
    `max_in_flight` iterations run at once: `start` waits for room, so a caller that never
    looks at results cannot queue unbounded work.
    """

    def __init__(self, n_fetches: int, max_in_flight: int) -> None:
        self._n_sinks = 0
        self._n_fetches = n_fetches
        self._max_in_flight = max_in_flight
        self._running: dict[int, _Iteration] = {}
        self._started = 0
        self._changed = threading.Condition()
        # (first, error): runs numbered `first` and later cannot complete; starting one raises.
        self._end: tuple[int, BaseException] | None = None

    def add_sink(self) -> None:
        """One more actor must act for an iteration to complete (wiring, before any run)."""
        self._n_sinks += 1

    def start(self) -> tuple[int, Future]:
        """Number and register the next iteration; raises the error that ended the plan."""
        with self._changed:
            while len(self._running) >= self._max_in_flight and self._refusal() is None:
                self._changed.wait()
            refusal = self._refusal()
            if refusal is not None:
                raise refusal
            iteration = self._started
            self._started += 1
            record = _Iteration(self._n_sinks, self._n_fetches)
            if self._n_sinks:
                self._running[iteration] = record
        if not self._n_sinks:  # a plan without tasks completes at once
            record.future.set_result(tuple(record.fetched))
        return iteration, record.future

    def sink_done(self, iteration: int, fetch: int | None = None, value: object = None) -> None:
        """A sink acted for `iteration`; a fetch actor passes its position and the value."""
        with self._changed:
            record = self._running.get(iteration)
            if record is None:  # already failed
                return
            if fetch is not None:
                record.fetched[fetch] = value
            record.remaining -= 1
            if record.remaining:
                return
            del self._running[iteration]
            self._changed.notify_all()
        record.future.set_result(tuple(record.fetched))

    def end(self, first: int, error: BaseException) -> None:
        """No iteration from `first` on can complete: fail those started, refuse new ones.
        Iterations before `first` run on (a data source ran dry after `first` batches)."""
        with self._changed:
            if self._end is not None and self._end[0] <= first:
                return
            self._end = (first, error)
            failed = [it for it in self._running if it >= first]
            records = [self._running.pop(it) for it in failed]
            self._changed.notify_all()
        for record in records:  # outside the lock: done-callbacks may call back in
            record.future.set_exception(error)

    def fail(self, error: BaseException) -> None:
        """The plan stopped: every started iteration fails with `error`, and so does `start`."""
        self.end(0, error)

    def wait_all(self) -> None:
        """Wait until no iteration is running (completed or failed)."""
        with self._changed:
            while self._running:
                self._changed.wait()

    def _refusal(self) -> BaseException | None:
        """Why the next iteration cannot start, if it cannot."""
        if self._end is not None and self._started >= self._end[0]:
            return self._end[1]
        return None
