"""The module objects that stand under `torch` names while the mock is enabled.

`torch` itself is a thin module that forwards every attribute to `tideflow`, so
`torch.Tensor is tideflow.Tensor` and `torch.nn is tideflow.nn`. It is a module of its own
rather than `tideflow` itself because the import system writes each imported submodule onto
its parent (`import torch.cuda` sets `torch.cuda`): on `tideflow` those writes would
leak the CUDA stubs into tideflow's namespace and `torch.backends` would replace
`tideflow.backends` (tideflow's array backends).

`torch.cuda` and `torch.backends` have no tideflow counterpart: they are stubs that answer
what a CPU-only PyTorch build answers, so scripts that probe for a GPU or set
`torch.backends.cudnn.benchmark = True` run unchanged. `torch.onnx.export` is
`tideflow.onnx.export` (loaded on the first export: it needs the `onnx` package).
`torch.serialization` gathers tideflow's save/load and its allowlist of trusted classes. The
stubs are built fresh for each `enable()`, so flags a script sets do not outlive its session.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from importlib.machinery import ModuleSpec
from types import ModuleType, SimpleNamespace

import tideflow
from tideflow.framework.errors import UnsupportedError

from ._legacy import legacy_tensor_types


class TorchModule(ModuleType):
    """`torch`: its own attributes (the stubs) first, then everything `tideflow` has."""

    def __getattr__(self, name: str):
        try:
            return getattr(tideflow, name)
        except AttributeError:
            pass
        # NOTE: PyTorch imports its public subpackages eagerly (`torch.utils.data` works after
        # a bare `import torch`); tideflow imports some lazily, so load them on first use.
        if not name.startswith("_") and importlib.util.find_spec(f"tideflow.{name}"):
            return importlib.import_module(f"tideflow.{name}")
        raise AttributeError(
            f"module 'torch' has no attribute '{name}' "
            f"(tideflow.mock_torch maps torch to tideflow, which has no '{name}')"
        )

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(dir(tideflow)))


def _false(*args, **kwargs) -> bool:
    return False


def _zero(*args, **kwargs) -> int:
    return 0


def _nothing(*args, **kwargs) -> None:
    return None


def _ignore_seed(seed) -> None:
    # PyTorch queues CUDA seeding until a device is initialized, so without one seeding does
    # nothing; it still converts the seed first, and so fails the same way on a bad one.
    int(seed)


def _needs_gpu(name: str):
    def needs_gpu(*args, **kwargs):
        # AssertionError is what a CPU-only PyTorch build raises here.
        raise AssertionError(
            f"torch.cuda.{name}: CUDA is not available (tideflow.mock_torch runs on the CPU)"
        )

    needs_gpu.__name__ = needs_gpu.__qualname__ = name
    return needs_gpu


def _cuda_attrs() -> dict:
    needs_gpu = (
        "current_device",
        "set_device",
        "synchronize",
        "get_device_name",
        "get_device_properties",
        "current_stream",
    )
    return {
        **dict.fromkeys(("is_available", "is_initialized", "is_bf16_supported"), _false),
        **dict.fromkeys(("device_count", "memory_allocated", "max_memory_allocated"), _zero),
        **dict.fromkeys(("seed", "seed_all", "empty_cache"), _nothing),
        "manual_seed": _ignore_seed,
        "manual_seed_all": _ignore_seed,
        **{name: _needs_gpu(name) for name in needs_gpu},
    }


def _cudnn_attrs() -> dict:
    return {
        "enabled": True,
        "benchmark": False,
        "deterministic": False,
        "allow_tf32": True,
        "is_available": _false,
        "version": _nothing,
    }


def _backends_cuda_attrs() -> dict:
    matmul = SimpleNamespace(
        allow_tf32=False,
        allow_fp16_reduced_precision_reduction=True,
        allow_bf16_reduced_precision_reduction=True,
    )
    return {"matmul": matmul, "is_built": _false}


def _mps_attrs() -> dict:
    return {"is_available": _false, "is_built": _false}


def _export_onnx(
    model,
    args=(),
    f=None,
    *,
    opset_version=None,
    verbose=None,
    dynamo=True,
    external_data=True,
    training=None,
    **options,
):
    """PyTorch's `torch.onnx.export` by `tideflow.onnx.export`, which takes the options of
    both PyTorch exporters that mean the same thing; `verbose`, `dynamo`, `external_data` and
    `training` are accepted and ignored (there is one exporter, the model is exported in eval
    mode, and weights move to a file of their own only past protobuf's 2 GB limit)."""
    try:
        from tideflow.onnx import export
    except ImportError as error:
        raise UnsupportedError(
            f"torch.onnx.export({type(model).__name__}, ...) needs the onnx package: "
            "pip install tideflow[onnx]"
        ) from error
    if f is None:
        raise UnsupportedError(
            f"torch.onnx.export({type(model).__name__}, ...): give the file to write (f); "
            "tideflow does not return an in-memory ONNXProgram"
        )
    if opset_version is not None:
        options["opset_version"] = opset_version
    return export(model, args, f, **options)


def _is_in_onnx_export() -> bool:
    exporter = sys.modules.get("tideflow.onnx")  # not loaded: no export has started
    return exporter is not None and exporter.is_in_onnx_export()


def _onnx_attrs() -> dict:
    return {"export": _export_onnx, "is_in_onnx_export": _is_in_onnx_export}


def _serialization_attrs() -> dict:
    names = ("save", "load", "add_safe_globals", "safe_globals", "get_safe_globals")
    return {name: getattr(tideflow.io, name) for name in (*names, "clear_safe_globals")}


# torch name -> (docstring, attributes); children are attached to their parents below.
_STUBS = {
    "torch.cuda": ("CUDA stub: no GPU is available under tideflow.mock_torch.", _cuda_attrs),
    "torch.backends": ("Backend flags stub (cudnn, cuda, mps).", dict),
    "torch.backends.cudnn": ("cuDNN stub: flags are accepted and ignored.", _cudnn_attrs),
    "torch.backends.cuda": ("CUDA backend stub: flags are accepted.", _backends_cuda_attrs),
    "torch.backends.mps": ("MPS stub: not available.", _mps_attrs),
    "torch.onnx": ("tideflow.onnx's export under PyTorch's name.", _onnx_attrs),
    "torch.serialization": ("tideflow.io's save/load and trusted classes.", _serialization_attrs),
}


def _package(cls: type[ModuleType], name: str, doc: str, loader) -> ModuleType:
    module = cls(name, doc)
    module.__spec__ = ModuleSpec(name, loader, is_package=True)
    module.__loader__ = loader
    module.__package__ = name
    module.__path__ = []  # a package, so its submodules are looked up (by the mock's finder)
    return module


def build_torch_modules(loader) -> dict[str, ModuleType]:
    """Fresh `torch` and stub modules, keyed by their torch names; `loader` is the finder."""
    modules = {"torch": _package(TorchModule, "torch", tideflow.__doc__, loader)}
    vars(modules["torch"]).update(legacy_tensor_types())
    for name, (doc, attrs) in _STUBS.items():
        module = _package(ModuleType, name, doc, loader)
        vars(module).update(attrs())
        modules[name] = module
        parent, _, child = name.rpartition(".")
        setattr(modules[parent], child, module)
    return modules
