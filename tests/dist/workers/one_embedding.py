"""Run on every rank under mpiexec (2 or 4 ranks): a MultiTableEmbedding sharded over the
ranks by key hash, with a data-parallel dense head, against one process training on the
whole batch. Each rank trains on its slice of the global batch with the mean loss of its
slice (DDP averages the head's gradients, the embedding averages the rows'), so losses,
rows and head must follow the single-process run; only distinct keys travel."""

from __future__ import annotations

import tempfile
from unittest import mock

import numpy as np
from global_checks import RANK, SIZE, close, done, raises

import tideflow as flow
from tideflow.distributed.world import get_world
from tideflow.nn.parallel import DistributedDataParallel as DDP
from tideflow.one_embedding import _embedding
from tideflow.one_embedding._hashing import owner_of
from tideflow.one_embedding._table import unique_pairs
from tideflow.testing.accuracy import unit_roundoff

oe = flow.one_embedding
BATCH, TABLES, DIM, STEPS = 48, 3, 4, 6  # the batch divides evenly over 2, 3 and 4 ranks
rng = np.random.default_rng(0)
# Zipf-distributed keys: many repeats within a batch, across ranks and across tables
KEYS = (rng.zipf(1.3, (STEPS, BATCH, TABLES)) % 5000) * 1_000_003 - 7
TARGETS = rng.standard_normal((STEPS, BATCH, 1)).astype(np.float32)


def mine(batch: np.ndarray) -> np.ndarray:
    share = len(batch) // SIZE
    return batch[RANK * share : (RANK + 1) * share]


class _One:
    rank, size = 0, 1


def embedding(path=None, capacity=100_000, key_type=flow.int64, alone=False):
    tables = [oe.make_table_options(oe.make_normal_initializer(0.0, 0.1)) for _ in range(TABLES)]
    store = oe.make_cached_host_mem_store_options(8, path, capacity)

    def make():
        return oe.MultiTableEmbedding("ctr", DIM, flow.float32, key_type, tables, store)

    if not alone:
        return make()
    with mock.patch.object(_embedding, "world_of", _One):  # the reference: one process
        return make()


def head(seed: int = 0):
    flow.manual_seed(seed)
    return flow.nn.Linear(TABLES * DIM, 1)


def loss_of(emb, lin, keys, targets):
    rows = emb(flow.tensor(keys))
    return ((lin(rows.reshape(len(keys), TABLES * DIM)) - flow.tensor(targets)) ** 2).mean()


def all_rows(emb, keys):
    emb.eval()
    try:
        return emb(flow.tensor(keys.reshape(-1, TABLES))).numpy()
    finally:
        emb.train()


def mean_over_ranks(value: float) -> float:
    out = np.zeros(1)
    get_world().comm.allreduce(np.array([value]), out, flow.distributed.ReduceOp.SUM)
    return float(out[0]) / SIZE


def check_training(optimizer) -> None:
    emb, lin = embedding(), DDP(head())
    ref, ref_lin = embedding(alone=True), head()
    opt = oe.Optimizer(optimizer([*lin.parameters(), emb.shadow]), [emb])
    ref_opt = oe.Optimizer(optimizer([*ref_lin.parameters(), ref.shadow]), [ref])
    for step in range(STEPS):
        opt.zero_grad()
        ref_opt.zero_grad()
        loss = loss_of(emb, lin, mine(KEYS[step]), mine(TARGETS[step]))
        ref_loss = loss_of(ref, ref_lin, KEYS[step], TARGETS[step])
        # only the batch's distinct keys travel, each once
        u = unique_pairs(np.tile(np.arange(TABLES, dtype=np.int32), BATCH // SIZE),
                         mine(KEYS[step]).reshape(-1))[1]  # fmt: skip
        assert emb._table.sent["lookup"] == u.size < BATCH // SIZE * TABLES
        loss.backward()
        ref_loss.backward()
        opt.step()
        ref_opt.step()
        assert emb._table.sent["update"] == u.size
        # NOTE: the rows' gradients are summed in another order (per rank, then over the
        # ranks): a few float32 roundings per step on values of order 1
        tol = (step + 1) * 32 * unit_roundoff("float32")
        close(mean_over_ranks(loss.item()), ref_loss.item(), f"loss at step {step}", atol=tol)
        seen = KEYS[: step + 1]
        close(all_rows(emb, seen), all_rows(ref, seen), f"rows after step {step}", atol=tol)
        close(lin.module.weight.numpy(), ref_lin.weight.numpy(), f"head at {step}", atol=tol)
    # each rank holds the keys it owns, and together the ranks hold every key once
    tables, keys, _ = next(emb._local.store.export())
    assert (owner_of(tables, keys, SIZE) == RANK).all()
    total = np.zeros(1, np.int64)
    get_world().comm.allreduce(np.array([len(emb._local.store)]), total,
                               flow.distributed.ReduceOp.SUM)  # fmt: skip
    assert total[0] == len(ref._local.store)


def check_graph() -> None:
    """The sharded lookup and update as nodes of each rank's compiled plan (the dense part
    here has no parameters: only the rows train)."""

    def loss_of_rows(emb, keys, targets):
        return ((emb(keys).sum(dim=2) - targets) ** 2).mean()

    emb, ref = embedding(), embedding(alone=True)
    opt = oe.Optimizer(flow.optim.Adagrad([emb.shadow], lr=0.1), [emb])
    ref_opt = oe.Optimizer(flow.optim.Adagrad([ref.shadow], lr=0.1), [ref])

    class Train(flow.nn.Graph):
        def __init__(self):
            super().__init__()
            self.emb = emb
            self.add_optimizer(opt)

        def build(self, keys, targets):
            loss = loss_of_rows(self.emb, keys, targets)
            loss.backward()
            return loss

    train = Train()
    for step in range(STEPS):
        loss = train(flow.tensor(mine(KEYS[step])), flow.tensor(mine(TARGETS[step])))
        ref_opt.zero_grad()
        ref_loss = loss_of_rows(ref, flow.tensor(KEYS[step]), flow.tensor(TARGETS[step]))
        ref_loss.backward()
        ref_opt.step()
        tol = (step + 1) * 32 * unit_roundoff("float32")
        close(mean_over_ranks(loss.item()), ref_loss.item(), f"graph loss {step}", atol=tol)
    close(all_rows(emb, KEYS), all_rows(ref, KEYS), "rows trained in a graph", atol=tol)


def check_errors_are_raised_on_every_rank() -> None:
    emb = embedding(key_type=flow.int32)
    keys = np.ones((2, TABLES), np.int64)
    if RANK == 0:
        keys[0, 0] = 2**40
    pattern = "id 1099511627776 is outside" if RANK == 0 else r"rank\(s\) \[0\] refused"
    raises(flow.TideflowError, pattern, lambda: emb(flow.tensor(keys)))
    assert len(emb._local.store) == 0
    # every rank's share of the capacity is 2 keys: the batch fills some rank past it
    full = embedding(capacity=2 * SIZE)
    fresh = np.arange(3 * SIZE * TABLES).reshape(-1, TABLES) + 100 * RANK
    raises(flow.TideflowError, r"capacity reached|refused this batch",
           lambda: full(flow.tensor(fresh)))  # fmt: skip
    assert len(full._local.store) == 0


def check_snapshots() -> None:
    """Each rank saves and loads its own share."""
    box = [tempfile.mkdtemp() if RANK == 0 else None]
    flow.distributed.broadcast_object_list(box, src=0)
    emb = embedding(path=box[0])
    emb(flow.tensor(mine(KEYS[0])))
    held = len(emb._local.store)
    before = all_rows(emb, KEYS[0])
    emb.save_snapshot("s")
    emb(flow.tensor(mine(KEYS[1])))  # keys the snapshot does not have
    again = embedding(path=box[0])
    again.load_snapshot("s")
    assert len(again._local.store) == held
    np.testing.assert_array_equal(all_rows(again, KEYS[0]), before)
    # one process reads every rank's share
    alone = embedding(path=box[0], alone=True)
    alone.load_snapshot("s")
    np.testing.assert_array_equal(all_rows(alone, KEYS[0]), before)


check_training(lambda p: flow.optim.SGD(p, lr=0.1, momentum=0.9))
check_training(lambda p: flow.optim.Adam(p, lr=0.01))
check_graph()
check_errors_are_raised_on_every_rank()
check_snapshots()
done()
