"""Complex dtypes: promotion with the default dtype, creation, printing, views, the errors of
ops that order values, and autograd's conjugate Wirtinger convention (op-by-op values and
gradients against PyTorch live in the op database: `tideflow/testing/records/complex.py`)."""

import numpy as np
import pytest

import tideflow as flow
from tideflow.framework import dtype as dtypes
from tideflow.testing.accuracy import unit_roundoff

torch = pytest.importorskip("torch")


@pytest.fixture
def default_float64():
    flow.set_default_dtype(flow.float64)
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        flow.set_default_dtype(flow.float32)
        torch.set_default_dtype(torch.float32)


def test_dtype_objects_and_aliases():
    assert flow.cfloat is flow.complex64 and flow.cdouble is flow.complex128
    assert flow.complex64.is_complex and not flow.complex64.is_floating_point
    assert not flow.float64.is_complex
    assert repr(flow.complex128) == "tideflow.complex128"
    assert dtypes.to_dtype("cfloat") is flow.complex64
    assert flow.tensor(np.zeros(2, np.complex128)).dtype is flow.complex128


@pytest.mark.parametrize("name", ["bool", "int32", "int64", "float16", "float32", "float64"])
@pytest.mark.parametrize("zero_dim", [False, True])
def test_python_complex_scalar_follows_the_default_dtype(default_float64, name, zero_dim):
    t = torch.zeros(() if zero_dim else (2,), dtype=getattr(torch, name))
    expected = str(torch.result_type(t, 1j)).replace("torch.", "")
    expected = "complex64" if expected == "complex32" else expected  # no complex32 here
    groups = ([], [dtypes.to_dtype(name)]) if zero_dim else ([dtypes.to_dtype(name)], [])
    assert dtypes.result_type(*groups, [1j]).name == expected


def test_can_cast_matches_torch_over_every_pair():
    names = [d.name for d in dtypes.ALL]
    ours = [[flow.can_cast(dtypes.to_dtype(a), dtypes.to_dtype(b)) for b in names] for a in names]
    theirs = [[torch.can_cast(getattr(torch, a), getattr(torch, b)) for b in names] for a in names]
    assert ours == theirs


@pytest.mark.parametrize("other", [2, 2.5, 1j, "0-d", "1-d"])
@pytest.mark.parametrize("name", ["int32", "float64", "complex64"])
def test_result_type_of_tensors_and_numbers_matches_torch(name, other):
    def operand(lib):
        if other == "0-d":
            return lib.tensor(1j, dtype=lib.complex128)
        return lib.ones(2, dtype=lib.float16) if other == "1-d" else other

    ours = flow.result_type(flow.ones(3, dtype=getattr(flow, name)), operand(flow))
    theirs = torch.result_type(torch.ones(3, dtype=getattr(torch, name)), operand(torch))
    assert ours.name == str(theirs).replace("torch.", "")


def test_default_complex_dtype_follows_the_default_dtype(default_float64):
    assert flow.get_default_complex_dtype() is flow.complex128
    assert flow.tensor([1 + 2j]).dtype is flow.complex128
    assert (flow.tensor([1, 2]) * 1j).dtype is flow.complex128


def test_creation():
    assert flow.tensor([1 + 2j]).dtype is flow.complex64
    assert flow.tensor([1 + 2j]).is_complex() and flow.is_complex(flow.tensor([1j]))
    assert not flow.tensor([1.0]).is_complex()
    assert flow.zeros(2, 3, dtype=flow.cfloat).dtype is flow.complex64
    assert flow.ones(2, dtype=flow.cdouble).tolist() == [1 + 0j, 1 + 0j]
    assert flow.full((2,), 1 - 1j).dtype is flow.complex64
    assert flow.arange(3, dtype=flow.complex128).tolist() == [0j, 1 + 0j, 2 + 0j]
    assert flow.tensor([1 + 2j]).item() == 1 + 2j
    assert complex(flow.tensor(3 - 1j)) == 3 - 1j
    z = flow.complex(flow.tensor([1.0, 2.0]), flow.tensor([3.0, 4.0]))
    assert z.dtype is flow.complex64 and z.tolist() == [1 + 3j, 2 + 4j]


@pytest.mark.parametrize(
    "values",
    [[1 + 2j, -3.5 - 1j, 0.25j], [1 + 2j, 3 - 1j], [[1e-5 + 2j, 3 - 1000j]], [-0.0j, 2.0]],
)
@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_printing_matches_torch(values, dtype):
    ours = repr(flow.tensor(values, dtype=getattr(flow, dtype)))
    theirs = repr(torch.tensor(values, dtype=getattr(torch, dtype)))
    assert ours == theirs.replace("torch.", "tideflow.")


def test_real_and_imag_are_views():
    z = flow.tensor([1 + 2j, 3 - 4j])
    re, im = z.real, z.imag
    assert re.dtype is flow.float32 and re.tolist() == [1.0, 3.0] and im.tolist() == [2.0, -4.0]
    z.mul_(2)
    assert re.tolist() == [2.0, 6.0] and im.tolist() == [4.0, -8.0]
    x = flow.tensor([1.0])
    assert x.real is x
    with pytest.raises(flow.DTypeError, match="imag: expected a complex tensor, got float32"):
        _ = x.imag


def test_conjugate_transposes_and_conversions():
    z = flow.tensor([[1 + 1j, 2j], [3, 4 - 1j]])
    expected = torch.tensor([[1 + 1j, 2j], [3, 4 - 1j]]).mH.resolve_conj().tolist()
    assert z.mH.tolist() == z.H.tolist() == flow.adjoint(z).tolist() == expected
    with pytest.raises(flow.ShapeError, match=r"H: expected a matrix .* \[2, 2, 2\]"):
        _ = flow.ones(2, 2, 2, dtype=flow.cfloat).H
    assert flow.ones(2).cfloat().dtype is flow.complex64
    assert flow.ones(2).cdouble().dtype is flow.complex128


def test_view_as_real_and_back_share_memory():
    z = flow.tensor([1 + 2j, 3 - 4j])
    pairs = flow.view_as_real(z)
    assert pairs.tolist() == [[1.0, 2.0], [3.0, -4.0]]
    pairs[0, 1] = 7.0
    assert z.tolist()[0] == 1 + 7j
    assert flow.view_as_complex(pairs).tolist() == z.tolist()


def test_view_as_complex_refuses_what_torch_refuses():
    with pytest.raises(flow.ShapeError, match=r"view_as_complex: the last dimension must .* 2"):
        flow.view_as_complex(flow.zeros(3, 3))
    with pytest.raises(flow.DTypeError, match="view_as_complex: expected a float32 or float64"):
        flow.view_as_complex(flow.zeros(3, 2, dtype=flow.float16))
    strided = flow.zeros(3, 4)[:, ::2]
    with pytest.raises(flow.ShapeError, match="stride 1"):
        flow.view_as_complex(strided)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda z: z < z, "lt: expected real"),
        (lambda z: z >= 1, "ge: expected real"),
        (lambda z: flow.maximum(z, z), "maximum: expected real"),
        (lambda z: z.max(), "max|amax"),
        (lambda z: z.argmax(), "argmax: not defined for complex"),
        (lambda z: z.max(dim=0), "max: not defined for complex"),
        (lambda z: flow.relu(z), "relu: expected a numeric .* got complex64"),
        (lambda z: z.clamp(0, 1), "clamp: not defined for complex"),
        (lambda z: z.sort(), "sort: not defined for complex"),
        (lambda z: z.sign(), "sign: not defined for complex .* use sgn"),
        (lambda z: flow.erf(z), "erf: not defined for complex"),
        (lambda z: z % 2, "remainder: expected integer or floating point"),
        (lambda z: flow.floor(z), "floor: expected"),
    ],
)
def test_ops_undefined_for_complex_raise_naming_op_and_dtype(call, match):
    z = flow.tensor([1 + 2j, 3 - 4j])
    with pytest.raises(flow.DTypeError, match=match):
        call(z)


def test_in_place_ops_refuse_to_drop_imaginary_parts():
    x = flow.ones(2)
    with pytest.raises(flow.DTypeError, match=r"add_: result type tideflow\.complex64 can.t be"):
        x.add_(1j)
    z = flow.ones(2, dtype=flow.cfloat)
    z.add_(1.5)
    assert z.tolist() == [2.5 + 0j, 2.5 + 0j]


def test_complex_tensors_require_grad():
    z = flow.tensor([1 + 2j], requires_grad=True)
    assert z.requires_grad
    with pytest.raises(flow.AutogradError, match="floating point and complex"):
        flow.tensor([1, 2]).requires_grad_()


def test_gradient_is_the_conjugate_wirtinger_derivative():
    # |z|^2 = z conj(z): dL/dx + i dL/dy = 2x + 2iy = 2z
    z = flow.tensor([1 + 2j, -3 + 0.5j], dtype=flow.complex128, requires_grad=True)
    (z * z.conj()).real.sum().backward()
    assert np.allclose(z.grad.numpy(), 2 * z.detach().numpy())
    # a real operand of a complex op gets the real part of its gradient
    x = flow.tensor([2.0, -1.0], dtype=flow.float64, requires_grad=True)
    w = flow.tensor([1j, 1 + 1j], dtype=flow.complex128)
    (x * w).abs().sum().backward()  # |x w| = |x| |w|
    assert x.grad.dtype is flow.float64
    assert np.allclose(x.grad.numpy(), np.sign(x.detach().numpy()) * np.abs(w.numpy()))


def test_gradcheck_perturbs_real_and_imaginary_parts():
    z = flow.tensor([0.5 + 1j, -1 + 0.25j], dtype=flow.complex128, requires_grad=True)
    assert flow.autograd.gradcheck(lambda z: flow.exp(z) * z.conj(), (z,))
    assert flow.autograd.gradgradcheck(lambda z: (z * z).abs(), (z,))
    wrong = flow.tensor([0.5 + 1j], dtype=flow.complex64, requires_grad=True)
    with pytest.raises(flow.AutogradError, match="float64 or complex128"):
        flow.autograd.gradcheck(flow.exp, (wrong,))


def test_random_complex_samples_draw_both_parts():
    flow.manual_seed(0)
    z = flow.randn(20000, dtype=flow.cfloat)
    assert z.dtype is flow.complex64
    # NOTE: each part has variance 1/2: its sample variance is within 5 standard errors
    standard_error = 0.5 * (2 / z.numel()) ** 0.5
    for part in (z.real, z.imag):
        assert abs(float(part.var()) - 0.5) < 5 * standard_error
    u = flow.rand(1000, dtype=flow.cdouble)
    assert u.dtype is flow.complex128
    assert float(u.real.min()) >= 0 and float(u.imag.max()) < 1


def test_finfo_of_a_complex_dtype_is_its_parts():
    assert flow.finfo(flow.cfloat).eps == torch.finfo(torch.cfloat).eps
    assert flow.finfo(flow.cdouble).dtype == "float64"
    with pytest.raises(TypeError, match="iinfo"):
        flow.iinfo(flow.cfloat)


@pytest.mark.parametrize("name", ["SGD", "Adam", "RMSprop"])
def test_optimizers_step_complex_parameters_as_torch_does(name):
    start = np.array([1 + 2j, -0.5 + 0.3j])
    ours, theirs = flow.nn.Parameter(flow.tensor(start)), torch.nn.Parameter(torch.tensor(start))
    opt = getattr(flow.optim, name)([ours], lr=0.1)
    topt = getattr(torch.optim, name)([theirs], lr=0.1)
    for _ in range(3):
        for p, o in ((ours, opt), (theirs, topt)):
            o.zero_grad()
            (p * p.conj()).real.sum().backward()
            o.step()
    # NOTE: three steps of a few dozen float64 operations each, rounded once per operation
    rtol = 100 * unit_roundoff("float64")
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=rtol)


def test_a_complex_linear_layer_trains_like_torch():
    ours = flow.nn.Linear(3, 2).to(flow.cdouble)
    theirs = torch.nn.Linear(3, 2, dtype=torch.cdouble)
    with torch.no_grad():
        theirs.weight.copy_(torch.from_numpy(ours.weight.detach().numpy()))
        theirs.bias.copy_(torch.from_numpy(ours.bias.detach().numpy()))
    x = np.random.default_rng(0).standard_normal((4, 3)) * (1 - 2j)
    (ours(flow.tensor(x)).abs() ** 2).sum().backward()
    (theirs(torch.tensor(x)).abs() ** 2).sum().backward()
    rtol = 64 * unit_roundoff("float64")  # a few sums of products of 3 terms, then squares
    for p, q in ((ours.weight, theirs.weight), (ours.bias, theirs.bias)):
        assert p.dtype is flow.complex128
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=rtol)
