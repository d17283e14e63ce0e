"""Clipping by the total norm of global gradients on real processes, eager (tensor parallel
layers, two placements) and in a pipeline graph with gradient accumulation, against one
process (workers/clip_grad.py)."""

from __future__ import annotations

import pytest

from .jobs import WORKERS, every_rank_ok

pytestmark = pytest.mark.mpi


@pytest.mark.parametrize("n", [2, 4])
def test_clipping_global_gradients_equals_one_process(launch, n):
    every_rank_ok(launch(n, [str(WORKERS / "clip_grad.py")], timeout=180), n)
