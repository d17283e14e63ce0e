"""Helpers of the multi-process tests: where the workers are, and running a job with a
timeout that kills every process of the job if it hangs."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

from tideflow.distributed import world

WORKERS = Path(__file__).parent / "workers"
REPO = Path(__file__).parents[2]


def job_env(**extra: str) -> dict[str, str]:
    """This environment without any launcher's variables (the job sets its own), with a
    communication timeout so that a rank stuck in a collective ends the job early."""
    launcher_vars = {v for pair in world._LAUNCHER_VARS for v in pair if v} | set(world._SLURM_VARS)
    env = {k: v for k, v in os.environ.items() if k not in launcher_vars}
    env["TIDEFLOW_COMM_TIMEOUT"] = "30"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return {**env, **extra}


def run_job(cmd: list[str], timeout: float = 60, **env: str) -> subprocess.CompletedProcess:
    """Run `cmd` (mpiexec or the launcher) to the end; past `timeout` seconds kill it with
    its ranks and raise TimeoutError with what they printed.

    NOTE: its own session, so that killing the group reaches the ranks: killing mpiexec
    alone would leave them spinning in MPI's progress loop."""
    with subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=job_env(**env),
        cwd=REPO,
        start_new_session=True,
    ) as job:
        try:
            out, err = job.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(job.pid, signal.SIGKILL)
            out, err = job.communicate()
            raise TimeoutError(f"{cmd} ran past {timeout} s:\n{out}\n{err}") from None
    return subprocess.CompletedProcess(cmd, job.returncode, out, err)


def every_rank_ok(job: subprocess.CompletedProcess, n: int) -> None:
    """The job exited 0 and each of its `n` ranks printed `rank <r>: ok`."""
    assert job.returncode == 0, job.stdout + job.stderr
    for rank in range(n):
        assert f"rank {rank}: ok" in job.stdout, job.stdout + job.stderr
