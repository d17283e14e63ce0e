"""Sparse embedding training speed, side by side in the same run: `flow.one_embedding`'s
MultiTableEmbedding (keyed store, only the rows of a batch read and updated, Adam state in the
store), tideflow's `nn.Embedding` (a dense table, its dense gradient and dense Adam update)
and PyTorch's `nn.EmbeddingBag(sparse=True)` with `SparseAdam` (a dense table, sparse
gradient and update) at 1M, 10M and 100M rows x 16 dims. Each step looks up BATCH ids drawn
by a Zipf law over the rows, back-propagates a loss through them and updates: the numbers
are ids looked up and updated per second (medians of interleaved steps). The 100M-row table
is MultiTableEmbedding's disk store with a 1 GB cache; its resident memory (RSS) is
reported beside the table's size on disk. Variants whose dense table and Adam state would
not fit in memory are skipped, with the memory they would need.

Then DeepFM training (39 fields, Criteo-shaped synthetic data) in samples per second on 1,
2 and 4 ranks launched with `tideflow.distributed.launch`, when the tables shard over ranks.

    python benchmarks/embedding.py             the whole run (tens of GB of disk and memory)
    python benchmarks/embedding.py --quick     a smoke run: 100k rows, a few steps, 1 rank
    python benchmarks/embedding.py --rows 10000000 --store disk --ranks 1
                                               one size on the disk store

The stores' files go under $EMBEDDING_BENCH_DIR (default: the system's temporary directory):
the 100M-row table with Adam's state takes about 18 GiB there.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

import numpy as np
import train_workloads as tw

DIM = 16
BATCH = 16_384
ZIPF = 1.05
FILL_CHUNK = 1 << 20  # keys inserted per lookup when a table is filled to its size
DISK_ROWS = 100_000_000  # from this size on, MultiTableEmbedding uses the disk store
DISK_CACHE_MB = 1024
ADAM_COPIES = 3  # a dense table and Adam's two moments

Step = Callable[[], None]


def _zipf_ids(rows: int, steps: int, seed: int = 0) -> list[np.ndarray]:
    """`steps` batches of BATCH row ids, rank r drawn with probability ~ (r + 1) ** -ZIPF,
    the ranks scattered over the rows (popular rows are not neighbours in memory)."""
    rng = np.random.default_rng(seed)
    # the inverse CDF of the continuous law x ** -ZIPF on [1, rows + 1), floored: exact
    # enough for a benchmark's ids
    u = rng.random((steps, BATCH))
    x = (((rows + 1.0) ** (1 - ZIPF) - 1) * u + 1) ** (1 / (1 - ZIPF))
    ranks = np.clip(np.floor(x).astype(np.int64) - 1, 0, rows - 1)
    return list((ranks * 2_654_435_761) % rows)  # a prime multiplier: a permutation of rows


def _on_disk(rows: int, store: str) -> bool:
    """Whether MultiTableEmbedding's table of `rows` keys goes to the disk store."""
    return store == "disk" or (store == "auto" and rows >= DISK_ROWS)


def _one_embedding_step(flow, rows: int, ids: list[np.ndarray], directory: str, disk: bool):
    """A MultiTableEmbedding of `rows` keys (on the disk store if `disk`), all of them in the
    store before timing."""
    oe = flow.one_embedding
    if disk:
        store = oe.make_cached_ssd_store_options(
            cache_budget_mb=DISK_CACHE_MB,
            persistent_path=directory,
            capacity=rows,
            size_factor=ADAM_COPIES,
        )
    else:
        store = oe.make_cached_host_mem_store_options(
            cache_budget_mb=DISK_CACHE_MB,
            persistent_path=directory,
            capacity=rows,
            size_factor=ADAM_COPIES,
        )
    table = oe.make_table_options(oe.make_uniform_initializer(low=-0.05, high=0.05))
    embedding = oe.MultiTableEmbedding(
        name="bench",
        embedding_dim=DIM,
        dtype=flow.float32,
        key_type=flow.int64,
        tables=[table],
        store_options=store,
    )
    optimizer = oe.Optimizer(
        flow.optim.Adam([flow.nn.Parameter(flow.zeros(1))], lr=1e-3), embeddings=[embedding]
    )
    with flow.no_grad():
        for start in range(0, rows, FILL_CHUNK):
            keys = np.arange(start, min(rows, start + FILL_CHUNK), dtype=np.int64)
            embedding(flow.tensor(keys.reshape(-1, 1)))
    batches = iter(_cycle(ids))

    def step():
        optimizer.zero_grad()
        embedding(flow.tensor(next(batches).reshape(-1, 1))).square().sum().backward()
        optimizer.step()

    return step


def _dense_step(flow, rows: int, ids: list[np.ndarray]) -> Step:
    embedding = flow.nn.Embedding(rows, DIM)
    optimizer = flow.optim.Adam(embedding.parameters(), lr=1e-3)
    batches = iter(_cycle(ids))

    def step():
        optimizer.zero_grad()
        embedding(flow.tensor(next(batches))).square().sum().backward()
        optimizer.step()

    return step


def _torch_step(torch, rows: int, ids: list[np.ndarray]) -> Step:
    embedding = torch.nn.EmbeddingBag(rows, DIM, mode="sum", sparse=True)
    optimizer = torch.optim.SparseAdam(embedding.parameters(), lr=1e-3)
    batches = iter(_cycle(ids))

    def step():
        optimizer.zero_grad()
        embedding(torch.from_numpy(next(batches)).reshape(-1, 1)).square().sum().backward()
        optimizer.step()

    return step


def _cycle(items: list):
    while True:
        yield from items


def _rss_mib() -> float:
    """Resident memory now (not the peak): what the process holds after the timed steps."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _bytes_under(directory: str) -> int:
    return sum(
        os.path.getsize(os.path.join(root, name))
        for root, _, names in os.walk(directory)
        for name in names
    )


def _memory_bytes() -> int:
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def _timed(steps: dict[str, Step], warmup: int, rounds: int) -> dict[str, float]:
    """Median ids per second of each step, rounds interleaving all of them."""
    for _ in range(warmup):
        for step in steps.values():
            step()
    times: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(rounds):
        for name, step in steps.items():
            start = time.perf_counter()
            step()
            times[name].append(time.perf_counter() - start)
    return {name: BATCH / statistics.median(t) for name, t in times.items()}


def lookups(rows: int, warmup: int, rounds: int, store: str) -> dict:
    """One table size, in this process: ids/s per variant, skipped variants, RSS."""
    import tideflow as flow

    flow.manual_seed(0)
    ids = _zipf_ids(rows, warmup + rounds)
    dense_gib = rows * DIM * 4 * ADAM_COPIES / 2**30
    fits = dense_gib * 2**30 < 0.5 * _memory_bytes()
    skipped = {}
    threads = ""
    with tempfile.TemporaryDirectory(dir=os.environ.get("EMBEDDING_BENCH_DIR")) as directory:
        start = time.perf_counter()
        disk = _on_disk(rows, store)
        steps = {"one_embedding": _one_embedding_step(flow, rows, ids, directory, disk)}
        fill_s = time.perf_counter() - start
        if fits:
            steps["nn.Embedding"] = _dense_step(flow, rows, ids)
            try:
                import torch
            except ImportError:
                skipped["torch"] = "PyTorch is not installed"
            else:
                threads = tw.thread_setup(torch)
                torch.manual_seed(0)
                steps["torch"] = _torch_step(torch, rows, ids)
        else:
            for name in ("nn.Embedding", "torch"):
                skipped[name] = f"needs ~{dense_gib:.0f} GiB for the table and Adam's state"
        speeds = _timed(steps, warmup, rounds)
        disk_mib = _bytes_under(directory) / 2**20
        return {
            "rows": rows,
            "ids_per_s": speeds,
            "skipped": skipped,
            "fill_s": fill_s,
            "rss_mib": _rss_mib(),
            "disk_mib": disk_mib,
            "disk_store": disk,
            "threads": threads,
        }


def deepfm_samples_per_second(steps: int, batch: int) -> float | None:
    """DeepFM training on this rank's share of a global batch; the slowest rank's samples
    per second of the whole job (on rank 0; None elsewhere)."""
    import tideflow as flow
    from tideflow.models import CriteoBatch, DeepFM, SyntheticCriteo

    rank, size = flow.env.get_rank(), flow.env.get_world_size()
    share = batch // size
    rows, _ = SyntheticCriteo(seed=0).sample(batch * (steps + 2))
    data = CriteoBatch.from_rows(rows)
    flow.manual_seed(0)
    with tempfile.TemporaryDirectory() as directory:
        store = flow.one_embedding.make_cached_host_mem_store_options(
            cache_budget_mb=1024, persistent_path=directory, capacity=10_000_000, size_factor=3
        )
        model = DeepFM(store, hidden_units=[400, 400, 400])
        dense = model.dnn
        if size > 1:
            model.dnn = flow.nn.parallel.DistributedDataParallel(dense)
        optimizer = flow.one_embedding.Optimizer(
            flow.optim.Adam(dense.parameters(), lr=1e-3), embeddings=[model.embedding]
        )
        times = []
        for step in range(steps + 2):
            part = data[step * batch + rank * share : step * batch + (rank + 1) * share]
            keys, labels = flow.tensor(part.all_keys), flow.tensor(part.labels)
            start = time.perf_counter()
            loss = flow.nn.functional.binary_cross_entropy_with_logits(model(keys), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if step >= 2:  # the first steps fill the tables
                times.append(time.perf_counter() - start)
    slowest = flow.tensor([statistics.median(times)], dtype=flow.float64)
    if size > 1:
        import tideflow.distributed as dist

        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    return batch / slowest.item() if rank == 0 else None


def _child(args: list[str], launch_ranks: int | None = None) -> dict:
    """This script run with `args` (on `launch_ranks` ranks if given): its JSON result."""
    command = [sys.executable, os.path.abspath(__file__), *args]
    if launch_ranks is not None:
        command = [
            sys.executable,
            "-m",
            "tideflow.distributed.launch",
            "--nproc_per_node",
            str(launch_ranks),
            *command[1:],
        ]
    job = subprocess.run(command, capture_output=True, text=True, check=False)
    lines = [line for line in job.stdout.splitlines() if line.startswith("{")]
    if job.returncode != 0 or not lines:
        sys.exit(f"{' '.join(command)} failed:\n{job.stdout}\n{job.stderr}")
    return json.loads(lines[-1])


def _lookup_report(results: list[dict]) -> str:
    names = ("one_embedding", "nn.Embedding", "torch")
    lines = [
        f"lookups + Adam updates per second, batches of {BATCH:,} Zipf({ZIPF}) ids, "
        f"dim {DIM} ({os.cpu_count()} cores)",
        f"{'rows':>12} {'one_embedding':>14} {'nn.Embedding':>14} {'torch sparse':>14} "
        f"{'oe/torch':>9}  memory",
    ]
    lines += sorted({r["threads"] for r in results if r["threads"]})
    for r in results:
        speeds = r["ids_per_s"]
        cells = [f"{speeds[n]:>14,.0f}" if n in speeds else f"{'-':>14}" for n in names]
        ratio = (
            f"{speeds['one_embedding'] / speeds['torch']:>9.2f}"
            if "torch" in speeds
            else f"{'-':>9}"
        )
        store = (
            f"disk store {r['disk_mib'] / 1024:.1f} GiB on disk, {DISK_CACHE_MB} MiB cache"
            if r["disk_store"]
            else "host store"
        )
        lines.append(
            f"{r['rows']:>12,} {' '.join(cells)} {ratio}  RSS {r['rss_mib']:,.0f} MiB "
            f"({store}; filled in {r['fill_s']:.0f} s)"
        )
        lines += [f"{'':>12} {name} skipped: {why}" for name, why in r["skipped"].items()]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run (small, 1 rank)")
    parser.add_argument("--rows", type=int, nargs="*", default=None, help="table sizes")
    parser.add_argument("--ranks", type=int, nargs="*", default=None, help="DeepFM's rank counts")
    parser.add_argument(
        "--store",
        choices=("auto", "host", "disk"),
        default="auto",
        help=f"MultiTableEmbedding's store (auto: the disk store from {DISK_ROWS:,} rows on)",
    )
    parser.add_argument("--job", help=argparse.SUPPRESS)
    args = parser.parse_args()
    warmup, rounds = (1, 3) if args.quick else (3, 15)
    deepfm_steps, deepfm_batch = (3, 512) if args.quick else (20, 4096)
    if args.job == "lookups":
        print(json.dumps(lookups(args.rows[0], warmup, rounds, args.store)))
        return
    if args.job == "deepfm":
        speed = deepfm_samples_per_second(deepfm_steps, deepfm_batch)
        if speed is not None:
            print(json.dumps({"samples_per_s": speed}))
        return
    sizes = args.rows or ([100_000] if args.quick else [1_000_000, 10_000_000, DISK_ROWS])
    ranks = args.ranks or ([1] if args.quick else [1, 2, 4])
    quick = ["--quick"] if args.quick else []
    # one process per size: each RSS is that size's alone
    results = [
        _child([*quick, "--store", args.store, "--job", "lookups", "--rows", str(n)]) for n in sizes
    ]
    print(_lookup_report(results))
    print(f"\nDeepFM training, global batch {deepfm_batch}, Criteo-shaped synthetic data")
    single = None
    for n in ranks:
        launch = None if n == 1 else n
        speed = _child([*quick, "--job", "deepfm"], launch)["samples_per_s"]
        single = single or speed
        print(f"  {n} rank(s): {speed:>10,.0f} samples/s ({speed / single:.2f}x one rank)")


if __name__ == "__main__":
    main()
