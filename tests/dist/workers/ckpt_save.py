"""Run on 4 ranks: save global tensors of every layout (1-D and 2x2, partial sums, a
placement of two ranks, 0-d, bfloat16), a tensor-parallel model and local values as one
sharded checkpoint at sys.argv[1]; check that each rank wrote only its own shards."""

from __future__ import annotations

import os
import sys

from ckpt_values import GRID, LAYOUTS, STORED, reference_model, saved_global
from global_checks import RANK, done, raises
from safetensors.numpy import load_file

import tideflow as flow
import tideflow.parallel as par
from tideflow.io import sharded
from tideflow.io._file import write
from tideflow.parallel._layout import shard_shape

path = sys.argv[1]
grid = par.placement("cpu", GRID)
model = reference_model()
par.column_parallel(model[0], grid)  # (broadcast, split(0)): data x tensor parallel
par.row_parallel(model[2], grid)
holder = flow.nn.Linear(2, 3).to_global(grid, [par.sbp.broadcast, par.sbp.split(0)])
state = {
    "tensors": {name: saved_global(name) for name in LAYOUTS},
    "model": model.state_dict(),
    "param": holder.weight,  # a global Parameter, as state_dict(keep_vars=True) holds
    "epoch": 7,
    "local": flow.full((2,), float(RANK)),  # each rank's differs: rank 0's is saved
}


# a rank that cannot write fails the save on every rank, and nothing appears
def full_disk(*args):
    raise OSError(28, "No space left on device")


if RANK == 1:
    sharded.write = full_disk
failed = (OSError, "No space left") if RANK == 1 else (flow.TideflowError, r"ranks \[1\] failed")
raises(*failed, lambda: flow.save(state, path))
sharded.write = write
assert os.listdir(os.path.dirname(path)) == [], "a failed save leaves nothing behind"

flow.save(state, path)

# every rank wrote a file (each holds some shard), holding only shards, never a whole tensor
mine = load_file(os.path.join(path, f"rank_{RANK:05d}.safetensors"))
for name, (shape, ranks, _, _) in LAYOUTS.items():
    stored = mine.get(f"tensors.{name}")
    if stored is not None:
        where = par.placement("cpu", ranks)
        nd = tuple(s.value for s in STORED[name])
        mine_shape = shard_shape(shape, nd, tuple(where.hierarchy), where.coordinate(RANK))
        assert stored.shape == mine_shape, f"{name}: stored {stored.shape}, shard {mine_shape}"
assert ("local" in mine) == (RANK == 0)
done()
