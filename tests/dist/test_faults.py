"""A fault on one rank wherever the ranks talk ends the whole 4-rank job within 10 s, says
which rank failed and what it was doing, and leaves no process behind.

The faults are injected by `tideflow.distributed.faults` at each kind of point (an eager
collective, a DDP bucket's all-reduce, a compiled graph's communication, a sharded save,
the middle of a collective made of several steps, its part of the first one sent),
at an arrival the run's seed picks: an exception, a SIGKILL, or a stall that the
communication timeout must end. Each (point, kind) runs once here and 20 times in the slow
test. Raising and killed ranks run under the tideflow launcher, which names a rank that
dies without a word; stalls under plain mpiexec, where the watchdog names the rank."""

from __future__ import annotations

import statistics
import sys
import time
import uuid
from pathlib import Path

import pytest

from tideflow.distributed.faults import KINDS, LOG_VAR, POINTS, SPEC_VAR

from .jobs import WORKERS, run_job

pytestmark = pytest.mark.mpi

WORKER = str(WORKERS / "fault_points.py")
RANKS = 4
FAILING = 1
BOUND_S = 10.0  # from the fault to the end of the job
STALL_TIMEOUT_S = 3  # the communication timeout of the stall runs
REPEATS = 20
JOB_TIMEOUT_S = 60  # run_job's bound on one job (a graph job compiles for seconds)
_TAG_VAR = "TIDEFLOW_FAULT_TEST_TAG"  # marks the processes of one job, to find leftovers


def _processes_tagged(tag: str) -> list[int]:
    """The live processes whose environment holds `_TAG_VAR=tag` (the job's, by inheritance)."""
    marker = f"{_TAG_VAR}={tag}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return found


def _no_process_left(tag: str) -> None:
    # NOTE: a moment for the killed processes' parents to reap them
    deadline = time.monotonic() + 2
    while (left := _processes_tagged(tag)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not left, f"processes of the job left behind: {left}"


def _run_once(launch, tmp_path, point: str, kind: str, seed: int) -> float:
    """Inject one fault; check how the job ended; return the seconds from fault to end."""
    log, tag = tmp_path / f"fault-{seed}.log", uuid.uuid4().hex
    env = {SPEC_VAR: f"{point}:{kind}:{FAILING}:{seed}", LOG_VAR: str(log), _TAG_VAR: tag}
    args = [WORKER, point]
    if kind == "stall" and seed % 2:
        args.append(str(STALL_TIMEOUT_S))  # init_process_group(timeout=timedelta(...))
    elif kind == "stall":
        env["TIDEFLOW_COMM_TIMEOUT"] = str(STALL_TIMEOUT_S)  # a launched job's setting
    if kind == "stall":
        job = launch(RANKS, args, timeout=JOB_TIMEOUT_S, **env)
    else:
        launcher = [sys.executable, "-m", "tideflow.distributed.launch", "--nproc_per_node"]
        job = run_job([*launcher, str(RANKS), *args], JOB_TIMEOUT_S, **env)
    ended = time.time()
    output = job.stdout + job.stderr
    assert log.exists(), f"the fault was never reached:\n{output}"
    fault_time, pid, _, doing = log.read_text().split(" ", 3)
    # "rank 1 at collective (all_reduce), arrival 2" -> "collective (all_reduce)"
    where = doing.split(" at ", 1)[1].rsplit(", arrival", 1)[0]
    assert job.returncode != 0, output
    assert ": ok" not in job.stdout, output  # no rank went on past the failure
    _no_process_left(tag)
    if kind == "raise":
        assert f"tideflow: rank {FAILING} failed" in output, output
        assert "InjectedFault" in output, output
        assert "died without a word" not in output, output  # the others died of its abort
    elif kind == "kill":
        named = f"tideflow: rank {FAILING} (pid {pid}) died without a word"
        assert named in output and f"it was last at {where}" in output, output
        assert output.count("died without a word") == 1, output  # not the ranks killed after
    else:
        what = f"did not finish within {STALL_TIMEOUT_S} s: ranks [{FAILING}] had not joined it"
        assert what in output, output
        stalled = f"rank {FAILING}: in no blocking call (computing, stalled, or somewhere else)"
        assert f"{stalled}; it was last at {where}" in output, output
    elapsed = ended - float(fault_time)
    assert elapsed < BOUND_S, f"{doing.strip()}: the job ended {elapsed:.1f} s after the fault"
    return elapsed


CASES = [(point, kind) for point in POINTS for kind in KINDS]


@pytest.mark.parametrize(("point", "kind"), CASES)
def test_a_fault_ends_the_job(launch, tmp_path, point, kind):
    _run_once(launch, tmp_path, point, kind, seed=CASES.index((point, kind)))


@pytest.mark.slow
@pytest.mark.timeout(REPEATS * JOB_TIMEOUT_S)  # each run is bounded by its own
@pytest.mark.parametrize(("point", "kind"), CASES)
def test_a_fault_ends_the_job_every_time(launch, tmp_path, point, kind):
    times = [_run_once(launch, tmp_path, point, kind, seed) for seed in range(REPEATS)]
    print(
        f"{point}/{kind}: {REPEATS} runs, fault to exit median "
        f"{statistics.median(times):.2f} s, max {max(times):.2f} s"
    )


def test_the_fault_specification_is_checked():
    from tideflow.distributed.faults import parse

    assert parse("graph:stall:2:7") == ("graph", "stall", 2, 7)
    with pytest.raises(ValueError, match="expected 'point:kind:rank:seed'"):
        parse("ddp:raise:1:0")
