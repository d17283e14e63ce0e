"""nn layers against PyTorch: state-dict keys and shapes, printed form, forward values and
input/parameter gradients with PyTorch's weights loaded; default initializations;
train/eval behaviour; user-facing errors."""

from __future__ import annotations

import doctest
import importlib
import io
import math
from dataclasses import dataclass, field

import numpy as np
import pytest

import tideflow as flow
from tideflow import nn
from tideflow.framework.errors import ShapeError


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


# -- the case table -----------------------------------------------------------------------------
def _floats(*shape, low=-2.0, high=2.0):
    return lambda rng: rng.uniform(low, high, shape)


def _ints(high, *shape):
    return lambda rng: rng.integers(0, high, shape)


def _consts(values, dtype=np.int64):
    return lambda rng: np.asarray(values, dtype=dtype)


def _signs(*shape):
    """+1 / -1 targets: floats that PyTorch does not differentiate."""

    def draw(rng):
        return rng.choice([-1.0, 1.0], shape)

    draw.differentiable = False
    return draw


@dataclass
class Case:
    """`nn.<name>(*args, **kwargs)` applied to inputs drawn by `inputs` (float arrays are
    differentiable float64 inputs, integer arrays index or class tensors)."""

    name: str
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    inputs: tuple = ()
    id: str = ""
    train: bool = True

    def __str__(self) -> str:
        return self.id or self.name


# fmt: off
CASES = [
    Case("Identity", (3,), {"unused": 1}, (_floats(2, 3),)),
    Case("Linear", (5, 3), {}, (_floats(4, 5),)),
    Case("Linear", (5, 3), {"bias": False}, (_floats(2, 4, 5),), "Linear-nobias-3d"),
    Case("Bilinear", (3, 4, 2), {}, (_floats(5, 3), _floats(5, 4))),
    Case("Conv1d", (4, 6, 3), {"stride": 2, "padding": 1}, (_floats(2, 4, 9),)),
    Case("Conv1d", (4, 6, 3), {"padding": "same", "padding_mode": "circular"},
         (_floats(4, 7),), "Conv1d-same-circular-unbatched"),
    Case("Conv2d", (4, 6, (3, 2)), {"padding": "same", "dilation": 2, "padding_mode": "reflect"},
         (_floats(2, 4, 7, 6),), "Conv2d-same-reflect"),
    Case("Conv2d", (4, 6, 3), {"groups": 2, "padding": 1, "padding_mode": "replicate"},
         (_floats(2, 4, 5, 5),), "Conv2d-groups-replicate"),
    Case("Conv2d", (3, 2, 3), {"padding": "valid", "bias": False, "stride": (2, 1)},
         (_floats(1, 3, 7, 6),), "Conv2d-valid-nobias"),
    Case("Conv3d", (2, 3, 2), {"padding": (1, 0, 1)}, (_floats(1, 2, 3, 4, 3),)),
    Case("ConvTranspose1d", (4, 6, 3), {"stride": 2, "output_padding": 1}, (_floats(2, 4, 5),)),
    Case("ConvTranspose2d", (4, 6, 3), {"stride": 2, "padding": 1, "groups": 2, "dilation": 2},
         (_floats(2, 4, 4, 3),)),
    Case("ConvTranspose3d", (2, 3, 2), {"stride": 2}, (_floats(1, 2, 2, 3, 2),)),
    Case("MaxPool1d", (3,), {"stride": 2, "padding": 1}, (_floats(2, 3, 9),)),
    Case("MaxPool2d", ((3, 2),), {"stride": (2, 1), "dilation": (1, 2), "ceil_mode": True,
         "return_indices": True}, (_floats(2, 3, 8, 7),)),
    Case("MaxPool3d", (2,), {}, (_floats(1, 2, 4, 4, 5),)),
    Case("AvgPool1d", (3,), {"stride": 2, "padding": 1, "count_include_pad": False},
         (_floats(2, 3, 9),)),
    Case("AvgPool2d", (3,), {"stride": 2, "padding": 1, "ceil_mode": True}, (_floats(2, 3, 8, 7),)),
    Case("AvgPool2d", (2,), {"divisor_override": 3}, (_floats(3, 6, 6),), "AvgPool2d-divisor"),
    Case("AvgPool3d", (2,), {"stride": 1}, (_floats(1, 2, 3, 4, 3),)),
    Case("AdaptiveAvgPool1d", (4,), {}, (_floats(2, 3, 10),)),
    Case("AdaptiveAvgPool2d", ((3, None),), {}, (_floats(2, 3, 7, 5),)),
    Case("AdaptiveAvgPool3d", (2,), {}, (_floats(1, 2, 5, 4, 3),)),
    Case("AdaptiveMaxPool1d", (3,), {"return_indices": True}, (_floats(2, 3, 8),)),
    Case("AdaptiveMaxPool2d", ((2, 3),), {}, (_floats(2, 3, 7, 5),)),
    Case("AdaptiveMaxPool3d", (2,), {}, (_floats(1, 2, 5, 4, 3),)),
    Case("LPPool1d", (2, 3), {"stride": 2}, (_floats(2, 3, 9, low=0.1),)),
    Case("LPPool2d", (1.5, (3, 2)), {"ceil_mode": True}, (_floats(2, 3, 8, 7, low=0.1),)),
    Case("LPPool3d", (3, 2), {}, (_floats(1, 2, 4, 4, 5, low=0.1),)),
    Case("MaxUnpool1d", (2,), {}, (_floats(1, 2, 3), _consts([[[0, 3, 5], [1, 2, 4]]]))),
    Case("MaxUnpool2d", (2,), {"padding": 1}, (_floats(1, 1, 2, 2), _consts([[[[0, 1], [2, 3]]]]))),
    Case("MaxUnpool3d", (2,), {}, (_floats(1, 1, 1, 1, 1), _consts([[[[[6]]]]]))),
    Case("AlphaDropout", (0.2,), {}, (_floats(3, 4),), "AlphaDropout-eval", train=False),
    Case("FeatureAlphaDropout", (0.2,), {}, (_floats(2, 3, 4),), "FeatureAlphaDropout-eval",
         train=False),
    Case("BatchNorm1d", (3,), {}, (_floats(4, 3),)),
    Case("BatchNorm1d", (3,), {"momentum": None, "affine": False}, (_floats(4, 3, 5),),
         "BatchNorm1d-cumulative"),
    Case("BatchNorm2d", (3,), {"eps": 1e-3, "momentum": 0.3}, (_floats(2, 3, 4, 4),)),
    Case("BatchNorm2d", (3,), {}, (_floats(2, 3, 4, 4),), "BatchNorm2d-eval", train=False),
    Case("BatchNorm2d", (3,), {"track_running_stats": False, "bias": False},
         (_floats(2, 3, 4, 4),), "BatchNorm2d-untracked-eval", train=False),
    Case("BatchNorm3d", (2,), {}, (_floats(2, 2, 3, 3, 2),)),
    Case("InstanceNorm1d", (3,), {}, (_floats(2, 3, 6),)),
    Case("InstanceNorm1d", (3,), {"affine": True, "track_running_stats": True},
         (_floats(3, 6),), "InstanceNorm1d-unbatched-tracked"),
    Case("InstanceNorm2d", (3,), {"affine": True}, (_floats(2, 3, 4, 5),)),
    Case("InstanceNorm2d", (3,), {"track_running_stats": True}, (_floats(2, 3, 4, 5),),
         "InstanceNorm2d-tracked-eval", train=False),
    Case("InstanceNorm3d", (2,), {}, (_floats(2, 2, 3, 3, 2),)),
    Case("LayerNorm", (5,), {}, (_floats(2, 3, 5),)),
    Case("LayerNorm", ([3, 5],), {"eps": 1e-3, "bias": False}, (_floats(2, 3, 5),),
         "LayerNorm-2d-nobias"),
    Case("LayerNorm", (5,), {"elementwise_affine": False}, (_floats(4, 5),), "LayerNorm-plain"),
    Case("GroupNorm", (2, 4), {}, (_floats(3, 4, 5),)),
    Case("GroupNorm", (3, 6), {"affine": False, "eps": 1e-3}, (_floats(2, 6, 2, 2),),
         "GroupNorm-plain"),
    Case("RMSNorm", (5,), {}, (_floats(2, 3, 5),)),
    Case("RMSNorm", ([3, 5],), {"eps": 1e-4}, (_floats(2, 3, 5),), "RMSNorm-2d"),
    Case("Embedding", (10, 4), {"padding_idx": 1}, (_ints(10, 3, 5),)),
    Case("Embedding", (10, 4), {"scale_grad_by_freq": True}, (_consts([[1, 2, 1], [1, 9, 0]]),),
         "Embedding-freq"),
    Case("EmbeddingBag", (10, 4), {"mode": "sum"}, (_ints(10, 8), _consts([0, 3, 3, 5])),
         "EmbeddingBag-sum-offsets"),
    Case("EmbeddingBag", (10, 4), {"padding_idx": 2}, (_consts([[2, 3, 4], [5, 2, 2]]),),
         "EmbeddingBag-mean-2d-padding"),
    Case("EmbeddingBag", (10, 4), {"mode": "max", "include_last_offset": True},
         (_ints(10, 8), _consts([0, 3, 3, 8])), "EmbeddingBag-max-last-offset"),
    Case("EmbeddingBag", (10, 4), {"max_norm": 1.0, "norm_type": 3.0, "mode": "sum"},
         (_consts([[2, 3, 4], [5, 2, 2]]),), "EmbeddingBag-max-norm"),
    Case("ReLU", (), {}, (_floats(3, 4),)),
    Case("ReLU6", (), {}, (_floats(3, 4, low=-8, high=8),)),
    Case("LeakyReLU", (0.2,), {}, (_floats(3, 4),)),
    Case("ELU", (0.7,), {}, (_floats(3, 4),)),
    Case("SELU", (), {}, (_floats(3, 4),)),
    Case("CELU", (1.3,), {}, (_floats(3, 4),)),
    Case("GELU", (), {}, (_floats(3, 4),)),
    Case("GELU", ("tanh",), {}, (_floats(3, 4),), "GELU-tanh"),
    Case("SiLU", (), {}, (_floats(3, 4),)),
    Case("Mish", (), {}, (_floats(3, 4),)),
    Case("Softplus", (2.0, 1.0), {}, (_floats(3, 4),)),
    Case("Softsign", (), {}, (_floats(3, 4),)),
    Case("Hardtanh", (-0.5, 1.5), {}, (_floats(3, 4),)),
    Case("Hardsigmoid", (), {}, (_floats(3, 4, low=-5, high=5),)),
    Case("Hardswish", (), {}, (_floats(3, 4, low=-5, high=5),)),
    Case("Sigmoid", (), {}, (_floats(3, 4),)),
    Case("Tanh", (), {}, (_floats(3, 4),)),
    Case("LogSigmoid", (), {}, (_floats(3, 4),)),
    Case("Softmax", (1,), {}, (_floats(3, 4),)),
    Case("LogSoftmax", (-1,), {}, (_floats(3, 4),)),
    Case("Softmin", (0,), {}, (_floats(3, 4),)),
    Case("Softmax2d", (), {}, (_floats(2, 3, 2, 2),)),
    Case("PReLU", (), {}, (_floats(3, 4),)),
    Case("PReLU", (4,), {"init": 0.1}, (_floats(2, 4, 3),), "PReLU-channels"),
    Case("Threshold", (0.3, -2.0), {}, (_floats(3, 4),)),
    Case("Tanhshrink", (), {}, (_floats(3, 4),)),
    Case("Softshrink", (0.3,), {}, (_floats(3, 4),)),
    Case("Hardshrink", (0.3,), {}, (_floats(3, 4),)),
    Case("Flatten", (), {}, (_floats(2, 3, 4),)),
    Case("Flatten", (0, 1), {}, (_floats(2, 3, 4),), "Flatten-leading"),
    Case("Unflatten", (1, (2, -1)), {}, (_floats(3, 6),)),
    Case("ZeroPad1d", ((1, 2),), {}, (_floats(2, 3),)),
    Case("ZeroPad2d", ((1, 0, 2, 1),), {}, (_floats(1, 2, 3, 3),)),
    Case("ZeroPad3d", (1,), {}, (_floats(1, 2, 2, 2),)),
    Case("ConstantPad1d", (2, 3.5), {}, (_floats(2, 3),)),
    Case("ConstantPad2d", ((1, 0, 2, 1), -1.0), {}, (_floats(1, 3, 3),)),
    Case("ConstantPad3d", (1, 0.5), {}, (_floats(1, 2, 2, 2),)),
    Case("ReflectionPad1d", (2,), {}, (_floats(2, 3, 4),)),
    Case("ReflectionPad2d", ((1, 2, 2, 0),), {}, (_floats(1, 2, 4, 4),)),
    Case("ReflectionPad3d", (1,), {}, (_floats(1, 2, 3, 3, 3),)),
    Case("ReplicationPad1d", ((3, 1),), {}, (_floats(2, 3, 4),)),
    Case("ReplicationPad2d", (2,), {}, (_floats(1, 2, 3, 3),)),
    Case("ReplicationPad3d", (1,), {}, (_floats(1, 2, 2, 3, 2),)),
    Case("CircularPad1d", (2,), {}, (_floats(2, 3, 4),)),
    Case("CircularPad2d", ((1, 2, 2, 0),), {}, (_floats(1, 2, 4, 4),)),
    Case("CircularPad3d", (1,), {}, (_floats(1, 2, 3, 3, 3),)),
    Case("PixelShuffle", (2,), {}, (_floats(2, 8, 3, 2),)),
    Case("PixelUnshuffle", (2,), {}, (_floats(3, 2, 4, 6),)),
    Case("Upsample", (), {"scale_factor": 2}, (_floats(1, 2, 3, 3),)),
    Case("Upsample", ((5, 4),), {"mode": "bilinear", "align_corners": False},
         (_floats(1, 2, 3, 3),), "Upsample-bilinear"),
    Case("Upsample", (), {"scale_factor": 1.5, "mode": "linear"}, (_floats(2, 3, 4),),
         "Upsample-linear"),
    Case("UpsamplingNearest2d", (), {"size": (4, 5)}, (_floats(1, 2, 2, 3),)),
    Case("UpsamplingBilinear2d", (), {"scale_factor": 2}, (_floats(1, 2, 2, 3),)),
    Case("CosineSimilarity", (), {}, (_floats(4, 5), _floats(4, 5))),
    Case("CosineSimilarity", (0, 1e-6), {}, (_floats(4, 5), _floats(1, 5)), "CosineSimilarity-0"),
    Case("PairwiseDistance", (), {}, (_floats(4, 5), _floats(4, 5))),
    Case("PairwiseDistance", (1.0,), {"keepdim": True}, (_floats(4, 5), _floats(4, 5)),
         "PairwiseDistance-l1"),
    Case("L1Loss", (), {}, (_floats(3, 4), _floats(3, 4))),
    Case("MSELoss", (), {"reduction": "sum"}, (_floats(3, 4), _floats(3, 4))),
    Case("SmoothL1Loss", (), {"beta": 0.5, "reduction": "none"}, (_floats(3, 4), _floats(3, 4))),
    Case("HuberLoss", (), {"delta": 0.7}, (_floats(3, 4), _floats(3, 4))),
    Case("NLLLoss", (), {"ignore_index": 1}, (_floats(5, 4, low=-3, high=0), _ints(4, 5))),
    Case("CrossEntropyLoss", (), {}, (_floats(5, 4), _ints(4, 5))),
    Case("CrossEntropyLoss", (), {"label_smoothing": 0.2, "reduction": "sum"},
         (_floats(2, 4, 3), _ints(4, 2, 3)), "CrossEntropyLoss-smoothing-spatial"),
    Case("CrossEntropyLoss", (), {}, (_floats(5, 4), _floats(5, 4, low=0, high=1)),
         "CrossEntropyLoss-probabilities"),
    Case("BCELoss", (), {}, (_floats(3, 4, low=0.05, high=0.95), _floats(3, 4, low=0, high=1))),
    Case("BCEWithLogitsLoss", (), {"reduction": "none"}, (_floats(3, 4), _floats(3, 4, low=0))),
    Case("KLDivLoss", (), {"reduction": "batchmean"},
         (_floats(3, 4, low=-3, high=0), _floats(3, 4, low=0.1, high=1))),
    Case("KLDivLoss", (), {"reduction": "sum", "log_target": True},
         (_floats(3, 4, low=-3, high=0), _floats(3, 4, low=-3, high=0)), "KLDivLoss-log"),
    Case("PoissonNLLLoss", (), {"full": True}, (_floats(3, 4), _floats(3, 4, low=0, high=4))),
    Case("SoftMarginLoss", (), {}, (_floats(3, 4), _signs(3, 4))),
    Case("MarginRankingLoss", (0.3,), {}, (_floats(6), _floats(6), _signs(6))),
    Case("CosineEmbeddingLoss", (0.2,), {}, (_floats(5, 3), _floats(5, 3), _signs(5))),
    Case("CTCLoss", (1,), {"zero_infinity": True},
         (_floats(5, 2, 3), _consts([[0, 2], [2, 2]]), _consts([5, 2]), _consts([2, 2]))),
    Case("TripletMarginLoss", (), {"margin": 0.5, "p": 1.0, "swap": True},
         (_floats(4, 3), _floats(4, 3), _floats(4, 3))),
]

# Layers whose buffers are loss hyperparameters: constructed from tensors.
TENSOR_KWARG_CASES = [
    Case("CrossEntropyLoss", (), {"weight": [0.2, 1.0, 2.0, 0.5]}, (_floats(5, 4), _ints(4, 5)),
         "CrossEntropyLoss-weight"),
    Case("NLLLoss", (), {"weight": [0.2, 1.0, 2.0, 0.5], "reduction": "none"},
         (_floats(5, 4), _ints(4, 5)), "NLLLoss-weight"),
    Case("BCELoss", (), {"weight": [[1.0], [2.0], [0.5]]},
         (_floats(3, 4, low=0.05, high=0.95), _floats(3, 4, low=0, high=1)), "BCELoss-weight"),
    Case("BCEWithLogitsLoss", (), {"pos_weight": [1.0, 3.0, 0.5, 2.0], "weight": [2.0]},
         (_floats(3, 4), _floats(3, 4, low=0)), "BCEWithLogitsLoss-pos-weight"),
]
# fmt: on


def _case_id(case: Case) -> str:
    return str(case)


def _build(torch, case: Case):
    """(tideflow layer, torch layer), both in float64 and the case's mode."""

    def convert(value, lib):
        return lib.tensor(value, dtype=lib.float64) if isinstance(value, list) else value

    t_layer = getattr(torch.nn, case.name)(
        *case.args, **{k: convert(v, torch) for k, v in case.kwargs.items()}
    )
    f_layer = getattr(nn, case.name)(
        *case.args, **{k: convert(v, flow) for k, v in case.kwargs.items()}
    )
    t_layer.double().train(case.train)
    f_layer.double().train(case.train)
    return f_layer, t_layer


def _load_torch_state(f_layer, t_layer) -> None:
    state = {k: flow.tensor(v.detach().numpy()) for k, v in t_layer.state_dict().items()}
    f_layer.load_state_dict(state)


def _outputs(out) -> tuple:
    return out if isinstance(out, tuple) else (out,)


def _assert_close(actual, expected, what: str) -> None:
    np.testing.assert_allclose(
        np.asarray(actual.detach().numpy()), expected.detach().numpy(), rtol=1e-7, atol=1e-9,
        err_msg=what,
    )  # fmt: skip


def _run_against_torch(torch, case: Case) -> None:
    rng = np.random.default_rng(0)
    arrays = [draw(rng) for draw in case.inputs]
    differentiable = [
        a.dtype.kind == "f" and getattr(draw, "differentiable", True)
        for a, draw in zip(arrays, case.inputs, strict=True)
    ]
    f_layer, t_layer = _build(torch, case)
    assert {k: tuple(v.shape) for k, v in f_layer.state_dict().items()} == {
        k: tuple(v.shape) for k, v in t_layer.state_dict().items()
    }
    _load_torch_state(f_layer, t_layer)

    def tensors(lib):
        return [lib.tensor(a, requires_grad=d) for a, d in zip(arrays, differentiable, strict=True)]

    f_in, t_in = tensors(flow), tensors(torch)
    f_out, t_out = _outputs(f_layer(*f_in)), _outputs(t_layer(*t_in))
    for i, (a, b) in enumerate(zip(f_out, t_out, strict=True)):
        _assert_close(a, b, f"{case}: output {i}")
    # Running statistics and counters after the step (BatchNorm, InstanceNorm).
    for key, value in t_layer.state_dict().items():
        _assert_close(f_layer.state_dict()[key], value, f"{case}: state {key} after forward")
    if not t_out[0].requires_grad:
        return
    cotangent = rng.standard_normal(tuple(t_out[0].shape))
    t_out[0].backward(torch.tensor(cotangent))
    f_out[0].backward(flow.tensor(cotangent))
    for i, (a, b) in enumerate(zip(f_in, t_in, strict=True)):
        if b.grad is not None:
            _assert_close(a.grad, b.grad, f"{case}: gradient of input {i}")
    t_params = dict(t_layer.named_parameters())
    for name, p in f_layer.named_parameters():
        _assert_close(p.grad, t_params[name].grad, f"{case}: gradient of {name}")


@pytest.mark.torch
@pytest.mark.parametrize("case", CASES + TENSOR_KWARG_CASES, ids=_case_id)
def test_layer_matches_torch(torch, case):
    _run_against_torch(torch, case)


@pytest.mark.torch
@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_repr_matches_torch(torch, case):
    f_layer, t_layer = _build(torch, case)
    assert repr(f_layer) == repr(t_layer)


@pytest.mark.torch
def test_every_exported_layer_is_checked_against_torch():
    covered = {c.name for c in CASES} | {"Dropout", "Dropout1d", "Dropout2d", "Dropout3d"}
    # checked against torch in their own files: test_lazy_modules.py, test_extra_layers.py,
    # test_margin_loss_modules.py, test_sync_batchnorm.py
    covered |= {n for n in nn.modules.__all__ if n.startswith("Lazy")}
    covered |= {"GLU", "RReLU", "LocalResponseNorm", "ChannelShuffle", "Fold", "Unfold"}
    covered |= {"GaussianNLLLoss", "HingeEmbeddingLoss", "MultiMarginLoss", "MultiLabelMarginLoss",
                "MultiLabelSoftMarginLoss", "TripletMarginWithDistanceLoss"}  # fmt: skip
    covered |= {"SyncBatchNorm", "NLLLoss2d"}
    containers = {"Module", "Sequential", "ModuleList", "ModuleDict", "ParameterList",
                  "ParameterDict"}  # fmt: skip
    # Other people's layer families (recurrent, attention) test themselves.
    others = {n for n in nn.__all__ if "RNN" in n or "LSTM" in n or "GRU" in n}
    others |= {n for n in nn.__all__ if "Attention" in n or "Transformer" in n}
    layers = {n for n in nn.modules.__all__ if isinstance(getattr(nn, n), type)}
    assert layers - containers - others - covered == set()


# -- default initializations --------------------------------------------------------------------
def _stats(t) -> tuple:
    a = np.asarray(t.detach().numpy(), dtype=np.float64)
    return a.min(), a.max(), a.mean(), a.std()


@pytest.mark.torch
@pytest.mark.parametrize(
    ("name", "args", "param", "bound"),
    [
        ("Linear", (400, 300), "weight", 1 / math.sqrt(400)),
        ("Linear", (400, 300), "bias", 1 / math.sqrt(400)),
        ("Conv2d", (16, 64, 3), "weight", 1 / math.sqrt(16 * 9)),
        ("Conv2d", (16, 64, 3), "bias", 1 / math.sqrt(16 * 9)),
        ("ConvTranspose2d", (64, 16, 3), "weight", 1 / math.sqrt(16 * 9)),
        ("Conv1d", (8, 512, 5), "bias", 1 / math.sqrt(8 * 5)),
        ("Bilinear", (20, 30, 200), "weight", 1 / math.sqrt(20)),
        ("Bilinear", (20, 30, 200), "bias", 1 / math.sqrt(20)),
    ],
)
def test_uniform_default_initializations_match_torch(torch, name, args, param, bound):
    flow.manual_seed(0)
    torch.manual_seed(0)
    ours = _stats(getattr(getattr(nn, name)(*args), param))
    theirs = _stats(getattr(getattr(torch.nn, name)(*args), param))
    n = getattr(getattr(nn, name)(*args), param).numel()
    # U(-bound, bound): both fill the interval and have the same spread.
    assert -bound <= ours[0] < -bound * (1 - 20 / n) and bound * (1 - 20 / n) < ours[1] <= bound
    assert abs(ours[2] - theirs[2]) < 4 * bound / math.sqrt(3 * n)
    assert ours[3] == pytest.approx(theirs[3], rel=0.1)
    assert ours[3] == pytest.approx(bound / math.sqrt(3), rel=0.1)


@pytest.mark.torch
def test_embedding_and_prelu_default_initializations_match_torch(torch):
    ours, theirs = (
        nn.Embedding(1000, 64, padding_idx=3),
        torch.nn.Embedding(1000, 64, padding_idx=3),
    )
    assert _stats(ours.weight)[2:] == pytest.approx(_stats(theirs.weight)[2:], abs=0.02)
    assert _stats(ours.weight)[3] == pytest.approx(1.0, rel=0.02)
    assert not ours.weight[3].detach().numpy().any()
    np.testing.assert_array_equal(nn.PReLU(3).weight.detach().numpy(), [0.25, 0.25, 0.25])


@pytest.mark.torch
@pytest.mark.parametrize("name", ["BatchNorm1d", "InstanceNorm2d", "LayerNorm", "GroupNorm",
                                  "RMSNorm"])  # fmt: skip
def test_normalization_initial_state_equals_torch(torch, name):
    args = (2, 4) if name == "GroupNorm" else (4,)
    kwargs = {"affine": True, "track_running_stats": True} if name == "InstanceNorm2d" else {}
    ours = getattr(nn, name)(*args, **kwargs).state_dict()
    theirs = getattr(torch.nn, name)(*args, **kwargs).state_dict()
    assert list(ours) == list(theirs)
    for key, value in theirs.items():
        assert ours[key].dtype.name == str(value.dtype).removeprefix("torch."), key
        np.testing.assert_array_equal(ours[key].numpy(), value.numpy(), err_msg=key)


def test_factory_kwargs_set_the_parameter_dtype():
    layer = nn.Conv2d(2, 3, 3, dtype=flow.float64, device="cpu")
    assert layer.weight.dtype == flow.float64 and layer.bias.dtype == flow.float64
    bn = nn.BatchNorm2d(3, dtype=flow.float64)
    assert bn.running_var.dtype == flow.float64 and bn.num_batches_tracked.dtype == flow.int64


def test_reset_parameters_redraws_from_the_generator():
    layer = nn.Linear(4, 3)
    flow.manual_seed(7)
    layer.reset_parameters()
    first = layer.weight.detach().numpy().copy()
    flow.manual_seed(7)
    layer.reset_parameters()
    np.testing.assert_array_equal(layer.weight.detach().numpy(), first)


# -- train / eval -------------------------------------------------------------------------------
def test_dropout_train_and_eval():
    x = flow.ones(2000)
    layer = nn.Dropout(0.25)
    y = layer(x).numpy()
    assert set(np.unique(y)) <= {0.0, np.float32(1 / 0.75)}
    assert (y == 0).mean() == pytest.approx(0.25, abs=0.04)
    assert layer.eval()(x) is x
    assert repr(nn.Dropout(0.3, inplace=True)) == "Dropout(p=0.3, inplace=True)"


def test_dropout2d_drops_whole_channels():
    y = nn.Dropout2d(0.5)(flow.ones(8, 16, 3, 3)).numpy()
    per_channel = y.reshape(8, 16, 9)
    assert np.all((per_channel == 0).all(-1) | (per_channel == 2.0).all(-1))
    assert nn.Dropout1d(0.5).eval()(flow.ones(2, 3, 4)).numpy().all()


def test_dropout_probability_is_checked():
    with pytest.raises(ValueError, match=r"probability has to be between 0 and 1, but got 1\.5"):
        nn.Dropout(1.5)


@pytest.mark.torch
def test_batchnorm_running_statistics_over_several_steps(torch):
    rng = np.random.default_rng(1)
    for momentum in (0.1, None):
        ours, theirs = (
            nn.BatchNorm1d(3, momentum=momentum),
            torch.nn.BatchNorm1d(3, momentum=momentum),
        )
        for _ in range(3):
            x = rng.standard_normal((6, 3)).astype(np.float32)
            ours(flow.tensor(x))
            theirs(torch.tensor(x))
        for key, value in theirs.state_dict().items():
            np.testing.assert_allclose(ours.state_dict()[key].numpy(), value.numpy(), rtol=1e-6)
        assert int(ours.num_batches_tracked) == 3
        x = rng.standard_normal((2, 3)).astype(np.float32)
        out, expected = ours.eval()(flow.tensor(x)), theirs.eval()(torch.tensor(x))
        np.testing.assert_allclose(
            out.detach().numpy(), expected.detach().numpy(), rtol=1e-5, atol=1e-6
        )


def test_batchnorm_in_eval_leaves_its_statistics_alone():
    bn = nn.BatchNorm2d(2).eval()
    bn(flow.randn(3, 2, 4, 4))
    assert int(bn.num_batches_tracked) == 0
    np.testing.assert_array_equal(bn.running_mean.numpy(), [0.0, 0.0])


def test_untracked_batchnorm_has_no_statistics_buffers():
    bn = nn.BatchNorm1d(3, track_running_stats=False)
    assert bn.running_mean is None and list(bn.state_dict()) == ["weight", "bias"]
    y = bn.eval()(flow.randn(5, 3) * 4 + 2)  # batch statistics even in evaluation
    np.testing.assert_allclose(y.detach().numpy().mean(0), 0.0, atol=1e-5)


# -- Embedding details --------------------------------------------------------------------------
def test_embedding_from_pretrained_shares_and_freezes():
    table = flow.tensor([[1.0, 2.3, 3.0], [4.0, 5.1, 6.3]])
    emb = nn.Embedding.from_pretrained(table)
    assert not emb.weight.requires_grad and emb.num_embeddings == 2 and emb.embedding_dim == 3
    np.testing.assert_allclose(emb(flow.tensor([1])).numpy(), [[4.0, 5.1, 6.3]])
    with flow.no_grad():
        table[0, 0] = 9.0
    assert float(emb.weight[0, 0]) == 9.0
    assert nn.Embedding.from_pretrained(table, freeze=False, padding_idx=0).weight.requires_grad
    with pytest.raises(ShapeError, match=r"expected to be 2-dimensional, got shape \[3\]"):
        nn.Embedding.from_pretrained(flow.ones(3))


def test_embedding_padding_row_gets_no_gradient():
    emb = nn.Embedding(5, 2, padding_idx=-1)
    assert emb.padding_idx == 4 and not emb.weight[4].detach().numpy().any()
    emb(flow.tensor([4, 4, 1])).sum().backward()
    np.testing.assert_array_equal(emb.weight.grad.numpy()[[1, 4]], [[1.0, 1.0], [0.0, 0.0]])


@pytest.mark.torch
def test_embedding_max_norm_renormalizes_looked_up_rows(torch):
    weight = np.random.default_rng(2).standard_normal((6, 3)) * 3
    ours = nn.Embedding(6, 3, max_norm=1.5, norm_type=1.0, _weight=flow.tensor(weight))
    theirs = torch.nn.Embedding(6, 3, max_norm=1.5, norm_type=1.0, _weight=torch.tensor(weight))
    idx = [[0, 2], [2, 5]]
    out, expected = ours(flow.tensor(idx)), theirs(torch.tensor(idx))
    np.testing.assert_allclose(out.detach().numpy(), expected.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(ours.weight.detach().numpy(), theirs.weight.detach().numpy())


@pytest.mark.torch
def test_embedding_bag_per_sample_weights_and_from_pretrained(torch):
    rng = np.random.default_rng(3)
    table = rng.standard_normal((7, 3))
    idx, offsets, psw = rng.integers(0, 7, 9), [0, 4, 4, 6], rng.random(9)
    ours = nn.EmbeddingBag.from_pretrained(flow.tensor(table), freeze=False, mode="sum")
    theirs = torch.nn.EmbeddingBag.from_pretrained(torch.tensor(table), freeze=False, mode="sum")
    f_psw, t_psw = flow.tensor(psw, requires_grad=True), torch.tensor(psw, requires_grad=True)
    out = ours(flow.tensor(idx), flow.tensor(offsets), per_sample_weights=f_psw)
    expected = theirs(torch.tensor(idx), torch.tensor(offsets), per_sample_weights=t_psw)
    np.testing.assert_allclose(out.detach().numpy(), expected.detach().numpy(), rtol=1e-12)
    out.sum().backward()
    expected.sum().backward()
    np.testing.assert_allclose(f_psw.grad.numpy(), t_psw.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(ours.weight.grad.numpy(), theirs.weight.grad.numpy(), rtol=1e-12)


def test_embedding_bag_errors():
    bag = nn.EmbeddingBag(5, 2)
    with pytest.raises(ValueError, match="offsets has to be a 1D Tensor but got None"):
        bag(flow.tensor([1, 2]))
    with pytest.raises(ValueError, match="if input is 2D, then offsets has to be None"):
        bag(flow.tensor([[1, 2]]), flow.tensor([0]))
    with pytest.raises(ValueError, match=r"offsets\[0\] has to be 0.*got 1"):
        bag(flow.tensor([1, 2]), flow.tensor([1]))
    with pytest.raises(ValueError, match=r"offsets has to be non-decreasing, got \[0, 2, 1\]"):
        bag(flow.tensor([1, 2, 3]), flow.tensor([0, 2, 1]))
    with pytest.raises(
        NotImplementedError, match="only supported for mode='sum' \\(got mode='mean'\\)"
    ):
        bag(flow.tensor([[1, 2]]), per_sample_weights=flow.ones(1, 2))
    with pytest.raises(ValueError, match="max mode does not support scaling the gradient"):
        nn.EmbeddingBag(5, 2, mode="max", scale_grad_by_freq=True)(flow.tensor([[1, 2]]))
    with pytest.raises(ValueError, match="mode has to be one of sum, mean or max"):
        nn.EmbeddingBag(5, 2, mode="min")(flow.tensor([[1, 2]]))
    with pytest.raises(ValueError, match="padding_idx must be within num_embeddings"):
        nn.EmbeddingBag(5, 2, padding_idx=5)


# -- ConvTranspose output_size ------------------------------------------------------------------
@pytest.mark.torch
def test_conv_transpose_output_size_matches_torch(torch):
    flow.manual_seed(0)
    ours = nn.ConvTranspose2d(3, 2, 3, stride=2, padding=1)
    theirs = torch.nn.ConvTranspose2d(3, 2, 3, stride=2, padding=1)
    _load_torch_state(ours, theirs)
    x = np.random.default_rng(4).standard_normal((1, 3, 4, 5)).astype(np.float32)
    for size in ([8, 10], [1, 2, 7, 9]):
        out = ours(flow.tensor(x), output_size=size)
        expected = theirs(torch.tensor(x), output_size=size)
        np.testing.assert_allclose(
            out.detach().numpy(), expected.detach().numpy(), rtol=1e-5, atol=1e-6
        )
    with pytest.raises(ValueError, match=r"requested an output size of \[9, 9\], but valid sizes "
                       r"range from \[7, 9\] to \[8, 10\]"):  # fmt: skip
        ours(flow.tensor(x), output_size=[9, 9])
    with pytest.raises(
        ValueError, match="ConvTranspose2D: for 4D input, output_size must have 2 or 4"
    ):
        ours(flow.tensor(x), output_size=[9])


# -- constructor and input errors ---------------------------------------------------------------
def test_conv_constructor_errors():
    with pytest.raises(ValueError, match="in_channels must be divisible by groups"):
        nn.Conv2d(3, 4, 3, groups=2)
    with pytest.raises(ValueError, match="out_channels must be divisible by groups"):
        nn.Conv2d(4, 3, 3, groups=2)
    with pytest.raises(ValueError, match="Invalid padding string 'full'"):
        nn.Conv1d(1, 1, 3, padding="full")
    with pytest.raises(ValueError, match="padding='same' is not supported for strided"):
        nn.Conv2d(1, 1, 3, stride=2, padding="same")
    with pytest.raises(ValueError, match=r"padding_mode must be one of .*got padding_mode='edge'"):
        nn.Conv2d(1, 1, 3, padding_mode="edge")
    with pytest.raises(
        ValueError, match='Only "zeros" padding mode is supported for ConvTranspose2d'
    ):
        nn.ConvTranspose2d(1, 1, 3, padding_mode="reflect")
    with pytest.raises(ValueError, match="groups must be a positive integer"):
        nn.Conv1d(1, 1, 3, groups=0)


def test_layer_input_errors_name_the_layer_or_op_and_shapes():
    with pytest.raises(ShapeError, match=r"linear: input has 5 features but weight expects 4"):
        nn.Linear(4, 3)(flow.ones(2, 5))
    with pytest.raises(ShapeError, match=r"conv2d: expected a 3-d \(unbatched\) or 4-d \(batched\) "
                       r"input, got input of shape \[3, 8\]"):  # fmt: skip
        nn.Conv2d(3, 4, 3)(flow.ones(3, 8))
    with pytest.raises(ShapeError, match=r"conv2d: expected input with 3 channels .* got input of "
                       r"shape \[2, 2, 8, 8\]"):  # fmt: skip
        nn.Conv2d(3, 4, 3)(flow.ones(2, 2, 8, 8))
    with pytest.raises(ShapeError, match=r"BatchNorm1d: expected 2D or 3D input, got input of "
                       r"shape \[2, 3, 4, 4\]"):  # fmt: skip
        nn.BatchNorm1d(3)(flow.ones(2, 3, 4, 4))
    with pytest.raises(ShapeError, match=r"BatchNorm1d: expected input with 3 channels \(dim 1\), "
                       r"got input of shape \[4, 5\]"):  # fmt: skip
        nn.BatchNorm1d(3)(flow.ones(4, 5))
    with pytest.raises(
        ShapeError, match=r"BatchNorm2d: expected 4D input, got input of shape \[2, 3\]"
    ):
        nn.BatchNorm2d(3)(flow.ones(2, 3))
    with pytest.raises(ShapeError, match=r"InstanceNorm1d: expected input's size at dim=1 to match "
                       r"num_features \(3\), got input of shape \[2, 4, 5\]"):  # fmt: skip
        nn.InstanceNorm1d(3, affine=True)(flow.ones(2, 4, 5))
    with pytest.warns(UserWarning, match="input's size at dim=1 does not match num_features"):
        nn.InstanceNorm1d(3)(flow.randn(2, 4, 5))
    with pytest.raises(
        ShapeError, match=r"layer_norm: normalized_shape=\[4\] expects input of shape"
    ):
        nn.LayerNorm(4)(flow.ones(2, 5))
    with pytest.raises(
        ValueError, match=r"Softmax2d: expected input to be 3D or 4D, got 2D instead"
    ):
        nn.Softmax2d()(flow.ones(2, 3))
    with pytest.raises(ShapeError, match=r"pixel_shuffle: the channel dim \(5\) of the input of "
                       r"shape \[1, 5, 2, 2\] must be divisible by upscale_factor"):  # fmt: skip
        nn.PixelShuffle(2)(flow.ones(1, 5, 2, 2))


def test_other_constructor_errors():
    with pytest.raises(
        ValueError, match=r"num_channels \(5\) must be divisible by num_groups \(2\)"
    ):
        nn.GroupNorm(2, 5)
    with pytest.raises(ValueError, match=r"max_val \(0\) must be greater than min_val \(1\)"):
        nn.Hardtanh(1, 0)
    with pytest.raises(ValueError, match="padding_idx must be within num_embeddings"):
        nn.Embedding(3, 2, padding_idx=-4)
    with pytest.raises(ShapeError, match=r"Shape of weight does not match .* expected \[3, 2\]"):
        nn.Embedding(3, 2, _weight=flow.ones(2, 2))
    with pytest.raises(ValueError, match="TripletMarginLoss: expected margin to be greater than 0"):
        nn.TripletMarginLoss(margin=0)
    with pytest.raises(TypeError, match="unflattened_size must be tuple of ints, but found element "
                       "of type float at pos 1"):  # fmt: skip
        nn.Unflatten(1, (2, 2.0))


def test_legacy_loss_arguments_warn_and_map_to_a_reduction():
    with pytest.warns(UserWarning, match="please use reduction='sum' instead"):
        loss = nn.MSELoss(size_average=False)
    assert loss.reduction == "sum"
    with pytest.warns(UserWarning, match="reduction='none'"):
        assert nn.CrossEntropyLoss(reduce=False).reduction == "none"


def test_hardtanh_deprecated_keywords_warn():
    with pytest.warns(FutureWarning, match="`min_value` is deprecated and renamed to `min_val`"):
        layer = nn.Hardtanh(min_value=-2.0)
    assert layer.min_val == -2.0


def test_inplace_activation_writes_its_input():
    x = flow.tensor([-1.0, 2.0])
    assert nn.ReLU(inplace=True)(x) is x
    np.testing.assert_array_equal(x.numpy(), [0.0, 2.0])
    assert repr(nn.LeakyReLU(0.2, inplace=True)) == "LeakyReLU(negative_slope=0.2, inplace=True)"


def test_softmax_without_dim_warns_like_torch():
    with pytest.warns(UserWarning, match="Implicit dimension choice for softmax"):
        nn.Softmax()(flow.ones(2, 3))


def test_layers_compose_in_sequential_and_train():
    flow.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Dropout(0.1), nn.Linear(16, 3),
    )  # fmt: skip
    x, target = flow.randn(8, 1, 4, 4), flow.randint(0, 3, (8,))
    loss_fn = nn.CrossEntropyLoss()
    opt = flow.optim.SGD(model.parameters(), lr=0.1)
    first = None
    for _ in range(20):
        opt.zero_grad()
        loss = loss_fn(model(x), target)
        loss.backward()
        opt.step()
        first = float(loss) if first is None else first
    assert float(loss) < first / 2


# -- documentation --------------------------------------------------------------------------------
_LAYER_MODULES = (
    "activation", "conv", "distance", "dropout", "flatten", "fold", "lazy", "linear", "loss",
    "normalization", "padding", "pixelshuffle", "pooling", "sparse", "upsampling",
)  # fmt: skip


@pytest.mark.parametrize("module", _LAYER_MODULES)
def test_docstring_examples_run(module):
    run_doctests(importlib.import_module(f"tideflow.nn.modules.{module}"))


def run_doctests(module) -> None:
    """Run the `>>>` examples of `module`'s docstrings; fail with the runner's report."""
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    report = io.StringIO()
    globs = {"flow": flow, "math": math, "F": flow.nn.functional}
    for test in finder.find(module, globs=globs):
        runner.run(test, out=report.write)
    assert runner.summarize(verbose=False).failed == 0, report.getvalue()
