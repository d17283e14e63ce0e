"""The executor: runs a plan on its actors, one thread per stream, run after run."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from concurrent.futures import Future

from .boundary import DataSource
from .errors import ExecutorClosed
from .plan import PlanSpec
from .wiring import build_network


class Executor:
    """Runs `plan`; each `run` returns a Future of the fetched arrays.

    Runs stream: `run` returns at once, and run i+1 starts on whatever actors run i has left,
    bounded only by the regst quotas (and `max_in_flight` runs at a time, after which `run`
    waits). A task that raises in run k fails run k and every later one (their Futures and
    `run` raise a `TaskError` naming the task); the runs before k complete. `close` (or
    leaving a `with` block) joins every thread; a new Executor can then be built from the
    same plan.

    `sources` fill some feeds from iterables, ahead of the runs (`DataSource`); `run` then
    takes arrays for the other feeds only (`executor.feeds` lists them).

    >>> import numpy as np
    >>> from tideflow.runtime import Executor, PlanSpec, TaskSpec
    >>> plan = PlanSpec(
    ...     tasks=(
    ...         TaskSpec("x", fn=None, inputs=(), n_out=1),
    ...         TaskSpec("double", fn=lambda x: (2 * x,), inputs=(("x", 0),), n_out=1),
    ...     ),
    ...     feeds=("x",),
    ...     fetches=(("double", 0),),
    ...     variables={},
    ... )
    >>> with Executor(plan) as executor:
    ...     runs = [executor.run((np.full(2, i),)) for i in range(3)]
    ...     [run.result()[0].tolist() for run in runs]
    [[0, 0], [2, 2], [4, 4]]
    """

    def __init__(
        self, plan: PlanSpec, *, sources: Sequence[DataSource] = (), max_in_flight: int = 8
    ) -> None:
        if not isinstance(max_in_flight, int) or max_in_flight < 1:
            raise ValueError(f"max_in_flight must be an integer >= 1, got {max_in_flight!r}")
        network = self._network = build_network(plan, sources, max_in_flight)
        self._run_lock = threading.Lock()  # runs from two threads: pushes in iteration order
        self._closed = False
        # Threads stop when the executor is closed or collected. Not at exit: joining a task
        # blocked forever would hang the interpreter, and the threads are daemons anyway.
        self._shut_down = weakref.finalize(self, network.shut_down)
        self._shut_down.atexit = False
        network.start()

    @property
    def feeds(self) -> tuple[str, ...]:
        """The feeds `run` takes arrays for, in order (those no DataSource fills)."""
        return tuple(actor.name for actor in self._network.fed)

    def run(self, feeds: Sequence = ()) -> Future:
        """Start one iteration with one array per name in `feeds`; returns a Future whose
        `result()` is the tuple of fetched arrays, once the iteration has fully run."""
        if self._closed:
            raise ExecutorClosed("run() on a closed Executor")
        fed = self._network.fed
        if not isinstance(feeds, (tuple, list)):
            raise TypeError(f"run() takes a tuple of arrays, got {type(feeds).__name__}")
        if len(feeds) != len(fed):
            raise ValueError(
                f"run() takes {len(fed)} array(s), for feeds {list(self.feeds)}, got {len(feeds)}"
            )
        with self._run_lock:
            _, future = self._network.iterations.start()
            for feed, array in zip(fed, feeds, strict=True):
                feed.stream.post(feed.on_push, array)
            for actor in self._network.ticked:
                actor.stream.post(actor.on_push, None)
        return future

    def synchronize(self) -> None:
        """Wait until every started run has completed or failed (the Futures hold errors)."""
        self._network.iterations.wait_all()

    def close(self, *, cancel: bool = False) -> None:
        """Let started runs finish (or, with `cancel`, fail them with `ExecutorClosed`), then
        stop and join every thread. Closing again does nothing."""
        if self._closed:
            return
        self._closed = True
        iterations = self._network.iterations
        if cancel:
            iterations.fail(ExecutorClosed("the Executor was closed"))
        else:
            iterations.wait_all()
        # A run waiting for room in flight (another thread) raises instead of starting.
        iterations.fail(ExecutorClosed("run() on a closed Executor"))
        self._shut_down()

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, exc_type, exc, traceback) -> None:
        self.close(cancel=exc_type is not None)

    def __repr__(self) -> str:
        streams = ", ".join(self._network.streams)
        state = "closed" if self._closed else "open"
        return f"Executor(feeds={list(self.feeds)}, streams=[{streams}], {state})"
