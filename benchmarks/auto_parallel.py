"""Auto-parallel against plain data parallelism on 4 ranks: W3 (GPT 4x256, block 128, AdamW)
as an nn.Graph over global tensors, (a) data parallel (parameters broadcast, the batch split
over the ranks, each op in the global mode's greedy layout), (b) the same annotations with
`config.enable_auto_parallel(True)` and (c) auto-parallel from a batch every rank holds
whole. Rank 0 prints the searched plans (`graph.debug(0)`), checks that every graph's first
steps give the losses of one eager process, and prints a table: each plan's predicted step
(the search's, and priced with the compiled plan's own counts of nodes, tasks and
collectives) against its measured one, and how many ops the searched plans lay out unlike
data parallelism.

    python benchmarks/auto_parallel.py [--steps N] [--batches B ...] [--ranks R]

The profile the search prices with is calibrated afresh in a temporary cache first (so the
one in ~/.cache is left as it was), then the launcher starts R ranks (default 4), one BLAS
thread each: on a machine with fewer cores than ranks, ranks time-share the cores, which
the profile measures. The graphs' steps are interleaved (one of each, round after
round), so a busy machine slows them alike; each step ends when its loss is on the host,
and the table gives the median of the slowest rank's step times.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from train_workloads import GPT_CONFIG

import tideflow as flow
import tideflow.distributed as dist
import tideflow.parallel as par
from tideflow.models import GPT
from tideflow.nn.graph.auto_parallel import plan_counts

CHECKED_STEPS = 3  # compared with one process; they warm the graphs up as well
LR = 3e-4
S = par.sbp
# (name, auto-parallel, batch split over the ranks): the search starts from data parallelism,
# or from a batch every rank holds whole, where it has to find how to split the work itself
PLANS = [
    ("data parallel", False, True),
    ("searched", True, True),
    ("searched, broadcast batch", True, False),
]
# NOTE: float32 rounding of a loss summed over B x T tokens, whose gradients are summed in
# another order across ranks: about eps * sqrt(tokens) relative to the loss, 10x for safety
EPS32 = float(np.finfo(np.float32).eps)


class _Train(flow.nn.Graph):
    def __init__(self, model, auto: bool):
        super().__init__()
        self.model = model
        self.add_optimizer(flow.optim.AdamW(model.parameters(), lr=LR))
        if auto:
            self.config.enable_auto_parallel(True)

    def build(self, idx, targets):
        loss = self.model(idx, targets)[1]
        loss.backward()
        return loss


def _tokens(batch: int) -> tuple[np.ndarray, np.ndarray]:
    tokens = np.random.default_rng(0).integers(
        0, GPT_CONFIG.vocab_size, (batch, GPT_CONFIG.block_size + 1)
    )
    return tokens[:, :-1], tokens[:, 1:]


def _one_process_losses(batch: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """The first steps' losses of eager W3 in one process, on the whole batch."""
    flow.manual_seed(0)
    model = GPT(GPT_CONFIG)
    opt = flow.optim.AdamW(model.parameters(), lr=LR)
    x, y = (flow.tensor(a) for a in batch)
    losses = []
    for _ in range(CHECKED_STEPS):
        opt.zero_grad(set_to_none=True)
        loss = model(x, y)[1]
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return np.array(losses)


def _my_rows(a: np.ndarray) -> np.ndarray:
    rank, size = dist.get_rank(), dist.get_world_size()
    share = len(a) // size
    return a[rank * share : (rank + 1) * share]


def _graph(auto: bool, split: bool, batch, where):
    """W3's graph from the one-process weights, and its step, which returns the global loss,
    on the batch split over the ranks (each rank gives its own rows: a local tensor made
    global with a split is the rank's shard) or broadcast (every rank gives all of it)."""
    flow.manual_seed(0)
    graph = _Train(par.module_to_global(GPT(GPT_CONFIG), where, S.broadcast), auto)
    if auto and dist.get_rank() == 0:
        graph.debug(0)
    rows = _my_rows if split else np.asarray
    x, y = (flow.tensor(rows(a)).to_global(where, S.split(0) if split else S.broadcast)
            for a in batch)  # fmt: skip
    return graph, lambda: graph(x, y)


def _slowest(seconds: list[float]) -> list[float]:
    """Each step's time on the slowest rank."""
    mine = flow.tensor(np.array(seconds))
    dist.all_reduce(mine, op=dist.ReduceOp.MAX)
    return mine.numpy().tolist()


def _interleaved(steps: dict, rounds: int) -> dict[str, float]:
    """The median over rounds of the slowest rank's step time (s) of each step function."""
    times: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(rounds):
        for name, fn in steps.items():
            dist.barrier()
            start = time.perf_counter()
            fn().to_local().numpy()  # this rank's part of the loss: no collective after the step
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(_slowest(t)) for name, t in times.items()}


def _lowered(found, plan) -> float:
    """`found`'s prediction with the counts of nodes, tasks and collectives of the compiled
    `plan`, the largest of any rank's (seconds)."""
    return max(_slowest([found.lowered(plan_counts(plan.plan, plan.program)).step_time]))


def _predictions(graphs: dict) -> dict[str, tuple[float, float]]:
    """(the search's prediction, the prediction with the compiled plan's counts) of each
    plan, seconds. Data parallelism is the split batch's greedy layouts, where that search
    started: priced by the same problem, lowered with its own plan's counts."""
    searched = graphs["searched"]._latest.layout_search
    greedy = dataclasses.replace(searched, assign=tuple(n.greedy for n in searched.problem.nodes))
    predicted = {
        "data parallel": (searched.greedy_time, _lowered(greedy, graphs["data parallel"]._latest))
    }
    for name, graph in graphs.items():
        if name != "data parallel":
            found = graph._latest.layout_search
            predicted[name] = (found.time, max(_slowest([found.step_time])))
    return predicted


def _layouts(graph) -> list:
    """The layouts the search chose for each op call of `graph`, in trace order."""
    found = graph._latest.layout_search
    return [(n.op, n.choices[c].ins, n.choices[c].outs)
            for n, c in zip(found.problem.nodes, found.assign, strict=True)]  # fmt: skip


def _unlike_data_parallel(graphs: dict) -> dict[str, str]:
    """Per plan, how many op calls it lays out otherwise than data parallelism does."""
    problem = graphs["searched"]._latest.layout_search.problem
    greedy = [(n.op, n.choices[n.greedy].ins, n.choices[n.greedy].outs) for n in problem.nodes]
    unlike = {"data parallel": "-"}
    for name, graph in graphs.items():
        if name != "data parallel":
            ops = _layouts(graph)
            unlike[name] = str(sum(a != b for a, b in zip(ops, greedy, strict=True)))
    return unlike


def _check(losses: list[float], want: np.ndarray, what: str, tokens: int) -> None:
    tolerance = 10 * EPS32 * np.sqrt(tokens) * np.abs(want).max()
    error = np.abs(np.array(losses) - want).max()
    if error > tolerance:
        raise AssertionError(
            f"{what}: losses {losses} differ from one process's {want.tolist()} by {error:.2e} "
            f"(tolerance {tolerance:.2e})"
        )


def compare(global_batch: int, rounds: int) -> list[str]:
    size = dist.get_world_size()
    where = par.placement("cpu", list(range(size)))
    batch = _tokens(global_batch)
    want = _one_process_losses(batch) if dist.get_rank() == 0 else None
    graphs, steps = {}, {}
    for name, auto, split in PLANS:
        graphs[name], step = _graph(auto, split, batch, where)
        losses = [float(step().numpy()) for _ in range(CHECKED_STEPS)]
        if want is not None:
            _check(losses, want, f"W3 {name}, global batch {global_batch}", batch[0].size)
        steps[name] = step
    measured = _interleaved(steps, rounds)
    predicted, unlike = _predictions(graphs), _unlike_data_parallel(graphs)
    return [
        f"| W3, global batch {global_batch}, {name} | {unlike[name]} | {search * 1e3:.1f} | "
        f"{compiled * 1e3:.1f} | {measured[name] * 1e3:.1f} | {measured[name] / compiled:.2f} |"
        for name, (search, compiled) in predicted.items()
    ]


def _on_ranks(args) -> None:
    rows = []
    for global_batch in args.batches:
        rows += compare(global_batch, args.steps)
    if dist.get_rank() == 0:
        print(
            f"\n| plan ({dist.get_world_size()} ranks) | ops laid out unlike data parallel | "
            "predicted ms (search) | predicted ms (as compiled) | measured ms | "
            "measured / predicted |\n|---|---|---|---|---|---|\n" + "\n".join(rows),
            flush=True,
        )


def _environment(threads: int, cache: str) -> dict[str, str]:
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
    # NOTE: the generated kernels stay where they were cached (XDG_CACHE_HOME moves them too)
    home = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    env.setdefault("TIDEFLOW_KERNEL_CACHE", str(Path(home) / "tideflow" / "kernels"))
    env["XDG_CACHE_HOME"] = cache
    return env


def _calibrate(env: dict[str, str]) -> None:
    start = time.perf_counter()
    code = "from tideflow.parallel.cost import calibrate; calibrate()"
    subprocess.run([sys.executable, "-c", code], env=env, check=True)
    print(f"profile calibrated in {time.perf_counter() - start:.0f} s", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=12, help="timed rounds (12)")
    parser.add_argument("--batches", type=int, nargs="+", default=[8, 32], help="global batches")
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1, help="BLAS threads per rank")
    parser.add_argument("--on-ranks", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.on_ranks:
        _on_ranks(args)
        return
    start = time.perf_counter()
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs", flush=True)
    with tempfile.TemporaryDirectory(prefix="tideflow-profile-") as cache:
        env = _environment(args.threads, cache)
        _calibrate(env)
        launch = [sys.executable, "-m", "tideflow.distributed.launch", "--nproc_per_node",
                  str(args.ranks)]  # fmt: skip
        script = [__file__, "--on-ranks", "--steps", str(args.steps), "--batches",
                  *map(str, args.batches)]  # fmt: skip
        code = subprocess.run([*launch, *script], env=env).returncode
    print(f"load average after: {os.getloadavg()[0]:.2f}; {time.perf_counter() - start:.0f} s")
    sys.exit(code)


if __name__ == "__main__":
    main()
