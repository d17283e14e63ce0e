"""User mistakes raise tideflow exceptions that name the op and the offending shapes/dtypes,
never a raw NumPy traceback."""

import numpy as np
import pytest

import tideflow as flow


@pytest.mark.parametrize(
    ("call", "kind", "message"),
    [
        (lambda: flow.ones(2, 3) + flow.ones(4), flow.ShapeError,
         r"add: shapes \[2, 3\] and \[4\] cannot be broadcast"),
        (lambda: flow.ones(2, 3) * flow.ones(3, 2), flow.ShapeError,
         r"mul: shapes \[2, 3\] and \[3, 2\]"),
        (lambda: flow.ones(2, 3) @ flow.ones(4, 5), flow.ShapeError,
         r"matmul: shapes \[2, 3\] and \[4, 5\] cannot be multiplied"),
        (lambda: flow.mm(flow.ones(2, 3), flow.ones(2, 3)), flow.ShapeError, r"mm.*\[2, 3\]"),
        (lambda: flow.cat([flow.ones(2, 3), flow.ones(2, 4)]), flow.ShapeError,
         r"cat: sizes of tensors must match.*\[2, 3\].*\[2, 4\]"),
        (lambda: flow.stack([flow.ones(2), flow.ones(3)]), flow.ShapeError, r"stack.*\[2\].*\[3\]"),
        (lambda: flow.ones(2, 3).view(4), flow.ShapeError,
         r"view: shape \[4\] is invalid for input of size 6"),
        (lambda: flow.ones(3).sum(dim=2), IndexError, r"sum: dimension 2 is out of range"),
        (lambda: flow.ones(3)[flow.tensor([0.5])], IndexError,
         r"indices must be long, int, byte or bool tensors, got tideflow.float32"),
        (lambda: flow.ones(3)[5], IndexError, r"index 5 is out of bounds.*size 3"),
        (lambda: flow.ones(2, 3).expand(3, 3), flow.ShapeError, r"expand.*size 3.*size 2"),
        (lambda: flow.zeros(3, dtype=flow.int64).add_(0.5), flow.DTypeError, r"add_.*be cast"),
    ],
)  # fmt: skip
def test_messages_name_the_op_and_operands(call, kind, message):
    with pytest.raises(kind, match=message) as info:
        call()
    assert isinstance(info.value, flow.TideflowError)


def test_backward_through_modified_saved_tensor_names_the_node():
    x = flow.tensor([1.0, 2.0], requires_grad=True)
    h = x * 2
    y = h.exp()  # saves its output
    y.add_(1)
    with pytest.raises(flow.TideflowError, match=r"ExpBackward0.*version 1"):
        (y * 1).sum().backward()


def test_backward_on_non_scalar_names_the_shape():
    with pytest.raises(flow.TideflowError, match=r"scalar outputs.*\[2, 2\]"):
        (flow.ones(2, 2, requires_grad=True) * 2).backward()


def test_kernel_failures_are_wrapped_with_the_op_and_operands():
    """A NumPy error the meta rule did not foresee still reaches the user as a TideflowError
    naming the op and its operands (here a float array given to an integer-only kernel)."""
    with pytest.raises(flow.TideflowError, match=r"bitwise_and.*float32"):
        flow.bitwise_and(flow.ones(2), flow.ones(2))


def test_division_by_zero_gives_inf_and_nan_without_warnings():
    out = flow.tensor([1.0, 0.0]) / flow.tensor([0.0, 0.0])
    assert np.isinf(out.numpy()[0]) and np.isnan(out.numpy()[1])
