"""The `tideflow` command line.

    tideflow train gpt [--steps N --batch-size B --n-layer L ... --out PATH --seed S]
    tideflow train deepfm|dlrm [--data CRITEO.tsv --epochs N --store host|ssd ... --resume]
    tideflow sample gpt CHECKPOINT [--tokens N --prompt TEXT --temperature T --top-k K]
    tideflow plan --model gpt --layers L --hidden H --heads A --global-batch B \
        --cluster a100-80gb --nodes N [--tp T --pp P ... | --search] [--json]
    python -m tideflow.distributed.launch --nproc_per_node 8 -m tideflow train gpt \
        --dp 2 --tp 2 --pp 2

`train gpt` is the loop behind `make demo`: a character-level GPT on CPython's documentation
text (see `tideflow.models.char_gpt`). Every field of `CharGPTTrainConfig` is an option.
With --dp/--tp/--pp every rank of the job runs it (rank 0 prints and writes the checkpoint).
`train deepfm` and `train dlrm` train a recommender on `flow.one_embedding` tables (see
`tideflow.models.recommender`), on synthetic click logs or a Criteo-format file.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
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
from .models.recommender import DeepFMTrainConfig, DLRMTrainConfig, train_recommender
from .parallel import cost

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


def _train_recommender(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    names = [f.name for f in dataclasses.fields(args.config_class)]
    try:
        config = args.config_class(**{name: getattr(args, name) for name in names})
    except ValueError as e:
        parser.error(str(e))
    try:  # a data file or a checkpoint that does not fit
        result = train_recommender(config)
    except (OSError, TideflowError) as e:
        parser.error(str(e))
    versus = ""
    if result.auc_ceiling is not None:
        versus = f" vs {result.auc_ceiling:.4f}, the AUC of the hidden model that drew the labels"
    print(
        f"done: {result.steps} steps ({result.samples_per_second:,.0f} samples/s); held-out "
        f"AUC {result.val_auc:.4f}{versus}; log loss {result.val_log_loss:.4f}"
    )
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


_LAYOUT_FLAGS = ("tp", "pp", "dp", "micro_batch", "recompute", "zero", "interleave")


def _plan(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    model = {"--layers": args.layers, "--hidden": args.hidden, "--heads": args.heads,
             "--global-batch": args.global_batch}  # fmt: skip
    missing = [flag for flag, value in model.items() if value is None]
    if args.calibrate and len(missing) == len(model):  # measure this machine, plan nothing
        try:
            print(json.dumps(cost.calibrate(), indent=1))
        except TideflowError as e:
            parser.error(str(e))
        return 0
    if missing:
        parser.error(f"the following arguments are required: {', '.join(missing)}")
    given = {name: getattr(args, name) for name in _LAYOUT_FLAGS}
    try:
        if args.calibrate:
            cost.calibrate()
        spec = cost.GPTSpec(args.layers, args.hidden, args.heads, args.seq, args.vocab)
        cluster = cost.make_cluster(args.cluster, args.nodes, args.gpus_per_node)
        chosen = cost.plan(spec, cluster, args.global_batch, **({} if args.search else given))
        baseline = None
        if args.search and any(v is not None for v in given.values()):
            baseline = cost.plan(spec, cluster, args.global_batch, **given)
    except TideflowError as e:
        parser.error(str(e))
    if args.json:
        report = {"parameters": spec.parameters, "devices": cluster.devices, **chosen.to_json()}
        if baseline is not None:
            report["given_layout"] = baseline.to_json()
        print(json.dumps(report, indent=1))
        return 0
    print(cost.format_plan(chosen, spec, cluster))
    if baseline is not None:
        print("\nagainst the layout given:\n" + cost.explain(chosen, baseline))
    return 0


def _add_plan_options(plan: argparse.ArgumentParser) -> None:
    model = plan.add_argument_group("model")
    model.add_argument("--model", choices=["gpt"], default="gpt", help="model family")
    # NOTE: required, except by `--calibrate` alone (checked in _plan)
    model.add_argument("--layers", type=int, metavar="L", help="transformer layers")
    model.add_argument("--hidden", type=int, metavar="H", help="hidden size")
    model.add_argument("--heads", type=int, metavar="A", help="attention heads")
    model.add_argument("--seq", type=int, default=2048, metavar="S", help="sequence (2048)")
    model.add_argument("--vocab", type=int, default=51200, metavar="V", help="vocabulary (51200)")
    model.add_argument("--global-batch", type=int, metavar="B", help="sequences per step")
    where = plan.add_argument_group("cluster")
    where.add_argument(
        "--cluster", default="a100-80gb", metavar="NAME",
        help="a100-80gb (the default), h100-80gb, h200, local (this machine, measured) "
        "or FILE.json",
    )  # fmt: skip
    where.add_argument("--nodes", type=int, default=None, metavar="N", help="nodes (1)")
    where.add_argument(
        "--gpus-per-node", type=int, default=None, metavar="G",
        help="devices per node (8; local: one per CPU)",
    )  # fmt: skip
    where.add_argument(
        "--calibrate", action="store_true", help="measure this machine again for --cluster local"
    )
    layout = plan.add_argument_group("layout (each one left out is picked by the planner)")
    layout.add_argument("--tp", type=int, default=None, metavar="T", help="tensor-parallel size")
    layout.add_argument("--pp", type=int, default=None, metavar="P", help="pipeline stages")
    layout.add_argument("--dp", type=int, default=None, metavar="D", help="data-parallel size")
    layout.add_argument(
        "--micro-batch", type=int, default=None, metavar="b", help="sequences per micro-batch"
    )
    layout.add_argument(
        "--recompute", action=argparse.BooleanOptionalAction, default=None,
        help="recompute activations in backward",
    )  # fmt: skip
    layout.add_argument("--zero", type=int, default=None, metavar="STAGE", help="ZeRO stage 0-3")
    layout.add_argument(
        "--interleave", type=int, default=None, metavar="K", help="model chunks per stage"
    )
    plan.add_argument(
        "--search", action="store_true",
        help="search every layout field; a layout also given is explained against the best",
    )  # fmt: skip
    plan.add_argument("--json", action="store_true", help="print one JSON object")


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
    for config_class, summary in (
        (DeepFMTrainConfig, "DeepFM: an FM and an MLP over the same sparse embeddings"),
        (DLRMTrainConfig, "DLRM: dense MLP, dot-product interactions, top MLP"),
    ):
        recommender = train_models.add_parser(
            config_class.model_name, formatter_class=defaults, help=summary,
            description=f"Train {summary} on flow.one_embedding tables, with synthetic "
            "Criteo-format click logs (labels from a hidden model, whose own AUC is printed "
            "as the ceiling) or a Criteo-format TSV file; report the held-out AUC; save a "
            "checkpoint that --resume continues.",
        )  # fmt: skip
        _add_config_options(recommender, config_class)
        recommender.set_defaults(
            run=_train_recommender, command_parser=recommender, config_class=config_class
        )

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

    plan = commands.add_parser(
        "plan", help="predict a training step on a cluster",
        description="Predict the step time, TFLOP/s per device, memory per device and "
        "pipeline bubble of a GPT on a cluster for a tensor x pipeline x data-parallel layout, "
        "or find the fastest layout that fits. See docs/planning.md.",
    )  # fmt: skip
    _add_plan_options(plan)
    plan.set_defaults(run=_plan, command_parser=plan)
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
