"""The top-level in-place functions (`flow.exp_(x)` is `x.exp_()`, and every name exists as a
method), and the errors of the predicates and shorthands (their values are checked from the
op database)."""

import numpy as np
import pytest

import tideflow as flow
from tideflow.ops.shorthands import _IN_PLACE


@pytest.mark.parametrize("name", _IN_PLACE)
def test_in_place_function_is_the_method(name):
    assert hasattr(flow.Tensor, name)
    assert getattr(flow, name).__name__ == name


def test_in_place_functions_write_their_input_and_return_it():
    x = flow.tensor([-1.0, 4.0])
    assert flow.abs_(x) is x and x.tolist() == [1.0, 4.0]
    flow.clamp_(x, max=2.0)
    assert x.tolist() == [1.0, 2.0]
    with pytest.raises(flow.ArgumentError, match=r"exp_\(\): argument 'input'"):
        flow.exp_(None)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: flow.is_nonzero(flow.ones(2)), flow.TideflowError, "more than one value"),
        (lambda: flow.is_nonzero(flow.ones(0)), flow.TideflowError, "no values"),
        (lambda: flow.positive(flow.tensor([True])), flow.DTypeError, "bool tensor"),
        (lambda: flow.signbit(flow.tensor([1j])), flow.DTypeError, "complex"),
        (lambda: flow.isneginf(flow.tensor([1j])), flow.DTypeError, "complex"),
        (
            lambda: flow.unravel_index(flow.tensor([9]), (3, 3)),
            flow.TensorIndexError,
            "out of bounds",
        ),
        (lambda: flow.unravel_index(flow.tensor([1.0]), (3, 3)), flow.DTypeError, "integer"),
        (lambda: flow.tril_indices(2, 2, dtype=flow.float32), flow.DTypeError, "int32 or int64"),
    ],
)
def test_errors_name_the_function(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_predicates_of_tensors():
    assert flow.is_same_size(flow.ones(2, 3), flow.zeros(2, 3))
    assert not flow.is_same_size(flow.ones(2, 3), flow.zeros(3, 2))
    assert flow.is_signed(flow.ones(1, dtype=flow.int8)) and not flow.is_signed(
        flow.ones(1, dtype=flow.bool)
    )
    assert flow.tensor([0.5]).is_nonzero() and not flow.tensor([0j]).is_nonzero()
    np.testing.assert_array_equal(flow.signbit(flow.tensor([-0.0, 0.0])).numpy(), [True, False])
