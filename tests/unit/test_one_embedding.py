"""flow.one_embedding in one process: initializers, lookups, sparse training against dense
nn.Embedding references (and PyTorch's sparse embeddings), the disk store against the host
store, nn.Graph against eager, and the errors users can cause."""

import numpy as np
import pytest
from scipy import stats

import tideflow as flow
from tideflow.one_embedding import _embedding, _ftrl, _init, _optimizer, _options, _snapshot
from tideflow.testing.accuracy import unit_roundoff

from .test_nn_layers import run_doctests

oe = flow.one_embedding
DIM = 4


def _host(capacity=10_000, path=None):
    return oe.make_cached_host_mem_store_options(8, path, capacity)


def _embedding_of(store, tables=2, init=None, dim=DIM, name="e", **kw):
    init = init if init is not None else oe.make_uniform_initializer(-0.1, 0.1)
    options = [oe.make_table_options(init) for _ in range(tables)]
    return oe.MultiTableEmbedding(name, dim, flow.float32, flow.int64, options, store, **kw)


# -- initializers -------------------------------------------------------------------------------
def test_a_key_starts_from_the_same_row_whatever_else_is_looked_up():
    emb = _embedding_of(_host())
    alone = emb(flow.tensor([[7, 7]])).numpy()
    emb2 = _embedding_of(_host())
    crowd = emb2(flow.tensor([[1, 2], [3, 4], [7, 7]])).numpy()
    np.testing.assert_array_equal(alone[0], crowd[2])
    assert not np.array_equal(alone[0, 0], alone[0, 1])  # table 0's key 7 is not table 1's
    other_seed = _embedding_of(_host(), seed=1)(flow.tensor([[7, 7]])).numpy()
    assert not np.array_equal(alone, other_seed)


@pytest.mark.parametrize(
    "init, check",
    [
        (oe.make_constant_initializer(0.25), lambda x: np.all(x == np.float32(0.25))),
        (oe.make_uniform_initializer(-0.5, 0.25), lambda x: x.min() >= -0.5 and x.max() < 0.25),
        (oe.make_trunc_normal_initializer(0.0, 1.0, -0.5, 1.5),
         lambda x: x.min() >= -0.5 and x.max() <= 1.5),
    ],
)  # fmt: skip
def test_initializer_ranges(init, check):
    rows = _embedding_of(_host(), tables=1, init=init, dim=64)(flow.tensor(np.arange(500)))
    assert check(rows.numpy())


@pytest.mark.parametrize(
    "init, mean, std",
    [
        (oe.make_normal_initializer(0.5, 2.0), 0.5, 2.0),
        (oe.make_uniform_initializer(-1.0, 3.0), 1.0, 4.0 / np.sqrt(12.0)),
        (
            oe.make_trunc_normal_initializer(0.5, 2.0, -1.5, 4.5),
            stats.truncnorm.mean(-1, 2, 0.5, 2.0),
            stats.truncnorm.std(-1, 2, 0.5, 2.0),
        ),
    ],
)
def test_initializer_moments(init, mean, std):
    n = 40_000
    values = _init.sample(_init.check_initializer("t", init), 0, np.zeros(n, np.int32),
                          np.arange(n), 0, 4).ravel()  # fmt: skip
    # NOTE: 6 standard errors of the sample mean and standard deviation
    assert abs(values.mean() - mean) < 6 * std / np.sqrt(values.size)
    assert abs(values.std() - std) < 6 * std / np.sqrt(2 * values.size)


# -- lookups ------------------------------------------------------------------------------------
def test_lookup_shapes_and_table_ids():
    emb = _embedding_of(_host(), tables=3)
    batch = emb(flow.tensor([[1, 2, 3], [4, 5, 6]]))
    assert batch.shape == (2, 3, DIM)
    flat = emb(flow.tensor([2, 6, 1]), flow.tensor([1, 2, 0]))
    np.testing.assert_array_equal(flat.numpy(), batch.numpy()[[0, 1, 0], [1, 2, 0]])


def test_multi_column_embedding_initializes_each_column():
    columns = [oe.make_column_options(oe.make_constant_initializer(1.0)),
               oe.make_column_options(oe.make_constant_initializer(-2.0))]  # fmt: skip
    emb = oe.MultiTableMultiColumnEmbedding(
        "mc", [3, 2], flow.float32, flow.int64, [oe.make_table_options(columns)], _host()
    )
    np.testing.assert_array_equal(emb(flow.tensor([9])).numpy(), [[1, 1, 1, -2, -2]])


def test_eval_mode_computes_new_keys_without_storing_them():
    emb = _embedding_of(_host())
    emb.eval()
    first = emb(flow.tensor([[5, 6]])).numpy()
    assert len(emb._local.store) == 0
    emb.train()
    np.testing.assert_array_equal(emb(flow.tensor([[5, 6]])).numpy(), first)
    assert len(emb._local.store) == 2


def test_padding_idx_rows_are_zero_and_never_trained():
    emb = _embedding_of(_host(), padding_idx=0)
    opt = oe.Optimizer(flow.optim.SGD([emb.shadow], lr=1.0), [emb])
    out = emb(flow.tensor([[0, 3], [0, 0]]))
    np.testing.assert_array_equal(out.numpy()[:, 0], 0)
    out.sum().backward()
    opt.step()
    np.testing.assert_array_equal(emb(flow.tensor([[0, 0]])).numpy(), 0)
    assert len(emb._local.store) == 1  # key 3 of table 1 only


# -- training against dense references -----------------------------------------------------------
# every row in every batch (with repeats): dense optimizers move rows without gradient too
# (momentum, Adam's moments), sparse ones by design do not
KEYS = np.array([10**12 + 3, -5, 77, 2**40, 0, 123456789])
OPTIMIZERS = {
    "sgd": lambda p: flow.optim.SGD(p, lr=0.1),
    "sgd_momentum": lambda p: flow.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True),
    "sgd_weight_decay": lambda p: flow.optim.SGD(p, lr=0.1, momentum=0.5, weight_decay=0.01),
    "adam": lambda p: flow.optim.Adam(p, lr=0.01, weight_decay=0.1),
    "adamw": lambda p: flow.optim.AdamW(p, lr=0.01),
    "adagrad": lambda p: flow.optim.Adagrad(p, lr=0.1, lr_decay=0.01,
                                            initial_accumulator_value=0.1),
    "ftrl": lambda p: oe.Ftrl(p, lr=0.1, lambda1=0.01, lambda2=0.1, beta=0.5),
}  # fmt: skip


def _batches(steps: int, rng, cover: bool = True):
    out = []
    for _ in range(steps):
        extra = rng.integers(0, KEYS.size, (8, 2))
        rows = np.concatenate([np.stack([np.arange(KEYS.size)] * 2, 1), extra]) if cover else extra
        out.append(rows[rng.permutation(rows.shape[0])])
    return out


@pytest.mark.parametrize("kind", sorted(OPTIMIZERS))
def test_sparse_training_equals_dense_embedding(kind):
    """Constant-initialized MultiTableEmbedding + one_embedding.Optimizer(opt) == two dense
    nn.Embedding tables of the same rows + opt, bit for bit, with a dense head trained by the
    same optimizer."""
    rng = np.random.default_rng(0)
    batches = _batches(4, rng)
    flow.manual_seed(0)
    head = flow.nn.Linear(2 * DIM, 1)
    emb = _embedding_of(_host(), init=oe.make_constant_initializer(0.3))
    sparse = oe.Optimizer(OPTIMIZERS[kind]([*head.parameters(), emb.shadow]), [emb])

    flow.manual_seed(0)
    head_ref = flow.nn.Linear(2 * DIM, 1)
    tables = [flow.nn.Embedding(KEYS.size, DIM) for _ in range(2)]
    for t in tables:
        flow.nn.init.constant_(t.weight, 0.3)
    dense = OPTIMIZERS[kind]([*head_ref.parameters(), *(t.weight for t in tables)])

    for rows in batches:
        sparse.zero_grad()
        dense.zero_grad()
        out = emb(flow.tensor(KEYS[rows]))
        ref = flow.stack([tables[j](flow.tensor(rows[:, j])) for j in range(2)], dim=1)
        loss = head(out.reshape(-1, 2 * DIM)).tanh().sum()
        loss_ref = head_ref(ref.reshape(-1, 2 * DIM)).tanh().sum()
        assert loss.item() == loss_ref.item()
        loss.backward()
        loss_ref.backward()
        sparse.step()
        dense.step()
        got = emb(flow.tensor(np.stack([KEYS, KEYS], 1))).numpy()
        for j in range(2):
            np.testing.assert_array_equal(got[:, j], tables[j].weight.numpy(), err_msg=kind)
        np.testing.assert_array_equal(head.weight.numpy(), head_ref.weight.numpy())


# NOTE: PyTorch's sparse Adagrad warns that it skips its sparse-tensor invariant checks
@pytest.mark.filterwarnings("ignore:Sparse invariant checks:UserWarning")
@pytest.mark.parametrize("kind", ["sgd", "adagrad", "adam"])
def test_sparse_training_matches_pytorch_sparse_embeddings(kind):
    """Rows missing from some batches stay put, as with PyTorch's sparse gradients
    (nn.Embedding(sparse=True) with SGD / Adagrad / SparseAdam)."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    batches = _batches(5, rng, cover=False)
    emb = _embedding_of(_host(), tables=1, init=oe.make_constant_initializer(0.3))
    ours = {
        "sgd": lambda p: flow.optim.SGD(p, lr=0.1),
        "adagrad": lambda p: flow.optim.Adagrad(p, lr=0.1),
        "adam": lambda p: flow.optim.Adam(p, lr=0.05),
    }[kind]([emb.shadow])
    opt = oe.Optimizer(ours, [emb])
    table = torch.nn.Embedding(KEYS.size, DIM, sparse=True)
    torch.nn.init.constant_(table.weight, 0.3)
    theirs = {
        "sgd": lambda p: torch.optim.SGD(p, lr=0.1),
        "adagrad": lambda p: torch.optim.Adagrad(p, lr=0.1),
        "adam": lambda p: torch.optim.SparseAdam(p, lr=0.05),
    }[kind]([table.weight])
    target = rng.standard_normal(DIM).astype(np.float32)
    for rows in batches:
        opt.zero_grad()
        theirs.zero_grad()
        ((emb(flow.tensor(KEYS[rows[:, 0]])) - flow.tensor(target)) ** 2).sum().backward()
        ((table(torch.tensor(rows[:, 0])) - torch.tensor(target)) ** 2).sum().backward()
        opt.step()
        theirs.step()
    got = emb(flow.tensor(KEYS)).numpy()
    # NOTE: the same float32 rules in another operation order (SparseAdam adds eps before
    # the bias correction): a few float32 roundings per step, on values of order 1
    np.testing.assert_allclose(got, table.weight.detach().numpy(), rtol=0,
                               atol=len(batches) * 16 * unit_roundoff("float32"))  # fmt: skip


def test_ftrl_follows_oneflows_rule():
    w0 = np.array([0.5, -1.0, 0.02, 2.0])
    g = np.array([0.3, -0.2, 0.01, -1.5])
    hyper = dict(lr=0.1, weight_decay=0.01, lr_power=-0.5, lambda1=0.05, lambda2=0.1, beta=0.5)
    w = flow.nn.Parameter(flow.tensor(w0))
    opt = oe.Ftrl([w], initial_accumulator_value=0.1, **hyper)
    w.grad = flow.tensor(g)
    opt.step()
    # OneFlow's FtrlUpdateFunctor, written out for one step from n = 0.1, z = 0
    gg = g + 0.01 * w0
    n, n1 = 0.1, 0.1 + gg * gg
    z = gg - (n1**-0.5 - n**-0.5) / 0.1 * w0
    expect = np.where(np.abs(z) < 0.05, 0.0,
                      (np.sign(z) * 0.05 - z) / ((0.5 + n1**-0.5) / 0.1 + 0.1))  # fmt: skip
    np.testing.assert_allclose(w.numpy(), expect, rtol=1e-12)
    np.testing.assert_allclose(opt.state[w]["accumulate"].numpy(), n1, rtol=1e-15)


def test_gradient_accumulation_is_one_update_of_the_summed_gradients():
    rng = np.random.default_rng(2)
    a, b = rng.integers(0, KEYS.size, (6, 2)), rng.integers(0, KEYS.size, (5, 2))
    results = []
    for split in (True, False):
        emb = _embedding_of(_host())
        opt = oe.Optimizer(flow.optim.Adam([emb.shadow], lr=0.1), [emb])
        parts = [a, b] if split else [np.concatenate([a, b])]
        for rows in parts:
            emb(flow.tensor(KEYS[rows])).square().sum().backward()
        opt.step()
        results.append(emb(flow.tensor(np.stack([KEYS, KEYS], 1))).numpy())
    np.testing.assert_allclose(*results, rtol=0, atol=4 * unit_roundoff("float32"))


def test_optimizer_state_dict_round_trip_and_lr_scheduler():
    emb = _embedding_of(_host())
    opt = oe.Optimizer(flow.optim.Adam([emb.shadow], lr=0.1), [emb])
    sched = flow.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    emb(flow.tensor([[1, 2]])).sum().backward()
    opt.step()
    sched.step()
    assert opt.param_groups[0]["lr"] == 0.05
    state = opt.state_dict()
    assert state["embedding_steps"] == [1]
    other = oe.Optimizer(flow.optim.Adam([emb.shadow], lr=0.1), [emb])
    other.load_state_dict(state)
    assert other._steps == [1] and other.param_groups[0]["lr"] == 0.05


# -- stores -------------------------------------------------------------------------------------
def _train(emb, opt, batches):
    for rows in batches:
        opt.zero_grad()
        emb(flow.tensor(rows)).square().sum().backward()
        opt.step()


def test_disk_store_with_a_small_cache_equals_the_host_store(tmp_path):
    rng = np.random.default_rng(3)
    batches = [rng.integers(0, 3000, (64, 2)) for _ in range(20)]
    host = _embedding_of(_host(5000), name="host")
    # about 500 cached rows (of 3 x 4 float32 values with Adagrad's state) for 3000+ keys
    disk = _embedding_of(oe.make_cached_ssd_store_options(0.015, str(tmp_path), 5000),
                         name="disk")  # fmt: skip
    for emb in (host, disk):
        _train(emb, oe.Optimizer(flow.optim.Adagrad([emb.shadow], lr=0.1), [emb]), batches)
    assert disk._local.store.cache_rows < len(disk._local.store) // 4
    assert len(disk._local.store) == len(host._local.store)
    every = flow.tensor(np.arange(3000).reshape(-1, 2))
    np.testing.assert_array_equal(disk(every).numpy(), host(every).numpy())


def test_host_store_grows_past_its_initial_size():
    emb = _embedding_of(_host(capacity=None), tables=1)
    keys = np.arange(5000) * 7919
    first = emb(flow.tensor(keys[:10])).numpy()
    emb(flow.tensor(keys))
    assert len(emb._local.store) == 5000
    np.testing.assert_array_equal(emb(flow.tensor(keys[:10])).numpy(), first)


# -- snapshots ------------------------------------------------------------------------------------
def test_snapshot_round_trip_is_bit_exact_with_optimizer_state(tmp_path):
    rng = np.random.default_rng(4)
    batches = [rng.integers(0, 300, (32, 2)) for _ in range(6)]
    emb = _embedding_of(_host(path=str(tmp_path)))
    opt = oe.Optimizer(flow.optim.Adam([emb.shadow], lr=0.1), [emb])
    _train(emb, opt, batches[:3])
    emb.save_snapshot("mid")
    _train(emb, opt, batches[3:])
    expect = emb(flow.tensor(np.arange(300).reshape(-1, 2))).numpy()

    again = _embedding_of(_host(path=str(tmp_path)))
    opt2 = oe.Optimizer(flow.optim.Adam([again.shadow], lr=0.1), [again])
    again.load_snapshot("mid")
    opt2.load_state_dict(opt.state_dict() | {"embedding_steps": [3]})
    _train(again, opt2, batches[3:])
    np.testing.assert_array_equal(again(flow.tensor(np.arange(300).reshape(-1, 2))).numpy(),
                                  expect)  # fmt: skip


def test_snapshot_of_another_dim_or_dtype_is_refused_and_nothing_changes(tmp_path):
    path = str(tmp_path)
    small = _embedding_of(_host(path=path), dim=3)
    small(flow.tensor([[1, 2]]))
    small.save_snapshot("s")
    emb = _embedding_of(_host(path=path))
    emb(flow.tensor([[5, 6]]))
    with pytest.raises(flow.TideflowError, match=r"'e'.*embedding_dim 3.*is 4"):
        emb.load_snapshot("s")
    assert len(emb._local.store) == 2
    wide = oe.MultiTableEmbedding("w", DIM, flow.float64, flow.int64, None, _host(path=path))
    with pytest.raises(flow.TideflowError, match=r"float32 rows.*float64"):
        wide.load_snapshot("s")
    with pytest.raises(flow.TideflowError, match="no snapshot 'nope'"):
        emb.load_snapshot("nope")
    with pytest.raises(flow.TideflowError, match="need a persistent_path"):
        _embedding_of(_host()).save_snapshot("s")


def test_a_failed_save_leaves_the_previous_snapshot(tmp_path, monkeypatch):
    emb = _embedding_of(_host(path=str(tmp_path)))
    first = emb(flow.tensor([[1, 2]])).numpy()
    emb.save_snapshot("s")
    emb(flow.tensor([[3, 4]]))

    def disk_full(*_):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(_snapshot._ChunkWriter, "add", disk_full)
    with pytest.raises(OSError):
        emb.save_snapshot("s")
    monkeypatch.undo()
    emb.load_snapshot("s")
    assert len(emb._local.store) == 2
    np.testing.assert_array_equal(emb(flow.tensor([[1, 2]])).numpy(), first)
    leftovers = [p.name for p in (tmp_path / "0-1" / "snapshots").iterdir()]
    assert len(leftovers) == 2  # the manifest and its data directory


def test_persistent_table_writer_and_reader(tmp_path):
    paths = [str(tmp_path / "0-1")]  # the directory of rank 0 of 1 under tmp_path
    keys = np.array([4, 8, 15, 16, 23, 42])
    values = np.arange(keys.size * DIM, dtype=np.float32).reshape(-1, DIM)
    with oe.make_persistent_table_writer(paths, "w", flow.int64, flow.float32, DIM) as writer:
        writer.write(keys, values)
    got = list(oe.make_persistent_table_reader(paths, "w", flow.int64, flow.float32, DIM))
    k, v = (np.concatenate(x) for x in zip(*got, strict=True))
    order = np.argsort(k)
    np.testing.assert_array_equal(k[order], keys)
    np.testing.assert_array_equal(v[order], values)
    emb = oe.MultiTableEmbedding("w", DIM, flow.float32, flow.int64, None,
                                 _host(path=str(tmp_path)))  # fmt: skip
    emb.load_snapshot("w")
    np.testing.assert_array_equal(emb(flow.tensor(keys)).numpy(), values)
    with pytest.raises(flow.TideflowError, match="storage_dim 5"):
        oe.make_persistent_table_reader(paths, "w", flow.int64, flow.float32, 5)


# -- errors ---------------------------------------------------------------------------------------
def test_ids_outside_the_key_type_are_refused():
    emb = oe.MultiTableEmbedding("small_keys", DIM, flow.float32, flow.int32, None, _host())
    with pytest.raises(flow.TideflowError, match=r"'small_keys'.*id 1099511627776.*int32"):
        emb(flow.tensor([3, 2**40]))
    with pytest.raises(flow.DTypeError, match=r"'small_keys'.*int32 or int64"):
        emb(flow.tensor([1.0]))
    with pytest.raises(flow.TideflowError, match="table id 2 is outside"):
        _embedding_of(_host())(flow.tensor([1]), flow.tensor([2]))
    with pytest.raises(flow.ShapeError, match=r"ids of shape \[4\] need table_ids"):
        _embedding_of(_host())(flow.tensor([1, 2, 3, 4]))


def test_a_full_store_refuses_the_whole_batch():
    emb = _embedding_of(_host(capacity=5), tables=1, name="tiny")
    emb(flow.tensor([1, 2, 3]))
    with pytest.raises(flow.TideflowError, match=r"'tiny'.*capacity reached.*6 keys.*5"):
        emb(flow.tensor([3, 4, 5, 6]))
    assert len(emb._local.store) == 3
    emb(flow.tensor([4, 5]))
    assert len(emb._local.store) == 5


def test_an_unwritable_store_path_is_refused(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    store = oe.make_cached_ssd_store_options(1, str(blocker / "store"), 100)
    with pytest.raises(flow.TideflowError, match=r"'e'.*store path .* is not writable"):
        _embedding_of(store)


def test_bad_options_are_refused():
    with pytest.raises(flow.TideflowError, match="initializer must be a dict"):
        _embedding_of(_host(), init={"type": "zeros"})
    with pytest.raises(flow.TideflowError, match="capacity must be a positive int"):
        oe.make_cached_host_mem_store_options(8, None, -1)
    with pytest.raises(flow.TideflowError, match="embeddings train with SGD"):
        oe.Optimizer(flow.optim.RMSprop([_embedding_of(_host()).shadow]), [])


# -- graphs ---------------------------------------------------------------------------------------
def test_graph_training_equals_eager():
    rng = np.random.default_rng(5)
    batches = [rng.integers(0, 50, (16, 2)) for _ in range(4)]

    def build():
        flow.manual_seed(0)
        emb = _embedding_of(_host())
        head = flow.nn.Linear(2 * DIM, 1)
        opt = oe.Optimizer(flow.optim.Adam([*head.parameters(), emb.shadow], lr=0.05), [emb])
        return emb, head, opt

    emb, head, opt = build()
    eager = []
    for rows in batches:
        opt.zero_grad()
        loss = head(emb(flow.tensor(rows)).reshape(16, 2 * DIM)).square().mean()
        loss.backward()
        opt.step()
        eager.append(loss.item())

    g_emb, g_head, g_opt = build()

    class Train(flow.nn.Graph):
        def __init__(self):
            super().__init__()
            self.emb, self.head = g_emb, g_head
            self.add_optimizer(g_opt)

        def build(self, ids):
            loss = self.head(self.emb(ids).reshape(16, 2 * DIM)).square().mean()
            loss.backward()
            return loss

    train = Train()
    # NOTE: calls in flight together: each call's lookup waits for the previous update
    pending = [train(flow.tensor(rows)) for rows in batches]
    assert [loss.item() for loss in pending] == eager
    every = flow.tensor(np.arange(50).reshape(-1, 2))
    np.testing.assert_array_equal(g_emb(every).numpy(), emb(every).numpy())


def test_doc_examples():
    for module in (_options, _embedding, _optimizer, _ftrl, _snapshot):
        run_doctests(module)


def test_state_dict_holds_the_rows(tmp_path):
    model = flow.nn.Sequential(_embedding_of(_host()))
    opt = oe.Optimizer(flow.optim.Adagrad([model[0].shadow], lr=0.1), [model[0]])
    _train(model[0], opt, [np.array([[1, 2], [3, 2]])])
    state = model.state_dict()
    assert state["0._extra_state"]["rows"].shape == (3, 2 * DIM)  # embedding + Adagrad's sum
    flow.save(state, str(tmp_path / "model.pt"))
    other = flow.nn.Sequential(_embedding_of(_host()))
    oe.Optimizer(flow.optim.Adagrad([other[0].shadow], lr=0.1), [other[0]])
    other.load_state_dict(flow.load(str(tmp_path / "model.pt")))
    keys = flow.tensor([[1, 2], [3, 2], [9, 9]])
    np.testing.assert_array_equal(other[0](keys).numpy(), model[0](keys).numpy())
    narrow = flow.nn.Sequential(_embedding_of(_host(), dim=2))
    with pytest.raises(flow.TideflowError, match="embedding_dim 4, the embedding's is 2"):
        narrow.load_state_dict(state)


def test_a_snapshot_of_another_world_size_loads(tmp_path):
    """Two ranks' snapshot (written as two ranks would: each key in its owner's directory)
    read back by one process: every key, whichever rank held it."""
    keys = np.arange(40) * 1009
    values = np.random.default_rng(6).standard_normal((keys.size, DIM)).astype(np.float32)
    paths = [str(tmp_path / "0-2"), str(tmp_path / "1-2")]
    with oe.make_persistent_table_writer(paths, "two", flow.int64, flow.float32, DIM) as w:
        w.write(keys, values)
    assert all(len(list((tmp_path / d / "snapshots").iterdir())) == 2 for d in ("0-2", "1-2"))
    emb = _embedding_of(_host(path=str(tmp_path)), tables=1)
    emb.load_snapshot("two")
    np.testing.assert_array_equal(emb(flow.tensor(keys)).numpy(), values)


def test_graph_gradient_accumulation_is_one_update():
    """Micro-batches of a graph hand over one gradient each; the step updates once."""
    rows = np.random.default_rng(7).integers(0, 30, (16, 2))

    def build():
        emb = _embedding_of(_host())
        return emb, oe.Optimizer(flow.optim.Adam([emb.shadow], lr=0.05), [emb])

    emb, opt = build()
    for part in np.split(rows, 4):
        (emb(flow.tensor(part)).square().sum() / 4).backward()
    opt.step()

    g_emb, g_opt = build()

    class Accumulating(flow.nn.Graph):
        def __init__(self):
            super().__init__()
            self.emb = g_emb
            self.add_optimizer(g_opt)
            self.config.set_gradient_accumulation_steps(4)

        def build(self, ids):
            loss = self.emb(ids).square().sum() / 4
            loss.backward()
            return loss

    Accumulating()(flow.tensor(rows))
    every = flow.tensor(np.arange(30).reshape(-1, 2))
    np.testing.assert_array_equal(g_emb(every).numpy(), emb(every).numpy())


def test_disk_store_grows_and_widens_like_the_host_store(tmp_path):
    """No capacity: the disk store's index grows (rehashed into new files, the cache
    written back first); an optimizer attached after lookups widens the rows in use."""
    keys = np.arange(3000) * 7919
    host = _embedding_of(_host(capacity=None), tables=1, name="host")
    disk = _embedding_of(oe.make_cached_ssd_store_options(0.05, str(tmp_path), None),
                         tables=1, name="disk")  # fmt: skip
    for emb in (host, disk):
        emb(flow.tensor(keys))
        _train(emb, oe.Optimizer(flow.optim.Adam([emb.shadow], lr=0.1), [emb]),
               [keys[:500].reshape(-1, 1), keys[200:900].reshape(-1, 1)])  # fmt: skip
    assert disk._local.store.index.n_slots > 2 * 3000 > 1024
    np.testing.assert_array_equal(disk(flow.tensor(keys)).numpy(), host(flow.tensor(keys)).numpy())
