"""The launcher's watch over a one-node job: when a rank dies without a word, say which.

A rank killed by SIGKILL (or the OOM killer, or a crash in C) prints nothing, and MPICH's
Hydra then ends the other ranks and reports the first process it reaps, often one it killed
itself. So the launcher watches the ranks' processes through pidfds: the kernel wakes it
when a rank's process ends, before Hydra, which learns of it through a chain of processes
(the rank's proxy, then mpiexec or the other ranks), has killed anyone else. A rank that
ended while its record (records.py) says it runs died without a word: the launcher prints
its rank, process id and the last communication point it reached, and ends the job. A rank
that fails in Python says why itself (its record says so) and ends the job through
MPI_Abort; one that exits normally leaves the others running, as under plain mpiexec.

mpiexec runs with `-disable-auto-cleanup`, so that ranks outside MPI calls are not killed
before the launcher has looked; the launcher ends the job itself. Until every rank has a
record, the ranks' processes are also found as mpiexec's grandchildren (mpiexec ->
hydra_pmi_proxy -> rank), so that one that dies before it writes its record still ends
the job.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from . import records

_POLL_MS = 50  # between looks for ranks not watched yet (then it sleeps until a process ends)
_HYDRA_EXIT_SECONDS = 5.0  # for mpiexec to notice that its ranks are gone


def supervise(cmd: list[str], ranks: int) -> int:
    """Run the mpiexec command line `cmd` of a job of `ranks` processes on this node to its
    end; its exit status."""
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None  # memory, not a disk
    with tempfile.TemporaryDirectory(prefix="tideflow-ranks-", dir=shm) as directory:
        env = {**os.environ, records.RECORDS_VAR: directory}
        job = subprocess.Popen([cmd[0], "-disable-auto-cleanup", *cmd[1:]], env=env)
        watch = _Watch(job.pid, ranks, directory)
        try:
            failed = watch.until_failure()
        finally:
            watch.close()
        if failed is not None:
            sys.stderr.write("".join(f"tideflow: {line}; ending the job\n" for line in failed))
            sys.stderr.flush()
            _end(job, watch.known())
        return _exit_status(job.wait())


class _Watch:
    """The job's processes, each behind a pidfd in one poll set."""

    def __init__(self, mpiexec: int, ranks: int, directory: str) -> None:
        self.ranks = ranks
        self.directory = directory
        self.mpiexec = mpiexec
        self.poll = select.poll()
        self.fds: dict[int, int] = {}  # pidfd -> pid
        self.rank_of: dict[int, int] = {}  # pid -> rank
        self.mpiexec_fd = self._watch(mpiexec)

    def until_failure(self) -> list[str] | None:
        """Wait for mpiexec to end (None) or for a rank to end that did not exit normally:
        a line for each that died without a word (none when one said why itself)."""
        while True:
            everyone = len(self.rank_of) >= self.ranks
            try:
                ready = [fd for fd, _ in self.poll.poll(None if everyone else _POLL_MS)]
            except KeyboardInterrupt:  # the terminal sent it to mpiexec too: it ends the job
                continue
            found = records.read(self.directory)
            ended = [self.fds[fd] for fd in ready if fd != self.mpiexec_fd]
            failed = self._failures(ended, found)
            if failed is not None:
                return failed
            if self.mpiexec_fd in ready:
                return None
            for fd in ready:
                self._forget(fd)
            self._discover(found)

    def _failures(self, ended: list[int], found: dict) -> list[str] | None:
        state = {pid: (rank, s, what) for rank, (s, pid, what) in found.items()}
        if any(s == records.ABORTING for _, s, _ in state.values()):
            return [] if ended else None  # it said why; the others die of MPI_Abort
        lines = []
        for pid in ended:
            rank, s, what = state.get(pid, (self.rank_of[pid], None, None))
            if s is None:
                lines.append(f"rank {rank} (pid {pid}) died before it started tideflow")
            elif s == records.RUNNING:
                lines.append(
                    f"rank {rank} (pid {pid}) died without a word (SIGKILL, the OOM killer, "
                    f"or a crash outside Python); it was last at {what}"
                )
        return lines or None

    def _discover(self, found: dict) -> None:
        """Watch the ranks that have appeared since the last look."""
        pids = {pid: rank for rank, (_, pid, _) in found.items()}
        if len(found) < self.ranks:
            pids.update(_ranks_below(self.mpiexec))
        for pid, rank in pids.items():
            if pid not in self.rank_of:
                self.rank_of[pid] = rank
                self._watch(pid)

    def _watch(self, pid: int) -> int:
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:  # already reaped: nothing to watch, nothing to name
            return -1
        self.fds[fd] = pid
        self.poll.register(fd, select.POLLIN)
        return fd

    def _forget(self, fd: int) -> None:
        self.poll.unregister(fd)
        del self.fds[fd]
        os.close(fd)

    def known(self) -> list[int]:
        return list(self.rank_of)

    def close(self) -> None:
        for fd in list(self.fds):
            self._forget(fd)


def _end(job: subprocess.Popen, pids: list[int]) -> None:
    """Kill every rank left (Hydra, not cleaning up, waits for them), then mpiexec if it
    does not end by itself."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    try:
        job.wait(_HYDRA_EXIT_SECONDS)
    except subprocess.TimeoutExpired:
        job.kill()


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _ranks_below(mpiexec: int) -> dict[int, int]:
    """pid -> rank of the live rank processes of the job (mpiexec's grandchildren)."""
    found = {}
    for proxy in _children(mpiexec):
        for pid in _children(proxy):
            try:
                environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            except OSError:
                continue
            for entry in environ:
                if entry.startswith(b"PMI_RANK="):
                    found[pid] = int(entry.removeprefix(b"PMI_RANK="))
    return found


def _exit_status(returncode: int) -> int:
    """The shell's status of a process that exited with `returncode` (128 + N: signal N)."""
    return 128 - returncode if returncode < 0 else returncode
