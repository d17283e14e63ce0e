"""Run under `mpiexec -n N`: timings through tideflow's MPI communicator; rank 0 prints
them as one JSON line. {"iteration_s", "work_sum_s", "work_max_s"}: a step's pattern, a
slab of small kernels between 8-byte all-reduces over every rank: per iteration its wall
time, and the CPU time of the slabs summed over ranks and on the busiest one. With two
ranks also {"latency_s", "bandwidth"} from ping-pong between them."""

import json
import time

import numpy as np

from ...distributed.backend import ReduceOp
from ...distributed.world import init

SMALL, LARGE = 8, 16 << 20


def _half_round_trip(comm, nbytes: int, repeats: int) -> float:
    buf = np.zeros(nbytes, np.uint8)
    peer = 1 - comm.rank
    best = float("inf")
    for _ in range(repeats):
        comm.barrier()
        start = time.perf_counter()
        if comm.rank == 0:
            comm.send(buf, peer)
            comm.recv(buf, peer)
        else:
            comm.recv(buf, peer)
            comm.send(buf, peer)
        best = min(best, time.perf_counter() - start)
    return best / 2


# NOTE: about a millisecond of small kernels, as a compiled step runs between collectives
SLAB_KERNELS = 1000


def _slab(a: np.ndarray, out: np.ndarray) -> float:
    """The CPU time this thread spent on one slab of small kernels."""
    start = time.thread_time()
    for _ in range(SLAB_KERNELS):
        np.add(a, a, out=out)
    return time.thread_time() - start


def _work_and_allreduce(comm, seconds: float = 0.5) -> dict:
    """Slabs of work between 8-byte all-reduces, as long as rank 0's clock says."""
    a, out = np.ones(1024, np.float32), np.empty(1024, np.float32)
    send, result = np.zeros(2, np.float32), np.empty(2, np.float32)
    for _ in range(3):
        _slab(a, out)
        comm.allreduce(send, result, ReduceOp.SUM)
    cpu, iterations = 0.0, 0
    stop, stopping = np.zeros(1, np.float32), np.zeros(1, np.float32)
    start = time.perf_counter()
    while not stopping[0]:
        cpu += _slab(a, out)
        comm.allreduce(send, result, ReduceOp.SUM)
        iterations += 1
        if iterations % 10 == 0:
            stop[0] = comm.rank == 0 and time.perf_counter() - start > seconds
            comm.allreduce(stop, stopping, ReduceOp.SUM)
    wall = (time.perf_counter() - start) / iterations
    mine, total, busiest = np.array([cpu / iterations]), np.empty(1), np.empty(1)
    comm.allreduce(mine, total, ReduceOp.SUM)
    comm.allreduce(mine, busiest, ReduceOp.MAX)
    return {"iteration_s": wall, "work_sum_s": float(total[0]), "work_max_s": float(busiest[0])}


def main() -> None:
    comm = init().comm
    measured = _work_and_allreduce(comm)
    if comm.size == 2:
        latency = _half_round_trip(comm, SMALL, 200)
        bandwidth = LARGE / max(_half_round_trip(comm, LARGE, 10) - latency, 1e-9)
        measured |= {"latency_s": latency, "bandwidth": bandwidth}
    if comm.rank == 0:
        print(json.dumps(measured))


if __name__ == "__main__":
    main()
