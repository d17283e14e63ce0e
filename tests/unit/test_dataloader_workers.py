"""DataLoader with worker processes: batch order, seeding, worker info, IterableDataset
sharding, errors raised or killed in workers, timeouts, persistent workers, prefetching and
clean shutdown. Datasets are small and every test has a timeout so a hang fails fast."""

import gc
import multiprocessing
import os
import pickle
import random
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import tideflow as flow
from tideflow.utils.data import (
    DataLoader,
    Dataset,
    IterableDataset,
    TensorDataset,
    default_convert,
    get_worker_info,
)
from tideflow.utils.data._utils.worker import worker_loop

pytestmark = [
    pytest.mark.timeout(60),
    # NOTE: Python >= 3.12 warns when forking a process that runs threads (pytest-xdist does).
    pytest.mark.filterwarnings("ignore:.*multi-threaded.*fork:DeprecationWarning"),
]


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


# NOTE: datasets are module-level so that the spawn start method can import them.
class Squares(Dataset):
    def __init__(self, n: int, slow: frozenset = frozenset()) -> None:
        self.n = n
        self.slow = slow

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i):
        if i in self.slow:
            time.sleep(0.2)  # finishes after later keys: replies arrive out of order
        return i * i


class WhoAmI(Dataset):
    """Each sample says which worker made it and what its RNGs produced."""

    def __len__(self) -> int:
        return 4

    def __getitem__(self, i):
        info = get_worker_info()
        return {
            "worker": info.id,
            "num_workers": info.num_workers,
            "seed": info.seed,
            "same_dataset": isinstance(info.dataset, WhoAmI),
            "python": random.random(),
            "numpy": float(np.random.rand()),
            "flow": flow.rand(()).item(),
        }


class Shard(IterableDataset):
    """range(n), each worker taking every num_workers-th value from its id."""

    def __init__(self, n: int, shard: bool = True) -> None:
        self.n = n
        self.shard = shard

    def __iter__(self):
        info = get_worker_info()
        if info is None or not self.shard:
            return iter(range(self.n))
        return iter(range(info.id, self.n, info.num_workers))


class FailsAt(Dataset):
    def __init__(self, bad: int, error: Exception) -> None:
        self.bad = bad
        self.error = error

    def __len__(self) -> int:
        return 6

    def __getitem__(self, i):
        if i == self.bad:
            raise self.error
        return i


class NeedsTwoArgs(Exception):
    def __init__(self, a, b) -> None:
        super().__init__(f"{a} {b}")


class KillsItself(Dataset):
    def __len__(self) -> int:
        return 6

    def __getitem__(self, i):
        if i == 3:
            os.kill(os.getpid(), signal.SIGKILL)
        return i


class Sleeps(Dataset):
    def __len__(self) -> int:
        return 4

    def __getitem__(self, i):
        if i == 1:
            time.sleep(30)
        return i


class Large(Dataset):
    """One sample far larger than a pipe's buffer: writing it blocks until it is read."""

    def __len__(self) -> int:
        return 1

    def __getitem__(self, i):
        return np.zeros(2**20)


class CrashesAfterItsStream(IterableDataset):
    """Worker 0's stream is empty and the worker is killed on its way out, after it was told
    to stop; worker 1 does not answer for 30 s, like a worker whose replies wait on the
    result queue's write lock that a killed worker left held."""

    def __iter__(self):
        if get_worker_info().id == 0:
            multiprocessing.util.Finalize(
                None, os.kill, (os.getpid(), signal.SIGKILL), exitpriority=100
            )
        else:
            time.sleep(30)
        return iter(())


class Unpicklable(Dataset):
    def __len__(self) -> int:
        return 2

    def __getitem__(self, i):
        return lambda: i


class Counting(Dataset):
    """Counts fetches in shared memory, so the test sees how far the workers ran ahead."""

    def __init__(self, counter) -> None:
        self.counter = counter

    def __len__(self) -> int:
        return 20

    def __getitem__(self, i):
        with self.counter.get_lock():
            self.counter.value += 1
        return i


def _values(loader):
    return [b.tolist() if isinstance(b, flow.Tensor) else b for b in loader]


def _workers_of(loader):
    return loader._iterator._pool.workers


# -- order and results ------------------------------------------------------------------------
@pytest.mark.parametrize("batch_size", [None, 1, 3])
def test_batches_come_back_in_sampler_order(batch_size):
    ds = Squares(11, slow=frozenset({0, 4}))
    single = _values(DataLoader(ds, batch_size=batch_size))
    assert _values(DataLoader(ds, batch_size=batch_size, num_workers=2)) == single


def test_shuffled_order_equals_the_single_process_order_for_the_same_generator():
    def epoch(num_workers):
        g = flow.Generator().manual_seed(5)
        loader = DataLoader(
            Squares(10), batch_size=3, shuffle=True, generator=g, num_workers=num_workers
        )
        return _values(loader)

    assert epoch(2) == epoch(0)


def test_in_order_false_returns_every_batch():
    ds = Squares(10, slow=frozenset({0}))
    batches = _values(DataLoader(ds, batch_size=2, num_workers=2, in_order=False))
    assert sorted(v for b in batches for v in b) == [i * i for i in range(10)]
    assert batches[0] != [0, 1]  # the slow first batch did not hold the others back


def test_tensors_cross_processes_as_their_data_only():
    base = flow.arange(100000.0).view(1000, 100)
    leaf = flow.ones(3, requires_grad=True)

    class Rows(Dataset):
        def __len__(self):
            return 3

        def __getitem__(self, i):
            return base[i], leaf

    row, got_leaf = next(iter(DataLoader(Rows(), batch_size=None, num_workers=1)))
    assert row.tolist() == base[0].tolist()
    assert row._base is None and row.numel() == 100  # the view arrived without its base
    assert got_leaf.requires_grad and got_leaf.is_leaf


def test_tensor_with_a_graph_cannot_cross():
    class Graphs(Dataset):
        def __len__(self):
            return 1

        def __getitem__(self, i):
            return flow.ones(2, requires_grad=True) * 2

    with pytest.raises(RuntimeError, match=r"requires grad and is not a leaf.*detach"):
        list(DataLoader(Graphs(), batch_size=None, num_workers=1))


@pytest.mark.torch
def test_structured_batches_match_torch_with_workers(torch):
    class Records(Dataset):
        def __len__(self):
            return 5

        def __getitem__(self, i):
            return {"id": i, "x": np.full(2, i, np.float32), "tag": f"t{i}"}

    def tree(batch):
        return {k: v.tolist() if hasattr(v, "tolist") else v for k, v in batch.items()}

    ours = [tree(b) for b in DataLoader(Records(), batch_size=2, num_workers=2)]
    theirs = [tree(b) for b in torch.utils.data.DataLoader(Records(), batch_size=2, num_workers=2)]
    assert ours == theirs


def test_spawn_start_method():
    loader = DataLoader(Squares(5), batch_size=2, num_workers=2, multiprocessing_context="spawn")
    assert _values(loader) == [[0, 1], [4, 9], [16]]


# -- seeding and worker info ------------------------------------------------------------------
def test_each_worker_is_seeded_differently_and_knows_itself():
    samples = list(DataLoader(WhoAmI(), batch_size=None, num_workers=2))
    assert [s["worker"] for s in samples] == [0, 1, 0, 1]  # round robin
    assert all(s["num_workers"] == 2 and s["same_dataset"] for s in samples)
    seeds = {s["worker"]: s["seed"] for s in samples}
    assert seeds[1] == seeds[0] + 1  # base_seed + worker_id
    for rng in ("python", "numpy", "flow"):
        assert len({s[rng] for s in samples}) == 4, rng  # no two workers share a stream
    assert get_worker_info() is None  # the main process


def test_worker_seeds_follow_the_generator_and_change_every_epoch():
    def seeds(loader):
        return [(s["seed"], s["python"], s["numpy"], s["flow"]) for s in loader]

    flow.manual_seed(0)
    loader = DataLoader(WhoAmI(), batch_size=None, num_workers=2)
    first, second = seeds(loader), seeds(loader)
    assert first != second
    flow.manual_seed(0)
    assert seeds(DataLoader(WhoAmI(), batch_size=None, num_workers=2)) == first
    g = flow.Generator().manual_seed(9)
    with_gen = seeds(DataLoader(WhoAmI(), batch_size=None, num_workers=2, generator=g))
    g.manual_seed(9)
    assert seeds(DataLoader(WhoAmI(), batch_size=None, num_workers=2, generator=g)) == with_gen


def _record_init(worker_id):
    info = get_worker_info()
    info.dataset.init_calls = [(worker_id, info.id, info.seed)]


class InitRecorder(Dataset):
    init_calls: tuple = ()  # set per worker by _record_init

    def __len__(self):
        return 2

    def __getitem__(self, i):
        return self.init_calls


def test_worker_init_fn_runs_in_each_worker_after_seeding():
    loader = DataLoader(InitRecorder(), batch_size=None, num_workers=2, worker_init_fn=_record_init)
    calls = [sample[0] for sample in loader]  # one sample from each worker
    assert [(wid, info_id) for wid, info_id, _ in calls] == [(0, 0), (1, 1)]
    assert calls[1][2] == calls[0][2] + 1


# -- IterableDataset ---------------------------------------------------------------------------
def test_iterable_dataset_sharded_with_worker_info():
    loader = DataLoader(Shard(7), batch_size=2, num_workers=2)
    assert _values(loader) == [[0, 2], [1, 3], [4, 6], [5]]


def test_iterable_dataset_without_sharding_is_duplicated_per_worker():
    values = sorted(v for b in _values(DataLoader(Shard(3, shard=False), num_workers=2)) for v in b)
    assert values == [0, 0, 1, 1, 2, 2]


def test_iterable_dataset_drop_last_applies_per_worker():
    loader = DataLoader(Shard(7), batch_size=2, num_workers=2, drop_last=True)
    assert _values(loader) == [[0, 2], [1, 3], [4, 6]]


@pytest.mark.torch
@pytest.mark.parametrize("batch_size", [None, 2, 3])
def test_iterable_dataset_with_workers_matches_torch(torch, batch_size):
    class TorchShard(torch.utils.data.IterableDataset):
        def __iter__(self):
            info = torch.utils.data.get_worker_info()
            return iter(range(info.id, 9, info.num_workers))

    theirs = torch.utils.data.DataLoader(TorchShard(), batch_size=batch_size, num_workers=2)
    ours = DataLoader(Shard(9), batch_size=batch_size, num_workers=2)
    assert _values(ours) == [b.tolist() if batch_size else b for b in theirs]


# -- failures ----------------------------------------------------------------------------------
def test_worker_exception_is_reraised_with_its_type_worker_and_traceback():
    loader = DataLoader(FailsAt(3, ValueError("bad sample 3")), num_workers=2)
    with pytest.raises(ValueError) as info:
        list(loader)
    message = str(info.value)
    assert message.startswith("Caught ValueError in DataLoader worker process 1.\n")
    assert "Original Traceback (most recent call last):" in message
    assert "in __getitem__" in message and "ValueError: bad sample 3" in message


@pytest.mark.torch
def test_worker_exception_message_is_shaped_like_torch(torch):
    class TorchFails(torch.utils.data.Dataset):
        def __len__(self):
            return 6

        def __getitem__(self, i):
            if i == 3:
                raise ValueError("bad sample 3")
            return i

    torch_batches = iter(torch.utils.data.DataLoader(TorchFails(), num_workers=2))
    with pytest.raises(ValueError) as theirs:
        list(torch_batches)
    list(torch_batches)  # NOTE: finish the epoch: PyTorch is slow to stop workers on gc
    with pytest.raises(ValueError) as ours:
        list(DataLoader(FailsAt(3, ValueError("bad sample 3")), num_workers=2))

    def shape(message):
        lines = message.splitlines()
        return lines[0], lines[1], lines[-1]

    assert shape(str(ours.value)) == shape(str(theirs.value))


def test_loading_continues_after_a_worker_exception():
    it = iter(DataLoader(FailsAt(1, ValueError("x")), num_workers=2))
    assert next(it).tolist() == [0]
    with pytest.raises(ValueError):
        next(it)
    assert [b.item() for b in it] == [2, 3, 4, 5]


def test_key_error_keeps_the_traceback_readable():
    with pytest.raises(KeyError) as info:
        list(DataLoader(FailsAt(0, KeyError("missing")), num_workers=1))
    text = str(info.value)
    assert text.startswith("Caught KeyError in DataLoader worker process 0.\n")
    assert "\\n" not in text  # not escaped into one line


def test_exception_that_cannot_be_rebuilt_becomes_runtime_error():
    with pytest.raises(RuntimeError, match="Caught NeedsTwoArgs in DataLoader worker process 0"):
        list(DataLoader(FailsAt(0, NeedsTwoArgs(1, 2)), num_workers=1))


def test_exception_in_worker_init_fn_is_reported():
    def bad_init(worker_id):
        raise RuntimeError(f"init failed in {worker_id}")

    with pytest.raises(RuntimeError, match=r"(?s)worker process 0.*init failed in 0"):
        list(DataLoader(Squares(4), num_workers=1, worker_init_fn=bad_init))


def test_batch_that_cannot_be_pickled_is_an_error_not_a_hang():
    with pytest.raises((pickle.PicklingError, AttributeError), match=r"(?s)process 0.*pickle"):
        list(DataLoader(Unpicklable(), batch_size=None, num_workers=1))


def test_killed_worker_is_reported_without_hanging():
    start = time.monotonic()
    with pytest.raises(RuntimeError, match=r"worker 1 \(pid \d+, killed by signal SIGKILL\)"):
        list(DataLoader(KillsItself(), num_workers=2))
    assert time.monotonic() - start < 10


def test_crash_of_a_worker_whose_stream_ended_is_reported_without_hanging():
    start = time.monotonic()
    with pytest.raises(RuntimeError, match=r"worker 0 \(pid \d+, killed by signal SIGKILL\)"):
        list(DataLoader(CrashesAfterItsStream(), num_workers=2))
    assert time.monotonic() - start < 10


def _start_worker(dataset):
    """A bare `worker_loop` (one worker, map-style, no batching) and its queues."""
    context = multiprocessing.get_context("fork")
    index_queue, result_queue, done_event = context.Queue(), context.Queue(), context.Event()
    args = (index_queue, result_queue, done_event, 0, 1, False, dataset, False, default_convert)
    worker = context.Process(target=worker_loop, args=(*args, False, 0, None), daemon=True)
    worker.start()
    return worker, index_queue, result_queue, done_event


def test_worker_stopped_mid_epoch_finishes_writing_its_reply_before_exiting():
    # NOTE: all workers share the result queue's write lock, held while a reply is written. A
    # worker exiting mid-write (its stream ended, its last reply still going out) would leave
    # the lock held, and every other worker unable to reply: the DataLoader would hang.
    worker, index_queue, result_queue, _ = _start_worker(Large())
    index_queue.put((0, 0))
    index_queue.put(None)  # stop, while the reply is still being written
    worker.join(timeout=1)
    assert worker.is_alive()
    task_idx, batch = pickle.loads(result_queue.get(timeout=10))
    assert task_idx == 0 and batch.shape == (2**20,)
    worker.join(timeout=10)
    assert worker.exitcode == 0
    result_queue.put("next")
    assert result_queue.get(timeout=10) == "next"  # the write lock was released


def test_worker_shutting_down_exits_without_waiting_for_its_reply_to_be_read():
    worker, index_queue, result_queue, done_event = _start_worker(Large())
    index_queue.put((0, 0))
    deadline = time.monotonic() + 10
    while result_queue.empty() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not result_queue.empty()  # the reply is being written; nobody will read it
    done_event.set()
    index_queue.put(None)
    worker.join(timeout=10)
    assert worker.exitcode == 0


def test_timeout_bounds_the_wait_for_a_batch():
    start = time.monotonic()
    with pytest.raises(RuntimeError, match=r"DataLoader timed out after 0\.3 seconds"):
        list(DataLoader(Sleeps(), num_workers=2, timeout=0.3))
    assert time.monotonic() - start < 5  # the sleeping worker was killed, not waited for


# -- persistent workers, prefetching, shutdown -------------------------------------------------
def test_persistent_workers_survive_epochs():
    loader = DataLoader(Squares(6), batch_size=2, num_workers=2, persistent_workers=True)
    assert _values(loader) == [[0, 1], [4, 9], [16, 25]]
    pids = [w.pid for w in _workers_of(loader)]
    it = iter(loader)
    next(it)  # an unfinished epoch: its queued batches must not leak into the next
    assert _values(loader) == [[0, 1], [4, 9], [16, 25]]
    assert [w.pid for w in _workers_of(loader)] == pids
    assert all(w.is_alive() for w in _workers_of(loader))


def test_persistent_workers_restart_an_iterable_dataset_each_epoch():
    loader = DataLoader(Shard(5), batch_size=2, num_workers=2, persistent_workers=True)
    assert _values(loader) == _values(loader) == [[0, 2], [1, 3], [4]]


def test_persistent_workers_exit_when_the_loader_is_dropped():
    loader = DataLoader(Squares(4), num_workers=2, persistent_workers=True)
    list(loader)
    workers = _workers_of(loader)
    del loader
    gc.collect()
    assert not any(w.is_alive() for w in workers)


def test_workers_are_joined_at_the_end_of_an_epoch_and_when_abandoned():
    list(DataLoader(Squares(4), num_workers=2))
    it = iter(DataLoader(Squares(100), num_workers=2))
    next(it)
    workers = it._pool.workers
    del it
    gc.collect()
    assert not any(w.is_alive() for w in workers)
    assert multiprocessing.active_children() == []  # nothing left running, no zombies


def test_workers_run_at_most_prefetch_factor_batches_ahead():
    counter = multiprocessing.get_context("fork").Value("i", 0)
    it = iter(DataLoader(Counting(counter), num_workers=2, prefetch_factor=1))
    next(it)
    deadline = time.monotonic() + 10
    while counter.value < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)  # time enough to overshoot, were the workers not held back
    assert counter.value == 3  # 2 workers x 1 in flight, refilled once for the batch taken


def test_workers_exit_when_the_main_process_dies():
    script = textwrap.dedent(
        """
        import time
        from tideflow.utils.data import DataLoader
        loader = DataLoader(range(10), num_workers=2, persistent_workers=True)
        list(loader)
        print(*[w.pid for w in loader._iterator._pool.workers], flush=True)
        time.sleep(60)
        """
    )
    command = [sys.executable, "-c", script]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as main:
        pids = [int(p) for p in main.stdout.readline().split()]
        main.kill()
    deadline = time.monotonic() + 10
    while any(_is_running(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_is_running(p) for p in pids)


def _is_running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_tensor_dataset_with_workers():
    x = flow.arange(12.0).view(6, 2)
    batches = list(DataLoader(TensorDataset(x, flow.arange(6)), batch_size=4, num_workers=2))
    assert [b[1].tolist() for b in batches] == [[0, 1, 2, 3], [4, 5]]
    assert batches[1][0].tolist() == [[8.0, 9.0], [10.0, 11.0]]
