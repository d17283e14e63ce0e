"""nn.utils against PyTorch: gradient clipping, parameter/vector conversion, pad_sequence."""

from __future__ import annotations

import numpy as np
import pytest

import tideflow as flow
import tideflow.nn.utils as utils
from tideflow import nn
from tideflow.framework.errors import ShapeError, TideflowError
from tideflow.nn.utils import clip_grad, convert_parameters

from .test_nn_layers import run_doctests


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


def _np(t) -> np.ndarray:
    return np.asarray(t.detach().numpy())


def _twin_grads(torch, shapes, scale=1.0, seed=0):
    """Leaf tensors with equal gradients in both libraries; the last one has no gradient."""
    rng = np.random.default_rng(seed)
    grads = [rng.standard_normal(s) * scale for s in shapes]
    ours = [flow.zeros(s, dtype=flow.float64, requires_grad=True) for s in shapes]
    theirs = [torch.zeros(s, dtype=torch.float64, requires_grad=True) for s in shapes]
    for o, t, g in zip(ours[:-1], theirs[:-1], grads, strict=False):
        o.grad, t.grad = flow.tensor(g), torch.tensor(g)
    return ours, theirs


_SHAPES = [(3, 4), (5,), (2, 2, 2), (3,)]


# -- clipping -----------------------------------------------------------------------------------
@pytest.mark.torch
@pytest.mark.parametrize("norm_type", [2.0, 1, float("inf"), 0.5, "inf"])
@pytest.mark.parametrize("max_norm", [0.5, 100.0])
def test_clip_grad_norm_matches_torch(torch, norm_type, max_norm):
    ours, theirs = _twin_grads(torch, _SHAPES)
    total = utils.clip_grad_norm_(ours, max_norm, norm_type)
    expected = torch.nn.utils.clip_grad_norm_(theirs, max_norm, norm_type)
    assert isinstance(total, flow.Tensor) and total.ndim == 0
    np.testing.assert_allclose(_np(total), expected.numpy(), rtol=1e-12)
    for o, t in zip(ours, theirs, strict=True):
        if t.grad is None:
            assert o.grad is None
        else:
            np.testing.assert_allclose(_np(o.grad), t.grad.numpy(), rtol=1e-12)


def test_clip_grad_norm_bounds_the_norm_of_a_model():
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
    (model(flow.randn(16, 4)) * 100).pow(2).sum().backward()
    before = utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
    assert float(before) > 1.0
    after = utils.get_total_norm([p.grad for p in model.parameters()])
    assert float(after) == pytest.approx(1.0, rel=1e-5)


def test_clip_grad_norm_accepts_one_tensor_and_nothing():
    w = flow.ones(4, requires_grad=True)
    (w * 3).sum().backward()
    assert float(utils.clip_grad_norm_(w, 1.0)) == pytest.approx(6.0)
    np.testing.assert_allclose(_np(w.grad), [0.5] * 4, rtol=1e-5)
    assert float(utils.clip_grad_norm_([], 1.0)) == 0.0
    with pytest.warns(UserWarning, match="`parameters` is an empty generator"):
        utils.clip_grad_norm_((p for p in []), 1.0)


def test_clip_grad_norm_nonfinite():
    w = flow.zeros(2, requires_grad=True)
    w.grad = flow.tensor([float("nan"), 1.0])
    with pytest.raises(TideflowError, match=r"The total norm of order 2.0 for gradients from "
                       r"`parameters` is non-finite"):  # fmt: skip
        utils.clip_grad_norm_([w], 1.0, error_if_nonfinite=True)
    assert np.isnan(float(utils.clip_grad_norm_([w], 1.0)))


@pytest.mark.torch
def test_get_total_norm_and_clip_grads_with_norm_match_torch(torch):
    ours, theirs = _twin_grads(torch, _SHAPES, scale=3.0, seed=1)
    ours_grads = [p.grad for p in ours if p.grad is not None]
    theirs_grads = [p.grad for p in theirs if p.grad is not None]
    total = utils.get_total_norm(ours_grads, 3.0)
    expected = torch.nn.utils.get_total_norm(theirs_grads, 3.0)
    np.testing.assert_allclose(_np(total), expected.numpy(), rtol=1e-12)
    utils.clip_grads_with_norm_(ours, 2.0, total)
    torch.nn.utils.clip_grads_with_norm_(theirs, 2.0, expected)
    for o, t in zip(ours_grads, theirs_grads, strict=True):
        np.testing.assert_allclose(_np(o), t.numpy(), rtol=1e-12)


@pytest.mark.torch
def test_clip_grad_value_matches_torch(torch):
    ours, theirs = _twin_grads(torch, _SHAPES, seed=2)
    assert utils.clip_grad_value_(ours, 0.4) is None
    torch.nn.utils.clip_grad_value_(theirs, 0.4)
    for o, t in zip(ours[:-1], theirs[:-1], strict=True):
        np.testing.assert_array_equal(_np(o.grad), t.grad.numpy())
    assert np.abs(_np(ours[0].grad)).max() == pytest.approx(0.4)


# -- parameters <-> vector ----------------------------------------------------------------------
@pytest.mark.torch
def test_parameters_to_vector_order_matches_torch(torch):
    theirs = torch.nn.Sequential(torch.nn.Conv1d(2, 3, 2), torch.nn.Linear(4, 5))
    ours = nn.Sequential(nn.Conv1d(2, 3, 2), nn.Linear(4, 5))
    ours.load_state_dict({k: flow.tensor(v.numpy()) for k, v in theirs.state_dict().items()})
    expected = torch.nn.utils.parameters_to_vector(theirs.parameters()).detach().numpy()
    np.testing.assert_array_equal(_np(utils.parameters_to_vector(ours.parameters())), expected)


def test_vector_to_parameters_round_trip_and_sharing():
    model = nn.Linear(3, 2)
    vec = flow.arange(8, dtype=flow.float32)
    utils.vector_to_parameters(vec, model.parameters())
    np.testing.assert_array_equal(_np(model.weight), np.arange(6).reshape(2, 3))
    np.testing.assert_array_equal(_np(model.bias), [6, 7])
    np.testing.assert_array_equal(_np(utils.parameters_to_vector(model.parameters())), _np(vec))
    with flow.no_grad():
        vec[7] = -1.0
    assert float(model.bias[1]) == -1.0
    model(flow.ones(1, 3)).sum().backward()  # the parameters are still trainable leaves
    np.testing.assert_array_equal(_np(model.bias.grad), [1.0, 1.0])


def test_vector_to_parameters_errors():
    model = nn.Linear(3, 2)
    with pytest.raises(TypeError, match=r"expected tideflow\.Tensor, but got: list"):
        utils.vector_to_parameters([0.0] * 8, model.parameters())
    with pytest.raises(ValueError, match=r"expected a 1-d vector of 8 elements .* got shape \[7\]"):
        utils.vector_to_parameters(flow.zeros(7), model.parameters())


# -- pad_sequence -------------------------------------------------------------------------------
@pytest.mark.torch
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("padding_side", ["right", "left"])
@pytest.mark.parametrize("trailing", [(), (2, 3)])
def test_pad_sequence_matches_torch(torch, batch_first, padding_side, trailing):
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal((n, *trailing)) for n in (3, 1, 4, 0)]
    ours = [flow.tensor(a, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    out = utils.rnn.pad_sequence(ours, batch_first, -1.5, padding_side)
    expected = torch.nn.utils.rnn.pad_sequence(theirs, batch_first, -1.5, padding_side)
    np.testing.assert_array_equal(_np(out), expected.detach().numpy())
    cotangent = rng.standard_normal(tuple(expected.shape))
    out.backward(flow.tensor(cotangent))
    expected.backward(torch.tensor(cotangent))
    for o, t in zip(ours, theirs, strict=True):
        np.testing.assert_array_equal(_np(o.grad), t.grad.numpy())


def test_pad_sequence_errors():
    with pytest.raises(TideflowError, match="received an empty list of sequences"):
        utils.rnn.pad_sequence([])
    with pytest.raises(ShapeError, match=r"shape \(L, 2\) like sequence 0, got shape \[3, 4\] "
                       r"for sequence 1"):  # fmt: skip
        utils.rnn.pad_sequence([flow.ones(2, 2), flow.ones(3, 4)])
    with pytest.raises(ValueError, match="Expected padding_side to be one of left or right"):
        utils.rnn.pad_sequence([flow.ones(2)], padding_side="top")
    with pytest.raises(TideflowError, match="Expected iterable for input sequences"):
        utils.rnn.pad_sequence(3)


@pytest.mark.parametrize("module", [clip_grad, convert_parameters, utils.rnn])
def test_docstring_examples_run(module):
    run_doctests(module)
