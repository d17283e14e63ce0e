"""Soak: does a long training run hold its memory, threads and file descriptors flat?

`python benchmarks/soak.py --minutes 30 [--ranks 2]` trains the character-level GPT of
`tideflow train gpt` (a smaller one, so that a run makes many steps) as an nn.Graph for
`--minutes`, fed by a DataLoader with two persistent worker processes (short epochs, so that
the workers start epoch after epoch), and writes a checkpoint every `--checkpoint-every`
seconds with `save_checkpoint`, as `train gpt` does: the same path overwritten each time,
its previous version kept beside it (rotated by a rename). With `--ranks R` it starts itself
on R ranks with the launcher and trains data-parallel (`--dp R`: parameters broadcast, the
batch split, gradients all-reduced inside the graph, OneFlow's DDP of a graph).

Every rank samples itself every `--sample-every` seconds, after a step: the resident memory
of its process and of its children (the DataLoader workers), their threads and open file
descriptors (all from /proc), and the steps done. At the end rank 0 prints every rank's
samples and, per series, the least-squares slope per hour over the samples after the
warm-up, with the values at its start and end.

A series leaks when its slope exceeds its allowance by more than three standard errors (so
that noise is no verdict, and a real slope is) and the growth that slope gives over the
judged samples exceeds a floor:
- resident memory may grow by 5% of its post-warm-up value per hour, and by 1 MB in any
  case. The main process's RSS is sampled after `malloc_trim`, so that it is the memory the
  process holds, not the peak of its last step; what remains moves by a few tenths of a MB
  between samples (caches filling, the arenas' fragmentation), hence the floor, which only
  short runs reach. A 30-minute run judges ~27 minutes: 5%/h is then ~4.5 MB of ~200,
  while keeping one batch per step (8 kB, thousands of steps) or one checkpoint's state
  per checkpoint (106k parameters and AdamW's two moments: 1.3 MB, 13 checkpoints) would
  add over 15 MB;
- threads and descriptors may not grow at all: every one this loop needs exists after the
  warm-up (graph streams, worker pipes, BLAS threads), so one more is a leak.
The warm-up is the first checkpoint and one sample after it: allocator pools, compiled plans
and the checkpoint's buffers reach their size there. The exit status is 1 on a leak.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

SERIES = ("rss_main_mb", "rss_workers_mb", "threads", "fds")  # what is judged
GROWTH_ALLOWED = {"rss_main_mb": 0.05, "rss_workers_mb": 0.05, "threads": 0.0, "fds": 0.0}
GROWTH_FLOOR = {"rss_main_mb": 1.0, "rss_workers_mb": 1.0, "threads": 0.0, "fds": 0.0}
CONFIDENCE_SE = 3.0  # standard errors by which a slope must exceed its allowance
BATCHES_PER_EPOCH = 50  # short epochs: the sampler restarts and new tasks reach the workers
WORKERS = 2


@dataclass(frozen=True)
class Sample:
    seconds: float  # since training started
    steps: int
    rss_main_mb: float
    rss_workers_mb: float
    threads: int  # of the process and its children
    fds: int  # of the process and its children


# NOTE: glibc keeps freed memory for reuse, and whether a high-water mark of the allocator
# stays resident depends on the order of frees: trimming before each sample makes the main
# process's RSS the memory it holds (plus fragmentation, which a long run must not grow
# either), not the peak of its last step
_LIBC = ctypes.CDLL(ctypes.util.find_library("c"))

# -- /proc ------------------------------------------------------------------------------------


def _status_field(pid: int, name: str) -> int:
    """An integer field of /proc/<pid>/status (VmRSS in kB, Threads)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(name + ":"):
            return int(line.split()[1])
    raise LookupError(f"/proc/{pid}/status has no {name}")


def _children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (from each /proc/<n>/stat: the field after the
    parenthesized command, which may itself hold spaces)."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:  # gone meanwhile
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.append(int(entry.name))
    return found


def sample(started: float, steps: int) -> Sample:
    me = os.getpid()
    _LIBC.malloc_trim(0)
    rss_workers = threads = fds = 0
    for child in _children(me):
        try:
            rss_workers += _status_field(child, "VmRSS")
            threads += _status_field(child, "Threads")
            fds += len(os.listdir(f"/proc/{child}/fd"))
        except (OSError, LookupError):  # exited between the listing and the reads
            continue
    return Sample(
        seconds=time.monotonic() - started,
        steps=steps,
        rss_main_mb=_status_field(me, "VmRSS") / 1024,
        rss_workers_mb=rss_workers / 1024,
        threads=threads + len(os.listdir(f"/proc/{me}/task")),
        fds=fds + len(os.listdir(f"/proc/{me}/fd")),
    )


# -- the verdict ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Trend:
    start: float  # the first and last values the fit covers
    end: float
    per_hour: float  # least-squares slope
    se_per_hour: float  # its standard error
    allowed_per_hour: float
    hours: float  # from the first judged sample to the last
    floor: float  # growth over `hours` below which no slope is a leak

    @property
    def leaks(self) -> bool:
        surely = self.per_hour - CONFIDENCE_SE * self.se_per_hour
        return surely > self.allowed_per_hour and surely * self.hours > self.floor


def trend(samples: list[Sample], series: str) -> Trend:
    hours = np.array([s.seconds for s in samples]) / 3600
    values = np.array([getattr(s, series) for s in samples], dtype=np.float64)
    spread = hours - hours.mean()
    slope = float(spread @ (values - values.mean()) / (spread @ spread))
    residuals = values - values.mean() - slope * spread
    se = math.sqrt(float(residuals @ residuals) / (len(values) - 2) / float(spread @ spread))
    allowed = GROWTH_ALLOWED[series] * values[0]
    span = float(hours[-1] - hours[0])
    return Trend(
        float(values[0]), float(values[-1]), slope, se, allowed, span, GROWTH_FLOOR[series]
    )


def after_warmup(samples: list[Sample], warmup_s: float) -> list[Sample]:
    return [s for s in samples if s.seconds >= warmup_s]


def report(samples_of_rank: list[list[Sample]], warmup_s: float) -> bool:
    """Print every rank's samples and trends; whether any series leaks."""
    leaked = False
    for rank, samples in enumerate(samples_of_rank):
        print(f"\nrank {rank}: {len(samples)} samples (warm-up: the first {warmup_s:.0f} s)")
        print(f"{'s':>7} {'steps':>7} {'rss MB':>9} {'workers MB':>11} {'threads':>8} {'fds':>5}")
        for s in samples:
            print(
                f"{s.seconds:7.0f} {s.steps:7d} {s.rss_main_mb:9.1f} {s.rss_workers_mb:11.1f} "
                f"{s.threads:8d} {s.fds:5d}"
            )
        judged = after_warmup(samples, warmup_s)
        if len(judged) < 3:
            print(f"rank {rank}: {len(judged)} samples after the warm-up, too few to judge")
            leaked = True
            continue
        print(f"steps: {samples[0].steps} at the first sample, {samples[-1].steps} at the last")
        print(f"{'series':>15} {'start':>9} {'end':>9} {'slope/h':>9} {'+-se':>8} {'allowed':>8}")
        for series in SERIES:
            t = trend(judged, series)
            verdict = "LEAK" if t.leaks else "flat"
            print(
                f"{series:>15} {t.start:9.1f} {t.end:9.1f} {t.per_hour:9.2f} "
                f"{t.se_per_hour:8.2f} {t.allowed_per_hour:8.2f}  {verdict}"
            )
            leaked |= t.leaks
    return leaked


# -- the training ---------------------------------------------------------------------------


class Blocks:
    """Dataset of `block_size + 1` consecutive tokens at every offset: inputs and targets."""

    def __init__(self, ids: np.ndarray, block_size: int) -> None:
        self.ids = ids
        self.block_size = block_size

    def __len__(self) -> int:
        return len(self.ids) - self.block_size

    def __getitem__(self, i: int) -> np.ndarray:
        return self.ids[i : i + self.block_size + 1]


def soak(args: argparse.Namespace) -> list[Sample]:
    """Train until `args.minutes` have passed; this rank's samples."""
    import tideflow as flow
    import tideflow.distributed as dist
    from tideflow.models.char_gpt import (
        CharGPTTrainConfig,
        save_checkpoint,
        training_steps,
        warmup_cosine_schedule,
    )
    from tideflow.models.chardata import CharTokenizer, pydoc_text, train_val_split
    from tideflow.models.gpt import GPT
    from tideflow.utils.data import DataLoader, RandomSampler

    rank = dist.get_rank()
    config = CharGPTTrainConfig(
        n_layer=2, n_embd=64, batch_size=16, steps=10**9, graph=True, dp=args.ranks,
        progress=False, out=str(args.dir / "latest.safetensors"),
    )  # fmt: skip
    text = pydoc_text()
    tokenizer = CharTokenizer.from_text(text, config.max_vocab)
    train_ids, _ = train_val_split(tokenizer.encode(text), config.val_fraction)
    flow.manual_seed(config.seed)
    model = GPT(config.model_config(tokenizer.vocab_size))
    optimizer = flow.optim.AdamW(model.parameter_groups(config.weight_decay), lr=config.min_lr)
    scheduler = warmup_cosine_schedule(optimizer, config.warmup_steps, config.steps, config.min_lr)
    train_step, _ = training_steps(model, optimizer, scheduler, config)

    dataset = Blocks(train_ids.numpy(), config.block_size)
    # NOTE: one seed on every rank: each draws the whole batch and keeps its shard
    sampler = RandomSampler(
        dataset, replacement=True, num_samples=config.batch_size * BATCHES_PER_EPOCH,
        generator=flow.Generator().manual_seed(config.seed),
    )  # fmt: skip
    loader = DataLoader(
        dataset, batch_size=config.batch_size, sampler=sampler, num_workers=WORKERS,
        persistent_workers=True, drop_last=True,
    )  # fmt: skip

    latest, previous = Path(config.out), args.dir / "previous.safetensors"
    started = time.monotonic()
    next_sample, next_checkpoint = started, started + args.checkpoint_every
    samples, steps, checkpointed = [], 0, 0
    stop = False
    while not stop:
        for batch in loader:
            train_step(batch[:, :-1], batch[:, 1:])
            steps += 1
            now = time.monotonic()
            if now >= next_sample:
                samples.append(sample(started, steps))
                next_sample += args.sample_every
            # NOTE: rank 0's clock decides for all: a checkpoint is collective
            checkpoint, stop = _decide(now >= next_checkpoint, now >= started + args.minutes * 60)
            if checkpoint:
                if rank == 0 and latest.exists():
                    os.replace(latest, previous)
                save_checkpoint(latest, model, optimizer, scheduler, tokenizer, config, steps,
                                float("nan"))  # fmt: skip
                checkpointed = steps
                next_checkpoint = time.monotonic() + args.checkpoint_every
            if stop:
                break
    if rank == 0:
        _check_checkpoint(latest, checkpointed)
    return samples


def _decide(checkpoint: bool, stop: bool) -> tuple[bool, bool]:
    import tideflow.distributed as dist

    if dist.get_world_size() == 1:
        return checkpoint, stop
    decision = [(checkpoint, stop)]
    dist.broadcast_object_list(decision, src=0)
    return decision[0]


def _check_checkpoint(path: Path, step: int) -> None:
    """The last checkpoint loads and holds the step it was written at."""
    from tideflow.models.char_gpt import load_char_gpt

    if step == 0:
        return
    _, _, checkpoint = load_char_gpt(path)
    if checkpoint["step"] != step:
        raise RuntimeError(f"{path} holds step {checkpoint['step']}, written at step {step}")
    print(f"checkpoint {path}: loads, step {step}")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=30.0, help="training time")
    p.add_argument("--ranks", type=int, default=1, help="data-parallel ranks")
    p.add_argument(
        "--sample-every", type=float, default=None, help="seconds (default 60; 10 below 10 min)"
    )
    p.add_argument(
        "--checkpoint-every", type=float, default=None,
        help="seconds (default 120; 30 below 10 min)",
    )  # fmt: skip
    p.add_argument("--dir", type=Path, default=Path("runs/soak"), help="checkpoint directory")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parser().parse_args(argv)
    short = args.minutes < 10
    if args.sample_every is None:
        args.sample_every = 10.0 if short else 60.0
    if args.checkpoint_every is None:
        args.checkpoint_every = 30.0 if short else 120.0

    from tideflow.distributed import launch
    from tideflow.distributed.world import launched

    if args.ranks > 1 and not launched():
        launch.main(["--nproc_per_node", str(args.ranks), __file__, *argv])  # does not return

    import tideflow.distributed as dist
    from tideflow.distributed.objects import all_gather_object

    args.dir.mkdir(parents=True, exist_ok=True)
    samples = soak(args)
    everyone: list = [samples] if dist.get_world_size() == 1 else [None] * args.ranks
    if dist.get_world_size() > 1:
        all_gather_object(everyone, samples)
    warmup_s = args.checkpoint_every + args.sample_every
    if dist.get_rank() != 0:
        return 0
    leaked = report(everyone, warmup_s)
    print("\nverdict:", "a series grows (see LEAK above)" if leaked else "flat")
    return int(leaked)


if __name__ == "__main__":
    sys.exit(main())
