"""Ops that exist only inside compiled programs. They are `OpDef`s like any other (passes and
lowering treat them uniformly) but are not registered: users never dispatch them."""

from __future__ import annotations

import numpy as np

from ..framework.registry import OpDef
from ..framework.sbp import B, S, Signature


def _assign_kernel(variable: np.ndarray, value: np.ndarray) -> tuple:
    np.copyto(variable, value)
    return ()


def _assign_sbp(variable, value, **_) -> list[Signature]:
    """Both operands in one layout: each rank copies its shard."""
    splits = [Signature((S(i), S(i)), ()) for i in range(len(variable.shape))]
    return [Signature((B, B), ()), *splits]


# `variable := value` at the end of a call: how an in-place write to a variable inside build
# (BatchNorm's running statistics, counters) reaches the variable's memory.
ASSIGN = OpDef(
    "assign",
    inputs=("variable", "value"),
    meta=lambda variable, value: (),
    sbp=_assign_sbp,
    kernels={"cpu": _assign_kernel},
    n_out=0,
    mutates=(0,),
)
