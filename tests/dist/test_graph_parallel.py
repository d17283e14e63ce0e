"""nn.Graph over global tensors on real processes, each against one process and eager global
training: data, tensor and (on 4 ranks) data x tensor parallel steps with SGD, Adam and
gradient accumulation (workers/graph_parallel.py); pipeline stages on their own ranks, data
parallel inside stages on 4 ranks, with gradient accumulation in 1F1B order
(workers/graph_pipeline.py); ZeRO stages 1, 2 and 3 over data-parallel axes
(workers/graph_zero.py), and a stage-3 checkpoint of 4 ranks resumed on 2 and on one
(workers/graph_zero_resume.py); a GPT with data, tensor, pipeline and their 2-D and 3-D
combinations (workers/graph_gpt.py, 3-D on 8 ranks); and the guide's code
(docs/parallel_graphs.md)."""

from __future__ import annotations

import sys

import pytest

from .jobs import REPO, WORKERS, every_rank_ok, run_job


@pytest.mark.mpi
@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize(
    "worker", ["graph_parallel.py", "graph_pipeline.py", "graph_zero.py", "graph_gpt.py"]
)
def test_parallel_graphs_train_like_one_process(launch, worker, n):
    every_rank_ok(launch(n, [str(WORKERS / worker)], timeout=180), n)


@pytest.mark.mpi
def test_the_parallel_graphs_guide_runs_on_4_ranks(launch):
    doc = REPO / "docs" / "parallel_graphs.md"
    every_rank_ok(launch(4, [str(WORKERS / "global_docs.py"), str(doc)], timeout=120), 4)


@pytest.mark.mpi
def test_a_gpt_trains_3d_parallel_on_8_ranks_like_one_process(launch):
    """Data x tensor x pipeline: two stages, each a 2x2 grid (workers/graph_gpt.py)."""
    every_rank_ok(launch(8, [str(WORKERS / "graph_gpt.py")], timeout=300), 8)


@pytest.mark.mpi
def test_a_zero_3_checkpoint_of_4_ranks_resumes_on_2_and_in_one_process(launch, tmp_path):
    worker = str(WORKERS / "graph_zero_resume.py")
    every_rank_ok(launch(4, [worker, "save", str(tmp_path)], timeout=120), 4)
    every_rank_ok(launch(2, [worker, "load", str(tmp_path)], timeout=120), 2)
    every_rank_ok(run_job([sys.executable, worker, "load", str(tmp_path)], timeout=120), 1)
