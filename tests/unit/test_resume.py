"""Resuming training from a checkpoint in a fresh process gives bit-for-bit the run that never
stopped: model, optimizer, lr schedule, the default generator (dropout) and a shuffling
DataLoader's generator all come back exactly. A save that crashes leaves the previous
checkpoint loadable and resumable.

The run itself is tests/resume_workers/resumable_training.py (AdamW, warmup then cosine
through SequentialLR, dropout, a shuffled DataLoader with 6 batches an epoch, 20 steps).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tideflow as flow
from tests.resume_workers.resumable_training import TOTAL_STEPS, Run
from tideflow.io import _file

REPO = Path(__file__).resolve().parents[2]
WORKER = REPO / "tests" / "resume_workers" / "resumable_training.py"


def _train_in_fresh_process(path: Path, steps: int, resume: Path | None = None) -> dict:
    """Train until `steps` (continuing from `resume`) in a new interpreter; the final state."""
    command = [sys.executable, str(WORKER), "--steps", str(steps), "--checkpoint", str(path)]
    if resume is not None:
        command += ["--resume", str(resume)]
    # The worker imports the tideflow these tests import, whatever is installed.
    paths = [str(REPO), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, f"{' '.join(command)} failed:\n{done.stderr}"
    return flow.load(path)


def _assert_identical(ours, expected, where: str = "state") -> None:
    """Same structure, same values; tensors equal bit for bit (dtype, shape and bytes)."""
    if isinstance(expected, flow.Tensor):
        assert isinstance(ours, flow.Tensor), where
        assert (ours.dtype, ours.shape) == (expected.dtype, expected.shape), where
        assert np.array_equal(ours.numpy(), expected.numpy()), f"{where} differs"
    elif isinstance(expected, dict):
        assert list(ours) == list(expected), where
        for key in expected:
            _assert_identical(ours[key], expected[key], f"{where}[{key!r}]")
    elif isinstance(expected, list | tuple):
        assert type(ours) is type(expected) and len(ours) == len(expected), where
        for i, (a, b) in enumerate(zip(ours, expected, strict=True)):
            _assert_identical(a, b, f"{where}[{i}]")
    else:
        assert type(ours) is type(expected) and ours == expected, (
            f"{where}: {ours!r} != {expected!r}"
        )


@pytest.fixture(scope="module")
def one_go(tmp_path_factory) -> dict:
    """The final state of the run trained from start to end in one process."""
    return _train_in_fresh_process(
        tmp_path_factory.mktemp("one_go") / "end.safetensors", TOTAL_STEPS
    )


@pytest.fixture(scope="module")
def mid_epoch_checkpoint(tmp_path_factory) -> Path:
    """A checkpoint after 11 steps: the fifth of the second epoch's six batches is done."""
    path = tmp_path_factory.mktemp("mid_epoch") / "ckpt.safetensors"
    _train_in_fresh_process(path, 11)
    return path


@pytest.fixture
def default_generator_kept():
    """Tests that train here (not in a subprocess) reseed the default generator: put it back."""
    state = flow.get_rng_state()
    yield
    flow.set_rng_state(state)


def test_the_reference_run_trains_the_whole_schedule(one_go):
    assert one_go["data"]["step"] == TOTAL_STEPS
    assert one_go["scheduler"]["last_epoch"] == TOTAL_STEPS
    assert all(state["step"] == TOTAL_STEPS for state in one_go["optimizer"]["state"].values())


@pytest.mark.parametrize(
    "stops",
    [(11,), (12,), (3, 14)],
    ids=["mid-epoch", "epoch-boundary", "twice-in-warmup-and-mid-epoch"],
)
def test_resuming_in_a_fresh_process_reproduces_the_run_bit_for_bit(tmp_path, one_go, stops):
    previous = None
    for i, step in enumerate((*stops, TOTAL_STEPS)):
        path = tmp_path / f"ckpt{i}.safetensors"
        final = _train_in_fresh_process(path, step, resume=previous)
        previous = path
    _assert_identical(final["model"], one_go["model"], "model")  # the clearest failure first
    _assert_identical(final, one_go, "checkpoint")  # optimizer, schedule, generators, position


@pytest.mark.parametrize(
    "entry", [("rng_state",), ("data", "epoch_start_state")], ids=["default", "loader"]
)
def test_every_generator_state_in_the_checkpoint_matters(
    tmp_path, one_go, mid_epoch_checkpoint, entry
):
    # The control for the test above: with another generator state, the dropout masks or
    # the epoch's batch order change and the run ends elsewhere.
    state = flow.load(mid_epoch_checkpoint)
    *parents, key = entry
    container = state
    for parent in parents:
        container = container[parent]
    container[key] = flow.Generator().manual_seed(5).get_state()
    flow.save(state, tmp_path / "tampered.safetensors")
    final = _train_in_fresh_process(
        tmp_path / "end.safetensors", TOTAL_STEPS, resume=tmp_path / "tampered.safetensors"
    )
    assert not np.array_equal(
        final["model"]["0.weight"].numpy(), one_go["model"]["0.weight"].numpy()
    )


def _disk_full_midway(specs, filename, metadata=None):
    with open(filename, "wb") as out:
        out.write(b"\x00" * 64)
    raise OSError(28, "No space left on device")


def _killed_before_the_rename(src, dst):
    raise KeyboardInterrupt


@pytest.mark.parametrize(
    ("target", "name", "crash", "error"),
    [
        (_file, "serialize_file", _disk_full_midway, OSError),
        (os, "replace", _killed_before_the_rename, KeyboardInterrupt),
    ],
    ids=["disk-full-midway", "interrupted-before-rename"],
)
def test_a_crashed_save_leaves_the_previous_checkpoint_resumable(
    tmp_path,
    monkeypatch,
    default_generator_kept,
    one_go,
    mid_epoch_checkpoint,
    target,
    name,
    crash,
    error,
):
    path = tmp_path / "ckpt.safetensors"
    path.write_bytes(mid_epoch_checkpoint.read_bytes())
    run = Run()
    run.load_state_dict(flow.load(path))
    run.train(15)
    monkeypatch.setattr(target, name, crash)
    with pytest.raises(error):
        flow.save(run.state_dict(), path)
    monkeypatch.undo()

    assert os.listdir(tmp_path) == [path.name]  # no temporary file left behind
    assert path.read_bytes() == mid_epoch_checkpoint.read_bytes()
    final = _train_in_fresh_process(tmp_path / "end.safetensors", TOTAL_STEPS, resume=path)
    _assert_identical(final, one_go, "checkpoint")
