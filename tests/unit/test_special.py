"""`tideflow.special`: PyTorch's torch.special names over one definition per op, reachable as
`torch.special` under mock_torch; what the op database cannot say (argument errors, missing
derivatives, the range where PyTorch's own kernels are not the reference, half precision where
PyTorch has no kernel). Values and gradients against PyTorch: tests/ops (records/special.py)."""

import numpy as np
import pytest

import tideflow as flow
import tideflow.mock_torch as mock_torch
from tideflow.testing.accuracy import assert_accurate

# PyTorch's torch.special functions the namespace provides (issue 12).
TORCH_SPECIAL = [
    "erf",
    "erfc",
    "erfinv",
    "erfcx",
    "expit",
    "logit",
    "ndtr",
    "ndtri",
    "log_ndtr",
    "i0",
    "i0e",
    "i1",
    "i1e",
    "digamma",
    "psi",
    "polygamma",
    "multigammaln",
    "gammaln",
    "gammainc",
    "gammaincc",
    "xlogy",
    "xlog1py",
    "zeta",
    "entr",
    "sinc",
    "round",
    "logsumexp",
    "softmax",
    "log_softmax",
    "bessel_j0",
    "bessel_j1",
]

# Each PyTorch special name that names an op defined elsewhere, and that op.
ALIASES = {
    "erf": flow.erf,
    "erfc": flow.erfc,
    "erfinv": flow.erfinv,
    "expit": flow.sigmoid,
    "logit": flow.logit,
    "i0": flow.i0,
    "digamma": flow.digamma,
    "psi": flow.digamma,
    "polygamma": flow.polygamma,
    "multigammaln": flow.mvlgamma,
    "gammaln": flow.lgamma,
    "xlogy": flow.xlogy,
    "sinc": flow.sinc,
    "round": flow.round,
    "logsumexp": flow.logsumexp,
    "softmax": flow.nn.functional.softmax,
    "log_softmax": flow.nn.functional.log_softmax,
}

# Zeros of J0 and J1 (Abramowitz & Stegun, table 9.5), beyond the range where PyTorch's float64
# kernels are accurate enough to serve as the oracle.
J0_ZEROS = (2.404825557695773, 5.520078110286311, 8.653727912911013, 11.79153443901428)
J1_ZEROS = (3.831705970207512, 7.015586669815620, 10.17346813506272, 13.32369193631422)


@pytest.fixture(autouse=True)
def _disable_mock_after_each_test():
    yield
    mock_torch.disable()


def test_namespace_has_every_torch_special_function():
    missing = [name for name in TORCH_SPECIAL if not callable(getattr(flow.special, name, None))]
    assert not missing
    assert sorted(flow.special.__all__) == flow.special.__all__


@pytest.mark.parametrize(("name", "op"), ALIASES.items())
def test_special_names_are_the_ops_themselves(name, op):
    assert getattr(flow.special, name) is op


def test_torch_special_resolves_under_mock_torch():
    with mock_torch.enabled():
        import torch
        import torch.special
        from torch.special import ndtr

        x = torch.tensor([0.0, 1.0])
        assert torch.special is flow.special
        assert ndtr is flow.special.ndtr
        assert torch.special.ndtr(x)[0].item() == 0.5


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda x: flow.polygamma(-1, x), r"polygamma: n must be a non-negative int, got -1"),
        (lambda x: flow.polygamma(1.0, x), r"polygamma: n must be .* got 1\.0"),
        (lambda x: flow.mvlgamma(x, 0), r"mvlgamma: p must be an int >= 1, got 0"),
        (lambda x: flow.logit(x, eps="0.1"), r"logit: eps must be a number or None, got str"),
    ],
)
def test_bad_arguments_name_the_op(call, message):
    with pytest.raises(flow.ArgumentError, match=message):
        call(flow.tensor([1.5]))


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: flow.special.ndtr(None),
            r"ndtr\(\): argument 'input' \(position 1\) must be Tensor, not NoneType",
        ),
        (lambda: flow.lgamma(2.5), r"lgamma\(\): argument 'input' .* not float"),
        (
            lambda: flow.polygamma(1, [1.0]),
            r"polygamma\(\): argument 'input' \(position 2\) .* not list",
        ),
    ],
)
def test_non_tensor_inputs_are_refused_like_pytorch(call, message):
    with pytest.raises(flow.ArgumentError, match=message):
        call()


def test_mvlgamma_refuses_inputs_outside_its_domain():
    x = flow.tensor([2.0, 0.9])
    message = r"mvlgamma: all elements must be greater than \(p - 1\) / 2 = 1\.0 \(p = 3\), got 0.9"
    with pytest.raises(flow.TideflowError, match=message):
        flow.mvlgamma(x, p=3)
    assert flow.mvlgamma(flow.tensor([float("nan")]), p=3).isnan().all()


def test_shapes_that_do_not_broadcast_name_the_op():
    with pytest.raises(flow.ShapeError, match=r"zeta: shapes \[2\] and \[3\]"):
        flow.special.zeta(flow.ones(2) * 2, flow.ones(3))


@pytest.mark.parametrize("name", ["zeta", "gammainc", "gammaincc"])
def test_no_derivative_in_the_first_operand_raises_like_pytorch(name):
    fn = getattr(flow.special, name)
    a = flow.tensor([2.5, 3.0], dtype=flow.float64, requires_grad=True)
    x = flow.tensor([0.5, 1.5], dtype=flow.float64, requires_grad=True)
    with pytest.raises(
        flow.AutogradError, match=rf"{name}: the derivative with respect to 'input'"
    ):
        fn(a, x).sum().backward()
    (gx,) = flow.autograd.grad(fn(a.detach(), x).sum(), [x])
    assert gx.shape == x.shape


@pytest.mark.parametrize(("fn", "zeros"), [("bessel_j0", J0_ZEROS), ("bessel_j1", J1_ZEROS)])
def test_bessel_j_vanishes_at_its_tabulated_zeros(fn, zeros):
    z = np.array(zeros)
    got = getattr(flow.special, fn)(flow.tensor(z)).numpy()
    # the rounding of z to float64 moves the value by up to |J'(z)| * eps * z, |J'| < 1
    assert np.all(np.abs(got) <= 2 * np.finfo(np.float64).eps * z)


def test_bessel_j_is_not_differentiable():
    x = flow.tensor([1.0, 2.0], requires_grad=True)
    assert not flow.special.bessel_j0(x).requires_grad
    assert not flow.special.bessel_j1(x).requires_grad


@pytest.mark.parametrize("name", ["erfcx", "ndtri", "log_ndtr", "bessel_j0", "bessel_j1"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_halves_pytorch_lacks_round_the_float32_value_once(name, dtype):
    fn = getattr(flow.special, name)
    x64 = flow.tensor(np.linspace(0.05, 0.95, 7))
    x = x64.to(getattr(flow, dtype))
    exact = fn(x.to(flow.float64)).numpy()
    got = fn(x)
    assert got.dtype is x.dtype
    assert_accurate(got.to(flow.float64).numpy(), exact, dtype, 1, 0.0, f"{name}({dtype})")


def test_integer_inputs_compute_in_the_default_float_dtype():
    assert flow.special.ndtr(flow.tensor([0, 1])).dtype is flow.float32
    assert flow.special.gammainc(flow.tensor([1, 2]), flow.tensor([0.5, 1.5])).dtype is flow.float32


def test_tensor_methods_and_in_place_forms():
    x = flow.tensor([1.5, 2.5, 3.5], dtype=flow.float64)
    assert flow.equal(x.lgamma(), flow.lgamma(x))
    assert flow.equal(x.polygamma(2), flow.polygamma(2, x))
    assert flow.equal(x.mvlgamma(2), flow.mvlgamma(x, p=2))
    y = x.clone()
    assert y.i0_() is y
    assert flow.equal(y, flow.i0(x))


def test_logit_eps_clamps_and_stops_the_gradient_outside():
    x = flow.tensor([-0.5, 0.05, 0.5, 0.99], dtype=flow.float64, requires_grad=True)
    y = flow.logit(x, eps=0.1)
    assert flow.equal(y[:2], flow.logit(flow.tensor([0.1, 0.1], dtype=flow.float64)))
    (g,) = flow.autograd.grad(y.sum(), [x])
    assert g.tolist() == [0.0, 0.0, 4.0, 0.0]


def test_logit_eps_as_pytorch_compares_it():
    x = flow.tensor([-0.5, 0.05, 0.5, 1.2], dtype=flow.float64, requires_grad=True)
    plain = flow.logit(x)
    # a negative eps is no eps: nan outside [0, 1], in the value and in the slope
    negative = flow.logit(x, eps=-0.1)
    assert flow.equal(negative.isnan(), plain.isnan())
    (g,) = flow.autograd.grad(negative.sum(), [x])
    assert g.isnan().tolist() == [True, False, False, True]
    # a nan eps fails every comparison: nothing is clamped and every slope is 1 / (x (1 - x))
    (g,) = flow.autograd.grad(flow.logit(x, eps=float("nan")).sum(), [x])
    assert flow.allclose(g, 1 / (x * (1 - x)).detach())


def test_docstring_examples_run():
    import tideflow.ops.special

    from .test_nn_layers import run_doctests

    run_doctests(tideflow.ops.special)
    run_doctests(flow.special)
