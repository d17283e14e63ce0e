"""The loss modules over the margin and Gaussian losses (their functions are checked from the
op database): options reach the function, results equal torch.nn's modules, bad options
raise PyTorch's errors."""

import numpy as np
import pytest

import tideflow as flow

torch = pytest.importorskip("torch")

_rng = np.random.default_rng(0)
_X = _rng.standard_normal((4, 5)).astype(np.float32)
_CLASSES = np.array([0, 3, 1, 4])
_LABELS = np.array([[3, 0, -1, 1, 2], [1, -1, 0, 0, 0], [4, 2, 1, 0, 3], [-1, 2, 2, 2, 2]])
_SIGNS = np.array([[1.0, -1.0, 1.0, -1.0, 1.0]] * 4, np.float32)
_W = np.linspace(0.5, 2.0, 5).astype(np.float32)

# module name: (options, "w" standing for the class weights _W; inputs)
CASES = {
    "GaussianNLLLoss": (dict(full=True, eps=1e-3), (_X, _X[::-1].copy(), np.abs(_X))),
    "HingeEmbeddingLoss": (dict(margin=0.5, reduction="sum"), (np.abs(_X), _SIGNS)),
    "MultiMarginLoss": (dict(p=2, margin=0.7, weight="w"), (_X, _CLASSES)),
    "MultiLabelMarginLoss": (dict(reduction="none"), (_X, _LABELS)),
    "MultiLabelSoftMarginLoss": (dict(weight="w"), (_X, (_SIGNS > 0).astype(np.float32))),
    "TripletMarginWithDistanceLoss": (dict(margin=2.0, swap=True), (_X, _X[::-1].copy(), _X * 2)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_module_equals_pytorchs(name):
    options, inputs = CASES[name]

    def run(lib):
        kw = {k: (lib.tensor(_W) if v == "w" else v) for k, v in options.items()}
        return getattr(lib.nn, name)(**kw)(*(lib.tensor(a) for a in inputs))

    np.testing.assert_allclose(run(flow).numpy(), run(torch).numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda lib: lib.nn.MultiMarginLoss(p=3), "only p == 1 and p == 2 supported"),
        (lambda lib: lib.nn.TripletMarginWithDistanceLoss(margin=0), "greater than 0"),
    ],
)
def test_bad_options_raise_like_pytorch(make, match):
    for lib in (flow, torch):
        with pytest.raises(ValueError, match=match):
            make(lib)
