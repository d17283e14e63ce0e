"""Streams: one thread each, running the actors placed on it one message at a time.

Only a stream's own thread touches the state of its actors, so actors need no locks; every
other thread (another stream, the caller of `Executor.run`) reaches them by posting a
message to the stream's inbox. A message is a handler and its arguments.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable

_WAKE = None  # posted by `halt` so a thread blocked on an empty inbox sees the flag


class Stream:
    """A thread with an inbox. `on_error(exc)` is called (on this thread) when a handler
    raises; it may `halt` the stream."""

    def __init__(self, name: str, on_error: Callable[[BaseException], None]) -> None:
        self.name = name
        self.halted = False
        self._on_error = on_error
        self._inbox: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(
            target=self._loop, name=f"tideflow-stream-{name}", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def post(self, handler: Callable, *args) -> None:
        """Run `handler(*args)` on this stream's thread, after the messages before it."""
        self._inbox.put((handler, args))

    def halt(self) -> None:
        """Stop after the message being handled; queued messages are dropped."""
        self.halted = True
        self._inbox.put(_WAKE)

    def join(self) -> None:
        if self._thread.ident is not None and self._thread is not threading.current_thread():
            self._thread.join()

    def _loop(self) -> None:
        get = self._inbox.get
        while True:
            message = get()
            if self.halted:
                return
            handler, args = message
            try:
                handler(*args)
            except BaseException as exc:  # a stream thread must not die silently
                self._on_error(exc)
