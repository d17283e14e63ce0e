"""`repr(tensor)` in PyTorch's format: `tensor([1., 2.], requires_grad=True)`."""

from __future__ import annotations

import numpy as np

from . import dtype as dtypes

_THRESHOLD = 1000  # elements before the repr summarizes with '...'
_EDGE = 3


def _nonfinite(v) -> str:
    return "nan" if np.isnan(v) else ("-inf" if v < 0 else "inf")


def _float_formatter(values: np.ndarray):
    """PyTorch's choice: integral values as '1.', a wide range in scientific notation, else
    4 decimals; every element padded to one width."""
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return _nonfinite
    absval = np.abs(finite)
    integral = np.all(finite == np.round(finite))
    big, small = absval.max(), absval[absval > 0].min() if (absval > 0).any() else 1.0
    if integral and big < 1e8:
        fmt = lambda v: f"{v:.0f}."  # noqa: E731
    elif big / small > 1000 or big > 1e8 or small < 1e-4:
        fmt = lambda v: f"{v:.4e}"  # noqa: E731
    else:
        fmt = lambda v: f"{v:.4f}"  # noqa: E731

    def format_one(v) -> str:
        return fmt(v) if np.isfinite(v) else _nonfinite(v)

    width = max(len(format_one(v)) for v in finite.ravel()[:10_000])
    width = max(width, *(len(format_one(v)) for v in values[~np.isfinite(values)][:10]), 0)
    return lambda v: format_one(v).rjust(width)


def format_tensor(data: np.ndarray, *, requires_grad: bool, grad_fn) -> str:
    dt = dtypes.from_numpy(data.dtype)
    prefix = "tensor("
    values = data.astype(np.float64) if dt is dtypes.bfloat16 or dt is dtypes.float16 else data
    if data.size == 0:
        body = "[]"
    else:
        formatter = {}
        if dt.is_floating_point:
            formatter["float_kind"] = _float_formatter(values.astype(np.float64))
        elif dt is dtypes.bool_:
            formatter["bool"] = lambda v: "True" if v else "False"
        body = np.array2string(
            values,
            separator=", ",
            prefix=prefix,
            formatter=formatter,
            threshold=_THRESHOLD,
            edgeitems=_EDGE,
            max_line_width=80,
        )
    extras = []
    if data.size == 0 and data.ndim != 1:
        extras.append(f"size=({', '.join(map(str, data.shape))}{',' if data.ndim == 1 else ''})")
    if dt not in (dtypes.get_default_dtype(), dtypes.int64, dtypes.bool_):
        extras.append(f"dtype=tideflow.{dt.name}")
    if grad_fn is not None:
        extras.append(f"grad_fn=<{grad_fn.name()}>")
    elif requires_grad:
        extras.append("requires_grad=True")
    return prefix + body + "".join(", " + e for e in extras) + ")"
