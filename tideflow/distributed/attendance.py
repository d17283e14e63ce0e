"""Which blocking calls each rank is in, asked across ranks when one of them times out.

A call that never finishes is usually missing a rank: one that died, stalls, or called
something else. The watchdog of the rank that timed out asks every other member of the
call's group what it is blocked in; each rank's watchdog thread answers with its calls in
flight (and the last communication point it reached, where it keeps track), so the abort
message can name the ranks that had not joined and say where they are. A rank that does not
answer within `ANSWER_WAIT` seconds is dead or cannot run Python (a C call holding the GIL).

The questions and answers travel between the watchdog threads (MPI_THREAD_MULTIPLE) on a
communicator of their own, so they never match the program's messages.
"""

from __future__ import annotations

import json
import time

from mpi4py import MPI

_QUESTION, _ANSWER = 1, 2
ANSWER_WAIT = 2.0
_POLL_SECONDS = 0.005

# {"calls": [(call, world ranks of its group) of each blocking call the rank is in],
#  "last": the last communication point it reached, or None}
State = dict


class Attendance:
    """Questions and answers about calls in flight, on `comm` (a duplicate of the world)."""

    def __init__(self, comm: MPI.Comm) -> None:
        self._comm = comm

    def answer(self, state: State) -> None:
        """Answer every question that has arrived with `state`, this rank's."""
        status = MPI.Status()
        while self._comm.Iprobe(MPI.ANY_SOURCE, _QUESTION, status):
            asker = status.Get_source()
            self._comm.Recv([bytearray(1), MPI.BYTE], asker, _QUESTION)
            reply = json.dumps(state).encode()
            self._comm.Send([reply, MPI.BYTE], asker, _ANSWER)

    def ask(self, ranks: list[int], state) -> dict[int, State | None]:
        """Each of `ranks`' state; None for a rank that did not answer. Answers others
        meanwhile (`state()`: this rank's), as they may be asking too."""
        answers: dict[int, State] = {}
        try:
            for rank in ranks:
                self._comm.Send([b"?", MPI.BYTE], rank, _QUESTION)
            deadline = time.monotonic() + ANSWER_WAIT
            status = MPI.Status()
            while len(answers) < len(ranks) and time.monotonic() < deadline:
                self.answer(state())
                if self._comm.Iprobe(MPI.ANY_SOURCE, _ANSWER, status):
                    reply = bytearray(status.Get_count(MPI.BYTE))
                    self._comm.Recv([reply, MPI.BYTE], status.Get_source(), _ANSWER)
                    answer = json.loads(reply)
                    answer["calls"] = [(call, tuple(group)) for call, group in answer["calls"]]
                    answers[status.Get_source()] = answer
                else:
                    time.sleep(_POLL_SECONDS)
        except MPI.Exception:
            pass  # a peer's death broke the link: the ranks that did not answer say so
        return {rank: answers.get(rank) for rank in ranks}
