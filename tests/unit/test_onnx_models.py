"""ONNX export of the reference models, the RNN family, attention and Transformer layers and
the common losses: each exported with a dynamic batch axis, checked, and run in onnxruntime
and OpenVINO at two batch sizes against tideflow's eager results. And PyTorch's
word_language_model example exporting itself under mock_torch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tideflow as flow
from tideflow import mock_torch, nn

from ._onnx_support import U32, check_model, eager, float32_bound, onnx, run_onnxruntime

tideflow_onnx = pytest.importorskip("tideflow.onnx")
models = flow.models

_GPT = models.GPTConfig(vocab_size=65, block_size=16, n_layer=2, n_head=2, n_embd=16)
_BERT = models.BertConfig(
    vocab_size=50,
    hidden_size=16,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=32,
    max_position_embeddings=16,
)

# name -> (model, inputs at a batch size, the inputs' batch axes, layers, longest reduction):
# layers and reduction length give float32's error bound (`float32_bound`)
REFERENCE = {
    "mlp": (lambda: models.MLP([16, 32, 4]), lambda b: (flow.randn(b, 16),), 2, 32),
    "lenet5": (lambda: models.LeNet5(), lambda b: (flow.randn(b, 1, 28, 28),), 5, 400),
    "resnet18": (
        lambda: models.resnet18(num_classes=10),
        lambda b: (flow.randn(b, 3, 32, 32),),
        18,
        4608,
    ),
    "resnet50": (
        lambda: models.resnet50(num_classes=10),
        lambda b: (flow.randn(b, 3, 32, 32),),
        50,
        4608,
    ),
    "gpt": (lambda: models.GPT(_GPT), lambda b: (flow.randint(0, 65, (b, 8)),), 8, 64),
    "bert": (lambda: models.BertModel(_BERT), lambda b: (flow.randint(0, 50, (b, 8)),), 8, 32),
}


def _check(tmp_path, make, inputs, depth, n, batch_axes=None):
    flow.manual_seed(0)
    model = make()
    first = inputs(2)
    axes = batch_axes or {i: [0] for i in range(len(first))}
    check_model(tmp_path, model, first, depth=depth, n=n, dynamic=axes, second=inputs(3))


@pytest.mark.parametrize("name", [pytest.param(n, id=n) for n in REFERENCE])
def test_reference_model(tmp_path, name):
    _check(tmp_path, *REFERENCE[name])


def test_reference_models_use_lowered_ops_only():
    """Every op the reference models trace to has a lowering (what `coverage` counts)."""
    missing = {
        name: tideflow_onnx.unlowered(make(), inputs(2))
        for name, (make, inputs, *_) in REFERENCE.items()
    }
    assert missing == {name: [] for name in REFERENCE}


# -- the RNN family: with and without initial states, batch first or not --------------------
RNNS = {
    "lstm": (lambda: nn.LSTM(4, 8, num_layers=2), "h, c"),
    "lstm_bidirectional": (lambda: nn.LSTM(4, 8, bidirectional=True), "h, c"),
    "gru": (lambda: nn.GRU(4, 8, num_layers=2), "h"),
    "gru_batch_first": (lambda: nn.GRU(4, 8, batch_first=True), "h"),
    "rnn_tanh": (lambda: nn.RNN(4, 8), "h"),
    "rnn_relu": (lambda: nn.RNN(4, 8, nonlinearity="relu", num_layers=2), "h"),
}


@pytest.mark.parametrize("name", list(RNNS))
@pytest.mark.parametrize("with_state", [False, True], ids=["zero_state", "given_state"])
def test_rnn(tmp_path, name, with_state):
    make, states = RNNS[name]
    flow.manual_seed(0)
    probe = make()
    first = probe.batch_first
    layers = probe.num_layers * (2 if probe.bidirectional else 1)

    def inputs(b):
        x = flow.randn(b, 5, 4) if first else flow.randn(5, b, 4)
        if not with_state:
            return (x,)
        h = tuple(flow.randn(layers, b, 8) for _ in states.split(", "))
        return (x, h if len(h) > 1 else h[0])

    n_states = len(states.split(", ")) if with_state else 0
    axes = {0: [0 if first else 1], **{1 + i: [1] for i in range(n_states)}}
    # NOTE: 5 time steps of each layer: the error of a step reaches the next
    _check(tmp_path, make, inputs, 5 * probe.num_layers, 12, axes)


def test_rnn_sequence_length_is_dynamic(tmp_path):
    """Without gradients each layer and direction is one op, ONNX's LSTM in the file: the
    number of time steps may change too."""
    flow.manual_seed(0)
    model = nn.LSTM(4, 8, num_layers=2, bidirectional=True)
    path = tmp_path / "lstm.onnx"
    tideflow_onnx.export(
        model, flow.randn(5, 2, 4), path, input_names=["x"], dynamic_axes={"x": [0, 1]}
    )
    assert [n.op_type for n in onnx.load(str(path)).graph.node].count("LSTM") == 4
    x = flow.randn(9, 3, 4)
    got = run_onnxruntime(path, {"x": x.numpy()})
    want = eager(model, (x,))
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=0, atol=float32_bound(2 * 9, 12, [w]))


# -- attention and Transformer layers ------------------------------------------------------
class _SelfAttention(nn.Module):
    def __init__(self, causal: bool) -> None:
        super().__init__()
        self.attention = nn.MultiheadAttention(16, 2)
        self.causal = causal

    def forward(self, x):
        n = x.shape[0]
        mask = flow.ones(n, n).triu(1).bool() if self.causal else None
        return self.attention(x, x, x, attn_mask=mask, need_weights=False)[0]


LAYERS = {
    "multihead_attention": (lambda: _SelfAttention(False), 1),
    "multihead_attention_masked": (lambda: _SelfAttention(True), 1),
    "transformer_encoder_layer": (lambda: nn.TransformerEncoderLayer(16, 2, 32), 2),
    "transformer_encoder_norm_first": (
        lambda: nn.TransformerEncoderLayer(16, 2, 32, norm_first=True, activation="gelu"),
        2,
    ),
    "transformer_encoder": (
        lambda: nn.TransformerEncoder(nn.TransformerEncoderLayer(16, 2, 32), num_layers=2),
        4,
    ),
}


@pytest.mark.parametrize("name", list(LAYERS))
def test_attention_layer(tmp_path, name):
    make, depth = LAYERS[name]
    _check(tmp_path, make, lambda b: (flow.randn(6, b, 16),), 4 * depth, 32, {0: [1]})


def test_transformer_decoder_layer(tmp_path):
    layer = lambda: nn.TransformerDecoderLayer(16, 2, 32)  # noqa: E731
    inputs = lambda b: (flow.randn(4, b, 16), flow.randn(6, b, 16))  # noqa: E731
    _check(tmp_path, layer, inputs, 12, 32, {0: [1], 1: [1]})


def test_transformer(tmp_path):
    model = lambda: nn.Transformer(16, 2, 1, 1, 32)  # noqa: E731
    inputs = lambda b: (flow.randn(6, b, 16), flow.randn(4, b, 16))  # noqa: E731
    _check(tmp_path, model, inputs, 16, 32, {0: [1], 1: [1]})


# -- losses --------------------------------------------------------------------------------
def _classes(b):
    return flow.randn(b, 5), flow.randint(0, 5, (b,))


def _probabilities(b):
    return flow.rand(b, 5).clamp(0.05, 0.95), flow.rand(b, 5)


def _pairs(b):
    return flow.randn(b, 5), flow.randn(b, 5)


LOSSES = {
    "cross_entropy": (lambda: nn.CrossEntropyLoss(), _classes),
    "cross_entropy_smoothed": (lambda: nn.CrossEntropyLoss(label_smoothing=0.1), _classes),
    "cross_entropy_none": (lambda: nn.CrossEntropyLoss(reduction="none"), _classes),
    "nll": (lambda: nn.NLLLoss(weight=flow.rand(5) + 0.5), _classes),
    "mse": (lambda: nn.MSELoss(), _pairs),
    "l1": (lambda: nn.L1Loss(), _pairs),
    "smooth_l1": (lambda: nn.SmoothL1Loss(), _pairs),
    "huber": (lambda: nn.HuberLoss(delta=0.5), _pairs),
    "bce": (lambda: nn.BCELoss(), _probabilities),
    "bce_with_logits": (lambda: nn.BCEWithLogitsLoss(pos_weight=flow.rand(5) + 0.5), _pairs),
    # NOTE: not "batchmean": it divides by the batch size as a Python number (refused with
    # the batch dynamic, as test_onnx.py's values fixed in Python are)
    "kl_div": (lambda: nn.KLDivLoss(reduction="sum", log_target=True), _pairs),
}


@pytest.mark.parametrize("name", list(LOSSES))
def test_loss(tmp_path, name):
    make, inputs = LOSSES[name]
    _check(tmp_path, make, inputs, 2, 15, {0: [0], 1: [0]})


# -- PyTorch's word_language_model under mock_torch ----------------------------------------
WORD_LM = Path(__file__).resolve().parents[1] / "mock_torch_examples" / "word_language_model"


@pytest.mark.parametrize(
    "kind", ["LSTM", pytest.param("GRU", marks=pytest.mark.slow)], ids=["lstm", "gru"]
)
def test_word_language_model_exports_itself(tmp_path, kind):
    exported, saved = tmp_path / "model.onnx", tmp_path / "model.pt"
    result = subprocess.run(
        [sys.executable, "-m", "tideflow.mock_torch", str(WORD_LM / "main.py"), "--model", kind,
         "--epochs", "1", "--save", str(saved), "--onnx-export", str(exported)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "exported in ONNX format" in result.stdout
    onnx.checker.check_model(onnx.load(str(exported)), full_check=True)
    with mock_torch.enabled():
        sys.path.insert(0, str(WORD_LM))
        try:
            import model as word_lm  # noqa: F401  (the pickled model's class)
            import torch

            model = torch.load(saved, weights_only=False)
        finally:
            sys.path.remove(str(WORD_LM))
            sys.modules.pop("model", None)
    model.eval()
    tokens = flow.randint(0, model.ntoken, (20, 1))
    hidden = model.init_hidden(1)
    states = hidden if isinstance(hidden, tuple) else (hidden,)
    feeds = {
        "input_0": tokens.numpy(),
        **{f"input_{1 + i}": h.numpy() for i, h in enumerate(states)},
    }
    got = run_onnxruntime(exported, feeds)
    with flow.no_grad():
        log_probs, new_hidden = model(tokens, hidden)
    want = [log_probs, *(new_hidden if isinstance(new_hidden, tuple) else (new_hidden,))]
    bound = 2 * 20 * 2 * 32 * U32  # 20 steps of 2 layers, reductions of 32
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w.numpy(), rtol=0, atol=bound * max(1, np.abs(g).max()))


def test_word_language_model_transformer_exports_under_mock_torch(tmp_path):
    """The example's Transformer variant, exported as its export_onnx would (main.py asks the
    model for init_hidden, which its TransformerModel lacks, under PyTorch too)."""
    path = tmp_path / "transformer.onnx"
    with mock_torch.enabled():
        sys.path.insert(0, str(WORD_LM))
        try:
            import model as word_lm
            import torch

            flow.manual_seed(0)
            model = word_lm.TransformerModel(40, 16, 2, 32, 2, 0.2)
            model.eval()
            tokens = torch.randint(0, 40, (20, 1))
            torch.onnx.export(model, (tokens,), str(path))
        finally:
            sys.path.remove(str(WORD_LM))
            sys.modules.pop("model", None)
    (got,) = run_onnxruntime(path, {"input_0": tokens.numpy()})
    with flow.no_grad():
        want = model(tokens).numpy()
    bound = 2 * 8 * 32 * U32 * max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(got, want, rtol=0, atol=bound)


# -- opsets: rules whose ONNX form changed --------------------------------------------------
class _OpsetSensitive(nn.Module):
    """LayerNormalization (17), Gelu (20), Mish (18), reductions' axes (13 and 18), Split's
    sizes (18)."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(12)

    def forward(self, x):
        a, b, c = self.norm(x).split(4, dim=-1)
        y = flow.cat([nn.functional.gelu(a, approximate="tanh"), nn.functional.mish(b), c], -1)
        return y.amax(-1) + y.mean(-1) + y.sum(-1) + y.var(-1)


@pytest.mark.parametrize("opset", [13, 16, 17, 18, 20])
def test_opsets(tmp_path, opset):
    flow.manual_seed(0)
    model = _OpsetSensitive()
    check_model(
        tmp_path,
        model,
        (flow.randn(2, 3, 12),),
        depth=4,
        n=12,
        dynamic={0: [0]},
        second=(flow.randn(5, 3, 12),),
        opset=opset,
    )
