"""Ops PyTorch programs call that tideflow added for conformance (issue 12): the errors users
can cause, named after the op with the dtypes and shapes involved. Values and gradients are
checked against PyTorch by the op database records."""

import pytest

import tideflow as flow
from tideflow.framework.errors import ArgumentError, DTypeError


# -- number theory, steps and float representation -------------------------------------------
@pytest.mark.parametrize("op", [flow.gcd, flow.lcm])
def test_gcd_and_lcm_take_integers_only(op):
    name = op.__name__
    with pytest.raises(DTypeError, match=rf"{name}: expected integer operands, got float32"):
        op(flow.tensor([4.0]), flow.tensor([6.0]))
    with pytest.raises(DTypeError, match=rf"{name}: expected integer operands, got bool"):
        op(flow.tensor([True]), flow.tensor([False]))
    with pytest.raises(ArgumentError, match=rf"{name}\(\): argument 'other' .* not int"):
        op(flow.tensor([4]), 6)


def test_heaviside_refuses_values_of_another_dtype():
    with pytest.raises(DTypeError, match=r"heaviside: .*Tensor\[3\]:float32, Tensor\[\]:float64"):
        flow.heaviside(flow.tensor([-1.0, 0.0, 1.0]), flow.tensor(0.5, dtype=flow.float64))
    with pytest.raises(ArgumentError, match=r"heaviside\(\): argument 'values'"):
        flow.heaviside(flow.tensor([0.0]), 0.5)


def test_nextafter_and_frexp_take_floating_point_only():
    with pytest.raises(DTypeError, match="nextafter: expected floating point operands, got int64"):
        flow.nextafter(flow.tensor([1]), flow.tensor([2]))
    with pytest.raises(DTypeError, match="frexp: expected a floating point tensor, got int64"):
        flow.frexp(flow.tensor([8]))


def test_frexp_returns_a_named_pair_that_rebuilds_the_input():
    x = flow.tensor([8.0, -3.5, 0.0, 1e-40])
    mantissa, exponent = flow.frexp(x)
    assert exponent.dtype is flow.int32
    assert flow.equal(flow.ldexp(mantissa, exponent), x)
    assert flow.equal(flow.frexp(x).mantissa, mantissa)


def test_float_power_in_place_needs_a_double_base():
    x = flow.tensor([2.0, 3.0], dtype=flow.float64)
    x.float_power_(2)
    assert x.tolist() == [4.0, 9.0]
    with pytest.raises(DTypeError, match=r"float_power_: the base has dtype float32 .* float64"):
        flow.tensor([2.0]).float_power_(2)
