"""Multi-process tests: each launches a job with the mpiexec of the MPI wheel and a timeout,
so that a hang fails the test instead of stalling the suite."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from .jobs import run_job


@pytest.fixture
def mpiexec() -> str:
    path = Path(sys.executable).parent / "mpiexec"
    if not path.exists():
        pytest.skip("the mpich wheel's mpiexec is not installed next to the interpreter")
    return str(path)


@pytest.fixture
def launch(mpiexec):
    """launch(n, [python args...], timeout=60, **env) -> the job's CompletedProcess."""

    def run(n: int, args: list[str], timeout: float = 60, **env: str):
        return run_job([mpiexec, "-n", str(n), sys.executable, *args], timeout, **env)

    return run
