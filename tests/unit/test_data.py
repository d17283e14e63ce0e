"""tideflow.utils.data in one process: datasets, samplers, DistributedSampler, collation and
the DataLoader's options, checked against torch.utils.data where PyTorch is the oracle.
Loading in worker processes is tested in test_dataloader_workers.py."""

import collections
import copy
import doctest
import math
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tideflow as flow
import tideflow.utils.data as data
from tideflow.utils.data import (
    BatchSampler,
    ChainDataset,
    ConcatDataset,
    DataLoader,
    Dataset,
    DistributedSampler,
    IterableDataset,
    RandomSampler,
    SequentialSampler,
    StackDataset,
    Subset,
    SubsetRandomSampler,
    TensorDataset,
    WeightedRandomSampler,
    default_collate,
    default_convert,
    random_split,
)
from tideflow.utils.data import distributed as distributed_module


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


class Squares(Dataset):
    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i):
        if not 0 <= i < self.n:
            raise IndexError(i)
        return i * i


class Upto(IterableDataset):
    def __init__(self, n: int, length: int | None = None) -> None:
        self.n = n
        self.length = n if length is None else length

    def __iter__(self):
        return iter(range(self.n))

    def __len__(self) -> int:
        return self.length


def _tree(x):
    """A comparable description of a (possibly nested) batch from either framework."""
    name = type(x).__name__
    if hasattr(x, "numpy") and hasattr(x, "dtype"):  # a tideflow or torch tensor
        dtype = str(x.dtype).split(".")[-1]
        return ("tensor", dtype, tuple(x.shape), np.asarray(x.numpy()).tolist())
    if isinstance(x, dict):
        return (name, [(k, _tree(v)) for k, v in x.items()])
    if isinstance(x, list | tuple):
        return (name, [_tree(v) for v in x])
    return (name, x)


def _torchify(sample, torch):
    """The same sample with tideflow tensors replaced by torch tensors."""
    if isinstance(sample, flow.Tensor):
        return torch.from_numpy(sample.numpy().copy())
    if isinstance(sample, dict):
        clone = copy.copy(sample)
        clone.update((k, _torchify(v, torch)) for k, v in sample.items())
        return clone
    if isinstance(sample, tuple) and hasattr(sample, "_fields"):
        return type(sample)(*(_torchify(v, torch) for v in sample))
    if isinstance(sample, list | tuple):
        return type(sample)(_torchify(v, torch) for v in sample)
    return sample


Point = collections.namedtuple("Point", ["x", "y"])


# -- datasets ----------------------------------------------------------------------------------
def test_tensor_dataset_indexes_every_tensor_along_dim0():
    x, y = flow.arange(12).view(4, 3), flow.tensor([0, 1, 0, 1])
    ds = TensorDataset(x, y)
    assert len(ds) == 4
    row, label = ds[2]
    assert row.tolist() == [6, 7, 8] and label.item() == 0
    with pytest.raises(AssertionError, match=r"Size mismatch between tensors.*\[4, 3\]"):
        TensorDataset(x, flow.zeros(3))


def test_stack_dataset_tuple_and_dict_forms():
    assert StackDataset([1, 2], ["a", "b"])[1] == (2, "b")
    both = StackDataset(x=Squares(3), y=[7, 8, 9])
    assert both[2] == {"x": 4, "y": 9}
    assert both.__getitems__([0, 2]) == [{"x": 0, "y": 7}, {"x": 4, "y": 9}]
    assert StackDataset(Squares(2), [5, 6]).__getitems__([1, 0]) == [(1, 6), (0, 5)]
    with pytest.raises(ValueError, match=r"Size mismatch between datasets: lengths are \[2, 3\]"):
        StackDataset([1, 2], [1, 2, 3])
    with pytest.raises(ValueError, match="both types are given"):
        StackDataset([1], y=[2])
    with pytest.raises(ValueError, match="At least one dataset"):
        StackDataset()


def test_concat_dataset_indexing_across_parts():
    ds = ConcatDataset([Squares(2), [10, 11, 12]])
    assert len(ds) == 5 and ds.cumulative_sizes == [2, 5]
    assert [ds[i] for i in range(5)] == [0, 1, 10, 11, 12]
    assert ds[-1] == 12 and ds[-5] == 0
    with pytest.raises(ValueError, match="should not exceed dataset length"):
        ds[-6]
    with pytest.raises(IndexError, match="index 5 is out of range for a ConcatDataset of length 5"):
        ds[5]
    combined = Squares(1) + Squares(2)
    assert isinstance(combined, ConcatDataset)
    assert [combined[i] for i in range(3)] == [0, 0, 1]
    with pytest.raises(AssertionError, match="should not be an empty iterable"):
        ConcatDataset([])
    with pytest.raises(AssertionError, match="does not support IterableDataset"):
        ConcatDataset([Upto(2)])


def test_chain_dataset_streams_one_after_another():
    chained = Upto(2) + Upto(3)
    assert isinstance(chained, ChainDataset)
    assert list(chained) == [0, 1, 0, 1, 2] and len(chained) == 5
    with pytest.raises(AssertionError, match="only supports IterableDataset, got Squares"):
        list(ChainDataset([Upto(1), Squares(2)]))


def test_iterable_dataset_requires_iter():
    class NoIter(IterableDataset):
        pass

    with pytest.raises(TypeError, match="abstract"):
        NoIter()
    with pytest.raises(NotImplementedError, match="should implement __getitem__"):
        Dataset()[0]


def test_subset_selects_and_batches_through_the_parent():
    class Batched(Squares):
        def __getitems__(self, indices):
            return [("batched", i) for i in indices]

    sub = Subset(Batched(10), [9, 3, 5])
    assert len(sub) == 3 and sub[0] == 81
    assert sub.__getitems__([2, 0]) == [("batched", 5), ("batched", 9)]
    assert Subset(Squares(10), [4, 2]).__getitems__([1, 0]) == [4, 16]


def test_subset_subclass_overriding_getitem_is_honoured_in_batches():
    class Negated(Subset):
        def __getitem__(self, idx):
            return -super().__getitem__(idx)

    sub = Negated(Squares(5), [1, 2, 3])
    assert sub.__getitems__([0, 2]) == [-1, -9]
    assert [b.tolist() for b in DataLoader(sub, batch_size=2)] == [[-1, -4], [-9]]


@pytest.mark.torch
@pytest.mark.parametrize(
    "n, lengths",
    [
        (10, [3, 7]),
        (10, [0.3, 0.7]),
        (11, [0.5, 0.5]),
        (7, [0.2, 0.2, 0.6]),
        (30, [0.3] * 3 + [0.1]),
    ],
)
def test_random_split_lengths_match_torch(torch, n, lengths):
    want = [len(s) for s in torch.utils.data.random_split(range(n), lengths)]
    parts = random_split(range(n), lengths, generator=flow.Generator().manual_seed(1))
    assert [len(p) for p in parts] == want
    assert sorted(i for p in parts for i in p) == list(range(n))  # disjoint and complete


def test_random_split_is_reproducible_and_checks_lengths():
    def split(seed):
        return [
            list(p) for p in random_split(Squares(6), [2, 4], flow.Generator().manual_seed(seed))
        ]

    assert split(0) == split(0) and split(0) != split(1)
    flow.manual_seed(3)
    first = [list(p) for p in random_split(range(8), [4, 4])]
    flow.manual_seed(3)
    assert [list(p) for p in random_split(range(8), [4, 4])] == first
    with pytest.raises(
        ValueError, match=r"Sum of input lengths .* \[2, 3\] sum to 5, .* 6 samples"
    ):
        random_split(range(6), [2, 3])
    with pytest.raises(ValueError, match="Fraction at index 1 is not between 0 and 1"):
        random_split(range(6), [0.5, 1.5, -1.0])
    with pytest.warns(UserWarning, match="Length of split at index 2 is 0"):
        parts = random_split(range(2), [0.5, 0.5, 0.0])
    assert [len(p) for p in parts] == [1, 1, 0]


# -- samplers ----------------------------------------------------------------------------------
def test_sequential_and_subset_random_samplers():
    assert list(SequentialSampler(Squares(4))) == [0, 1, 2, 3]
    picked = list(SubsetRandomSampler([7, 3, 5], generator=flow.Generator().manual_seed(0)))
    assert sorted(picked) == [3, 5, 7]
    assert len(SubsetRandomSampler([7, 3, 5])) == 3


def test_random_sampler_permutations_and_replacement():
    g = flow.Generator().manual_seed(0)
    assert sorted(RandomSampler(range(10), generator=g)) == list(range(10))
    # num_samples beyond the length: whole permutations, then the head of one more
    drawn = list(RandomSampler(range(4), num_samples=10, generator=g))
    assert len(drawn) == 10 and sorted(drawn[:8]) == sorted(list(range(4)) * 2)
    assert len(set(drawn[8:])) == 2
    with_replacement = list(RandomSampler(range(3), replacement=True, num_samples=70, generator=g))
    assert len(with_replacement) == 70 and set(with_replacement) == {0, 1, 2}


def test_random_sampler_without_generator_follows_the_global_seed():
    flow.manual_seed(7)
    first = [list(RandomSampler(range(20))) for _ in range(2)]
    flow.manual_seed(7)
    assert [list(RandomSampler(range(20))) for _ in range(2)] == first
    assert first[0] != first[1]  # a new order each epoch


def test_random_sampler_argument_errors():
    with pytest.raises(
        TypeError, match="replacement should be a boolean value, but got replacement=1"
    ):
        RandomSampler(range(3), replacement=1)
    with pytest.raises(
        ValueError, match="num_samples should be a positive integer value, but got num_samples=0"
    ):
        RandomSampler(range(0))
    with pytest.raises(ValueError, match="num_samples=-1"):
        RandomSampler(range(3), num_samples=-1)


def test_weighted_random_sampler():
    g = flow.Generator().manual_seed(0)
    assert list(WeightedRandomSampler([0, 0, 3.0], 5, generator=g)) == [2] * 5
    unique = list(WeightedRandomSampler([1, 2, 3, 4], 4, replacement=False, generator=g))
    assert sorted(unique) == [0, 1, 2, 3]
    counts = np.bincount(list(WeightedRandomSampler([1.0, 3.0], 4000, generator=g)), minlength=2)
    assert abs(counts[1] / 4000 - 0.75) < 0.03
    assert WeightedRandomSampler([1, 2], 3).weights.dtype == flow.float64
    with pytest.raises(
        ValueError, match="num_samples should be a positive integer value, but got num_samples=True"
    ):
        WeightedRandomSampler([1, 2], True)
    with pytest.raises(ValueError, match="replacement should be a boolean value"):
        WeightedRandomSampler([1, 2], 2, replacement=None)
    with pytest.raises(
        ValueError, match=r"weights should be a 1d sequence but given weights have shape \(1, 2\)"
    ):
        WeightedRandomSampler([[1, 2]], 2)


@pytest.mark.torch
@pytest.mark.parametrize("n", [0, 1, 7, 9])
@pytest.mark.parametrize("batch_size", [1, 3, 9, 10])
@pytest.mark.parametrize("drop_last", [False, True])
def test_batch_sampler_matches_torch(torch, n, batch_size, drop_last):
    want = torch.utils.data.BatchSampler(range(n), batch_size, drop_last)
    got = BatchSampler(range(n), batch_size, drop_last)
    assert list(got) == list(want)
    assert len(got) == len(want)


def test_batch_sampler_argument_errors():
    with pytest.raises(
        ValueError, match="batch_size should be a positive integer value, but got batch_size=0"
    ):
        BatchSampler(range(3), 0, False)
    with pytest.raises(ValueError, match="batch_size=True"):
        BatchSampler(range(3), True, False)
    with pytest.raises(
        ValueError, match="drop_last should be a boolean value, but got drop_last=None"
    ):
        BatchSampler(range(3), 2, None)


def test_samplers_are_subscriptable_like_typing_generics():
    class Evens(data.Sampler[int]):
        def __iter__(self):
            return iter([0, 2])

    assert list(Evens()) == [0, 2]
    assert Dataset[int] is not None and DataLoader[int] is not None


# -- DistributedSampler ------------------------------------------------------------------------
@pytest.mark.torch
@pytest.mark.parametrize("n", [0, 1, 5, 8, 10])
@pytest.mark.parametrize("replicas", [1, 2, 3, 4])
@pytest.mark.parametrize("drop_last", [False, True])
def test_distributed_sampler_partition_matches_torch_without_shuffle(torch, n, replicas, drop_last):
    for rank in range(replicas):
        kwargs = dict(num_replicas=replicas, rank=rank, shuffle=False, drop_last=drop_last)
        want = torch.utils.data.DistributedSampler(range(n), **kwargs)
        got = DistributedSampler(range(n), **kwargs)
        assert list(got) == list(want)
        assert (len(got), got.num_samples, got.total_size) == (
            len(want),
            want.num_samples,
            want.total_size,
        )


@pytest.mark.torch
@pytest.mark.parametrize("n, replicas", [(10, 3), (8, 4), (5, 4)])
@pytest.mark.parametrize("drop_last", [False, True])
def test_distributed_sampler_shuffled_partition_properties(torch, n, replicas, drop_last):
    def shards(epoch, seed=0):
        out = []
        for rank in range(replicas):
            s = DistributedSampler(range(n), replicas, rank, seed=seed, drop_last=drop_last)
            s.set_epoch(epoch)
            out.append(list(s))
        return out

    first = shards(0)
    want_len = len(torch.utils.data.DistributedSampler(range(n), replicas, 0, drop_last=drop_last))
    assert all(len(shard) == want_len for shard in first)
    keys = [k for shard in first for k in shard]
    if drop_last:
        assert len(set(keys)) == len(keys)  # no key twice
    else:
        assert set(keys) == set(range(n))  # every key, the shortfall padded by repeats
    assert shards(0) == first  # every rank computes the same permutation
    assert shards(1) != first and shards(0, seed=5) != first


def test_distributed_sampler_rank_check():
    with pytest.raises(
        ValueError, match=r"Invalid rank 2, rank should be in the interval \[0, 1\]"
    ):
        DistributedSampler(range(4), num_replicas=2, rank=2)


def test_distributed_sampler_is_a_world_of_one_outside_mpi():
    # NOTE: a fresh interpreter: this one may have initialized MPI in another test.
    script = textwrap.dedent(
        """
        import sys
        from tideflow.utils.data import DistributedSampler
        s = DistributedSampler(range(5), shuffle=False)
        print(s.num_replicas, s.rank, list(s), "mpi4py.MPI" in sys.modules)
        """
    )
    env = {k: v for k, v in os.environ.items() if k not in distributed_module._LAUNCHER_VARS}
    out = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=True,
    )
    # a world of one, learned without initializing MPI
    assert out.stdout.strip() == "1 0 [0, 1, 2, 3, 4] False"


@pytest.mark.mpi
def test_distributed_sampler_reads_the_mpi_world(tmp_path):
    mpiexec = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if not os.path.exists(mpiexec):
        pytest.skip("mpiexec is not installed next to the interpreter")
    # NOTE: one file per rank: the launcher may interleave the ranks' stdout mid-line.
    script = textwrap.dedent(
        f"""
        from tideflow.utils.data import DistributedSampler
        s = DistributedSampler(range(5), shuffle=False)
        with open(r"{tmp_path}/rank" + str(s.rank), "w") as f:
            f.write(f"{{s.num_replicas}} {{list(s)}}")
        """
    )
    subprocess.run(
        [mpiexec, "-n", "2", sys.executable, "-c", script],
        capture_output=True,
        timeout=60,
        check=True,
    )
    ranks = {p.name: p.read_text() for p in tmp_path.iterdir()}
    assert ranks == {"rank0": "2 [0, 2, 4]", "rank1": "2 [1, 3, 0]"}


# -- collation ---------------------------------------------------------------------------------
_COLLATE_BATCHES = {
    "tensors": [flow.tensor([1.0, 2.0]), flow.tensor([3.0, 4.0])],
    "int tensors 0-d": [flow.tensor(1), flow.tensor(2)],
    "numpy float32": [np.ones((2, 2), np.float32), np.zeros((2, 2), np.float32)],
    "numpy int64": [np.arange(3), np.arange(3, 6)],
    "numpy bool": [np.array([True]), np.array([False])],
    "numpy 0-d": [np.array(1.5), np.array(2.5)],
    "numpy scalars f32": [np.float32(1.5), np.float32(2.5)],
    "numpy scalars i32": [np.int32(1), np.int32(2)],
    "numpy scalars f64": [np.float64(1.5), np.float64(2.5)],
    "numpy bool scalars": [np.bool_(True), np.bool_(False)],
    "floats": [1.5, 2.0],
    "ints": [1, 2, 3],
    "bools": [True, False],
    "int then float": [1, 2.5],
    "float then int": [1.0, 2],
    "strings": ["a", "bc"],
    "bytes": [b"a", b"bc"],
    "dicts": [{"x": 1, "y": "a"}, {"x": 2, "y": "b"}],
    "ordered dicts": [collections.OrderedDict(b=1.0, a=2), collections.OrderedDict(b=3.0, a=4)],
    "defaultdicts": [collections.defaultdict(int, k=1), collections.defaultdict(int, k=2)],
    "namedtuples": [Point(1, 2.0), Point(3, 4.0)],
    "tuples": [(1, "a"), (2, "b")],
    "lists": [[1, 2], [3, 4]],
    "nested": [
        {"img": np.zeros((2, 3), np.float32), "meta": (1, [2.0, "z"]), "p": Point(flow.ones(1), 1)},
        {"img": np.ones((2, 3), np.float32), "meta": (3, [4.0, "w"]), "p": Point(flow.zeros(1), 2)},
    ],
}


@pytest.mark.torch
@pytest.mark.parametrize("case", list(_COLLATE_BATCHES))
def test_default_collate_matches_torch(torch, case):
    batch = _COLLATE_BATCHES[case]
    want = torch.utils.data.default_collate(_torchify(batch, torch))
    assert _tree(default_collate(batch)) == _tree(want)


@pytest.mark.torch
@pytest.mark.parametrize(
    "sample",
    [
        np.arange(3),
        np.float32(2.0),
        3,
        "s",
        np.str_("a"),
        (np.arange(2), 1),
        [np.zeros(1), "a"],
        {"k": np.ones(2)},
        Point(np.array(1), "y"),
        np.array(["a", "b"]),
        flow.tensor([1, 2]),
    ],
    ids=repr,
)
def test_default_convert_matches_torch(torch, sample):
    want = torch.utils.data.default_convert(_torchify(sample, torch))
    got = default_convert(sample)
    if isinstance(sample, np.ndarray) and sample.dtype.kind == "U":
        assert got is sample  # strings stay a NumPy array
    else:
        assert _tree(got) == _tree(want)


def test_default_collate_errors_name_the_problem():
    with pytest.raises(
        RuntimeError,
        match=r"expects each tensor to be equal size, but got \[2\] at entry 0 and \[3\] at",
    ):
        default_collate([flow.zeros(2), flow.zeros(3)])
    with pytest.raises(
        RuntimeError,
        match=r"each element in list of batch should be of equal size, got sizes \[2, 1\]",
    ):
        default_collate([[1, 2], [3]])
    with pytest.raises(
        TypeError,
        match="must contain tensors, numpy arrays, numbers, dicts or lists; found <class 'object'>",
    ):
        default_collate([object(), object()])
    with pytest.raises(TypeError, match="found <U1"):
        default_collate([np.array(["a"]), np.array(["b"])])


def test_collate_is_extensible_through_the_type_map():
    from tideflow.utils.data._utils.collate import collate, default_collate_fn_map

    class Box:
        def __init__(self, v):
            self.v = v

    def collate_boxes(batch, *, collate_fn_map=None):
        return [b.v for b in batch]

    custom = {**default_collate_fn_map, Box: collate_boxes}
    out = collate([{"b": Box(1), "x": 1.0}, {"b": Box(2), "x": 2.0}], collate_fn_map=custom)
    assert out["b"] == [1, 2] and out["x"].tolist() == [1.0, 2.0]


# -- DataLoader in the main process ------------------------------------------------------------
@pytest.mark.torch
@pytest.mark.parametrize(
    "batch_size, drop_last", [(1, False), (3, False), (3, True), (None, False)]
)
def test_sequential_batches_match_torch(torch, batch_size, drop_last):
    x = np.arange(20, dtype=np.float32).reshape(10, 2)
    y = np.arange(10) % 3
    ours = DataLoader(
        TensorDataset(flow.from_numpy(x), flow.from_numpy(y)),
        batch_size=batch_size,
        drop_last=drop_last,
    )
    theirs = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(torch.from_numpy(x), torch.from_numpy(y)),
        batch_size=batch_size,
        drop_last=drop_last,
    )
    assert len(ours) == len(theirs)
    assert [_tree(b) for b in ours] == [_tree(b) for b in theirs]


@pytest.mark.torch
def test_structured_samples_batch_like_torch(torch):
    class Records(Dataset):
        def __len__(self):
            return 5

        def __getitem__(self, i):
            return {"id": i, "name": f"r{i}", "feat": np.full(3, i, np.float32), "w": i / 2}

    ours = [_tree(b) for b in DataLoader(Records(), batch_size=2)]
    theirs = [_tree(b) for b in torch.utils.data.DataLoader(Records(), batch_size=2)]
    assert ours == theirs


def test_shuffle_draws_a_permutation_from_the_generator():
    def epoch(seed):
        g = flow.Generator().manual_seed(seed)
        return [
            b.tolist() for b in DataLoader(Squares(10), batch_size=4, shuffle=True, generator=g)
        ]

    batches = epoch(0)
    assert [len(b) for b in batches] == [4, 4, 2]
    assert sorted(v for b in batches for v in b) == sorted(i * i for i in range(10))
    assert epoch(0) == batches and epoch(1) != batches


def test_custom_sampler_and_batch_sampler():
    loader = DataLoader(Squares(6), sampler=[5, 0, 3], batch_size=2)
    assert [b.tolist() for b in loader] == [[25, 0], [9]]
    loader = DataLoader(Squares(6), batch_sampler=[[1, 2, 3], [0]])
    assert [b.tolist() for b in loader] == [[1, 4, 9], [0]]
    assert loader.batch_size is None and not loader.drop_last and len(loader) == 2


def test_getitems_is_used_for_whole_batches():
    class Batched(Squares):
        calls = 0

        def __getitems__(self, indices):
            type(self).calls += 1
            return [self[i] for i in indices]

    assert [b.tolist() for b in DataLoader(Batched(5), batch_size=2)] == [[0, 1], [4, 9], [16]]
    assert Batched.calls == 3


def test_batch_size_none_converts_without_batching():
    class Arrays(Dataset):
        def __len__(self):
            return 2

        def __getitem__(self, i):
            return {"a": np.array([i, i]), "s": "x"}

    out = list(DataLoader(Arrays(), batch_size=None))
    assert isinstance(out[1]["a"], flow.Tensor) and out[1]["a"].tolist() == [1, 1]
    assert out[1]["s"] == "x"


def test_iterable_dataset_in_the_main_process():
    assert [b.tolist() for b in DataLoader(Upto(5), batch_size=2)] == [[0, 1], [2, 3], [4]]
    assert [b.tolist() for b in DataLoader(Upto(5), batch_size=2, drop_last=True)] == [
        [0, 1],
        [2, 3],
    ]
    assert list(DataLoader(Upto(3), batch_size=None)) == [0, 1, 2]  # converted, not batched
    assert len(DataLoader(Upto(5), batch_size=2)) == 3
    assert len(DataLoader(Upto(5), batch_size=2, drop_last=True)) == 2
    assert data.get_worker_info() is None


def test_iterable_dataset_longer_than_reported_warns():
    loader = DataLoader(Upto(3, length=2), batch_size=None)
    assert len(loader) == 2
    with pytest.warns(UserWarning, match="was reported to be 2 .* but 3 samples have been fetched"):
        list(loader)


def test_loader_draws_a_base_seed_per_epoch_from_its_generator():
    g = flow.Generator().manual_seed(0)
    before = g.get_state().tolist()
    list(DataLoader(Squares(3), generator=g))
    assert g.get_state().tolist() != before  # like PyTorch, even without workers


_MUTUALLY_EXCLUSIVE = "batch_sampler option is mutually exclusive"


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (dict(num_workers=-1), ValueError, "num_workers option should be non-negative"),
        (dict(timeout=-1), ValueError, "timeout option should be non-negative, .* timeout=-1"),
        (dict(timeout=5), ValueError, "needs num_workers > 0, but got timeout=5"),
        (dict(prefetch_factor=2), ValueError, "prefetch_factor option could only be specified"),
        (dict(num_workers=1, prefetch_factor=0), ValueError, "prefetch_factor=0"),
        (dict(persistent_workers=True), ValueError, "persistent_workers option needs num_workers"),
        (dict(shuffle=True, sampler=[0]), ValueError, "sampler option is mutually exclusive"),
        (dict(batch_sampler=[[0]], batch_size=2), ValueError, _MUTUALLY_EXCLUSIVE),
        (dict(batch_sampler=[[0]], drop_last=True), ValueError, _MUTUALLY_EXCLUSIVE),
        (dict(batch_size=None, drop_last=True), ValueError, "batch_size=None option disables"),
        (dict(multiprocessing_context="fork"), ValueError, "only be used with multi-process"),
        (
            dict(num_workers=1, multiprocessing_context="teleport"),
            ValueError,
            "valid start method in .* but got multiprocessing_context='teleport'",
        ),
        (dict(num_workers=1, multiprocessing_context=3), TypeError, "a valid context object"),
    ],
)
def test_loader_argument_errors(kwargs, error, message):
    with pytest.raises(error, match=message):
        DataLoader(Squares(4), **kwargs)


@pytest.mark.parametrize(
    "kwargs, option",
    [
        (dict(shuffle=True), "shuffle option, but got shuffle=True"),
        (dict(sampler=[0]), "sampler option"),
        (dict(batch_sampler=[[0]]), "batch_sampler option"),
    ],
)
def test_iterable_dataset_rejects_sampling_options(kwargs, option):
    with pytest.raises(
        ValueError, match=f"DataLoader with IterableDataset: expected unspecified {option}"
    ):
        DataLoader(Upto(3), **kwargs)


def test_loader_options_are_frozen_after_construction():
    loader = DataLoader(Squares(4), batch_size=2)
    for name in ("batch_size", "sampler", "dataset", "drop_last"):
        with pytest.raises(
            ValueError, match=f"{name} attribute should not be set after DataLoader is initialized"
        ):
            setattr(loader, name, None)
    loader.num_workers = 0  # not frozen, as in PyTorch


def test_too_many_workers_warns():
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    with pytest.warns(UserWarning, match=f"will create {cpus + 1} worker processes .* is {cpus}"):
        DataLoader(Squares(4), num_workers=cpus + 1)


def test_iterator_cannot_be_pickled():
    import pickle

    with pytest.raises(NotImplementedError, match="_SingleProcessDataLoaderIter cannot be pickled"):
        pickle.dumps(iter(DataLoader(Squares(2))))


# -- the examples in the docstrings run ------------------------------------------------------
def _data_modules():
    from tideflow.utils.data import dataloader, dataset, sampler
    from tideflow.utils.data._utils import collate, worker

    return [data, dataset, sampler, distributed_module, dataloader, collate, worker]


@pytest.mark.parametrize("module", _data_modules(), ids=lambda m: m.__name__)
def test_docstring_examples(module):
    flow.manual_seed(0)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    tests = finder.find(module, globs={"flow": flow, "np": np})
    assert tests, f"{module.__name__} has no examples"
    for test in tests:
        runner.run(test)
    results = runner.summarize(verbose=False)
    assert results.failed == 0


def test_len_of_an_epoch_equals_the_batches_yielded():
    for n, bs, drop in [(10, 3, False), (10, 3, True), (9, 3, True), (1, 4, False)]:
        loader = DataLoader(Squares(n), batch_size=bs, drop_last=drop)
        assert len(loader) == len(list(loader)) == (n // bs if drop else math.ceil(n / bs))
