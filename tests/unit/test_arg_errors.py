"""Argument checking, from the op database: every public op given a value of the wrong kind
where it takes a tensor (None, a string, a list of strings, a dict) raises PyTorch's TypeError
(tideflow's ArgumentError) naming the op and the argument, before any kernel runs or any
attribute of the value is read (no AttributeError from inside a wrapper, no NumPy message)."""

from __future__ import annotations

import inspect
import re

import numpy as np
import pytest

import tideflow as flow
from tideflow.testing.harness import flow_fn, to_flow
from tideflow.testing.op_db import OP_DB

WRONG = {"None": None, "str": "a", "list_of_str": ["a"], "dict": {}}

_RECORDS = [info for info in OP_DB if info.op is None]  # the op's own public function


def _default_is_none(fn, position: int) -> bool:
    """Whether the argument at `position` is optional (defaults to None), so None is valid."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False
    return position < len(params) and params[position].default is None


def _wrong_calls(info):
    """(position, label, args, kwargs) for each tensor argument of the record's first sample
    and each wrong value."""
    sample = info.samples(np.random.default_rng(0), info.dtypes[0])[0]
    args = to_flow(sample, requires_grad=False)
    fn = flow_fn(info)
    for i, a in enumerate(sample.args):
        if not isinstance(a, np.ndarray):
            continue
        for label, value in WRONG.items():
            if value is None and _default_is_none(fn, i):
                continue
            yield i, label, (*args[:i], value, *args[i + 1 :]), sample.kwargs


@pytest.mark.parametrize("info", [pytest.param(info, id=info.id) for info in _RECORDS])
def test_wrong_kind_for_a_tensor_names_op_and_argument(info):
    fn = flow_fn(info)
    # NOTE: PyTorch names linalg.inv "linalg_inv"; an alias may name the function it is
    names = {
        info.name.rsplit(".", 1)[-1],
        info.name.replace(".", "_"),
        getattr(inspect.unwrap(fn), "__name__", ""),
    }
    named = re.compile(
        rf"\b({'|'.join(map(re.escape, names))})\(\): "
        r"(argument '\w+'|expected Tensor as element \d+ in argument)"
    )
    for i, label, args, kwargs in _wrong_calls(info):
        with pytest.raises(TypeError) as caught:
            fn(*args, **kwargs)
        assert isinstance(caught.value, flow.ArgumentError), (i, label, caught.value)
        assert named.search(str(caught.value)), (i, label, str(caught.value))


def test_positions_and_types_in_the_message():
    x = flow.ones(2, 3)
    with pytest.raises(flow.ArgumentError, match=r"^mul\(\): argument 'other' \(position 2\) "):
        flow.mul(x, "a")
    with pytest.raises(flow.ArgumentError, match=r"must be Tensor, not dict$"):
        flow.mul(x, {})
    with pytest.raises(flow.ArgumentError, match=r"^softmax\(\): argument 'input' .* NoneType"):
        flow.nn.functional.softmax(None, dim=0)
    with pytest.raises(flow.ArgumentError, match=r"^eq\(\): argument 'other' .* NoneType"):
        flow.eq(x, None)  # NumPy would compare with None


def test_optional_tensor_arguments_take_none():
    x = flow.ones(2, 3)
    w = flow.ones(4, 3)
    assert flow.nn.functional.linear(x, w, None).shape == (2, 4)
    assert flow.clamp(x, None, 0.5).shape == (2, 3)  # clamp's bounds are optional operands
    with pytest.raises(flow.ArgumentError, match=r"^linear\(\): argument 'bias' .* str"):
        flow.nn.functional.linear(x, w, "b")


def test_numbers_and_zero_d_arrays_stay_operands():
    x = flow.ones(3)
    for number in (2, 2.0, True, np.float32(2), np.array(2.0)):
        assert flow.mul(x, number).shape == (3,)
    with pytest.raises(flow.ArgumentError, match=r"must be Tensor, not numpy.ndarray"):
        flow.mul(x, np.ones(3))


@pytest.mark.parametrize(
    ("a", "b"), [((2, 3), (3, 2)), ((4, 2, 3), (2, 2)), ((5, 1, 3), (2, 4)), ((2, 3), (3, 2, 4))]
)
def test_broadcast_error_says_pytorch_sentence(a, b):
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError) as expected:
        torch.ones(a) * torch.ones(b)
    with pytest.raises(
        flow.ShapeError, match=r"^mul: shapes .* cannot be broadcast together: "
    ) as got:
        flow.ones(a) * flow.ones(b)
    assert str(got.value).endswith(str(expected.value))


def test_operands_that_may_be_numbers():
    x = flow.ones(3)
    assert flow.logical_and(x, 2).shape == (3,)
    assert flow.div(7, x, rounding_mode="floor").shape == (3,)
    assert flow.bucketize(2.0, flow.tensor([1.0, 3.0])).item() == 1
    with pytest.raises(
        flow.ArgumentError,
        match=r"^div\(\): argument 'other' \(position 2\) must be Tensor or Number, not NoneType$",
    ):
        flow.div(x, None, rounding_mode="trunc")


def test_sequence_of_tensors_names_the_element():
    x = flow.ones(3)
    assert len(flow.meshgrid([x, x])) == 2  # one list in place of the tensors
    with pytest.raises(
        flow.ArgumentError,
        match=r"^meshgrid\(\): expected Tensor as element 1 in argument 0 \('tensors'\), but got "
        r"NoneType$",
    ):
        flow.meshgrid([x, None])
    with pytest.raises(
        flow.ArgumentError,
        match=r"^broadcast_tensors\(\): expected Tensor as element 0 in argument 0 \('tensors'\), "
        r"but got list$",
    ):
        flow.broadcast_tensors([x, x])  # PyTorch takes these tensors one by one only
