"""flow.autograd.functional against torch.autograd.functional: the same functions, inputs and
vectors give the same products, Jacobians and Hessians (float64; a handful of ops per
element, so a few ulps apart), and the same structure of tuples."""

import numpy as np
import pytest

import tideflow as flow
from tideflow.framework.errors import ArgumentError, AutogradError, ShapeError

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

RTOL = 1e-12  # float64: each element is a short chain of float64 ops on values of order 1


def _scalar(lib, x, y):
    return (lib.sin(x) * y.sum() + x * x * x).sum()


def _vector(lib, x, y):
    return lib.tanh(x) * y[0] + x * x, y * y


def _unary(lib, x):
    return lib.exp(x) * x[..., :1]


def _pair(rng, *shapes):
    arrays = [rng.uniform(-1, 1, s) for s in shapes]
    return tuple(flow.tensor(a) for a in arrays), tuple(torch.tensor(a) for a in arrays)


def _compare(ours, theirs):
    if isinstance(theirs, tuple):
        assert isinstance(ours, tuple) and len(ours) == len(theirs)
        for a, b in zip(ours, theirs, strict=True):
            _compare(a, b)
        return
    assert tuple(ours.shape) == tuple(theirs.shape)
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=RTOL, atol=0)


def _both(name, fn, inputs_f, inputs_t, **kw):
    ours = getattr(flow.autograd.functional, name)(lambda *a: fn(flow, *a), inputs_f, **kw)
    theirs = getattr(torch.autograd.functional, name)(lambda *a: fn(torch, *a), inputs_t, **kw)
    _compare(ours, theirs)
    return ours


@pytest.mark.parametrize("create_graph", [False, True])
def test_jacobian_of_tuples_and_of_single_tensors(create_graph):
    rng = np.random.default_rng(0)
    f, t = _pair(rng, (3,), (2,))
    _both("jacobian", _vector, f, t, create_graph=create_graph)
    (x,), (tx,) = _pair(rng, (2, 3))
    _both("jacobian", _unary, x, tx, create_graph=create_graph)


def test_hessian_of_tuples_and_of_a_single_tensor():
    rng = np.random.default_rng(1)
    f, t = _pair(rng, (3,), (2,))
    _both("hessian", _scalar, f, t)
    (x,), (tx,) = _pair(rng, (2, 2))
    _both("hessian", lambda lib, x: (x**3).sum() * x[0, 0], x, tx)


@pytest.mark.parametrize("name", ["vjp", "jvp"])
def test_vector_products_of_tuples(name):
    rng = np.random.default_rng(2)
    f, t = _pair(rng, (3,), (2,))
    vf, vt = _pair(rng, (3,), (2,))  # the outputs of _vector have the inputs' shapes
    ours = getattr(flow.autograd.functional, name)(lambda *a: _vector(flow, *a), f, vf)
    theirs = getattr(torch.autograd.functional, name)(lambda *a: _vector(torch, *a), t, vt)
    _compare(ours, theirs)


@pytest.mark.parametrize("name", ["vhp", "hvp"])
def test_hessian_vector_products(name):
    rng = np.random.default_rng(3)
    f, t = _pair(rng, (3,), (2,))
    vf, vt = _pair(rng, (3,), (2,))
    ours = getattr(flow.autograd.functional, name)(lambda *a: _scalar(flow, *a), f, vf)
    theirs = getattr(torch.autograd.functional, name)(lambda *a: _scalar(torch, *a), t, vt)
    _compare(ours, theirs)


def test_v_may_be_omitted_for_single_elements():
    x = flow.tensor([0.3], dtype=flow.float64)
    tx = torch.tensor([0.3], dtype=torch.float64)
    for name in ("vjp", "jvp", "vhp", "hvp"):
        ours = getattr(flow.autograd.functional, name)(lambda a: (a**3).sum(), x)
        theirs = getattr(torch.autograd.functional, name)(lambda a: (a**3).sum(), tx)
        _compare(ours, theirs)
    with pytest.raises(AutogradError, match="vjp: v can be omitted only"):
        flow.autograd.functional.vjp(lambda a: a * 2, flow.ones(2))


def test_create_graph_keeps_results_differentiable():
    x = flow.tensor([0.5, -0.2], dtype=flow.float64, requires_grad=True)
    tx = torch.tensor([0.5, -0.2], dtype=torch.float64, requires_grad=True)
    jac = flow.autograd.functional.jacobian(lambda a: a**3, x, create_graph=True)
    tjac = torch.autograd.functional.jacobian(lambda a: a**3, tx, create_graph=True)
    assert jac.requires_grad
    (g,) = flow.autograd.grad(jac.sum(), x)
    (tg,) = torch.autograd.grad(tjac.sum(), tx)
    _compare(g, tg)
    plain = flow.autograd.functional.jacobian(lambda a: a**3, x)
    assert not plain.requires_grad


def test_unused_inputs_give_zeros_or_a_strict_mode_error():
    x, y = flow.ones(2, dtype=flow.float64), flow.ones(3, dtype=flow.float64)
    jac = flow.autograd.functional.jacobian(lambda a, b: a * 2, (x, y))
    assert jac[1].shape == (2, 3) and not jac[1].numpy().any()
    with pytest.raises(AutogradError, match="jacobian: output 0 is independent of input 1"):
        flow.autograd.functional.jacobian(lambda a, b: a * 2, (x, y), strict=True)
    with pytest.raises(AutogradError, match="vjp: the result is independent of input 1"):
        flow.autograd.functional.vjp(lambda a, b: a.sum(), (x, y), strict=True)


def test_bad_arguments_name_the_function():
    with pytest.raises(ArgumentError, match=r"jacobian: the inputs .* index 1 has type list"):
        flow.autograd.functional.jacobian(lambda a, b: a, (flow.ones(2), [1.0]))
    with pytest.raises(ShapeError, match=r"vjp: v has shape \[3\], expected \[2\]"):
        flow.autograd.functional.vjp(lambda a: a * 2, flow.ones(2), flow.ones(3))
    with pytest.raises(ShapeError, match="hessian: the function must return a single element"):
        flow.autograd.functional.hessian(lambda a: a * 2, flow.ones(2))
