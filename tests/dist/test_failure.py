"""A failure on one rank ends every rank quickly, with a message naming the failing rank."""

from __future__ import annotations

import time

import pytest

from .jobs import WORKERS

pytestmark = pytest.mark.mpi

FAIL = str(WORKERS / "fail.py")


def _run_failing(launch, n, args, timeout="120"):
    # NOTE: a communication timeout past the job's own (60 s): it must end by the failure.
    start = time.monotonic()
    job = launch(n, args, TIDEFLOW_COMM_TIMEOUT=timeout)
    elapsed = time.monotonic() - start
    assert job.returncode != 0, job.stdout + job.stderr
    assert "finished" not in job.stdout  # no rank got past the collective it waited in
    assert elapsed < 30, f"the job took {elapsed:.1f} s to end"
    return job


@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("raise", "tideflow: rank 1 failed: ValueError: rank 1 broke"),
        ("raise_before_joining", "tideflow: rank 1 failed: ValueError: rank 1 broke before"),
        ("thread", "tideflow: rank 1 failed in thread loader: ZeroDivisionError"),
    ],
)
def test_an_uncaught_exception_ends_every_rank(launch, mode, message):
    job = _run_failing(launch, 4, [FAIL, mode])
    assert message in job.stderr
    assert "Traceback (most recent call last)" in job.stderr


def test_a_nonzero_exit_ends_every_rank_under_the_runner(launch):
    job = _run_failing(launch, 2, ["-m", "tideflow.distributed.run", FAIL, "exit"])
    assert job.returncode == 3  # the rank's own status
    assert "tideflow: rank 1 exited with status 3" in job.stderr


def test_a_rank_stuck_in_a_collective_times_out(launch):
    job = _run_failing(launch, 2, [FAIL, "skip_collective"], timeout="1")
    assert "tideflow: rank 0: allreduce on ranks [0, 1] did not finish within 1 s" in job.stderr
