"""Ops PyTorch programs call that tideflow added for conformance (issue 12): the errors users
can cause, named after the op with the dtypes and shapes involved. Values and gradients are
checked against PyTorch by the op database records."""

import inspect

import pytest

import tideflow as flow
from tideflow.framework.errors import (
    ArgumentError,
    DTypeError,
    ShapeError,
    TensorIndexError,
    TideflowError,
)


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


# -- statistics -------------------------------------------------------------------------------
@pytest.mark.parametrize("op", [flow.quantile, flow.nanquantile])
def test_quantile_names_its_bad_arguments(op):
    name = op.__name__
    x = flow.tensor([1.0, 2.0, 3.0])
    with pytest.raises(
        DTypeError, match=rf"{name}: expected a float32 or float64 input, got int64"
    ):
        op(flow.tensor([1, 2]), 0.5)
    with pytest.raises(TideflowError, match=rf"{name}: q must be in the range \[0, 1\], got 1.5"):
        op(x, 1.5)
    with pytest.raises(TideflowError, match=rf"{name}: q values must be in the range"):
        op(x, flow.tensor([0.5, -0.1]))
    with pytest.raises(DTypeError, match=rf"{name}: q \(float64\) must have the input's dtype"):
        op(x, flow.tensor([0.5], dtype=flow.float64))
    with pytest.raises(ShapeError, match=rf"{name}: q must be a scalar or 1-d tensor"):
        op(x, flow.tensor([[0.5]]))
    with pytest.raises(
        ShapeError, match=rf"{name}: expected a non-empty input, got shape \[0, 3\]"
    ):
        op(flow.zeros(0, 3), 0.5, dim=1)
    with pytest.raises(ValueError, match=rf"{name}: interpolation must be one of linear"):
        op(x, 0.5, interpolation="cubic")


def test_cov_checks_its_input_and_weights():
    x = flow.tensor([[1.0, 2.0, 4.0], [0.0, 1.0, 3.0]])
    with pytest.raises(ShapeError, match=r"cov: expected an input of two or fewer dimensions"):
        flow.cov(flow.zeros(2, 2, 2))
    with pytest.raises(
        DTypeError, match="cov: expected fweights of an integral dtype, got float32"
    ):
        flow.cov(x, fweights=flow.tensor([1.0, 2.0, 1.0]))
    with pytest.raises(ShapeError, match=r"cov: expected aweights to have one entry per observa"):
        flow.cov(x, aweights=flow.tensor([1.0, 2.0]))
    with pytest.raises(TideflowError, match="cov: fweights cannot be negative"):
        flow.cov(x, fweights=flow.tensor([1, -2, 1]))


def test_cov_warns_when_the_correction_leaves_no_degrees_of_freedom():
    with pytest.warns(RuntimeWarning, match="cov: degrees of freedom <= 0"):
        c = flow.cov(flow.tensor([[1.0, 2.0]]), correction=2)
    assert bool(c.isinf()) or bool(c.isnan())


def test_histogram_checks_its_input_bins_and_weight():
    x = flow.tensor([1.0, 2.0, 3.0])
    with pytest.raises(DTypeError, match="histogram: expected a float32 or float64 input"):
        flow.histogram(flow.tensor([1, 2]), 3)
    with pytest.raises(TideflowError, match="histogram: bins must be > 0, got 0"):
        flow.histogram(x, 0)
    with pytest.raises(TideflowError, match=r"histogram: min should not exceed max"):
        flow.histogram(x, 3, range=(2.0, 1.0))
    with pytest.raises(TideflowError, match=r"histogram: range of \[0.0, inf\] is not finite"):
        flow.histogram(x, 3, range=(0.0, float("inf")))
    with pytest.raises(ShapeError, match=r"histogram: weight must have the input's shape"):
        flow.histogram(x, 3, weight=flow.ones(2))


def test_histogramdd_checks_points_bins_range_and_weight():
    points = flow.zeros(4, 2)
    with pytest.raises(ShapeError, match=r"histogramdd: expected an input of \(\.\.\., D\) points"):
        flow.histogramdd(flow.zeros(4), bins=2)
    with pytest.raises(ShapeError, match="histogramdd: expected bins for each of the 2 dims"):
        flow.histogramdd(points, bins=[2, 2, 2])
    with pytest.raises(ShapeError, match="histogramdd: expected 4 range values"):
        flow.histogramdd(points, bins=2, range=[0.0, 1.0])
    with pytest.raises(ShapeError, match=r"histogramdd: weight must have one value per point"):
        flow.histogramdd(points, bins=2, weight=flow.ones(3))
    with pytest.raises(TideflowError, match=r"histogramdd: bins must be > 0, got \[2, 0\]"):
        flow.histogramdd(points, bins=[2, 0])


# -- finite differences and integrals -------------------------------------------------------
def test_diff_checks_its_order_and_the_extra_slices():
    x = flow.tensor([1.0, 2.0, 4.0])
    with pytest.raises(ShapeError, match="diff: expected an input of at least one dimension"):
        flow.diff(flow.tensor(1.0))
    with pytest.raises(TideflowError, match="diff: order n must be a non-negative int, got -1"):
        flow.diff(x, n=-1)
    with pytest.raises(ShapeError, match=r"diff: prepend must have the input's 1 dimensions"):
        flow.diff(x, prepend=flow.tensor(0.0))


def test_gradient_checks_edge_order_sizes_and_spacing():
    x = flow.tensor([[1.0, 2.0, 4.0]])
    with pytest.raises(TideflowError, match="gradient: edge_order must be 1 or 2, got 3"):
        flow.gradient(x, edge_order=3)
    with pytest.raises(ShapeError, match=r"at least edge_order \+ 1 = 2 points, got shape \[1, 3"):
        flow.gradient(x)
    with pytest.raises(TideflowError, match=r"gradient: expected spacing .* got 2 entries"):
        flow.gradient(x, dim=1, spacing=[1.0, 2.0])
    with pytest.raises(ShapeError, match=r"coordinates along dim 1 must be a 1-d tensor of its 3"):
        flow.gradient(x, dim=1, spacing=(flow.tensor([0.0, 1.0]),))


@pytest.mark.parametrize("op", [flow.trapezoid, flow.cumulative_trapezoid])
def test_trapezoid_needs_one_coordinate_per_sample(op):
    name = op.__name__
    with pytest.raises(ShapeError, match=rf"{name}: expected one x value per sample point \(3"):
        op(flow.tensor([1.0, 2.0, 4.0]), flow.tensor([0.0, 1.0]))
    with pytest.raises(TideflowError, match=rf"{name}: expected either x or dx, not both"):
        op(flow.tensor([1.0, 2.0]), flow.tensor([0.0, 1.0]), dx=2.0)
    with pytest.raises(ShapeError, match=rf"{name}: expected y of at least one dimension"):
        op(flow.tensor(1.0))


# -- tensors assembled from others ------------------------------------------------------------
def test_assembly_ops_name_the_shapes_they_refuse():
    row = flow.tensor([[1.0, 2.0]])
    with pytest.raises(ShapeError, match=r"cartesian_prod: expected tensor 1 to be a 1-d tensor"):
        flow.cartesian_prod(flow.tensor([1.0]), row)
    with pytest.raises(DTypeError, match="cartesian_prod: expected tensors of one dtype"):
        flow.cartesian_prod(flow.tensor([1]), flow.tensor([1.0]))
    with pytest.raises(ShapeError, match=r"combinations: expected input to be a 1-d tensor"):
        flow.combinations(row)
    with pytest.raises(TideflowError, match="combinations: expected r to be a non-negative int"):
        flow.combinations(flow.tensor([1, 2]), -1)
    with pytest.raises(ShapeError, match=r"block_diag: .*shape \[1, 1, 2\] for block 1"):
        flow.block_diag(row, row.unsqueeze(0))
    with pytest.raises(ShapeError, match=r"vander: expected x to be a 1-d tensor, got shape \[\]"):
        flow.vander(flow.tensor(2.0))
    with pytest.raises(TideflowError, match="vander: expected N to be a non-negative int, got -1"):
        flow.vander(flow.tensor([2.0]), N=-1)


def test_vander_differentiates_through_zeros():
    x = flow.tensor([0.0, 2.0], requires_grad=True)
    flow.vander(x, 4).sum().backward()
    # d/dx (x**3 + x**2 + x + 1) = 3 x**2 + 2 x + 1
    assert x.grad.tolist() == [1.0, 17.0]


# -- rot90, put, isin, logcumsumexp, renorm -------------------------------------------------
def test_rot90_needs_two_different_dims_of_a_matrix():
    with pytest.raises(ShapeError, match=r"rot90: expected a tensor of at least 2 dims, got shape"):
        flow.rot90(flow.arange(6))
    with pytest.raises(TensorIndexError, match=r"rot90: expected two different rotation dims"):
        flow.rot90(flow.zeros(2, 3), 1, (0, -2))
    with pytest.raises(TensorIndexError, match=r"rot90: expected two rotation dims, got \[0\]"):
        flow.rot90(flow.zeros(2, 3), 1, (0,))


def test_put_checks_index_source_and_range():
    x = flow.zeros(2, 3)
    with pytest.raises(DTypeError, match="put: expected an int64 index, got float32"):
        x.put(flow.tensor([0.0]), flow.tensor([1.0]))
    with pytest.raises(DTypeError, match=r"put: expected source of the input's dtype \(float32"):
        x.put(flow.tensor([0]), flow.tensor([1]))
    with pytest.raises(ShapeError, match="put: expected as many source elements as indices"):
        x.put(flow.tensor([0, 1]), flow.tensor([1.0]))
    with pytest.raises(TensorIndexError, match=r"put: index out of range for a tensor of 6"):
        x.put_(flow.tensor([6]), flow.tensor([1.0]))
    assert x.tolist() == [[0.0] * 3] * 2


def test_put_in_place_writes_the_flattened_positions():
    x = flow.zeros(2, 3)
    x.put_(flow.tensor([1, -1]), flow.tensor([5.0, 7.0]))
    assert x.tolist() == [[0.0, 5.0, 0.0], [0.0, 0.0, 7.0]]


def test_isin_refuses_bool_and_complex_like_pytorch():
    with pytest.raises(DTypeError, match="isin: unsupported input dtype bool"):
        flow.isin(flow.tensor([True]), flow.tensor([1]))
    with pytest.raises(TypeError, match="isin: expected elements or test_elements to be a tensor"):
        flow.isin(1, 2)


def test_logcumsumexp_and_renorm_name_what_they_refuse():
    with pytest.raises(DTypeError, match="logcumsumexp: expected a floating point input"):
        flow.logcumsumexp(flow.tensor([1, 2]), 0)
    x = flow.ones(2, 2)
    with pytest.raises(ShapeError, match=r"renorm: expected an input of at least 2 dim"):
        flow.renorm(flow.ones(3), 2, 0, 1.0)
    with pytest.raises(TideflowError, match="renorm: expected a positive norm order p, got -1"):
        flow.renorm(x, -1, 0, 1.0)
    with pytest.raises(TideflowError, match=r"renorm: expected maxnorm >= 0, got -3"):
        x.renorm(2, 0, -3)
    with pytest.raises(DTypeError, match="renorm: expected a floating point input, got int64"):
        flow.renorm(flow.ones(2, 2, dtype=flow.int64), 2, 0, 1.0)


def test_docstring_examples_run():
    from tideflow.ops import assembly, binary, calculus, indexing, reduction, statistics, unary

    from .test_nn_layers import run_doctests

    for module in (assembly, calculus, statistics):
        run_doctests(module)
    added = (binary.gcd, binary.lcm, binary.heaviside, binary.nextafter, binary.ldexp)
    added += (binary.float_power, unary.frexp, indexing.put, indexing.isin)
    added += (reduction.logcumsumexp, reduction.renorm)
    for fn in added:
        run_doctests(inspect.unwrap(fn))


# -- arguments of the wrong kind (found by the op fuzzer) -------------------------------------
def test_wrong_kinds_of_arguments_raise_naming_the_op():
    x = flow.ones(2, 2)
    with pytest.raises(ArgumentError, match=r"float_power\(\): expected a tensor"):
        flow.float_power(2.5, 1.5)
    with pytest.raises(ArgumentError, match=r"rot90\(\): argument 'k' must be int, not tuple"):
        flow.rot90(x, ())
    with pytest.raises(ArgumentError, match=r"renorm\(\): argument 'maxnorm' must be a number"):
        flow.renorm(x, 2, 0, None)
    with pytest.raises(ArgumentError, match=r"cov\(\): argument 'correction' must be a number"):
        flow.cov(x, correction=[1, 2])
    with pytest.raises(ArgumentError, match=r"gradient\(\): argument 'dim' must be int"):
        flow.gradient(x, dim=float("nan"))
    with pytest.raises(TideflowError, match=r"histogram: bin edges must increase monotonically"):
        flow.histogram(flow.tensor([1.0]), flow.tensor([0.0, 2.0, 1.0]))
    with pytest.raises(TideflowError, match=r"histogramdd: bin edges must increase"):
        flow.histogramdd(flow.ones(3, 1), bins=[flow.tensor([1.0, 0.0])])


def test_combinations_longer_than_the_input_are_none():
    assert flow.combinations(flow.arange(4), 2**31).shape == (0, 2**31)


def test_combinations_refuses_more_than_it_can_hold():
    with pytest.raises(TideflowError, match=r"combinations: .* combinations of 1048576 elements"):
        flow.combinations(flow.arange(5), 2**20, with_replacement=True)


def test_gradient_over_no_dims_is_empty():
    assert flow.gradient(flow.ones(3, 4), dim=()) == ()
