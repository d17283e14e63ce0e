import numpy as np
import pytest

from tideflow.testing.op_db import OP_DB


def _zero_seed(name: str) -> int:
    return sum(map(ord, name))


def cases(dtypes_of=lambda info: info.dtypes, where=lambda info: True):
    """(info, dtype) parameters for every record, with readable ids."""
    return [
        pytest.param(info, dt, id=f"{info.id}-{dt}")
        for info in OP_DB
        if where(info)
        for dt in dtypes_of(info)
    ]


def samples(info, dtype):
    rng = np.random.default_rng(_zero_seed(info.id + dtype))
    return info.samples(rng, dtype)
