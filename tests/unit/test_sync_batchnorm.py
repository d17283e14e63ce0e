"""SyncBatchNorm in one process (tests/dist/test_sync_batchnorm.py runs it across ranks): it
is BatchNorm there; convert_sync_batchnorm swaps every batch norm, keeping its tensors."""

import numpy as np
import pytest

import tideflow as flow

from .test_nn_layers import run_doctests

torch = pytest.importorskip("torch")


def test_in_a_world_of_one_it_is_batchnorm():
    x = flow.tensor(np.random.default_rng(0).standard_normal((6, 3, 4)).astype(np.float32))
    sync, plain = flow.nn.SyncBatchNorm(3), flow.nn.BatchNorm1d(3)
    np.testing.assert_array_equal(sync(x).detach().numpy(), plain(x).detach().numpy())
    np.testing.assert_array_equal(sync.running_var.numpy(), plain.running_var.numpy())
    assert repr(sync) == repr(torch.nn.SyncBatchNorm(3))
    with pytest.raises(flow.ShapeError, match="expected at least 2D input"):
        sync(flow.ones(3))


def test_convert_sync_batchnorm_swaps_every_batch_norm_and_keeps_its_tensors():
    def net(lib):
        return lib.nn.Sequential(
            lib.nn.Conv2d(3, 4, 1), lib.nn.BatchNorm2d(4),
            lib.nn.Sequential(lib.nn.Linear(4, 4), lib.nn.BatchNorm1d(4, affine=False)),
        )  # fmt: skip

    ours = net(flow).eval()
    weight = ours[1].weight
    converted = flow.nn.SyncBatchNorm.convert_sync_batchnorm(ours)
    theirs = torch.nn.SyncBatchNorm.convert_sync_batchnorm(net(torch).eval())
    assert repr(converted) == repr(theirs)
    assert converted[1].weight is weight and not converted[1].training


def test_docstring_examples_run():
    import tideflow.nn.modules.sync_batchnorm as module

    run_doctests(module)
