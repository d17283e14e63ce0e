"""Data-parallel training speed: W1 (an MLP 784-1024-1024-10, global batch 128, Adam, cross
entropy) on one process against DistributedDataParallel on 2 ranks with the same global
batch (64 rows per rank), median step time of each and the speedup. PyTorch's one-process
step time on the same workload is shown beside them where PyTorch is installed.

`python benchmarks/ddp.py [--steps N] [--ranks R] [--threads T]` runs the one-process
measurement in a child process, then starts itself on R ranks with the launcher. Every
process gets T BLAS threads (default 1: one core per process, as data parallelism gives one
device to each rank), so the speedup is what R ranks add over one, communication (an
all-reduce of the 7.5 MB of gradients per step, in buckets) included. It cannot exceed the
number of free cores. The two runs alternate `--rounds` times and the medians over rounds are
reported, so that a busy machine slows both alike.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

GLOBAL_BATCH = 128
SIZES = (784, 1024, 1024, 10)
WARMUP = 3


def _batches(steps: int, rows: slice) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(0)
    out = []
    for _ in range(steps + WARMUP):
        x = rng.standard_normal((GLOBAL_BATCH, SIZES[0])).astype(np.float32)
        y = rng.integers(0, SIZES[-1], GLOBAL_BATCH)
        out.append((x[rows], y[rows]))
    return out


def _mlp(nn):
    layers = []
    for i, (a, b) in enumerate(itertools.pairwise(SIZES)):
        layers.append(nn.Linear(a, b))
        if i < len(SIZES) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def _median_step(lib, model, batches, barrier=lambda: None) -> float:
    """Median seconds per training step (forward, backward, Adam) after a warm-up."""
    opt = lib.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = lib.nn.CrossEntropyLoss()
    times = []
    for step, (x, y) in enumerate(batches):
        inputs, targets = lib.tensor(x), lib.tensor(y)
        barrier()
        start = time.perf_counter()
        opt.zero_grad()
        loss_fn(model(inputs), targets).backward()
        opt.step()
        if step >= WARMUP:
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def one_process(steps: int) -> tuple[float, float | None]:
    """(tideflow, PyTorch or None) median step seconds on the whole batch."""
    import tideflow as flow

    flow.manual_seed(0)
    ours = _median_step(flow, _mlp(flow.nn), _batches(steps, slice(None)))
    try:
        import torch
    except ImportError:
        return ours, None
    torch.manual_seed(0)
    return ours, _median_step(torch, _mlp(torch.nn), _batches(steps, slice(None)))


def data_parallel(steps: int) -> float | None:
    """On a launched rank: the median step seconds of the slowest rank with DDP (rank 0
    returns it, the others None)."""
    import tideflow as flow
    import tideflow.distributed as dist
    from tideflow.nn.parallel import DistributedDataParallel

    rank, size = dist.get_rank(), dist.get_world_size()
    share = GLOBAL_BATCH // size
    flow.manual_seed(0)
    model = DistributedDataParallel(_mlp(flow.nn))
    mine = _median_step(flow, model, _batches(steps, slice(rank * share, (rank + 1) * share)),
                        barrier=dist.barrier)  # fmt: skip
    slowest = flow.tensor([mine], dtype=flow.float64)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    return slowest.item() if rank == 0 else None


def report(ranks: int, threads: int, single, torch_single, ddp: float) -> str:
    lines = [
        f"W1: MLP {'-'.join(map(str, SIZES))}, global batch {GLOBAL_BATCH}, Adam "
        f"({os.cpu_count()} cores, {threads} BLAS thread(s) per process)",
        f"  tideflow, 1 process           {single * 1e3:8.1f} ms/step",
        f"  tideflow DDP, {ranks} ranks         {ddp * 1e3:8.1f} ms/step "
        f"(speedup {single / ddp:.2f}x)",
    ]
    if torch_single is not None:
        lines.append(
            f"  PyTorch, 1 process            {torch_single * 1e3:8.1f} ms/step "
            f"(tideflow / PyTorch {single / torch_single:.2f}x)"
        )
    return "\n".join(lines)


def _child(args: list[str], threads: int) -> dict:
    """Run this script with `args` and BLAS limited to `threads`; its JSON result line."""
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "OPENBLAS_NUM_THREADS": str(threads)}
    job = subprocess.run(args, capture_output=True, text=True, env=env, check=False)
    lines = [line for line in job.stdout.splitlines() if line.startswith("{")]
    if job.returncode != 0 or not lines:
        sys.exit(f"{' '.join(args)} failed:\n{job.stdout}\n{job.stderr}")
    return json.loads(lines[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--job", choices=["single", "ranks"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.job == "single":
        print(json.dumps(dict(zip(("ours", "torch"), one_process(args.steps), strict=True))))
        return
    if args.job == "ranks":
        slowest = data_parallel(args.steps)
        if slowest is not None:
            print(json.dumps({"ddp": slowest}))
        return
    script = [os.path.abspath(__file__), "--steps", str(args.steps)]
    launch = [sys.executable, "-m", "tideflow.distributed.launch", "--nproc_per_node"]
    singles, ddps = [], []
    for _ in range(args.rounds):
        singles.append(_child([sys.executable, *script, "--job", "single"], args.threads))
        ranks = _child([*launch, str(args.ranks), *script, "--job", "ranks"], args.threads)
        ddps.append(ranks["ddp"])
    ours = statistics.median(r["ours"] for r in singles)
    torch_runs = [r["torch"] for r in singles if r["torch"] is not None]
    theirs = statistics.median(torch_runs) if torch_runs else None
    print(report(args.ranks, args.threads, ours, theirs, statistics.median(ddps)))


if __name__ == "__main__":
    main()
