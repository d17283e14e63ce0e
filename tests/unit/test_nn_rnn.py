"""Recurrent layers (RNN, LSTM, GRU and their cells) and the sequence-packing utilities,
against PyTorch as the oracle: same weights and inputs give the same outputs, final states
and gradients of inputs, initial states and every parameter. Plus parameter names and
initialization, dropout between layers, printing and the user-facing errors."""

import itertools
import math
import warnings

import numpy as np
import pytest

import tideflow as flow
from tideflow.framework.errors import ShapeError, TideflowError
from tideflow.nn.modules import rnn
from tideflow.nn.modules.rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNCell
from tideflow.nn.utils import rnn as packing

from .test_nn_layers import run_doctests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

T_STEPS, BATCH, IN, HIDDEN = 5, 3, 4, 8
ATOL = 1e-5


def _pair(kind: str, *args, **kwargs):
    """The tideflow and torch versions of one layer, with torch's weights in both."""
    ours = {"RNN": RNN, "LSTM": LSTM, "GRU": GRU, "RNNCell": RNNCell, "LSTMCell": LSTMCell,
            "GRUCell": GRUCell}[kind](*args, **kwargs)  # fmt: skip
    theirs = getattr(torch.nn, kind)(*args, **kwargs)
    ours.load_state_dict(
        {k: flow.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()}
    )
    return ours, theirs


def _leaf(rng, *shape):
    """The same float32 values as a tideflow and a torch leaf that require grad."""
    values = rng.standard_normal(shape).astype(np.float32)
    return flow.tensor(values, requires_grad=True), torch.tensor(values, requires_grad=True)


def _flat(out) -> list:
    """Every tensor of a (possibly nested) layer result, PackedSequences by their data."""
    if isinstance(out, (packing.PackedSequence, torch.nn.utils.rnn.PackedSequence)):
        return [out.data]
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _flat(o)]
    return [out]


def _assert_close(ours, theirs, atol=ATOL) -> None:
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), atol=atol)


def _check_against_torch(ours, theirs, our_inputs, their_inputs, call) -> None:
    """Forward values, then gradients of a loss touching every output, for the inputs and
    every parameter."""
    our_out, their_out = _flat(call(ours, *our_inputs)), _flat(call(theirs, *their_inputs))
    assert len(our_out) == len(their_out)
    for a, b in zip(our_out, their_out, strict=True):
        assert tuple(a.shape) == tuple(b.shape)
        _assert_close(a, b)
    # NOTE: weight each output differently so that swapped or mis-ordered outputs show up
    sum(((o * (i + 1)) ** 2).sum() for i, o in enumerate(our_out)).backward()
    sum(((o * (i + 1)) ** 2).sum() for i, o in enumerate(their_out)).backward()
    for a, b in zip(our_inputs, their_inputs, strict=True):
        if isinstance(b, torch.Tensor) and b.requires_grad:
            _assert_close(a.grad, b.grad)
    for (name, p), (their_name, q) in zip(
        ours.named_parameters(), theirs.named_parameters(), strict=True
    ):
        assert name == their_name
        _assert_close(p.grad, q.grad)


def _initial_state(rng, kind: str, layers: int, batch: tuple, proj_size: int = 0):
    h_size = proj_size or HIDDEN
    h, th = _leaf(rng, layers, *batch, h_size)
    if kind != "LSTM":
        return h, th
    c, tc = _leaf(rng, layers, *batch, HIDDEN)
    return (h, c), (th, tc)


def _as_leaves(state) -> list:
    return list(state) if isinstance(state, tuple) else [state]


# -- RNN / LSTM / GRU against torch ---------------------------------------------------------
LAYERS = [("RNN", {}), ("RNN", {"nonlinearity": "relu"}), ("LSTM", {}), ("GRU", {})]


@pytest.mark.parametrize(("kind", "extra"), LAYERS, ids=["tanh", "relu", "lstm", "gru"])
@pytest.mark.parametrize(
    ("num_layers", "batch_first", "bidirectional", "with_state"),
    # every option both ways, and each pair of options together in some case
    [
        (1, False, False, False),
        (1, True, False, True),
        (1, False, True, True),
        (2, False, True, False),
        (2, True, True, True),
        (2, False, False, True),
        (2, True, False, False),
    ],
)
def test_recurrent_layers_match_torch(kind, extra, num_layers, batch_first, bidirectional,
                                      with_state):  # fmt: skip
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    ours, theirs = _pair(kind, IN, HIDDEN, num_layers=num_layers, batch_first=batch_first,
                         bidirectional=bidirectional, **extra)  # fmt: skip
    x, tx = _leaf(rng, *((BATCH, T_STEPS) if batch_first else (T_STEPS, BATCH)), IN)
    our_inputs, their_inputs = [x], [tx]
    if with_state:
        layers = num_layers * (2 if bidirectional else 1)
        state, their_state = _initial_state(rng, kind, layers, (BATCH,))
        our_inputs.append(state)
        their_inputs.append(their_state)

    def call(module, x, *state):
        return module(x, *state)

    _check_against_torch(ours, theirs, our_inputs, their_inputs, call)
    if with_state:  # the gradients of the initial states
        for a, b in zip(_as_leaves(state), _as_leaves(their_state), strict=True):
            _assert_close(a.grad, b.grad)


@pytest.mark.parametrize(("kind", "extra"), LAYERS, ids=["tanh", "relu", "lstm", "gru"])
@pytest.mark.parametrize("with_state", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
def test_unbatched_input_matches_torch(kind, extra, with_state, batch_first):
    torch.manual_seed(1)
    rng = np.random.default_rng(1)
    ours, theirs = _pair(kind, IN, HIDDEN, num_layers=2, bidirectional=True,
                         batch_first=batch_first, **extra)  # fmt: skip
    x, tx = _leaf(rng, T_STEPS, IN)
    args, their_args = [x], [tx]
    if with_state:
        state, their_state = _initial_state(rng, kind, 4, ())
        args.append(state)
        their_args.append(their_state)
    out, _ = ours(*args)
    assert out.shape == (T_STEPS, 2 * HIDDEN)
    _check_against_torch(ours, theirs, args, their_args, lambda m, *a: m(*a))


@pytest.mark.parametrize("bidirectional", [False, True])
def test_lstm_with_projections_matches_torch(bidirectional):
    torch.manual_seed(2)
    rng = np.random.default_rng(2)
    ours, theirs = _pair("LSTM", IN, HIDDEN, num_layers=2, proj_size=3,
                         bidirectional=bidirectional)  # fmt: skip
    layers = 2 * (2 if bidirectional else 1)
    x, tx = _leaf(rng, T_STEPS, BATCH, IN)
    state, their_state = _initial_state(rng, "LSTM", layers, (BATCH,), proj_size=3)
    _, (h, c) = ours(x, state)
    assert h.shape == (layers, BATCH, 3) and c.shape == (layers, BATCH, HIDDEN)
    with warnings.catch_warnings():  # torch's own note (once per process) on its kernel choice
        warnings.filterwarnings("ignore", "LSTM with projections is not supported with oneDNN")
        _check_against_torch(ours, theirs, [x, state], [tx, their_state], lambda m, *a: m(*a))
    # zeros as the initial state when none is given, with the projected size for h
    _, (h0_free, _) = ours(x)
    assert h0_free.shape == (layers, BATCH, 3)


@pytest.mark.parametrize("kind", ["RNN", "LSTM", "GRU"])
def test_layers_without_bias_match_torch(kind):
    torch.manual_seed(3)
    ours, theirs = _pair(kind, IN, HIDDEN, num_layers=2, bias=False)
    assert all("bias" not in name for name, _ in ours.named_parameters())
    x, tx = _leaf(np.random.default_rng(3), T_STEPS, BATCH, IN)
    _check_against_torch(ours, theirs, [x], [tx], lambda m, x: m(x))


def test_float64_layers_match_torch_closely():
    torch.manual_seed(4)
    ours, theirs = _pair("GRU", IN, HIDDEN, num_layers=2, bidirectional=True)
    ours.double()
    theirs.double()
    values = np.random.default_rng(4).standard_normal((T_STEPS, BATCH, IN))
    out, h = ours(flow.tensor(values))
    their_out, their_h = theirs(torch.tensor(values))
    assert out.dtype == flow.float64
    np.testing.assert_allclose(out.detach().numpy(), their_out.detach().numpy(), atol=1e-12)
    np.testing.assert_allclose(h.detach().numpy(), their_h.detach().numpy(), atol=1e-12)


def test_empty_batch_gives_empty_outputs():
    out, (h, c) = LSTM(IN, HIDDEN, num_layers=2)(flow.randn(T_STEPS, 0, IN))
    assert out.shape == (T_STEPS, 0, HIDDEN) and h.shape == c.shape == (2, 0, HIDDEN)


# -- packed sequences -----------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["RNN", "LSTM", "GRU"])
@pytest.mark.parametrize("with_state", [False, True])
def test_packed_sequences_match_torch(kind, with_state):
    torch.manual_seed(5)
    rng = np.random.default_rng(5)
    ours, theirs = _pair(kind, IN, HIDDEN, num_layers=2, bidirectional=True)
    lengths = [2, 5, 1, 3]
    x, tx = _leaf(rng, T_STEPS, len(lengths), IN)
    state, their_state = _initial_state(rng, kind, 4, (len(lengths),))

    def call(module, x, *state):
        pack = packing.pack_padded_sequence if module is ours else (
            torch.nn.utils.rnn.pack_padded_sequence)  # fmt: skip
        return module(pack(x, lengths, enforce_sorted=False), *state)

    args = [x, state] if with_state else [x]
    their_args = [tx, their_state] if with_state else [tx]
    _check_against_torch(ours, theirs, args, their_args, call)
    out, _ = call(ours, *args)
    assert isinstance(out, packing.PackedSequence)
    assert out.batch_sizes.tolist() == [4, 3, 2, 1, 1]
    if with_state:
        for a, b in zip(_as_leaves(state), _as_leaves(their_state), strict=True):
            _assert_close(a.grad, b.grad)


def test_packed_sequence_equals_running_each_sequence_alone():
    """A packed batch gives each sequence the result it gets on its own, without padding."""
    gru = GRU(IN, HIDDEN, bidirectional=True)
    sequences = [flow.randn(n, IN) for n in (3, 5, 1)]
    out, h = gru(packing.pack_sequence(sequences, enforce_sorted=False))
    unpacked = packing.unpack_sequence(out)
    for i, seq in enumerate(sequences):
        alone_out, alone_h = gru(seq)
        np.testing.assert_allclose(unpacked[i].detach().numpy(), alone_out.detach().numpy(),
                                   atol=1e-6)  # fmt: skip
        np.testing.assert_allclose(h[:, i].detach().numpy(), alone_h.detach().numpy(), atol=1e-6)


# -- cells ----------------------------------------------------------------------------------
CELLS = [("RNNCell", {}), ("RNNCell", {"nonlinearity": "relu"}), ("LSTMCell", {}),
         ("GRUCell", {}), ("GRUCell", {"bias": False})]  # fmt: skip


@pytest.mark.parametrize(
    ("kind", "extra"), CELLS, ids=["tanh", "relu", "lstm", "gru", "gru-nobias"]
)
@pytest.mark.parametrize(
    ("batched", "with_state"), list(itertools.product((True, False), repeat=2))
)
def test_cells_match_torch(kind, extra, batched, with_state):
    torch.manual_seed(6)
    rng = np.random.default_rng(6)
    ours, theirs = _pair(kind, IN, HIDDEN, **extra)
    batch = (BATCH,) if batched else ()
    x, tx = _leaf(rng, *batch, IN)
    args, their_args = [x], [tx]
    if with_state:
        h, th = _leaf(rng, *batch, HIDDEN)
        if kind == "LSTMCell":
            c, tc = _leaf(rng, *batch, HIDDEN)
            h, th = (h, c), (th, tc)
        args.append(h)
        their_args.append(th)
    _check_against_torch(ours, theirs, args, their_args, lambda m, *a: m(*a))
    for a, b in zip(_flat(args[1:]), _flat(their_args[1:]), strict=True):
        _assert_close(a.grad, b.grad)


def test_cell_steps_equal_the_layer():
    """Running LSTMCell step by step gives the single-layer LSTM's outputs."""
    lstm = LSTM(IN, HIDDEN)
    cell = LSTMCell(IN, HIDDEN)
    cell.load_state_dict({k[:-3]: v for k, v in lstm.state_dict().items()})
    x = flow.randn(T_STEPS, BATCH, IN)
    out, (_, c_n) = lstm(x)
    state = None
    for t in range(T_STEPS):
        state = cell(x[t], state)
        np.testing.assert_allclose(state[0].detach().numpy(), out[t].detach().numpy(), atol=1e-6)
    np.testing.assert_allclose(state[1].detach().numpy(), c_n[0].detach().numpy(), atol=1e-6)


# -- parameters, initialization, printing ---------------------------------------------------
@pytest.mark.parametrize(
    ("kind", "kwargs"),
    [
        ("RNN", {"num_layers": 3, "bidirectional": True}),
        ("LSTM", {"num_layers": 2, "proj_size": 3, "bidirectional": True}),
        ("LSTM", {"num_layers": 2, "proj_size": 3, "bias": False}),
        ("GRU", {"num_layers": 2, "bias": False, "bidirectional": True}),
        ("RNNCell", {"bias": False}),
        ("LSTMCell", {}),
        ("GRUCell", {}),
    ],
)
def test_state_dict_keys_and_shapes_equal_torch(kind, kwargs):
    ours, theirs = _pair(kind, IN, HIDDEN, **kwargs)
    assert [(k, tuple(v.shape)) for k, v in ours.state_dict().items()] == [
        (k, tuple(v.shape)) for k, v in theirs.state_dict().items()
    ]
    assert repr(ours) == repr(theirs)


def test_all_weights_groups_parameters_by_layer_and_direction():
    lstm = LSTM(IN, HIDDEN, num_layers=2, bidirectional=True)
    groups = lstm.all_weights
    assert len(groups) == 4
    assert groups[1][0] is lstm.weight_ih_l0_reverse
    assert groups[3][3] is lstm.bias_hh_l1_reverse


@pytest.mark.parametrize("kind", ["RNN", "LSTM", "GRU", "RNNCell", "LSTMCell", "GRUCell"])
def test_parameters_start_uniform_within_one_over_sqrt_hidden(kind):
    hidden = 16
    module = {"RNN": RNN, "LSTM": LSTM, "GRU": GRU, "RNNCell": RNNCell, "LSTMCell": LSTMCell,
              "GRUCell": GRUCell}[kind](IN, hidden)  # fmt: skip
    values = np.concatenate([p.detach().numpy().ravel() for p in module.parameters()])
    bound = 1 / math.sqrt(hidden)
    assert np.abs(values).max() <= bound
    # U(-b, b): the spread reaches near both ends and the mean is near 0
    assert values.min() < -0.9 * bound and values.max() > 0.9 * bound
    assert abs(values.mean()) < 0.1 * bound


def test_init_follows_the_global_seed():
    flow.manual_seed(7)
    first = GRU(IN, HIDDEN).weight_hh_l0.detach().numpy()
    flow.manual_seed(7)
    np.testing.assert_array_equal(GRU(IN, HIDDEN).weight_hh_l0.detach().numpy(), first)


def test_dtype_argument_creates_float64_parameters():
    lstm = LSTM(IN, HIDDEN, dtype=flow.float64)
    assert all(p.dtype == flow.float64 for p in lstm.parameters())
    out, _ = lstm(flow.randn(T_STEPS, BATCH, IN, dtype=flow.float64))
    assert out.dtype == flow.float64


# -- dropout between layers -----------------------------------------------------------------
def test_dropout_applies_between_layers_in_training_only():
    lstm = LSTM(IN, HIDDEN, num_layers=3, dropout=0.5)
    x = flow.randn(T_STEPS, BATCH, IN)
    first, second = lstm(x)[0], lstm(x)[0]
    assert not np.allclose(first.detach().numpy(), second.detach().numpy())
    lstm.eval()
    first, second = lstm(x)[0], lstm(x)[0]
    np.testing.assert_array_equal(first.detach().numpy(), second.detach().numpy())


def test_dropout_matches_torch_in_eval_mode():
    torch.manual_seed(8)
    ours, theirs = _pair("GRU", IN, HIDDEN, num_layers=2, dropout=0.3)
    ours.eval()
    theirs.eval()
    x, tx = _leaf(np.random.default_rng(8), T_STEPS, BATCH, IN)
    _check_against_torch(ours, theirs, [x], [tx], lambda m, x: m(x))


def test_dropout_never_touches_the_last_layer_output():
    """With one layer there is nothing between layers: training equals eval (PyTorch warns)."""
    with pytest.warns(UserWarning, match="non-zero dropout expects num_layers greater than 1"):
        rnn = RNN(IN, HIDDEN, dropout=0.5)
    x = flow.randn(T_STEPS, BATCH, IN)
    trained = rnn(x)[0].detach().numpy()
    np.testing.assert_array_equal(trained, rnn.eval()(x)[0].detach().numpy())


# -- errors ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("build", "error", "message"),
    [
        (lambda: GRU(IN, HIDDEN, num_layers=2, dropout=1.5), ValueError,
         r"dropout should be a number in range \[0, 1\].*got 1.5"),
        (lambda: GRU(IN, HIDDEN, dropout=True), ValueError, "dropout should be a number"),
        (lambda: GRU(IN, 0), ValueError, "hidden_size must be greater than zero"),
        (lambda: GRU(IN, 8.0), TypeError, "hidden_size should be of type int, got: float"),
        (lambda: GRU(0, HIDDEN), ValueError, "input_size must be greater than zero"),
        (lambda: GRU(IN, HIDDEN, num_layers=0), ValueError, "num_layers must be greater than zero"),
        (lambda: GRU(IN, HIDDEN, bias=1), TypeError, "bias should be of type bool, got: int"),
        (lambda: LSTM(IN, HIDDEN, proj_size=8), ValueError,
         "proj_size has to be smaller than hidden_size, got proj_size=8 and hidden_size=8"),
        (lambda: LSTM(IN, HIDDEN, proj_size=-1), ValueError, "proj_size should be a positive"),
        (lambda: RNN(IN, HIDDEN, nonlinearity="gelu"), ValueError,
         "Unknown nonlinearity 'gelu'. Select from 'tanh' or 'relu'."),
        (lambda: RNNCell(IN, HIDDEN, nonlinearity="sigmoid"), ValueError,
         "Unknown nonlinearity 'sigmoid'"),
    ],
)  # fmt: skip
def test_constructor_errors(build, error, message):
    with pytest.raises(error, match=message):
        build()


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda m: m(flow.randn(2, 3, 4, IN)), ValueError,
         "GRU: Expected input to be 2D or 3D, got 4D tensor instead"),
        (lambda m: m(flow.randn(T_STEPS, BATCH, 5)), ShapeError,
         r"GRU: input.size\(-1\) must be equal to input_size. Expected 4, got 5 \(input "
         r"shape \[5, 3, 5\]\)"),
        (lambda m: m(flow.randn(T_STEPS, 5)), ShapeError,
         r"GRU: input.size\(-1\) .* Expected 4, got 5 \(input shape \[5, 5\]\)"),
        (lambda m: m(flow.randn(T_STEPS, BATCH, IN, dtype=flow.float64)), ValueError,
         r"GRU: input dtype \(tideflow.float64\) does not match weight dtype "
         r"\(tideflow.float32\)"),
        (lambda m: m(flow.randn(T_STEPS, BATCH, IN), flow.zeros(2, 2, HIDDEN)), ShapeError,
         r"GRU: Expected hidden size \(2, 3, 8\), got \[2, 2, 8\]"),
        # an unbatched input's state is checked as passed, without the batch dim
        (lambda m: m(flow.randn(T_STEPS, IN), flow.zeros(1, HIDDEN)), ShapeError,
         r"GRU: Expected hidden size \(2, 8\), got \[1, 8\]"),
        (lambda m: m(flow.randn(T_STEPS, BATCH, IN), flow.zeros(BATCH, HIDDEN)), ShapeError,
         "For batched 3-D input, hx should also be 3-D but got 2-D tensor"),
        (lambda m: m(flow.randn(T_STEPS, IN), flow.zeros(2, 1, HIDDEN)), ShapeError,
         "For unbatched 2-D input, hx should also be 2-D but got 3-D tensor"),
        (lambda m: m(flow.randn(0, BATCH, IN)), ShapeError,
         r"GRU: Expected sequence length to be larger than 0, got input of shape \[0, 3, 4\]"),
    ],
)  # fmt: skip
def test_forward_errors(call, error, message):
    with pytest.raises(error, match=message):
        call(GRU(IN, HIDDEN, num_layers=2))


def test_lstm_state_errors():
    lstm = LSTM(IN, HIDDEN)
    x = flow.randn(T_STEPS, BATCH, IN)
    with pytest.raises(ShapeError, match=r"LSTM: Expected hidden\[1\] size \(1, 3, 8\), got "
                                         r"\[1, 3, 7\]"):  # fmt: skip
        lstm(x, (flow.zeros(1, BATCH, HIDDEN), flow.zeros(1, BATCH, 7)))
    with pytest.raises(ShapeError, match=r"LSTM: For batched 3-D input, hx and cx should also "
                                         r"be 3-D but got \(3-D, 2-D\)"):  # fmt: skip
        lstm(x, (flow.zeros(1, BATCH, HIDDEN), flow.zeros(BATCH, HIDDEN)))
    with pytest.raises(TypeError, match=r"LSTM: expected hx to be a tuple \(h_0, c_0\)"):
        lstm(x, flow.zeros(1, BATCH, HIDDEN))


def test_state_errors_name_the_batch_as_passed():
    """batch_first and packed inputs: the expected state size uses the batch the user gave."""
    lstm = LSTM(IN, HIDDEN, batch_first=True)
    state = (flow.zeros(1, 2, HIDDEN), flow.zeros(1, 2, HIDDEN))
    with pytest.raises(ShapeError, match=r"LSTM: Expected hidden\[0\] size \(1, 3, 8\), got "
                                         r"\[1, 2, 8\]"):  # fmt: skip
        lstm(flow.randn(BATCH, T_STEPS, IN), state)
    packed = packing.pack_sequence([flow.randn(3, IN), flow.randn(2, IN), flow.randn(1, IN)])
    with pytest.raises(ShapeError, match=r"LSTM: Expected hidden\[0\] size \(1, 3, 8\)"):
        lstm(packed, state)
    with pytest.raises(ShapeError, match=r"GRU: input.size\(-1\) .* \(input shape \[6, 4\]\)"):
        GRU(5, HIDDEN)(packed)


@pytest.mark.parametrize(
    ("cell", "args", "error", "message"),
    [
        (GRUCell, (flow.randn(1, 2, IN),), ValueError,
         "GRUCell: Expected input to be 1D or 2D, got 3D instead"),
        (RNNCell, (flow.randn(2, IN), flow.zeros(1, 2, HIDDEN)), ValueError,
         "RNNCell: Expected hidden to be 1D or 2D, got 3D instead"),
        (LSTMCell, (flow.randn(2, IN), (flow.zeros(2, HIDDEN), flow.zeros(1, 2, HIDDEN))),
         ValueError, r"LSTMCell: Expected hx\[1\] to be 1D or 2D, got 3D instead"),
        (GRUCell, (flow.randn(2, 5),), ShapeError,
         "GRUCell: input has inconsistent input_size: got 5 expected 4"),
        (GRUCell, (flow.randn(2, IN, dtype=flow.float64),), ValueError,
         r"GRUCell: input dtype \(tideflow.float64\) does not match weight dtype"),
        (LSTMCell, (flow.randn(3, IN), (flow.zeros(2, HIDDEN), flow.zeros(3, HIDDEN))),
         ShapeError, "LSTMCell: Input batch size 3 doesn't match hidden0 batch size 2"),
        (LSTMCell, (flow.randn(3, IN), (flow.zeros(3, HIDDEN), flow.zeros(3, 7))),
         ShapeError, "LSTMCell: hidden1 has inconsistent hidden_size: got 7, expected 8"),
    ],
)  # fmt: skip
def test_cell_errors(cell, args, error, message):
    with pytest.raises(error, match=message):
        cell(IN, HIDDEN)(*args)


# -- packing utilities ----------------------------------------------------------------------
def _torch_rnn_utils():
    return torch.nn.utils.rnn


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("enforce_sorted", [False, True])
def test_pack_and_pad_match_torch(batch_first, enforce_sorted):
    values = np.random.default_rng(9).standard_normal((6, 4, 3)).astype(np.float32)
    if batch_first:
        values = values.transpose(1, 0, 2).copy()
    lengths = [6, 4, 3, 1] if enforce_sorted else [3, 6, 1, 4]
    ours = packing.pack_padded_sequence(flow.tensor(values), lengths, batch_first,
                                        enforce_sorted)  # fmt: skip
    theirs = _torch_rnn_utils().pack_padded_sequence(torch.tensor(values), lengths,
                                                     batch_first, enforce_sorted)  # fmt: skip
    np.testing.assert_array_equal(ours.data.numpy(), theirs.data.numpy())
    assert ours.batch_sizes.tolist() == theirs.batch_sizes.tolist()
    assert ours.batch_sizes.dtype == flow.int64
    for mine, torchs in ((ours.sorted_indices, theirs.sorted_indices),
                         (ours.unsorted_indices, theirs.unsorted_indices)):  # fmt: skip
        assert (mine is None) == (torchs is None)
        if mine is not None:
            assert mine.tolist() == torchs.tolist()
    for total_length in (None, 8):
        padded, out_lengths = packing.pad_packed_sequence(ours, batch_first, -1.0, total_length)
        their_padded, their_lengths = _torch_rnn_utils().pad_packed_sequence(
            theirs, batch_first, -1.0, total_length
        )
        np.testing.assert_array_equal(padded.numpy(), their_padded.numpy())
        assert out_lengths.tolist() == their_lengths.tolist() == lengths


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("padding_side", ["right", "left"])
def test_pad_sequence_matches_torch(batch_first, padding_side):
    rng = np.random.default_rng(10)
    arrays = [rng.standard_normal((n, 2)).astype(np.float32) for n in (3, 1, 4)]
    ours = packing.pad_sequence([flow.tensor(a) for a in arrays], batch_first, 9.0, padding_side)
    theirs = _torch_rnn_utils().pad_sequence([torch.tensor(a) for a in arrays], batch_first, 9.0,
                                             padding_side)  # fmt: skip
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_gradients_flow_through_packing_round_trips():
    x = flow.randn(5, 3, 2, requires_grad=True)
    lengths = [2, 5, 3]
    packed = packing.pack_padded_sequence(x, lengths, enforce_sorted=False)
    padded, _ = packing.pad_packed_sequence(packed, padding_value=7.0)
    padded.sum().backward()
    # every real position gets gradient 1, padding gets none
    expected = (np.arange(5)[:, None] < np.array(lengths)[None, :]).astype(np.float32)
    np.testing.assert_array_equal(x.grad.numpy(), np.repeat(expected[:, :, None], 2, axis=2))
    sequences = [flow.randn(n, 2, requires_grad=True) for n in (3, 1)]
    (packing.pad_sequence(sequences, padding_value=5.0) * 2).sum().backward()
    for seq in sequences:
        np.testing.assert_array_equal(seq.grad.numpy(), np.full(tuple(seq.shape), 2.0))


def test_sequence_round_trips():
    sequences = [flow.randn(n, 3) for n in (2, 4, 1)]
    for unpacked in (
        packing.unpack_sequence(packing.pack_sequence(sequences, enforce_sorted=False)),
        packing.unpad_sequence(packing.pad_sequence(sequences), flow.tensor([2, 4, 1])),
        packing.unpad_sequence(packing.pad_sequence(sequences, True), [2, 4, 1], batch_first=True),
    ):
        for a, b in zip(unpacked, sequences, strict=True):
            np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_packed_sequence_conversions_and_permutations():
    packed = packing.pack_sequence([flow.ones(1, 2), flow.ones(3, 2)], enforce_sorted=False)
    double = packed.double()
    assert double.data.dtype == flow.float64 and double.batch_sizes is packed.batch_sizes
    assert packed.to(flow.float32) is packed
    assert packing.invert_permutation(flow.tensor([2, 0, 1])).tolist() == [1, 2, 0]
    assert packing.invert_permutation(None) is None
    data, batch_sizes = packed.data, packed.batch_sizes
    rebuilt = packing.PackedSequence((data, batch_sizes), None, packed.sorted_indices)
    assert rebuilt.unsorted_indices.tolist() == packed.unsorted_indices.tolist()


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: packing.pack_padded_sequence(flow.ones(4, 3, 2), [3, 4, 1]), TideflowError,
         "`lengths` array must be sorted in decreasing order"),
        (lambda: packing.pack_padded_sequence(flow.ones(4, 3, 2), [4, 3]), ShapeError,
         r"Expected `len\(lengths\)` to be equal to batch_size, but got 2 \(batch_size=3\)"),
        (lambda: packing.pack_padded_sequence(flow.ones(4, 3, 2), [4, 3, 0]), TideflowError,
         "Length of all samples has to be greater than 0"),
        (lambda: packing.pack_padded_sequence(flow.ones(4, 3, 2), [5, 3, 1]), ShapeError,
         "a length of 5 exceeds the padded sequence length 4"),
        (lambda: packing.pack_padded_sequence(flow.ones(4, 3, 2), [[4, 3, 1]]), ShapeError,
         "'lengths' should be a 1-D sequence of integers, got 2-D"),
        (lambda: packing.pad_packed_sequence(packing.pack_sequence([flow.ones(3)]),
                                             total_length=2), ValueError,
         "Expected total_length to be at least the length of the longest sequence in input, "
         "but got total_length=2 and max sequence length being 3"),
        (lambda: packing.pad_sequence([]), TideflowError, "received an empty list of sequences"),
        (lambda: packing.pad_sequence([flow.ones(2)], padding_side="up"), ValueError,
         "Expected padding_side to be one of left or right, but got up."),
        (lambda: packing.pad_sequence([flow.ones(2, 3), flow.ones(3, 4)]), ShapeError,
         r"every sequence must have shape \(L, 3\) like sequence 0, got shape \[3, 4\] for "
         "sequence 1"),
        (lambda: packing.pad_sequence(3), TideflowError,
         "Expected iterable for input sequences, but got arg of type: int"),
    ],
)  # fmt: skip
def test_packing_errors(call, error, message):
    with pytest.raises(error, match=message):
        call()


# -- documentation --------------------------------------------------------------------------
def expose_public_names(monkeypatch, module, namespace) -> None:
    """Make `module`'s public names reachable where the docstrings call them (flow.nn.LSTM,
    flow.nn.utils.rnn.pack_sequence), whether or not the package re-exports them yet."""
    for name in module.__all__:
        monkeypatch.setattr(namespace, name, getattr(module, name), raising=False)


@pytest.mark.parametrize("module", [rnn, packing])
def test_docstring_examples_run(monkeypatch, module):
    expose_public_names(monkeypatch, rnn, flow.nn)
    expose_public_names(monkeypatch, packing, flow.nn.utils.rnn)
    run_doctests(module)
