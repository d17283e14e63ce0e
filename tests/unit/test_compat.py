"""PyTorch's top-level utilities (tideflow/_compat.py) and tensor printing with its options
(tideflow/framework/printing.py), against PyTorch."""

from __future__ import annotations

import math
import re
import sys
import types

import numpy as np
import pytest

import tideflow as flow
import tideflow._compat as compat
import tideflow.framework.printing as printing
from tideflow.framework.errors import DTypeError, ShapeError, TideflowError

from .test_nn_layers import run_doctests

pytestmark = pytest.mark.torch

DTYPE_NAMES = ("float16", "bfloat16", "float32", "float64", "uint8", "int8", "int16", "int32")
DTYPE_NAMES += ("int64", "bool")


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def _restore_global_settings(monkeypatch):
    """Switches and print options are process-wide: every test starts from the defaults."""
    for name in ("num_threads", "matmul_precision", "deterministic", "deterministic_warn_only"):
        monkeypatch.setattr(compat._SWITCHES, name, getattr(compat._Switches, name))
    flow.set_printoptions(profile="default")
    yield
    flow.set_printoptions(profile="default")
    if "torch" in sys.modules:
        sys.modules["torch"].set_printoptions(profile="default")


# -- type queries and constants --------------------------------------------------------------
def test_type_queries_match_pytorch(torch):
    for name in ("float32", "bfloat16", "int64", "bool"):
        ours = flow.zeros(2, 3, dtype=getattr(flow, name))
        theirs = torch.zeros(2, 3, dtype=getattr(torch, name))
        assert flow.is_floating_point(ours) == torch.is_floating_point(theirs)
        assert flow.numel(ours) == torch.numel(theirs) == 6
    for obj in (flow.zeros(1), flow.nn.Parameter(flow.zeros(1)), 1.0, [1.0], np.zeros(1), None):
        theirs = torch.zeros(1) if isinstance(obj, flow.Tensor) else obj
        assert flow.is_tensor(obj) == torch.is_tensor(theirs)


@pytest.mark.parametrize("fn", [flow.is_floating_point, flow.numel])
def test_type_queries_need_a_tensor(fn):
    with pytest.raises(TypeError, match=rf"{fn.__name__}\(\): argument 'input' must be a Tensor"):
        fn([1.0])


def test_constants_match_pytorch(torch):
    assert (flow.pi, flow.e, flow.inf) == (torch.pi, torch.e, torch.inf)
    assert math.isnan(flow.nan) and flow.newaxis is torch.newaxis is None
    assert flow.zeros(2, 3)[:, flow.newaxis].shape == (2, 1, 3)


# -- finfo and iinfo ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["float16", "bfloat16", "float32", "float64"])
def test_finfo_matches_pytorch(torch, name):
    ours, theirs = flow.finfo(getattr(flow, name)), torch.finfo(getattr(torch, name))
    for attr in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution", "dtype"):
        got, want = getattr(ours, attr), getattr(theirs, attr)
        assert got == want and type(got) is type(want), attr
    assert repr(ours) == repr(theirs)


@pytest.mark.parametrize("name", ["uint8", "int8", "int16", "int32", "int64"])
def test_iinfo_matches_pytorch(torch, name):
    ours, theirs = flow.iinfo(getattr(flow, name)), torch.iinfo(getattr(torch, name))
    for attr in ("bits", "max", "min", "dtype"):
        got, want = getattr(ours, attr), getattr(theirs, attr)
        assert got == want and type(got) is type(want), attr
    assert repr(ours) == repr(theirs)


def test_finfo_defaults_to_the_default_dtype_and_compares_by_value():
    assert flow.finfo() == flow.finfo(flow.float32) != flow.finfo(flow.float64)
    assert flow.iinfo(flow.int8) == flow.iinfo(flow.int8) != flow.iinfo(flow.uint8)
    previous = flow.get_default_dtype()
    flow.set_default_dtype(flow.float64)
    try:
        assert flow.finfo().dtype == "float64"
    finally:
        flow.set_default_dtype(previous)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: flow.finfo(flow.int64), r"finfo\(\): requires a floating point dtype, got "),
        (lambda: flow.finfo(flow.bool), "finfo\\(\\): requires a floating point dtype"),
        (lambda: flow.finfo("float32"), r"finfo\(\): expected a tideflow dtype, got str"),
        (lambda: flow.iinfo(flow.float32), r"iinfo\(\): requires an integer dtype, got "),
        (lambda: flow.iinfo(flow.bool), r"iinfo\(\): tideflow.bool is not supported"),
        (lambda: flow.iinfo(int), r"iinfo\(\): expected a tideflow dtype, got type"),
    ],
)
def test_info_errors(call, match):
    with pytest.raises(TypeError, match=match):
        call()


# -- runtime switches --------------------------------------------------------------------------
def test_num_threads_are_recorded_and_validated():
    assert flow.get_num_threads() >= 1
    flow.set_num_threads(3)
    assert flow.get_num_threads() == 3
    with pytest.raises(TideflowError, match=r"set_num_threads\(\): expects a positive integer"):
        flow.set_num_threads(0)
    with pytest.raises(TypeError, match=r"set_num_threads\(\): expected an int, got float"):
        flow.set_num_threads(2.5)
    assert flow.get_num_threads() == 3


def _fake_threadpoolctl(blas_threads: int):
    """A stand-in for the optional threadpoolctl package, recording the limits it is given."""
    module = types.ModuleType("threadpoolctl")
    module.limits = []
    module.threadpool_limits = lambda limits, user_api: module.limits.append((limits, user_api))
    module.threadpool_info = lambda: [
        {"user_api": "openmp", "num_threads": 64},
        {"user_api": "blas", "num_threads": blas_threads},
    ]
    return module


def test_num_threads_go_through_threadpoolctl_when_installed(monkeypatch):
    fake = _fake_threadpoolctl(blas_threads=5)
    monkeypatch.setitem(sys.modules, "threadpoolctl", fake)
    assert flow.get_num_threads() == 5  # read from the BLAS pool until set
    flow.set_num_threads(2)
    assert fake.limits == [(2, "blas")] and flow.get_num_threads() == 2


def test_num_threads_without_threadpoolctl_follow_the_environment(monkeypatch):
    monkeypatch.setitem(sys.modules, "threadpoolctl", None)  # makes the import fail
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    assert flow.get_num_threads() == 3


def test_matmul_precision_is_recorded_and_unknown_values_warn(torch):
    assert flow.get_float32_matmul_precision() == torch.get_float32_matmul_precision()
    flow.set_float32_matmul_precision("medium")
    with pytest.warns(UserWarning, match="'fast' is not one of 'highest', 'high' or 'medium'"):
        flow.set_float32_matmul_precision("fast")
    assert flow.get_float32_matmul_precision() == "medium"


def test_deterministic_algorithms_flags():
    assert not flow.are_deterministic_algorithms_enabled()
    flow.use_deterministic_algorithms(True, warn_only=True)
    assert flow.are_deterministic_algorithms_enabled()
    assert flow.is_deterministic_algorithms_warn_only_enabled()
    with pytest.raises(TypeError, match=r"use_deterministic_algorithms\(\): mode must be a bool"):
        flow.use_deterministic_algorithms("yes")


def test_compile_returns_the_model_or_a_decorator():
    net = flow.nn.Linear(2, 2)
    assert flow.compile(net) is net
    assert flow.compile(net, mode="reduce-overhead", fullgraph=True) is net
    decorate = flow.compile(backend="eager")
    fn = lambda x: x  # noqa: E731
    assert decorate(fn) is fn
    with pytest.raises(TypeError, match=r"compile\(\): expected a module or function, got int"):
        flow.compile(5)


# -- cdist -------------------------------------------------------------------------------------
def _cdist_inputs(rng, shape1, shape2):
    """Random rows, with coincident rows (distance 0) and rows whose coordinate differences
    tie for the largest (p = inf), where the gradients have special cases."""
    a, b = rng.standard_normal(shape1), rng.standard_normal(shape2)
    first = a.reshape(-1, a.shape[-1])[:2]  # rows of the first batch entry
    b[..., 0, :] = first[0]
    b[..., 1, :] = first[1] + np.linspace(1.0, -1.0, a.shape[-1])
    return a, b


@pytest.mark.parametrize("p", [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, math.inf])
@pytest.mark.parametrize(
    ("shape1", "shape2"), [((4, 3), (5, 3)), ((2, 4, 3), (5, 3)), ((2, 1, 4, 3), (3, 5, 3))]
)
def test_cdist_matches_pytorch(torch, p, shape1, shape2):
    a, b = _cdist_inputs(np.random.default_rng(0), shape1, shape2)
    _compare_cdist(torch, a, b, p=p)


@pytest.mark.parametrize(
    ("rows1", "rows2", "mode"),
    [
        (30, 4, "use_mm_for_euclid_dist_if_necessary"),  # more than 25 rows: matmul form
        (4, 5, "use_mm_for_euclid_dist"),
        (30, 40, "donot_use_mm_for_euclid_dist"),
    ],
)
def test_cdist_compute_modes_match_pytorch(torch, rows1, rows2, mode):
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((rows1, 6)), rng.standard_normal((2, rows2, 6))
    _compare_cdist(torch, a, b, compute_mode=mode)
    _compare_cdist(torch, a.astype(np.float32), b.astype(np.float32), compute_mode=mode)


def _compare_cdist(torch, a, b, **kwargs):
    ours = [flow.tensor(a, requires_grad=True), flow.tensor(b, requires_grad=True)]
    theirs = [torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)]
    got, want = flow.cdist(*ours, **kwargs), torch.cdist(*theirs, **kwargs)
    tol = {"rtol": 1e-5, "atol": 1e-5} if a.dtype == np.float32 else {"rtol": 1e-10}
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), **tol)
    gy = np.random.default_rng(2).standard_normal(want.shape).astype(a.dtype)
    got.backward(flow.tensor(gy))
    want.backward(torch.tensor(gy))
    for o, t in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(o.grad.numpy(), t.grad.numpy(), **tol)


@pytest.mark.parametrize("p", [0.5, 2.0, 3.0, math.inf])
def test_cdist_second_derivatives(p):
    rng = np.random.default_rng(3)
    a = flow.tensor(rng.standard_normal((3, 2)), requires_grad=True)
    b = flow.tensor(rng.standard_normal((4, 2)), requires_grad=True)
    assert flow.autograd.gradgradcheck(lambda x, y: flow.cdist(x, y, p=p), (a, b))


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (
            lambda: flow.cdist(flow.zeros(3), flow.zeros(2, 3)),
            ShapeError,
            r"cdist: expects tensors with at least 2 dims, x1 has shape \[3\]",
        ),
        (
            lambda: flow.cdist(flow.zeros(2, 3), flow.zeros(2, 4)),
            ShapeError,
            r"cdist: x1 and x2 must have the same number of columns, got shapes \[2, 3\] and "
            r"\[2, 4\]",
        ),
        (
            lambda: flow.cdist(flow.zeros(2, 3), flow.zeros(2, 3, dtype=flow.float64)),
            DTypeError,
            "cdist: x1 and x2 must have the same dtype, got tideflow.float32 and tideflow.float64",
        ),
        (
            lambda: flow.cdist(flow.zeros(2, 3, dtype=flow.int64), flow.zeros(2, 3)),
            DTypeError,
            "cdist: only floating-point dtypes are supported, x1 is tideflow.int64",
        ),
        (
            lambda: flow.cdist(flow.zeros(2, 3), flow.zeros(2, 3), p=-1),
            ValueError,
            "cdist: p must be non-negative, got -1",
        ),
        (
            lambda: flow.cdist(flow.zeros(2, 3), flow.zeros(2, 3), compute_mode="fast"),
            ValueError,
            "cdist: 'fast' is not a valid compute_mode",
        ),
    ],
)
def test_cdist_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()


# -- printing ------------------------------------------------------------------------------------
_SUFFIX_BREAK = re.compile(r",\n +(?=(?:size|dtype|grad_fn|requires_grad)=)")


def _printed_alike(ours: str, theirs: str) -> tuple[str, str]:
    """PyTorch's repr with tideflow's names. Suffixes (`dtype=...`) wrap when a line would
    pass `linewidth`, and 'tideflow.' is longer than 'torch.', so both sides are compared with
    suffixes unwrapped (`test_suffixes_wrap_at_the_line_width` checks the wrapping)."""
    theirs = theirs.replace("torch.", "tideflow.")
    return _SUFFIX_BREAK.sub(", ", ours), _SUFFIX_BREAK.sub(", ", theirs)


def _print_cases():
    rng = np.random.default_rng(0)
    return [
        np.array([1.0, 2.0, 3.0], np.float32),
        np.array(3.0, np.float32),
        np.array([1, 2]),
        rng.standard_normal((4, 5)).astype(np.float32),
        rng.standard_normal((30, 40)).astype(np.float32),
        rng.standard_normal((3, 4, 5)) * 1e5,
        rng.standard_normal((2, 3, 4, 5)).astype(np.float32),
        np.array([1e-8, 1.0, np.nan, np.inf, -np.inf]),
        np.array([np.nan, 0.0, -0.0], np.float32),
        np.array([123456789.0, 1.0], np.float32),
        np.arange(1100.0, dtype=np.float32),
        np.arange(2000).reshape(40, 50),
        rng.integers(-1000, 1000, (3, 200)).astype(np.int32),
        rng.random((5, 5)) > 0.5,
        rng.standard_normal(100).astype(np.float16),
        np.zeros((0, 3), np.int64),
        np.zeros((0,), np.float64),
        np.zeros((2, 0), np.float32),
        np.array(7, np.uint8),
    ]


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"precision": 2},
        {"threshold": 5},
        {"edgeitems": 1, "threshold": 10},
        {"linewidth": 30},
        {"profile": "short"},
        {"profile": "full"},
        {"sci_mode": True},
        {"sci_mode": False, "precision": 6},
        {"edgeitems": 0, "threshold": 3},
    ],
    ids=repr,
)
def test_repr_matches_pytorch_under_print_options(torch, options):
    flow.set_printoptions(**options)
    torch.set_printoptions(**options)
    for array in _print_cases():
        ours, theirs = flow.from_numpy(array.copy()), torch.from_numpy(array.copy())
        pairs = [(ours, theirs)]
        if array.dtype.kind == "f":
            pairs.append((ours.requires_grad_() * 2, theirs.requires_grad_() * 2))
        for a, b in pairs:
            got, want = _printed_alike(repr(a), repr(b))
            assert got == want, f"{array.dtype} {array.shape}:\n{got}\n!=\n{want}"


def test_bfloat16_prints_like_pytorch(torch):
    values = np.random.default_rng(4).standard_normal((3, 4))
    ours = flow.tensor(values, dtype=flow.bfloat16)
    theirs = torch.tensor(values, dtype=torch.bfloat16)
    assert repr(ours) == repr(theirs).replace("torch.", "tideflow.")


def test_suffixes_wrap_at_the_line_width():
    x = flow.arange(10.0, dtype=flow.float64, requires_grad=True) * 2
    assert repr(x) == (
        "tensor([ 0.,  2.,  4.,  6.,  8., 10., 12., 14., 16., 18.],\n"
        "       dtype=tideflow.float64, grad_fn=<MulBackward0>)"
    )


def test_print_options_profiles_and_context():
    flow.set_printoptions(precision=2, sci_mode=True)
    with printing.printoptions(profile="full", linewidth=120):
        assert printing.get_printoptions() == {
            "precision": 4,
            "threshold": math.inf,
            "edgeitems": 3,
            "linewidth": 120,
            "sci_mode": None,
        }
    assert printing.get_printoptions()["precision"] == 2
    assert repr(flow.tensor([1.5])) == "tensor([1.50e+00])"
    with pytest.raises(ValueError, match="set_printoptions: unknown profile 'long'"):
        flow.set_printoptions(profile="long")


@pytest.mark.parametrize("module", [compat, printing])
def test_docstring_examples_run(module):
    run_doctests(module)
