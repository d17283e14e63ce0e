"""Global tensors on 2 and 4 real processes, checked on every rank against the
single-process results (the workers in workers/global_*.py), and the tutorial
docs/global_tensors.md, whose code blocks run under mpiexec -n 4."""

from __future__ import annotations

import pytest

from .jobs import REPO, WORKERS, every_rank_ok

pytestmark = pytest.mark.mpi




@pytest.mark.parametrize("n", [2, 4])
def test_global_tensors_on_a_1d_placement(launch, n):
    every_rank_ok(launch(n, [str(WORKERS / "global_1d.py")], timeout=90), n)


def test_global_tensors_on_a_2x2_placement(launch):
    every_rank_ok(launch(4, [str(WORKERS / "global_2d.py")], timeout=120), 4)


def test_the_tutorial_runs_on_4_ranks(launch):
    doc = REPO / "docs" / "global_tensors.md"
    every_rank_ok(launch(4, [str(WORKERS / "global_docs.py"), str(doc)], timeout=90), 4)
