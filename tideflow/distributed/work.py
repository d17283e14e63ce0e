"""`Work`: the handle a communication call returns with `async_op=True`, or `isend`/`irecv`.

Collectives run to completion before they return (MPI's blocking collectives are the fast
path on CPU; overlapping communication with compute is the graph runtime's job), so their
handle is already complete. Point-to-point handles are real: `wait()` completes the
transfer, which lets two ranks exchange with isend + irecv without deadlocking.
"""

from __future__ import annotations

from collections.abc import Callable


class Work:
    """A started communication (`torch.distributed.Work`).

    >>> import tideflow as flow, tideflow.distributed as dist
    >>> work = dist.all_reduce(flow.ones(2), async_op=True)
    >>> work.wait(), work.is_completed()
    (True, True)
    """

    __slots__ = ("_finish",)

    def __init__(self, finish: Callable[[], None] | None = None) -> None:
        self._finish = finish

    def wait(self, timeout=None) -> bool:
        """Block until the communication is done (`timeout` is accepted for PyTorch's
        signature; bound blocking calls with `init_process_group(timeout=...)`)."""
        finish, self._finish = self._finish, None
        if finish is not None:
            finish()
        return True

    def is_completed(self) -> bool:
        return self._finish is None

    def __repr__(self) -> str:
        return f"<Work {'completed' if self._finish is None else 'pending'}>"


def done(async_op: bool) -> Work | None:
    """What a blocking collective returns: a completed handle if asked for one."""
    return Work() if async_op else None
