"""flow.one_embedding sharded over 2 and 4 real processes (workers/one_embedding.py):
training equals one process on the global batch, only distinct keys travel, errors are
raised on every rank, snapshots per rank."""

from __future__ import annotations

import pytest

from .jobs import WORKERS, every_rank_ok


@pytest.mark.mpi
@pytest.mark.parametrize("n", [2, 4])
def test_sharded_embedding_trains_like_one_process(launch, n):
    every_rank_ok(launch(n, [str(WORKERS / "one_embedding.py")], timeout=120), n)
