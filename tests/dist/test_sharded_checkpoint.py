"""Sharded checkpoints of global tensors: saved on 4 real processes and loaded on 4, 2 and 1
(the workers workers/ckpt_*.py), and the format's guarantees in a world of one."""

from __future__ import annotations

import collections
import io
import json
import os
import subprocess
import sys
import zlib

import numpy as np
import pytest

import tideflow as flow
import tideflow.parallel as par
from tideflow.io import sharded

from ..unit.test_nn_layers import run_doctests
from .jobs import WORKERS, every_rank_ok, job_env

ONE = par.placement("cpu", [0])
GRID = par.placement("cpu", [[0]])


@pytest.mark.mpi
def test_saved_on_4_ranks_loads_on_4_2_and_1(launch, tmp_path):
    path = str(tmp_path / "checkpoint")
    every_rank_ok(launch(4, [str(WORKERS / "ckpt_save.py"), path], timeout=120), 4)
    for n in (4, 2):
        every_rank_ok(launch(n, [str(WORKERS / "ckpt_load.py"), path], timeout=120), n)
    alone = subprocess.run(
        [sys.executable, str(WORKERS / "ckpt_load.py"), path],
        capture_output=True, text=True, timeout=120, env=job_env(),
    )  # fmt: skip
    every_rank_ok(alone, 1)


# -- a world of one ----------------------------------------------------------------------------
pytestmark = pytest.mark.usefixtures("local_dispatch")


def g(array, where=ONE, sbp=None):
    array = np.asarray(array)
    sbp = flow.sbp.split(0) if sbp is None else sbp
    return par.create_global(lambda _: flow.tensor(array), array.shape, where, sbp)


def checkpoint(tmp_path, obj=None, name="ckpt"):
    path = tmp_path / name
    obj = {"w": g(np.arange(12.0).reshape(3, 4))} if obj is None else obj
    flow.save(obj, path)
    return path


def test_docstring_examples_run():
    run_doctests(sharded)


def test_a_world_of_one_loads_local_tensors_with_the_logical_values(tmp_path):
    model = flow.nn.Linear(3, 2).to_global(GRID, [flow.sbp.split(0), flow.sbp.broadcast])
    obj = {
        "model": model.state_dict(),
        "param": model.weight,
        "partial": g(np.ones((2, 2)), sbp=flow.sbp.partial_sum),
        "scalar": g(np.float64(2.5), sbp=flow.sbp.broadcast),
        "empty": g(np.zeros((0, 3))),
        "local": flow.arange(3),
        "meta": collections.OrderedDict(step=3, lr=0.1, name="run", shape=flow.Size([2])),
    }
    loaded = flow.load(checkpoint(tmp_path, obj))
    assert type(loaded["model"]) is collections.OrderedDict and loaded["meta"] == obj["meta"]
    for key, value in model.state_dict().items():
        assert not loaded["model"][key].is_global
        np.testing.assert_array_equal(loaded["model"][key].numpy(), value.numpy())
    param = loaded["param"]
    assert type(param) is flow.nn.Parameter and param.requires_grad
    np.testing.assert_array_equal(param.detach().numpy(), model.weight.detach().numpy())
    np.testing.assert_array_equal(loaded["partial"].numpy(), np.ones((2, 2)))
    assert loaded["scalar"].shape == flow.Size([]) and loaded["scalar"].item() == 2.5
    assert loaded["empty"].shape == flow.Size([0, 3])
    assert loaded["local"].tolist() == [0, 1, 2]
    restored = flow.nn.Linear(3, 2)
    restored.load_state_dict(loaded["model"])


def test_the_directory_holds_metadata_and_plain_safetensors_shards(tmp_path):
    path = checkpoint(tmp_path, {"w": g(np.ones((2, 3))), "b": flow.zeros(2)})
    assert sorted(os.listdir(path)) == ["metadata.json", "rank_00000.safetensors"]
    from safetensors.numpy import load_file

    assert sorted(load_file(path / "rank_00000.safetensors")) == ["b", "w"]
    document = json.loads((path / "metadata.json").read_text())
    (record,) = [r for r in document["tensors"] if r["name"] == "w"]
    assert record["placement"] == [0] and record["sbp"] == ["S(0)"] and record["shape"] == [2, 3]
    assert record["shards"] == [
        {"file": "rank_00000.safetensors", "offset": [0, 0], "shape": [2, 3]}
    ]


def test_local_objects_still_save_to_one_file(tmp_path):
    flow.save({"w": flow.ones(2)}, tmp_path / "plain")
    assert (tmp_path / "plain").is_file()


def test_global_tensors_need_a_path():
    with pytest.raises(flow.TideflowError, match=r"directory of shards.*must be a path"):
        flow.save({"w": g(np.ones(2))}, io.BytesIO())


def test_saving_replaces_a_checkpoint_and_leaves_nothing_else(tmp_path):
    checkpoint(tmp_path, {"w": g(np.ones(2)), "step": 1})
    checkpoint(tmp_path, {"w": g(np.zeros(2)), "step": 2})
    assert flow.load(tmp_path / "ckpt")["step"] == 2
    (tmp_path / "file").write_bytes(b"old")
    checkpoint(tmp_path, {"w": g(np.ones(2))}, name="file")  # a file under the name too
    assert sorted(os.listdir(tmp_path)) == ["ckpt", "file"]


def test_a_failed_save_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    checkpoint(tmp_path, {"w": g(np.ones(2)), "step": 1})

    def full_disk(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(sharded, "write", full_disk)
    with pytest.raises(OSError, match="No space left"):
        checkpoint(tmp_path, {"w": g(np.zeros(2)), "step": 2})
    assert os.listdir(tmp_path) == ["ckpt"]
    assert flow.load(tmp_path / "ckpt")["step"] == 1


def _rewrite_document(path, edit) -> None:
    """Edit metadata.json and give it a valid checksum again."""
    document = json.loads((path / "metadata.json").read_text())
    body = {k: v for k, v in document.items() if k != "crc32"}
    edit(body)
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    body["crc32"] = f"{zlib.crc32(text.encode()):08x}"
    (path / "metadata.json").write_text(json.dumps(body))


def _edit_shape(path) -> None:
    text = (path / "metadata.json").read_text()
    (path / "metadata.json").write_text(text.replace("[3,4]", "[4,3]"))


def _unsupported_version(path) -> None:
    _rewrite_document(path, lambda body: body.update(version=99))


def _escaping_file_name(path) -> None:
    def edit(body):
        body["tensors"][0]["shards"][0]["file"] = "../../etc/passwd"

    _rewrite_document(path, edit)


def _wrong_shape(path) -> None:
    _rewrite_document(path, lambda body: body["tensors"][0].update(shape=[3, 5]))


def _truncate(path) -> None:
    shard = path / "rank_00000.safetensors"
    shard.write_bytes(shard.read_bytes()[:-8])


def _flip_last_byte(path) -> None:
    shard = path / "rank_00000.safetensors"
    data = bytearray(shard.read_bytes())
    data[-1] ^= 0xFF
    shard.write_bytes(bytes(data))


DAMAGE = {  # name -> (damage(path), message)
    "edited metadata": (_edit_shape, "checksum mismatch in metadata.json"),
    "broken metadata": (lambda p: (p / "metadata.json").write_text("{"), "malformed metadata"),
    "newer format": (_unsupported_version, "version 99 is not supported"),
    "escaping name": (_escaping_file_name, "malformed checkpoint: shard file '../../etc/passwd'"),
    "missing shard file": (lambda p: os.remove(p / "rank_00000.safetensors"), "is missing"),
    "truncated shard file": (_truncate, "rank_00000.safetensors is truncated"),
    "flipped byte": (_flip_last_byte, "checksum mismatch for the shard of 'w'"),
    "shards that do not cover": (_wrong_shape, "the shards of 'w' cover 12 of the 15 elements"),
}


@pytest.mark.parametrize("case", DAMAGE)
def test_damaged_checkpoints_are_reported(tmp_path, case):
    damage, message = DAMAGE[case]
    path = checkpoint(tmp_path)
    damage(path)
    with pytest.raises(flow.TideflowError, match=message):
        flow.load(path)


def test_a_region_is_assembled_from_the_overlapping_part_of_a_shard(tmp_path):
    """Loading onto another layout reads the overlapping part of each stored shard."""
    value = np.arange(12.0).reshape(3, 4)
    path = checkpoint(tmp_path, {"w": g(value)})
    document = json.loads((path / "metadata.json").read_text())
    record = document["tensors"][0]
    with sharded._ShardReader(str(path), "test") as reader:
        part = reader.region(
            "w", flow.float64, (3, 4), record["shards"], (slice(1, 3), slice(2, 4))
        )
    np.testing.assert_array_equal(part, value[1:3, 2:4])
