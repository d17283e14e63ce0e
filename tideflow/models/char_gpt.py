"""Training a GPT as a character-level language model: the loop behind `make demo` and
`tideflow train gpt`. AdamW with linear warmup and cosine decay, gradient clipping, periodic
validation, an atomic checkpoint, and a sample generated from the reloaded checkpoint; on
one process eagerly, or as an nn.Graph with data, tensor and pipeline parallelism."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
from tqdm import tqdm

from ..distributed.objects import all_gather_object
from ..distributed.world import get_world
from ..framework.grad_mode import no_grad
from ..framework.tensor import Tensor
from ..io import load, save
from ..nn.graph import Graph
from ..nn.utils import clip_grad_norm_
from ..ops.creation import tensor
from ..ops.random import Generator, manual_seed
from ..optim import AdamW
from ..optim.lr_scheduler import CosineAnnealingLR, LinearLR, LRScheduler, SequentialLR
from ..parallel.sbp import broadcast
from .chardata import CharTokenizer, pydoc_text, random_blocks, train_val_split, unigram_entropy
from .gpt import GPT, GPTConfig
from .gpt_parallel import check_gpt_parallel, parallelize_gpt


def _option(default, help: str, metavar: str | None = None):
    return field(default=default, metadata={"help": help, "metavar": metavar})


@dataclass
class CharGPTTrainConfig:
    """Everything that decides a training run (the `tideflow train gpt` options are these
    fields). The defaults train in a few minutes on two CPU cores and reach a validation loss
    well below the unigram entropy of the text."""

    n_layer: int = _option(4, "transformer blocks")
    n_head: int = _option(4, "attention heads per block")
    n_embd: int = _option(128, "embedding width")
    block_size: int = _option(64, "context length in characters")
    dropout: float = _option(0.0, "dropout probability")
    bias: bool = _option(True, "biases in Linear layers and LayerNorms")
    max_vocab: int = _option(96, "vocabulary cap; rarer characters share one token")
    val_fraction: float = _option(0.1, "fraction of the text held out for validation")
    steps: int = _option(400, "optimizer steps")
    batch_size: int = _option(32, "blocks per step")
    learning_rate: float = _option(3e-3, "peak learning rate")
    min_lr: float = _option(3e-4, "learning rate at the end of the cosine decay")
    warmup_steps: int = _option(40, "steps of linear learning-rate warmup")
    weight_decay: float = _option(0.1, "AdamW weight decay of matrices")
    beta1: float = _option(0.9, "AdamW beta1")
    beta2: float = _option(0.99, "AdamW beta2")
    grad_clip: float = _option(1.0, "clip the gradients' total norm to this")
    eval_interval: int = _option(100, "steps between validation-loss estimates")
    eval_batches: int = _option(8, "batches per loss estimate")
    out: str = _option("runs/char_gpt.safetensors", "checkpoint path", "PATH")
    seed: int = _option(1337, "seed of initialization, batches and sampling")
    sample_tokens: int = _option(300, "characters to generate from the checkpoint")
    prompt: str = _option("The ", "text the sample continues")
    temperature: float = _option(0.8, "sampling temperature")
    top_k: int | None = _option(None, "sample only from the k most likely characters")
    progress: bool = _option(True, "show a progress bar")
    dp: int = _option(1, "data-parallel ranks (the batch is split over them)")
    tp: int = _option(1, "tensor-parallel ranks (Megatron's layers: heads and features split)")
    pp: int = _option(1, "pipeline stages (contiguous groups of blocks)")
    micro_batches: int | None = _option(
        None, "micro-batches per step, for gradient accumulation (None: one per stage)"
    )
    graph: bool = _option(
        False, "train an nn.Graph over global tensors even on one rank, as parallel runs "
        "do (implied by any of --dp/--tp/--pp/--micro-batches above 1)",
    )  # fmt: skip

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "eval_interval", "eval_batches"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if not 0 <= self.warmup_steps < self.steps:
            raise ValueError(
                f"warmup_steps must be in [0, steps={self.steps}), got {self.warmup_steps}"
            )
        if not 0 <= self.min_lr <= self.learning_rate:
            raise ValueError(
                f"min_lr must be in [0, learning_rate={self.learning_rate}], got {self.min_lr}"
            )
        if not self.grad_clip > 0:
            raise ValueError(f"grad_clip must be positive (inf: no clipping), got {self.grad_clip}")
        check_gpt_parallel(self, self.dp, self.tp, self.pp)
        if self.micro_batches is not None and self.micro_batches < 1:
            raise ValueError(f"micro_batches must be at least 1, got {self.micro_batches}")
        m = self.accumulation_steps
        if self.batch_size % (self.dp * m):
            raise ValueError(
                f"batch_size ({self.batch_size}) must be divisible by dp x micro-batches = "
                f"{self.dp} x {m}: each micro-batch of a step is split over the data-parallel "
                "ranks"
            )

    @property
    def accumulation_steps(self) -> int:
        """Micro-batches per step: `micro_batches`, by default one per pipeline stage."""
        return self.micro_batches if self.micro_batches is not None else self.pp

    @property
    def uses_graph(self) -> bool:
        """Whether the run trains an nn.Graph over global tensors (else the eager loop)."""
        sizes = (self.dp, self.tp, self.pp, self.accumulation_steps)
        return self.graph or any(n > 1 for n in sizes)

    def model_config(self, vocab_size: int) -> GPTConfig:
        return GPTConfig(
            vocab_size=vocab_size, block_size=self.block_size, n_layer=self.n_layer,
            n_head=self.n_head, n_embd=self.n_embd, dropout=self.dropout, bias=self.bias,
        )  # fmt: skip


@dataclass
class CharGPTTrainResult:
    """What a run reached: final losses (nats per character) next to the unigram baseline,
    throughput, the checkpoint written and the sample generated from it (on rank 0; other
    ranks of a parallel run get an empty sample), and the loss of every step."""

    steps: int
    train_loss: float
    val_loss: float
    unigram_entropy: float
    tokens_per_second: float
    train_seconds: float
    checkpoint: Path
    sample: str
    losses: list[float] = field(default_factory=list)  # the training loss of each step


def warmup_cosine_schedule(
    optimizer, warmup_steps: int, total_steps: int, min_lr: float
) -> LRScheduler:
    """The learning rate rises linearly from ~0 to its base value over `warmup_steps`, then
    follows a half cosine down to `min_lr` at `total_steps`."""
    decay = CosineAnnealingLR(optimizer, T_max=total_steps - warmup_steps, eta_min=min_lr)
    if warmup_steps == 0:
        return decay
    warmup = LinearLR(optimizer, start_factor=1.0 / warmup_steps, total_iters=warmup_steps)
    return SequentialLR(optimizer, [warmup, decay], milestones=[warmup_steps])


@no_grad()
def estimate_loss(model: GPT, data, config: CharGPTTrainConfig) -> float:
    """Mean loss over `eval_batches` random blocks of `data`, the same blocks at every call
    (a fixed seed), with dropout off."""
    was_training = model.training
    model.eval()
    blocks = Generator().manual_seed(config.seed)
    losses = [
        model(*random_blocks(data, config.batch_size, config.block_size, blocks))[1].item()
        for _ in range(config.eval_batches)
    ]
    model.train(was_training)
    return sum(losses) / len(losses)


def train_char_gpt(
    config: CharGPTTrainConfig, text: str | None = None, log: Callable[[str], None] = tqdm.write
) -> CharGPTTrainResult:
    """Train a GPT on the characters of `text` (default: `pydoc_text()`), save a checkpoint
    to `config.out` and return the result, including a sample from the reloaded checkpoint.

    With `config.uses_graph` (dp, tp, pp or micro-batches above 1, or `graph`) every rank of
    the world runs this: the step is an `nn.Graph` over the GPT laid out by
    `parallelize_gpt`, each step's losses equal one process's (same seed, same batches) to
    float rounding, rank 0 logs, and writes a one-file checkpoint of the gathered state.

    >>> import tempfile
    >>> config = CharGPTTrainConfig(
    ...     steps=2, warmup_steps=1, n_layer=1, n_embd=16, n_head=2, block_size=8,
    ...     eval_batches=1, out=tempfile.mkdtemp() + "/gpt.safetensors", sample_tokens=5,
    ...     progress=False)
    >>> result = train_char_gpt(config, text="abcd" * 100, log=lambda line: None)
    >>> result.steps, len(result.sample)
    (2, 9)
    """
    world = get_world()
    if config.uses_graph or world.size > 1:
        check_gpt_parallel(config, config.dp, config.tp, config.pp, world.size)
    lead = world.rank == 0
    if not lead:
        log = _silent
    text = pydoc_text() if text is None else text
    tokenizer = CharTokenizer.from_text(text, config.max_vocab)
    train_ids, val_ids = train_val_split(tokenizer.encode(text), config.val_fraction)
    baseline = unigram_entropy(train_ids, tokenizer.vocab_size)
    log(
        f"corpus: {len(text):,} characters ({len(set(text))} distinct), vocabulary "
        f"{tokenizer.vocab_size} (the {len(tokenizer.chars)} most frequent + 1 for the rest), "
        f"{len(train_ids):,} train / {len(val_ids):,} val tokens; unigram entropy "
        f"{baseline:.3f} nats"
    )

    manual_seed(config.seed)
    model = GPT(config.model_config(tokenizer.vocab_size))
    log(f"model: GPT with {model.num_parameters():,} parameters ({model.config})")
    optimizer = AdamW(
        model.parameter_groups(config.weight_decay), lr=config.learning_rate,
        betas=(config.beta1, config.beta2),
    )  # fmt: skip
    scheduler = warmup_cosine_schedule(optimizer, config.warmup_steps, config.steps, config.min_lr)
    train_step, estimate = training_steps(model, optimizer, scheduler, config)
    if config.uses_graph:
        m = config.accumulation_steps
        log(
            f"parallel: dp={config.dp} x tp={config.tp} x pp={config.pp} on {world.size} "
            f"rank(s), {m} micro-batch(es) of {config.batch_size // m} blocks per step, in an "
            "nn.Graph"
        )
    batches = Generator().manual_seed(config.seed + 1)
    tokens_per_step = config.batch_size * config.block_size

    train_seconds = 0.0
    train_loss = val_loss = float("nan")
    losses = []
    bar = tqdm(
        range(1, config.steps + 1), desc="train", unit="step",
        disable=not (config.progress and lead),
    )  # fmt: skip
    for step in bar:
        start = time.perf_counter()
        x, y = random_blocks(train_ids, config.batch_size, config.block_size, batches)
        losses.append(train_step(x, y))
        elapsed = time.perf_counter() - start
        train_seconds += elapsed
        bar.set_postfix(loss=f"{losses[-1]:.3f}", tok_s=f"{tokens_per_step / elapsed:,.0f}")
        if step % config.eval_interval == 0 or step == config.steps:
            train_loss = estimate(train_ids)
            val_loss = estimate(val_ids)
            log(
                f"step {step:5d}: train loss {train_loss:.4f}, val loss {val_loss:.4f} nats "
                f"(unigram entropy {baseline:.4f})"
            )
    bar.close()

    path = Path(config.out)
    save_checkpoint(path, model, optimizer, scheduler, tokenizer, config, config.steps, val_loss)
    log(f"checkpoint: {path}")
    sample = ""
    if lead:
        model, tokenizer, _ = load_char_gpt(path)
        sample = sample_text(
            model, tokenizer, config.prompt, config.sample_tokens, config.temperature,
            config.top_k, config.seed,
        )  # fmt: skip
    return CharGPTTrainResult(
        steps=config.steps,
        train_loss=train_loss,
        val_loss=val_loss,
        unigram_entropy=baseline,
        tokens_per_second=config.steps * tokens_per_step / train_seconds,
        train_seconds=train_seconds,
        checkpoint=path,
        sample=sample,
        losses=losses,
    )


def _silent(line: str) -> None:
    """The log of ranks other than 0: a parallel run reports once."""


def training_steps(model: GPT, optimizer, scheduler, config: CharGPTTrainConfig):
    """(step on a batch -> its loss, data -> estimated loss) of the run `config` describes:
    nn.Graphs on every rank of the world with `config.uses_graph`, else eager."""
    steps = _graph_steps if config.uses_graph else _eager_steps
    return steps(model, optimizer, scheduler, config)


def _eager_steps(model: GPT, optimizer, scheduler, config: CharGPTTrainConfig):
    """One process, eagerly: (step on a batch -> its loss, data -> estimated loss)."""

    def train_step(x, y) -> float:
        _, loss = model(x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        clip_grad_norm_(model.parameters(), config.grad_clip)
        optimizer.step()
        scheduler.step()
        return loss.item()

    return train_step, lambda data: estimate_loss(model, data, config)


class _TrainGraph(Graph):
    """One optimizer step: AdamW with its schedule and the gradients' total norm clipped,
    on `micro_batches` micro-batches (each loss scaled so that their gradients add up to the
    whole batch's, as one process computes it)."""

    def __init__(self, model: GPT, layout, optimizer, scheduler, config: CharGPTTrainConfig):
        super().__init__()
        self.model = model
        layout.set_stages(self.model)
        self.add_optimizer(optimizer, lr_sch=scheduler, clip_grad_max_norm=config.grad_clip)
        self.micro_batches = config.accumulation_steps
        if self.micro_batches > 1:
            self.config.set_gradient_accumulation_steps(self.micro_batches)

    def build(self, idx, targets):
        _, loss = self.model(idx, targets)
        (loss / self.micro_batches if self.micro_batches > 1 else loss).backward()
        return loss


class _LossGraph(Graph):
    """The loss of a batch, on the training graph's layout (no update)."""

    def __init__(self, model: GPT, layout) -> None:
        super().__init__()
        self.model = model
        layout.set_stages(self.model)

    def build(self, idx, targets):
        return self.model(idx, targets)[1]


def _graph_steps(model: GPT, optimizer, scheduler, config: CharGPTTrainConfig):
    """Every rank of the world, in nn.Graphs over the parallel layout: (step on a batch ->
    its loss, data -> estimated loss). Every rank draws every batch (one seed) and keeps its
    shard, and reads each loss (a collective)."""
    layout = parallelize_gpt(model, config.dp, config.tp, config.pp)
    train = _TrainGraph(model, layout, optimizer, scheduler, config)
    evaluate = _LossGraph(model, layout)

    def train_step(x, y) -> float:
        # a micro-batched step returns each micro-batch's mean loss: equal sizes, so their
        # mean is the batch's
        return float(train(*layout.inputs(x, y)).numpy().mean())

    @no_grad()
    def estimate(data) -> float:
        """`estimate_loss` of the graph: the same blocks, dropout off."""
        was_training = model.training
        model.eval()
        blocks = Generator().manual_seed(config.seed)
        losses = [
            float(evaluate(*layout.inputs(*random_blocks(
                data, config.batch_size, config.block_size, blocks))).numpy())
            for _ in range(config.eval_batches)
        ]  # fmt: skip
        model.train(was_training)
        return sum(losses) / len(losses)

    return train_step, estimate


def _gathered_optimizer_state(optimizer) -> dict:
    """The optimizer's state dict with whole local tensors (collective). A graph keeps the
    state of a parameter only on the ranks of its placement (its pipeline stage): each
    stage gathers its own, and the first rank of the parameter's placement sends it on."""
    state = optimizer.state_dict()
    mine = {}
    for index, entries in state["state"].items():
        whole = {k: _whole_on_its_placement(v) for k, v in entries.items()}
        firsts = {v.placement.flat_ranks[0] for v in entries.values() if _is_global(v)}
        if firsts <= {get_world().rank}:
            mine[index] = {k: tensor(v) if isinstance(v, np.ndarray) else v
                           for k, v in whole.items()}  # fmt: skip
    pieces: list = [None] * get_world().size
    all_gather_object(pieces, mine)
    merged = {}
    for piece in pieces:
        merged.update(piece)
    return {"state": dict(sorted(merged.items())), "param_groups": state["param_groups"]}


def _is_global(value) -> bool:
    return isinstance(value, Tensor) and value.is_global


def _whole_on_its_placement(value):
    """A global tensor's logical value as an array, boxed over its own placement only."""
    if not _is_global(value):
        return value
    whole = (broadcast,) * value.placement.ndim
    return value.detach().to_global(sbp=whole).to_local().numpy()


def _gathered(state):
    """A state dict with each global tensor gathered into a whole local one (collective:
    every rank calls it, in the same order)."""
    if isinstance(state, Tensor) and state.is_global:
        return tensor(state.detach().numpy())
    if isinstance(state, dict):
        return {k: _gathered(v) for k, v in state.items()}
    if isinstance(state, list | tuple):
        return type(state)(_gathered(v) for v in state)
    return state


def save_checkpoint(
    path: Path, model: GPT, optimizer, scheduler, tokenizer: CharTokenizer,
    config: CharGPTTrainConfig, step: int, val_loss: float,
) -> None:  # fmt: skip
    """Model, optimizer and scheduler state, both configs, the vocabulary and the step, in
    one file that `flow.save` writes atomically (a crash mid-write keeps the previous one).
    With `config.uses_graph` every rank calls it: the global state is gathered (collective)
    and rank 0 writes it."""
    if config.uses_graph:
        model_state = _gathered(model.state_dict())
        optimizer_state = _gathered_optimizer_state(optimizer)
        if get_world().rank != 0:
            return
    else:
        model_state, optimizer_state = model.state_dict(), optimizer.state_dict()
    _write_checkpoint(path, model_state, optimizer_state, scheduler.state_dict(), model.config,
                      tokenizer, config, step, val_loss)  # fmt: skip


def _write_checkpoint(
    path: Path, model_state: dict, optimizer_state: dict, scheduler_state: dict,
    model_config: GPTConfig, tokenizer: CharTokenizer, config: CharGPTTrainConfig, step: int,
    val_loss: float,
) -> None:  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    checkpoint = {
        "model": model_state,
        "optimizer": optimizer_state,
        "scheduler": scheduler_state,
        "model_config": asdict(model_config),
        "train_config": asdict(config),
        "vocab": tokenizer.chars,
        "step": step,
        "val_loss": val_loss,
    }
    save(checkpoint, path)


def load_char_gpt(path) -> tuple[GPT, CharTokenizer, dict]:
    """A fresh GPT with the weights of a checkpoint written by `train_char_gpt`, in eval
    mode, its tokenizer, and the whole checkpoint."""
    checkpoint = load(path)
    model = GPT(GPTConfig(**checkpoint["model_config"]))
    model.load_state_dict(checkpoint["model"])
    return model.eval(), CharTokenizer(checkpoint["vocab"]), checkpoint


def sample_text(
    model: GPT, tokenizer: CharTokenizer, prompt: str, tokens: int, temperature: float = 1.0,
    top_k: int | None = None, seed: int = 0,
) -> str:  # fmt: skip
    """`prompt` (a newline if empty) continued by `tokens` sampled characters."""
    prompt = prompt or "\n"
    context = tokenizer.encode(prompt).reshape(1, -1)
    out = model.generate(
        context, tokens, temperature=temperature, top_k=top_k,
        generator=Generator().manual_seed(seed),
    )  # fmt: skip
    return prompt + tokenizer.decode(out[0, len(prompt) :])
