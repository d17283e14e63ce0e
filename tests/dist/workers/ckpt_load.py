"""Load the checkpoint ckpt_save.py wrote (sys.argv[1]) on 1, 2 or 4 ranks: the logical values
come back whatever the world; global tensors keep the saved layout in a world of the saved
size and are split over every rank otherwise; a model laid out differently loads it with
load_state_dict."""

from __future__ import annotations

import sys

import numpy as np
from ckpt_values import LAYOUTS, STORED, reference_model, value
from global_checks import RANK, SIZE, close, done

import tideflow as flow
import tideflow.parallel as par
from tideflow.parallel._layout import shard_index

ckpt = flow.load(sys.argv[1])
assert ckpt["epoch"] == 7
assert ckpt["local"].tolist() == [0.0, 0.0] and not ckpt["local"].is_global
assert isinstance(ckpt["param"], flow.nn.Parameter) and ckpt["param"].requires_grad

for name, (shape, ranks, _, _) in LAYOUTS.items():
    t = ckpt["tensors"][name]
    expected = value(name)
    assert t.dtype == flow.from_numpy(expected).dtype, name
    if SIZE == 1:
        assert not t.is_global, name
        np.testing.assert_array_equal(t.numpy(), expected, err_msg=name)
        continue
    assert t.is_global and t.shape == flow.Size(shape), name
    np.testing.assert_array_equal(np.asarray(t.numpy(), np.float64), expected.astype(np.float64))
    if SIZE == 4:  # the world that saved it: the saved placement and (stored) layout
        assert t.placement == par.placement("cpu", ranks) and t.sbp == STORED[name], name
        coord = t.placement.coordinate(RANK)
        if coord is not None:
            mine = expected[shard_index(shape, tuple(s.value for s in STORED[name]),
                                        tuple(t.placement.hierarchy), coord)]  # fmt: skip
            np.testing.assert_array_equal(t.to_local().numpy(), mine, err_msg=name)
    else:  # another world: every rank, split along the saved split dim
        split = [s for s in STORED[name] if s.dim is not None]
        assert t.placement == par.placement.all("cpu"), name
        assert t.sbp == (split[0] if split else par.sbp.broadcast,), name

# a model laid out otherwise (or local, on one process) takes the values with load_state_dict
model, reference = reference_model(), reference_model()
for p in model.parameters():
    p.detach().zero_()
if SIZE > 1:
    ranks = par.placement("cpu", list(range(SIZE)))
    par.row_parallel(model[0], ranks)  # saved column parallel on the 2x2 grid
    par.column_parallel(model[2], ranks)
model.load_state_dict(ckpt["model"])
for (name, p), q in zip(model.named_parameters(), reference.parameters(), strict=True):
    assert p.is_global == (SIZE > 1), name
    close(p.detach().numpy(), q.detach().numpy(), name)
done()
