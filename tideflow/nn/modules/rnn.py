"""Recurrent layers: RNN, LSTM and GRU over whole sequences and their one-step cells RNNCell,
LSTMCell and GRUCell, with PyTorch's parameters, state_dict keys, shapes, gate order (LSTM:
i, f, g, o; GRU: r, z, n), initialization and numerics.

Each (layer, direction) runs in two parts: one matmul projects the inputs of every time step
at once (x @ W_ih^T + b_ih), then a Python loop runs the recurrence, which needs only the
hidden state (h @ W_hh^T + b_hh and the gates); the steps' outputs are joined with one `cat`.
Backward is autograd through those ops. Sequences travel in packed layout (the rows of each
time step one after another, `batch_sizes[t]` of them): a padded batch is the case where
every step holds the whole batch, and a PackedSequence lets the batch shrink as sequences end.
Without gradients, a padded batch runs each (layer, direction) as one op
(`ops/nn/rnn.rnn_sequence`: one kernel, one graph node, ONNX's own RNN operators).
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Callable
from typing import NamedTuple

from ...framework import dtype as dtypes
from ...framework.errors import ShapeError
from ...framework.grad_mode import is_grad_enabled
from ...framework.tensor import Tensor
from ...ops.creation import empty, zeros
from ...ops.nn.rnn import rnn_sequence
from ...ops.shape import cat, stack
from .. import functional as F
from .. import init
from ..parameter import Parameter
from ..utils.rnn import PackedSequence
from .module import Module

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]


class _Weights(NamedTuple):
    """The parameters of one (layer, direction); w_hr is LSTM's projection (proj_size > 0)."""

    w_ih: Tensor
    w_hh: Tensor
    b_ih: Tensor | None
    b_hh: Tensor | None
    w_hr: Tensor | None = None


def _chunk(x: Tensor, chunks: int) -> tuple:
    """The gates of a (batch, chunks * hidden) tensor."""
    return x.chunk(chunks, 1)


# -- one time step: (projected input, state) -> new state. The state is a tuple: (h,) or
# -- (h, c); its first entry is the step's output. The formulas follow ATen's CPU cells.
def _tanh_step(gx: Tensor, state: tuple, w: _Weights) -> tuple:
    (h,) = state
    return ((F.linear(h, w.w_hh, w.b_hh) + gx).tanh(),)


def _relu_step(gx: Tensor, state: tuple, w: _Weights) -> tuple:
    (h,) = state
    return (F.relu(F.linear(h, w.w_hh, w.b_hh) + gx),)


def _lstm_step(gx: Tensor, state: tuple, w: _Weights) -> tuple:
    h, c = state
    i, f, g, o = _chunk(F.linear(h, w.w_hh, w.b_hh) + gx, 4)
    c = f.sigmoid() * c + i.sigmoid() * g.tanh()
    h = o.sigmoid() * c.tanh()
    return (h if w.w_hr is None else F.linear(h, w.w_hr)), c


def _gru_step(gx: Tensor, state: tuple, w: _Weights) -> tuple:
    (h,) = state
    r_x, z_x, n_x = _chunk(gx, 3)
    r_h, z_h, n_h = _chunk(F.linear(h, w.w_hh, w.b_hh), 3)
    r = (r_h + r_x).sigmoid()
    z = (z_h + z_x).sigmoid()
    n = (n_x + r * n_h).tanh()
    return ((h - n) * z + n,)  # (1 - z) * n + z * h, in the form PyTorch computes it


_STEPS: dict[str, Callable[[Tensor, tuple, _Weights], tuple]] = {
    "RNN_TANH": _tanh_step,
    "RNN_RELU": _relu_step,
    "LSTM": _lstm_step,
    "GRU": _gru_step,
}
_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}
_NONLINEARITY_MODES = {"tanh": "RNN_TANH", "relu": "RNN_RELU"}


def _nonlinearity_mode(nonlinearity: str) -> str:
    if nonlinearity not in _NONLINEARITY_MODES:
        raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
    return _NONLINEARITY_MODES[nonlinearity]


def _rows(state: tuple, start: int, stop: int) -> tuple:
    if start == 0 and stop >= state[0].shape[0]:
        return state
    return tuple(s[start:stop] for s in state)


def _run_direction(x, batch_sizes: list, state: tuple, w: _Weights, step, reverse: bool):
    """One direction of one layer over the packed rows `x`: the packed outputs and the final
    state, whose rows are the sequences' states at their own last step."""
    inputs = F.linear(x, w.w_ih, w.b_ih).split(batch_sizes, 0)
    outputs = [None] * len(inputs)
    if reverse:
        # The walk starts at the last step, where only the longest sequences run; the others
        # join, from their initial state, as the walk reaches their last step.
        initial, state = state, _rows(state, 0, batch_sizes[-1])
        for t in reversed(range(len(inputs))):
            running = state[0].shape[0]
            if batch_sizes[t] > running:
                joining = _rows(initial, running, batch_sizes[t])
                state = tuple(cat(pair) for pair in zip(state, joining, strict=True))
            state = step(inputs[t], state, w)
            outputs[t] = state[0]
        return cat(outputs), state
    ended = []
    for t, gx in enumerate(inputs):
        if batch_sizes[t] < state[0].shape[0]:
            ended.append(_rows(state, batch_sizes[t], state[0].shape[0]))
            state = _rows(state, 0, batch_sizes[t])
        state = step(gx, state, w)
        outputs[t] = state[0]
    if ended:  # sequences end shortest first, so the last to end fill the lowest rows
        state = tuple(cat(parts) for parts in zip(state, *reversed(ended), strict=True))
    return cat(outputs), state


def _sequence_op(mode: str, x, batch_sizes: list, state: tuple, w: _Weights, reverse: bool):
    """`_run_direction` as one op where it can be: every step holds the whole batch, no
    gradient is needed, float32/float64 and no LSTM projection. None elsewhere."""
    tensors = [x, *state, *(t for t in w if t is not None)]
    if (
        len(set(batch_sizes)) != 1
        or w.w_hr is not None
        or x.dtype not in (dtypes.float32, dtypes.float64)
        or (is_grad_enabled() and any(t.requires_grad for t in tensors))
    ):
        return None
    steps, batch = len(batch_sizes), batch_sizes[0]
    c0 = state[1] if mode == "LSTM" else None
    y, *final = rnn_sequence(
        mode, x.reshape(steps, batch, x.shape[-1]), state[0], c0, *w[:4], reverse=reverse
    )
    return y.reshape(steps * batch, y.shape[-1]), tuple(final)


def _check_dtype(layer: str, input: Tensor, weight: Tensor) -> None:
    if input.dtype is not weight.dtype:
        raise ValueError(
            f"{layer}: input dtype ({input.dtype}) does not match weight dtype "
            f"({weight.dtype}). Convert input: input.to({weight.dtype}), or convert model: "
            f"model.to({input.dtype})"
        )


def _check_size_arg(name: str, value) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} should be of type int, got: {type(value).__name__}")
    if value <= 0:
        raise ValueError(f"{name} must be greater than zero")


class RNNBase(Module):
    """The multi-layer recurrent network behind RNN, LSTM and GRU; `mode` is "RNN_TANH",
    "RNN_RELU", "LSTM" or "GRU". Parameters are named `weight_ih_l{k}`, `weight_hh_l{k}`,
    `bias_ih_l{k}`, `bias_hh_l{k}` (and `weight_hr_l{k}` with proj_size), with a `_reverse`
    suffix for the backward direction, all from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)).

    >>> flow.nn.RNNBase("GRU", 4, 8, num_layers=2).weight_ih_l1.shape
    tideflow.Size([24, 8])
    """

    def __init__(
        self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1,
        bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
        bidirectional: bool = False, proj_size: int = 0, device=None, dtype=None,
    ) -> None:  # fmt: skip
        super().__init__()
        if mode not in _GATES:
            raise ValueError(f"Unrecognized RNN mode: {mode}")
        if (
            not isinstance(dropout, numbers.Number)
            or isinstance(dropout, bool)
            or not 0 <= dropout <= 1
        ):
            raise ValueError(
                "dropout should be a number in range [0, 1] representing the probability of "
                f"an element being zeroed, got {dropout!r}"
            )
        if dropout > 0 and num_layers == 1:
            warnings.warn(
                "dropout option adds dropout after all but last recurrent layer, so non-zero "
                f"dropout expects num_layers greater than 1, but got dropout={dropout} and "
                f"num_layers={num_layers}",
                stacklevel=2,
            )
        for name, flag in (("bias", bias), ("batch_first", batch_first)):
            if not isinstance(flag, bool):
                raise TypeError(f"{name} should be of type bool, got: {type(flag).__name__}")
        _check_size_arg("input_size", input_size)
        _check_size_arg("hidden_size", hidden_size)
        _check_size_arg("num_layers", num_layers)
        if proj_size < 0:
            raise ValueError(
                "proj_size should be a positive integer or zero to disable projections"
            )
        if proj_size >= hidden_size:
            raise ValueError(
                f"proj_size has to be smaller than hidden_size, got proj_size={proj_size} "
                f"and hidden_size={hidden_size}"
            )
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        directions = 2 if bidirectional else 1
        out_size = proj_size or hidden_size
        gate_size = _GATES[mode] * hidden_size
        self._all_weights: list[list[str]] = []
        for layer in range(num_layers):
            layer_input_size = input_size if layer == 0 else out_size * directions
            for direction in range(directions):
                suffix = f"_l{layer}" + ("_reverse" if direction else "")
                shapes = {
                    "weight_ih": (gate_size, layer_input_size),
                    "weight_hh": (gate_size, out_size),
                }
                if bias:
                    shapes |= {"bias_ih": (gate_size,), "bias_hh": (gate_size,)}
                if proj_size:
                    shapes["weight_hr"] = (proj_size, hidden_size)
                for name, shape in shapes.items():
                    param = Parameter(empty(shape, dtype=dtype, device=device))
                    setattr(self, name + suffix, param)
                self._all_weights.append([name + suffix for name in shapes])
        self.reset_parameters()

    @property
    def all_weights(self) -> list[list[Parameter]]:
        """The parameters of each (layer, direction), in PyTorch's order."""
        return [[getattr(self, name) for name in names] for names in self._all_weights]

    def flatten_parameters(self) -> None:
        """Kept for PyTorch compatibility (cuDNN packs its weights into one buffer); the
        NumPy kernels read the parameters where they are, so there is nothing to do."""

    def reset_parameters(self) -> None:
        stdv = 1.0 / math.sqrt(self.hidden_size)
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s

    @property
    def _layer(self) -> str:
        """The layer's name in error messages."""
        return "RNN" if self.mode.startswith("RNN") else self.mode

    # -- the state: (h,) for RNN and GRU, (h, c) for LSTM --------------------------------
    @property
    def _num_states(self) -> int:
        """The first dim of h_0 (and c_0): one state per (layer, direction)."""
        return self.num_layers * (2 if self.bidirectional else 1)

    @property
    def _state_sizes(self) -> tuple[int, ...]:
        if self.mode == "LSTM":
            return (self.proj_size or self.hidden_size, self.hidden_size)
        return (self.hidden_size,)

    def _as_state(self, hx) -> tuple | None:
        if hx is None:
            return None
        if self.mode != "LSTM":
            return (hx,)
        if not isinstance(hx, (tuple, list)) or len(hx) != 2:
            raise TypeError(
                f"LSTM: expected hx to be a tuple (h_0, c_0) or None, got {type(hx).__name__}"
            )
        return tuple(hx)

    def _from_state(self, state: tuple):
        return state if self.mode == "LSTM" else state[0]

    def _check_state_dims(self, state: tuple, ndim: int) -> None:
        if all(s.ndim == ndim for s in state):
            return
        kind = "batched 3-D" if ndim == 3 else "unbatched 2-D"
        prefix = f"{self._layer}: For {kind} input,"
        if len(state) == 1:
            got = f"{state[0].ndim}-D tensor"
            raise ShapeError(f"{prefix} hx should also be {ndim}-D but got {got}")
        got = "(" + ", ".join(f"{s.ndim}-D" for s in state) + ") tensors"
        raise ShapeError(f"{prefix} hx and cx should also be {ndim}-D but got {got}")

    def _check_state_shapes(self, state: tuple, batch: int | None) -> None:
        """Each initial state is (states, batch, size), or (states, size) for an unbatched
        input (batch None): checked as the user passed it, before any batch dim is added."""
        for i, (s, size) in enumerate(zip(state, self._state_sizes, strict=True)):
            expected = (self._num_states, size)
            if batch is not None:
                expected = (self._num_states, batch, size)
            if tuple(s.shape) != expected:
                which = "hidden" if len(state) == 1 else f"hidden[{i}]"
                raise ShapeError(
                    f"{self._layer}: Expected {which} size {expected}, got {list(s.shape)}"
                )

    def _zero_state(self, batch: int, like: Tensor) -> tuple:
        return tuple(
            zeros((self._num_states, batch, size), dtype=like.dtype, device=like.device)
            for size in self._state_sizes
        )

    def _check_input(self, x: Tensor) -> None:
        """The input's dtype and feature size; the message shows the shape the user passed."""
        _check_dtype(self._layer, x, self.weight_ih_l0)
        if x.shape[-1] != self.input_size:
            raise ShapeError(
                f"{self._layer}: input.size(-1) must be equal to input_size. Expected "
                f"{self.input_size}, got {x.shape[-1]} (input shape {list(x.shape)})"
            )

    # -- forward --------------------------------------------------------------------------
    def forward(self, input, hx=None):
        """`input` is (L, N, H_in) ((N, L, H_in) with batch_first), unbatched (L, H_in), or a
        PackedSequence; `hx` the initial state (zeros when None). Returns the last layer's
        outputs at every step and the final state of every (layer, direction)."""
        state = self._as_state(hx)
        if isinstance(input, PackedSequence):
            return self._forward_packed(input, state)
        if input.ndim not in (2, 3):
            raise ValueError(
                f"{self._layer}: Expected input to be 2D or 3D, got {input.ndim}D tensor instead"
            )
        batched = input.ndim == 3
        if state is not None:
            self._check_state_dims(state, input.ndim)
        self._check_input(input)
        time_dim = 1 if batched and self.batch_first else 0
        if input.shape[time_dim] == 0:
            raise ShapeError(
                f"{self._layer}: Expected sequence length to be larger than 0, got input of "
                f"shape {list(input.shape)}"
            )
        if state is not None:
            self._check_state_shapes(state, input.shape[1 - time_dim] if batched else None)
        if not batched:
            input = input.unsqueeze(0 if self.batch_first else 1)
            state = None if state is None else tuple(s.unsqueeze(1) for s in state)
        x = input.transpose(0, 1) if self.batch_first else input
        steps, batch = x.shape[:2]
        if state is None:
            state = self._zero_state(batch, x)
        rows, state = self._run(x.reshape(steps * batch, x.shape[2]), [batch] * steps, state)
        output = rows.reshape(steps, batch, rows.shape[-1])
        if self.batch_first:
            output = output.transpose(0, 1)
        if not batched:
            output = output.squeeze(0 if self.batch_first else 1)
            state = tuple(s.squeeze(1) for s in state)
        return output, self._from_state(state)

    def _forward_packed(self, packed: PackedSequence, state: tuple | None):
        data, batch_sizes, sorted_indices, unsorted_indices = packed
        if data.ndim != 2:
            raise ShapeError(
                f"{self._layer}: the packed data must be 2-D (rows, input_size), got shape "
                f"{list(data.shape)}"
            )
        self._check_input(data)
        sizes = batch_sizes.tolist()
        if state is None:
            state = self._zero_state(sizes[0], data)
        else:
            self._check_state_shapes(state, sizes[0])
            if sorted_indices is not None:
                state = tuple(s.index_select(1, sorted_indices) for s in state)
        rows, state = self._run(data, sizes, state)
        if unsorted_indices is not None:
            state = tuple(s.index_select(1, unsorted_indices) for s in state)
        output = PackedSequence(rows, batch_sizes, sorted_indices, unsorted_indices)
        return output, self._from_state(state)

    def _weights(self, names: list[str]) -> _Weights:
        params = [getattr(self, name) for name in names]
        b_ih, b_hh = params[2:4] if self.bias else (None, None)
        return _Weights(params[0], params[1], b_ih, b_hh, params[-1] if self.proj_size else None)

    def _run(self, x: Tensor, batch_sizes: list, state: tuple) -> tuple[Tensor, tuple]:
        """All layers over packed rows `x`: the last layer's packed outputs and the final
        states, stacked over (layer, direction) like PyTorch's h_n."""
        step = _STEPS[self.mode]
        directions = 2 if self.bidirectional else 1
        initial = [s.unbind(0) for s in state]
        finals = []
        for layer in range(self.num_layers):
            if layer and self.training and self.dropout:
                x = F.dropout(x, self.dropout)
            outputs = []
            for direction in range(directions):
                k = layer * directions + direction
                args = (x, batch_sizes, tuple(part[k] for part in initial),
                        self._weights(self._all_weights[k]))  # fmt: skip
                fused = _sequence_op(self.mode, *args, reverse=direction == 1)
                out, final = fused or _run_direction(*args, step, reverse=direction == 1)
                outputs.append(out)
                finals.append(final)
            x = outputs[0] if directions == 1 else cat(outputs, 1)
        return x, tuple(stack(list(parts)) for parts in zip(*finals, strict=True))


class RNN(RNNBase):
    """Elman RNN: h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh) (or relu), stacked
    `num_layers` deep, optionally bidirectional. Returns (output, h_n).

    >>> rnn = flow.nn.RNN(10, 20, num_layers=2)
    >>> output, h_n = rnn(flow.randn(5, 3, 10))
    >>> output.shape, h_n.shape
    (tideflow.Size([5, 3, 20]), tideflow.Size([2, 3, 20]))
    """

    def __init__(
        self, input_size: int, hidden_size: int, num_layers: int = 1,
        nonlinearity: str = "tanh", bias: bool = True, batch_first: bool = False,
        dropout: float = 0.0, bidirectional: bool = False, device=None, dtype=None,
    ) -> None:  # fmt: skip
        mode = _nonlinearity_mode(nonlinearity)
        super().__init__(mode, input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, device=device, dtype=dtype)  # fmt: skip
        self.nonlinearity = nonlinearity


class LSTM(RNNBase):
    """Long short-term memory: gates i, f, g, o from x_t W_ih^T + b_ih + h_{t-1} W_hh^T +
    b_hh, c_t = f * c_{t-1} + i * g, h_t = o * tanh(c_t) (projected by W_hr when proj_size >
    0). Returns (output, (h_n, c_n)).

    >>> lstm = flow.nn.LSTM(10, 20, batch_first=True, bidirectional=True)
    >>> output, (h_n, c_n) = lstm(flow.randn(3, 5, 10))
    >>> output.shape, h_n.shape
    (tideflow.Size([3, 5, 40]), tideflow.Size([2, 3, 20]))
    """

    def __init__(
        self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
        batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
        proj_size: int = 0, device=None, dtype=None,
    ) -> None:  # fmt: skip
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, proj_size, device=device, dtype=dtype)  # fmt: skip


class GRU(RNNBase):
    """Gated recurrent unit: r and z gates, n = tanh(W_in x_t + b_in + r * (W_hn h_{t-1} +
    b_hn)), h_t = (1 - z) * n + z * h_{t-1}. Returns (output, h_n).

    >>> gru = flow.nn.GRU(10, 20)
    >>> output, h_n = gru(flow.randn(5, 10))  # unbatched (L, H_in)
    >>> output.shape, h_n.shape
    (tideflow.Size([5, 20]), tideflow.Size([1, 20]))
    """

    def __init__(
        self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
        batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
        device=None, dtype=None,
    ) -> None:  # fmt: skip
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, device=device, dtype=dtype)  # fmt: skip


class RNNCellBase(Module):
    """One step of a recurrent layer: weight_ih (gates * hidden, input), weight_hh (gates *
    hidden, hidden), bias_ih, bias_hh, all from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)).

    >>> flow.nn.GRUCell(4, 8).weight_hh.shape
    tideflow.Size([24, 8])
    """

    _mode: str

    def __init__(
        self, input_size: int, hidden_size: int, bias: bool, num_chunks: int, device=None,
        dtype=None,
    ) -> None:  # fmt: skip
        super().__init__()
        _check_size_arg("input_size", input_size)
        _check_size_arg("hidden_size", hidden_size)
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        gates = num_chunks * hidden_size
        self.weight_ih = Parameter(empty((gates, input_size), dtype=dtype, device=device))
        self.weight_hh = Parameter(empty((gates, hidden_size), dtype=dtype, device=device))
        if bias:
            self.bias_ih = Parameter(empty(gates, dtype=dtype, device=device))
            self.bias_hh = Parameter(empty(gates, dtype=dtype, device=device))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        stdv = 1.0 / math.sqrt(self.hidden_size)
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        nonlinearity = getattr(self, "nonlinearity", "tanh")
        if nonlinearity != "tanh":
            s += f", nonlinearity={nonlinearity}"
        return s

    def _step(self, input: Tensor, state: tuple | None, names: tuple[str, ...]) -> tuple:
        """Validates like PyTorch's cells, runs one step, and drops the batch dim again for
        an unbatched (1-D) input."""
        cell = type(self).__name__
        if input.ndim not in (1, 2):
            raise ValueError(f"{cell}: Expected input to be 1D or 2D, got {input.ndim}D instead")
        if state is not None:
            if len(state) != len(names):
                raise TypeError(
                    f"{cell}: expected hx to be {' and '.join(names)}, got {len(state)} tensors"
                )
            for name, s in zip(names, state, strict=True):
                if s.ndim not in (1, 2):
                    raise ValueError(
                        f"{cell}: Expected {name} to be 1D or 2D, got {s.ndim}D instead"
                    )
        batched = input.ndim == 2
        if not batched:
            input = input.unsqueeze(0)
            state = None if state is None else tuple(s.unsqueeze(0) for s in state)
        _check_dtype(cell, input, self.weight_ih)
        if input.shape[1] != self.input_size:
            raise ShapeError(
                f"{cell}: input has inconsistent input_size: got {input.shape[1]} expected "
                f"{self.input_size}"
            )
        batch = input.shape[0]
        if state is None:
            state = tuple(
                zeros(batch, self.hidden_size, dtype=input.dtype, device=input.device)
                for _ in names
            )
        for i, s in enumerate(state):
            if s.shape[0] != batch:
                raise ShapeError(
                    f"{cell}: Input batch size {batch} doesn't match hidden{i} batch size "
                    f"{s.shape[0]}"
                )
            if s.shape[1] != self.hidden_size:
                raise ShapeError(
                    f"{cell}: hidden{i} has inconsistent hidden_size: got {s.shape[1]}, "
                    f"expected {self.hidden_size}"
                )
        weights = _Weights(self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)
        state = _STEPS[self._mode](F.linear(input, self.weight_ih, self.bias_ih), state, weights)
        return state if batched else tuple(s.squeeze(0) for s in state)


class RNNCell(RNNCellBase):
    """h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh) (or relu).

    >>> cell = flow.nn.RNNCell(10, 20)
    >>> cell(flow.randn(3, 10)).shape
    tideflow.Size([3, 20])
    """

    def __init__(
        self, input_size: int, hidden_size: int, bias: bool = True,
        nonlinearity: str = "tanh", device=None, dtype=None,
    ) -> None:  # fmt: skip
        self._mode = _nonlinearity_mode(nonlinearity)
        super().__init__(input_size, hidden_size, bias, 1, device=device, dtype=dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        return self._step(input, None if hx is None else (hx,), ("hidden",))[0]


class LSTMCell(RNNCellBase):
    """One LSTM step: returns (h', c') from input and (h, c) (zeros when None).

    >>> cell = flow.nn.LSTMCell(10, 20)
    >>> h, c = cell(flow.randn(3, 10))
    >>> h.shape, c.shape
    (tideflow.Size([3, 20]), tideflow.Size([3, 20]))
    """

    _mode = "LSTM"

    def __init__(
        self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None
    ) -> None:
        super().__init__(input_size, hidden_size, bias, 4, device=device, dtype=dtype)

    def forward(self, input, hx=None):
        return self._step(input, None if hx is None else tuple(hx), ("hx[0]", "hx[1]"))


class GRUCell(RNNCellBase):
    """One GRU step: h' from input and h (zeros when None).

    >>> cell = flow.nn.GRUCell(10, 20)
    >>> cell(flow.randn(10), flow.zeros(20)).shape
    tideflow.Size([20])
    """

    _mode = "GRU"

    def __init__(
        self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None
    ) -> None:
        super().__init__(input_size, hidden_size, bias, 3, device=device, dtype=dtype)

    def forward(self, input, hx=None):
        return self._step(input, None if hx is None else (hx,), ("hidden",))[0]
