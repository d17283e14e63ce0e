"""The import hook: a `sys.meta_path` finder that resolves `torch.<sub>` to `tideflow.<sub>`.

Enabling takes every `torch` / `torch.*` entry out of `sys.modules` (a real PyTorch imported
earlier is kept aside, untouched) and puts the finder first on `sys.meta_path`; disabling
removes the finder and the mocked entries and puts the saved ones back, so code that already
holds real torch objects, or imports torch again afterwards, sees real torch.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.abc
import importlib.util
import sys
import threading
from collections.abc import Iterator
from importlib.machinery import ModuleSpec
from types import ModuleType

from ..framework.conventions import follow_pytorch
from ._modules import build_torch_modules


def _is_torch_name(name: str) -> bool:
    return name == "torch" or name.startswith("torch.")


def _tideflow_name(torch_name: str) -> str:
    return "tideflow" + torch_name[len("torch") :]


class TorchFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds `torch` and `torch.*` and loads them as the matching tideflow modules."""

    def __init__(self) -> None:
        self.own_modules = build_torch_modules(loader=self)  # `torch` itself and the stubs

    def find_spec(self, fullname: str, path=None, target=None) -> ModuleSpec | None:
        if not _is_torch_name(fullname):
            return None
        if fullname not in self.own_modules:
            parent = fullname.rpartition(".")[0]
            # A stub's children are stubs or nothing: `torch.backends.x` never falls through to
            # tideflow.backends (the array backends), and a name tideflow lacks is not found.
            if parent in self.own_modules and parent != "torch":
                return None
            if importlib.util.find_spec(_tideflow_name(fullname)) is None:
                return None
        # NOTE: not a package spec: the import system would otherwise give tideflow's plain
        # modules (tideflow.linalg) an empty `__path__`. Packages already carry their own.
        return ModuleSpec(fullname, self)

    def create_module(self, spec: ModuleSpec) -> ModuleType:
        module = self.own_modules.get(spec.name)
        if module is None:
            module = importlib.import_module(_tideflow_name(spec.name))
        spec.loader_state = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # The module already ran (tideflow's under its own name; stubs are built complete).
        # The import system has just overwritten its `__spec__` with the torch-named one; put
        # the module's own back, or relative imports and `importlib.reload` inside tideflow
        # would resolve against `torch.*`.
        if module.__spec__.loader_state is not None:  # None under importlib.reload(torch)
            module.__spec__ = module.__spec__.loader_state


class _Session:
    def __init__(self) -> None:
        self.finder = TorchFinder()
        self.saved_modules = _pop_torch_modules()
        sys.meta_path.insert(0, self.finder)
        follow_pytorch(True)

    def close(self) -> None:
        follow_pytorch(False)
        sys.meta_path[:] = [f for f in sys.meta_path if f is not self.finder]
        _pop_torch_modules()
        sys.modules.update(self.saved_modules)


def _pop_torch_modules() -> dict[str, ModuleType]:
    names = [name for name in list(sys.modules) if _is_torch_name(name)]
    return {name: sys.modules.pop(name) for name in names}


_session: _Session | None = None
_lock = threading.Lock()


def enable() -> None:
    """Make `import torch` (and `torch.*`) resolve to tideflow until `disable()`.

    Call it before the program imports torch. Enabling twice is harmless.

    >>> import tideflow.mock_torch
    >>> tideflow.mock_torch.enable()
    >>> import torch
    >>> torch.nn.Linear is tideflow.nn.Linear
    True
    >>> tideflow.mock_torch.disable()
    """
    global _session
    with _lock:
        if _session is None:
            _session = _Session()


def disable() -> None:
    """Undo `enable()`: `sys.modules` and `sys.meta_path` get back their torch entries.

    A real PyTorch imported before `enable()` is importable again; tideflow modules that were
    loaded on the way stay loaded under their tideflow names. Harmless when not enabled.
    """
    global _session
    with _lock:
        if _session is not None:
            _session.close()
            _session = None


def is_enabled() -> bool:
    """Whether `import torch` currently resolves to tideflow."""
    return _session is not None


@contextlib.contextmanager
def enabled() -> Iterator[None]:
    """`enable()` for the duration of a `with` block; an enclosing enable stays in force.

    >>> with tideflow.mock_torch.enabled():
    ...     import torch.nn.functional as F
    >>> F is tideflow.nn.functional
    True
    """
    already = is_enabled()
    enable()
    try:
        yield
    finally:
        if not already:
            disable()
