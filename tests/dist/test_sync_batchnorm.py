"""SyncBatchNorm on real processes against BatchNorm on the whole batch in one process
(workers/sync_batchnorm.py)."""

from __future__ import annotations

import pytest

from .jobs import WORKERS, every_rank_ok

pytestmark = pytest.mark.mpi


@pytest.mark.parametrize("n", [2, 4])
def test_sync_batchnorm_equals_batchnorm_on_the_whole_batch(launch, n):
    every_rank_ok(launch(n, [str(WORKERS / "sync_batchnorm.py")], timeout=180), n)
