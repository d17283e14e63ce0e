"""Turning op database samples into tideflow and PyTorch calls and comparing the results."""

from __future__ import annotations

import numpy as np

import tideflow as flow

from ..framework.tensor import Tensor
from .opinfo import OpInfo, Sample


def resolve(root, path: str):
    obj = root
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def flow_fn(info: OpInfo):
    return info.op if info.op is not None else resolve(flow, info.name)


def is_float_array(a) -> bool:
    return isinstance(a, np.ndarray) and (a.dtype.kind == "f" or a.dtype.name == "bfloat16")


def is_grad_array(a) -> bool:
    """Whether the array's tensor can require grad: floating or complex."""
    return is_float_array(a) or (isinstance(a, np.ndarray) and a.dtype.kind == "c")


def to_flow(sample: Sample, requires_grad: bool, noncontiguous: bool = False) -> tuple:
    out = []
    for a in sample.args:
        if isinstance(a, np.ndarray):
            data = _noncontiguous(a) if noncontiguous else a.copy()
            t = flow.from_numpy(data)
            if requires_grad and is_grad_array(a):
                t.requires_grad_(True)
            out.append(t)
        else:
            out.append(a)
    return tuple(out)


def _noncontiguous(a: np.ndarray) -> np.ndarray:
    """The same values laid out with a stride of 2 along the last axis."""
    if a.ndim == 0 or a.size == 0:
        return a.copy()
    big = np.zeros((*a.shape[:-1], a.shape[-1] * 2), a.dtype)
    big[..., ::2] = a
    return big[..., ::2]


def to_torch(torch, sample: Sample, requires_grad: bool) -> tuple:
    out = []
    for a in sample.args:
        if isinstance(a, np.ndarray):
            if a.dtype.name == "bfloat16":
                t = torch.from_numpy(a.astype(np.float32)).to(torch.bfloat16)
            else:
                t = torch.from_numpy(a.copy())
            if requires_grad and is_grad_array(a):
                t.requires_grad_(True)
            out.append(t)
        else:
            out.append(a)
    return tuple(out)


def call_torch(torch, info: OpInfo, args: tuple, kwargs: dict):
    oracle = info.torch
    if oracle is None:
        return resolve(torch, info.name)(*args, **kwargs)
    if isinstance(oracle, str):
        return resolve(torch, oracle)(*args, **kwargs)
    return oracle(torch, *args, **kwargs)


def flatten(out) -> list:
    """Outputs as a flat list (tuples, lists, named tuples such as max's (values, indices))."""
    if isinstance(out, tuple | list):
        return [x for o in out for x in flatten(o)]
    return [out]


def as_numpy(x) -> np.ndarray:
    if isinstance(x, Tensor):
        return np.asarray(x.detach()._data)
    if hasattr(x, "detach"):  # a torch tensor
        x = x.detach().resolve_conj()
        if str(x.dtype) == "torch.bfloat16":
            x = x.float()
        elif str(x.dtype) == "torch.complex32":  # NumPy has no complex of halves
            x = x.cfloat()
        return x.numpy()
    return np.asarray(x)


def dtype_name(x) -> str:
    if isinstance(x, Tensor):
        return x.dtype.name
    return str(x.dtype).replace("torch.", "")


def assert_close(actual, expected, rtol: float, atol: float, what: str) -> None:
    a = as_numpy(actual)
    e = as_numpy(expected)
    if a.shape != e.shape:
        raise AssertionError(f"{what}: shape {list(a.shape)} != expected {list(e.shape)}")
    if a.dtype == np.bool_ or e.dtype == np.bool_ or a.dtype.kind in "iu":
        if not np.array_equal(a, e):
            raise AssertionError(f"{what}: values differ\nactual:\n{a}\nexpected:\n{e}")
        return
    wide = np.complex128 if "c" in (a.dtype.kind, e.dtype.kind) else np.float64
    a64 = a.astype(wide)
    e64 = e.astype(wide)
    if not np.allclose(a64, e64, rtol=rtol, atol=atol, equal_nan=True):
        diff = np.abs(a64 - e64)
        diff = diff[~np.isnan(diff)]  # NaN against a number is a mismatch, not an error size
        err = diff.max() if diff.size else float("nan")
        raise AssertionError(
            f"{what}: values differ (max abs err {err:.3g}, rtol={rtol}, atol={atol})\n"
            f"actual:\n{a}\nexpected:\n{e}"
        )
