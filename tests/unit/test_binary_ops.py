"""Binary and ternary elementwise ops beyond what the op database's records express: the
user-facing errors, integer semantics (division by zero, negative powers, shifts), in-place
forms with their autograd and version checks, Python-operator corner cases and the partial-sum
SBP signatures each op declares."""

import numpy as np
import pytest

import tideflow as flow
from tideflow.framework.dispatch import infer
from tideflow.framework.errors import AutogradError, DTypeError, ShapeError, TideflowError
from tideflow.framework.registry import Meta, get_op
from tideflow.framework.sbp import B, P, S


def _t(values, dtype=flow.float32, **kw):
    return flow.tensor(np.asarray(values), dtype=dtype, **kw)


def _ints(values, dtype=flow.int32):
    return _t(values, dtype)


# -- errors ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (
            lambda: flow.add(flow.ones(2, 3), flow.ones(4)),
            ShapeError,
            r"add: shapes \[2, 3\] and \[4\] cannot be broadcast together",
        ),
        (
            lambda: flow.where(flow.ones(2, 3) > 0, flow.ones(3), flow.ones(4)),
            ShapeError,
            r"where: shapes \[2, 3\] and \[3\] and \[4\] cannot be broadcast",
        ),
        (
            lambda: flow.addcmul(flow.ones(2), flow.ones(3), flow.ones(2)),
            ShapeError,
            r"addcmul: shapes \[2\] and \[3\] and \[2\]",
        ),
        (
            lambda: flow.bitwise_and(flow.ones(2), flow.ones(2)),
            DTypeError,
            r"bitwise_and: expected integer or bool operands, got float32",
        ),
        (
            lambda: flow.bitwise_left_shift(flow.tensor([True]), flow.tensor([True])),
            DTypeError,
            r"bitwise_left_shift: expected integer operands, got bool",
        ),
        (
            lambda: flow.hypot(_ints([3]), _ints([4])),
            DTypeError,
            r"hypot: expected floating point operands, got int32",
        ),
        (
            lambda: flow.logaddexp(_ints([3]), 1),
            DTypeError,
            r"logaddexp: expected floating point operands, got int32",
        ),
        (
            lambda: flow.remainder(flow.tensor([True]), flow.tensor([True])),
            DTypeError,
            r"remainder: expected integer or floating point operands, got bool",
        ),
        (
            lambda: flow.pow(flow.tensor([True]), flow.tensor([True])),
            DTypeError,
            r"pow: expected integer, floating point or complex operands, got bool",
        ),
        (
            lambda: flow.pow(_ints([2, 3]), -1),
            TideflowError,
            r"pow: integers to negative integer powers are not allowed",
        ),
        (
            lambda: flow.where(_ints([1, 0]), 1.0, 2.0),
            DTypeError,
            r"where: expected condition to be a bool tensor, got int32",
        ),
        (
            lambda: flow.lerp(flow.ones(2), flow.ones(2, dtype=flow.float64), 0.5),
            DTypeError,
            r"lerp: expected dtype float32 for end, got float64",
        ),
        (
            lambda: flow.lerp(flow.ones(2), flow.ones(2), flow.ones(2, dtype=flow.float64)),
            DTypeError,
            r"lerp: expected dtype float32 for weight, got float64",
        ),
        (
            lambda: flow.lerp(_ints([1]), _ints([2]), 0.5),
            DTypeError,
            r"lerp: expected a floating point input, got int32",
        ),
        (
            lambda: flow.addcdiv(flow.ones(1), _ints([2]), flow.tensor([True])),
            DTypeError,
            r"addcdiv: integer division with addcdiv is not supported",
        ),
        (
            lambda: flow.addcmul(flow.tensor([True]), flow.tensor([True]), flow.tensor([True])),
            DTypeError,
            r"addcmul: expected integer or floating point operands, got bool",
        ),
        (
            lambda: flow.isclose(flow.ones(2), flow.ones(2, dtype=flow.float64)),
            DTypeError,
            r"isclose: expected both tensors to have the same dtype, got float32 and float64",
        ),
        (
            lambda: flow.isclose(flow.ones(2), flow.ones(2), rtol=-1),
            TideflowError,
            r"isclose: rtol and atol must be greater than or equal to zero",
        ),
        (
            lambda: flow.div(flow.ones(2), 2, rounding_mode="round"),
            TideflowError,
            r"div: expected rounding_mode to be one of None, 'trunc' or 'floor', but got 'round'",
        ),
        (
            lambda: flow.add(_ints([1]), _ints([2]), alpha=0.5),
            DTypeError,
            r"add: for integral input tensors, argument alpha must not be a floating point",
        ),
        (
            lambda: flow.sub(flow.tensor([True]), 1),
            DTypeError,
            r"sub: subtraction with a bool operand is not supported",
        ),
        (
            lambda: 1 - flow.tensor([True]),
            DTypeError,
            r"sub: subtraction with a bool operand",
        ),
    ],
)
def test_errors_name_the_op_and_operands(call, error, match):
    with pytest.raises(error, match=match):
        call()


@pytest.mark.parametrize(
    ("call", "op"),
    [
        (lambda x, y: flow.remainder(x, y), "remainder"),
        (lambda x, y: flow.fmod(x, y), "fmod"),
        (lambda x, y: flow.floor_divide(x, y), "floor_divide"),
        (lambda x, y: x // y, "floor_divide"),
        (lambda x, y: flow.div(x, y, rounding_mode="trunc"), "div"),
    ],
)
def test_integer_division_by_zero_raises(call, op):
    with pytest.raises(TideflowError, match=f"{op}: integer division by zero"):
        call(_ints([1, 2]), _ints([1, 0]))


def test_true_division_of_integers_by_zero_is_float_division():
    assert flow.div(_ints([1, -1, 0]), 0).tolist() == pytest.approx(
        [np.inf, -np.inf, np.nan], nan_ok=True
    )


# -- integer and dtype semantics ------------------------------------------------------------
def test_integer_pow_of_negative_exponents_follows_pytorch():
    base = _ints([0, 1, -1, -1, 2, -3, 5])
    exponent = _ints([-1, -3, -3, -2, -1, -2, 0])
    out = flow.pow(base, exponent)
    assert out.dtype is flow.int32
    assert out.tolist() == [0, 1, -1, 1, 0, 0, 1]
    assert (2 ** _ints([3, -1])).tolist() == [8, 0]


@pytest.mark.parametrize(
    ("call", "dtype"),
    [
        (lambda: flow.pow(_ints([2]), 2), flow.int32),
        (lambda: flow.pow(_ints([2]), 2.5), flow.float32),
        (lambda: flow.pow(flow.tensor([True]), 2), flow.int64),
        (lambda: flow.pow(2.5, _ints([2])), flow.float32),
        (lambda: _ints([7]) // 2, flow.int32),
        (lambda: _ints([7]) % 2.5, flow.float32),
        (lambda: flow.atan2(_ints([1]), _ints([1])), flow.float32),
        (lambda: flow.copysign(flow.tensor([True]), -1), flow.float32),
        (lambda: flow.xlogy(_ints([1]), 2), flow.float32),
        (lambda: flow.where(flow.tensor([True]), 1, 2.5), flow.float32),
        (lambda: flow.where(flow.tensor([True]), 1, 2), flow.int64),
        (lambda: flow.where(flow.tensor([True]), _ints([1]), 2.5), flow.float32),
        (lambda: flow.where(flow.tensor([True]), _t([1], flow.float16), 2.5), flow.float16),
        (lambda: flow.addcmul(_t([1], flow.float16), flow.ones(1), flow.ones(1)), flow.float32),
        (lambda: _t([1], flow.float16) + _t(2.0, flow.float64), flow.float16),
        (lambda: _ints([1]) * 2.5, flow.float32),
        (lambda: flow.tensor([True]) & 3, flow.int64),
        (lambda: flow.logical_and(_t([0.5]), _ints([0])), flow.bool),
        (lambda: flow.maximum(flow.tensor([True]), flow.tensor([False])), flow.bool),
    ],
)
def test_result_dtypes_follow_pytorch_promotion(call, dtype):
    assert call().dtype is dtype


@pytest.mark.parametrize(
    "call",
    [
        lambda x: x + 2.5,
        lambda x: 2.5 * x,
        lambda x: x / 3.0,
        lambda x: x**0.5,
        lambda x: flow.atan2(x, 2.5),
        lambda x: flow.maximum(x, 0.5),
        lambda x: flow.where(x > 0, x, 2.5),
        lambda x: flow.lerp(x, x, 0.3),
        lambda x: flow.addcmul(x, x, x, value=0.5),
        lambda x: flow.xlogy(x, 2.5),
    ],
)
def test_bfloat16_stays_bfloat16_with_python_floats(call):
    x = _t([0.5, 1.5, 2.5], flow.bfloat16)
    assert call(x).dtype is flow.bfloat16


def test_remainder_takes_the_sign_of_the_divisor_and_fmod_of_the_dividend():
    x, y = _t([-7.0, 7.0, -7.0, 7.0]), _t([3.0, 3.0, -3.0, -3.0])
    assert flow.remainder(x, y).tolist() == [2.0, 1.0, -1.0, -2.0]
    assert flow.fmod(x, y).tolist() == [-1.0, 1.0, -1.0, 1.0]
    assert (x // y).tolist() == [-3.0, 2.0, 2.0, -3.0]
    assert flow.div(x, y, rounding_mode="trunc").tolist() == [-2.0, 2.0, 2.0, -2.0]


def test_integer_trunc_division_rounds_toward_zero():
    out = flow.div(_ints([-7, 7, -7, 7, -6]), _ints([2, 2, -2, -2, 3]), rounding_mode="trunc")
    assert out.dtype is flow.int32
    assert out.tolist() == [-3, 3, 3, -3, -2]


def test_shifts_past_the_width_give_zero_or_the_sign():
    x = _ints([-7, -7, 7, 1, 1])
    counts = _ints([40, -1, 32, 31, -1])
    assert (x >> counts).tolist() == [-1, -1, 0, 0, 0]
    assert (x << counts).tolist() == [0, 0, 0, -(2**31), 0]


def test_addcmul_truncates_a_float_value_for_integer_tensors():
    out = flow.addcmul(_ints([5]), _ints([5]), _ints([2]), value=2.7)
    assert out.dtype is flow.int32
    assert out.item() == 25  # 5 + 2 * 5 * 2, as PyTorch


def test_isclose_compares_infinities_and_nan():
    x = _t([1.0, np.inf, -np.inf, np.nan, np.inf])
    y = _t([1.0 + 1e-7, np.inf, np.inf, np.nan, np.nan])
    assert flow.isclose(x, y).tolist() == [True, True, False, False, False]
    assert flow.isclose(x, y, equal_nan=True).tolist() == [True, True, False, True, False]


def test_allclose_and_equal_return_python_bools():
    x = _t([1.0, 2.0])
    assert flow.allclose(x, x + 1e-9) is True
    assert x.allclose(x + 1.0) is False
    assert flow.equal(x, _ints([1, 2])) is True  # dtypes may differ
    assert flow.equal(x, _t([1.0, 2.0, 3.0])) is False  # shapes differ: no broadcasting
    assert flow.equal(_t([np.nan]), _t([np.nan])) is False
    assert x.equal(x) is True


# -- Python operators -----------------------------------------------------------------------
def test_comparisons_with_other_types_fall_back_to_python():
    x = _t([1.0, 2.0])
    assert (x == None) is False  # noqa: E711
    assert (x != None) is True  # noqa: E711
    with pytest.raises(TypeError):
        _ = x < None
    assert x not in [None, "a"]


def test_reflected_operators_put_the_scalar_first():
    x = _t([2.0, 3.0])
    assert (2**x).tolist() == [4.0, 8.0]
    assert (7 % x).tolist() == [1.0, 1.0]
    assert (7 // x).tolist() == [3.0, 2.0]
    assert (1 << _ints([2, 3])).tolist() == [4, 8]
    assert (64 >> _ints([2, 3])).tolist() == [16, 8]
    assert (6 & _ints([3])).item() == 2
    assert (True ^ flow.tensor([True, False])).tolist() == [False, True]


def test_tensor_where_method_takes_condition_then_other():
    x = _t([1.0, 2.0, 3.0])
    assert x.where(x > 1.5, 0.0).tolist() == [0.0, 2.0, 3.0]


# -- gradients PyTorch defines at ties and non-differentiable points ------------------------
def test_maximum_splits_the_gradient_at_ties_and_fmax_gives_it_to_input():
    x = _t([1.0, 2.0, 3.0], requires_grad=True)
    y = _t([1.0, 3.0, 2.0], requires_grad=True)
    flow.maximum(x, y).sum().backward()
    assert x.grad.tolist() == [0.5, 0.0, 1.0]
    assert y.grad.tolist() == [0.5, 1.0, 0.0]
    x.grad = y.grad = None
    flow.fmax(x, y).sum().backward()
    assert x.grad.tolist() == [1.0, 0.0, 1.0]
    assert y.grad.tolist() == [0.0, 1.0, 0.0]


def test_rounded_division_has_zero_gradient():
    x = _t([5.0, -5.0], requires_grad=True)
    y = _t([3.0, 3.0], requires_grad=True)
    (x // y + flow.div(x, y, rounding_mode="trunc")).sum().backward()
    assert x.grad.tolist() == [0.0, 0.0]
    assert y.grad.tolist() == [0.0, 0.0]


def test_pow_second_derivative_in_the_exponent():
    x = _t([2.0, 3.0], flow.float64)
    y = _t([1.5, 0.5], flow.float64, requires_grad=True)
    (g,) = flow.autograd.grad(flow.pow(x, y).sum(), [y], create_graph=True)
    (gg,) = flow.autograd.grad(g.sum(), [y])
    np.testing.assert_allclose(
        gg.numpy(), np.log([2.0, 3.0]) ** 2 * np.power([2.0, 3.0], [1.5, 0.5])
    )


def test_comparison_and_logical_results_are_not_differentiable():
    x = _t([1.0, 2.0], requires_grad=True)
    assert not (x > 1).requires_grad
    assert not flow.isclose(x, x).requires_grad
    assert not flow.logical_and(x, x).requires_grad


# -- in-place forms -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("method", "args", "kwargs", "expected"),
    [
        ("pow_", (2,), {}, [4.0, 9.0]),
        ("remainder_", (2.0,), {}, [0.0, 1.0]),
        ("fmod_", (-2.0,), {}, [0.0, 1.0]),
        ("floor_divide_", (2,), {}, [1.0, 1.0]),
        ("atan2_", (-1.0,), {}, [np.pi - np.arctan(2.0), np.pi - np.arctan(3.0)]),
        ("hypot_", (0.0,), {}, [2.0, 3.0]),
        ("copysign_", (-1.0,), {}, [-2.0, -3.0]),
        ("xlogy_", (1.0,), {}, [0.0, 0.0]),
        ("lerp_", (_t([4.0, 5.0]), 0.5), {}, [3.0, 4.0]),
        ("addcmul_", (_t([1.0, 2.0]), _t([3.0, 4.0])), {"value": 2}, [8.0, 19.0]),
        ("addcdiv_", (_t([1.0, 2.0]), _t([4.0, 4.0])), {"value": 2}, [2.5, 4.0]),
        ("logical_and_", (_t([0.0, 1.0]),), {}, [0.0, 1.0]),
    ],
)
def test_inplace_methods_write_into_the_tensor(method, args, kwargs, expected):
    x = _t([2.0, 3.0])
    view = x[:]
    version = x._version_count
    assert getattr(x, method)(*args, **kwargs) is x
    assert x.tolist() == pytest.approx(expected)
    assert view.tolist() == pytest.approx(expected)
    assert x._version_count == version + 1


def test_augmented_assignment_operators():
    x = _ints([6, 7])
    x **= 2
    x %= 10
    x //= 2
    x &= 3
    x |= 4
    x ^= 1
    x <<= 2
    x >>= 1
    assert x.dtype is flow.int32
    assert x.tolist() == [12, 10]  # [36, 49] [6, 9] [3, 4] [3, 0] [7, 4] [6, 5] [24, 20]


def test_inplace_float_result_into_an_integer_tensor_raises():
    x = _ints([6, 7])
    with pytest.raises(DTypeError, match=r"__ifloordiv__: result type .*float32 can't be cast"):
        x //= 2.5


def test_inplace_records_autograd():
    x = _t([2.0, 3.0], flow.float64, requires_grad=True)
    y = x * 1
    y.pow_(3)
    y.addcmul_(x, x, value=2)
    y.sum().backward()
    np.testing.assert_allclose(
        x.grad.numpy(), 3 * np.array([2.0, 3.0]) ** 2 + 4 * np.array([2.0, 3.0])
    )


def test_inplace_op_keeps_the_value_its_gradient_needs():
    """mul_ and pow_ need the tensor's value from before the write, as PyTorch keeps it."""
    x = _t([2.0, 3.0], flow.float64, requires_grad=True)
    z = _t([1.0, 2.0], flow.float64, requires_grad=True)
    y = x * 1
    y.mul_(z)
    y.pow_(2)
    y.sum().backward()
    assert x.grad.tolist() == [4.0, 24.0]  # d/dx (x z)^2 = 2 x z^2
    assert z.grad.tolist() == [8.0, 36.0]  # 2 x^2 z


def test_modifying_a_saved_operand_in_place_fails_backward():
    x = _t([2.0, 3.0], requires_grad=True)
    base = x * 1
    out = flow.pow(base, 2)  # saves base
    base.remainder_(5)
    with pytest.raises(AutogradError, match="PowBackward0 saved 'input'"):
        out.sum().backward()


def test_inplace_on_a_leaf_requiring_grad_raises():
    x = _t([2.0, 3.0], requires_grad=True)
    with pytest.raises(AutogradError, match="lerp_: a leaf Variable that requires grad"):
        x.lerp_(_t([1.0, 1.0]), 0.5)


# -- SBP: partial sums only where the op is linear in them ----------------------------------
def _sigs(op, *operands):
    return {(s.ins, s.outs) for s in get_op(op).sbp(*operands)}


def _m(*shape):
    return Meta(shape, flow.float32)


def test_partial_signatures_of_linear_operands():
    x = _m(3, 4)
    assert ((P, B), (P,)) in _sigs("mul", x, x) and ((B, P), (P,)) in _sigs("mul", x, x)
    assert ((P, None), (P,)) in _sigs("mul", x, 2.5)
    assert ((P, P), (P,)) in _sigs("add", x, x)
    assert not any(P in ins for ins, _ in _sigs("add", x, 2.5))  # P + 2.5 is not linear
    assert ((P, B), (P,)) in _sigs("div", x, x) and ((B, P), (P,)) not in _sigs("div", x, x)
    assert not any(P in ins for ins, _ in _sigs("maximum", x, x))
    assert ((P, P, B), (P,)) in _sigs("addcmul", x, x, x)
    assert ((P, B, P), (P,)) in _sigs("addcmul", x, x, x)
    assert ((P, B, P), (P,)) not in _sigs("addcdiv", x, x, x)
    assert ((P, P, None), (P,)) in _sigs("lerp", x, x, 0.5)


def test_where_splits_the_condition_with_the_values():
    cond = Meta((3, 4), flow.bool)
    sigs = _sigs("where", cond, _m(3, 4), _m(4))
    assert ((S(0), S(0), B), (S(0),)) in sigs
    assert ((S(1), S(1), S(0)), (S(1),)) in sigs
    assert ((B, P, P), (P,)) in sigs  # selecting between partial sums is a partial sum
    assert not any(P in ins for ins, _ in _sigs("where", cond, _m(3, 4), 0.0))


def test_meta_rules_agree_with_eager_results():
    """What graph tracing sees (`infer`) for calls whose dtype comes from scalars."""
    cond = Meta((3,), flow.bool)
    assert infer(get_op("where"), [cond, 1.0, Meta((), flow.int64)], {}).dtype is flow.float32
    assert infer(get_op("pow"), [Meta((2,), flow.bool), 2], {}).dtype is flow.int64
    assert infer(get_op("eq"), [Meta((2,), flow.float16), 1.5], {}) == Meta((2,), flow.bool)
    with pytest.raises(TideflowError, match="pow: integers to negative integer powers"):
        infer(get_op("pow"), [Meta((2,), flow.int32), -2], {})
