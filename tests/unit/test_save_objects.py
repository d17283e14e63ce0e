"""`flow.save` of NumPy values and of whole objects (`torch.save(model, f)`), and `flow.load`
of them: exact round trips (types, dtypes, identities), a model saved whole trains exactly like
the original, loading objects needs `weights_only=False`, and crafted files naming classes or
functions they should not are refused without side effects."""

from __future__ import annotations

import argparse
import io
import json
import sys
import types
from collections import defaultdict

import numpy as np
import pytest
import safetensors.numpy

import tideflow as flow
from tideflow import nn
from tideflow.io import _checkpoint, _file, load, save


def roundtrip(obj, **load_options):
    buffer = io.BytesIO()
    save(obj, buffer)
    buffer.seek(0)
    return load(buffer, **load_options)


# -- NumPy arrays and scalars ------------------------------------------------------------------

NUMPY_DTYPES = [
    *["?", "i1", "u1", "i2", "u2", "i4", "u4", "i8", "u8", "f2", "f4", "f8", "c8", "c16"],
    *[">i4", ">f8"],  # big-endian: stored as bytes, loaded with their byte order
]


def numpy_values(dtype: str, shape: tuple) -> np.ndarray:
    rng = np.random.default_rng(0)
    raw = rng.integers(0, 256, size=(*shape, np.dtype(dtype).itemsize), dtype=np.uint8)
    if dtype == "?":
        return np.asarray(raw[..., 0] % 2 == 1)
    return raw.view(dtype).reshape(shape)  # every bit pattern, NaN payloads included


@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
@pytest.mark.parametrize("shape", [(), (0,), (2, 3)], ids=["0d", "empty", "2x3"])
def test_numpy_arrays_come_back_with_their_dtype_and_bytes(dtype, shape):
    a = numpy_values(dtype, shape)
    loaded = roundtrip({"a": a})["a"]
    assert type(loaded) is np.ndarray
    assert loaded.dtype.str == a.dtype.str
    assert loaded.shape == a.shape
    assert loaded.tobytes() == a.tobytes()
    assert loaded.flags.writeable


def test_numpy_views_and_repeats():
    base = np.arange(12.0).reshape(3, 4)
    column = base[:, 1]  # not contiguous
    loaded = roundtrip([column, column, base.T])
    assert loaded[0] is loaded[1]  # one array object saved twice is one object
    assert np.array_equal(loaded[0], column) and np.array_equal(loaded[2], base.T)


@pytest.mark.parametrize(
    "value",
    [
        *[np.float32(0.1), np.float64(-0.0), np.float16(np.inf), np.float64(np.nan)],
        *[np.int64(-7), np.uint8(255), np.bool_(True), np.complex64(1 - 2j)],
    ],
    ids=lambda v: type(v).__name__,
)
def test_numpy_scalars_come_back_as_numpy_scalars(value):
    loaded = roundtrip({"best": value})["best"]
    assert type(loaded) is type(value)
    assert loaded.tobytes() == value.tobytes()


def test_numpy_values_sit_beside_tensors_and_plain_data():
    state = {
        "epoch": 3,
        "scores": np.array([0.5, 0.25], dtype=np.float32),
        "weights": flow.ones(2),
        "flags": (None, True, "done", b"\x00\xff"),
    }
    loaded = roundtrip(state)
    assert loaded["epoch"] == 3 and loaded["flags"] == (None, True, "done", b"\x00\xff")
    assert isinstance(loaded["weights"], flow.Tensor)
    assert loaded["scores"].dtype == np.float32


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (np.array(["a", "b"]), r"its dtype <U1 is not a number or bool dtype"),
        (np.array([{}], dtype=object), r"its dtype \|O is not a number or bool dtype"),
        (np.str_("text"), r"its dtype <U4 is not a number or bool dtype"),
    ],
    ids=["str", "object", "str-scalar"],
)
def test_non_numeric_numpy_values_are_refused(value, message):
    with pytest.raises(flow.TideflowError, match=rf"at obj\['x'\]: {message}"):
        save({"x": value}, io.BytesIO())


# -- whole objects -----------------------------------------------------------------------------


class LanguageModel(nn.Module):
    """Embedding, LSTM and a decoder tied to the embedding, plus plain attributes."""

    def __init__(self, vocab: int = 11, width: int = 6) -> None:
        super().__init__()
        self.encoder = nn.Embedding(vocab, width)
        self.rnn = nn.LSTM(width, width, num_layers=2)
        self.decoder = nn.Linear(width, vocab)
        self.decoder.weight = self.encoder.weight
        self.attention = nn.TransformerEncoderLayer(width, nhead=2, dim_feedforward=8, dropout=0.0)
        self.register_buffer("scale", flow.tensor(0.5))
        self.vocab = vocab
        self.kind = ("LSTM", 2)

    def forward(self, tokens):
        out, _ = self.rnn(self.encoder(tokens))
        return self.decoder(self.attention(out) * self.scale)


def train_steps(model: nn.Module, steps: int = 3) -> list[float]:
    optimizer = flow.optim.Adam(model.parameters(), lr=0.01)
    generator = flow.Generator().manual_seed(0)
    losses = []
    for _ in range(steps):
        tokens = flow.randint(0, model.vocab, (5, 2), generator=generator)
        loss = nn.functional.cross_entropy(
            model(tokens).reshape(-1, model.vocab), tokens.reshape(-1)
        )
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def test_a_model_saved_whole_loads_whole_and_trains_identically(tmp_path):
    flow.manual_seed(0)
    model = LanguageModel()
    path = tmp_path / "model.pt"
    with open(path, "wb") as f:
        save(model, f)
    with open(path, "rb") as f:
        loaded = load(f, weights_only=False)

    assert type(loaded) is LanguageModel and type(loaded.rnn) is nn.LSTM
    assert loaded.decoder.weight is loaded.encoder.weight  # tied weights stay one Parameter
    assert isinstance(loaded.decoder.weight, nn.Parameter)
    assert loaded.kind == ("LSTM", 2) and loaded.training
    assert loaded.attention.activation is nn.functional.relu  # a function, kept by name
    assert loaded.state_dict().keys() == model.state_dict().keys()
    for name, value in model.state_dict().items():
        assert np.array_equal(loaded.state_dict()[name].detach().numpy(), value.detach().numpy())
    assert train_steps(loaded) == train_steps(model)
    for (name, p), q in zip(model.named_parameters(), loaded.parameters(), strict=True):
        assert np.array_equal(p.detach().numpy(), q.detach().numpy()), name


class Stage(nn.Module):
    """Keeps a class as a value, as torchvision's ResNet keeps its norm_layer."""

    def __init__(self, norm_layer=nn.BatchNorm1d) -> None:
        super().__init__()
        self.norm_layer = norm_layer
        self.norm = norm_layer(3)


def test_classes_kept_as_values_come_back_as_the_same_class():
    loaded = roundtrip(Stage(), weights_only=False)
    assert loaded.norm_layer is nn.BatchNorm1d and type(loaded.norm) is nn.BatchNorm1d
    with pytest.raises(flow.TideflowError, match=r"int is the built-in type int"):
        save({"kind": int}, io.BytesIO())


def test_a_module_saved_whole_names_its_tensors_as_its_state_dict():
    model = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))
    buffer = io.BytesIO()
    save({"model": model}, buffer)
    stored = safetensors.numpy.load(buffer.getvalue())
    assert set(stored) == {f"model.{name}" for name in model.state_dict()}


def test_shared_and_cyclic_references_keep_their_identity():
    shared = nn.Linear(2, 2)
    model = nn.Sequential(shared, nn.ReLU(), shared)
    model.owner = model  # a cycle through an object
    loaded = roundtrip({"model": model, "again": shared}, weights_only=False)
    assert loaded["model"][0] is loaded["model"][2] is loaded["again"]
    assert loaded["model"].owner is loaded["model"]


def test_a_model_and_its_optimizer_saved_whole_keep_training_as_one():
    flow.manual_seed(0)
    model = nn.Linear(3, 2)
    optimizer = flow.optim.Adam(model.parameters(), lr=0.1)
    train = [(model, optimizer)]
    step_all(train)
    loaded = roundtrip({"model": model, "optimizer": optimizer}, weights_only=False)
    train.append((loaded["model"], loaded["optimizer"]))
    assert loaded["optimizer"].param_groups[0]["params"][0] is loaded["model"].weight
    step_all(train)
    for p, q in zip(model.parameters(), loaded["model"].parameters(), strict=True):
        assert np.array_equal(p.detach().numpy(), q.detach().numpy())


def step_all(pairs, steps: int = 2) -> None:
    for model, optimizer in pairs:
        for _ in range(steps):
            optimizer.zero_grad()
            model(flow.ones(4, 3)).square().sum().backward()
            optimizer.step()


def test_defaultdicts_keep_their_factory():
    counts = defaultdict(int, {"a": 2})
    loaded = roundtrip({"counts": counts, "plain": defaultdict(None)})
    assert type(loaded["counts"]) is defaultdict and loaded["counts"] == {"a": 2}
    assert loaded["counts"]["missing"] == 0 and loaded["plain"].default_factory is None
    with pytest.raises(
        flow.TideflowError, match=r"default_factory [\w.<>]*<lambda> is none of None, dict"
    ):
        save(defaultdict(lambda: 1), io.BytesIO())


def test_plain_objects_beside_state_dicts():
    args = argparse.Namespace(lr=0.1, layers=[2, 3], name="run")
    loaded = roundtrip({"args": args, "state": nn.Linear(1, 1).state_dict()}, weights_only=False)
    assert type(loaded["args"]) is argparse.Namespace and vars(loaded["args"]) == vars(args)


@pytest.mark.parametrize("options", [{}, {"weights_only": True}, {"weights_only": None}])
def test_loading_objects_is_refused_unless_weights_only_is_false(options):
    buffer = io.BytesIO()
    save({"model": nn.Linear(2, 2)}, buffer)
    buffer.seek(0)
    with pytest.raises(
        flow.TideflowError,
        match=r"holds a whole 'tideflow\.nn\.modules\.linear:Linear' object at obj\['model'\] "
        r".* Pass weights_only=False",
    ):
        load(buffer, **options)


@pytest.fixture
def trusting():
    """`flow.io.add_safe_globals`, undone after the test (the allowlist is process-wide)."""
    yield flow.io.add_safe_globals
    flow.io.clear_safe_globals()


@pytest.mark.parametrize(
    "trusted",
    [[argparse.Namespace], ["argparse.Namespace"], [(argparse.Namespace, "argparse.Namespace")]],
    ids=["class", "name", "pair"],
)
def test_allowlisted_classes_load_with_weights_only(trusting, trusted):
    checkpoint = {"args": argparse.Namespace(lr=0.1), "step": 3}
    trusting(trusted)
    assert vars(roundtrip(checkpoint)["args"]) == {"lr": 0.1}
    flow.io.clear_safe_globals()
    with pytest.raises(flow.TideflowError, match=r"or trust the class with flow\.io\.add_safe_g"):
        roundtrip(checkpoint)


def test_safe_globals_trusts_only_inside_its_block():
    model = nn.Sequential(nn.Linear(1, 1))
    trusted = [nn.Sequential, nn.Linear]
    with flow.io.safe_globals(trusted):
        assert flow.io.get_safe_globals() == trusted
        assert type(roundtrip(model)) is nn.Sequential
    assert flow.io.get_safe_globals() == []
    # A trusted class does not vouch for what it holds: its submodules' classes are checked.
    with (
        flow.io.safe_globals([nn.Sequential]),
        pytest.raises(
            flow.TideflowError,
            match=r"whole 'tideflow\.nn\.modules\.linear:Linear' object at obj\.",
        ),
    ):
        roundtrip(model)


def test_allowlist_items_must_name_something(trusting):
    with pytest.raises(flow.ArgumentError, match=r"add_safe_globals: expected classes, .* got int"):
        trusting([3])


class Tripwire:
    """Records every hook a loader could run; a plain class otherwise."""

    calls: list[str] = []  # noqa: RUF012 (shared on purpose: instances are made by the loader)

    def __init__(self) -> None:
        Tripwire.calls.append("__init__")
        self.value = 1

    def __setstate__(self, state) -> None:
        Tripwire.calls.append("__setstate__")

    def __reduce__(self):
        Tripwire.calls.append("__reduce__")
        return (Tripwire, ())

    def __setattr__(self, name, value) -> None:
        Tripwire.calls.append("__setattr__")
        object.__setattr__(self, name, value)

    def __getattribute__(self, name):
        Tripwire.calls.append("__getattribute__")
        return object.__getattribute__(self, name)


def test_loading_an_object_runs_none_of_its_hooks():
    buffer = io.BytesIO()
    save(Tripwire(), buffer)
    buffer.seek(0)
    Tripwire.calls.clear()
    loaded = load(buffer, weights_only=False)
    assert Tripwire.calls == []
    assert type(loaded) is Tripwire
    assert object.__getattribute__(loaded, "__dict__") == {"value": 1}


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        (lambda x: x, r"function [\w.]*test_save_objects:<lambda> is not tideflow's"),
        (print, r"builtin_function_or_method is the built-in type builtin_function_or_method"),
        (types.SimpleNamespace(a=1), r"SimpleNamespace defines __new__"),
    ],
    ids=["lambda", "builtin", "C-type"],
)
def test_objects_that_cannot_be_rebuilt_safely_are_refused_on_save(obj, message):
    with pytest.raises(flow.TideflowError, match=message):
        save({"x": obj}, io.BytesIO())


# -- crafted files -----------------------------------------------------------------------------


def crafted(change) -> io.BytesIO:
    """A saved model file whose document `change` edited, with a correct checksum (so the
    refusal comes from reading what the document names)."""
    buffer = io.BytesIO()
    save({"model": nn.Linear(2, 2), "act": nn.functional.relu}, buffer)
    buffer.seek(0)
    arrays, metadata = _file.read(buffer, "test")
    document = json.loads(metadata["tideflow"])
    change(document)
    text = json.dumps(document)
    out = io.BytesIO()
    metadata = {"tideflow": text, "tideflow.crc32": _checkpoint._checksum(text, arrays)}
    _file.write(arrays, metadata, out, "test")
    out.seek(0)
    return out


def the_object(document) -> dict:
    return document["root"]["dict"][0][1]["object"]


def naming_class(name):
    return lambda document: the_object(document).update({"class": name})


def naming_function(name):
    return lambda document: document["root"]["dict"][1][1].update({"function": name})


HOSTILE = [
    (naming_class("os:system"), r"os:system is a builtin_function_or_method, not a class"),
    (naming_class("builtins:eval"), r"builtins:eval is a builtin_function_or_method, not a"),
    (naming_class("builtins:object"), r"object instances have no __dict__"),
    (naming_class("subprocess:Popen"), r"Popen defines __del__"),
    (naming_class("collections:OrderedDict"), r"OrderedDict derives from the built-in type dict"),
    (
        naming_class("tideflow.nn:Linear"),
        r"is another name of tideflow\.nn\.modules\.linear:Linear",
    ),
    (naming_class("tideflow_never_imported_pkg:Evil"), r"'tideflow_never_imported_pkg' is not imp"),
    (naming_class("tideflow.nn.modules.linear:Linear.__init__"), r"not a class"),
    (naming_class(["os", "system"]), r"\['os', 'system'\] is not a 'module:qualname' name"),
    (naming_function("os:system"), r"os:system is a builtin_function_or_method, not a Python f"),
    (naming_function("subprocess:run"), r"function subprocess:run is not tideflow's"),
    (naming_function("tideflow.nn.modules.linear:Linear"), r"is a type, not a Python function"),
    (
        lambda d: d["root"]["dict"][1].__setitem__(1, {"class": "subprocess:Popen"}),
        r"Popen defines __del__",
    ),
    (lambda d: the_object(d).update({"id": 3}), r"object id 3 out of order"),
    (lambda d: d["root"]["dict"][1].__setitem__(1, {"ref": 5}), r"reference 5 to an object not"),
    (lambda d: the_object(d).update({"attrs": [[1, None]]}), r"expected \[attribute name, value\]"),
    (
        lambda d: d["root"]["dict"][1].__setitem__(1, {"defaultdict": ["os.system", []]}),
        r"unknown defaultdict factory 'os\.system'",
    ),
]


@pytest.mark.parametrize(("change", "message"), HOSTILE)
def test_crafted_names_are_refused_without_side_effects(change, message):
    modules = set(sys.modules)
    with pytest.raises(flow.TideflowError, match=message):
        load(crafted(change), weights_only=False)
    assert set(sys.modules) == modules  # nothing was imported


def test_lookups_do_not_run_module_getattr(monkeypatch):
    asked = []
    lazy = types.ModuleType("tideflow_lazy_module")
    lazy.__getattr__ = lambda name: asked.append(name) or Tripwire
    monkeypatch.setitem(sys.modules, "tideflow_lazy_module", lazy)
    with pytest.raises(flow.TideflowError, match=r"tideflow_lazy_module:Tripwire does not exist"):
        load(crafted(naming_class("tideflow_lazy_module:Tripwire")), weights_only=False)
    assert asked == []


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"dtype": "|O8"}, r"'\|O8' is not a numeric NumPy dtype"),
        ({"dtype": "[('a', 'O')]"}, r"is not a numeric NumPy dtype"),
        (
            {"shape": [4, 4]},
            r"float32 \[3\], which does not hold a float32 array of shape \[4, 4\]",
        ),
        ({"shape": [-1]}, r"bad shape \[-1\]"),
        ({"data": "elsewhere"}, r"expected the fields \['data', 'dtype', 'shape'\]"),
    ],
    ids=["object", "record-dtype", "shape", "negative", "data"],
)
def test_crafted_array_records_are_refused(record, message):
    buffer = io.BytesIO()
    save({"x": np.zeros(3, np.float32)}, buffer)
    buffer.seek(0)
    arrays, metadata = _file.read(buffer, "test")
    document = json.loads(metadata["tideflow"])
    document["arrays"][0].update(record)
    text = json.dumps(document)
    out = io.BytesIO()
    _file.write(
        arrays,
        {"tideflow": text, "tideflow.crc32": _checkpoint._checksum(text, arrays)},
        out,
        "test",
    )
    out.seek(0)
    with pytest.raises(
        flow.TideflowError, match=rf"malformed checkpoint: array record 0 .*{message}"
    ):
        load(out)
