"""A torch.distributed program, unchanged: run by the launcher through tideflow.mock_torch.
Each rank writes its results to <argv[1]>/rank<R>."""

import json
import os
import sys

import torch
import torch.distributed as dist

dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
rank, world_size = dist.get_rank(), dist.get_world_size()
local_rank = int(os.environ["LOCAL_RANK"])
t = torch.ones(3) * (rank + 1)
dist.all_reduce(t, op=dist.ReduceOp.SUM)
gathered = [torch.zeros(2) for _ in range(world_size)]
dist.all_gather(gathered, torch.full((2,), float(rank)))
with open(os.path.join(sys.argv[1], f"rank{rank}"), "w") as f:
    json.dump([local_rank, t.tolist(), [g.tolist() for g in gathered]], f)
dist.destroy_process_group()
