"""`tideflow train gpt --dp/--tp/--pp/--micro-batches/--graph` on one process: the options'
validation (clear errors naming the sizes), the graph path (what parallel runs execute)
against the eager loop, and the checkpoint it writes. Runs on several ranks are in
tests/dist/test_train_gpt.py."""

from __future__ import annotations

import pytest

from tideflow.cli import main
from tideflow.models import GPT, GPTConfig, parallelize_gpt
from tideflow.models.char_gpt import CharGPTTrainConfig, load_char_gpt, train_char_gpt
from tideflow.models.gpt_parallel import check_gpt_parallel

TEXT = "".join(f"x{i} = x{i - 1} * {i % 9} + 1\n" for i in range(1, 400))
TINY = {"n_layer": 2, "n_head": 2, "n_embd": 16, "block_size": 8, "batch_size": 8, "steps": 6,
        "warmup_steps": 2, "eval_interval": 3, "eval_batches": 2, "sample_tokens": 8,
        "progress": False}  # fmt: skip


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"tp": 3}, r"n_head \(4\) must be divisible by tp \(3\)"),
        ({"tp": 2, "n_head": 2, "n_embd": 31}, r"n_embd \(31\) must be divisible by tp \(2\)"),
        ({"pp": 5}, r"n_layer \(4\) must be at least pp \(5\)"),
        ({"dp": 0}, "dp must be at least 1, got 0"),
        ({"pp": 0}, "pp must be at least 1, got 0"),
        ({"micro_batches": 0}, "micro_batches must be at least 1, got 0"),
        ({"dp": 3}, r"batch_size \(32\) must be divisible by dp x micro-batches = 3 x 1"),
        ({"dp": 2, "pp": 4, "batch_size": 12}, r"must be divisible by dp x micro-batches = 2 x 4"),
        ({"grad_clip": 0.0}, "grad_clip must be positive"),
    ],
)
def test_parallel_options_are_validated_with_the_sizes_named(options, message):
    with pytest.raises(ValueError, match=message):
        CharGPTTrainConfig(**options)


def test_micro_batches_default_to_one_per_stage_and_any_split_means_a_graph():
    assert CharGPTTrainConfig().accumulation_steps == 1
    assert not CharGPTTrainConfig().uses_graph  # the demo's eager loop
    assert CharGPTTrainConfig(pp=2).accumulation_steps == 2
    assert CharGPTTrainConfig(pp=2, micro_batches=4).accumulation_steps == 4
    for options in ({"dp": 2}, {"tp": 2}, {"pp": 2}, {"micro_batches": 2}, {"graph": True}):
        assert CharGPTTrainConfig(**options).uses_graph, options


def test_the_world_must_be_dp_x_tp_x_pp():
    config = GPTConfig(vocab_size=11, block_size=8, n_layer=2, n_head=2, n_embd=16)
    with pytest.raises(
        ValueError, match=r"dp x tp x pp = 2 x 2 x 2 = 8 ranks, but the world has 4"
    ):
        check_gpt_parallel(config, 2, 2, 2, world_size=4)
    check_gpt_parallel(config, 2, 2, 2, world_size=8)
    with pytest.raises(ValueError, match="but the world has 1"):
        parallelize_gpt(GPT(config), dp=2)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--dp", "2"], "dp x tp x pp = 2 x 1 x 1 = 2 ranks, but the world has 1: launch 2"),
        (["--tp", "3"], "n_head (4) must be divisible by tp (3)"),
        (["--pp", "2", "--batch-size", "3"], "must be divisible by dp x micro-batches = 1 x 2"),
        (["--micro-batches", "0"], "micro_batches must be at least 1, got 0"),
    ],
)
def test_the_cli_reports_bad_parallel_options(capsys, argv, message):
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "gpt", *argv])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("options", [{"graph": True}, {"micro_batches": 2}], ids=str)
def test_the_graph_path_trains_like_the_eager_loop(tmp_path, options):
    """Same init, batches, AdamW groups, schedule and gradient clipping: the losses of each
    step equal to float32 rounding (micro-batches: their gradients add up to the batch's)."""
    eager = train_char_gpt(CharGPTTrainConfig(**TINY, out=str(tmp_path / "eager.safetensors")),
                           text=TEXT, log=lambda line: None)  # fmt: skip
    lines = []
    config = CharGPTTrainConfig(**TINY, **options, out=str(tmp_path / "graph.safetensors"))
    graph = train_char_gpt(config, text=TEXT, log=lines.append)
    assert len(graph.losses) == TINY["steps"]
    assert graph.losses == pytest.approx(eager.losses, abs=2e-5)
    assert graph.val_loss == pytest.approx(eager.val_loss, abs=2e-5)
    assert any(line.startswith("parallel: dp=1 x tp=1 x pp=1 on 1 rank(s)") for line in lines)

    _, _, checkpoint = load_char_gpt(graph.checkpoint)  # whole, local tensors
    _, _, want_checkpoint = load_char_gpt(eager.checkpoint)
    assert sorted(checkpoint["model"]) == sorted(want_checkpoint["model"])
    assert not any(t.is_global for t in checkpoint["model"].values())
    assert checkpoint["optimizer"]["state"].keys() == want_checkpoint["optimizer"]["state"].keys()
    assert graph.sample.startswith("The ") and len(graph.sample) == 4 + TINY["sample_tokens"]


def test_the_layout_docstrings_run():
    from tideflow.models import gpt_parallel

    from .test_nn_layers import run_doctests

    run_doctests(gpt_parallel)
