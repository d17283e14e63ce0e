"""Every op the database's samples reach: meta (shape/dtype inference) agrees with the kernel,
outputs of non-view ops do not alias inputs, and every SBP signature reproduces the unsharded
result on simulated ranks."""

import numpy as np
import pytest

from tideflow.testing.harness import flow_fn, to_flow
from tideflow.testing.sbp_sim import check_meta, check_signature, metas_of, record_calls

from .conftest import cases, samples


def _calls(info, dtype):
    calls = []
    for sample in samples(info, dtype):
        with record_calls() as recorded:
            flow_fn(info)(*to_flow(sample, False), **sample.kwargs)
        calls += [(sample, c) for c in recorded]
    return calls


def _first_dtype(info):
    return [info.dtypes[0]]


@pytest.mark.parametrize(("info", "dtype"), cases(dtypes_of=_first_dtype))
def test_meta(info, dtype):
    for sample, call in _calls(info, dtype):
        problem = check_meta(call)
        assert problem is None, f"{call.op.name} in {sample}: {problem}"


@pytest.mark.parametrize(("info", "dtype"), cases(dtypes_of=_first_dtype))
def test_outputs_do_not_alias_inputs(info, dtype):
    for _sample, call in _calls(info, dtype):
        if call.op.view:
            continue
        for o in call.outs:
            for a in call.args:
                if isinstance(a, np.ndarray):
                    assert not np.shares_memory(o, a), f"{call.op.name} output aliases an input"


def _sbp_dtype(info):
    """Layouts are dtype-independent; check them where partial sums are exact enough (P
    shards of float16 values do not add back to the value within float16 tolerance)."""
    for preferred in ("float32", "float64"):
        if preferred in info.dtypes:
            return [preferred]
    return _first_dtype(info)


@pytest.mark.parametrize(
    ("info", "dtype"), cases(dtypes_of=_sbp_dtype, where=lambda i: not i.random)
)
def test_sbp_signatures(info, dtype):
    rtol, atol = info.tolerance(dtype)
    for sample, call in _calls(info, dtype):
        for sig in call.op.sbp(*metas_of(call.args), **call.attrs):
            problem = check_signature(call, sig, rtol=max(rtol, 1e-5), atol=max(atol, 1e-5))
            assert problem is None, f"{call.op.name} in {sample}: {problem}"
