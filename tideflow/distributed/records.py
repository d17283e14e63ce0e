"""Each rank's record of what it is doing, where the launcher supervising the job reads it.

The tideflow launcher supervises a one-node job (see supervisor.py): a rank whose process is
gone while its record still says it runs died without a word (SIGKILL, the OOM killer, a
crash in C), and the launcher names it and the last communication point it reached. A rank
launched with `$TIDEFLOW_RANK_RECORDS` set keeps its record in a small file there, mapped
into its memory, from import on: reaching a point (`doing`) is a copy into memory, no
system call. Layout: the state (one byte), then this rank's process id and what it is doing,
as ASCII text ended by a NUL.
"""

from __future__ import annotations

import atexit
import mmap
import os
from pathlib import Path

from .world import launched, launcher_rank_and_size

RECORDS_VAR = "TIDEFLOW_RANK_RECORDS"
RUNNING, EXITED, ABORTING = b"R", b"X", b"A"  # ABORTING: it says why itself before it goes
_SIZE = 256


class _Record:
    def __init__(self, path: Path) -> None:
        self.pid = os.getpid()
        with open(path, "x+b") as f:
            f.truncate(_SIZE)
            self._map = mmap.mmap(f.fileno(), _SIZE)
        self._map[:1] = RUNNING
        self.doing("starting")

    def doing(self, what: str) -> None:
        text = f"{self.pid} {what}".encode("ascii", "replace")[: _SIZE - 2] + b"\0"
        self._map[1 : 1 + len(text)] = text

    def mark(self, state: bytes) -> None:
        # NOTE: forked children (DataLoader workers) share the mapping but are not the rank
        if os.getpid() == self.pid:
            self._map[:1] = state


def _record_from_environment() -> _Record | None:
    directory = os.environ.get(RECORDS_VAR)
    if not directory or not launched():
        return None
    try:
        record = _Record(Path(directory) / f"rank-{launcher_rank_and_size()[0]}")
    except FileExistsError:  # a process the rank spawned (a DataLoader worker): not the rank
        return None
    atexit.register(record.mark, EXITED)  # a normal exit; failure.abort marks ABORTING
    return record


_record = _record_from_environment()
kept = _record is not None


def doing(what: str) -> None:
    """This rank is now at `what` ('collective (all_reduce)'). Call only under `if kept:`."""
    _record.doing(what)


def aborting() -> None:
    """This rank is ending the job after saying why (no-op without a record)."""
    if _record is not None:
        _record.mark(ABORTING)


def read(directory: str) -> dict[int, tuple[bytes, int, str]]:
    """rank -> (state, process id, what it is doing) of every record in `directory`."""
    found = {}
    for path in Path(directory).glob("rank-*"):
        data = path.read_bytes()
        pid, _, what = data[1:].split(b"\0", 1)[0].decode("ascii").partition(" ")
        if pid:  # a record being created has no text yet
            found[int(path.name.removeprefix("rank-"))] = (data[:1], int(pid), what)
    return found
