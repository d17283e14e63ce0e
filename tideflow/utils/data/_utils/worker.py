"""The loop each DataLoader worker process runs, and `get_worker_info()` for code inside it."""

from __future__ import annotations

import os
import queue
from dataclasses import dataclass
from typing import Any

from .fetch import create_fetcher
from .seeding import seed_worker
from .transport import (
    STATUS_CHECK_INTERVAL,
    ExceptionWrapper,
    IterableDatasetStopIteration,
    ResumeIteration,
    dumps,
)

__all__ = ["WorkerInfo", "get_worker_info"]


@dataclass(frozen=True)
class WorkerInfo:
    """What a worker knows about itself: `id` (0..num_workers-1), `num_workers`, the `seed`
    its RNGs were seeded with, and `dataset`, this process's own copy of the dataset."""

    id: int
    num_workers: int
    seed: int
    dataset: Any


_worker_info: WorkerInfo | None = None


def get_worker_info() -> WorkerInfo | None:
    """Inside a DataLoader worker process, its `WorkerInfo`; in the main process, None.
    Use it to shard an IterableDataset or to configure each worker's dataset copy.

    >>> flow.utils.data.get_worker_info() is None  # the main process
    True
    """
    return _worker_info


def worker_loop(
    index_queue,
    result_queue,
    done_event,
    worker_id: int,
    num_workers: int,
    is_iterable: bool,
    dataset,
    auto_collation: bool,
    collate_fn,
    drop_last: bool,
    base_seed: int,
    init_fn,
) -> None:
    """Serve `(task_idx, key or batch of keys)` from `index_queue` with `(task_idx, batch)`
    replies on `result_queue` until told to stop (None) or the main process is gone."""
    global _worker_info
    parent = os.getppid()
    try:
        seed = seed_worker(base_seed, worker_id)
        _worker_info = WorkerInfo(id=worker_id, num_workers=num_workers, seed=seed, dataset=dataset)
        where = f"in DataLoader worker process {worker_id}"

        init_error = None
        try:
            if init_fn is not None:
                init_fn(worker_id)
        except Exception:
            init_error = ExceptionWrapper(where)

        def start_epoch():
            """A fresh fetcher, or the error that prevents one: the reply to every task."""
            if init_error is not None:
                return init_error
            try:
                return create_fetcher(is_iterable, dataset, auto_collation, collate_fn, drop_last)
            except Exception:
                return ExceptionWrapper(where)

        fetcher = start_epoch()
        iteration_end = False
        while os.getppid() == parent:  # orphaned workers exit instead of lingering
            try:
                task = index_queue.get(timeout=STATUS_CHECK_INTERVAL)
            except queue.Empty:
                continue
            if isinstance(task, ResumeIteration):
                result_queue.put(dumps((task, None)))
                iteration_end = False
                fetcher = start_epoch()
                continue
            if task is None:
                break
            if done_event.is_set() or iteration_end:
                continue  # shutting down, or nothing left to read: skip until the None
            task_idx, index = task
            if isinstance(fetcher, ExceptionWrapper):
                reply = fetcher
            else:
                reply = _fetch(fetcher, index, is_iterable, worker_id, where)
                iteration_end = isinstance(reply, IterableDatasetStopIteration)
            result_queue.put(_encode(task_idx, reply, where))
            del task, index, reply  # do not hold a batch while waiting for the next task
    except KeyboardInterrupt:
        pass  # Ctrl-C reaches the main process too; it shuts the workers down
    _close_result_queue(result_queue, abandoned=done_event.is_set() or os.getppid() != parent)


def _close_result_queue(result_queue, abandoned: bool) -> None:
    """Close this worker's end of the shared result queue before the process exits.

    The queue's feeder thread holds a lock shared by all workers while it writes a reply, and
    a process exits without waiting for that (daemon) thread, killing it wherever it is unless
    the queue's finalizer joins it. A worker told to stop in the middle of an epoch (its
    IterableDataset shard ended) must therefore wait for the thread to finish: killed between
    writing its last reply and releasing the lock, it would leave every other worker unable to
    reply, and the main process waiting forever. The wait is short: that last reply has been
    read, or the worker would not have been told to stop. Only when nobody will read (the
    loader is shutting down, or the main process is gone) could a full pipe block the wait,
    and then exiting at once is what matters.
    """
    if abandoned:
        result_queue.cancel_join_thread()
    result_queue.close()
    result_queue.join_thread()


def _fetch(fetcher, index, is_iterable: bool, worker_id: int, where: str):
    """The reply to one task: a batch, the end of this worker's stream, or an error."""
    try:
        return fetcher.fetch(index)
    except StopIteration:
        if is_iterable:
            return IterableDatasetStopIteration(worker_id)
        return ExceptionWrapper(where)
    except Exception:
        return ExceptionWrapper(where)


def _encode(task_idx: int, reply, where: str) -> bytes:
    try:
        return dumps((task_idx, reply))
    except Exception:
        return dumps((task_idx, ExceptionWrapper(where)))
