"""`config.enable_auto_parallel` on real processes (workers/auto_parallel.py): an MLP and the
char-GPT train with searched layouts exactly as with greedy ones and as one process, data
parallel, from a broadcast batch and (4 ranks) data x tensor parallel; the searched plan is
predicted no slower than data parallel. workers/auto_parallel_timing.py prints predicted
against measured step times (docs/parallel_graphs.md has the table)."""

from __future__ import annotations

import pytest

from .jobs import WORKERS, every_rank_ok


@pytest.mark.mpi
@pytest.mark.parametrize("n", [2, 4])
def test_searched_layouts_train_like_greedy_ones_and_one_process(launch, n):
    every_rank_ok(launch(n, [str(WORKERS / "auto_parallel.py")], timeout=240), n)


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.parametrize("n", [2, 4])
def test_predicted_against_measured_step_times_are_tabled(launch, n):
    job = launch(n, [str(WORKERS / "auto_parallel_timing.py")], timeout=600)
    every_rank_ok(job, n)
    assert "| char-GPT, data parallel |" in job.stdout
