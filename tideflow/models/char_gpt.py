"""Training a GPT as a character-level language model: the loop behind `make demo` and
`tideflow train gpt`. AdamW with linear warmup and cosine decay, gradient clipping, periodic
validation, an atomic checkpoint, and a sample generated from the reloaded checkpoint."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tqdm import tqdm

from ..framework.grad_mode import no_grad
from ..io import load, save
from ..nn.utils import clip_grad_norm_
from ..ops.random import Generator, manual_seed
from ..optim import AdamW
from ..optim.lr_scheduler import CosineAnnealingLR, LinearLR, LRScheduler, SequentialLR
from .chardata import CharTokenizer, pydoc_text, random_blocks, train_val_split, unigram_entropy
from .gpt import GPT, GPTConfig


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

    def model_config(self, vocab_size: int) -> GPTConfig:
        return GPTConfig(
            vocab_size=vocab_size, block_size=self.block_size, n_layer=self.n_layer,
            n_head=self.n_head, n_embd=self.n_embd, dropout=self.dropout, bias=self.bias,
        )  # fmt: skip


@dataclass
class CharGPTTrainResult:
    """What a run reached: final losses (nats per character) next to the unigram baseline,
    throughput, the checkpoint written and the sample generated from it."""

    steps: int
    train_loss: float
    val_loss: float
    unigram_entropy: float
    tokens_per_second: float
    train_seconds: float
    checkpoint: Path
    sample: str


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

    >>> import tempfile
    >>> config = CharGPTTrainConfig(
    ...     steps=2, warmup_steps=1, n_layer=1, n_embd=16, n_head=2, block_size=8,
    ...     eval_batches=1, out=tempfile.mkdtemp() + "/gpt.safetensors", sample_tokens=5,
    ...     progress=False)
    >>> result = train_char_gpt(config, text="abcd" * 100, log=lambda line: None)
    >>> result.steps, len(result.sample)
    (2, 9)
    """
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
    batches = Generator().manual_seed(config.seed + 1)
    tokens_per_step = config.batch_size * config.block_size

    train_seconds = 0.0
    train_loss = val_loss = float("nan")
    bar = tqdm(range(1, config.steps + 1), desc="train", unit="step", disable=not config.progress)
    for step in bar:
        start = time.perf_counter()
        x, y = random_blocks(train_ids, config.batch_size, config.block_size, batches)
        _, loss = model(x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        clip_grad_norm_(model.parameters(), config.grad_clip)
        optimizer.step()
        scheduler.step()
        elapsed = time.perf_counter() - start
        train_seconds += elapsed
        bar.set_postfix(loss=f"{loss.item():.3f}", tok_s=f"{tokens_per_step / elapsed:,.0f}")
        if step % config.eval_interval == 0 or step == config.steps:
            train_loss = estimate_loss(model, train_ids, config)
            val_loss = estimate_loss(model, val_ids, config)
            log(
                f"step {step:5d}: train loss {train_loss:.4f}, val loss {val_loss:.4f} nats "
                f"(unigram entropy {baseline:.4f})"
            )
    bar.close()

    path = Path(config.out)
    save_checkpoint(path, model, optimizer, scheduler, tokenizer, config, config.steps, val_loss)
    log(f"checkpoint: {path}")
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
    )


def save_checkpoint(
    path: Path, model: GPT, optimizer, scheduler, tokenizer: CharTokenizer,
    config: CharGPTTrainConfig, step: int, val_loss: float,
) -> None:  # fmt: skip
    """Model, optimizer and scheduler state, both configs, the vocabulary and the step, in
    one file that `flow.save` writes atomically (a crash mid-write keeps the previous one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    checkpoint = {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "model_config": asdict(model.config),
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
