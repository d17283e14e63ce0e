"""nn.Graph over global tensors on real processes: data, tensor and (on 4 ranks) data x
tensor parallel training steps, with SGD, Adam and gradient accumulation, equal to one
process and to eager global training (workers/graph_parallel.py)."""

from __future__ import annotations

import pytest

from .jobs import WORKERS


@pytest.mark.mpi
@pytest.mark.parametrize("n", [2, 4])
def test_parallel_graphs_train_like_one_process(launch, n):
    job = launch(n, [str(WORKERS / "graph_parallel.py")], timeout=180)
    assert job.returncode == 0, job.stdout + job.stderr
    for rank in range(n):
        assert f"rank {rank}: ok" in job.stdout, job.stdout + job.stderr
