"""Training DeepFM or DLRM on Criteo-format click logs: the loop behind `tideflow train deepfm`
and `tideflow train dlrm`. Adam on the MLPs and, through `flow.one_embedding.Optimizer`, on
the embedding rows each batch looks up; AUC and log loss on held-out examples; a checkpoint
(the dense state in one file, the tables as a snapshot of their store) that a later run
resumes from, continuing with the very batches the first run would have trained on."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import ClassVar

import numpy as np
from tqdm import tqdm

from .. import one_embedding
from ..distributed.world import get_world
from ..framework.errors import TideflowError
from ..framework.grad_mode import no_grad
from ..framework.random import get_rng_state, set_rng_state
from ..io import load, save
from ..nn import Module
from ..nn.functional import binary_cross_entropy_with_logits
from ..ops.creation import tensor
from ..ops.random import manual_seed
from ..optim import Adam
from ..optim.lr_scheduler import LinearLR
from .criteo import NUM_SPARSE, CriteoBatch, count_rows, read_criteo_tsv
from .deepfm import DeepFM
from .dlrm import DLRM
from .metrics import log_loss, roc_auc
from .synthetic_criteo import CRITEO_LIKE_TABLE_SIZES, SyntheticCriteo

CHECKPOINT = "checkpoint.safetensors"
TABLES = "tables"  # the embedding store's directory under `out`
ADAM_SIZE_FACTOR = 3  # a row, Adam's two moments beside it (OneFlow's `size_factor`)


class TrainingSetupError(TideflowError, ValueError):
    """A data file or checkpoint that does not fit the run asked for."""


def _option(default, help: str, metavar: str | None = None):
    return field(default=default, metadata={"help": help, "metavar": metavar})


def _sizes(text: str, name: str) -> list[int]:
    try:
        sizes = [int(s) for s in text.split(",")]
    except ValueError:
        sizes = []
    if not sizes or min(sizes) <= 0:
        raise ValueError(f"{name} must be comma-separated positive integers, got {text!r}")
    return sizes


@dataclass
class RecommenderTrainConfig:
    """What decides a run of either model (the options of `tideflow train deepfm|dlrm`). The
    defaults train a small DeepFM on synthetic data in about a minute on two CPU cores, to an
    AUC about 0.02 below the ceiling (see docs/one_embedding.md)."""

    model_name: ClassVar[str]  # the `tideflow train` command, and the default --out

    data: str | None = _option(
        None,
        "a Criteo-format TSV file; its last --val-samples lines are held out "
        "(default: synthetic data, with the best AUC any model can reach on it)",
        "PATH",
    )
    train_samples: int = _option(200_000, "synthetic training examples")
    table_sizes: str | None = _option(
        None,
        f"ids in each of the {NUM_SPARSE} synthetic tables (default: 3 to 200,000, uneven as "
        "Criteo's)",
        "N,N,...",
    )
    val_samples: int = _option(20_000, "held-out examples")
    embedding_dim: int = _option(8, "width of each feature's embedding")
    batch_size: int = _option(512, "examples per step")
    epochs: int = _option(1, "passes over the training examples")
    learning_rate: float = _option(
        1e-2, "Adam's learning rate (MLPs and embedding rows), decaying linearly to 0"
    )
    store: str = _option(
        "host",
        "where the tables live: host (memory) or ssd (a file with an in-memory cache)",
        "host|ssd",
    )
    cache_mb: int = _option(256, "memory budget of the ssd store's cache, in MiB")
    capacity: int = _option(4_000_000, "most feature keys the tables hold together")
    eval_interval: int = _option(0, "steps between held-out evaluations (0: after each epoch)")
    out: str | None = _option(
        None, "directory of the checkpoint and the tables (default: runs/<model>)", "DIR"
    )
    resume: bool = _option(False, "continue from the checkpoint in --out")
    stop_after: int | None = _option(
        None, "stop, with a checkpoint, once this many steps are done (--resume goes on)"
    )
    seed: int = _option(0, "seed of the synthetic data and of initialization")
    progress: bool = _option(True, "show a progress bar")

    def __post_init__(self) -> None:
        for name in (
            "train_samples",
            "val_samples",
            "embedding_dim",
            "batch_size",
            "epochs",
            "cache_mb",
            "capacity",
        ):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.table_sizes is not None:
            sizes = _sizes(self.table_sizes, "table_sizes")
            if len(sizes) != NUM_SPARSE:
                raise ValueError(f"table_sizes must be {NUM_SPARSE} sizes, got {len(sizes)}")
        if self.stop_after is not None and self.stop_after <= 0:
            raise ValueError(f"stop_after must be positive, got {self.stop_after}")
        if self.eval_interval < 0:
            raise ValueError(f"eval_interval must be 0 or positive, got {self.eval_interval}")
        if self.store not in ("host", "ssd"):
            raise ValueError(f"store must be host or ssd, got {self.store!r}")
        if not self.learning_rate > 0:
            raise ValueError(f"learning_rate must be positive, got {self.learning_rate}")

    @property
    def out_dir(self) -> Path:
        return Path(self.out or f"runs/{self.model_name}")

    def store_options(self):
        path = str(self.out_dir / TABLES)
        if self.store == "ssd":
            return one_embedding.make_cached_ssd_store_options(
                cache_budget_mb=self.cache_mb,
                persistent_path=path,
                capacity=self.capacity,
                size_factor=ADAM_SIZE_FACTOR,
            )
        return one_embedding.make_cached_host_mem_store_options(
            cache_budget_mb=self.cache_mb,
            persistent_path=path,
            capacity=self.capacity,
            size_factor=ADAM_SIZE_FACTOR,
        )


@dataclass
class DeepFMTrainConfig(RecommenderTrainConfig):
    model_name = "deepfm"
    hidden_units: str = _option("64", "widths of the deep part's hidden layers", "N,N")
    dropout: float = _option(0.0, "dropout after each hidden layer")

    def __post_init__(self) -> None:
        super().__post_init__()
        _sizes(self.hidden_units, "hidden_units")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")

    def build(self) -> DeepFM:
        return DeepFM(
            self.store_options(),
            embedding_dim=self.embedding_dim,
            hidden_units=_sizes(self.hidden_units, "hidden_units"),
            dropout=self.dropout,
            seed=self.seed,
        )

    @staticmethod
    def inputs(batch: CriteoBatch) -> tuple:
        return (tensor(batch.all_keys),)


@dataclass
class DLRMTrainConfig(RecommenderTrainConfig):
    model_name = "dlrm"
    bottom_mlp: str = _option("512,256", "widths of the bottom MLP's hidden layers", "N,N")
    top_mlp: str = _option("512,256", "widths of the top MLP's hidden layers", "N,N")

    def __post_init__(self) -> None:
        super().__post_init__()
        _sizes(self.bottom_mlp, "bottom_mlp")
        _sizes(self.top_mlp, "top_mlp")

    def build(self) -> DLRM:
        return DLRM(
            self.store_options(),
            embedding_dim=self.embedding_dim,
            bottom_mlp=_sizes(self.bottom_mlp, "bottom_mlp"),
            top_mlp=_sizes(self.top_mlp, "top_mlp"),
            seed=self.seed,
        )

    @staticmethod
    def inputs(batch: CriteoBatch) -> tuple:
        return tensor(batch.dense), tensor(batch.sparse_keys)


@dataclass
class RecommenderTrainResult:
    """What a run reached: held-out AUC and log loss (and, on synthetic data, the AUC of the
    hidden model's own probabilities, the ceiling), throughput, where the checkpoint is,
    and the training loss of every step this process ran."""

    steps: int
    val_auc: float
    val_log_loss: float
    auc_ceiling: float | None
    samples_per_second: float
    checkpoint: Path
    losses: list[float] = field(default_factory=list)


class _InMemory:
    """Examples held in memory (synthetic ones): their count and batches from any row on."""

    def __init__(self, batch: CriteoBatch) -> None:
        self._batch = batch
        self.rows = len(batch)

    def batches(self, batch_size: int, first_row: int = 0) -> Iterator[CriteoBatch]:
        for row in range(first_row, self.rows, batch_size):
            yield self._batch[row : row + batch_size]


class _FileLines:
    """Lines `start` to `stop` of a Criteo-format file, streamed: their count and batches
    from any row on."""

    def __init__(self, path: str, start: int, stop: int) -> None:
        self._path, self._start = path, start
        self.rows = stop - start

    def batches(self, batch_size: int, first_row: int = 0) -> Iterator[CriteoBatch]:
        first, stop = self._start + first_row, self._start + self.rows
        yield from read_criteo_tsv(self._path, batch_size, first, stop)


_Examples = _InMemory | _FileLines


def _load_examples(
    config: RecommenderTrainConfig, log
) -> tuple[_Examples, _Examples, float | None]:
    """Training and held-out examples, and the AUC ceiling where it is known."""
    if config.data is None:
        sizes = CRITEO_LIKE_TABLE_SIZES
        if config.table_sizes is not None:
            sizes = _sizes(config.table_sizes, "table_sizes")
        source = SyntheticCriteo(sizes, seed=config.seed)
        train_rows, _ = source.sample(config.train_samples, stream=0)
        val_rows, probabilities = source.sample(config.val_samples, stream=1)
        ceiling = source.auc_ceiling(val_rows, probabilities)
        log(
            f"data: synthetic, {len(train_rows):,} training / {len(val_rows):,} held-out "
            f"examples, click rate {train_rows.labels.mean():.3f}"
        )
        return (
            _InMemory(CriteoBatch.from_rows(train_rows)),
            _InMemory(CriteoBatch.from_rows(val_rows)),
            ceiling,
        )
    rows = count_rows(config.data)
    if rows <= config.val_samples:
        raise TrainingSetupError(
            f"{config.data} holds {rows} examples: too few to hold out val_samples="
            f"{config.val_samples} and train on the rest"
        )
    split = rows - config.val_samples
    log(f"data: {config.data}, {split:,} training / {config.val_samples:,} held-out examples")
    return (
        _FileLines(config.data, 0, split),
        _FileLines(config.data, split, rows),
        None,
    )


@no_grad()
def evaluate(model: Module, examples: _Examples, inputs, batch_size: int) -> tuple[float, float]:
    """Held-out AUC and log loss of `model` (in eval mode) on every example of `examples`."""
    was_training = model.training
    model.eval()
    labels, logits = [], []
    for batch in examples.batches(batch_size):
        labels.append(batch.labels)
        logits.append(model(*inputs(batch)).numpy())
    model.train(was_training)
    labels, logits = np.concatenate(labels), np.concatenate(logits).astype(np.float64)
    return roc_auc(labels, logits), log_loss(labels, 0.5 * (1 + np.tanh(0.5 * logits)))


def train_recommender(
    config: DeepFMTrainConfig | DLRMTrainConfig, log: Callable[[str], None] = tqdm.write
) -> RecommenderTrainResult:
    """Train the model `config` describes, evaluate it on held-out examples, write a
    checkpoint to `config.out` and return the result. With `config.resume`, continue the
    run whose checkpoint is in `config.out`: its step, weights, tables and optimizer state
    come back, and training goes on from the next batch that run would have taken. With
    `config.stop_after`, stop (evaluated, with a checkpoint) once that many steps are done.

    >>> import tempfile
    >>> from tideflow.models.recommender import DeepFMTrainConfig, train_recommender
    >>> config = DeepFMTrainConfig(
    ...     train_samples=256, val_samples=128, batch_size=128, hidden_units="8",
    ...     embedding_dim=4, out=tempfile.mkdtemp(), progress=False)
    >>> result = train_recommender(config, log=lambda line: None)
    >>> result.steps, 0 < result.val_auc < 1
    (2, True)
    """
    if get_world().size > 1:
        raise TrainingSetupError(
            "train_recommender runs in one process (its checkpoint is one process's); under "
            f"mpiexec with {get_world().size} ranks build the model and loop yourself: the "
            "tables shard over the ranks by themselves"
        )
    train, val, ceiling = _load_examples(config, log)
    manual_seed(config.seed)
    model = config.build()
    optimizer = one_embedding.Optimizer(
        Adam(model.parameters(), lr=config.learning_rate), embeddings=[model.embedding]
    )
    steps_per_epoch = math.ceil(train.rows / config.batch_size)
    total_steps = config.epochs * steps_per_epoch
    # a linear decay to 0 settles the rows of frequent ids, which Adam otherwise keeps moving
    scheduler = LinearLR(optimizer, start_factor=1.0, end_factor=0.0, total_iters=total_steps)
    out = config.out_dir
    step = 0
    if config.resume:
        step = _resume(out / CHECKPOINT, model, optimizer, scheduler, config, log)
    end = total_steps if config.stop_after is None else min(config.stop_after, total_steps)
    log(
        f"model: {type(model).__name__}, {_dense_parameters(model):,} dense parameters, "
        f"embedding rows of {config.embedding_dim} in a {config.store} store; "
        f"{total_steps} steps of {config.batch_size}"
    )

    def evaluates_after(step: int) -> bool:
        if step == end:
            return True
        if config.eval_interval:
            return step % config.eval_interval == 0
        return step % steps_per_epoch == 0

    losses: list[float] = []
    seconds, samples = 0.0, 0
    auc = loss_nats = float("nan")
    bar = tqdm(total=end, initial=step, desc="train", unit="step", disable=not config.progress)
    while step < end:
        first_row = (step % steps_per_epoch) * config.batch_size
        for batch in train.batches(config.batch_size, first_row):
            start = time.perf_counter()
            logits = model(*config.inputs(batch))
            loss = binary_cross_entropy_with_logits(logits, tensor(batch.labels))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            scheduler.step()
            losses.append(loss.item())
            elapsed = time.perf_counter() - start
            seconds, samples, step = seconds + elapsed, samples + len(batch), step + 1
            bar.update()
            bar.set_postfix(loss=f"{losses[-1]:.4f}", samples_s=f"{len(batch) / elapsed:,.0f}")
            if evaluates_after(step):
                auc, loss_nats = evaluate(model, val, config.inputs, config.batch_size)
                versus = "" if ceiling is None else f" (the hidden model's ceiling: {ceiling:.4f})"
                log(f"step {step:6d}: held-out AUC {auc:.4f}{versus}, log loss {loss_nats:.4f}")
            if step == end:
                break
    bar.close()
    if math.isnan(auc):  # resumed at the end: nothing trained, still report
        auc, loss_nats = evaluate(model, val, config.inputs, config.batch_size)
    path = save_checkpoint(out, model, optimizer, scheduler, config, step)
    log(f"checkpoint: {path}")
    return RecommenderTrainResult(
        steps=step,
        val_auc=auc,
        val_log_loss=loss_nats,
        auc_ceiling=ceiling,
        samples_per_second=samples / seconds if seconds else float("nan"),
        checkpoint=path,
        losses=losses,
    )


def _dense_parameters(model: Module) -> int:
    return sum(p.numel() for _, child in _dense_children(model) for p in child.parameters())


def _dense_children(model: Module) -> list[tuple[str, Module]]:
    """The model's modules but its embedding: their state goes in the checkpoint file, while
    the rows (whose `state_dict()` would copy every table into memory) go to a snapshot."""
    return [(name, child) for name, child in model.named_children() if child is not model.embedding]


def save_checkpoint(out: Path, model: Module, optimizer, scheduler, config, step: int) -> Path:
    """The tables as snapshot `step-<step>` of their store, then one file naming it with the
    dense weights, the optimizer and schedule state, the RNG state, the config and the step,
    written atomically: a crash before the file is replaced leaves the previous checkpoint, whose
    snapshot is still there, whole."""
    snapshot = f"step-{step}"
    model.embedding.save_snapshot(snapshot)
    path = out / CHECKPOINT
    save(
        {
            "model": {name: child.state_dict() for name, child in _dense_children(model)},
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),
            "rng": get_rng_state(),
            "config": asdict(config),
            "model_class": type(model).__name__,
            "snapshot": snapshot,
            "step": step,
        },
        path,
    )
    return path


# What a resumed run may change: everything else decides the batches, the model or the tables
_RESUMABLE_CHANGES = {"eval_interval", "out", "resume", "progress", "stop_after"}


def _resume(path: Path, model: Module, optimizer, scheduler, config, log) -> int:
    """Load the checkpoint at `path` into `model`, `optimizer` and `scheduler`; the step it
    was taken at."""
    checkpoint = load(path)
    if checkpoint["model_class"] != type(model).__name__:
        raise TrainingSetupError(
            f"{path} is a checkpoint of {checkpoint['model_class']}, not {type(model).__name__}"
        )
    saved, asked = checkpoint["config"], asdict(config)
    changed = sorted(k for k in asked if k not in _RESUMABLE_CHANGES and saved.get(k) != asked[k])
    if changed:
        raise TrainingSetupError(
            f"cannot resume {path} with other settings: "
            + ", ".join(f"{k} {saved.get(k)!r} -> {asked[k]!r}" for k in changed)
            + f" (only {', '.join(sorted(_RESUMABLE_CHANGES))} may change)"
        )
    for name, child in _dense_children(model):
        child.load_state_dict(checkpoint["model"][name])
    model.embedding.load_snapshot(checkpoint["snapshot"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    scheduler.load_state_dict(checkpoint["scheduler"])
    set_rng_state(checkpoint["rng"])
    log(f"resumed from {path} at step {checkpoint['step']}")
    return checkpoint["step"]
