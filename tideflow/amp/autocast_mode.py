"""`flow.autocast`: run selected ops in lower precision (bfloat16/float16) inside a region.

Autocast is a dispatch mode: while active, it casts the floating operands of ops on
PyTorch's CPU lists before they run: matrix products and convolutions to the autocast dtype,
precision-sensitive ops (losses, reductions of products, linear algebra) to float32. Other
ops run in whatever dtype their operands have. Casts of the same tensor are cached for the
region, so a weight used by several ops is converted once. Entered above the global mode, it
casts the logical tensors before their layout is chosen.
"""

from __future__ import annotations

import functools
import threading

from ..framework import dtype as dtypes
from ..framework.errors import DTypeError
from ..framework.modes import dispatch_mode
from ..framework.node import is_float
from ..framework.tensor import Tensor
from ..ops.conversion import cast

# PyTorch's CPU autocast lists (torch/csrc/autograd/autocast_mode.cpp), by tideflow op name.
LOWER_PRECISION_OPS = frozenset(
    {"conv", "conv_transpose", "bmm", "mm", "matmul", "linear", "prelu", "einsum"}
)
FLOAT32_OPS = frozenset(
    {
        "binary_cross_entropy", "binary_cross_entropy_with_logits", "nll_loss", "log_softmax",
        "prod", "trace", "linalg_inv", "linalg_solve", "linalg_det", "linalg_slogdet",
        "linalg_cholesky", "linalg_qr", "linalg_eigh", "vector_norm",
    }
)  # fmt: skip


class _State(threading.local):
    dtype: dtypes.DType | None = None  # the active autocast dtype, None when disabled
    cache: dict | None = None  # casts of leaf tensors made in the outermost region
    innermost: autocast | None = None  # the region whose dtype applies


_STATE = _State()


def is_autocast_enabled(device_type: str = "cpu") -> bool:
    return _STATE.dtype is not None


def get_autocast_dtype(device_type: str = "cpu") -> dtypes.DType:
    return _STATE.dtype or dtypes.bfloat16


def _cast(t: Tensor, target: dtypes.DType) -> Tensor:
    cache = _STATE.cache
    if cache is None or not t.is_leaf:
        return cast(t, target)
    key = (id(t), target)
    hit = cache.get(key)
    if hit is not None and hit[0] is t and hit[1] == t._version[0]:
        return hit[2]
    out = cast(t, target)
    cache[key] = (t, t._version[0], out)
    return out


def _cast_operands(op, args: tuple) -> tuple:
    target = _STATE.dtype
    if target is not None:
        if op.name in LOWER_PRECISION_OPS:
            return _cast_floats(args, target)
        if op.name in FLOAT32_OPS:
            return _cast_floats(args, dtypes.float32)
    return args


def _cast_floats(args: tuple, target: dtypes.DType) -> tuple:
    return tuple(
        _cast(a, target)
        if isinstance(a, Tensor) and is_float(a._data.dtype) and a._data.dtype != target.np
        else a
        for a in args
    )


class autocast:
    """Mixed precision for a region of code (context manager or decorator).

    >>> with flow.autocast("cpu", dtype=flow.bfloat16):
    ...     y = model(x)          # matmuls and convolutions in bfloat16
    >>> loss = loss_fn(y.float(), target)
    """

    def __init__(self, device_type: str = "cpu", dtype=None, enabled: bool = True,
                 cache_enabled: bool = True) -> None:  # fmt: skip
        self.device_type = device_type
        if device_type not in ("cpu", "cuda"):
            raise DTypeError(f"autocast: unknown device_type {device_type!r}")
        self.dtype = dtypes.bfloat16 if dtype is None else dtypes.to_dtype(dtype)
        if self.dtype not in (dtypes.bfloat16, dtypes.float16):
            raise DTypeError(f"autocast: dtype must be bfloat16 or float16, got {self.dtype}")
        self.enabled = enabled
        self.cache_enabled = cache_enabled

    def __enter__(self) -> autocast:
        self._saved = (_STATE.dtype, _STATE.cache, _STATE.innermost)
        _STATE.dtype = self.dtype if self.enabled else None
        if self.enabled and _STATE.cache is None and self.cache_enabled:
            _STATE.cache = {}
        _STATE.innermost = self
        self._mode = dispatch_mode(self._handle)
        self._mode.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._mode.__exit__(*exc)
        _STATE.dtype, _STATE.cache, _STATE.innermost = self._saved

    def _handle(self, op, args: tuple, attrs: dict, below):
        # NOTE: nested regions each enter a mode; only the innermost one's dtype applies
        # (an outer region sees operands the inner one cast, or left alone when disabled)
        if _STATE.innermost is self:
            args = _cast_operands(op, args)
        return below(op, args, attrs)

    def __call__(self, func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with autocast(self.device_type, self.dtype, self.enabled, self.cache_enabled):
                return func(*args, **kwargs)

        return wrapper
