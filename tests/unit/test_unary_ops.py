"""Unary elementwise ops and activations beyond what the op database's records express:
user-facing errors, in-place forms and their autograd, PyTorch's gradients at the kinks,
numerical stability at large |x|, and dtype rules."""

import numpy as np
import pytest

import tideflow as flow
import tideflow.nn.functional as F
from tideflow.framework.errors import DTypeError, ShapeError


def _t(values, dtype=flow.float64, **kw):
    return flow.tensor(np.asarray(values), dtype=dtype, **kw)


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def _grads(flow_call, torch_call, torch, values, *, extra=()):
    """Gradients of sum(f(x, *extra)) for every float64 operand, in tideflow and in PyTorch."""
    fx = [_t(v, requires_grad=True) for v in (values, *extra)]
    tx = [torch.tensor(np.asarray(v, np.float64), requires_grad=True) for v in (values, *extra)]
    flow_call(*fx).sum().backward()
    torch_call(*tx).sum().backward()
    return [x.grad.numpy() for x in fx], [x.grad.numpy() for x in tx]


# NOTE: not tighter: PyTorch's float64 kernels use some float32 constants (hardsigmoid's 1/6).
_RTOL = 1e-7


def _assert_same_grads(flow_call, torch_call, torch, values, *, extra=()):
    got, want = _grads(flow_call, torch_call, torch, values, extra=extra)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=_RTOL, atol=0)


# -- errors ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("call", "match"),
    [
        (
            lambda: flow.neg(flow.tensor([True])),
            r"neg: expected a numeric \(non-bool\) tensor, got bool",
        ),
        (lambda: flow.abs(flow.tensor([True])), r"abs: expected a numeric .* got bool"),
        (lambda: flow.relu(flow.tensor([True])), r"relu: expected a numeric .* got bool"),
        (lambda: flow.floor(flow.tensor([True])), r"floor: expected a numeric .* got bool"),
        (
            lambda: flow.frac(flow.tensor([1, 2])),
            r"frac: expected a floating point tensor, got int64",
        ),
        (lambda: F.elu(flow.tensor([1, 2])), r"elu: expected a floating point tensor, got int64"),
        (lambda: F.gelu(flow.tensor([1], dtype=flow.int32)), r"gelu: .* got int32"),
        (lambda: F.hardtanh(flow.tensor([True])), r"hardtanh: expected a numeric .* got bool"),
        (lambda: flow.bitwise_not(flow.tensor([1.5])), r"bitwise_not: expected an integer or bool"),
        (lambda: flow.round(flow.tensor([1, 2]), decimals=1), r"round: expected a floating point"),
        (lambda: flow.hardshrink(flow.tensor([1, 2])), r"hardshrink: expected a floating point"),
    ],
)
def test_unsupported_dtypes_raise_dtype_errors_naming_the_op(call, match):
    with pytest.raises(DTypeError, match=match):
        call()


def test_attribute_errors():
    x = flow.tensor([1.0, -1.0])
    with pytest.raises(flow.TideflowError, match="clamp: at least one of 'min' or 'max'"):
        flow.clamp(x)
    with pytest.raises(flow.TideflowError, match="celu: alpha must not be 0"):
        F.celu(x, alpha=0.0)
    with pytest.raises(flow.TideflowError, match=r"hardtanh: min_val \(2\) cannot be greater"):
        F.hardtanh(x, 2, 1)
    with pytest.raises(flow.TideflowError, match="softshrink: lambd must be non-negative"):
        F.softshrink(x, -0.5)
    with pytest.raises(flow.TideflowError, match="gelu: approximate must be 'none' or 'tanh'"):
        F.gelu(x, approximate="erf")


def test_clamp_bounds_must_broadcast():
    with pytest.raises(ShapeError, match=r"clamp: shapes \[3\] and \[4\]"):
        flow.clamp(flow.zeros(3), min=flow.zeros(4))


@pytest.mark.parametrize(
    ("x_shape", "w_shape", "w_dtype", "error", "match"),
    [
        ((2, 3), (3, 1), "float32", ShapeError, r"scalar or 1-d tensor, got shape \[3, 1\]"),
        ((2, 3), (4,), "float32", ShapeError, r"4 elements but the input of shape \[2, 3\] has 3"),
        ((5,), (5,), "float32", ShapeError, r"input of shape \[5\] has 1 channels"),
        ((), (2,), "float32", ShapeError, "a 0-d input takes a single weight, got 2"),
        ((2, 3), (3,), "float64", DTypeError, "weight's dtype float64 must match .* float32"),
    ],
)
def test_prelu_errors(x_shape, w_shape, w_dtype, error, match):
    with pytest.raises(error, match="prelu: .*" + match):
        flow.prelu(flow.zeros(x_shape), flow.zeros(w_shape, dtype=w_dtype))


# -- in-place forms -------------------------------------------------------------------------------
_METHODS = {
    "abs": (), "neg": (), "exp": (), "exp2": (), "expm1": (), "log": (), "log2": (),
    "log10": (), "log1p": (), "sqrt": (), "rsqrt": (), "square": (), "reciprocal": (),
    "sin": (), "cos": (), "tan": (), "asin": (), "acos": (), "atan": (), "sinh": (),
    "cosh": (), "tanh": (), "asinh": (), "atanh": (), "sigmoid": (), "erf": (), "erfc": (),
    "erfinv": (), "floor": (), "ceil": (), "round": (), "trunc": (), "frac": (), "sign": (),
    "clamp": (0.2, 0.6), "clamp_min": (0.3,), "clamp_max": (0.4,), "nan_to_num": (),
    "relu": (),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(_METHODS))
def test_inplace_methods_match_the_out_of_place_op_with_gradients(name):
    args = _METHODS[name]
    values = np.array([0.1, 0.35, 0.5, 0.8])
    x = _t(values, requires_grad=True)
    y = x * 1
    out = getattr(y, name + "_")(*args)
    assert out is y and y._version_count == 1
    y.backward(_t([1.0, 2.0, 3.0, 4.0]))
    x2 = _t(values, requires_grad=True)
    want = getattr(x2, name)(*args)
    want.backward(_t([1.0, 2.0, 3.0, 4.0]))
    np.testing.assert_allclose(y.detach().numpy(), want.detach().numpy())
    np.testing.assert_allclose(x.grad.numpy(), x2.grad.numpy())


@pytest.mark.torch
@pytest.mark.parametrize(
    ("name", "kwargs"),
    [
        ("relu", {}),
        ("relu6", {}),
        ("leaky_relu", {"negative_slope": 0.2}),
        ("elu", {"alpha": 2.0}),
        ("selu", {}),
        ("celu", {"alpha": 1.5}),
        ("silu", {}),
        ("mish", {}),
        ("hardtanh", {"min_val": -0.5, "max_val": 2.0}),
        ("hardsigmoid", {}),
        ("hardswish", {}),
        ("threshold", {"threshold": 0.3, "value": -1.0}),
    ],
)
def test_functional_inplace_matches_torch(torch, name, kwargs):
    values = np.linspace(-7.0, 7.0, 15) + 0.05
    tf_fn = getattr(F, name)
    torch_fn = getattr(torch.nn.functional, name)
    x = _t(values, requires_grad=True)
    y = x * 1
    assert tf_fn(y, **kwargs, inplace=True) is y
    tx = torch.tensor(values, requires_grad=True)
    ty = tx * 1
    torch_fn(ty, **kwargs, inplace=True)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=_RTOL)
    y.backward(_t(np.arange(15.0)))
    ty.backward(torch.arange(15.0, dtype=torch.float64))
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=_RTOL)


def test_functional_inplace_underscore_forms():
    values = [-2.0, -0.5, 0.5, 2.0]
    for fn, args, want in [
        (F.relu_, (), [0.0, 0.0, 0.5, 2.0]),
        (F.leaky_relu_, (0.5,), [-1.0, -0.25, 0.5, 2.0]),
        (F.hardtanh_, (-1.0, 1.0), [-1.0, -0.5, 0.5, 1.0]),
        (F.threshold_, (0.0, 9.0), [9.0, 9.0, 0.5, 2.0]),
        (F.elu_, (1.0,), F.elu(_t(values)).numpy()),
        (F.selu_, (), F.selu(_t(values)).numpy()),
        (F.celu_, (2.0,), F.celu(_t(values), 2.0).numpy()),
    ]:
        x = _t(values)
        assert fn(x, *args) is x
        np.testing.assert_allclose(x.numpy(), want, err_msg=fn.__name__)


def test_inplace_with_a_negative_leaky_slope_still_differentiates():
    # PyTorch refuses this backward; running the op from a copy of the input makes it exact.
    values = [-2.0, -0.5, 0.5, 2.0]
    x = _t(values, requires_grad=True)
    F.leaky_relu(x * 1, -0.3, inplace=True).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [-0.3, -0.3, 1.0, 1.0])


def test_inplace_on_a_leaf_that_requires_grad_is_an_error():
    x = _t([1.0, -1.0], requires_grad=True)
    with pytest.raises(flow.TideflowError, match="relu_: a leaf Variable that requires grad"):
        F.relu(x, inplace=True)
    with pytest.raises(flow.TideflowError, match="sin_: a leaf Variable"):
        x.sin_()


def test_modifying_a_saved_output_in_place_is_detected():
    x = _t([0.5, 1.0], requires_grad=True)
    y = x.exp()  # exp saves its output
    y.sigmoid_()
    with pytest.raises(
        flow.TideflowError, match=r"ExpBackward0 saved 'out'.*version 0.*now at version 1"
    ):
        y.sum().backward()


def test_float_results_cannot_be_written_into_integer_tensors():
    x = flow.tensor([1, 4, 9])
    with pytest.raises(
        flow.TideflowError, match=r"sqrt_: result type .*float32 can't be cast to the dtype .*int64"
    ):
        x.sqrt_()
    x.abs_().neg_()  # integer results stay integer
    np.testing.assert_array_equal(x.numpy(), [-1, -4, -9])


# -- gradients at the kinks (where finite differences cannot check them) --------------------------
@pytest.mark.torch
@pytest.mark.parametrize(
    ("name", "kwargs", "values"),
    [
        ("relu", {}, [-1.0, 0.0, 1.0]),
        ("relu6", {}, [0.0, 3.0, 6.0]),
        ("leaky_relu", {"negative_slope": 0.1}, [-1.0, 0.0, 1.0]),
        ("hardtanh", {"min_val": -1.0, "max_val": 2.0}, [-1.0, 0.0, 2.0, float("nan")]),
        ("elu", {}, [-1.0, 0.0, 1.0]),
        ("celu", {"alpha": 0.5}, [-1.0, 0.0, 1.0]),
        ("selu", {}, [-1.0, 0.0, 1.0]),
        ("hardsigmoid", {}, [-3.0, 0.0, 3.0]),
        ("hardswish", {}, [-3.0, 0.0, 3.0]),
        ("softshrink", {"lambd": 0.5}, [-0.5, 0.0, 0.5]),
        ("hardshrink", {"lambd": 0.5}, [-0.5, 0.0, 0.5]),
        ("threshold", {"threshold": 1.0, "value": 7.0}, [0.0, 1.0, 2.0]),
        ("softplus", {"beta": 1.0, "threshold": 2.0}, [1.0, 2.0, 3.0]),
    ],
)
def test_activation_gradients_at_kinks_match_torch(torch, name, kwargs, values):
    _assert_same_grads(
        lambda x: getattr(F, name)(x, **kwargs),
        lambda x: getattr(torch.nn.functional, name)(x, **kwargs),
        torch,
        values,
    )


@pytest.mark.torch
@pytest.mark.parametrize(
    "name", ["abs", "relu", "sign", "floor", "ceil", "round", "trunc", "frac", "nan_to_num"]
)
def test_math_gradients_at_kinks_and_specials_match_torch(torch, name):
    values = [-2.5, -1.0, -0.0, 0.0, 0.5, 2.0, float("inf"), float("-inf"), float("nan")]
    _assert_same_grads(
        lambda x: getattr(flow, name)(x), lambda x: getattr(torch, name)(x), torch, values
    )


@pytest.mark.torch
def test_clamp_gradients_at_and_between_the_bounds_match_torch(torch):
    x = [-2.0, -1.0, 0.0, 1.0, 2.0, 0.5]
    lo = [-1.0, -1.0, -1.0, -1.0, -1.0, 1.0]  # the last min exceeds its max
    hi = [1.0, 1.0, 1.0, 1.0, 1.0, 0.0]
    _assert_same_grads(flow.clamp, torch.clamp, torch, x, extra=(lo, hi))
    _assert_same_grads(flow.clamp, torch.clamp, torch, x, extra=(lo,))
    _assert_same_grads(
        lambda x, h: flow.clamp(x, max=h), lambda x, h: torch.clamp(x, max=h), torch, x, extra=(hi,)
    )
    _assert_same_grads(lambda x: flow.clamp(x, -1, 1), lambda x: torch.clamp(x, -1, 1), torch, x)


@pytest.mark.torch
def test_prelu_gradients_at_zero_and_for_a_shared_slope(torch):
    x = np.array([[-1.0, 0.0, 2.0], [0.0, -3.0, 1.0]])
    _assert_same_grads(F.prelu, torch.nn.functional.prelu, torch, x, extra=([0.1, 0.2, 0.3],))
    _assert_same_grads(F.prelu, torch.nn.functional.prelu, torch, x, extra=([0.25],))


def test_clamp_accepts_a_scalar_min_with_a_tensor_max():
    x = _t([-2.0, 0.0, 2.0], requires_grad=True)
    hi = _t([1.0, 1.0, 1.5], requires_grad=True)
    y = flow.clamp(x, -1.0, hi)
    np.testing.assert_allclose(y.detach().numpy(), [-1.0, 0.0, 1.5])
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [0.0, 1.0, 0.0])
    np.testing.assert_allclose(hi.grad.numpy(), [0.0, 0.0, 1.0])


# -- numerical stability --------------------------------------------------------------------------
@pytest.mark.torch
@pytest.mark.parametrize(
    "name", ["sigmoid", "logsigmoid", "softplus", "silu", "mish", "gelu", "elu", "selu", "tanh"]
)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_activations_are_stable_for_large_inputs(torch, name, dtype):
    values = np.array([-1e4, -800.0, -90.0, -30.0, 30.0, 90.0, 800.0, 1e4], dtype)
    x = flow.tensor(values, requires_grad=True)
    tx = torch.tensor(values, requires_grad=True)
    y = getattr(F, name)(x)
    ty = getattr(torch.nn.functional, name)(tx)
    y.sum().backward()
    ty.sum().backward()
    assert np.isfinite(y.detach().numpy()).all() and np.isfinite(x.grad.numpy()).all()
    # NOTE: atol: gelu's erfc form keeps x * Phi(x) ~ 1e-196 where PyTorch's 1 + erf gives 0.
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-6, atol=1e-30)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-6, atol=1e-30)


def test_float16_and_bfloat16_compute_in_float32():
    # exp(10) = 22026.47: float16 rounds once to 22032, not via a float16 intermediate.
    for dtype, want in [(flow.float16, 22032.0), (flow.bfloat16, 22016.0)]:
        y = flow.exp(flow.tensor([10.0], dtype=dtype))
        assert y.dtype == dtype
        assert y.tolist() == [want]
    y = F.gelu(flow.tensor([1.0, -1.0], dtype=flow.bfloat16))
    assert y.dtype == flow.bfloat16


# -- dtypes and values ----------------------------------------------------------------------------
def test_dtype_rules():
    i = flow.tensor([-2, 0, 3], dtype=flow.int32)
    b = flow.tensor([True, False])
    assert flow.relu(i).dtype == flow.int32 and flow.relu(i).tolist() == [0, 0, 3]
    assert flow.abs(i).tolist() == [2, 0, 3] and flow.abs(i).dtype == flow.int32
    assert flow.floor(i).dtype == flow.int32 and flow.round(i).tolist() == [-2, 0, 3]
    assert flow.exp(i).dtype == flow.float32 and flow.sigmoid(b).dtype == flow.float32
    assert flow.square(b).dtype == flow.int64 and flow.square(i).dtype == flow.int32
    assert flow.sign(b).dtype == flow.bool and flow.sign(i).tolist() == [-1, 0, 1]
    assert flow.clamp(i, 0.5).dtype == flow.float32
    assert flow.clamp(b, 0, 1).dtype == flow.int64
    assert F.hardtanh(i).tolist() == [-1, 0, 1] and F.relu6(i).dtype == flow.int32
    assert F.threshold(i, -0.5, 3.7).tolist() == [3, 3, 3]  # both cast to int: 0 and 3
    assert flow.isnan(i).dtype == flow.bool and flow.logical_not(i).tolist() == [False, True, False]
    assert flow.nan_to_num(i).tolist() == [-2, 0, 3]
    assert (~b).tolist() == [False, True] and (~i).tolist() == [1, -1, -4]


def test_rounding_is_half_to_even_like_torch():
    x = flow.tensor([0.5, 1.5, 2.5, -0.5, -2.5])
    assert flow.round(x).tolist() == [0.0, 2.0, 2.0, -0.0, -2.0]
    x = flow.tensor([1.25, 1.35, 2.5], dtype=flow.float64)
    assert flow.round(x, decimals=1).tolist() == [1.2, 1.4, 2.5]
    assert flow.round(flow.tensor([1250.0, 1350.0]), decimals=-2).tolist() == [1200.0, 1400.0]


def test_sign_and_nan_to_num_specials():
    x = flow.tensor([float("nan"), float("inf"), -float("inf"), -0.0, 2.0])
    assert flow.sign(x).tolist() == [0.0, 1.0, -1.0, 0.0, 1.0]
    big = float(np.finfo(np.float32).max)
    assert flow.nan_to_num(x).tolist() == [0.0, big, -big, -0.0, 2.0]
    half = flow.nan_to_num(x.to(flow.float16), posinf=1e10)
    assert half.tolist()[1] == float("inf")  # the replacement is cast to float16


def test_aliases_and_methods():
    assert flow.absolute is flow.abs and flow.negative is flow.neg and flow.clip is flow.clamp
    assert flow.arcsin is flow.asin and flow.arctanh is flow.atanh and flow.fix is flow.trunc
    assert F.sigmoid is flow.sigmoid and F.tanh is flow.tanh and F.prelu is flow.prelu
    x = flow.tensor([-1.5, 0.5])
    assert abs(x).tolist() == [1.5, 0.5]
    assert x.clamp(min=0).tolist() == [0.0, 0.5] and x.clip(-1, 0).tolist() == [-1.0, 0.0]
    assert x.hardshrink(1.0).tolist() == [-1.5, 0.0]
    assert x.prelu(flow.tensor([0.5])).tolist() == [-0.75, 0.5]
    assert x.isfinite().tolist() == [True, True]
