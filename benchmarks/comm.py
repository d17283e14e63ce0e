"""Collective bandwidth, flow.comm vs raw mpi4py on NumPy buffers in the same run.

`python benchmarks/comm.py` starts itself on 2 ranks with the launcher (or run it under any
launcher: `mpiexec -n 4 python benchmarks/comm.py`). For each collective and message size
(64 KiB to 16 MiB of float32 per rank) the ranks alternate timing rounds of tideflow and of
mpi4py's buffer call on the same data; the table gives median algorithm bandwidth (bytes
per rank / time) and tideflow's share of mpi4py's.

`all_gather` into a list is compared with mpi4py's Allgatherv into the same separate arrays,
the call it makes; MPICH's Allgatherv is slower than its Allgather at large sizes, so code
that wants the peak uses `all_gather_into_tensor`.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

import numpy as np

import tideflow as flow
import tideflow.comm  # binds flow.comm
from tideflow.distributed.world import launched

SIZES = [64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20]  # bytes per rank
ROUNDS = 21


def _cases(comm, MPI, nbytes: int):
    """(name, tideflow call, mpi4py call) on buffers of `nbytes` per rank."""
    world = comm.Get_size()
    n = nbytes // 4
    data = np.random.default_rng(comm.Get_rank()).standard_normal(n).astype(np.float32)
    t_in, t_out, t_part = flow.tensor(data), flow.empty(world * n), flow.empty(n // world)
    t_list = [flow.empty(n) for _ in range(world)]
    a_in, a_out = data.copy(), np.empty(world * n, np.float32)
    a_part = np.empty(n // world, np.float32)
    a_list = [np.empty(n, np.float32) for _ in range(world)]
    # NOTE: displacements from MPI_BOTTOM are byte addresses, so the blocks go as bytes;
    # the call below holds a_list, which MPI writes to through the addresses.
    a_bytes, counts = a_in.view(np.uint8), [nbytes] * world
    addresses, BYTE = [MPI.Get_address(a) for a in a_list], MPI.BYTE
    return [
        (
            "all_reduce",
            lambda: flow.comm.all_reduce(t_in),
            lambda: comm.Allreduce(MPI.IN_PLACE, a_in, MPI.SUM),
        ),
        (
            "all_gather_into_tensor",
            lambda: flow.comm.all_gather_into_tensor(t_out, t_in),
            lambda: comm.Allgather(a_in, a_out),
        ),
        (
            "all_gather (list)",
            lambda: flow.comm.all_gather(t_list, t_in),
            lambda keep=a_list: comm.Allgatherv(a_bytes, [MPI.BOTTOM, counts, addresses, BYTE]),
        ),
        (
            "reduce_scatter_tensor",
            lambda: flow.comm.reduce_scatter_tensor(t_part, t_in),
            lambda: comm.Reduce_scatter_block(a_in, a_part, MPI.SUM),
        ),
    ]


def _time(comm, MPI, fn, reps: int) -> float:
    comm.Barrier()
    start = time.perf_counter()
    for _ in range(reps):
        fn()
    # NOTE: the slowest rank's time, so both libraries are timed to the same finish line.
    return comm.allreduce(time.perf_counter() - start, op=MPI.MAX) / reps


def run() -> list[tuple[str, int, float, float]]:
    from mpi4py import MPI  # only on launched ranks: importing it initializes MPI

    comm = MPI.COMM_WORLD
    rows = []
    for nbytes in SIZES:
        reps = max(3, (8 << 20) // nbytes)
        for name, ours, theirs in _cases(comm, MPI, nbytes):
            ours(), theirs()  # warm up (and create the communicator)
            t_ours, t_theirs = [], []
            for i in range(ROUNDS):  # alternating which goes first evens out drift
                pair = [(t_ours, ours), (t_theirs, theirs)]
                for times, fn in pair if i % 2 else pair[::-1]:
                    times.append(_time(comm, MPI, fn, reps))
            rows.append((name, nbytes, statistics.median(t_ours), statistics.median(t_theirs)))
    return rows


def report(rows, world: int) -> str:
    lines = [
        f"collective bandwidth on {world} ranks (GB/s = bytes per rank / median time)",
        f"{'collective':24} {'size':>8} {'tideflow':>10} {'mpi4py':>10} {'ratio':>7}",
    ]
    for name, nbytes, ours, theirs in rows:
        size = f"{nbytes >> 20} MiB" if nbytes >= 1 << 20 else f"{nbytes >> 10} KiB"
        lines.append(
            f"{name:24} {size:>8} {nbytes / ours / 1e9:>10.2f} {nbytes / theirs / 1e9:>10.2f} "
            f"{theirs / ours:>6.2f}x"
        )
    return "\n".join(lines)


def main() -> None:
    if not launched():
        cmd = [sys.executable, "-m", "tideflow.distributed.launch", "--nproc_per_node", "2"]
        sys.exit(subprocess.call([*cmd, os.path.abspath(__file__)]))
    from mpi4py import MPI

    rows = run()
    if MPI.COMM_WORLD.Get_rank() == 0:
        print(report(rows, MPI.COMM_WORLD.Get_size()))


if __name__ == "__main__":
    main()
