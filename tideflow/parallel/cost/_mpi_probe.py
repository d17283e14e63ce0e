"""Run under `mpiexec -n N`: timings through tideflow's MPI communicator; rank 0 prints
them as one JSON line. {"allreduce_s"}: an 8-byte all-reduce over every rank; with two
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


def _allreduce(comm, seconds: float = 0.5) -> float:
    """The mean time of back-to-back all-reduces (not the best: the waits for descheduled
    ranks that oversubscribed cores add are what is measured)."""
    send, out = np.zeros(2, np.float32), np.empty(2, np.float32)
    for _ in range(10):
        comm.allreduce(send, out, ReduceOp.SUM)
    calls, start = 0, time.perf_counter()
    stop, stopping = np.zeros(1, np.float32), np.zeros(1, np.float32)
    while not stopping[0]:
        for _ in range(10):
            comm.allreduce(send, out, ReduceOp.SUM)
        # NOTE: rank 0's clock decides for all, so every rank makes the same calls
        stop[0] = comm.rank == 0 and time.perf_counter() - start > seconds
        comm.allreduce(stop, stopping, ReduceOp.SUM)
        calls += 11
    return (time.perf_counter() - start) / calls


def main() -> None:
    comm = init().comm
    measured = {"allreduce_s": _allreduce(comm)}
    if comm.size == 2:
        latency = _half_round_trip(comm, SMALL, 200)
        bandwidth = LARGE / max(_half_round_trip(comm, LARGE, 10) - latency, 1e-9)
        measured |= {"latency_s": latency, "bandwidth": bandwidth}
    if comm.rank == 0:
        print(json.dumps(measured))


if __name__ == "__main__":
    main()
