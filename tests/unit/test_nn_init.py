"""nn.init against PyTorch: exact gains, fans and deterministic fills; the distributions'
bounds and moments; generators; errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

import tideflow as flow
from tideflow import nn
from tideflow.nn import init

from .test_nn_layers import run_doctests


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


def _np(t) -> np.ndarray:
    return np.asarray(t.detach().numpy(), dtype=np.float64)


# -- gains and fans -----------------------------------------------------------------------------
@pytest.mark.torch
@pytest.mark.parametrize(
    ("nonlinearity", "param"),
    [("linear", None), ("conv2d", None), ("conv_transpose3d", None), ("sigmoid", None),
     ("tanh", None), ("relu", None), ("leaky_relu", None), ("leaky_relu", 0.2),
     ("leaky_relu", 3), ("selu", None)],
)  # fmt: skip
def test_calculate_gain_equals_torch(torch, nonlinearity, param):
    assert init.calculate_gain(nonlinearity, param) == torch.nn.init.calculate_gain(
        nonlinearity, param
    )


def test_calculate_gain_errors():
    with pytest.raises(ValueError, match="Unsupported nonlinearity gelu"):
        init.calculate_gain("gelu")
    with pytest.raises(ValueError, match="negative_slope True not a valid number"):
        init.calculate_gain("leaky_relu", True)


@pytest.mark.torch
@pytest.mark.parametrize("shape", [(3, 5), (8, 4, 3), (16, 2, 3, 5), (4, 2, 1, 2, 3), (0, 3)])
def test_fans_equal_torch(torch, shape):
    ours = init._calculate_fan_in_and_fan_out(flow.empty(shape))
    assert ours == torch.nn.init._calculate_fan_in_and_fan_out(torch.empty(shape))


def test_fans_need_two_dims():
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        init.xavier_uniform_(flow.empty(5))
    with pytest.raises(ValueError, match=r"Mode fan_avg not supported, please use one of "):
        init.kaiming_uniform_(flow.empty(3, 4), mode="fan_avg")


# -- deterministic fills -----------------------------------------------------------------------
@pytest.mark.torch
@pytest.mark.parametrize("shape", [(3, 5), (4, 2), (3, 3)])
def test_eye_equals_torch(torch, shape):
    np.testing.assert_array_equal(
        _np(init.eye_(flow.empty(shape))), torch.nn.init.eye_(torch.empty(shape)).numpy()
    )


@pytest.mark.torch
@pytest.mark.parametrize(
    ("shape", "groups"),
    [((4, 3, 5), 1), ((6, 2, 3, 3), 2), ((4, 4, 3, 2), 1), ((6, 1, 3, 3, 3), 3)],
)
def test_dirac_equals_torch(torch, shape, groups):
    ours = init.dirac_(flow.empty(shape).fill_(7.0), groups)
    np.testing.assert_array_equal(_np(ours), torch.nn.init.dirac_(torch.empty(shape), groups))


def test_dirac_weight_makes_conv_the_identity():
    x = flow.randn(2, 3, 5, 5)
    conv = nn.Conv2d(3, 3, 3, padding=1, bias=False)
    init.dirac_(conv.weight)
    np.testing.assert_allclose(_np(conv(x)), _np(x), rtol=1e-6)


def test_constant_ones_zeros():
    t = flow.empty(2, 3)
    assert init.constant_(t, 0.25) is t
    np.testing.assert_array_equal(_np(t), np.full((2, 3), 0.25))
    np.testing.assert_array_equal(_np(init.ones_(t)), np.ones((2, 3)))
    np.testing.assert_array_equal(_np(init.zeros_(t)), np.zeros((2, 3)))


def test_shape_errors_of_structured_fills():
    with pytest.raises(ValueError, match="Only tensors with 2 dimensions are supported"):
        init.eye_(flow.empty(2, 2, 2))
    with pytest.raises(ValueError, match="Only tensors with 3, 4, or 5 dimensions are supported"):
        init.dirac_(flow.empty(2, 2))
    with pytest.raises(ValueError, match="dim 0 must be divisible by groups"):
        init.dirac_(flow.empty(3, 2, 3), groups=2)
    with pytest.raises(ValueError, match="Only tensors with 2 or more dimensions are supported"):
        init.orthogonal_(flow.empty(4))
    with pytest.raises(ValueError, match="Only tensors with 2 dimensions are supported"):
        init.sparse_(flow.empty(4, 3, 2), 0.5)


# -- in place, without autograd ----------------------------------------------------------------
@pytest.mark.parametrize(
    "fill",
    [init.uniform_, init.normal_, init.trunc_normal_, init.xavier_uniform_, init.xavier_normal_,
     init.kaiming_uniform_, init.kaiming_normal_, init.orthogonal_, init.ones_, init.zeros_,
     init.eye_, lambda t: init.constant_(t, 3.0), lambda t: init.sparse_(t, 0.3)],
)  # fmt: skip
def test_fills_write_parameters_in_place_without_recording(fill):
    p = nn.Parameter(flow.empty(6, 4))
    out = fill(p)
    assert (out is p or out is None) and p.is_leaf and p.requires_grad and p.grad_fn is None


def test_generator_makes_fills_reproducible():
    def draw(seed, fill):
        return _np(fill(flow.empty(5, 4), generator=flow.Generator().manual_seed(seed)))

    for fill in (init.uniform_, init.normal_, init.trunc_normal_, init.xavier_normal_,
                 init.kaiming_uniform_, init.orthogonal_):  # fmt: skip
        np.testing.assert_array_equal(draw(3, fill), draw(3, fill))
        assert not np.array_equal(draw(3, fill), draw(4, fill))
    flow.manual_seed(11)
    first = _np(init.normal_(flow.empty(4)))
    flow.manual_seed(11)
    np.testing.assert_array_equal(_np(init.normal_(flow.empty(4))), first)


# -- distributions --------------------------------------------------------------------------------
def _moments(values: np.ndarray) -> tuple[float, float]:
    return float(values.mean()), float(values.std())


def test_uniform_and_normal_moments():
    u = _np(init.uniform_(flow.empty(200, 100), -0.5, 1.5))
    assert u.min() >= -0.5 and u.max() < 1.5
    mean, std = _moments(u)
    assert mean == pytest.approx(0.5, abs=0.01) and std == pytest.approx(
        2 / math.sqrt(12), rel=0.02
    )
    n = _np(init.normal_(flow.empty(200, 100), 2.0, 0.5))
    mean, std = _moments(n)
    assert mean == pytest.approx(2.0, abs=0.01) and std == pytest.approx(0.5, rel=0.02)


@pytest.mark.torch
@pytest.mark.parametrize(
    ("fill", "kwargs", "shape"),
    [("xavier_uniform_", {"gain": 2.0}, (300, 200)),
     ("xavier_normal_", {}, (64, 32, 3, 3)),
     ("kaiming_uniform_", {"a": math.sqrt(5)}, (300, 200)),
     ("kaiming_uniform_", {"mode": "fan_out", "nonlinearity": "relu"}, (64, 32, 3, 3)),
     ("kaiming_normal_", {"nonlinearity": "relu"}, (300, 200)),
     ("kaiming_normal_", {"a": 0.1, "mode": "fan_out"}, (64, 32, 3, 3))],
)  # fmt: skip
def test_variance_scaling_matches_torch(torch, fill, kwargs, shape):
    ours = _np(getattr(init, fill)(flow.empty(shape), **kwargs))
    theirs = getattr(torch.nn.init, fill)(torch.empty(shape), **kwargs).numpy()
    n = ours.size
    assert abs(ours.mean() - theirs.mean()) < 6 * theirs.std() / math.sqrt(n)
    assert ours.std() == pytest.approx(theirs.std(), rel=0.03)
    if fill.endswith("uniform_"):  # same support: U(-bound, bound)
        assert ours.min() >= theirs.min() - 0.01 * theirs.std() - abs(theirs.min()) * 1e-3
        assert abs(ours.max() - theirs.max()) < 0.02 * theirs.std()


def test_kaiming_on_an_empty_tensor_warns_and_does_nothing():
    t = flow.empty(0, 3)
    with pytest.warns(UserWarning, match="Initializing zero-element tensors is a no-op"):
        assert init.kaiming_normal_(t) is t


@pytest.mark.torch
@pytest.mark.parametrize(
    ("mean", "std", "a", "b"),
    [(0.0, 1.0, -2.0, 2.0), (0.0, 0.02, -0.04, 0.04), (1.0, 2.0, 0.0, 10.0), (0.0, 1.0, 2.0, 3.0),
     (0.5, 1.0, -1.4, -0.5)],
)  # fmt: skip
def test_trunc_normal_matches_torch(torch, mean, std, a, b):
    ours = _np(init.trunc_normal_(flow.empty(40000, dtype=flow.float64), mean, std, a, b))
    theirs = torch.nn.init.trunc_normal_(torch.empty(40000, dtype=torch.float64), mean, std, a, b)
    theirs = theirs.numpy()
    assert a <= ours.min() and ours.max() <= b
    assert ours.mean() == pytest.approx(theirs.mean(), abs=5 * theirs.std() / 200)
    assert ours.std() == pytest.approx(theirs.std(), rel=0.03)


def test_trunc_normal_warns_when_the_mean_is_far_from_the_interval():
    with pytest.warns(UserWarning, match="mean is more than 2 std from \\[a, b\\]"):
        init.trunc_normal_(flow.empty(10), mean=5.0, std=1.0, a=-1.0, b=1.0)


@pytest.mark.parametrize("shape", [(3, 5), (5, 3), (4, 4), (6, 2, 3), (4, 2, 3, 3)])
def test_orthogonal_rows_or_columns_are_orthonormal(shape):
    w = _np(init.orthogonal_(flow.empty(shape), gain=2.0)).reshape(shape[0], -1)
    gram = w @ w.T if w.shape[0] <= w.shape[1] else w.T @ w
    np.testing.assert_allclose(gram, 4.0 * np.eye(len(gram)), atol=1e-5)


def test_orthogonal_is_haar_distributed():
    # A Haar-random orthogonal matrix has E[Q_ij] = 0 and E[Q_ij^2] = 1/n for every entry;
    # QR without the sign correction would bias the diagonal (R's diagonal sign).
    n, draws = 3, 2000
    gen = flow.Generator().manual_seed(0)
    samples = np.stack(
        [_np(init.orthogonal_(flow.empty(n, n), generator=gen)) for _ in range(draws)]
    )
    np.testing.assert_allclose(samples.mean(0), 0.0, atol=0.06)
    np.testing.assert_allclose((samples**2).mean(0), 1 / n, atol=0.04)


def test_sparse_zeroes_a_fixed_count_per_column():
    w = _np(init.sparse_(flow.empty(10, 6), sparsity=0.25, std=0.5))
    np.testing.assert_array_equal((w == 0).sum(0), [3] * 6)
    assert w[w != 0].std() == pytest.approx(0.5, rel=0.3)


def test_docstring_examples_run():
    run_doctests(init)


@pytest.mark.parametrize(
    "name",
    ["uniform", "normal", "constant", "dirac", "xavier_uniform", "xavier_normal",
     "kaiming_uniform", "kaiming_normal", "orthogonal", "sparse"],
)  # fmt: skip
def test_names_without_underscore_warn_and_initialize_like_the_new_ones(name):
    args = {"constant": (0.5,), "sparse": (0.5,)}.get(name, ())
    shape = (4, 2, 3) if name == "dirac" else (4, 3)
    flow.manual_seed(3)
    expected = getattr(flow.nn.init, f"{name}_")(flow.empty(*shape), *args).numpy()
    flow.manual_seed(3)
    with pytest.warns(FutureWarning, match=rf"`nn.init.{name}` is now deprecated in favor of"):
        got = getattr(flow.nn.init, name)(flow.empty(*shape), *args)
    np.testing.assert_array_equal(got.numpy(), expected)
