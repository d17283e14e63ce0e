"""Loss scaling of global parameters on real processes (workers/loss_scaling.py): float16
autocast with a GradScaler, in nn.Graph and eagerly, data, tensor, pipeline (with gradient
accumulation) and data x tensor parallel, against one process step by step; an overflow in
one rank's gradient shards skips the step and backs the scale off on every rank."""

from __future__ import annotations

import pytest

from .jobs import WORKERS, every_rank_ok


@pytest.mark.mpi
@pytest.mark.parametrize("n", [2, 4])
def test_loss_scaling_of_global_parameters_agrees_on_every_rank(launch, n):
    every_rank_ok(launch(n, [str(WORKERS / "loss_scaling.py")], timeout=120), n)
