"""Variable-length sequences for the recurrent layers (PyTorch's `nn.utils.rnn`).

A `PackedSequence` stores a batch of sequences of different lengths without padding, time
step by time step: `data` holds, for t = 0, 1, ..., the time-t elements of every sequence
still running (longest first), and `batch_sizes[t]` says how many there are. RNN, LSTM and
GRU accept one and skip the padding entirely.

Every move between padded and packed layouts is one `index_select` with an index computed
from the lengths, so gradients flow back to the padded (or listed) inputs.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

import numpy as np

from ...framework import dtype as dtypes
from ...framework.errors import ShapeError, TideflowError
from ...framework.tensor import Tensor
from ...ops.creation import full, tensor
from ...ops.shape import cat

__all__ = [
    "PackedSequence",
    "invert_permutation",
    "pack_padded_sequence",
    "pad_packed_sequence",
    "pad_sequence",
    "unpad_sequence",
    "pack_sequence",
    "unpack_sequence",
]


class _PackedFields(NamedTuple):
    data: Tensor
    batch_sizes: Tensor
    sorted_indices: Tensor | None
    unsorted_indices: Tensor | None


class PackedSequence(_PackedFields):
    """A packed batch of variable-length sequences: `data` (sum of lengths, *), the int64
    `batch_sizes` per time step, and the permutations (`sorted_indices`, `unsorted_indices`)
    between the caller's batch order and the longest-first order of `data`, or None.

    Build one with `pack_padded_sequence` or `pack_sequence`, not by hand.

    >>> seqs = [flow.ones(3, 2), flow.ones(1, 2)]
    >>> flow.nn.utils.rnn.pack_sequence(seqs).batch_sizes
    tensor([2, 1, 1])
    """

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        if batch_sizes is None:  # PackedSequence((data, batch_sizes), sorted_indices)
            if not (isinstance(data, (list, tuple)) and len(data) == 2):
                raise TypeError(
                    "PackedSequence: expected data and batch_sizes, or a (data, batch_sizes) "
                    f"pair, got {type(data).__name__}"
                )
            data, batch_sizes = data
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def to(self, *args, **kwargs) -> PackedSequence:
        """Converts `data` (dtype and/or device); the indices follow its device only."""
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self

        def follow(index: Tensor | None) -> Tensor | None:
            return None if index is None else index.to(data.device)

        return type(self)(
            data, self.batch_sizes, follow(self.sorted_indices), follow(self.unsorted_indices)
        )

    def cpu(self) -> PackedSequence:
        return self.to("cpu")

    def double(self) -> PackedSequence:
        return self.to(dtype=dtypes.float64)

    def float(self) -> PackedSequence:
        return self.to(dtype=dtypes.float32)

    def half(self) -> PackedSequence:
        return self.to(dtype=dtypes.float16)

    def long(self) -> PackedSequence:
        return self.to(dtype=dtypes.int64)

    def int(self) -> PackedSequence:
        return self.to(dtype=dtypes.int32)

    def short(self) -> PackedSequence:
        return self.to(dtype=dtypes.int16)

    def char(self) -> PackedSequence:
        return self.to(dtype=dtypes.int8)

    def byte(self) -> PackedSequence:
        return self.to(dtype=dtypes.uint8)

    @property
    def is_cuda(self) -> bool:
        return self.data.is_cuda


def invert_permutation(permutation: Tensor | None) -> Tensor | None:
    """The permutation that undoes `permutation` (None stays None).

    >>> flow.nn.utils.rnn.invert_permutation(flow.tensor([2, 0, 1]))
    tensor([1, 2, 0])
    """
    if permutation is None:
        return None
    return permutation.argsort()


def _index(array: np.ndarray) -> Tensor:
    return tensor(array.astype(np.int64, copy=False))


def _lengths_array(op: str, lengths) -> np.ndarray:
    array = np.asarray(lengths.numpy() if isinstance(lengths, Tensor) else lengths)
    if array.ndim != 1 or not (array.size == 0 or np.issubdtype(array.dtype, np.integer)):
        raise ShapeError(
            f"{op}: 'lengths' should be a 1-D sequence of integers, got "
            f"{array.ndim}-D {array.dtype} values"
        )
    return array.astype(np.int64)


def _steps_mask(lengths: np.ndarray, steps: int) -> np.ndarray:
    """(steps, batch) booleans: which sequences are running at each time step."""
    return np.arange(steps)[:, None] < lengths[None, :]


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):
    """Packs a padded batch (T, B, *) (or (B, T, *) with `batch_first`) of sequences with the
    given `lengths`. With `enforce_sorted` the lengths must be decreasing; otherwise the batch
    is sorted here and the permutation kept to undo it later.

    >>> x = flow.randn(4, 3, 2)
    >>> packed = flow.nn.utils.rnn.pack_padded_sequence(x, [2, 4, 1], enforce_sorted=False)
    >>> packed.data.shape, packed.batch_sizes
    (tideflow.Size([7, 2]), tensor([3, 2, 1, 1]))
    """
    lengths = _lengths_array("pack_padded_sequence", lengths)
    batch_dim = 0 if batch_first else 1
    if input.ndim < 2:
        raise ShapeError(
            "pack_padded_sequence: expected a padded input with time and batch dims, got "
            f"shape {list(input.shape)}"
        )
    if len(lengths) != input.shape[batch_dim]:
        raise ShapeError(
            f"Expected `len(lengths)` to be equal to batch_size, but got {len(lengths)} "
            f"(batch_size={input.shape[batch_dim]})"
        )
    sorted_indices = None
    if enforce_sorted:
        if np.any(np.diff(lengths) > 0):
            raise TideflowError(
                "`lengths` array must be sorted in decreasing order when `enforce_sorted` is "
                "True. You can pass `enforce_sorted=False` to pack_padded_sequence and/or "
                "pack_sequence to sidestep this requirement if you do not need ONNX "
                f"exportability. Got lengths {lengths.tolist()}"
            )
    else:
        order = np.argsort(-lengths, kind="stable")
        lengths = lengths[order]
        sorted_indices = _index(order)
        input = input.index_select(batch_dim, sorted_indices)
    if lengths.size and lengths[-1] <= 0:
        raise TideflowError(
            "Length of all samples has to be greater than 0, but found an element in "
            f"'lengths' that is <= 0: {lengths.tolist()}"
        )
    if batch_first:
        input = input.transpose(0, 1)
    steps, batch = input.shape[:2]
    longest = int(lengths[0]) if lengths.size else 0
    if longest > steps:
        raise ShapeError(
            f"pack_padded_sequence: a length of {longest} exceeds the padded sequence length "
            f"{steps} (input shape {list(input.shape)})"
        )
    running = _steps_mask(lengths, longest)
    rows = input.reshape(steps * batch, *input.shape[2:])
    data = rows.index_select(0, _index(np.flatnonzero(running)))
    return PackedSequence(data, _index(running.sum(1)), sorted_indices, None)


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """Inverse of `pack_padded_sequence`: the padded batch (T, B, *) (or (B, T, *)) and the
    int64 lengths, both in the order the sequences were packed from. `total_length` pads to
    a fixed T (at least the longest sequence).

    >>> packed = flow.nn.utils.rnn.pack_sequence([flow.ones(3, 2), flow.ones(1, 2)])
    >>> padded, lengths = flow.nn.utils.rnn.pad_packed_sequence(packed, batch_first=True)
    >>> padded.shape, lengths
    (tideflow.Size([2, 3, 2]), tensor([3, 1]))
    """
    batch_sizes = sequence.batch_sizes.numpy().astype(np.int64)
    steps = len(batch_sizes)
    if total_length is not None:
        if total_length < steps:
            raise ValueError(
                "Expected total_length to be at least the length of the longest sequence in "
                f"input, but got total_length={total_length} and max sequence length being "
                f"{steps}"
            )
        steps = total_length
    batch = int(batch_sizes[0]) if len(batch_sizes) else 0
    lengths = (np.arange(batch)[None, :] < batch_sizes[:, None]).sum(0)
    data = sequence.data
    # NOTE: one extra row of padding_value that every padded slot gathers from.
    pad_row = full((1, *data.shape[1:]), padding_value, dtype=data.dtype, device=data.device)
    source = cat([data, pad_row])
    running = _steps_mask(lengths, steps)
    # packed rows are numbered time step by time step: the k-th running (t, b) is row k
    gather = np.where(running, np.cumsum(running).reshape(running.shape) - 1, len(data))
    if batch_first:
        gather = gather.T
    padded = source.index_select(0, _index(gather.ravel()))
    padded = padded.reshape(*gather.shape, *data.shape[1:])
    lengths = _index(lengths)
    if sequence.unsorted_indices is not None:
        padded = padded.index_select(0 if batch_first else 1, sequence.unsorted_indices)
        lengths = lengths.index_select(0, sequence.unsorted_indices)
    return padded, lengths


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """Stacks sequences (L_i, *) into one padded tensor (T, B, *) (or (B, T, *) with
    `batch_first`), T the longest length; `padding_side` "left" right-aligns them.

    >>> a, b = flow.ones(3, 2), flow.ones(1, 2)
    >>> flow.nn.utils.rnn.pad_sequence([a, b], batch_first=True).shape
    tideflow.Size([2, 3, 2])
    """
    if not isinstance(sequences, Iterable):
        raise TideflowError(
            "pad_sequence: Expected iterable for input sequences, but got arg of type: "
            f"{type(sequences).__name__}"
        )
    sequences = list(sequences)
    if padding_side not in ("left", "right"):
        raise ValueError(
            f"Expected padding_side to be one of left or right, but got {padding_side}."
        )
    if not sequences:
        raise TideflowError("pad_sequence: received an empty list of sequences")
    trailing = tuple(sequences[0].shape[1:])
    for i, seq in enumerate(sequences):
        if seq.ndim == 0 or tuple(seq.shape[1:]) != trailing:
            expected = ", ".join(["L", *map(str, trailing)])
            raise ShapeError(
                f"pad_sequence: every sequence must have shape ({expected}) like sequence 0, "
                f"got shape {list(seq.shape)} for sequence {i}"
            )
    lengths = np.array([seq.shape[0] for seq in sequences], dtype=np.int64)
    steps = int(lengths.max())
    starts = np.cumsum(lengths) - lengths
    first = np.zeros_like(lengths) if padding_side == "right" else steps - lengths
    # (T, B): where each padded slot reads from the concatenated sequences, or the pad row
    t = np.arange(steps)[:, None]
    valid = (t >= first) & (t < first + lengths)
    gather = np.where(valid, starts + t - first, lengths.sum())
    if batch_first:
        gather = gather.T
    first_seq = sequences[0]
    pad_row = full((1, *trailing), padding_value, dtype=first_seq.dtype, device=first_seq.device)
    padded = cat([*sequences, pad_row]).index_select(0, _index(gather.ravel()))
    return padded.reshape(*gather.shape, *trailing)


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    """Splits a padded batch back into its sequences (right-padded, as `pad_sequence` makes
    them): a list of (L_i, *) tensors.

    >>> padded = flow.zeros(3, 2, 4)
    >>> [s.shape[0] for s in flow.nn.utils.rnn.unpad_sequence(padded, flow.tensor([3, 1]))]
    [3, 1]
    """
    batch_dim = 0 if batch_first else 1
    lengths = _lengths_array("unpad_sequence", lengths).tolist()
    if len(lengths) != padded_sequences.shape[batch_dim]:
        raise ShapeError(
            f"unpad_sequence: got {len(lengths)} lengths for a batch of "
            f"{padded_sequences.shape[batch_dim]} (padded shape "
            f"{list(padded_sequences.shape)})"
        )
    return [
        seq[:length]
        for seq, length in zip(padded_sequences.unbind(batch_dim), lengths, strict=True)
    ]


def pack_sequence(sequences, enforce_sorted=True):
    """Packs a list of (L_i, *) sequences: `pack_padded_sequence(pad_sequence(sequences),
    lengths)`. With `enforce_sorted` they must come longest first.

    >>> packed = flow.nn.utils.rnn.pack_sequence([flow.ones(1), flow.ones(3)], False)
    >>> packed.batch_sizes
    tensor([2, 1, 1])
    """
    lengths = [seq.shape[0] for seq in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences):
    """The list of sequences a `PackedSequence` holds, in their original order.

    >>> packed = flow.nn.utils.rnn.pack_sequence([flow.ones(1), flow.ones(3)], False)
    >>> [s.shape[0] for s in flow.nn.utils.rnn.unpack_sequence(packed)]
    [1, 3]
    """
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
