"""One direction of one recurrent layer over a whole sequence, as one op: `rnn_sequence`.

`nn.RNN`/`LSTM`/`GRU` compute their steps as ops of their own (a step's matmuls and gates),
which is what training differentiates. Without gradients they call this op instead: one
kernel walks the time steps, a graph holds one node per layer and direction instead of a
dozen per step, and an ONNX export writes ONNX's own RNN, LSTM or GRU operator, whose
sequence length may vary at run time. Its formulas are the step functions' (ATen's cells).
"""

from __future__ import annotations

import numpy as np
import scipy.special as sc

from ...framework.errors import ShapeError
from .._rules import B, Meta, S, Signature, defop, dispatch

__all__ = ["rnn_sequence"]

GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def _rnn_meta(x: Meta, h0: Meta, c0, w_ih: Meta, w_hh: Meta, b_ih, b_hh, *, mode, reverse):
    steps, batch, size = x.shape if len(x.shape) == 3 else (None, None, None)
    hidden = h0.shape[-1] if len(h0.shape) == 2 else None
    gates = GATES[mode]
    expected = {
        "h0": (batch, hidden),
        "w_ih": (gates * hidden, size) if hidden else None,
        "w_hh": (gates * hidden, hidden) if hidden else None,
    }
    got = {"h0": h0.shape, "w_ih": w_ih.shape, "w_hh": w_hh.shape}
    for name, bias in (("b_ih", b_ih), ("b_hh", b_hh)):
        if bias is not None:
            expected[name], got[name] = (gates * hidden,) if hidden else None, bias.shape
    if mode == "LSTM":
        expected["c0"], got["c0"] = (batch, hidden), None if c0 is None else c0.shape
    if steps is None or any(tuple(got[k]) != expected[k] for k in expected if got[k] is not None):
        raise ShapeError(
            f"rnn_sequence ({mode}): input of shape {list(x.shape)} (steps, batch, input) "
            f"does not fit {', '.join(f'{k} {list(v)}' for k, v in got.items() if v)}"
        )
    state = Meta((batch, hidden), x.dtype)
    outs = (Meta((steps, batch, hidden), x.dtype), state)
    return (*outs, state) if mode == "LSTM" else outs


def _rnn_sbp(x: Meta, h0: Meta, c0, w_ih, w_hh, b_ih, b_hh, *, mode, reverse):
    """Sequences are independent: the batch may be split (dim 1 of the input, 0 of the
    states); the weights are whole on every rank."""
    weights = tuple(None if w is None else B for w in (w_ih, w_hh, b_ih, b_hh))
    n_out = 3 if mode == "LSTM" else 2
    c = None if c0 is None else S(0)
    split = Signature((S(1), S(0), c, *weights), (S(1), *(S(0),) * (n_out - 1)))
    whole = Signature((B, B, None if c0 is None else B, *weights), (B,) * n_out)
    return [split, whole]


def _sigmoid(a: np.ndarray) -> np.ndarray:
    return sc.expit(a)


def _rnn_kernel(x, h0, c0, w_ih, w_hh, b_ih, b_hh, *, mode, reverse):
    gx = x @ w_ih.T
    if b_ih is not None:
        gx += b_ih
    h, c = h0, c0
    y = np.empty((*x.shape[:2], h0.shape[-1]), x.dtype)
    for t in reversed(range(x.shape[0])) if reverse else range(x.shape[0]):
        gh = h @ w_hh.T
        if b_hh is not None:
            gh += b_hh
        if mode == "LSTM":
            i, f, g, o = np.split(gx[t] + gh, 4, axis=-1)
            c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
            h = _sigmoid(o) * np.tanh(c)
        elif mode == "GRU":
            r_x, z_x, n_x = np.split(gx[t], 3, axis=-1)
            r_h, z_h, n_h = np.split(gh, 3, axis=-1)
            r, z = _sigmoid(r_h + r_x), _sigmoid(z_h + z_x)
            n = np.tanh(n_x + r * n_h)
            h = (h - n) * z + n
        elif mode == "RNN_TANH":
            h = np.tanh(gh + gx[t])
        else:
            h = np.maximum(gh + gx[t], 0)
        y[t] = h
    h = np.asarray(h, x.dtype)
    return (y, h, np.asarray(c, x.dtype)) if mode == "LSTM" else (y, h)


# ONNX's gate orders, as positions of PyTorch's gates: LSTM (i, o, f, c) of (i, f, g, o),
# GRU (z, r, h) of (r, z, n)
_ONNX_GATES = {"LSTM": (0, 3, 1, 2), "GRU": (1, 0, 2)}
_ONNX_OPS = {"LSTM": "LSTM", "GRU": "GRU", "RNN_TANH": "RNN", "RNN_RELU": "RNN"}


def _rnn_onnx(g, x, h0, c0, w_ih, w_hh, b_ih, b_hh, *, mode, reverse):
    """ONNX's RNN, LSTM or GRU operator, its weights' gates reordered (and stacked with one
    direction), its outputs' direction dims dropped."""
    gates = GATES[mode]
    order = _ONNX_GATES.get(mode, (0,))

    def reordered(w: str) -> str:
        if gates == 1:
            return w
        pieces = g.op("Split", w, axis=0, outputs=gates, **_split_count(g, gates))
        return g.op("Concat", *(pieces[k] for k in order), axis=0)

    def stacked(w: str) -> str:
        return g.op("Unsqueeze", reordered(w), g.ints([0]))

    bias = None
    if b_ih is not None or b_hh is not None:
        zeros = g.constant(np.zeros(g.meta(w_hh).shape[0]), g.meta(x).dtype)
        halves = [reordered(b) if b is not None else zeros for b in (b_ih, b_hh)]
        bias = g.op("Unsqueeze", g.op("Concat", *halves, axis=0), g.ints([0]))
    first = g.ints([0])
    attributes = {"hidden_size": g.meta(h0).shape[-1]}
    if reverse:  # NOTE: the steps reversed, forward (OpenVINO errs on direction="reverse")
        x = _reversed_steps(g, x)
    if mode == "GRU":
        attributes["linear_before_reset"] = 1  # r * (W_hn h + b_hn), as PyTorch
    if mode.startswith("RNN"):
        attributes["activations"] = ["Tanh" if mode == "RNN_TANH" else "Relu"]
    inputs = [x, stacked(w_ih), stacked(w_hh), bias, None, g.op("Unsqueeze", h0, first)]
    if mode == "LSTM":
        inputs.append(g.op("Unsqueeze", c0, first))
    outs = g.op(_ONNX_OPS[mode], *inputs, outputs=3 if mode == "LSTM" else 2, **attributes)
    y = g.op("Squeeze", outs[0], g.ints([1]))
    if reverse:
        y = _reversed_steps(g, y)
    return (y, *(g.op("Squeeze", s, first) for s in outs[1:]))


def _reversed_steps(g, x: str) -> str:
    last, before_first = g.ints([-1]), g.ints([-(2**63)])
    return g.op("Slice", x, last, before_first, g.ints([0]), g.ints([-1]))


def _split_count(g, n: int) -> dict:
    return {"num_outputs": n} if g.opset >= 18 else {}


_rnn_sequence = defop(
    "rnn_sequence",
    inputs=("input", "h0", "c0", "w_ih", "w_hh", "b_ih", "b_hh"),
    optional=("c0", "b_ih", "b_hh"),
    meta=_rnn_meta,
    sbp=_rnn_sbp,
    kernels={"cpu": _rnn_kernel},
    # NOTE: training differentiates the step ops; this op serves calls without gradients
    differentiable=False,
    n_out=None,
    onnx=_rnn_onnx,
)


def rnn_sequence(mode: str, x, h0, c0, w_ih, w_hh, b_ih=None, b_hh=None, reverse=False):
    """One direction of one layer of an RNN (`mode`: "RNN_TANH", "RNN_RELU", "LSTM" or
    "GRU") over the (steps, batch, input) sequence `x` from the (batch, hidden) states `h0`
    (and `c0` for an LSTM): the outputs of every step and the final state(s). Internal:
    `nn.RNN` and its kin call it when no gradient is needed.

    >>> from tideflow.ops.nn.rnn import rnn_sequence
    >>> w = flow.randn(8, 3)
    >>> y, h = rnn_sequence("RNN_TANH", flow.randn(5, 2, 3), flow.zeros(2, 8), None, w,
    ...                     flow.randn(8, 8))
    """
    operands = (x, h0, c0, w_ih, w_hh, b_ih, b_hh)
    return dispatch(_rnn_sequence, operands, {"mode": mode, "reverse": reverse})
