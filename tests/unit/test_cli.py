"""The `tideflow` command line: help, options mapped onto the training config, errors, and a
tiny `train gpt` + `sample gpt` round trip (the demo's code path)."""

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from tideflow import __version__
from tideflow.cli import build_parser, main
from tideflow.models.char_gpt import CharGPTTrainConfig

ROOT = Path(__file__).resolve().parents[2]
TINY = ["--n-layer", "1", "--n-head", "2", "--n-embd", "16", "--block-size", "8",
        "--batch-size", "4", "--steps", "3", "--warmup-steps", "1", "--eval-batches", "1",
        "--sample-tokens", "10", "--no-progress"]  # fmt: skip


def _run(*args, timeout=120):
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


@pytest.mark.timeout(120)
def test_python_m_tideflow_help_lists_the_commands():
    result = _run("-m", "tideflow", "--help")
    assert result.returncode == 0, result.stderr
    assert "usage: tideflow" in result.stdout
    assert "train" in result.stdout and "sample" in result.stdout


@pytest.mark.timeout(120)
def test_example_script_is_the_train_gpt_command():
    result = _run("examples/train_gpt.py", "--help")
    assert result.returncode == 0, result.stderr
    assert "usage: tideflow train gpt" in result.stdout
    assert "--batch-size N" in result.stdout and "(default: 32)" in result.stdout


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"tideflow {__version__}"


def test_every_config_field_is_an_option_with_its_default():
    args = build_parser().parse_args(["train", "gpt"])
    for f in dataclasses.fields(CharGPTTrainConfig):
        assert getattr(args, f.name) == f.default, f.name


def test_options_parse_to_the_config_types():
    args = build_parser().parse_args(
        ["train", "gpt", "--steps", "7", "--learning-rate", "1e-3", "--top-k", "5",
         "--no-bias", "--out", "x.safetensors", "--seed", "3"]
    )  # fmt: skip
    assert (args.steps, args.learning_rate, args.top_k) == (7, 1e-3, 5)
    assert args.bias is False and args.out == "x.safetensors" and args.seed == 3


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "the following arguments are required: COMMAND"),
        (["train"], "the following arguments are required: MODEL"),
        (["train", "gpt", "--steps", "0"], "steps must be positive, got 0"),
        (["train", "gpt", "--steps", "ten"], "argument --steps: invalid int value: 'ten'"),
        (["train", "bert"], "invalid choice: 'bert'"),
    ],
)
def test_bad_command_lines_exit_2_with_a_message(capsys, argv, message):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_train_then_sample_round_trip(tmp_path, capsys):
    ckpt = tmp_path / "gpt.safetensors"
    assert main(["train", "gpt", *TINY, "--out", str(ckpt), "--prompt", "def "]) == 0
    out = capsys.readouterr().out
    assert "unigram entropy" in out and "step     3: train loss" in out
    assert f"sample from the reloaded checkpoint {ckpt}:\ndef " in out
    assert ckpt.exists()

    assert main(["sample", "gpt", str(ckpt), "--tokens", "25", "--prompt", "x = "]) == 0
    sample = capsys.readouterr().out
    assert sample.startswith("x = ") and len(sample) == len("x = ") + 25 + 1  # + print's newline


def test_sample_reports_unreadable_checkpoints_and_bad_options(tmp_path, capsys):
    missing = tmp_path / "missing.safetensors"
    with pytest.raises(SystemExit) as exit_info:
        main(["sample", "gpt", str(missing)])
    assert exit_info.value.code == 2
    assert f"cannot load a `train gpt` checkpoint from {missing}" in capsys.readouterr().err

    ckpt = tmp_path / "gpt.safetensors"
    main(["train", "gpt", *TINY, "--out", str(ckpt)])
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main(["sample", "gpt", str(ckpt), "--temperature", "0"])
    assert "temperature must be positive, got 0.0" in capsys.readouterr().err
