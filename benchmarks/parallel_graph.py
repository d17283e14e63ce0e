"""Parallel graphs on 2 ranks: data-parallel training steps of W1 (MLP 784-1024-1024-10,
global batch 128, Adam) and W3 (GPT 4x256, block 128, global batch 8, AdamW) as an nn.Graph
over global tensors, as eager DistributedDataParallel, and as PyTorch DDP (gloo) in the same
run; the per-rank memory of W3's parameters, optimizer state and transient arrays (the
memory plan's peak) with ZeRO stages 0 to 3; then the measured bubble of a 2-stage pipeline
against 1F1B's ideal (p-1)/(m+p-1).

`python benchmarks/parallel_graph.py [--steps N] [--threads T] [--only PART]` starts itself
on 2 ranks with the launcher; each process gets T BLAS threads (default 1: one core per
rank); `--only data|zero|pipeline` runs one of the three parts (PyTorch is needed only for
the data-parallel comparison). The three
data-parallel steps are interleaved (one of each, round after round), so a busy machine
slows them alike; each step ends when its loss is on the host, and every rank reports the
median of the slowest rank's step times.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from train_workloads import GPT_CONFIG, _mlp, _torch_gpt

import tideflow as flow
import tideflow.distributed as dist
import tideflow.parallel as par
from tideflow.models import GPT
from tideflow.nn.graph import GraphModule

WARMUP = 3
S = par.sbp


def _workloads():
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, GPT_CONFIG.vocab_size, (8, GPT_CONFIG.block_size + 1))
    mlp = (rng.standard_normal((128, 784), dtype=np.float32), rng.integers(0, 10, 128))
    return [
        ("W1 MLP, Adam", _mlp, lambda lib, p: lib.optim.Adam(p, lr=1e-3), mlp, False),
        (
            "W3 GPT 4x256, AdamW",
            lambda lib: GPT(GPT_CONFIG) if lib is flow else _torch_gpt(lib, GPT_CONFIG),
            lambda lib, p: lib.optim.AdamW(p, lr=3e-4),
            (tokens[:, :-1], tokens[:, 1:]),
            True,
        ),
    ]


def _loss(lib, model, x, y, gpt: bool):
    return model(x, y)[1] if gpt else lib.nn.functional.cross_entropy(model(x), y)


class _Train(flow.nn.Graph):
    def __init__(self, model, opt, gpt: bool, micro_batches: int = 1, zero: int = 0):
        super().__init__()
        self.model = model
        self.add_optimizer(opt)
        self.gpt = gpt
        if micro_batches > 1:
            self.config.set_gradient_accumulation_steps(micro_batches)
        if zero:
            self.config.enable_zero(True, stage=zero)

    def build(self, x, y):
        loss = _loss(flow, self.model, x, y, self.gpt)
        loss.backward()
        return loss


def _my_rows(a: np.ndarray) -> np.ndarray:
    """This rank's share of a global batch (every rank holds all of it)."""
    rank, size = dist.get_rank(), dist.get_world_size()
    share = len(a) // size
    return a[rank * share : (rank + 1) * share]


def _split_batch(batch, where) -> tuple:
    """The global batch split by rows over `where`, each rank giving its own rows (a local
    tensor made global with a split is the rank's shard, as in OneFlow)."""
    return tuple(flow.tensor(_my_rows(a)).to_global(where, S.split(0)) for a in batch)


def _graph_step(make_model, make_opt, batch, gpt) -> tuple[Callable[[], None], _Train]:
    where = par.placement("cpu", list(range(dist.get_world_size())))
    model = par.module_to_global(make_model(flow), where, S.broadcast)
    graph = _Train(model, make_opt(flow, model.parameters()), gpt)
    x, y = _split_batch(batch, where)
    return lambda: graph(x, y).to_local().numpy(), graph


def _ddp_step(lib, make_model, make_opt, batch, gpt) -> Callable[[], None]:
    """A DistributedDataParallel step of `lib` (tideflow or torch) on this rank's rows."""
    model = lib.nn.parallel.DistributedDataParallel(make_model(lib))
    opt = make_opt(lib, model.parameters())
    x, y = (lib.tensor(_my_rows(a)) for a in batch)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = _loss(lib, model, x, y, gpt)
        loss.backward()
        opt.step()
        loss.item()

    return step


def _slowest_median(times: list[float]) -> float:
    """The median over steps of the slowest rank's time (ms)."""
    mine = flow.tensor(np.array(times))
    dist.all_reduce(mine, op=dist.ReduceOp.MAX)
    return statistics.median(mine.numpy().tolist()) * 1e3


def _interleaved(steps: dict[str, Callable], n: int) -> dict[str, float]:
    for _ in range(WARMUP):
        for fn in steps.values():
            fn()
    times: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(n):
        for name, fn in steps.items():
            dist.barrier()
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: _slowest_median(t) for name, t in times.items()}


def data_parallel(torch, n: int) -> list[str]:
    """Step times, and the share of the graph's communication time (its gradient
    all-reduces) during which the rank computed, in the last step."""
    lines = [f"{'data parallel, 2 ranks (ms/step)':32} {'graph':>8} {'eager':>8} {'torch':>8}"
             f" {'graph/torch':>12} {'eager/torch':>12} {'overlap':>8}"]  # fmt: skip
    for name, make_model, make_opt, batch, gpt in _workloads():
        flow.manual_seed(0)
        torch.manual_seed(0)
        graph_step, graph = _graph_step(make_model, make_opt, batch, gpt)
        steps = {
            "graph": graph_step,
            "eager": _ddp_step(flow, make_model, make_opt, batch, gpt),
            "torch": _ddp_step(torch, make_model, make_opt, batch, gpt),
        }
        t = _interleaved(steps, n)
        lines.append(
            f"{name:32} {t['graph']:8.1f} {t['eager']:8.1f} {t['torch']:8.1f}"
            f" {t['graph'] / t['torch']:12.2f} {t['eager'] / t['torch']:12.2f}"
            f" {graph.timeline().overlap:8.1%}"
        )
    return lines


def _mib(tensors) -> float:
    return sum(t.detach().to_local().numpy().nbytes for t in tensors) / 2**20


def zero_memory(n: int) -> list[str]:
    """W3 data parallel on 2 ranks: what rank 0 holds with each ZeRO stage (MiB): its
    parameters (stage 3: their slices), optimizer state, and the peak of transient arrays
    in a step (gradients, activations, stage 3's gathered parameters): the memory plan's,
    and the one measured (tracemalloc, one more step: the streams run as they do)."""
    lines = ["ZeRO, W3 data parallel (rank 0)   params  opt. state  transient peak "
             "(plan / measured)  ms/step"]  # fmt: skip
    _, make_model, make_opt, batch, gpt = _workloads()[1]
    where = par.placement("cpu", list(range(dist.get_world_size())))
    for stage in (0, 1, 2, 3):
        flow.manual_seed(0)
        model = par.module_to_global(make_model(flow), where, S.broadcast)
        opt = make_opt(flow, model.parameters())
        graph = _Train(model, opt, gpt, zero=stage)
        x, y = _split_batch(batch, where)
        times = []
        for step in range(WARMUP + n):
            dist.barrier()
            start = time.perf_counter()
            graph(x, y).to_local().numpy()
            if step >= WARMUP:
                times.append(time.perf_counter() - start)
        state = [t for s in opt.state.values() for t in s.values() if isinstance(t, flow.Tensor)]
        peak = graph._latest.program.memory.peak_bytes / 2**20
        tracemalloc.start()  # NOTE: counts what is allocated from here on, every thread's
        graph(x, y).to_local().numpy()
        measured = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
        lines.append(
            f"  stage {stage}                      {_mib(model.parameters()):6.1f}  "
            f"{_mib(state):10.1f}  {peak:14.1f} / {measured:8.1f}  {_slowest_median(times):7.1f}"
        )
    return lines


def pipeline_bubble(n: int) -> list[str]:
    """W1's MLP cut into 2 stages (one rank each), the global batch of 128 in m micro-batches."""
    stages = [par.placement("cpu", [r]) for r in range(dist.get_world_size())]
    lines = ["pipeline, 2 stages (W1 MLP)     ms/step  bubble  1F1B ideal"]
    rng = np.random.default_rng(0)
    x = rng.standard_normal((128, 784), dtype=np.float32)
    y = rng.integers(0, 10, 128)
    for m in (2, 4, 8):
        flow.manual_seed(0)
        model = _mlp(flow)
        halves = (model[:2], model[2:])
        for half, where in zip(halves, stages, strict=True):
            par.module_to_global(half, where, S.broadcast)
        graph = _Train(model, flow.optim.Adam(model.parameters(), lr=1e-3), False, m)
        for i in range(len(model)):  # the first Linear and its ReLU, then the rest
            stage = 0 if i < 2 else 1
            graph.model[i].to(GraphModule).set_stage(stage, stages[stage])
        gx, gy = (
            flow.tensor(x).to_global(stages[0], S.broadcast),
            flow.tensor(y).to_global(stages[1], S.broadcast),
        )
        times, bubbles = [], []
        for step in range(WARMUP + n):
            dist.barrier()
            start = time.perf_counter()
            graph(gx, gy).to_local().numpy()
            if step >= WARMUP:
                times.append(time.perf_counter() - start)
                bubbles.append(graph.timeline().bubble)
        ideal = (len(stages) - 1) / (m + len(stages) - 1)
        lines.append(
            f"  m = {m} micro-batches            {_slowest_median(times):7.1f}"
            f"  {statistics.median(bubbles):6.1%}  {ideal:10.1%}"
        )
    return lines


def _on_ranks(args) -> None:
    rank, size = dist.get_rank(), dist.get_world_size()
    lines = []
    if args.only in (None, "data"):
        import torch

        torch.set_num_threads(args.threads)
        torch.distributed.init_process_group(
            "gloo", init_method=f"tcp://127.0.0.1:{args.port}", rank=rank, world_size=size
        )
        lines += data_parallel(torch, args.steps)
        torch.distributed.destroy_process_group()
    if args.only in (None, "zero"):
        lines += zero_memory(args.steps)
    if args.only in (None, "pipeline"):
        lines += pipeline_bubble(args.steps)
    if rank == 0:
        print("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=15)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--port", type=int, default=29531)
    parser.add_argument("--only", choices=("data", "zero", "pipeline"), help="run one part")
    parser.add_argument("--on-ranks", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.on_ranks:
        _on_ranks(args)
        return
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}
    env["OPENBLAS_NUM_THREADS"] = str(args.threads)
    launch = [sys.executable, "-m", "tideflow.distributed.launch", "--nproc_per_node", "2"]
    script = [__file__, "--on-ranks", "--steps", str(args.steps), "--threads", str(args.threads)]
    if args.only:
        script += ["--only", args.only]
    sys.exit(subprocess.run([*launch, *script, "--port", str(args.port)], env=env).returncode)


if __name__ == "__main__":
    main()
