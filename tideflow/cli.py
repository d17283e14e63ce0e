"""The `tideflow` command line.

    tideflow train gpt [--steps N --batch-size B --n-layer L ... --out PATH --seed S]
    tideflow sample gpt CHECKPOINT [--tokens N --prompt TEXT --temperature T --top-k K]
    python -m tideflow.distributed.launch --nproc_per_node 8 -m tideflow train gpt \
        --dp 2 --tp 2 --pp 2

`train gpt` is the loop behind `make demo`: a character-level GPT on CPython's documentation
text (see `tideflow.models.char_gpt`). Every field of `CharGPTTrainConfig` is an option.
With --dp/--tp/--pp every rank of the job runs it (rank 0 prints and writes the checkpoint).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import types
import typing

from . import __version__
from .distributed.world import get_world
from .framework.errors import TideflowError
from .models.char_gpt import (
    CharGPTTrainConfig,
    load_char_gpt,
    sample_text,
    train_char_gpt,
)
from .models.gpt_parallel import check_gpt_parallel

_METAVARS = {int: "N", float: "X", str: "TEXT"}


def _option_type(annotation) -> type:
    """The type an option parses to: `int | None` parses as int (None is the default)."""
    if isinstance(annotation, types.UnionType):
        (annotation,) = [a for a in typing.get_args(annotation) if a is not type(None)]
    return annotation


def _add_config_options(parser: argparse.ArgumentParser, config_class) -> None:
    hints = typing.get_type_hints(config_class)
    for f in dataclasses.fields(config_class):
        flag = "--" + f.name.replace("_", "-")
        kind = _option_type(hints[f.name])
        help_text = f.metadata["help"]
        if kind is bool:
            parser.add_argument(
                flag, action=argparse.BooleanOptionalAction, default=f.default, help=help_text
            )
        else:
            metavar = f.metadata.get("metavar") or _METAVARS[kind]
            parser.add_argument(flag, type=kind, default=f.default, metavar=metavar, help=help_text)


def _train_gpt(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    names = [f.name for f in dataclasses.fields(CharGPTTrainConfig)]
    world = get_world()
    try:
        config = CharGPTTrainConfig(**{name: getattr(args, name) for name in names})
        if config.uses_graph or world.size > 1:
            check_gpt_parallel(config, config.dp, config.tp, config.pp, world.size)
    except ValueError as e:
        _refuse(parser, str(e), world)
    result = train_char_gpt(config)
    if world.rank != 0:  # a parallel run reports once
        return 0
    print(
        f"done: {result.steps} steps in {result.train_seconds:.1f} s "
        f"({result.tokens_per_second:,.0f} tokens/s); val loss {result.val_loss:.4f} nats vs "
        f"unigram entropy {result.unigram_entropy:.4f} nats"
    )
    print(f"sample from the reloaded checkpoint {result.checkpoint}:\n{result.sample}")
    return 0


def _refuse(parser: argparse.ArgumentParser, message: str, world) -> None:
    """`parser.error(message)` on every rank of a job, each rank's message written before any
    rank exits: the launcher drops what ranks still running print once one exits non-zero."""
    parser.print_usage(sys.stderr)
    sys.stderr.write(f"{parser.prog}: error: {message}\n")
    sys.stderr.flush()
    if world.size > 1:
        world.comm.barrier()
    sys.exit(2)


def _sample_gpt(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    try:
        model, tokenizer, _ = load_char_gpt(args.checkpoint)
    except (OSError, TideflowError, KeyError) as e:
        parser.error(f"cannot load a `train gpt` checkpoint from {args.checkpoint}: {e}")
    try:
        text = sample_text(
            model, tokenizer, args.prompt, args.tokens, args.temperature, args.top_k, args.seed
        )
    except ValueError as e:
        parser.error(str(e))
    print(text)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tideflow", description="tideflow: train and sample the reference models."
    )
    parser.add_argument("--version", action="version", version=f"tideflow {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    defaults = argparse.ArgumentDefaultsHelpFormatter

    train = commands.add_parser("train", help="train a reference model")
    train_models = train.add_subparsers(dest="model", required=True, metavar="MODEL")
    train_gpt = train_models.add_parser(
        "gpt", formatter_class=defaults, help="a character-level GPT on CPython's docs",
        description="Train a GPT as a character-level language model on the text of "
        "CPython's interactive help (pydoc_data.topics, PSF License); save a checkpoint and "
        "print a sample generated from it.",
    )  # fmt: skip
    _add_config_options(train_gpt, CharGPTTrainConfig)
    train_gpt.set_defaults(run=_train_gpt, command_parser=train_gpt)

    sample = commands.add_parser("sample", help="generate from a trained model")
    sample_models = sample.add_subparsers(dest="model", required=True, metavar="MODEL")
    sample_gpt = sample_models.add_parser(
        "gpt", formatter_class=defaults, help="text from a `train gpt` checkpoint",
        description="Continue a prompt with characters sampled from a checkpoint written "
        "by `tideflow train gpt`.",
    )  # fmt: skip
    sample_gpt.add_argument("checkpoint", help="checkpoint path")
    sample_gpt.add_argument("--tokens", type=int, default=300, help="characters to generate")
    sample_gpt.add_argument("--prompt", default="The ", help="text to continue")
    sample_gpt.add_argument("--temperature", type=float, default=0.8, help="sampling temperature")
    sample_gpt.add_argument("--top-k", type=int, default=None, help="sample from the top k only")
    sample_gpt.add_argument("--seed", type=int, default=0, help="sampling seed")
    sample_gpt.set_defaults(run=_sample_gpt, command_parser=sample_gpt)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line with `argv` (default: `sys.argv[1:]`); returns the exit status.

    >>> main(["--version"])  # doctest: +SKIP
    tideflow 0.1.0
    """
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    return args.run(args, args.command_parser)


if __name__ == "__main__":
    sys.exit(main())
