"""The registry is complete: every op has meta, sbp, a cpu kernel and a grad rule (or says it
is not differentiable), and the op database reaches every registered op."""

import numpy as np

from tideflow.framework.registry import all_ops
from tideflow.testing.harness import flow_fn, to_flow
from tideflow.testing.op_db import OP_DB
from tideflow.testing.sbp_sim import record_calls


def test_every_op_is_complete():
    for name, op in all_ops().items():
        assert callable(op.meta), name
        assert callable(op.sbp), name
        assert callable(op.kernels.get("cpu")), f"{name} has no cpu kernel"
        assert op.grad is not None or not op.differentiable, name


def test_op_db_reaches_every_op():
    reached = set()
    for info in OP_DB:
        rng = np.random.default_rng(0)
        for sample in info.samples(rng, info.dtypes[0]):
            with record_calls() as calls:
                try:
                    flow_fn(info)(*to_flow(sample, False), **sample.kwargs)
                except Exception as e:  # the oracle tests report failures in detail
                    raise AssertionError(f"{info.id}: {sample} failed: {e}") from e
            reached.update(c.op.name for c in calls)
    missing = sorted(set(all_ops()) - reached)
    assert not missing, f"ops without an op_db record reaching them: {missing}"
