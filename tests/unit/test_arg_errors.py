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

# NOTE: public functions that still read an attribute of a tensor argument before checking it,
# or take None for a tensor: record id -> what happens. Fixing one means deleting its entry
# (the test is strict: an entry that passes fails).
OPEN: dict[str, str] = {
    "div.trunc": "names the op it calls, trunc_divide()",
    "div.floor": "names the op it calls, floor_divide()",
    "logical_and": "returns given None as argument 1",
    "logical_or": "returns given None as argument 1",
    "logical_xor": "returns given None as argument 1",
    "lerp": "DTypeError for None as argument 1",
    "einsum.complex": "reads .shape of None (argument 2) before checking it",
    "bucketize": "names the op it calls, searchsorted()",
    "einsum": "reads .shape of None (argument 2) before checking it",
    "einsum.reordered": "reads .shape of None (argument 2) before checking it",
    "einsum.sublist": "reads .shape of None (argument 1) before checking it",
    "nn.functional.poisson_nll_loss": "names the op it calls, mul()",
    "nn.functional.cosine_embedding_loss": "names the op it calls, mul()",
    "nn.functional.embedding.grad_scaling": "names the op it calls, embedding_grad_scale()",
    "broadcast_tensors": "reads .shape of None (argument 1) before checking it",
    "meshgrid": "reads .ndim of None (argument 1) before checking it",
    "repeat_interleave.tensor_repeats": "TypeError for a str as argument 2",
}

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


def _params():
    for info in _RECORDS:
        marks = [pytest.mark.xfail(reason=OPEN[info.id], strict=True)] if info.id in OPEN else []
        yield pytest.param(info, id=info.id, marks=marks)


@pytest.mark.parametrize("info", list(_params()))
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
