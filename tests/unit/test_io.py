"""Checkpoints: exact round trips of nested state, atomic writes, every broken-file error, and
interop with PyTorch's safetensors files."""

import inspect
import io
import json
import math
import os
import threading
from collections import Counter, OrderedDict, namedtuple

import numpy as np
import pytest
import safetensors.numpy

import tideflow as flow
from tideflow import nn
from tideflow.framework import dtype as dtypes
from tideflow.io import _checkpoint, _file, load, load_safetensors, save, save_safetensors


def assert_identical(loaded, original, where="obj"):
    """Same types all the way down (int keys stay int, tuples stay tuples), same tensor
    dtypes, shapes, flags and bytes."""
    assert type(loaded) is type(original), f"{where}: {type(loaded)} is not {type(original)}"
    if isinstance(original, flow.Tensor):
        assert loaded.dtype == original.dtype, where
        assert loaded.shape == original.shape, where
        assert loaded.requires_grad == original.requires_grad, where
        assert loaded._data.tobytes() == original._data.tobytes(), where
    elif isinstance(original, dict):
        assert list(loaded) == list(original), where
        for key in original:
            assert type(next(k for k in loaded if k == key)) is type(key), where
            assert_identical(loaded[key], original[key], f"{where}[{key!r}]")
    elif isinstance(original, list | tuple):
        assert len(loaded) == len(original), where
        for i, (a, b) in enumerate(zip(loaded, original, strict=True)):
            assert_identical(a, b, f"{where}[{i}]")
    elif isinstance(original, float) and math.isnan(original):
        assert math.isnan(loaded), where
    elif isinstance(original, float):
        assert loaded == original and math.copysign(1, loaded) == math.copysign(1, original)
    else:
        assert loaded == original, where


def roundtrip(obj, **load_kwargs):
    buffer = io.BytesIO()
    save(obj, buffer)
    buffer.seek(0)
    return load(buffer, **load_kwargs)


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(flow.randn(3, 2))
        self.bias = nn.Parameter(flow.zeros(3))
        self.register_buffer("running_mean", flow.randn(3))
        self.register_buffer("num_batches_tracked", flow.tensor(5))
        self.register_buffer("scratch", flow.zeros(1), persistent=False)

    def forward(self, x):
        return x @ self.weight.T + self.bias


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = Block()
        self.blocks = nn.ModuleList([Block(), Block()])

    def forward(self, x):
        x = self.encoder(x)[:, :2]
        for block in self.blocks:
            x = block(x)[:, :2]
        return x


# -- round trips -------------------------------------------------------------------------------


def test_plain_values_and_containers_keep_their_exact_types():
    obj = {
        "none": None,
        "flags": [True, False],
        "ints": [0, -7, 2**80],
        "floats": [1.0, -0.0, 1e-300, math.inf, -math.inf, math.nan],
        "text": ["", "héllo", "\ud800 lone surrogate"],
        "nested": {"tuple": (1, (2.5, "x")), "list": [[], {}, ()], "empty": OrderedDict()},
        "odict": OrderedDict([("z", 1), ("a", 2)]),
        0: "int key",
        (1, "two"): "tuple key",
        None: "None key",
        2.5: "float key",
        "misc": [3 + 4j, b"\x00\xff", {1, "a", (2, 3)}, Counter({2: 1, "x": 3})],
        "meta": [flow.bfloat16, flow.int64, flow.device("cpu"), flow.Size([2, 0, 3])],
    }
    assert_identical(roundtrip(obj), obj)
    for value in [None, 3, "top-level string", [1, [2]], (), flow.ones(2)]:
        assert_identical(roundtrip(value), value)


@pytest.mark.parametrize("dtype", dtypes.ALL, ids=lambda d: d.name)
@pytest.mark.parametrize("shape", [(), (0,), (2, 0, 3), (3, 4)], ids=str)
def test_every_dtype_and_shape_roundtrips_bit_exactly(dtype, shape):
    rng = np.random.default_rng(0)
    if dtype is flow.bool:
        data = rng.random(shape) < 0.5
    elif dtype.is_floating_point:
        data = rng.standard_normal(shape) * 1e3
    elif dtype.is_complex:
        data = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)) * 1e3
    else:
        data = rng.integers(np.iinfo(dtype.np).min, np.iinfo(dtype.np).max, shape)
    t = flow.tensor(data, dtype=dtype)
    assert_identical(roundtrip({"t": t}), {"t": t})


def test_complex128_is_stored_as_float64_pairs_that_safetensors_readers_see():
    buffer = io.BytesIO()
    z = flow.tensor([[1 + 2j, -3.5j]], dtype=flow.complex128)
    save({"z": z}, buffer)
    stored = safetensors.numpy.load(buffer.getvalue())["z"]
    assert stored.dtype == np.float64 and stored.tolist() == [[[1.0, 2.0], [0.0, -3.5]]]
    with pytest.raises(flow.TideflowError, match=r"tensor 'z' is complex128, which safetensors "):
        save_safetensors({"z": z}, io.BytesIO())


def test_a_complex128_record_over_other_data_is_refused():
    buffer = io.BytesIO()
    save({"z": flow.ones(3, dtype=flow.complex128), "w": flow.ones(3)}, buffer)
    buffer.seek(0)
    arrays, metadata = _file.read(buffer, "test")
    document = json.loads(metadata["tideflow"])
    document["tensors"][1]["dtype"] = "complex128"  # w's float32 [3] data
    text = json.dumps(document)
    metadata = {"tideflow": text, "tideflow.crc32": _checkpoint._checksum(text, arrays)}
    crafted = io.BytesIO()
    _file.write(arrays, metadata, crafted, "test")
    crafted.seek(0)
    with pytest.raises(flow.TideflowError, match=r"stored as float64 pairs .* got float32 \[3\]"):
        load(crafted)


def test_bfloat16_special_values_keep_their_bits():
    t = flow.tensor([0.0, -0.0, math.inf, -math.inf, math.nan, 1e-40, 3.0e38], dtype=flow.bfloat16)
    assert roundtrip(t)._data.view(np.uint16).tolist() == t._data.view(np.uint16).tolist()


def test_non_contiguous_tensors_are_saved_contiguous_with_their_values():
    base = flow.arange(24, dtype=flow.float32).reshape(4, 6)
    views = [base.T, base[::2, 1::3], base[:, 2], base.T[1:3]]
    assert not any(v.is_contiguous() for v in views)
    loaded = roundtrip(views)
    for got, view in zip(loaded, views, strict=True):
        assert got.is_contiguous()
        np.testing.assert_array_equal(got.numpy(), view.numpy())


def test_shared_tensors_are_stored_once_and_keep_their_sharing(tmp_path):
    tied = flow.randn(4, 3)
    other_view = tied.T  # shares memory with `tied` in another layout: stored as a copy
    obj = {"tied": [tied, tied], "detached": tied.detach(), "t": other_view}
    save(obj, tmp_path / "c.safetensors")
    assert sorted(load_safetensors(tmp_path / "c.safetensors")) == ["t", "tied.0"]
    loaded = load(tmp_path / "c.safetensors")
    assert loaded["tied"][0] is loaded["tied"][1]  # one object saved twice loads as one
    assert loaded["detached"] is not loaded["tied"][0]
    assert np.shares_memory(loaded["detached"]._data, loaded["tied"][0]._data)
    np.testing.assert_array_equal(loaded["t"].numpy(), tied.T.numpy())
    loaded["detached"].add_(1.0)  # loaded tensors are writable
    np.testing.assert_array_equal(loaded["tied"][0].numpy(), tied.numpy() + 1.0)


def test_parameters_and_requires_grad_are_restored():
    p = nn.Parameter(flow.randn(2))
    frozen = nn.Parameter(flow.randn(2), requires_grad=False)
    leaf = flow.randn(3, requires_grad=True)
    nonleaf = leaf * 2  # saved as data, loads as a leaf like torch.load
    loaded = roundtrip([p, frozen, leaf, nonleaf, flow.ones(1)])
    assert [type(t).__name__ for t in loaded] == ["Parameter", "Parameter", "Tensor", "Tensor",
                                                  "Tensor"]  # fmt: skip
    assert [t.requires_grad for t in loaded] == [True, False, True, True, False]
    assert all(t.is_leaf for t in loaded)
    np.testing.assert_array_equal(loaded[3].detach().numpy(), nonleaf.detach().numpy())


def test_module_state_dict_roundtrip_and_reload(tmp_path):
    flow.manual_seed(0)
    net = Net()
    path = tmp_path / "model.safetensors"
    checkpoint = {"model": net.state_dict(), "epoch": 3}
    save(checkpoint, path)
    loaded = load(path)
    assert_identical(loaded, checkpoint)
    assert type(loaded["model"]) is OrderedDict
    assert "encoder.scratch" not in loaded["model"]
    fresh = Net()
    fresh.load_state_dict(loaded["model"])
    for (name, a), b in zip(net.state_dict().items(), fresh.state_dict().values(), strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=name)
    # The stored tensors carry the state-dict keys, so safetensors readers see the weights.
    assert "model.blocks.1.running_mean" in load_safetensors(path)


def _train(model, optimizer, steps):
    for i in range(steps):
        x = flow.ones(4, 2) * (i + 1)
        loss = (model(x) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def test_adam_state_dict_roundtrip_resumes_exactly(tmp_path):
    flow.manual_seed(0)
    model = Net()
    optimizer = flow.optim.Adam(model.parameters(), lr=0.01, betas=(0.8, 0.9), amsgrad=True)
    _train(model, optimizer, 3)
    path = tmp_path / "ckpt.safetensors"
    state = optimizer.state_dict()
    assert all(type(k) is int for k in state["state"])
    save({"model": model.state_dict(), "optimizer": state}, path)

    loaded = load(path)
    assert_identical(loaded["optimizer"], state)
    resumed_model = Net()
    resumed_model.load_state_dict(loaded["model"])
    resumed = flow.optim.Adam(resumed_model.parameters(), lr=0.5)
    resumed.load_state_dict(loaded["optimizer"])
    assert resumed.param_groups[0]["betas"] == (0.8, 0.9) and resumed.param_groups[0]["lr"] == 0.01
    _train(model, optimizer, 2)
    _train(resumed_model, resumed, 2)
    for a, b in zip(model.parameters(), resumed_model.parameters(), strict=True):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())


@pytest.mark.torch
def test_pytorch_lr_scheduler_state_dicts_roundtrip_exactly():
    torch = pytest.importorskip("torch")
    schedulers = torch.optim.lr_scheduler
    optimizer = torch.optim.SGD(torch.nn.Linear(2, 2).parameters(), lr=0.1, momentum=0.9)
    made = [
        schedulers.MultiStepLR(optimizer, milestones=[2, 4]),  # milestones: a Counter
        schedulers.ReduceLROnPlateau(optimizer),  # best = inf
        schedulers.OneCycleLR(optimizer, max_lr=1.0, total_steps=10),
        schedulers.LambdaLR(optimizer, lambda epoch: 0.9**epoch),  # lr_lambdas: [None]
        schedulers.SequentialLR(
            optimizer,
            [schedulers.ConstantLR(optimizer), schedulers.ExponentialLR(optimizer, 0.9)],
            milestones=[2],
        ),  # nested scheduler state dicts
    ]
    for scheduler in made:
        state = scheduler.state_dict()
        assert_identical(roundtrip(state), state, type(scheduler).__name__)


def test_rng_state_roundtrip_reproduces_the_stream(tmp_path):
    flow.manual_seed(1234)
    flow.randn(7)
    save({"rng": flow.get_rng_state()}, tmp_path / "rng.safetensors")
    expected = flow.randn(5)
    flow.manual_seed(0)
    state = load(tmp_path / "rng.safetensors")["rng"]
    assert state.dtype == flow.uint8
    flow.set_rng_state(state)
    np.testing.assert_array_equal(flow.randn(5).numpy(), expected.numpy())


def test_file_objects_paths_and_pathlike(tmp_path):
    obj = {"w": flow.arange(4), "n": 1}
    save(obj, str(tmp_path / "a.safetensors"))
    save(obj, tmp_path / "b.safetensors")
    assert_identical(load(str(tmp_path / "b.safetensors")), obj)
    assert_identical(load(tmp_path / "a.safetensors"), obj)
    with open(tmp_path / "c.bin", "wb") as f:
        f.write(b"prefix")
        save(obj, f)  # written at the file's position
    with open(tmp_path / "c.bin", "rb") as f:
        f.seek(6)
        assert_identical(load(f), obj)


def test_weights_only_is_accepted_and_changes_nothing():
    obj = {"w": flow.ones(2), "step": 4}
    assert_identical(roundtrip(obj, weights_only=False), obj)
    assert_identical(roundtrip(obj, weights_only=True), obj)


# -- map_location ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "map_location", ["cpu", flow.device("cpu"), {"cpu": "cpu"}, {"cuda:0": "cpu"}], ids=repr
)
def test_map_location_to_cpu(map_location):
    obj = {"w": flow.ones(2), "b": [flow.zeros(1)]}
    assert_identical(roundtrip(obj, map_location=map_location), obj)


def test_map_location_callable_sees_each_stored_tensor_and_location():
    seen = []

    def relocate(tensor, location):
        seen.append((tuple(tensor.shape), location))
        return tensor * 10 if tensor.shape == (2,) else None  # None keeps the tensor

    loaded = roundtrip({"a": flow.ones(2), "b": flow.ones(3)}, map_location=relocate)
    assert sorted(seen) == [((2,), "cpu"), ((3,), "cpu")]
    assert loaded["a"].tolist() == [10.0, 10.0] and loaded["b"].tolist() == [1.0, 1.0, 1.0]


def test_map_location_errors():
    with pytest.raises(TypeError, match=r"map_location must be None, a str, .* got int"):
        roundtrip({}, map_location=0)
    with pytest.raises(TypeError, match="map_location returned str"):
        roundtrip({"a": flow.ones(1)}, map_location=lambda t, loc: "cpu")
    with pytest.raises(flow.TideflowError, match="unknown device type 'tpu'"):
        roundtrip({}, map_location="tpu")


# -- atomic writes -----------------------------------------------------------------------------


def _crash_midway(specs, filename, metadata=None):
    with open(filename, "wb") as out:
        out.write(b"\x00" * 100)  # part of a file, then the disk fills up
    raise OSError(28, "No space left on device")


def _interrupt_at_fsync(fd):
    raise KeyboardInterrupt


@pytest.mark.parametrize(
    ("target", "failure", "error"),
    [(_file, ("serialize_file", _crash_midway), OSError),
     (os, ("fsync", _interrupt_at_fsync), KeyboardInterrupt)],
    ids=["disk-full-midway", "interrupted-at-fsync"],
)  # fmt: skip
def test_failed_save_leaves_the_previous_checkpoint_and_no_temp_file(
    tmp_path, monkeypatch, target, failure, error
):
    path = tmp_path / "ckpt.safetensors"
    save({"version": 1, "w": flow.ones(3)}, path)
    monkeypatch.setattr(target, *failure)
    with pytest.raises(error):
        save({"version": 2, "w": flow.zeros(3)}, path)
    with pytest.raises(error):
        save({"version": 1}, tmp_path / "new.safetensors")
    monkeypatch.undo()
    assert os.listdir(tmp_path) == ["ckpt.safetensors"]
    loaded = load(path)
    assert loaded["version"] == 1 and loaded["w"].tolist() == [1.0, 1.0, 1.0]


def test_resave_keeps_permissions_and_writes_through_symlinks(tmp_path):
    real = tmp_path / "real.safetensors"
    save({"v": 1}, real)
    os.chmod(real, 0o600)
    link = tmp_path / "latest.safetensors"
    link.symlink_to(real)
    save({"v": 2}, link)
    assert link.is_symlink() and load(real)["v"] == 2
    assert real.stat().st_mode & 0o777 == 0o600
    assert sorted(os.listdir(tmp_path)) == ["latest.safetensors", "real.safetensors"]


def test_save_to_a_missing_directory_raises_like_open(tmp_path):
    with pytest.raises(FileNotFoundError):
        save({"v": 1}, tmp_path / "missing" / "ckpt.safetensors")


# -- errors ------------------------------------------------------------------------------------


class Slotted:
    __slots__ = ("x",)


def local_instance():
    class Local:
        pass

    return Local()


def hooked_module():
    module = nn.Linear(1, 1)
    module.register_forward_hook(lambda module, args, out: out)
    return module


Point = namedtuple("Point", "x y")


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        (
            {"fn": lambda x: x},
            r"cannot save the builtins\.function at obj\['fn'\]: function [\w.]*test_io:<lambda> "
            r"is not tideflow's",
        ),
        (
            [1, Slotted()],
            r"cannot save the [\w.]*test_io\.Slotted at obj\[1\]: Slotted keeps state in __slots__",
        ),
        (
            {"p": Point(1, 2)},
            r"cannot save the [\w.]*test_io\.Point at obj\['p'\]: Point derives from the "
            r"built-in type tuple",
        ),
        (
            {"lock": threading.Lock()},
            r"cannot save the _thread\.lock at obj\['lock'\]: lock is the built-in type lock,",
        ),
        (
            {"s": {"state": {0: {"m": hooked_module()}}}},
            r"cannot save the builtins\.function at "
            r"obj\['s'\]\['state'\]\[0\]\['m'\]\._forward_hooks\[\d+\]: ",
        ),
        (
            {"names": np.array(["a"])},
            r"cannot save the numpy\.ndarray at obj\['names'\]: its dtype <U1 is not a",
        ),
        (
            {local_instance(): 1},
            r"cannot save the [\w.]*test_io\.local_instance\.<locals>\.Local at obj: ",
        ),
    ],
    ids=["lambda", "slots", "namedtuple", "builtin", "module-hook", "str-array", "local-class"],
)
def test_unsavable_objects_raise_naming_the_path_and_write_nothing(tmp_path, obj, message):
    path = tmp_path / "ckpt.safetensors"
    with pytest.raises(
        flow.TideflowError, match=rf"flow\.save\('.*ckpt\.safetensors'\): {message}"
    ):
        save(obj, path)
    assert os.listdir(tmp_path) == []


def test_reference_cycles_are_rejected():
    loop = [1]
    loop.append({"again": loop})
    with pytest.raises(flow.TideflowError, match=r"list at obj\[1\]\['again'\] contains itself"):
        save(loop, io.BytesIO())
    shared = [1, 2]
    assert roundtrip([shared, shared]) == [[1, 2], [1, 2]]  # repeated, not cyclic: fine


def test_pytorch_only_options_are_accepted_and_change_nothing():
    buffer = io.BytesIO()
    save({"w": flow.ones(2)}, buffer, None, 4, _use_new_zipfile_serialization=False)
    buffer.seek(0)
    assert load(buffer, "cpu", None, weights_only=True, mmap=True)["w"].tolist() == [1.0, 1.0]


@pytest.mark.torch
@pytest.mark.parametrize("name", ["save", "load"])
def test_signatures_are_pytorchs(name):
    torch = pytest.importorskip("torch")
    ours = inspect.signature(getattr(flow, name)).parameters.values()
    theirs = inspect.signature(getattr(torch, name)).parameters.values()
    keyword_only = inspect.Parameter.KEYWORD_ONLY
    positional = [p.name for p in ours if p.kind is not keyword_only]
    assert positional == [p.name for p in theirs if p.kind is not keyword_only][: len(positional)]
    assert {p.name for p in ours if p.kind is keyword_only} <= {
        p.name for p in theirs if p.kind is keyword_only
    }


def test_bad_file_arguments():
    with pytest.raises(TypeError, match=r"f must be a path .* with \.write\(\), got int"):
        save({}, 3)
    with pytest.raises(TypeError, match=r"f must be a path .* with \.read\(\), got list"):
        load([])
    with pytest.raises(FileNotFoundError):
        load("/nonexistent/ckpt.safetensors")


def test_text_mode_file_objects_are_rejected():
    with pytest.raises(flow.TideflowError, match="opened in binary mode"):
        load(io.StringIO("{}"))


@pytest.fixture
def checkpoint_bytes():
    buffer = io.BytesIO()
    obj = {"model": OrderedDict(w=flow.randn(2, 3), b=flow.zeros(3, dtype=flow.bfloat16)),
           "step": 7, "rng": flow.get_rng_state()}  # fmt: skip
    save(obj, buffer)
    return buffer.getvalue()


def test_truncated_files_are_reported(tmp_path, checkpoint_bytes):
    path = tmp_path / "ckpt.safetensors"
    header_end = 8 + int.from_bytes(checkpoint_bytes[:8], "little")
    for cut, message in [
        (0, "not a safetensors file: 0 bytes"),
        (5, "not a safetensors file: 5 bytes"),
        (8, "not a safetensors file"),
        (40, "the file is truncated: its header declares"),
        (header_end - 1, "the file is truncated: its header declares"),
        (header_end, "the file is truncated: its tensors need"),
        (len(checkpoint_bytes) - 1, "the file is truncated: its tensors need"),
    ]:
        path.write_bytes(checkpoint_bytes[:cut])
        with pytest.raises(flow.TideflowError, match=rf"flow\.load\('.*'\): {message}"):
            load(path)


def test_every_flipped_byte_is_detected(checkpoint_bytes):
    for i in range(len(checkpoint_bytes)):
        for mask in (0x01, 0x80):
            damaged = bytearray(checkpoint_bytes)
            damaged[i] ^= mask
            try:
                load(io.BytesIO(damaged))
            except flow.TideflowError:
                continue
            pytest.fail(f"byte {i} ^ {mask:#x} loaded without an error")


def test_flipped_tensor_byte_fails_the_checksum(tmp_path, checkpoint_bytes):
    damaged = bytearray(checkpoint_bytes)
    damaged[-3] ^= 0x10
    (tmp_path / "ckpt.safetensors").write_bytes(damaged)
    message = r"ckpt\.safetensors'\): checksum mismatch .*: the file was modified or corrupted"
    with pytest.raises(flow.TideflowError, match=message):
        load(tmp_path / "ckpt.safetensors")


def test_files_that_are_not_safetensors(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("just some text that is long enough to have a header size\n")
    with pytest.raises(flow.TideflowError, match=r"'.*notes\.txt'\): not a safetensors file \("
                       "tideflow reads files written by flow.save or by safetensors"):  # fmt: skip
        load(path)
    for data, message in [
        ((10).to_bytes(8, "little") + b"[1, 2, 3]!", "not a safetensors file"),
        ((10).to_bytes(8, "little") + b'{"a": 1, }', "corrupt safetensors file: the header is"),
        (
            (200_000_000).to_bytes(8, "little") + b'{"a": 1}',
            "corrupt safetensors file: its header declares 200000000 bytes, more than",
        ),
    ]:
        with pytest.raises(flow.TideflowError, match=message):
            load(io.BytesIO(data))


@pytest.mark.torch
def test_pytorch_pickle_checkpoints_are_refused_with_a_hint(tmp_path):
    torch = pytest.importorskip("torch")
    torch.save({"w": torch.ones(2)}, tmp_path / "model.pt")
    with pytest.raises(flow.TideflowError, match=r"not a safetensors file.*PyTorch pickle"):
        load(tmp_path / "model.pt")


def test_foreign_dtypes_are_reported_by_name(tmp_path):
    path = tmp_path / "foreign.safetensors"
    safetensors.numpy.save_file({"ok": np.ones(2), "ids": np.zeros(3, np.uint16)}, path)
    with pytest.raises(flow.TideflowError, match="tensor 'ids' has safetensors dtype U16"):
        load(path)


def _write_document(f, document, arrays=None):
    """A file in tideflow's format with any document and a valid checksum."""
    arrays = arrays or {}
    text = json.dumps(document)
    checksum = _checkpoint._checksum(text, arrays)
    _file.write(arrays, {"tideflow": text, "tideflow.crc32": checksum}, f, "test")


def _load_document(root, tensors=(), arrays=None, version=1):
    buffer = io.BytesIO()
    _write_document(buffer, {"version": version, "tensors": list(tensors), "root": root}, arrays)
    buffer.seek(0)
    return load(buffer)


def test_a_valid_handwritten_document_loads():
    record = {"data": "w", "type": "Tensor", "requires_grad": False}
    loaded = _load_document({"dict": [[1, {"tensor": 0}]]}, [record], {"w": np.ones(2)})
    assert list(loaded) == [1] and loaded[1].tolist() == [1.0, 1.0]


@pytest.mark.parametrize(
    ("root", "message"),
    [
        ({"pickle": "cos\nsystem\n"}, r"unknown structure tag 'pickle' at obj \(known: tensor"),
        ({"dict": [["a", {"exec": 1}]]}, r"unknown structure tag 'exec' at obj\['a'\]"),
        ([1, 2], r"malformed checkpoint at obj: expected a value or a one-key tagged object"),
        ({"list": [1], "tuple": [2]}, "expected a value or a one-key tagged object"),
        ({"tensor": 0}, r"at obj: tensor index 0 is not in the table of 0 tensors"),
        ({"list": {"a": 1}}, "expected a JSON array"),
        ({"dict": [[{"list": []}, 1]]}, "unhashable dict key"),
        ({"dict": [[1, 2, 3]]}, r"expected \[key, value\]"),
        ({"set": [{"list": []}]}, "unhashable set element"),
        ({"float": "1.5"}, "bad non-finite float"),
        ({"float": ["nan"]}, "bad non-finite float"),
        ({"complex": [1, 2]}, "expected float parts"),
        ({"bytes": "zz"}, "bad hex bytes"),
        ({"dtype": "object"}, "unknown dtype 'object'"),
        ({"dtype": []}, "unknown dtype"),
        ({"device": "tpu"}, "bad device 'tpu'"),
        ({"device": 0}, "bad device 0"),
        ({"size": [2, -1]}, "bad Size"),
    ],
    ids=repr,
)
def test_malformed_structures_are_rejected(root, message):
    with pytest.raises(flow.TideflowError, match=rf"flow\.load\(<BytesIO>\): .*{message}"):
        _load_document(root)


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"data": "missing", "type": "Tensor", "requires_grad": False}, "naming stored data"),
        ({"data": "w", "type": "Module", "requires_grad": False}, "naming stored data"),
        ({"data": "w", "type": "Tensor"}, "naming stored data"),
        ({"data": "i", "type": "Parameter", "requires_grad": True}, "floating point"),
    ],
)
def test_bad_tensor_records_are_rejected(record, message):
    arrays = {"w": np.ones(2, np.float32), "i": np.ones(2, np.int64)}
    with pytest.raises(
        flow.TideflowError, match=rf"malformed checkpoint: tensor record 0 .*{message}"
    ):
        _load_document({"tensor": 0}, [record], arrays)


def test_document_level_errors():
    with pytest.raises(flow.TideflowError, match="format version 2 is not supported; this "
                       "tideflow reads version 1"):  # fmt: skip
        _load_document(None, version=2)
    buffer = io.BytesIO()
    _write_document(buffer, {"version": 1, "root": None})
    buffer.seek(0)
    with pytest.raises(flow.TideflowError, match="malformed checkpoint document: expected the"):
        load(buffer)
    buffer = io.BytesIO()
    _file.write({}, {"tideflow": "{}"}, buffer, "test")
    buffer.seek(0)
    with pytest.raises(flow.TideflowError, match=r"metadata entry 'tideflow\.crc32' is missing"):
        load(buffer)
    buffer = io.BytesIO()
    _write_document(buffer, {"version": 1, "tensors": [], "root": math.nan})
    buffer.seek(0)
    with pytest.raises(flow.TideflowError, match="non-standard JSON constant NaN"):
        load(buffer)


def test_oversized_structure_is_refused_before_replacing_the_file(tmp_path):
    path = tmp_path / "ckpt.safetensors"
    save({"v": 1}, path)
    with pytest.raises(flow.TideflowError, match="limited to 100 MB"):
        save({"v": 2, "log": "x" * 100_000_000}, path)
    assert os.listdir(tmp_path) == ["ckpt.safetensors"] and load(path)["v"] == 1


# -- plain safetensors files -------------------------------------------------------------------


def test_save_and_load_safetensors_flat_dicts(tmp_path):
    tensors = {"fc.weight": flow.randn(2, 3), "fc.bias": flow.zeros(2, dtype=flow.bfloat16),
               "steps": flow.tensor(3)}  # fmt: skip
    path = tmp_path / "model.safetensors"
    save_safetensors(tensors, path, metadata={"format": "pt"})
    loaded = load_safetensors(path)
    assert sorted(loaded) == sorted(tensors)
    for name, t in tensors.items():
        assert_identical(loaded[name], t, name)
    assert_identical(load(path), loaded)  # a plain file loads as its flat dict


def test_save_safetensors_errors(tmp_path):
    with pytest.raises(flow.TideflowError, match="maps str names to tensors, got int 0 -> Tensor"):
        save_safetensors({0: flow.ones(1)}, tmp_path / "x")
    with pytest.raises(flow.TideflowError, match=r"got str 'a' -> list .*use flow\.save"):
        save_safetensors({"a": [flow.ones(1)]}, tmp_path / "x")
    with pytest.raises(TypeError, match="expected a dict of tensors, got list"):
        save_safetensors([flow.ones(1)], tmp_path / "x")
    with pytest.raises(flow.TideflowError, match="metadata must map str to str, got 'n': 1"):
        save_safetensors({}, tmp_path / "x", metadata={"n": 1})
    with pytest.raises(flow.TideflowError, match="metadata key 'tideflow' is reserved"):
        save_safetensors({}, tmp_path / "x", metadata={"tideflow": "{}"})
    assert os.listdir(tmp_path) == []


# -- PyTorch interop ---------------------------------------------------------------------------


class Affine(nn.Module):
    def __init__(self, n_in: int, n_out: int, dtype=flow.float32) -> None:
        super().__init__()
        self.weight = nn.Parameter(flow.zeros(n_out, n_in, dtype=dtype))
        self.bias = nn.Parameter(flow.zeros(n_out, dtype=dtype))


class Norm(nn.Module):
    def __init__(self, n: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(flow.zeros(n))
        self.bias = nn.Parameter(flow.zeros(n))
        self.register_buffer("running_mean", flow.zeros(n))
        self.register_buffer("running_var", flow.zeros(n))
        self.register_buffer("num_batches_tracked", flow.tensor(0))


def _torch_model(torch):
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.Linear(4, 2).to(torch.bfloat16)
    )
    model[1](torch.randn(8, 4))  # moves the running statistics and the batch counter
    return model


@pytest.mark.torch
def test_loads_a_pytorch_state_dict_saved_with_safetensors(tmp_path):
    torch = pytest.importorskip("torch")
    safetensors_torch = pytest.importorskip("safetensors.torch")
    torch_state = _torch_model(torch).state_dict()
    path = tmp_path / "torch.safetensors"
    safetensors_torch.save_file(torch_state, path)

    loaded = load(path)
    assert type(loaded) is dict and sorted(loaded) == sorted(torch_state)
    for name, expected in torch_state.items():
        got = loaded[name]
        assert got.dtype.name == str(expected.dtype).removeprefix("torch."), name
        assert tuple(got.shape) == tuple(expected.shape), name
        np.testing.assert_array_equal(
            got._data.astype(np.float64), expected.to(torch.float64).numpy(), err_msg=name
        )
    model = nn.Sequential(Affine(3, 4), Norm(4), Affine(4, 2, dtype=flow.bfloat16))
    assert not any(model.load_state_dict(loaded))  # no missing or unexpected keys
    assert model[1].num_batches_tracked.item() == 1
    np.testing.assert_array_equal(
        model[2].weight.detach()._data.view(np.uint16),
        torch_state["2.weight"].view(torch.int16).numpy().view(np.uint16),
    )


@pytest.mark.torch
def test_pytorch_reads_a_flow_saved_state_dict(tmp_path):
    torch = pytest.importorskip("torch")
    safetensors_torch = pytest.importorskip("safetensors.torch")
    torch_state = _torch_model(torch).state_dict()
    safetensors_torch.save_file(torch_state, tmp_path / "from_torch.safetensors")
    flow_state = OrderedDict(load_safetensors(tmp_path / "from_torch.safetensors"))
    save(flow_state, tmp_path / "flow.safetensors")  # a tideflow checkpoint of a state dict
    reread = safetensors_torch.load_file(tmp_path / "flow.safetensors")
    assert sorted(reread) == sorted(torch_state)
    for name, expected in torch_state.items():
        assert torch.equal(reread[name], expected), name
