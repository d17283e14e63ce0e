"""NumPy values meeting tensors. NumPy scalars and 0-d arrays are numbers, from either side of
an operator and as any operand of an op (PyTorch treats a NumPy scalar like the Python scalar
of its kind); arrays with dimensions are refused as operands. `Tensor.numpy()` on a tensor that
requires grad follows OneFlow under `flow` and PyTorch under `mock_torch`."""

from __future__ import annotations

import doctest
import operator

import numpy as np
import pytest

import tideflow as flow
import tideflow.mock_torch
from tideflow.testing.accuracy import unit_roundoff
from tideflow.testing.harness import as_numpy
from tideflow.utils import dlpack

torch = pytest.importorskip("torch")

OPERATORS = {
    "add": operator.add,
    "sub": operator.sub,
    "mul": operator.mul,
    "truediv": operator.truediv,
    "floordiv": operator.floordiv,
    "mod": operator.mod,
    "pow": operator.pow,
    "and": operator.and_,
    "or": operator.or_,
    "xor": operator.xor,
    "lt": operator.lt,
    "le": operator.le,
    "gt": operator.gt,
    "ge": operator.ge,
    "eq": operator.eq,
    "ne": operator.ne,
}
SCALARS = [
    np.float16(1.5),
    np.float32(2.5),
    np.float64(-0.5),
    np.int8(3),
    np.int32(2),
    np.int64(-3),
    np.uint8(2),
    np.bool_(True),
]
# no zeros: integer division by zero is an error in PyTorch and a warning in NumPy
VALUES = {
    "float16": [1.5, -2.0, 3.0],
    "float32": [1.5, -2.0, 3.0],
    "float64": [1.5, -2.0, 3.0],
    "int32": [1, -2, 3],
    "int64": [1, -2, 3],
    "bool": [True, True, True],
}


def _outcome(fn):
    """The result, or the exception type when the call is refused."""
    try:
        return fn()
    except Exception as e:
        return type(e)


def _check_same(ours, theirs, what: str) -> None:
    if isinstance(theirs, type) or isinstance(ours, type):
        assert isinstance(ours, type) and isinstance(theirs, type), f"{what}: {ours} vs {theirs}"
        return
    assert isinstance(ours, flow.Tensor), f"{what}: got a {type(ours).__name__}"
    assert ours.dtype.name == str(theirs.dtype).removeprefix("torch."), (
        f"{what}: dtype {ours.dtype} vs PyTorch's {theirs.dtype}"
    )
    got, want = as_numpy(ours).astype(np.float64), as_numpy(theirs).astype(np.float64)
    # one rounding of the result, twice for a half computed in float32 and rounded again
    rtol = 2 * unit_roundoff(ours.dtype.name) if ours.dtype.is_floating_point else 0.0
    assert np.allclose(got, want, rtol=rtol, atol=0.0, equal_nan=True), f"{what}: {got} vs {want}"


@pytest.mark.parametrize("number", ["scalar", "0-d array"])
@pytest.mark.parametrize("scalar_first", [True, False], ids=["numpy-first", "tensor-first"])
@pytest.mark.parametrize("name", OPERATORS)
def test_operators_treat_numpy_numbers_as_python_numbers(name, scalar_first, number):
    op = OPERATORS[name]
    for dtype, values in VALUES.items():
        ours_t = flow.tensor(values, dtype=getattr(flow, dtype))
        theirs_t = torch.tensor(values, dtype=getattr(torch, dtype))
        for scalar in SCALARS:
            if name == "pow" and dtype == "bool" and scalar.dtype == bool and not scalar_first:
                continue  # NOTE: open: bool ** bool is refused (Python's True too); PyTorch: bool
            value = np.array(scalar) if number == "0-d array" else scalar
            if scalar_first:
                ours = _outcome(lambda: op(value, ours_t))  # noqa: B023
                theirs = _outcome(lambda: op(scalar.item(), theirs_t))  # noqa: B023
            else:
                ours = _outcome(lambda: op(ours_t, value))  # noqa: B023
                theirs = _outcome(lambda: op(theirs_t, scalar.item()))  # noqa: B023
            _check_same(ours, theirs, f"{name}({value!r}, {dtype} tensor, {scalar_first=})")


@pytest.mark.parametrize(
    "name", ["add", "sub", "mul", "div", "true_divide", "floor_divide", "remainder", "pow"]
)
def test_functions_take_a_numpy_scalar_first(name):
    for scalar in SCALARS:
        for other in (-1, 2.5, flow.tensor([1.5, -2.0])):
            theirs_other = torch.tensor(other.numpy()) if isinstance(other, flow.Tensor) else other
            ours = _outcome(lambda: getattr(flow, name)(scalar, other))  # noqa: B023
            number = scalar.item()
            theirs = _outcome(lambda: getattr(torch, name)(number, theirs_other))  # noqa: B023
            if isinstance(theirs, type) and not isinstance(other, flow.Tensor):
                # PyTorch refuses two numbers here; OneFlow computes them as 0-d tensors
                theirs = _outcome(lambda: getattr(torch, name)(torch.tensor(number), other))  # noqa: B023
            _check_same(ours, theirs, f"{name}({scalar!r}, {other!r})")


# every binary op that takes a number as its second operand (several do where PyTorch does not)
BINARY_OPS = [
    "add",
    "subtract",
    "multiply",
    "divide",
    "true_divide",
    "floor_divide",
    "remainder",
    "fmod",
    "pow",
    "maximum",
    "minimum",
    "fmax",
    "fmin",
    "atan2",
    "hypot",
    "copysign",
    "xlogy",
    "logaddexp",
    "logaddexp2",
    "eq",
    "not_equal",
    "lt",
    "le",
    "gt",
    "ge",
    "logical_and",
    "logical_or",
    "logical_xor",
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "bitwise_left_shift",
    "bitwise_right_shift",
    "isclose",
    "clamp_min",
    "clamp_max",
    "special.xlog1py",
    "special.zeta",
]


@pytest.mark.parametrize("name", BINARY_OPS)
def test_every_binary_op_takes_a_numpy_scalar_as_the_python_number(name):
    fn = flow
    for part in name.split("."):
        fn = getattr(fn, part)
    for dtype, values in VALUES.items():
        t = flow.tensor(values, dtype=getattr(flow, dtype))
        for scalar in SCALARS:
            for value in (scalar, np.array(scalar)):
                ours = _outcome(lambda: fn(t, value))  # noqa: B023
                python = _outcome(lambda: fn(t, scalar.item()))  # noqa: B023
                what = f"{name}({dtype} tensor, {value!r})"
                if isinstance(python, type) or isinstance(ours, type):
                    assert ours is python, f"{what}: {ours} vs {python} with the Python number"
                else:
                    assert ours.dtype == python.dtype, f"{what}: {ours.dtype} vs {python.dtype}"
                    np.testing.assert_array_equal(ours.numpy(), python.numpy(), err_msg=what)


def test_two_numbers_make_a_0d_tensor_of_their_result_type():
    assert flow.add(np.float32(1.0), -1).dtype == flow.float32
    assert flow.add(1, 2).dtype == flow.int64 and flow.add(1, 2).item() == 3
    assert flow.div(1, 2).item() == 0.5


def test_numpy_on_the_left_keeps_autograd():
    x = flow.tensor([1.0, 2.0], requires_grad=True)
    y = np.float32(3) * x + np.float64(1) - np.array(2.0) / x
    assert isinstance(y, flow.Tensor) and y.dtype == flow.float32
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 3 + 2 / np.array([1.0, 2.0]) ** 2)


def test_arrays_with_dimensions_are_refused_as_operands():
    with pytest.raises(TypeError, match=r"must be Tensor, not numpy\.ndarray"):
        np.ones(2) * flow.ones(2)
    with pytest.raises(TypeError, match=r"must be Tensor, not numpy\.ndarray"):
        flow.add(flow.ones(2), np.ones(2))


def test_numpy_ufuncs_still_read_tensors_as_arrays():
    np.testing.assert_allclose(np.exp(flow.zeros(2)), [1.0, 1.0])
    assert np.asarray(flow.ones(2, dtype=flow.int32)).dtype == np.int32


# -- numpy() on a tensor that requires grad ------------------------------------------------------
def test_numpy_of_a_tensor_that_requires_grad_follows_oneflow_under_flow():
    x = flow.tensor([1.0, 2.0], requires_grad=True)
    np.testing.assert_array_equal(x.numpy(), [1.0, 2.0])
    np.testing.assert_array_equal((x * 2).numpy(), [2.0, 4.0])


@pytest.mark.usefixtures("local_dispatch")
def test_numpy_of_a_global_tensor_that_requires_grad():
    x = flow.ones(2, requires_grad=True).to_global(flow.placement("cpu", [0]), flow.sbp.broadcast)
    np.testing.assert_array_equal(x.numpy(), [1.0, 1.0])
    with tideflow.mock_torch.enabled(), pytest.raises(flow.AutogradError, match="detach"):
        x.numpy()


def test_numpy_of_a_tensor_that_requires_grad_follows_pytorch_under_mock_torch():
    with tideflow.mock_torch.enabled():
        import torch as mocked

        x = mocked.ones(2, requires_grad=True)
        with pytest.raises(mocked.AutogradError, match=r"use tensor\.detach"):
            x.numpy()
        np.testing.assert_array_equal(x.detach().numpy(), [1.0, 1.0])
    np.testing.assert_array_equal(x.numpy(), [1.0, 1.0])  # the session is over


# -- DLPack ------------------------------------------------------------------------------------
def test_dlpack_shares_memory_with_numpy_and_pytorch():
    t = flow.zeros(3)
    np.from_dlpack(t)[0] = 1.0
    torch.from_dlpack(t)[1] = 2.0
    assert t.tolist() == [1.0, 2.0, 0.0]
    a = np.zeros(2)
    flow.from_dlpack(a).add_(3.0)
    theirs = torch.zeros(2)
    flow.utils.dlpack.from_dlpack(theirs).fill_(4.0)
    assert a.tolist() == [3.0, 3.0] and theirs.tolist() == [4.0, 4.0]


def test_to_dlpack_capsules_round_trip_writable():
    t = flow.arange(3, dtype=flow.int32)
    back = flow.utils.dlpack.from_dlpack(flow.utils.dlpack.to_dlpack(t))
    back.mul_(2)
    assert back.dtype == flow.int32 and t.tolist() == [0, 2, 4]
    legacy = flow.from_dlpack(np.arange(2.0).__dlpack__())  # an unversioned capsule
    assert legacy.tolist() == [0.0, 1.0] and not legacy.numpy().flags.writeable


def test_dlpack_refusals_name_the_problem():
    with pytest.raises(flow.DTypeError, match=r"can't export a tideflow\.bfloat16 tensor"):
        np.from_dlpack(flow.zeros(2, dtype=flow.bfloat16))
    with pytest.raises(TypeError, match="expected an object with __dlpack__"):
        flow.from_dlpack([1.0, 2.0])
    x = flow.ones(2, requires_grad=True)
    assert np.from_dlpack(x).tolist() == [1.0, 1.0]  # OneFlow shares it
    with tideflow.mock_torch.enabled():
        import torch.utils.dlpack as mocked_dlpack

        assert mocked_dlpack is flow.utils.dlpack
        with pytest.raises(flow.AutogradError, match="requires grad"):
            mocked_dlpack.to_dlpack(x)


@pytest.mark.usefixtures("local_dispatch")
def test_a_global_tensor_exports_only_its_shard():
    g = flow.ones(2).to_global(flow.placement("cpu", [0]), flow.sbp.broadcast)
    with pytest.raises(flow.TideflowError, match="export its shard"):
        flow.utils.dlpack.to_dlpack(g)
    assert np.from_dlpack(g.to_local()).tolist() == [1.0, 1.0]


def test_dlpack_docstring_examples_run():
    result = doctest.testmod(dlpack, extraglobs={"flow": flow, "np": np}, verbose=False)
    assert result.failed == 0 and result.attempted > 0
