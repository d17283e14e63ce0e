"""Autograd: the backward engine, `grad`, custom `Function`s, gradcheck, anomaly detection."""

from __future__ import annotations

from ..framework.grad_mode import enable_grad, inference_mode, no_grad, set_grad_enabled
from ..framework.tensor import Tensor
from .anomaly import detect_anomaly, is_anomaly_enabled, set_detect_anomaly
from .engine import run_backward
from .function import Function, FunctionCtx
from .gradcheck import gradcheck, gradgradcheck


def _as_list(x) -> list:
    if x is None:
        return []
    return list(x) if isinstance(x, tuple | list) else [x]


def _roots(tensors: list, grads: list) -> tuple[list, list]:
    """Where backward starts from each tensor, with its seed gradient (a global tensor starts
    from its shard)."""
    pairs = [
        t._grad_root(g) if isinstance(t, Tensor) else (t, g)
        for t, g in zip(tensors, grads, strict=True)
    ]
    return [t for t, _ in pairs], [g for _, g in pairs]


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulate gradients of `tensors` into the leaves (or only into `inputs`)."""
    tensors = _as_list(tensors)
    grads = _as_list(grad_tensors) or [None] * len(tensors)
    tensors, grads = _roots(tensors, grads)
    run_backward(
        tensors,
        grads,
        retain_graph=create_graph if retain_graph is None else retain_graph,
        create_graph=create_graph,
        inputs=_as_list(inputs) or None,
    )


def grad(
    outputs,
    inputs,
    grad_outputs=None,
    retain_graph=None,
    create_graph=False,
    allow_unused=False,
    materialize_grads=False,
):
    """Gradients of `outputs` with respect to `inputs`, returned instead of accumulated."""
    outputs = _as_list(outputs)
    grads = _as_list(grad_outputs) or [None] * len(outputs)
    outputs, grads = _roots(outputs, grads)
    inputs_list = _as_list(inputs)
    result = run_backward(
        outputs,
        grads,
        retain_graph=create_graph if retain_graph is None else retain_graph,
        create_graph=create_graph,
        inputs=inputs_list,
        allow_unused=allow_unused or materialize_grads,
        accumulate=False,
        what="autograd.grad",
    )
    result = tuple(
        g if g is None else x._grad_result(g) for x, g in zip(inputs_list, result, strict=True)
    )
    if materialize_grads:
        result = tuple(
            x.new_zeros(x.shape) if g is None else g
            for x, g in zip(inputs_list, result, strict=True)
        )
    return result


def _tensor_backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
    """Compute the gradient of this tensor with respect to the graph's leaves."""
    backward(self, gradient, retain_graph, create_graph, inputs)


Tensor.backward = _tensor_backward

# NOTE: after `grad`, which the submodule builds on
from . import functional  # noqa: E402

__all__ = [
    "Function",
    "FunctionCtx",
    "backward",
    "detect_anomaly",
    "enable_grad",
    "functional",
    "grad",
    "gradcheck",
    "gradgradcheck",
    "inference_mode",
    "is_anomaly_enabled",
    "no_grad",
    "set_detect_anomaly",
    "set_grad_enabled",
]
