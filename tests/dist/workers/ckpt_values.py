"""The tensors the sharded-checkpoint workers save and load: each a known logical value laid
out over a placement of the 4-rank job that saves them."""

from __future__ import annotations

import ml_dtypes
import numpy as np

import tideflow as flow
import tideflow.parallel as par

ROW = [0, 1, 2, 3]
GRID = [[0, 1], [2, 3]]
S0, S1, B, P = par.sbp.split(0), par.sbp.split(1), par.sbp.broadcast, par.sbp.partial_sum

# name -> (logical shape, placement ranks, sbp per placement axis, NumPy dtype)
LAYOUTS = {
    "split0": ((5, 7), ROW, (S0,), np.float32),
    "split1": ((5, 7), ROW, (S1,), np.float32),
    "broadcast": ((3, 4), ROW, (B,), np.float64),
    "partial": ((6, 2), ROW, (P,), np.float32),
    "grid_split0_split1": ((6, 5), GRID, (S0, S1), np.float32),
    "grid_broadcast_split0": ((5, 3), GRID, (B, S0), np.int64),
    "grid_split0_split0": ((9, 2), GRID, (S0, S0), np.float32),
    "grid_partial_split1": ((4, 6), GRID, (P, S1), np.float32),
    "two_ranks": ((5,), [1, 2], (S0,), np.float32),
    "scalar": ((), ROW, (B,), np.float32),
    "bfloat16": ((4, 4), ROW, (S1,), ml_dtypes.bfloat16),
}
# what the saved shards are laid out as: partial sums become splits of dim 0
STORED = {name: tuple(S0 if s == P else s for s in sbp) for name, (_, _, sbp, _) in LAYOUTS.items()}


def value(name: str) -> np.ndarray:
    shape, _, _, dtype = LAYOUTS[name]
    k = list(LAYOUTS).index(name)
    return np.asarray(np.arange(int(np.prod(shape))).reshape(shape) * 0.5 + k, dtype)


def saved_global(name: str):
    shape, ranks, sbp, _ = LAYOUTS[name]
    data = value(name)
    where = par.placement("cpu", ranks)
    return par.create_global(lambda _: flow.tensor(data), shape, where, sbp)


def reference_model() -> flow.nn.Module:
    flow.manual_seed(0)
    return flow.nn.Sequential(flow.nn.Linear(6, 8), flow.nn.ReLU(), flow.nn.Linear(8, 4))
