"""flow.func against torch.func: vmap (in_dims and out_dims of every form, nested results,
randomness modes), grad / grad_and_value (argnums, has_aux), vjp, jvp, jacrev, jacfwd,
hessian, and their compositions (per-sample gradients, Hessians)."""

import numpy as np
import pytest

import tideflow as flow

torch = pytest.importorskip("torch")
_rng = np.random.default_rng(0)
X = _rng.standard_normal((4, 3))
W = _rng.standard_normal((3, 2))


def _both(fn):
    """fn(lib, tensor) run with tideflow and torch on float64 tensors."""
    ours = fn(flow, lambda a: flow.tensor(a))
    theirs = fn(torch, lambda a: torch.tensor(a))
    return ours, theirs


def _same(ours, theirs):
    if isinstance(theirs, tuple | list):
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs, strict=True):
            _same(a, b)
        return
    if isinstance(theirs, dict):
        for k in theirs:
            _same(ours[k], theirs[k])
        return
    np.testing.assert_allclose(
        ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-10, atol=1e-12
    )


VMAPS = {
    "rows": lambda lib, t: lib.func.vmap(lambda r: (r * r).sum())(t(X)),
    "columns-out-1": lambda lib, t: lib.func.vmap(lambda c: c * 2, in_dims=1, out_dims=1)(t(X)),
    "unmapped-arg": lambda lib, t: lib.func.vmap(lambda r, w: r @ w, in_dims=(0, None))(t(X), t(W)),
    "nested-results": lambda lib, t: lib.func.vmap(lambda r: {"s": r.sum(), "p": (r, r + 1)})(t(X)),
    "tuple-input": lambda lib, t: lib.func.vmap(lambda pair: pair[0] - pair[1], in_dims=((0, 1),))(
        (t(X), t(X.T.copy()))
    ),
    "nested-vmap": lambda lib, t: lib.func.vmap(lib.func.vmap(lambda v: v.exp()))(t(X)),
}


@pytest.mark.parametrize("name", list(VMAPS))
def test_vmap_matches_torch_func(name):
    _same(*_both(VMAPS[name]))


def test_vmap_errors_and_randomness():
    with pytest.raises(flow.ShapeError, match="same size in the mapped dimension"):
        flow.func.vmap(lambda a, b: a + b)(flow.ones(3), flow.ones(4))
    with pytest.raises(flow.TideflowError, match="at least one input must be mapped"):
        flow.func.vmap(lambda a: a, in_dims=None)(flow.ones(3))
    with pytest.raises(flow.TideflowError, match="randomness error mode"):
        flow.func.vmap(lambda a: a + flow.randn(()))(flow.ones(3))
    same = flow.func.vmap(lambda a: a + flow.randn(()), randomness="same")(flow.zeros(3))
    different = flow.func.vmap(lambda a: a + flow.randn(()), randomness="different")(flow.zeros(3))
    assert len(set(same.tolist())) == 1 and len(set(different.tolist())) == 3


def _loss(lib):
    return lambda w, x: ((x @ w).tanh() ** 2).sum()


DERIVATIVES = {
    "grad": lambda lib, t: lib.func.grad(_loss(lib))(t(W), t(X)),
    "grad-argnums": lambda lib, t: lib.func.grad(_loss(lib), argnums=(0, 1))(t(W), t(X)),
    "grad_and_value": lambda lib, t: lib.func.grad_and_value(_loss(lib))(t(W), t(X)),
    "grad-has_aux": lambda lib, t: lib.func.grad(
        lambda w: (_loss(lib)(w, t(X)), w.sum()), has_aux=True
    )(t(W)),
    "per-sample-grads": lambda lib, t: lib.func.vmap(
        lib.func.grad(lambda w, x: ((x @ w).tanh() ** 2).sum()), in_dims=(None, 0)
    )(t(W), t(X)),
    "vjp": lambda lib, t: lib.func.vjp(lambda x: (x @ t(W)).sin(), t(X))[1](t(np.ones((4, 2)))),
    "jvp": lambda lib, t: lib.func.jvp(lambda x: (x @ t(W)).sin(), (t(X),), (t(np.ones((4, 3))),)),
    "jacrev": lambda lib, t: lib.func.jacrev(lambda x: (x @ t(W)).sin())(t(X[0])),
    "jacfwd": lambda lib, t: lib.func.jacfwd(lambda x: (x @ t(W)).sin())(t(X[0])),
    "hessian": lambda lib, t: lib.func.hessian(lambda x: (x**3).sum() * x.prod())(t(X[0])),
    "grad-of-grad": lambda lib, t: lib.func.grad(
        lambda x: lib.func.grad(lambda y: (y**3).sum())(x).sum()
    )(t(X[0])),
}


# NOTE: torch.func's forward mode (jvp, jacfwd) scripts a helper on first use, which warns
@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
@pytest.mark.parametrize("name", list(DERIVATIVES))
def test_derivatives_match_torch_func(name):
    _same(*_both(DERIVATIVES[name]))


def test_results_have_no_graph_unless_an_input_requires_grad():
    g = flow.func.grad(lambda x: (x**2).sum())(flow.ones(2))
    assert g.grad_fn is None and not g.requires_grad
    x = flow.ones(2, requires_grad=True)
    flow.func.grad(lambda y: (y**3).sum())(x).sum().backward()  # through the transform
    assert x.grad.tolist() == [6.0, 6.0]


def test_grad_refuses_a_non_scalar_function():
    with pytest.raises(flow.ShapeError, match="one-element tensor"):
        flow.func.grad(lambda x: x * 2)(flow.ones(3))
