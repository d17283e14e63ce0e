"""Run on every rank under mpiexec: rank 1 fails in the way argv[1] names, while the other
ranks wait for it in a collective. tideflow must end every rank, naming rank 1."""

from __future__ import annotations

import sys
import threading
import time

import tideflow as flow
import tideflow.distributed as dist
from tideflow.distributed.world import launcher_rank_and_size

mode = sys.argv[1]
rank = launcher_rank_and_size()[0]  # known without joining the world
if mode == "raise_before_joining" and rank == 1:
    raise ValueError("rank 1 broke before joining")
t = flow.ones(3)
dist.all_reduce(t)
if rank == 1:
    time.sleep(0.2)  # the others are in the next all_reduce by now
    if mode == "raise":
        raise ValueError("rank 1 broke")
    if mode == "exit":
        sys.exit(3)
    if mode == "thread":
        threading.Thread(target=lambda: 1 / 0, name="loader").start()
        time.sleep(60)
    if mode == "skip_collective":
        time.sleep(60)
dist.all_reduce(t)
print(f"rank {rank} finished", flush=True)
