"""Run under `mpiexec -n 2`: ping-pong between the two ranks through tideflow's MPI
communicator; rank 0 prints {"latency_s", "bandwidth"} as one JSON line."""

import json
import time

import numpy as np

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


def main() -> None:
    comm = init().comm
    latency = _half_round_trip(comm, SMALL, 200)
    bandwidth = LARGE / max(_half_round_trip(comm, LARGE, 10) - latency, 1e-9)
    if comm.rank == 0:
        print(json.dumps({"latency_s": latency, "bandwidth": bandwidth}))


if __name__ == "__main__":
    main()
