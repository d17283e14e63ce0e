"""tideflow.mock_torch: `import torch` resolves to tideflow while enabled and to real torch
again after; the CUDA/backends stubs answer like a CPU-only PyTorch; the runner runs scripts
as `__main__`; the unmodified PyTorch programs in tests/mock_torch_examples train on it."""

import importlib
import importlib.util
import json
import operator
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import tideflow as flow
import tideflow.mock_torch as mock_torch
from tideflow.mock_torch import __main__ as runner

pytestmark = pytest.mark.timeout(180)

EXAMPLES = Path(__file__).resolve().parents[1] / "mock_torch_examples"


@pytest.fixture(autouse=True)
def _disable_after_each_test():
    yield
    mock_torch.disable()


def _torch_entries() -> dict:
    return {k: v for k, v in sys.modules.items() if k == "torch" or k.startswith("torch.")}


def _which_torch():
    """Third-party code that imports torch when called, not when it is imported."""
    import torch

    return torch


# -- enable / disable ------------------------------------------------------------------------


@pytest.mark.torch
def test_disable_restores_the_real_torch_imported_before():
    real = pytest.importorskip("torch")
    import torch.nn  # a real submodule too, so its sys.modules entry must come back

    before, meta_path = _torch_entries(), list(sys.meta_path)
    mock_torch.enable()
    import torch

    assert torch is not real
    assert torch.Tensor is flow.Tensor
    mock_torch.disable()

    after = _torch_entries()
    assert after.keys() == before.keys()
    assert all(after[name] is before[name] for name in before)
    assert sys.meta_path == meta_path
    import torch

    assert torch is real
    assert torch.nn.Linear is real.nn.Linear


@pytest.mark.torch
def test_torch_imported_inside_already_loaded_code_follows_the_mock():
    real = pytest.importorskip("torch")
    with mock_torch.enabled():
        mocked = _which_torch()
        assert mocked.Tensor is flow.Tensor
    assert _which_torch() is real
    # Code that bound the mocked torch while it was enabled keeps working after disable.
    assert mocked.nn.Linear is flow.nn.Linear
    assert not mocked.cuda.is_available()


def test_round_trip_in_a_process_that_never_imported_torch():
    code = textwrap.dedent(
        """
        import importlib.util, json, sys
        import tideflow.mock_torch
        meta_path = list(sys.meta_path)
        tideflow.mock_torch.enable()
        import torch, torch.nn, torch.utils.data
        mocked = sorted(k for k in sys.modules if k == "torch" or k.startswith("torch."))
        tideflow.mock_torch.disable()
        left = sorted(k for k in sys.modules if k == "torch" or k.startswith("torch."))
        real = importlib.util.find_spec("torch")
        print(json.dumps({"mocked": mocked, "left": left, "meta_path": sys.meta_path == meta_path,
                          "real_origin": real and real.origin}))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    report = json.loads(result.stdout)
    assert {"torch", "torch.nn", "torch.utils", "torch.utils.data"} <= set(report["mocked"])
    assert report["left"] == []
    assert report["meta_path"]
    # After disable, `torch` is found by the ordinary finders again: real torch, if installed.
    real = importlib.util.find_spec("torch")
    assert report["real_origin"] == (real and real.origin)


def test_enable_twice_is_harmless_and_disable_without_enable_too():
    before, meta_path = _torch_entries(), list(sys.meta_path)
    mock_torch.disable()  # not enabled: nothing to undo
    assert sys.meta_path == meta_path
    mock_torch.enable()
    mock_torch.enable()
    assert len(sys.meta_path) == len(meta_path) + 1
    import torch

    assert torch.nn is flow.nn
    mock_torch.disable()
    assert not mock_torch.is_enabled()
    assert sys.meta_path == meta_path
    assert _torch_entries() == before


def test_enabled_context_nests_and_restores_on_error():
    with pytest.raises(ValueError, match="boom"), mock_torch.enabled():
        with mock_torch.enabled():
            assert mock_torch.is_enabled()
        assert mock_torch.is_enabled()  # the inner block does not end the outer one
        raise ValueError("boom")
    assert not mock_torch.is_enabled()


# -- what torch names resolve to ----------------------------------------------------------------

SUBMODULES = [
    "nn",
    "nn.functional",
    "nn.init",
    "nn.utils",
    "optim",
    "optim.lr_scheduler",
    "utils",
    "utils.data",
    "autograd",
    "linalg",
    "special",
    "amp",
]


@pytest.mark.parametrize("name", SUBMODULES)
def test_submodule_is_the_tideflow_module(name):
    with mock_torch.enabled():
        module = importlib.import_module(f"torch.{name}")
        assert module is importlib.import_module(f"tideflow.{name}")
        assert sys.modules[f"torch.{name}"] is module
        import torch

        assert operator.attrgetter(name)(torch) is module


def test_from_imports_give_tideflow_objects():
    with mock_torch.enabled():
        import torch.nn.functional as F
        from torch import nn, optim
        from torch.autograd import Function, grad
        from torch.nn import Linear, Module
        from torch.utils.data import DataLoader, TensorDataset

    assert (nn, optim, F) == (flow.nn, flow.optim, flow.nn.functional)
    assert (Module, Linear) == (flow.nn.Module, flow.nn.Linear)
    assert (Function, grad) == (flow.autograd.Function, flow.autograd.grad)
    assert (DataLoader, TensorDataset) == (
        flow.utils.data.DataLoader,
        flow.utils.data.TensorDataset,
    )


def test_tensors_made_through_torch_are_tideflow_tensors():
    with mock_torch.enabled():
        import torch

        x = torch.tensor([1.0, -2.0, 3.0], requires_grad=True)
        (x * x).sum().backward()
    assert isinstance(x, flow.Tensor)
    assert x.grad.tolist() == [2.0, -4.0, 6.0]


def test_bare_import_reaches_subpackages_tideflow_loads_lazily():
    with mock_torch.enabled():
        import torch

        assert torch.utils.data.DataLoader is flow.utils.data.DataLoader
        assert "nn" in dir(torch)
        assert "cuda" in dir(torch)


def test_tideflow_modules_keep_their_own_identity():
    with mock_torch.enabled():
        for name in ("torch.nn", "torch.linalg", "torch.cuda", "torch.backends.cudnn"):
            importlib.import_module(name)

    assert flow.nn.__spec__.name == "tideflow.nn"
    assert flow.linalg.__spec__.name == "tideflow.linalg"
    assert not hasattr(flow.linalg, "__path__")  # a plain module is not turned into a package
    assert not hasattr(flow, "cuda")  # the stubs do not leak into tideflow's namespace
    assert flow.backends.__name__ == "tideflow.backends"


def test_names_tideflow_lacks_are_not_found():
    with mock_torch.enabled():
        import torch

        with pytest.raises(ModuleNotFoundError, match=r"No module named 'torch\.no_such_module'"):
            import torch.no_such_module
        assert importlib.util.find_spec("torch.no_such_module") is None
        # A stub's children never fall through to tideflow.backends (the array backends).
        with pytest.raises(ModuleNotFoundError, match=r"'torch\.backends\.numpy_backend'"):
            import torch.backends.numpy_backend
        with pytest.raises(AttributeError, match="module 'torch' has no attribute 'no_such_attr'"):
            _ = torch.no_such_attr
        with pytest.raises(AttributeError, match="'_private'"):
            _ = torch._private


# -- CUDA and backends stubs --------------------------------------------------------------------


def test_gpu_probing_scripts_run_on_the_cpu():
    with mock_torch.enabled():
        import torch
        import torch.backends.cudnn as cudnn

        assert torch.backends.cudnn is cudnn
        assert torch.backends is not flow.backends
        torch.backends.cudnn.benchmark = True
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.cuda.manual_seed_all(0)
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        assert device == flow.device("cpu")
        with pytest.raises(AssertionError, match=r"cuda\.synchronize: CUDA is not available"):
            torch.cuda.synchronize()
        with pytest.raises(ValueError):
            torch.cuda.manual_seed("not a seed")
    with mock_torch.enabled():
        import torch

        assert torch.backends.cudnn.benchmark is False  # each session starts from the defaults


STUB_QUERIES = [
    ("cuda.is_available", ()),
    ("cuda.device_count", ()),
    ("cuda.is_initialized", ()),
    ("cuda.is_bf16_supported", ()),
    ("cuda.memory_allocated", ()),
    ("cuda.manual_seed", (0,)),
    ("cuda.manual_seed_all", (0,)),
    ("cuda.empty_cache", ()),
    ("backends.cudnn.enabled", None),
    ("backends.cudnn.benchmark", None),
    ("backends.cudnn.deterministic", None),
    ("backends.cudnn.allow_tf32", None),
    ("backends.cudnn.is_available", ()),
    ("backends.cudnn.version", ()),
    ("backends.cuda.matmul.allow_tf32", None),
    ("backends.cuda.is_built", ()),
    ("backends.mps.is_available", ()),
    ("backends.mps.is_built", ()),
    ("onnx.is_in_onnx_export", ()),
]


def _query(torch, path: str, args):
    value = operator.attrgetter(path)(torch)
    return value if args is None else value(*args)


@pytest.mark.torch
@pytest.mark.parametrize(("path", "args"), STUB_QUERIES)
def test_stubs_answer_like_cpu_pytorch(path, args):
    real = pytest.importorskip("torch")
    if real.cuda.is_available():
        pytest.skip("the oracle must be a PyTorch without a GPU")
    expected = _query(real, path, args)
    with mock_torch.enabled():
        import torch

        assert _query(torch, path, args) == expected


@pytest.mark.torch
@pytest.mark.parametrize("name", ["current_device", "synchronize", "get_device_name"])
def test_gpu_only_calls_fail_like_cpu_pytorch(name):
    real = pytest.importorskip("torch")
    if real.cuda.is_available():
        pytest.skip("the oracle must be a PyTorch without a GPU")
    with pytest.raises(AssertionError):
        getattr(real.cuda, name)()
    with mock_torch.enabled():
        import torch

        with pytest.raises(AssertionError, match=rf"torch\.cuda\.{name}: CUDA is not available"):
            getattr(torch.cuda, name)()


def test_serialization_is_tideflow_io():
    with mock_torch.enabled():
        import torch.serialization
        from torch.serialization import add_safe_globals, safe_globals

    assert (torch.serialization.load, torch.serialization.save) == (flow.load, flow.save)
    assert (add_safe_globals, safe_globals) == (flow.io.add_safe_globals, flow.io.safe_globals)


# -- the runner ---------------------------------------------------------------------------------


def _run_mocked(*args: str, cwd=None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tideflow.mock_torch", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
    )


REPORT_SCRIPT = """
import json, sys
import torch
import helper  # the script's directory is on sys.path, as under `python train.py`
print(json.dumps({"name": __name__, "argv": sys.argv, "linear": torch.nn.Linear.__module__,
                  "cuda": torch.cuda.is_available(), "helper": helper.VALUE}))
"""


def test_runner_runs_a_script_as_main_with_its_arguments(tmp_path):
    (tmp_path / "helper.py").write_text("VALUE = 42\n")
    script = tmp_path / "train.py"
    script.write_text(REPORT_SCRIPT)
    result = _run_mocked(str(script), "--epochs", "3")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "name": "__main__",
        "argv": [str(script), "--epochs", "3"],
        "linear": flow.nn.Linear.__module__,
        "cuda": False,
        "helper": 42,
    }


def test_runner_runs_a_module_with_dash_m(tmp_path):
    (tmp_path / "helper.py").write_text("VALUE = 7\n")
    (tmp_path / "train_mod.py").write_text(REPORT_SCRIPT)
    result = _run_mocked("-m", "train_mod", "--lr", "0.1", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["name"] == "__main__"
    assert report["argv"] == [str(tmp_path / "train_mod.py"), "--lr", "0.1"]
    assert report["linear"] == flow.nn.Linear.__module__


def test_runner_passes_on_exit_status_and_errors(tmp_path):
    exits = tmp_path / "exits.py"
    exits.write_text("import sys\nsys.exit(3)\n")
    assert _run_mocked(str(exits)).returncode == 3
    fails = tmp_path / "fails.py"
    fails.write_text("raise ValueError('bad hyperparameter')\n")
    result = _run_mocked(str(fails))
    assert result.returncode == 1
    assert "ValueError: bad hyperparameter" in result.stderr


WORKERS_SCRIPT = """
import sys
import torch
from torch.utils.data import DataLoader, Dataset

class Squares(Dataset):  # defined in the script: workers must re-import it under the mock
    def __len__(self):
        return 6

    def __getitem__(self, i):
        return torch.tensor(float(i * i))

if __name__ == "__main__":
    loader = DataLoader(Squares(), batch_size=3, num_workers=1, multiprocessing_context=sys.argv[1])
    batches = list(loader)
    assert all(type(batch) is torch.Tensor for batch in batches), batches
    print([batch.tolist() for batch in batches])
"""


@pytest.mark.parametrize("context", ["spawn", pytest.param("forkserver", marks=pytest.mark.slow)])
def test_runner_mocks_torch_in_spawned_dataloader_workers(tmp_path, context):
    script = tmp_path / "workers.py"
    script.write_text(WORKERS_SCRIPT)
    result = _run_mocked(str(script), context, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[[0.0, 1.0, 4.0], [9.0, 16.0, 25.0]]"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "usage: python -m tideflow.mock_torch"),
        (["-m"], "-m expects a module name"),
        (["no_such_script.py"], "can't open file 'no_such_script.py'"),
    ],
)
def test_runner_usage_errors(args, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        runner.main(args)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
    assert not mock_torch.is_enabled()


def test_runner_help(capsys):
    with pytest.raises(SystemExit) as exit_info:
        runner.main(["--help"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.startswith("usage: python -m tideflow.mock_torch")


# -- unmodified PyTorch programs ----------------------------------------------------------------

LOSS = re.compile(r"^(initial|final) loss: (\S+)$", re.MULTILINE)

WORD_LM = "word_language_model/main.py"  # saves the whole model and loads it back
EXAMPLE_RUNS = [
    pytest.param("mlp_classifier.py", (), id="mlp"),
    pytest.param("custom_function.py", (), id="custom_function"),
    pytest.param("cnn_classifier.py", (), id="cnn", marks=pytest.mark.slow),
    pytest.param("char_lstm.py", (), id="char_lstm"),
    pytest.param("transformer_classifier.py", (), id="transformer", marks=pytest.mark.slow),
    pytest.param(WORD_LM, (), id="word_lm_lstm"),
    pytest.param(
        WORD_LM, ("--model", "GRU", "--tied"), id="word_lm_gru_tied", marks=pytest.mark.slow
    ),
    pytest.param(
        WORD_LM, ("--model", "Transformer"), id="word_lm_transformer", marks=pytest.mark.slow
    ),
]


def _losses(stdout: str) -> dict:
    return {kind: float(value) for kind, value in LOSS.findall(stdout)}


@pytest.mark.parametrize(("example", "args"), EXAMPLE_RUNS)
def test_example_trains_under_mock_torch(example, args):
    result = _run_mocked(str(EXAMPLES / example), *args, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    losses = _losses(result.stdout)
    assert losses["final"] < losses["initial"], result.stdout


@pytest.mark.slow
@pytest.mark.torch
@pytest.mark.parametrize(
    ("example", "args"), [pytest.param(*p.values, id=p.id) for p in EXAMPLE_RUNS]
)
def test_example_is_a_valid_pytorch_program(example, args):
    pytest.importorskip("torch")
    # One thread: PyTorch's default thread pool only contends on a shared test machine.
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / example), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    losses = _losses(result.stdout)
    assert losses["final"] < losses["initial"], result.stdout
