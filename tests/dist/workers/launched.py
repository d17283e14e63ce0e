"""Started by the launcher: each rank writes what it sees to <argv[1]>/rank<R>."""

from __future__ import annotations

import json
import os
import sys

import tideflow.distributed as dist
import tideflow.env as env

out_dir = sys.argv[1]
seen = {
    "rank": env.get_rank(),
    "world_size": env.get_world_size(),
    "local_rank": env.get_local_rank(),
    "torch_env": [os.environ.get(k) for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK")],
    "argv": sys.argv[1:],
    "name": __name__,
}
dist.barrier()
with open(os.path.join(out_dir, f"rank{env.get_rank()}"), "w") as f:
    json.dump(seen, f)
