"""nn.utils.parametrize and parametrizations.weight_norm against PyTorch's: the same module,
weights and parametrization give the same parametrized tensors, gradients of the originals,
state-dict keys, class names, assignment through right_inverse and removal."""

import numpy as np
import pytest

import tideflow as flow
from tideflow.nn.utils import parametrizations, parametrize

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

RTOL = 1e-12  # float64, a few ops per element


def _symmetric(lib):
    class Symmetric(lib.nn.Module):
        def forward(self, x):
            return x.triu() + x.triu(1).transpose(0, 1)

        def right_inverse(self, a):
            return a.triu()

    return Symmetric()


def _scaled(lib):
    class Scaled(lib.nn.Module):  # no right_inverse
        def forward(self, x):
            return 2 * x

    return Scaled()


def _pair(rng, make):
    """The same float64 layer in both libraries."""
    ours, theirs = make(flow).double(), make(torch).double()
    for (_, p), (_, tp) in zip(ours.named_parameters(), theirs.named_parameters(), strict=True):
        values = rng.standard_normal(tuple(tp.shape))
        p.data = flow.tensor(values)
        tp.data = torch.tensor(values)
    return ours, theirs


def _close(a, b):
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=RTOL, atol=1e-14)


def _linear(lib):
    return lib.nn.Linear(4, 4)


def test_parametrized_weight_its_gradient_and_its_state_match_torch():
    ours, theirs = _pair(np.random.default_rng(0), _linear)
    parametrize.register_parametrization(ours, "weight", _symmetric(flow))
    torch.nn.utils.parametrize.register_parametrization(theirs, "weight", _symmetric(torch))
    parametrize.register_parametrization(ours, "weight", _scaled(flow))
    torch.nn.utils.parametrize.register_parametrization(theirs, "weight", _scaled(torch))
    assert type(ours).__name__ == type(theirs).__name__ == "ParametrizedLinear"
    assert list(ours.state_dict()) == list(theirs.state_dict())
    _close(ours.weight, theirs.weight)
    x = np.random.default_rng(1).standard_normal((3, 4))
    ours(flow.tensor(x)).sum().backward()
    theirs(torch.tensor(x)).sum().backward()
    _close(ours.parametrizations.weight.original.grad, theirs.parametrizations.weight.original.grad)
    assert parametrize.is_parametrized(ours) and parametrize.is_parametrized(ours, "weight")
    assert not parametrize.is_parametrized(ours, "bias")
    assert parametrize.type_before_parametrizations(ours) is flow.nn.Linear


def test_assignment_goes_through_right_inverse():
    ours, theirs = _pair(np.random.default_rng(2), _linear)
    parametrize.register_parametrization(ours, "weight", _symmetric(flow))
    torch.nn.utils.parametrize.register_parametrization(theirs, "weight", _symmetric(torch))
    value = np.random.default_rng(3).standard_normal((4, 4))
    ours.weight = flow.tensor(value)
    theirs.weight = torch.tensor(value)
    _close(ours.parametrizations.weight.original, theirs.parametrizations.weight.original)
    _close(ours.weight, theirs.weight)


@pytest.mark.parametrize("leave_parametrized", [True, False])
def test_removal_restores_a_plain_parameter(leave_parametrized):
    ours, theirs = _pair(np.random.default_rng(4), _linear)
    original = ours.weight
    parametrize.register_parametrization(ours, "weight", _symmetric(flow))
    torch.nn.utils.parametrize.register_parametrization(theirs, "weight", _symmetric(torch))
    assert ours.parametrizations.weight.original is original  # optimizers keep their tensor
    parametrize.remove_parametrizations(ours, "weight", leave_parametrized)
    torch.nn.utils.parametrize.remove_parametrizations(theirs, "weight", leave_parametrized)
    assert type(ours) is flow.nn.Linear and not parametrize.is_parametrized(ours)
    assert isinstance(ours.weight, flow.nn.Parameter) and ours.weight is original
    _close(ours.weight, theirs.weight)


def test_cached_computes_each_parametrized_tensor_once():
    calls = []

    class Counted(flow.nn.Module):
        def forward(self, x):
            calls.append(1)
            return x * 1

    m = parametrize.register_parametrization(flow.nn.Linear(2, 2), "weight", Counted())
    calls.clear()
    with parametrize.cached():
        assert m.weight is m.weight
    assert len(calls) == 1
    m.weight  # noqa: B018  (outside the block, every read computes)
    assert len(calls) == 2


def test_shape_changing_parametrizations_need_unsafe():
    class Row(flow.nn.Module):
        def forward(self, x):
            return x[:1]

    with pytest.raises(ValueError, match=r"parametrize: the parametrization changed .* unsafe"):
        parametrize.register_parametrization(flow.nn.Linear(2, 3), "weight", Row())
    with pytest.raises(ValueError, match="no parameter or buffer named 'kernel'"):
        parametrize.register_parametrization(flow.nn.Linear(2, 3), "kernel", Row())


@pytest.mark.parametrize("dim", [0, 1, None])
def test_weight_norm_matches_torch(dim):
    ours, theirs = _pair(np.random.default_rng(5), lambda lib: lib.nn.Conv1d(3, 4, 2))
    parametrizations.weight_norm(ours, dim=dim)
    torch.nn.utils.parametrizations.weight_norm(theirs, dim=dim)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    for key in ("original0", "original1"):
        _close(
            getattr(ours.parametrizations.weight, key), getattr(theirs.parametrizations.weight, key)
        )
    _close(ours.weight, theirs.weight)
    x = np.random.default_rng(6).standard_normal((2, 3, 5))
    ours(flow.tensor(x)).square().sum().backward()
    theirs(torch.tensor(x)).square().sum().backward()
    for key in ("original0", "original1"):
        mine = getattr(ours.parametrizations.weight, key).grad
        _close(mine, getattr(theirs.parametrizations.weight, key).grad)


@pytest.mark.parametrize(
    ("make", "shape"),
    [
        (lambda lib: lib.nn.Linear(5, 4), (3, 5)),
        (lambda lib: lib.nn.ConvTranspose1d(3, 4, 2), (2, 3, 5)),  # rows along dim 1
    ],
)
def test_spectral_norm_matches_torch_given_the_same_singular_vector_estimates(make, shape):
    ours, theirs = _pair(np.random.default_rng(7), make)
    parametrizations.spectral_norm(ours)
    torch.nn.utils.parametrizations.spectral_norm(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    for key in ("_u", "_v"):  # the estimates start from random vectors: take PyTorch's
        value = getattr(theirs.parametrizations.weight[0], key).numpy()
        setattr(ours.parametrizations.weight[0], key, flow.tensor(value))
    x = np.random.default_rng(8).standard_normal(shape)
    for _ in range(2):  # each training forward refines the estimates once
        y, ty = ours(flow.tensor(x)), theirs(torch.tensor(x))
        _close(y, ty)
    y.square().sum().backward()
    ty.square().sum().backward()
    _close(ours.parametrizations.weight.original.grad, theirs.parametrizations.weight.original.grad)
    ours.eval()
    theirs.eval()
    _close(ours.weight, theirs.weight)
