"""`python -m tideflow.distributed.launch` starts a working job."""

from __future__ import annotations

import json
import os
import re
import sys

import pytest

from .jobs import WORKERS, run_job

pytestmark = pytest.mark.mpi


LAUNCH = [sys.executable, "-m", "tideflow.distributed.launch"]


def _seen(out_dir) -> dict[int, dict]:
    return {r: json.loads((out_dir / f"rank{r}").read_text()) for r in range(2)}


@pytest.mark.parametrize("as_module", [False, True], ids=["script", "module"])
def test_launch_runs_the_script_on_every_rank(mpiexec, tmp_path, as_module):
    target = ["-m", "tests.dist.workers.launched"] if as_module else [str(WORKERS / "launched.py")]
    job = run_job([*LAUNCH, "--nproc_per_node", "2", *target, str(tmp_path), "--lr", "0.1"])
    assert job.returncode == 0, job.stdout + job.stderr
    for rank, seen in _seen(tmp_path).items():
        assert seen == {
            "rank": rank,
            "world_size": 2,
            "local_rank": rank,
            "torch_env": [str(rank), "2", str(rank)],  # torchrun's variables, for ported code
            "argv": [str(tmp_path), "--lr", "0.1"],
            "name": "__main__",
        }


def test_launch_inside_an_existing_job_just_runs_the_script(mpiexec, tmp_path):
    # Under srun (or any launcher) every rank is already started: no nested mpiexec.
    launched = [*LAUNCH, "--nproc_per_node", "4", str(WORKERS / "launched.py"), str(tmp_path)]
    job = run_job([mpiexec, "-n", "2", *launched])
    assert job.returncode == 0, job.stdout + job.stderr
    assert sorted(os.listdir(tmp_path)) == ["rank0", "rank1"]
    assert [s["world_size"] for s in _seen(tmp_path).values()] == [2, 2]


def test_a_pytorch_program_runs_unchanged_through_mock_torch(mpiexec, tmp_path):
    program = [str(WORKERS / "torch_style.py"), str(tmp_path)]
    job = run_job([*LAUNCH, "--nproc_per_node", "2", "-m", "tideflow.mock_torch", *program])
    assert job.returncode == 0, job.stdout + job.stderr
    for rank in range(2):
        seen = json.loads((tmp_path / f"rank{rank}").read_text())
        assert seen == [rank, [3.0, 3.0, 3.0], [[0.0, 0.0], [1.0, 1.0]]]


def test_a_rank_that_exits_leaves_the_others_and_one_that_is_killed_is_named(mpiexec):
    job = run_job([*LAUNCH, "--nproc_per_node", "2", str(WORKERS / "outlived.py")])
    output = job.stdout + job.stderr
    assert job.returncode != 0 and "rank 0: done" in job.stdout, output
    pid = re.search(r"rank 1: pid (\d+)", job.stdout).group(1)
    assert f"tideflow: rank 1 (pid {pid}) died without a word" in output, output
