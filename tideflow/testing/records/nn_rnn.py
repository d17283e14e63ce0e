"""Records of `rnn_sequence`, one direction of one recurrent layer as one op (what nn.RNN,
LSTM and GRU run without gradients), against PyTorch's cells stepped over the sequence."""

from functools import partial

from tideflow.ops.nn.rnn import GATES, rnn_sequence

from ..opinfo import FLOATS, OpInfo, Sample, make_array

_CELLS = {
    "RNN_TANH": "rnn_tanh_cell",
    "RNN_RELU": "rnn_relu_cell",
    "LSTM": "lstm_cell",
    "GRU": "gru_cell",
}


def _samples(mode: str):
    def build(rng, dtype):
        def draw(*shape):
            return make_array(rng, shape, dtype, -1.0, 1.0)

        hidden, size = 3, 5
        rows = GATES[mode] * hidden
        c0 = draw(2, hidden) if mode == "LSTM" else None
        weights = (draw(rows, size), draw(rows, hidden))
        biases = (draw(rows), draw(rows))
        return [
            Sample((draw(4, 2, size), draw(2, hidden), c0, *weights, *biases), {}),
            Sample((draw(4, 2, size), draw(2, hidden), c0, *weights, *biases), {"reverse": True}),
            Sample(
                (draw(1, 3, size), draw(3, hidden), c0 if c0 is None else draw(3, hidden), *weights)
            ),
        ]

    return build


def _torch_sequence(mode: str, torch, x, h0, c0, w_ih, w_hh, b_ih=None, b_hh=None, *,
                    reverse=False):  # fmt: skip
    cell = getattr(torch, _CELLS[mode])
    h, c = h0, c0
    outputs = [None] * len(x)
    for t in reversed(range(len(x))) if reverse else range(len(x)):
        if mode == "LSTM":
            h, c = cell(x[t], (h, c), w_ih, w_hh, b_ih, b_hh)
        else:
            h = cell(x[t], h, w_ih, w_hh, b_ih, b_hh)
        outputs[t] = h
    y = torch.stack(outputs)
    return (y, h, c) if mode == "LSTM" else (y, h)


RECORDS = [
    OpInfo(
        "rnn_sequence",
        _samples(mode),
        op=partial(rnn_sequence, mode),
        torch=partial(_torch_sequence, mode),
        variant=mode.lower(),
        dtypes=FLOATS,
        grad=False,  # training differentiates the step ops (nn/modules/rnn.py)
    )
    for mode in GATES
]
