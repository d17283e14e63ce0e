"""Mistakes a user makes while training, and the errors they get: wrong shapes and dtypes into
layers and losses, state dicts and optimizer state from another model, truncated or tampered
checkpoint files, failing DataLoader workers, saves that fail. Each error names the layer or
op and the offending shapes or values, or the file; PyTorch rejects the same calls, with an
exception type tideflow's is an instance of; nothing is left half-written.
"""

from __future__ import annotations

import os
import re
import time

import numpy as np
import pytest

import tideflow as flow
from tideflow import DTypeError, ShapeError, TensorIndexError, TideflowError
from tideflow.utils.data import DataLoader, Dataset


def mentions(*parts: str | re.Pattern) -> str:
    """A `match=` pattern requiring every part (a literal, or a compiled pattern) in the
    message, in any order."""
    patterns = (p.pattern if isinstance(p, re.Pattern) else re.escape(p) for p in parts)
    return "(?s)" + "".join(f"(?=.*(?:{pattern}))" for pattern in patterns)


MHA = re.compile("MultiheadAttention|multi_head_attention")  # the module or the function


# -- wrong inputs into layers and losses -------------------------------------------------------
def _mha(lib, query, key, value, **kwargs):
    """Self-attention with embed_dim 8 and 2 heads on the given shapes."""
    batch_first = kwargs.pop("batch_first", False)
    attention = lib.nn.MultiheadAttention(8, 2, batch_first=batch_first)
    return attention(lib.randn(*query), lib.randn(*key), lib.randn(*value), **kwargs)


# (id, call with lib = tideflow or torch, tideflow's exception type, what the message names)
LAYER_CASES = [
    ("linear-in-features", lambda lib: lib.nn.Linear(4, 3)(lib.randn(2, 5)),
     ShapeError, ("linear", "5 features", "[3, 4]")),
    ("linear-integer-input", lambda lib: lib.nn.Linear(4, 3)(lib.ones(2, 4, dtype=lib.int64)),
     DTypeError, ("linear", "int64", "float32")),
    ("flatten-then-linear", lambda lib: lib.nn.Sequential(lib.nn.Flatten(), lib.nn.Linear(10, 2))(
        lib.randn(2, 3, 3)),
     ShapeError, ("linear", "9 features", "[2, 10]")),
    ("numpy-array-into-a-layer", lambda lib: lib.nn.Linear(4, 3)(np.ones((2, 4), np.float32)),
     TypeError, ("linear", "Tensor", "ndarray")),
    ("conv2d-channels", lambda lib: lib.nn.Conv2d(3, 4, 3)(lib.randn(1, 2, 8, 8)),
     ShapeError, ("conv2d", "3 channels", "[1, 2, 8, 8]")),
    ("conv2d-rank", lambda lib: lib.nn.Conv2d(3, 4, 3)(lib.randn(3, 8)),
     ShapeError, ("conv2d", "[3, 8]")),
    ("conv2d-kernel-larger-than-input", lambda lib: lib.nn.Conv2d(3, 4, 5)(lib.randn(1, 3, 3, 3)),
     ShapeError, ("conv2d", "[5, 5]", "[1, 3, 3, 3]")),
    ("conv2d-unbatched-channels", lambda lib: lib.nn.Conv2d(3, 4, 3)(lib.randn(2, 8, 8)),
     ShapeError, ("conv2d", "3 channels", "[2, 8, 8]")),
    ("conv2d-float64-input", lambda lib: lib.nn.Conv2d(3, 4, 3)(
        lib.randn(1, 3, 8, 8, dtype=lib.float64)),
     DTypeError, ("conv2d", "float64", "float32")),
    ("max_pool2d-output-empty", lambda lib: lib.nn.MaxPool2d(4)(lib.randn(1, 3, 2, 2)),
     ShapeError, ("max_pool2d", "[2, 2]", "[0, 0]")),
    ("batchnorm2d-channels", lambda lib: lib.nn.BatchNorm2d(4)(lib.randn(2, 3, 5, 5)),
     ShapeError, ("BatchNorm2d", "4 channels", "[2, 3, 5, 5]")),
    ("batchnorm2d-rank", lambda lib: lib.nn.BatchNorm2d(4)(lib.randn(2, 4)),
     ShapeError, ("BatchNorm2d", "4D", "[2, 4]")),
    ("batchnorm1d-one-value-per-channel", lambda lib: lib.nn.BatchNorm1d(4)(lib.randn(1, 4)),
     ValueError, ("batch_norm", "more than 1 value per channel", "[1, 4]")),
    ("batch_norm-running-stats", lambda lib: lib.nn.functional.batch_norm(
        lib.randn(4, 3), lib.zeros(5), lib.ones(3), training=True),
     ShapeError, ("batch_norm", "running_mean", "[5]", "[4, 3]")),
    ("layer_norm-normalized-shape", lambda lib: lib.nn.LayerNorm(5)(lib.randn(2, 4)),
     ShapeError, ("layer_norm", "[5]", "[2, 4]")),
    ("lstm-rank", lambda lib: lib.nn.LSTM(4, 6)(lib.randn(5, 2, 4, 1)),
     ValueError, ("LSTM", "4D")),
    ("lstm-input-size", lambda lib: lib.nn.LSTM(4, 6)(lib.randn(5, 2, 3)),
     ShapeError, ("LSTM", "input_size", "Expected 4, got 3")),
    ("lstm-initial-state-batch", lambda lib: lib.nn.LSTM(4, 6)(
        lib.randn(5, 2, 4), (lib.zeros(1, 3, 6), lib.zeros(1, 3, 6))),
     ShapeError, ("LSTM", "(1, 2, 6)", "[1, 3, 6]")),
    ("gru-initial-state-layers", lambda lib: lib.nn.GRU(4, 6, num_layers=2)(
        lib.randn(5, 2, 4), lib.zeros(1, 2, 6)),
     ShapeError, ("GRU", "(2, 2, 6)", "[1, 2, 6]")),
    ("mha-embed-dim", lambda lib: _mha(lib, (3, 2, 6), (3, 2, 6), (3, 2, 6)),
     ShapeError, (MHA, "embed", "8", "6")),
    ("mha-key-value-lengths", lambda lib: _mha(lib, (3, 2, 8), (4, 2, 8), (5, 2, 8)),
     ShapeError, (MHA, "[4, 2, 8]", "[5, 2, 8]")),
    ("mha-attn-mask", lambda lib: _mha(lib, (3, 2, 8), (3, 2, 8), (3, 2, 8),
                                       attn_mask=lib.zeros(4, 4, dtype=lib.bool)),
     ShapeError, (MHA, "attn_mask", "[4, 4]", "(3, 3)")),
    ("mha-query-key-batch", lambda lib: _mha(lib, (2, 3, 8), (3, 3, 8), (3, 3, 8),
                                             batch_first=True),
     ShapeError, (MHA, "[2, 3, 8]", "[3, 3, 8]")),
    ("embedding-index-too-large", lambda lib: lib.nn.Embedding(10, 3)(lib.tensor([[1, 10]])),
     TensorIndexError, ("embedding", "index 10", "10 embeddings")),
    ("embedding-negative-index", lambda lib: lib.nn.Embedding(10, 3)(lib.tensor([-1, 2])),
     TensorIndexError, ("embedding", "index -1", "10 embeddings")),
    ("embedding-float-indices", lambda lib: lib.nn.Embedding(10, 3)(lib.tensor([1.0, 2.0])),
     DTypeError, ("embedding", "float32")),
    ("cross_entropy-target-batch", lambda lib: lib.nn.CrossEntropyLoss()(
        lib.randn(4, 3), lib.tensor([0, 1, 2])),
     ShapeError, ("cross_entropy", "[4, 3]", "[3]")),
    ("cross_entropy-target-spatial", lambda lib: lib.nn.CrossEntropyLoss()(
        lib.randn(4, 3, 5), lib.zeros(4, 6, dtype=lib.int64)),
     ShapeError, ("cross_entropy", "[4, 5]", "[4, 6]")),
    ("cross_entropy-int32-target", lambda lib: lib.nn.CrossEntropyLoss()(
        lib.randn(4, 3), lib.tensor([0, 1, 2, 1], dtype=lib.int32)),
     DTypeError, ("cross_entropy", "int32")),
    ("cross_entropy-float-class-indices", lambda lib: lib.nn.CrossEntropyLoss()(
        lib.randn(4, 3), lib.tensor([0.0, 1.0, 2.0, 1.0])),
     ShapeError, ("cross_entropy", "[4, 3]", "[4]")),
    ("cross_entropy-class-out-of-range", lambda lib: lib.nn.CrossEntropyLoss()(
        lib.randn(4, 3), lib.tensor([0, 1, 3, 1])),
     TensorIndexError, ("target 3", "3 classes")),
    ("cross_entropy-weight-per-class", lambda lib: lib.nn.CrossEntropyLoss(weight=lib.ones(4))(
        lib.randn(2, 3), lib.tensor([0, 1])),
     ShapeError, ("cross_entropy", "weight", "[4]", "3")),
    ("collate-samples-of-different-shapes", lambda lib: list(lib.utils.data.DataLoader(
        [lib.ones(3), lib.ones(4)], batch_size=2)),
     ShapeError, ("stack", "[3] at entry 0", "[4] at entry 1")),
]  # fmt: skip

_LAYER_PARAMS = [pytest.param(*rest, id=name) for name, *rest in LAYER_CASES]


@pytest.mark.parametrize(("call", "error", "names"), _LAYER_PARAMS)
def test_wrong_inputs_raise_naming_the_layer_and_the_values(call, error, names):
    with pytest.raises(error, match=mentions(*names)):
        call(flow)


@pytest.mark.torch
@pytest.mark.parametrize(("call", "error", "names"), _LAYER_PARAMS)
def test_pytorch_rejects_the_same_inputs_with_a_compatible_exception(call, error, names):
    torch = pytest.importorskip("torch")
    with pytest.raises(Exception) as theirs:
        call(torch)
    with pytest.raises(Exception) as ours:
        call(flow)
    # Code that catches PyTorch's exception type catches ours too (PyTorch's asserts aside).
    if type(theirs.value) is not AssertionError:
        assert isinstance(ours.value, type(theirs.value))


@pytest.mark.parametrize(
    ("call", "message"),
    [(lambda lib: lib.add(lib.ones(2), np.ones(2)),
      "add(): argument 'other' (position 2) must be Tensor, not numpy.ndarray"),
     (lambda lib: lib.nn.functional.linear(lib.ones(2, 4), np.ones((3, 4), np.float32)),
      "linear(): argument 'weight' (position 2) must be Tensor, not numpy.ndarray"),
     (lambda lib: lib.cat([lib.ones(2), np.ones(2)]),
      "expected Tensor as element 1 in argument 0")],
    ids=["add", "linear-weight", "cat-element"],
)  # fmt: skip
def test_numpy_arrays_passed_as_operands_raise_pytorchs_type_error(call, message):
    with pytest.raises(TypeError, match=re.escape(message)):
        call(flow)
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError, match=re.escape(message)):
        call(torch)


def test_numpy_scalars_and_array_subclasses_as_operands():
    assert flow.mul(flow.ones(2), np.float32(3.0)).tolist() == [3.0, 3.0]  # a scalar: accepted
    # NOTE: a 0-d array is a number too (PyTorch refuses it; see test_numpy_interop.py)
    assert flow.mul(flow.ones(2), np.array(2.0)).tolist() == [2.0, 2.0]
    with pytest.raises(TypeError, match=re.escape("must be Tensor, not numpy.ma.MaskedArray")):
        flow.add(flow.ones(2), np.ma.masked_array(np.ones(2)))


def test_a_layer_keeps_its_weights_after_a_rejected_input():
    layer = flow.nn.BatchNorm2d(4)
    before = {k: v.clone() for k, v in layer.state_dict().items()}
    with pytest.raises(ShapeError):
        layer(flow.randn(2, 3, 5, 5))
    for key, value in layer.state_dict().items():
        assert np.array_equal(value.numpy(), before[key].numpy()), key


# -- state dicts that do not fit ---------------------------------------------------------------
def _mlp():
    return flow.nn.Sequential(flow.nn.Linear(4, 3), flow.nn.ReLU(), flow.nn.Linear(3, 2))


def _misfit_state(model) -> dict:
    state = dict(model.state_dict())
    state["0.weight"] = flow.zeros(3, 5)  # the wrong shape
    del state["2.bias"]  # missing
    state["2.scale"] = flow.ones(2)  # unexpected
    return state


def test_load_state_dict_lists_every_missing_unexpected_and_misshapen_key():
    model = _mlp()
    with pytest.raises(TideflowError) as info:
        model.load_state_dict(_misfit_state(_mlp()))
    message = str(info.value)
    assert message.startswith("Error(s) in loading state_dict for Sequential:")
    assert 'Missing key(s) in state_dict: "2.bias"' in message
    assert 'Unexpected key(s) in state_dict: "2.scale"' in message
    assert re.search(mentions("size mismatch for 0.weight", "[3, 5]", "[3, 4]"), message)


@pytest.mark.parametrize("strict", [True, False])
def test_a_failed_load_state_dict_changes_nothing(strict):
    model = _mlp()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    state = _misfit_state(model)
    state["2.weight"] = flow.full((2, 3), 7.0)  # fits, but must not be half-loaded either
    with pytest.raises(TideflowError, match=mentions("size mismatch for 0.weight")):
        model.load_state_dict(state, strict=strict)
    for key, value in model.state_dict().items():
        assert np.array_equal(value.numpy(), before[key].numpy()), key


def test_load_state_dict_not_strict_reports_the_keys_it_skipped():
    model = _mlp()
    state = _misfit_state(model)
    state["0.weight"] = flow.full((3, 4), 2.0)
    result = model.load_state_dict(state, strict=False)
    assert (result.missing_keys, result.unexpected_keys) == (["2.bias"], ["2.scale"])
    assert np.all(model[0].weight.detach().numpy() == 2.0)


def _adam_after_one_step(model, x):
    optimizer = flow.optim.Adam(model.parameters())
    model(x).sum().backward()
    optimizer.step()
    return optimizer


def test_optimizer_state_with_other_parameter_groups_is_rejected():
    model = _mlp()
    optimizer = flow.optim.Adam(model.parameters())
    other = flow.optim.Adam(flow.nn.Linear(4, 3).parameters())
    with pytest.raises(TideflowError, match=mentions("parameter group", "2 vs 4")):
        optimizer.load_state_dict(other.state_dict())
    two_groups = flow.optim.Adam([{"params": _mlp().parameters()}, {"params": [flow.ones(1)]}])
    with pytest.raises(TideflowError, match=mentions("2 parameter groups", "has 1")):
        optimizer.load_state_dict(two_groups.state_dict())


def test_optimizer_state_of_another_shape_is_rejected_naming_the_shapes():
    saved = _adam_after_one_step(flow.nn.Linear(4, 3), flow.randn(2, 4)).state_dict()
    model = flow.nn.Linear(5, 3)  # as many parameters, other shapes
    optimizer = flow.optim.Adam(model.parameters())
    with pytest.raises(ShapeError, match=mentions("exp_avg", "[3, 4]", "[3, 5]")):
        optimizer.load_state_dict(saved)  # the error may come here...
        model(flow.randn(2, 5)).sum().backward()
        optimizer.step()  # ...or at the first step, but must name the state and shapes


@pytest.mark.parametrize(
    ("make", "state", "names"),
    [(lambda ps: flow.optim.AdamW(ps, weight_decay=0.1), "exp_avg_sq", ("adam_update", "[2, 3]")),
     (lambda ps: flow.optim.SGD(ps, lr=0.1, momentum=0.9), "momentum_buffer", ("sgd_update",)),
     (lambda ps: flow.optim.RMSprop(ps, centered=True), "grad_avg", ("rmsprop_update",))],
    ids=["adamw", "sgd", "rmsprop"],
)  # fmt: skip
def test_an_optimizer_step_on_misshapen_state_changes_nothing(make, state, names):
    # Shapes NumPy broadcasts: a kernel left to fail on its own would update some tensors
    # (AdamW's weight decay, the first moment) before it reached the one that does not fit.
    param = flow.nn.Parameter(flow.ones(2, 3))
    optimizer = make([param])
    param.grad = flow.ones(2, 3)
    optimizer.step()
    optimizer.state[param][state] = flow.ones(4, 2, 3)
    before = {"param": param.detach().clone()} | {
        k: v.clone() for k, v in optimizer.state[param].items() if isinstance(v, flow.Tensor)
    }
    with pytest.raises(ShapeError, match=mentions(*names, state, "[4, 2, 3]", "[2, 3]")):
        optimizer.step()
    after = {"param": param.detach()} | optimizer.state[param]
    for key, value in before.items():
        assert np.array_equal(after[key].numpy(), value.numpy()), key


# -- checkpoint files that are damaged ---------------------------------------------------------
@pytest.fixture
def checkpoint(tmp_path):
    """A training checkpoint (model and optimizer state) and its bytes."""
    model = _mlp()
    optimizer = _adam_after_one_step(model, flow.randn(2, 4))
    path = tmp_path / "ckpt.safetensors"
    flow.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, path)
    return path, path.read_bytes()


@pytest.mark.parametrize(
    ("keep", "reason"),
    [(0, "not a safetensors file"), (5, "not a safetensors file"),
     (8, "not a safetensors file"), (100, "truncated"), (-1, "truncated")],
    ids=["empty", "in-the-header-length", "no-header", "in-the-header", "last-byte-missing"],
)  # fmt: skip
def test_a_truncated_checkpoint_is_reported_naming_the_file(tmp_path, checkpoint, keep, reason):
    _, data = checkpoint
    damaged = tmp_path / "truncated.safetensors"
    damaged.write_bytes(data[:keep])
    with pytest.raises(TideflowError, match=mentions(str(damaged), reason)):
        flow.load(damaged)


def _flip_last_byte(data: bytes) -> bytes:  # the last tensor's data
    return data[:-1] + bytes([data[-1] ^ 0x01])


def _edit_document(data: bytes) -> bytes:  # same length, so only the checksum can tell
    edited = data.replace(b'\\"requires_grad\\":false', b'\\"requires_grad\\":true ', 1)
    assert edited != data
    return edited


def _scramble_header(data: bytes) -> bytes:
    return data[:8] + b"#" + data[9:]


@pytest.mark.parametrize(
    ("tamper", "reason"),
    [(_flip_last_byte, "checksum mismatch"), (_edit_document, "checksum mismatch"),
     (_scramble_header, "not a safetensors file")],
    ids=["tensor-byte", "structure", "header"],
)  # fmt: skip
def test_a_tampered_checkpoint_is_reported_naming_the_file(tmp_path, checkpoint, tamper, reason):
    _, data = checkpoint
    damaged = tmp_path / "tampered.safetensors"
    damaged.write_bytes(tamper(data))
    with pytest.raises(TideflowError, match=mentions(str(damaged), reason)):
        flow.load(damaged)
    with open(damaged, "rb") as f, pytest.raises(TideflowError, match=mentions(str(damaged))):
        flow.load(f)  # a file object is named by its name


def test_a_missing_checkpoint_raises_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError, match=mentions("missing.safetensors")):
        flow.load(tmp_path / "missing.safetensors")


# -- failing DataLoader workers ----------------------------------------------------------------
class FailingDataset(Dataset):
    """16 samples; sample 11 is corrupt (raises) or kills its worker process."""

    def __init__(self, failure: str) -> None:
        self.failure = failure

    def __len__(self) -> int:
        return 16

    def __getitem__(self, i):
        if i == 11:
            if self.failure == "raise":
                raise ValueError(f"corrupt record {i}")
            os._exit(3)
        return flow.full((4,), float(i)), flow.tensor(i % 2)


def _train_one_epoch(loader, model, optimizer) -> None:
    for x, y in loader:
        optimizer.zero_grad()
        flow.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("failure", "error", "names"),
    [("raise", ValueError, ("Caught ValueError in DataLoader worker process 0",
                            "corrupt record 11")),
     ("exit", RuntimeError, ("DataLoader worker", "worker 0", "exit code 3"))],
    ids=["raises", "dies"],
)  # fmt: skip
def test_a_failing_worker_stops_training_with_an_error_naming_it(failure, error, names):
    # Batch 2 (samples 8-11) goes to worker 0 of 2.
    model = flow.nn.Linear(4, 2)
    optimizer = flow.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(FailingDataset(failure), batch_size=4, num_workers=2)
    start = time.monotonic()
    with pytest.raises(error, match=mentions(*names)):
        _train_one_epoch(loader, model, optimizer)
    assert time.monotonic() - start < 30  # reported, not waited out


# -- saves that fail ---------------------------------------------------------------------------
def test_a_failed_save_names_the_culprit_and_leaves_the_checkpoint_unchanged(checkpoint):
    path, data = checkpoint
    state = {"model": _mlp().state_dict(), "hooks": [print, lambda step: step]}
    with pytest.raises(TideflowError, match=mentions(str(path), "obj['hooks'][0]")):
        flow.save(state, path)
    assert path.read_bytes() == data
    assert os.listdir(path.parent) == [path.name]  # no temporary file left behind
    flow.load(path)


def test_a_save_into_a_missing_directory_creates_nothing(tmp_path):
    target = tmp_path / "runs" / "ckpt.safetensors"
    with pytest.raises(FileNotFoundError):
        flow.save({"model": _mlp().state_dict()}, target)
    assert os.listdir(tmp_path) == []
