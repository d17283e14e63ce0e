"""NumPy's keyword names (`axis`, `keepdims`) for `dim` and `keepdim`, as PyTorch's functions
and Tensor methods take them: every op record whose samples pass `dim` or `keepdim` by keyword
is called again with the NumPy names and must give the same result."""

from __future__ import annotations

import numpy as np
import pytest

import tideflow as flow
from tideflow.framework.errors import ArgumentError
from tideflow.testing.harness import as_numpy, flatten, flow_fn, to_flow
from tideflow.testing.op_db import OP_DB

_ALIASES = {"dim": "axis", "keepdim": "keepdims"}


def _cases():
    rng = np.random.default_rng(0)
    for info in OP_DB:
        if info.random or "float32" not in info.dtypes:
            continue
        samples = [s for s in info.samples(rng, "float32") if set(s.kwargs) & set(_ALIASES)]
        if samples:
            yield pytest.param(info, samples[:2], id=info.id)


@pytest.mark.parametrize(("info", "samples"), list(_cases()))
def test_numpy_keyword_names_give_the_same_result(info, samples):
    fn = flow_fn(info)
    for sample in samples:
        args, kwargs = to_flow(sample, requires_grad=False), sample.kwargs
        renamed = {_ALIASES.get(k, k): v for k, v in kwargs.items()}
        want, got = fn(*args, **kwargs), fn(*args, **renamed)
        for w, g in zip(flatten(want), flatten(got), strict=True):
            np.testing.assert_array_equal(as_numpy(g), as_numpy(w))


def test_tensor_methods_take_them_too():
    x = flow.tensor([[1.0, 5.0], [3.0, 2.0]])
    np.testing.assert_array_equal(x.sum(axis=0, keepdims=True).numpy(), [[4.0, 7.0]])
    np.testing.assert_array_equal(x.argmax(axis=1).numpy(), [1, 0])
    np.testing.assert_array_equal(flow.cat([x, x], axis=1).shape, (2, 4))


def test_a_name_and_its_alias_together_are_refused():
    x = flow.ones(2, 3)
    with pytest.raises(ArgumentError, match=r"sum\(\): got both 'dim' and its alias 'axis'"):
        flow.sum(x, dim=0, axis=1)
