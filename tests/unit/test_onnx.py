"""tideflow.onnx.export: the API (PyTorch's calling conventions), dynamic axes, initializers,
external data, errors, and torch.onnx under mock_torch."""

from __future__ import annotations

import io

import numpy as np
import pytest

import tideflow as flow
from tideflow import mock_torch, nn
from tideflow.framework.errors import ArgumentError, TideflowError, UnsupportedError

from ._onnx_support import check_model, eager, onnx, run_onnxruntime

tideflow_onnx = pytest.importorskip("tideflow.onnx")


def _mlp():
    flow.manual_seed(0)
    return flow.models.MLP([16, 8, 4])


def test_mlp_runs_in_onnxruntime_and_openvino_at_two_batch_sizes(tmp_path):
    check_model(
        tmp_path,
        _mlp(),
        (flow.randn(3, 16),),
        depth=2,
        n=16,
        dynamic={0: [0]},
        second=(flow.randn(7, 16),),
    )


def test_dynamic_axes_name_the_dims_and_weights_are_named_initializers(tmp_path):
    model = _mlp()
    proto = tideflow_onnx.export(
        model,
        flow.randn(2, 16),
        tmp_path / "mlp.onnx",
        input_names=["features"],
        output_names=["logits"],
        dynamic_axes={"features": {0: "batch"}, "logits": [0]},
    )
    (x,), (y,) = proto.graph.input, proto.graph.output
    assert [d.dim_param or d.dim_value for d in x.type.tensor_type.shape.dim] == ["batch", 16]
    assert [d.dim_param or d.dim_value for d in y.type.tensor_type.shape.dim] == [
        "logits_dynamic_axes_1",
        4,
    ]
    initializers = {t.name: t for t in proto.graph.initializer}
    for name, p in model.state_dict().items():
        np.testing.assert_array_equal(onnx.numpy_helper.to_array(initializers[name]), p.numpy())


def test_export_params_false_makes_weights_inputs(tmp_path):
    model = _mlp()
    x = flow.randn(2, 16)
    path = tmp_path / "mlp.onnx"
    proto = tideflow_onnx.export(model, (x,), path, export_params=False)
    names = [i.name for i in proto.graph.input]
    assert names == ["input_0", *model.state_dict()]
    feeds = {"input_0": x.numpy(), **{k: v.numpy() for k, v in model.state_dict().items()}}
    (got,) = run_onnxruntime(path, feeds)
    np.testing.assert_allclose(got, eager(model, (x,))[0], rtol=1e-5, atol=1e-6)


def test_keyword_arguments_and_file_objects(tmp_path):
    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(3, 2)

        def forward(self, x, *, scale):
            return self.linear(x) * scale

    model = Scaled()
    x, scale = flow.randn(4, 3), flow.tensor(2.0)
    buffer = io.BytesIO()
    tideflow_onnx.export(model, (x, {"scale": scale}), buffer)
    path = tmp_path / "scaled.onnx"
    path.write_bytes(buffer.getvalue())
    (got,) = run_onnxruntime(path, {"input_0": x.numpy(), "input_1": scale.numpy()})
    np.testing.assert_allclose(got, model(x, scale=scale).detach().numpy(), rtol=1e-6)
    tideflow_onnx.export(model, (x,), tmp_path / "kw.onnx", kwargs={"scale": scale})


def test_an_inference_graph_exports_as_its_module(tmp_path):
    model = _mlp()

    class Inference(nn.Graph):
        def __init__(self):
            super().__init__()
            self.net = model

        def build(self, x):
            return self.net(x).softmax(-1)

    x = flow.randn(5, 16)
    path = tmp_path / "graph.onnx"
    proto = tideflow_onnx.export(Inference(), x, path)
    assert {t.name for t in proto.graph.initializer} >= {f"net.{k}" for k in model.state_dict()}
    (got,) = run_onnxruntime(path, {"input_0": x.numpy()})
    np.testing.assert_allclose(got, model(x).softmax(-1).detach().numpy(), rtol=1e-5, atol=1e-7)


def test_export_runs_in_eval_mode_and_restores_training_flags(tmp_path):
    model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5), nn.BatchNorm1d(4))
    model.train()
    x = flow.randn(6, 4)
    path = tmp_path / "eval.onnx"
    tideflow_onnx.export(model, x, path)
    assert all(m.training for m in model.modules())
    model.eval()
    (got,) = run_onnxruntime(path, {"input_0": x.numpy()})
    np.testing.assert_allclose(got, eager(model, (x,))[0], rtol=1e-5, atol=1e-6)


def test_large_models_keep_their_weights_beside_the_file(tmp_path, monkeypatch):
    # NOTE: the 2 GB limit lowered to a few bytes, so a small model takes the large path
    monkeypatch.setattr("tideflow.onnx._export._PROTOBUF_LIMIT", 64)
    model = flow.models.MLP([64, 64, 4])  # onnx keeps tensors under 1 KiB in the file
    path = tmp_path / "large.onnx"
    tideflow_onnx.export(model, flow.randn(2, 64), path)
    assert (tmp_path / "large.onnx.data").stat().st_size >= 64 * 64 * 4
    onnx.checker.check_model(str(path), full_check=True)
    x = flow.randn(2, 64)
    (got,) = run_onnxruntime(path, {"input_0": x.numpy()})
    np.testing.assert_allclose(got, eager(model, (x,))[0], rtol=1e-5, atol=1e-6)
    with pytest.raises(ArgumentError, match="give f as a path"):
        tideflow_onnx.export(model, flow.randn(2, 64), io.BytesIO())


def test_an_op_without_lowering_names_the_op_module_and_line(tmp_path):
    class Products(nn.Module):
        def forward(self, x):
            return x.cumprod(-1)

    model = nn.Sequential(nn.Linear(3, 3), Products())
    with pytest.raises(UnsupportedError) as info:
        tideflow_onnx.export(model, flow.randn(2, 3), tmp_path / "cumprod.onnx")
    message = str(info.value)
    assert "op 'cumprod' has no ONNX lowering" in message
    assert "module '1'" in message
    assert "test_onnx.py" in message and "return x.cumprod(-1)" in message
    assert tideflow_onnx.unlowered(model, flow.randn(2, 3)) == ["cumprod"]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda m, x, f: tideflow_onnx.export(m, x, f, opset_version=12), "opset_version 12"),
        (lambda m, x, f: tideflow_onnx.export(m, x, f, input_names=["a", "b"]), "2 input"),
        (lambda m, x, f: tideflow_onnx.export(m, x, f, dynamic_axes={"z": [0]}), "names 'z'"),
        (lambda m, x, f: tideflow_onnx.export(m, x, f, dynamic_axes={"input_0": [2]}), r"\[2\]"),
        (lambda m, x, f: tideflow_onnx.export(m, 3, f), "args must be a tensor"),
        (lambda m, x, f: tideflow_onnx.export(object(), x, f), "nn.Module or an nn.Graph"),
    ],
)
def test_mistakes_raise_errors_that_say_what_is_wrong(tmp_path, call, message):
    with pytest.raises(TideflowError, match=message):
        call(_mlp(), flow.randn(2, 16), tmp_path / "bad.onnx")


def test_is_in_onnx_export_is_true_while_tracing(tmp_path):
    seen = []

    class Probe(nn.Module):
        def forward(self, x):
            seen.append(tideflow_onnx.is_in_onnx_export())
            return x + 1

    tideflow_onnx.export(Probe(), flow.ones(2), tmp_path / "probe.onnx")
    assert seen == [True] and not tideflow_onnx.is_in_onnx_export()


def test_torch_onnx_export_under_mock_torch(tmp_path):
    path = tmp_path / "linear.onnx"
    with mock_torch.enabled():
        import torch
        import torch.onnx

        model = torch.nn.Linear(2, 3)
        x = torch.ones(1, 2)
        assert not torch.onnx.is_in_onnx_export()
        torch.onnx.export(model, (x,), str(path), opset_version=18, dynamo=True, verbose=False)
        with pytest.raises(UnsupportedError, match="give the file to write"):
            torch.onnx.export(model, (x,))
    assert onnx.load(str(path)).opset_import[0].version == 18
    (got,) = run_onnxruntime(path, {"input_0": x.numpy()})
    np.testing.assert_allclose(got, model(x).detach().numpy(), rtol=1e-6)


def test_coverage_counts_registered_ops_with_a_lowering():
    lowered, missing = tideflow_onnx.lowered_ops()
    assert {"linear", "relu"} <= lowered and "cumprod" in missing
    assert f"{len(lowered)} of {len(lowered) + len(missing)}" in tideflow_onnx.coverage()


# -- dynamic axes: what the second trace finds ----------------------------------------------
class _Reshaping(nn.Module):
    """Sizes computed in Python from the shape: the reshape follows the dynamic axis, zeros
    of the input's shape are built at run time."""

    def forward(self, x):
        b, t, c = x.shape
        merged = x.reshape(b * t, c).relu()
        return merged.reshape(b, t * c) + flow.ones(x.shape[0], 1)


def test_sizes_from_shapes_follow_the_dynamic_axes(tmp_path):
    path = tmp_path / "reshaping.onnx"
    proto = tideflow_onnx.export(
        _Reshaping(), flow.randn(2, 3, 4), path, input_names=["x"], dynamic_axes={"x": [0, 1]}
    )
    (y,) = proto.graph.output
    dims = y.type.tensor_type.shape.dim
    assert dims[0].dim_param and dims[1].dim_param  # found, not declared
    for shape in ((2, 3, 4), (5, 7, 4)):
        x = flow.randn(*shape)
        (got,) = run_onnxruntime(path, {"x": x.numpy()})
        np.testing.assert_allclose(got, eager(_Reshaping(), (x,))[0], rtol=1e-6)


def test_values_fixed_in_python_refuse_a_dynamic_axis(tmp_path):
    class Positions(nn.Module):
        def forward(self, x):
            return x + flow.arange(x.shape[1], dtype=x.dtype)

    with pytest.raises(UnsupportedError, match="change with the size of the dynamic axes"):
        tideflow_onnx.export(
            Positions(), flow.randn(2, 3), tmp_path / "p.onnx", dynamic_axes={"input_0": [1]}
        )


def test_legacy_tensor_types_under_mock_torch():
    """word_language_model's export makes its input with torch.LongTensor(n)."""
    with mock_torch.enabled():
        import torch

        tokens = torch.LongTensor(6).zero_().view(-1, 2)
        assert tokens.dtype is flow.int64 and tokens.shape == (3, 2)
        assert isinstance(tokens, torch.LongTensor) and not isinstance(tokens, torch.FloatTensor)
        assert torch.FloatTensor([1, 2]).tolist() == [1.0, 2.0]
        assert torch.IntTensor(2, 3).shape == (2, 3) and torch.BoolTensor().shape == (0,)


def test_tensors_a_forward_caches_do_not_outlive_the_trace(tmp_path):
    """A module caching a tensor on its first call (word_language_model's causal mask) keeps
    no tensor of the trace: the next eager call computes its own."""

    class Cached(nn.Module):
        def __init__(self):
            super().__init__()
            self.mask = None

        def forward(self, x):
            if self.mask is None:
                self.mask = flow.ones(x.shape[-1], x.shape[-1]).tril()
            return x @ self.mask

    model = Cached()
    tideflow_onnx.export(model, flow.randn(2, 3), tmp_path / "cached.onnx")
    assert model.mask is None
    np.testing.assert_array_equal(model(flow.ones(2, 3)).numpy(), [[3, 2, 1], [3, 2, 1]])
