"""`tideflow train deepfm|dlrm`: a resumed run trains exactly as the run that never stopped,
a checkpoint refuses settings that would change the batches, and the command line prints the
held-out AUC beside the ceiling."""

from __future__ import annotations

from pathlib import Path

import pytest

from tideflow.cli import main
from tideflow.models.recommender import (
    DeepFMTrainConfig,
    DLRMTrainConfig,
    TrainingSetupError,
    train_recommender,
)

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "criteo_sample.tsv"
TINY = {
    "train_samples": 96,
    "val_samples": 64,
    "batch_size": 32,
    "embedding_dim": 4,
    "progress": False,
}


def _quiet(line: str) -> None:
    pass


@pytest.mark.parametrize(
    ("config_class", "widths"),
    [
        (DeepFMTrainConfig, {"hidden_units": "8", "dropout": 0.1}),
        (DLRMTrainConfig, {"bottom_mlp": "8", "top_mlp": "8"}),
    ],
)
def test_a_resumed_run_is_the_run_that_never_stopped(tmp_path, config_class, widths):
    settings = {**TINY, **widths, "epochs": 2}
    whole = train_recommender(config_class(**settings, out=str(tmp_path / "whole")), log=_quiet)
    halves = str(tmp_path / "halves")
    first = train_recommender(config_class(**settings, out=halves, stop_after=4), log=_quiet)
    second = train_recommender(config_class(**settings, out=halves, resume=True), log=_quiet)
    assert (first.steps, second.steps, whole.steps) == (4, 6, 6)
    # dropout's generator, Adam's moments, the schedule and the tables' rows all came back,
    # and the second run went on mid-epoch with the batch the first would have taken next
    assert first.losses + second.losses == whole.losses
    assert second.val_auc == whole.val_auc


def test_the_disk_store_trains_as_the_host_store(tmp_path):
    """About 10,000 keys of rows 17 wide with Adam's two moments (204 bytes) do not fit a
    1 MiB cache (about 5,000 rows): rows leave for the file and come back."""
    settings = {**TINY, "train_samples": 3000, "batch_size": 512, "embedding_dim": 16}
    runs = [
        train_recommender(
            DeepFMTrainConfig(**settings, hidden_units="8", store=store, cache_mb=1,
                              out=str(tmp_path / store)),
            log=_quiet,
        )
        for store in ("host", "ssd")
    ]  # fmt: skip
    assert runs[0].losses == runs[1].losses and runs[0].val_auc == runs[1].val_auc


def test_resuming_refuses_settings_that_change_the_batches(tmp_path):
    config = DeepFMTrainConfig(**TINY, hidden_units="8", out=str(tmp_path))
    train_recommender(config, log=_quiet)
    changed = DeepFMTrainConfig(
        **{**TINY, "batch_size": 16}, hidden_units="8", out=str(tmp_path), resume=True
    )
    with pytest.raises(TrainingSetupError, match="batch_size 32 -> 16"):
        train_recommender(changed, log=_quiet)
    dlrm = DLRMTrainConfig(**TINY, bottom_mlp="8", top_mlp="8", out=str(tmp_path), resume=True)
    with pytest.raises(TrainingSetupError, match="a checkpoint of DeepFM, not DLRM"):
        train_recommender(dlrm, log=_quiet)


def test_train_deepfm_prints_the_auc_beside_the_ceiling(tmp_path, capsys):
    args = [
        "train",
        "deepfm",
        "--train-samples",
        "96",
        "--val-samples",
        "64",
        "--batch-size",
        "32",
        "--embedding-dim",
        "4",
        "--hidden-units",
        "8",
        "--no-progress",
        "--out",
        str(tmp_path),
    ]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "held-out AUC" in out and "the AUC of the hidden model that drew the labels" in out
    assert (tmp_path / "checkpoint.safetensors").exists()


def test_train_dlrm_reads_a_criteo_file(tmp_path, capsys):
    args = [
        "train",
        "dlrm",
        "--data",
        str(SAMPLE),
        "--val-samples",
        "100",
        "--batch-size",
        "64",
        "--embedding-dim",
        "4",
        "--bottom-mlp",
        "8",
        "--top-mlp",
        "8",
        "--no-progress",
        "--out",
        str(tmp_path),
    ]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "200 training / 100 held-out examples" in out and "held-out AUC" in out
    assert "hidden model" not in out  # a file's labels have no known ceiling


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--hidden-units", "8,x"], "hidden_units must be comma-separated positive integers"),
        (["--store", "gpu"], "store must be host or ssd"),
        (["--data", str(SAMPLE), "--val-samples", "300"], "too few to hold out"),
    ],
)
def test_train_deepfm_refuses_bad_options(tmp_path, capsys, args, message):
    with pytest.raises(SystemExit) as info:
        main(["train", "deepfm", "--no-progress", "--out", str(tmp_path), *args])
    assert info.value.code == 2 and message in capsys.readouterr().err


def test_the_checkpoint_holds_no_table(tmp_path):
    """The tables live in their store's snapshot, not in the checkpoint file."""
    from tideflow.io import load

    train_recommender(DeepFMTrainConfig(**TINY, hidden_units="8", out=str(tmp_path)), log=_quiet)
    checkpoint = load(tmp_path / "checkpoint.safetensors")
    assert set(checkpoint["model"]) == {"dnn"}
    assert set(checkpoint["model"]["dnn"]) == {"0.weight", "0.bias", "2.weight", "2.bias"}
    assert (checkpoint["snapshot"], checkpoint["step"]) == ("step-3", 3)
