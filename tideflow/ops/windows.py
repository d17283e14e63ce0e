"""Window functions for spectral analysis (`stft`'s `window`): hann, hamming, blackman,
bartlett and kaiser, as PyTorch defines them. A periodic window of length N is the symmetric
one of length N + 1 without its last point (the DFT-even window)."""

from __future__ import annotations

import numpy as np
import scipy.special as sc

from ..framework import dtype as dtypes
from ..framework.errors import DTypeError, TideflowError
from ._rules import Meta, dispatch
from .creation import _check_device, _creation, global_layout, make

__all__ = ["bartlett_window", "blackman_window", "hamming_window", "hann_window", "kaiser_window"]


def _symmetric_length(length: int, periodic: bool) -> int:
    return length + 1 if periodic else length


def _cosine_sum(n: int, coefficients) -> np.ndarray:
    """sum_k (-1)^k a_k cos(2 pi k i / (n - 1)), i = 0 .. n - 1 (a symmetric window)."""
    phase = 2 * np.pi * np.arange(n) / max(n - 1, 1)
    return sum((-1) ** k * a * np.cos(k * phase) for k, a in enumerate(coefficients))


def _bartlett(n: int) -> np.ndarray:
    half = (n - 1) / 2
    return 1 - np.abs(np.arange(n) - half) / half


def _kaiser(n: int, beta: float) -> np.ndarray:
    half = (n - 1) / 2
    ratio = (np.arange(n) - half) / half
    return sc.i0(beta * np.sqrt(np.clip(1 - ratio * ratio, 0, None))) / sc.i0(beta)


def _window_kernel(shape_of):
    def kernel(*, window_length, periodic, dtype, params):
        if window_length == 1:
            return np.ones(1, dtype.np)
        n = _symmetric_length(window_length, periodic)
        return shape_of(n, *params)[:window_length].astype(dtype.np)

    return kernel


def _window_meta(*, window_length, periodic, dtype, params):
    return Meta((window_length,), dtype)


_WINDOWS = {
    "hamming_window": _creation(
        "hamming_window", _window_kernel(lambda n, a, b: _cosine_sum(n, (a, b))), _window_meta
    ),
    "blackman_window": _creation(
        "blackman_window",
        _window_kernel(lambda n: _cosine_sum(n, (0.42, 0.5, 0.08))),
        _window_meta,
    ),
    "bartlett_window": _creation("bartlett_window", _window_kernel(_bartlett), _window_meta),
    "kaiser_window": _creation("kaiser_window", _window_kernel(_kaiser), _window_meta),
}


def _window(name, window_length, periodic, params, dtype, device, requires_grad, placement, sbp):
    _check_device(device)
    layout = global_layout(name, device, placement, sbp)
    dt = dtypes.get_default_dtype() if dtype is None else dtypes.to_dtype(dtype)
    if not dt.is_floating_point:
        raise DTypeError(f"{name}: expects floating point dtypes, got {dt.name}")
    if window_length < 0:
        raise TideflowError(f"{name}: requires non-negative window_length, got {window_length}")
    op = _WINDOWS["hamming_window" if name == "hann_window" else name]
    attrs = {"window_length": int(window_length), "periodic": bool(periodic), "dtype": dt,
             "params": tuple(params)}  # fmt: skip
    return make(lambda: dispatch(op, (), attrs), layout, requires_grad)


def hann_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                requires_grad=False, placement=None, sbp=None):  # fmt: skip
    """`0.5 - 0.5 cos(2 pi n / N)` (N = window_length if periodic, else window_length - 1).

    >>> flow.hann_window(4)
    tensor([0.0000, 0.5000, 1.0000, 0.5000])
    """
    return _window("hann_window", window_length, periodic, (0.5, 0.5), dtype, device,
                   requires_grad, placement, sbp)  # fmt: skip


def hamming_window(window_length, periodic=True, alpha=0.54, beta=0.46, *, dtype=None,
                   layout=None, device=None, requires_grad=False, placement=None,
                   sbp=None):  # fmt: skip
    """`alpha - beta cos(2 pi n / N)` (N as in hann_window).

    >>> flow.hamming_window(3, periodic=False)
    tensor([0.0800, 1.0000, 0.0800])
    """
    return _window("hamming_window", window_length, periodic, (alpha, beta), dtype, device,
                   requires_grad, placement, sbp)  # fmt: skip


def blackman_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                    requires_grad=False, placement=None, sbp=None):  # fmt: skip
    """`0.42 - 0.5 cos(2 pi n / N) + 0.08 cos(4 pi n / N)`."""
    return _window("blackman_window", window_length, periodic, (), dtype, device,
                   requires_grad, placement, sbp)  # fmt: skip


def bartlett_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                    requires_grad=False, placement=None, sbp=None):  # fmt: skip
    """The triangular window `1 - |2n / N - 1|`."""
    return _window("bartlett_window", window_length, periodic, (), dtype, device,
                   requires_grad, placement, sbp)  # fmt: skip


def kaiser_window(window_length, periodic=True, beta=12.0, *, dtype=None, layout=None,
                  device=None, requires_grad=False, placement=None, sbp=None):  # fmt: skip
    """`I0(beta sqrt(1 - (2n / N - 1)^2)) / I0(beta)`, I0 the modified Bessel function."""
    return _window("kaiser_window", window_length, periodic, (beta,), dtype, device,
                   requires_grad, placement, sbp)  # fmt: skip
