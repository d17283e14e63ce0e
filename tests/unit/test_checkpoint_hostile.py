"""Crafted checkpoint files and directories are refused with a TideflowError naming the file
and what is wrong: before anything the size of a declared shape is allocated, without
running code from the file, and without reading anything outside a sharded checkpoint's
directory."""

from __future__ import annotations

import builtins
import json
import os
import pickle
import struct
import tracemalloc
import zipfile

import numpy as np
import pytest

import tideflow as flow
from tideflow.io import _checkpoint, sharded

BOUND = 20 * 2**20  # bytes a refused load may allocate: far below every declared size here


def safetensors_bytes(header: dict, data: bytes = b"") -> bytes:
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + data


def refused(path, *patterns: str) -> str:
    """Load `path`, expecting a TideflowError that names it and matches every pattern,
    while allocating at most BOUND bytes."""
    tracemalloc.start()
    try:
        with pytest.raises(flow.TideflowError) as info:
            flow.load(str(path))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    message = str(info.value)
    assert repr(str(path)) in message
    for pattern in patterns:
        assert pattern in message, message
    assert peak < BOUND, f"{peak} bytes allocated before refusing"
    return message


# -- single files ------------------------------------------------------------------------------
def test_a_header_length_beyond_the_file(tmp_path):
    path = tmp_path / "a.safetensors"
    path.write_bytes(struct.pack("<Q", 10**6) + b'{"x": 1}')
    refused(path, "truncated", "declares 1000000 bytes")
    path.write_bytes(struct.pack("<Q", 2**63) + b'{"x": 1}')
    refused(path, "header declares 9223372036854775808 bytes")


@pytest.mark.parametrize(
    "shape", [[2**40], [2**31, 2**31], [2**62, 2**62, 16]], ids=["4TB", "16EB", "overflow"]
)
def test_huge_declared_shapes_fail_before_allocating(tmp_path, shape):
    path = tmp_path / "a.safetensors"
    path.write_bytes(
        safetensors_bytes({"x": {"dtype": "F32", "shape": shape, "data_offsets": [0, 4]}}, b"1234")
    )
    refused(path, "corrupt safetensors file")
    path.write_bytes(
        safetensors_bytes({"x": {"dtype": "F32", "shape": shape, "data_offsets": [0, 2**60]}})
    )
    refused(path, "truncated")


@pytest.mark.parametrize(
    "entry",
    [
        {"dtype": "F64", "shape": [3], "data_offsets": [0, 12]},  # 24 bytes declared, 12 held
        {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 12]},
        {"dtype": "F32", "shape": [3], "data_offsets": [12, 0]},
        {"dtype": "F32", "shape": [-3], "data_offsets": [0, 12]},
        {"dtype": "F32", "shape": "3", "data_offsets": [0, 12]},
    ],
)
def test_dtype_and_shape_that_disagree_with_the_bytes(tmp_path, entry):
    path = tmp_path / "a.safetensors"
    path.write_bytes(safetensors_bytes({"x": entry}, bytes(12)))
    refused(path, "corrupt safetensors file")


def tideflow_file(path, document: str) -> None:
    """A file whose checkpoint document is `document`, with a correct checksum (so the
    refusal comes from reading the document, not from the checksum)."""
    metadata = {"tideflow": document, "tideflow.crc32": _checkpoint._checksum(document, {})}
    path.write_bytes(safetensors_bytes({"__metadata__": metadata}))


@pytest.mark.parametrize("depth", [400, 100_000])
def test_deeply_nested_structures(tmp_path, depth):
    path = tmp_path / "a.safetensors"
    root = '{"list":[' * depth + "]}" * depth
    tideflow_file(path, f'{{"version":1,"tensors":[],"root":{root}}}')
    refused(path, "nested too deeply" if depth == 400 else "malformed checkpoint document")


def test_an_enormous_header_is_refused_unread(tmp_path):
    path = tmp_path / "a.safetensors"
    with open(path, "wb") as out:
        out.write(struct.pack("<Q", 200 * 10**6) + b"{")
        out.truncate(8 + 200 * 10**6)  # sparse: 200 MB declared, nothing on the disk
    refused(path, "more than safetensors' limit")


class _Payload:
    """Unpickling this creates the marker file: the proof that code from a file ran."""

    def __init__(self, marker) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return builtins.open, (self.marker, "w")


def pickle_payload(tmp_path, marker) -> bytes:
    data = pickle.dumps(_Payload(marker), protocol=4)
    # the payload works: loading it with pickle does create a marker
    probe = tmp_path / "probe"
    pickle.loads(pickle.dumps(_Payload(probe), protocol=4)).close()
    assert probe.exists()
    return data


def test_pickle_and_zip_payloads_are_refused_without_running_them(tmp_path):
    marker = tmp_path / "marker"
    payload = pickle_payload(tmp_path, marker)
    path = tmp_path / "model.safetensors"
    path.write_bytes(payload)
    refused(path, "not a safetensors file", "pickle")
    # PyTorch's zip layout: archive/data.pkl
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("archive/data.pkl", payload)
        archive.writestr("archive/version", "3\n")
    refused(path, "not a safetensors file")
    assert not marker.exists()


# -- sharded directories -----------------------------------------------------------------------
def directory_checkpoint(tmp_path, name="ckpt"):
    path = tmp_path / name
    w = flow.arange(12.0).reshape(3, 4).to_global(flow.placement("cpu", [0]), flow.sbp.split(0))
    flow.save({"w": w}, str(path))
    assert np.array_equal(flow.load(str(path))["w"].numpy(), np.arange(12.0).reshape(3, 4))
    return path


def rewrite_metadata(path, change) -> None:
    """Edit metadata.json and store a correct checksum, so the edit itself is judged."""
    document = json.loads((path / "metadata.json").read_text())
    body = {k: v for k, v in document.items() if k != "crc32"}
    change(body)
    body["crc32"] = sharded._document_crc(body)
    (path / "metadata.json").write_text(json.dumps(body))


def outside_copy(tmp_path, path):
    """A valid shard file outside the checkpoint: following a link to it would load fine."""
    outside = tmp_path / "outside"
    outside.mkdir()
    os.replace(path / "rank_00000.safetensors", outside / "rank_00000.safetensors")
    return outside / "rank_00000.safetensors"


@pytest.mark.parametrize(
    "file",
    [
        "../outside/rank_00000.safetensors",
        "../../etc/passwd",
        "/etc/passwd",
        "rank_00000.safetensors/../../outside/rank_00000.safetensors",
        {"path": "x"},
    ],
)
def test_a_shard_path_leaving_the_directory(tmp_path, file):
    path = directory_checkpoint(tmp_path)
    outside_copy(tmp_path, path)

    def change(body):
        body["tensors"][0]["shards"][0]["file"] = file

    rewrite_metadata(path, change)
    refused(path, "malformed checkpoint: shard file", "rank_NNNNN.safetensors")


def test_a_symlinked_shard_pointing_outside(tmp_path):
    path = directory_checkpoint(tmp_path)
    os.symlink(outside_copy(tmp_path, path), path / "rank_00000.safetensors")
    refused(path, "rank_00000.safetensors is a symbolic link")
    os.remove(path / "rank_00000.safetensors")
    os.symlink("/etc/passwd", path / "rank_00000.safetensors")
    refused(path, "rank_00000.safetensors is a symbolic link")


def test_a_symlinked_metadata_file_pointing_outside(tmp_path):
    path = directory_checkpoint(tmp_path)
    other = directory_checkpoint(tmp_path, "other")
    os.remove(path / "metadata.json")
    os.symlink(other / "metadata.json", path / "metadata.json")
    refused(path, "metadata.json is a symbolic link")


def test_a_shard_that_is_not_a_regular_file(tmp_path):
    path = directory_checkpoint(tmp_path)
    os.remove(path / "rank_00000.safetensors")
    os.mkfifo(path / "rank_00000.safetensors")  # a plain open for reading would block
    refused(path, "rank_00000.safetensors is not a regular file")
    os.remove(path / "rank_00000.safetensors")
    os.mkdir(path / "rank_00000.safetensors")
    refused(path, "rank_00000.safetensors is not a regular file")


@pytest.mark.parametrize("shape", [[2**40, 4], [2**33, 4]], ids=["4TB", "256GB"])
def test_a_huge_logical_shape_fails_before_allocating(tmp_path, shape):
    path = directory_checkpoint(tmp_path)

    def change(body):
        body["tensors"][0]["shape"] = shape
        body["tensors"][0]["shards"][0]["shape"] = shape

    rewrite_metadata(path, change)
    refused(path, "the shard of 'w' in rank_00000.safetensors is F32 [3, 4]")


def test_shards_listed_twice_cannot_fake_the_coverage(tmp_path):
    path = directory_checkpoint(tmp_path)

    def change(body):
        record = body["tensors"][0]
        record["shape"] = [6, 4]
        record["shards"].append({**record["shards"][0], "offset": [3, 0]})

    rewrite_metadata(path, change)
    refused(path, "two shards of 'w' name the file 'rank_00000.safetensors'")


@pytest.mark.parametrize(
    "content",
    [
        struct.pack("<Q", 2**40) + b'{"w": 1}',  # the header length beyond the file
        struct.pack("<Q", 3),
        b"\x01",
        safetensors_bytes({"w": {"dtype": "F64", "shape": [3, 4], "data_offsets": "0"}}),
        safetensors_bytes({"w": {"dtype": "F64", "shape": [3, 4], "data_offsets": [96, 0]}}),
        safetensors_bytes({"w": {"dtype": "F64", "shape": [3, 4], "data_offsets": [0, 96]}}),
        safetensors_bytes({"w": [1, 2]}),
        safetensors_bytes({"__metadata__": {"tideflow.crc32": "[[[" * 10_000}}),
    ],
    ids=[
        "header-4TB",
        "header-beyond",
        "short",
        "offsets-str",
        "offsets-reversed",
        "truncated",
        "entry-list",
        "deep-crc-json",
    ],
)
def test_crafted_shard_headers(tmp_path, content):
    path = directory_checkpoint(tmp_path)
    (path / "rank_00000.safetensors").write_bytes(content)
    refused(path, "rank_00000.safetensors")


def test_a_pickle_shard_is_refused_without_running_it(tmp_path):
    path = directory_checkpoint(tmp_path)
    marker = tmp_path / "marker"
    (path / "rank_00000.safetensors").write_bytes(pickle_payload(tmp_path, marker))
    refused(path, "rank_00000.safetensors")
    assert not marker.exists()


@pytest.mark.parametrize("depth", [400, 100_000])
def test_deeply_nested_metadata(tmp_path, depth):
    path = directory_checkpoint(tmp_path)

    def change(body):
        body["root"] = json.loads('{"list":[' * min(depth, 400) + "]}" * min(depth, 400))

    if depth == 400:
        rewrite_metadata(path, change)
        refused(path, "nested too deeply")
    else:
        (path / "metadata.json").write_text("[" * depth + "]" * depth)
        refused(path, "malformed metadata.json")


def test_an_enormous_metadata_file_is_refused_unread(tmp_path):
    path = directory_checkpoint(tmp_path)
    with open(path / "metadata.json", "r+b") as out:
        out.truncate(sharded._MAX_METADATA_BYTES + 1)  # sparse: nothing on the disk
    refused(path, "metadata.json holds 100000001 bytes")
