"""A failure on one rank ends every rank of the job.

With MPI, a rank that dies of an uncaught exception leaves the others waiting in their next
collective forever: Python's exit runs MPI_Finalize, which waits for them too. So on a
launched rank tideflow replaces `sys.excepthook` and `threading.excepthook`: they print
"tideflow: rank R failed: ..." with the traceback and abort the whole job, through
MPI_Abort when this process has initialized MPI, else by killing this process, which makes
the launcher tear the job down (a rank that never initialized MPI cannot reach the others,
and they cannot have finished MPI_Init without it).

`Watchdog` bounds blocking communication: a call that runs longer than its timeout aborts
the job with a message naming the call and the ranks that had not joined it, instead of
hanging on a dead, stalled or mismatched peer.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
import traceback

_state = {"rank": None}
_FORWARD_SECONDS = 0.3  # time the launcher gets to forward a failing rank's last words


def install(rank: int) -> None:
    """Make an uncaught exception in any thread of this process end the job (idempotent)."""
    _state["rank"] = rank
    if sys.excepthook is not _excepthook:
        sys.excepthook = _excepthook
    if threading.excepthook is not _thread_excepthook:
        threading.excepthook = _thread_excepthook


def installed() -> bool:
    return sys.excepthook is _excepthook


def uninstall() -> None:
    """Restore Python's own hooks."""
    sys.excepthook = sys.__excepthook__
    threading.excepthook = threading.__excepthook__


def abort(message: str, exit_code: int = 1) -> None:
    """Print `message` and end every rank of the job with `exit_code`."""
    from . import records  # NOTE: here, as records imports world, which imports this module

    records.aborting()
    sys.stderr.write(message if message.endswith("\n") else message + "\n")
    sys.stderr.flush()
    sys.stdout.flush()
    # NOTE: the launcher forwards output through pipes it stops reading once the job is torn
    # down: a moment first, or on a busy machine the message naming the failure is lost.
    time.sleep(_FORWARD_SECONDS)
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is not None and mpi.Is_initialized() and not mpi.Is_finalized():
        mpi.COMM_WORLD.Abort(exit_code)
    # NOTE: MPI is not up in this process, so no other rank got past MPI_Init: the launcher
    # sees this rank killed and ends the job (Hydra always; srun with --kill-on-bad-exit).
    os.kill(os.getpid(), signal.SIGKILL)


def failure_message(exc_type, exc, tb, where: str = "") -> str:
    """'tideflow: rank R failed[ in thread T]: Error: text', then the traceback."""
    summary = "".join(traceback.format_exception_only(exc_type, exc)).strip()
    text = "".join(traceback.format_exception(exc_type, exc, tb))
    return f"tideflow: rank {_state['rank']} failed{where}: {summary}\n{text}"


def _excepthook(exc_type, exc, tb) -> None:
    abort(failure_message(exc_type, exc, tb))


def _thread_excepthook(args) -> None:
    if args.exc_type is SystemExit:  # Python ignores SystemExit in threads; so do we
        return
    name = args.thread.name if args.thread is not None else "?"
    abort(failure_message(args.exc_type, args.exc_value, args.exc_traceback, f" in thread {name}"))


class Watchdog:
    """Aborts the job when a blocking call runs longer than `timeout` seconds.

    `with watchdog("allreduce", (0, 1)):` marks a call on the group of world ranks (0, 1);
    one daemon thread checks the calls in flight (one per thread) a few times per timeout.
    Entering and leaving cost two dict operations, so every collective can afford it. With
    an `attendance` (see attendance.py) the thread also answers the other ranks' questions
    about its calls, and asks them in turn before aborting, to name the ranks missing."""

    def __init__(self, timeout: float, rank: int, attendance=None) -> None:
        self.set_timeout(timeout)
        self.rank = rank
        self._attendance = attendance
        self._calls: dict[int, tuple[str, tuple[int, ...], float]] = {}
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="tideflow-watchdog", daemon=True)
        self._thread.start()

    def set_timeout(self, timeout: float) -> None:
        if not timeout > 0:
            raise ValueError(f"the communication timeout must be positive, got {timeout}")
        self.timeout = float(timeout)

    def __call__(self, call: str, ranks: tuple[int, ...]) -> _Watched:
        return _Watched(self._calls, call, ranks)

    def in_flight(self) -> list[tuple[str, tuple[int, ...]]]:
        return [(call, ranks) for call, ranks, _ in list(self._calls.values())]

    def state(self) -> dict:
        """What this rank tells the others: its calls in flight and the last communication
        point it reached (known where faults.py's points are armed: under the launcher)."""
        from . import faults  # NOTE: here, as faults imports world, which imports this module

        return {"calls": self.in_flight(), "last": faults.last_point}

    def stop(self) -> None:
        """End the thread (before MPI finalizes: it must make no MPI call after)."""
        self._stopped.set()
        self._thread.join()

    def _watch(self) -> None:
        # NOTE: short ticks even for long timeouts: a rank asking about a stuck call waits
        # for this thread's answer
        while not self._stopped.wait(min(max(self.timeout / 4, 0.01), _ANSWER_TICK)):
            if self._attendance is not None:
                self._attendance.answer(self.state())
            now = time.monotonic()
            for call, ranks, started in list(self._calls.values()):
                if now - started > self.timeout:
                    abort(self._not_finished(call, ranks))

    def _not_finished(self, call: str, ranks: tuple[int, ...]) -> str:
        head = (
            f"tideflow: rank {self.rank}: {call} on ranks {list(ranks)} did not finish within "
            f"{self.timeout:g} s"
        )
        if self._attendance is None:
            return f"{head} (a rank failed, or the ranks called different ones); aborting the job"
        others = [r for r in ranks if r != self.rank]
        answers = self._attendance.ask(others, self.state)
        joined = [
            r for r in others if answers[r] is not None and (call, ranks) in answers[r]["calls"]
        ]
        missing = [r for r in others if r not in joined]
        if not missing:
            return f"{head}: every rank of the group is in it; aborting the job"
        lines = [f"{head}: ranks {missing} had not joined it; aborting the job"]
        lines += [f"  rank {r}: {_doing(answers[r])}" for r in missing]
        if joined:
            lines.append(f"  ranks {joined}: waiting in it too")
        return "\n".join(lines)


_ANSWER_TICK = 0.25  # seconds; a rank asking waits up to attendance.ANSWER_WAIT


def _doing(answer) -> str:
    if answer is None:
        return "did not answer (dead, or stuck outside Python)"
    calls, last = answer["calls"], answer.get("last")
    where = f"; it was last at {last}" if last else ""
    if not calls:
        return f"in no blocking call (computing, stalled, or somewhere else){where}"
    return "in " + ", ".join(f"{call} on ranks {list(ranks)}" for call, ranks in calls) + where


class _Watched:
    __slots__ = ("call", "calls", "ranks")

    def __init__(self, calls: dict, call: str, ranks: tuple[int, ...]) -> None:
        self.calls = calls
        self.call = call
        self.ranks = ranks

    def __enter__(self) -> None:
        self.calls[threading.get_ident()] = (self.call, self.ranks, time.monotonic())

    def __exit__(self, *exc) -> None:
        self.calls.pop(threading.get_ident(), None)
