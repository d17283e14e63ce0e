"""Under the launcher, 2 ranks: rank 0 exits normally at once; rank 1 outlives it, starts a
Python process that imports tideflow (as a spawned DataLoader worker does, inheriting the
rank's environment), then dies of SIGKILL. The launcher must leave rank 1 running when rank 0
exits, and then name rank 1, by its own process id, as the rank that died without a word."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from tideflow.distributed.world import launcher_rank_and_size

rank = launcher_rank_and_size()[0]
if rank == 0:
    print("rank 0: done", flush=True)
    sys.exit(0)
time.sleep(1.0)  # rank 0 has exited by now
subprocess.run([sys.executable, "-c", "import tideflow"], check=True)
print(f"rank 1: pid {os.getpid()}", flush=True)
os.kill(os.getpid(), signal.SIGKILL)
