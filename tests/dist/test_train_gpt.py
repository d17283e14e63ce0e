"""`tideflow train gpt --dp D --tp T --pp P`: the char-GPT trained data, tensor and pipeline
parallel (every 1-D and 2-D combination on 2 and 4 ranks, all three on 8) has the per-step
losses, validation loss and checkpoint of one process (workers/train_gpt.py); the command
itself runs through the launcher and its checkpoint samples on one process."""

from __future__ import annotations

import dataclasses
import json
import re
import sys

import pytest

from tideflow.cli import main
from tideflow.models.char_gpt import CharGPTTrainConfig, train_char_gpt

from .jobs import WORKERS, every_rank_ok, run_job

pytestmark = pytest.mark.mpi

TINY = {"n_layer": 2, "n_head": 2, "n_embd": 16, "block_size": 8, "batch_size": 8, "steps": 10,
        "warmup_steps": 2, "eval_interval": 5, "eval_batches": 2, "sample_tokens": 10,
        "progress": False}  # fmt: skip
TEXT = "".join(f"def f{i}(x):\n    return x * {i} + {i % 7}\n" for i in range(300))


def _reference(folder, **options) -> str:
    """The one-process (eager) run, as the workers read it."""
    config = CharGPTTrainConfig(**TINY, **options, out=str(folder / "one.safetensors"))
    result = train_char_gpt(config, text=TEXT, log=lambda line: None)
    path = folder / "reference.json"
    path.write_text(json.dumps({
        "config": dataclasses.asdict(config), "text": TEXT, "losses": result.losses,
        "val_loss": result.val_loss, "checkpoint": config.out,
    }))  # fmt: skip
    return str(path)


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> str:
    return _reference(tmp_path_factory.mktemp("reference"))


@pytest.fixture(scope="module")
def reference_with_dropout(tmp_path_factory) -> str:
    return _reference(tmp_path_factory.mktemp("reference_dropout"), dropout=0.1)


@pytest.mark.parametrize(
    ("dp", "tp", "pp"),
    [(2, 1, 1), (1, 2, 1), (1, 1, 2), (2, 2, 1), (2, 1, 2), (1, 2, 2)],
    ids=["dp2", "tp2", "pp2", "dp2xtp2", "dp2xpp2", "tp2xpp2"],
)
def test_a_parallel_run_trains_like_one_process(launch, reference, tmp_path, dp, tp, pp):
    n = dp * tp * pp
    job = launch(n, [str(WORKERS / "train_gpt.py"), reference, str(tmp_path), str(dp), str(tp),
                     str(pp)], timeout=120 * n)  # fmt: skip
    every_rank_ok(job, n)


@pytest.mark.parametrize(("dp", "tp"), [(2, 1), (1, 2)], ids=["dp2", "tp2"])
def test_dropout_draws_the_masks_of_one_process(launch, reference_with_dropout, tmp_path, dp, tp):
    """Dropout's masks are drawn whole on every rank of a placement from the seeded
    generator: without micro-batches they are one process's."""
    args = [reference_with_dropout, str(tmp_path), str(dp), str(tp), "1"]
    every_rank_ok(launch(2, [str(WORKERS / "train_gpt.py"), *args], timeout=240), 2)


LAUNCH = [sys.executable, "-m", "tideflow.distributed.launch"]


def test_dp2_tp2_pp2_on_8_ranks_through_the_launcher(mpiexec, reference, tmp_path):
    worker = [str(WORKERS / "train_gpt.py"), reference, str(tmp_path), "2", "2", "2"]
    every_rank_ok(run_job([*LAUNCH, "--nproc_per_node", "8", *worker], timeout=900), 8)


CLI = ["train", "gpt", "--n-layer", "2", "--n-head", "2", "--n-embd", "16", "--block-size",
       "8", "--batch-size", "8", "--steps", "4", "--warmup-steps", "1", "--eval-interval", "2",
       "--eval-batches", "1", "--sample-tokens", "10", "--no-progress"]  # fmt: skip


def _eval_lines(out: str) -> list[str]:
    return re.findall(r"step +\d+: train loss .*", out)


def test_the_command_runs_parallel_through_the_launcher_and_samples_on_one_process(
    mpiexec, tmp_path, capsys
):
    ckpt = tmp_path / "tp.safetensors"
    job = run_job([*LAUNCH, "--nproc_per_node", "2", "-m", "tideflow", *CLI, "--tp", "2",
                   "--out", str(ckpt)], timeout=300)  # fmt: skip
    assert job.returncode == 0, job.stdout + job.stderr
    assert job.stdout.count("done: 4 steps") == 1, job.stdout  # rank 0 reports
    assert "parallel: dp=1 x tp=2 x pp=1 on 2 rank(s)" in job.stdout

    assert main([*CLI, "--out", str(tmp_path / "one.safetensors")]) == 0
    one = capsys.readouterr().out
    assert _eval_lines(job.stdout) == _eval_lines(one) != []  # the same losses, 4 decimals

    assert main(["sample", "gpt", str(ckpt), "--tokens", "12", "--prompt", "def "]) == 0
    assert capsys.readouterr().out.startswith("def ")


def test_a_world_that_is_not_dp_x_tp_x_pp_is_refused_on_every_rank(mpiexec, tmp_path):
    job = run_job([*LAUNCH, "--nproc_per_node", "2", "-m", "tideflow", *CLI, "--dp", "2",
                   "--tp", "2", "--out", str(tmp_path / "x.safetensors")], timeout=120)  # fmt: skip
    assert job.returncode != 0
    assert "dp x tp x pp = 2 x 2 x 1 = 4 ranks, but the world has 2" in job.stderr
