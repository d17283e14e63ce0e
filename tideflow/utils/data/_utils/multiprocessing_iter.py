"""Loading in worker processes: the pool of workers and the iterator that feeds them keys and
hands back their batches in sampler order.

Each worker has its own index queue; all reply on one result queue. The iterator keeps at most
`prefetch_factor * num_workers` tasks in flight, dealt round-robin, and parks replies that
arrive ahead of their turn. A dead worker is noticed within `STATUS_CHECK_INTERVAL` seconds
and reported; shutting down (end of epoch, iterator dropped, interpreter exit) stops and joins
every worker, killing any that do not stop in time.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import queue
import signal
import time
import weakref

from .iterators import _BaseDataLoaderIter
from .transport import (
    STATUS_CHECK_INTERVAL,
    ExceptionWrapper,
    IterableDatasetStopIteration,
    ResumeIteration,
    loads,
)
from .worker import worker_loop


class _WorkerPool:
    """The worker processes of one iterator and the queues to and from them."""

    def __init__(self, context, num_workers: int, loading_args: tuple) -> None:
        self.result_queue = context.Queue()
        self.done_event = context.Event()
        self.index_queues = []
        self.workers = []
        self.closed = False
        self._owner_pid = os.getpid()
        try:
            for worker_id in range(num_workers):
                index_queue = context.Queue()
                # NOTE: the main process must never block at exit flushing keys to a worker
                # that is gone.
                index_queue.cancel_join_thread()
                args = (index_queue, self.result_queue, self.done_event, worker_id, num_workers)
                worker = context.Process(
                    target=worker_loop, args=(*args, *loading_args), daemon=True
                )
                worker.start()
                self.index_queues.append(index_queue)
                self.workers.append(worker)
        except BaseException:
            self.shutdown()
            raise

    def shutdown(self) -> None:
        """Stop and join every worker; idempotent. A no-op in a forked child, which inherits
        this object (and may garbage-collect it) but not the workers."""
        if self.closed or os.getpid() != self._owner_pid:
            return
        self.closed = True
        self.done_event.set()
        for index_queue in self.index_queues:
            index_queue.put(None)
        deadline = time.monotonic() + STATUS_CHECK_INTERVAL
        for worker in self.workers:
            worker.join(timeout=max(deadline - time.monotonic(), 0))
        for worker in self.workers:
            if worker.is_alive():
                worker.terminate()
                worker.join(timeout=STATUS_CHECK_INTERVAL)
            if worker.is_alive():  # a dataset may have set its own SIGTERM handler
                worker.kill()
                worker.join()
        for q in [*self.index_queues, self.result_queue]:
            q.cancel_join_thread()
            q.close()


def _exit_description(worker) -> str:
    code = worker.exitcode
    if code is not None and code < 0:
        return f"killed by signal {signal.Signals(-code).name}"
    return f"exit code {code}"


class _MultiProcessingDataLoaderIter(_BaseDataLoaderIter):
    """Feeds keys to worker processes and returns their batches in sampler order (or as they
    arrive, with `in_order=False`)."""

    def __init__(self, loader) -> None:
        super().__init__(loader)
        self._prefetch_factor = loader.prefetch_factor
        self._in_order = loader.in_order
        context = loader.multiprocessing_context or multiprocessing.get_context()
        loading_args = (
            self._is_iterable, self._dataset, self._auto_collation, self._collate_fn,
            self._drop_last, self._base_seed, loader.worker_init_fn,
        )  # fmt: skip
        self._pool = _WorkerPool(context, self._num_workers, loading_args)
        # The pool, not the iterator, is the finalizer's argument: dropping the iterator
        # (or exiting the interpreter) shuts the workers down.
        self._shutdown = weakref.finalize(self, self._pool.shutdown)
        self._crashes_reported: set[int] = set()  # workers whose abnormal exit was raised
        self._reset(loader, first_iter=True)

    def _reset(self, loader, first_iter: bool = False) -> None:
        super()._reset(loader)
        n = self._num_workers
        self._send_idx = 0  # the next task to send
        self._rcvd_idx = 0  # the next task to return
        self._task_info: dict[int, tuple] = {}  # task -> (worker,) or (worker, reply)
        self._workers_status = [True] * n  # False: stream ended, or the worker died
        self._workers_num_tasks = [0] * n
        self._worker_cycle = itertools.cycle(range(n))
        if not first_iter:
            # Persistent workers: replies still queued from an unfinished epoch come before
            # the acknowledgements and are dropped.
            for index_queue in self._pool.index_queues:
                index_queue.put(ResumeIteration())
            pending = n
            while pending:
                task_idx, _ = self._get_data()
                pending -= isinstance(task_idx, ResumeIteration)
        for _ in range(self._prefetch_factor * n):
            self._try_put_index()

    def _try_put_index(self) -> None:
        try:
            index = self._next_index()
        except StopIteration:
            return
        active = sum(self._workers_status)
        for _ in range(self._num_workers):
            worker_id = next(self._worker_cycle)
            if not self._workers_status[worker_id]:
                continue
            # Out of order, a slow worker must not hoard tasks the others could finish.
            if self._in_order or self._workers_num_tasks[worker_id] < (
                self._prefetch_factor * self._num_workers // active
            ):
                break
        else:
            return
        self._pool.index_queues[worker_id].put((self._send_idx, index))
        self._task_info[self._send_idx] = (worker_id,)
        self._workers_num_tasks[worker_id] += 1
        self._send_idx += 1

    def _next_data(self):
        while True:
            if not self._skip_to_answerable_task():
                if not self._persistent_workers:
                    self._shutdown()
                raise StopIteration
            task = self._task_info[self._rcvd_idx]
            if len(task) == 2:  # its reply arrived earlier
                del self._task_info[self._rcvd_idx]
                self._rcvd_idx += 1
                return self._process_data(*task)
            task_idx, reply = self._get_data()
            if isinstance(reply, IterableDatasetStopIteration):
                self._retire_worker(reply.worker_id)
                self._try_put_index()
                continue
            worker_id = self._task_info[task_idx][0]
            if task_idx == self._rcvd_idx:
                self._rcvd_idx += 1
            elif self._in_order:
                self._task_info[task_idx] = (worker_id, reply)  # parked until its turn
                continue
            del self._task_info[task_idx]
            return self._process_data(worker_id, reply)

    def _skip_to_answerable_task(self) -> bool:
        """Advance `_rcvd_idx` past tasks that will never be answered (returned out of order,
        or sent to a worker whose stream has ended); False when no task is left."""
        while self._rcvd_idx < self._send_idx:
            task = self._task_info.get(self._rcvd_idx)
            if task is not None and (len(task) == 2 or self._workers_status[task[0]]):
                return True
            self._task_info.pop(self._rcvd_idx, None)
            self._rcvd_idx += 1
        return False

    def _process_data(self, worker_id: int, reply):
        self._workers_num_tasks[worker_id] -= 1
        self._try_put_index()
        if isinstance(reply, ExceptionWrapper):
            reply.reraise()
        return reply

    def _retire_worker(self, worker_id: int) -> None:
        """A worker's stream has ended: send it no more tasks (and let it exit, unless it
        is kept for the next epoch)."""
        self._workers_status[worker_id] = False
        if not self._persistent_workers:
            self._pool.index_queues[worker_id].put(None)

    def _get_data(self):
        """The next reply from any worker: `(task_idx, batch or message)`."""
        deadline = time.monotonic() + self._timeout if self._timeout > 0 else None
        while True:
            wait = STATUS_CHECK_INTERVAL
            if deadline is not None:
                wait = max(min(wait, deadline - time.monotonic()), 0)
            try:
                return loads(self._pool.result_queue.get(timeout=wait))
            except queue.Empty:
                self._raise_if_workers_died()
            except (OSError, EOFError) as e:
                self._raise_if_workers_died(e)
                raise
            if deadline is not None and time.monotonic() >= deadline:
                raise RuntimeError(f"DataLoader timed out after {self._timeout} seconds")

    def _raise_if_workers_died(self, cause: BaseException | None = None) -> None:
        """Raise if a worker that owes replies has exited, or if any worker crashed (exited
        with an error code or a signal), even one whose stream had ended: a worker killed
        while writing a reply leaves the result queue's shared write lock held, and no other
        worker can reply after it. A crash is reported once; a worker that owes replies, each
        epoch it is found exited."""
        dead = [
            (worker_id, worker)
            for worker_id, worker in enumerate(self._pool.workers)
            if not worker.is_alive()
            and (
                self._workers_status[worker_id]
                or (worker.exitcode != 0 and worker_id not in self._crashes_reported)
            )
        ]
        if not dead:
            return
        for worker_id, worker in dead:
            self._workers_status[worker_id] = False
            if worker.exitcode != 0:
                self._crashes_reported.add(worker_id)
        details = ", ".join(
            f"worker {worker_id} (pid {worker.pid}, {_exit_description(worker)})"
            for worker_id, worker in dead
        )
        raise RuntimeError(f"DataLoader worker(s) exited unexpectedly: {details}") from cause
