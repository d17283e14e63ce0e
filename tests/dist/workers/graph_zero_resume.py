"""A ZeRO stage-3 graph's state dict on another world size: `save DIR` under mpiexec -n 4
trains a data-parallel graph, saves its state dict (parameters and optimizer state split
over the ranks, one file of shards per rank) and records the losses of the steps after;
`load DIR` under mpiexec -n 2, or in one process, loads it into a fresh model and graph
and takes those steps with the same losses."""

from __future__ import annotations

import os
import sys

import numpy as np
from global_checks import RANK, SIZE, S, close, data_parallel, done, global_of

import tideflow as flow
import tideflow.parallel as par

mode, root = sys.argv[1], sys.argv[2]
CHECKPOINT = os.path.join(root, "zero3")
EXPECTED = os.path.join(root, "losses.npy")
rng = np.random.default_rng(1)
DATA = [
    (rng.standard_normal((8, 6)).astype(np.float32), rng.standard_normal((8, 4)).astype(np.float32))
    for _ in range(4)
]
WHERE = par.placement("cpu", list(range(SIZE)))


def mlp():
    flow.manual_seed(0)
    model = flow.nn.Sequential(flow.nn.Linear(6, 12), flow.nn.Tanh(), flow.nn.Linear(12, 4))
    return data_parallel(model, WHERE) if SIZE > 1 else model  # one process: a local model


class TrainGraph(flow.nn.Graph):
    def __init__(self, model):
        super().__init__()
        self.model = model
        self.add_optimizer(flow.optim.Adam(model.parameters(), lr=0.01))
        self.config.enable_zero(True, stage=3, shard_min_size=1)

    def build(self, x, y):
        loss = ((self.model(x) - y) ** 2).mean()
        loss.backward()
        return loss


def batch(i):
    x, y = DATA[i]
    if SIZE == 1:
        return flow.tensor(x), flow.tensor(y)
    return global_of(x, WHERE, S.split(0)), global_of(y, WHERE, S.split(0))


model = mlp()
graph = TrainGraph(model)
if mode == "save":
    for i in range(2):
        graph(*batch(i)).numpy()
    assert model[0].weight.sbp == (S.split(0),), model[0].weight.sbp
    flow.save(graph.state_dict(), CHECKPOINT)
    losses = [graph(*batch(i)).numpy() for i in range(2, 4)]
    if RANK == 0:
        np.save(EXPECTED, np.array(losses))
else:
    graph.load_state_dict(flow.load(CHECKPOINT))
    losses = [graph(*batch(i)).numpy() for i in range(2, 4)]
    close(losses, np.load(EXPECTED), f"losses after resuming on {SIZE} of 4 ranks", atol=1e-6)
    if SIZE > 1:
        assert model[0].weight.sbp == (S.split(0),), model[0].weight.sbp
        assert model[0].weight.to_local().shape[0] == 12 // SIZE
done()
