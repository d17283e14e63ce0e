"""Every collective, op and dtype on 2 and 4 real processes, checked against NumPy."""

from __future__ import annotations

import pytest

from .jobs import WORKERS

pytestmark = pytest.mark.mpi


@pytest.mark.parametrize("n", [2, 4])
def test_collectives_agree_with_numpy(launch, n):
    job = launch(n, [str(WORKERS / "collectives.py")])
    assert job.returncode == 0, job.stdout + job.stderr
    for rank in range(n):
        assert f"rank {rank}: ok" in job.stdout, job.stdout + job.stderr
