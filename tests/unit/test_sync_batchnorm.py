"""SyncBatchNorm in one process (tests/dist/test_sync_batchnorm.py runs it across ranks): it
is BatchNorm there; convert_sync_batchnorm swaps every batch norm, keeping its tensors.
DataParallel without devices runs its module; NLLLoss2d is the deprecated NLLLoss."""

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


def test_data_parallel_wraps_as_pytorch_and_runs_the_module():
    ours = flow.nn.DataParallel(flow.nn.Linear(2, 3))
    theirs = torch.nn.DataParallel(torch.nn.Linear(2, 3))
    assert repr(ours) == repr(theirs) and list(ours.state_dict()) == list(theirs.state_dict())
    x = flow.ones(4, 2)
    np.testing.assert_array_equal(ours(x).detach().numpy(), ours.module(x).detach().numpy())
    with pytest.raises(flow.TideflowError, match="use DistributedDataParallel"):
        flow.nn.DataParallel(flow.nn.Linear(2, 3), device_ids=[0, 1])


def test_nll_loss_2d_is_the_deprecated_nll_loss():
    with pytest.warns(UserWarning, match="`NLLLoss2d` has been deprecated"):
        loss = flow.nn.NLLLoss2d(ignore_index=1)
    logp = flow.nn.functional.log_softmax(flow.randn(2, 3, 4, 4), 1)
    target = flow.randint(0, 3, (2, 4, 4))
    assert loss(logp, target).item() == flow.nn.NLLLoss(ignore_index=1)(logp, target).item()
