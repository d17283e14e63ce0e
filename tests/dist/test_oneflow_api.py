"""OneFlow's API details on 2 real processes (workers/oneflow_api.py): placement ranks,
sbp values called as functions, global_mode, numpy()/DLPack of global tensors, autograd.grad
of global tensors, and DistributedDataParallel's use_bucket and attribute forwarding."""

from __future__ import annotations

import pytest

from .jobs import WORKERS, every_rank_ok

pytestmark = pytest.mark.mpi


def test_oneflow_api_details_on_2_ranks(launch):
    every_rank_ok(launch(2, [str(WORKERS / "oneflow_api.py")], timeout=90), 2)
