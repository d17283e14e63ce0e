"""Click logs in the Criteo format, the format of the public Criteo Kaggle and Terabyte sets:
one example a line, tab-separated, a 0/1 click label, 13 integer counts and 26 categorical
ids written as hex strings; any feature may be empty (missing).

`read_criteo_tsv` streams a file as model-ready batches; `SyntheticCriteo` draws lines in
that format from a hidden model, so that a trained model can be compared with the best AUC
any model can reach on them. A batch holds every feature twice over: the 13 counts as
log(1 + x) for a dense input (DLRM's bottom MLP) and as categories (DeepFM embeds all 39
fields), the 26 categorical ids hashed into int64 keys of `MultiTableEmbedding` tables.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..framework.errors import TideflowError

NUM_DENSE = 13
NUM_SPARSE = 26
NUM_FIELDS = NUM_DENSE + NUM_SPARSE
_COLUMNS = 1 + NUM_FIELDS
_MAX_HEX_DIGITS = 16  # an id must fit in 64 bits

# A key: bits 56-62 the field (0-12 the counts, 13-38 the categorical ids, in the order of a
# line), bit 55 set for a missing feature, bits 0-54 a hash of the value. Each field's keys are
# its own (fields may share one key space), a missing feature never collides with a value, and
# the hash spreads the keys of every table evenly over the ranks that shard them.
_FIELD_SHIFT = np.uint64(56)
_MISSING_BIT = np.uint64(1 << 55)
_HASH_MASK = np.uint64((1 << 55) - 1)

# DeepFM sees a count through its log bucket: log(1 + x) in quarters of a nat, so small counts
# keep a category each and rare large counts share one.
DENSE_BUCKETS_PER_NAT = 4


class CriteoFormatError(TideflowError, ValueError):
    """A line of a Criteo-format file that does not hold a label, 13 integers and 26 hex ids."""


@dataclass(frozen=True)
class CriteoRows:
    """Examples as a Criteo file writes them: the 0/1 `labels` (n,), the 13 `counts` (n, 13)
    int64 and the 26 categorical `ids` (n, 26) uint64 (the hex strings' values), with
    masks of the missing (empty) features (a missing entry's value is 0)."""

    labels: np.ndarray
    counts: np.ndarray
    counts_missing: np.ndarray
    ids: np.ndarray
    ids_missing: np.ndarray

    def __len__(self) -> int:
        return len(self.labels)


@dataclass(frozen=True)
class CriteoBatch:
    """Model inputs of a batch of examples, NumPy arrays with one row per example:
    `labels` (n,) float32, `dense` (n, 13) float32 log(1 + max(x, 0)) of the counts (0 where
    missing), `dense_keys` (n, 13) int64 keys of the counts' log buckets and `sparse_keys`
    (n, 26) int64 keys of the categorical ids."""

    labels: np.ndarray
    dense: np.ndarray
    dense_keys: np.ndarray
    sparse_keys: np.ndarray

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, rows: slice) -> CriteoBatch:
        return CriteoBatch(
            self.labels[rows], self.dense[rows], self.dense_keys[rows], self.sparse_keys[rows]
        )

    @classmethod
    def from_rows(cls, rows: CriteoRows) -> CriteoBatch:
        """The model inputs of `rows`: counts log-transformed and bucketed, every feature
        hashed into its field's keys."""
        counts = np.maximum(rows.counts, 0)  # Criteo's counts dip below 0 in a few columns
        dense = np.where(rows.counts_missing, 0.0, np.log1p(counts)).astype(np.float32)
        buckets = np.floor(dense * DENSE_BUCKETS_PER_NAT).astype(np.uint64)
        return cls(
            labels=rows.labels.astype(np.float32),
            dense=dense,
            dense_keys=_keys(buckets, rows.counts_missing, first_field=0),
            sparse_keys=_keys(rows.ids, rows.ids_missing, first_field=NUM_DENSE),
        )

    @property
    def all_keys(self) -> np.ndarray:
        """The keys of all 39 fields, counts first (n, 39): DeepFM's input."""
        return np.concatenate([self.dense_keys, self.sparse_keys], axis=1)


def _keys(values: np.ndarray, missing: np.ndarray, first_field: int) -> np.ndarray:
    """int64 keys of (n, fields) uint64 `values`, column j in field `first_field + j`."""
    fields = np.arange(first_field, first_field + values.shape[1], dtype=np.uint64)
    hashed = np.where(missing, _MISSING_BIT, _mix64(values) & _HASH_MASK)
    return ((fields << _FIELD_SHIFT) | hashed).astype(np.int64)


def _mix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finalizer: a bijection of uint64 that scatters nearby values (ids 1, 2, 3)
    over the whole range. uint64 arithmetic wraps, as the hash needs."""
    z = x.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


# --- reading and writing files ---------------------------------------------------------------


def count_rows(path) -> int:
    """The number of lines (examples) of a Criteo-format file, without parsing them."""
    rows = 0
    last = b"\n"
    with open(path, "rb") as f:
        while block := f.read(1 << 24):
            rows += block.count(b"\n")
            last = block[-1:]
    return rows + (last != b"\n")


def read_criteo_tsv(
    path,
    batch_size: int,
    start: int = 0,
    stop: int | None = None,
) -> Iterator[CriteoBatch]:
    """Stream the examples of lines `start` to `stop` (0-based, `stop` excluded; None: to the
    end) of a Criteo-format file as `CriteoBatch`es of `batch_size` rows (the last one may be
    shorter). Only one batch of lines is in memory at a time.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "clicks.tsv")
    >>> rows, _ = flow.models.SyntheticCriteo(seed=0).sample(20)
    >>> flow.models.write_criteo_tsv(path, rows)
    >>> [len(batch) for batch in flow.models.read_criteo_tsv(path, 8)]
    [8, 8, 4]
    >>> batch = next(flow.models.read_criteo_tsv(path, 8))
    >>> batch.dense.shape, batch.sparse_keys.dtype
    ((8, 13), dtype('int64'))
    """
    if batch_size <= 0:
        raise ValueError(f"read_criteo_tsv: batch_size must be positive, got {batch_size}")
    # undecodable bytes become U+FFFD, which no field accepts: the error names the field
    with open(path, encoding="utf-8", errors="replace", newline="\n") as f:
        lines = itertools.islice(f, start, stop)
        first = start + 1
        while chunk := list(itertools.islice(lines, batch_size)):
            yield CriteoBatch.from_rows(parse_lines(chunk, f"{path}, line {{}}", first))
            first += len(chunk)


def parse_lines(lines: Sequence[str], where: str = "line {}", first: int = 1) -> CriteoRows:
    """The examples of Criteo-format `lines`. A malformed line raises `CriteoFormatError`
    naming it: `where` formatted with its 1-based number (`first` is the first line's)."""
    cells = [line.rstrip("\r\n").split("\t") for line in lines]
    for i, row in enumerate(cells):
        if len(row) != _COLUMNS:
            raise CriteoFormatError(
                f"{where.format(first + i)}: expected {_COLUMNS} tab-separated fields (a 0/1 "
                f"label, {NUM_DENSE} integers, {NUM_SPARSE} hex ids), got {len(row)}"
            )
    table = np.array(cells, dtype=str).reshape(len(cells), _COLUMNS)

    def fail(row: int, column: int, expected: str):
        field = "the label" if column == 0 else f"field {column} ({_field_name(column)})"
        raise CriteoFormatError(
            f"{where.format(first + row)}: {field} must be {expected}, got {cells[row][column]!r}"
        )

    labels = table[:, 0]
    bad = np.flatnonzero((labels != "0") & (labels != "1"))
    if bad.size:
        fail(bad[0], 0, "0 or 1")

    dense = table[:, 1 : 1 + NUM_DENSE]
    counts_missing = dense == ""
    try:
        counts = np.where(counts_missing, "0", dense).astype(np.int64)
    except (ValueError, OverflowError):
        row, column = next(
            (r, c) for r, c in np.argwhere(~counts_missing) if not _is_int64(dense[r, c])
        )
        fail(row, 1 + column, "an integer (or empty)")

    hex_ids = table[:, 1 + NUM_DENSE :]
    ids, invalid = _parse_hex(hex_ids)
    if invalid.any():
        row, column = np.argwhere(invalid)[0]
        fail(
            row, 1 + NUM_DENSE + column, f"a hex id of at most {_MAX_HEX_DIGITS} digits (or empty)"
        )
    return CriteoRows(labels.astype(np.int8), counts, counts_missing, ids, hex_ids == "")


def _field_name(column: int) -> str:
    """Criteo's names of the columns: I1..I13 the counts, C1..C26 the categorical ids."""
    return f"I{column}" if column <= NUM_DENSE else f"C{column - NUM_DENSE}"


def _is_int64(text: str) -> bool:
    return re.fullmatch(r"[+-]?[0-9]+", text) is not None and -(2**63) <= int(text) < 2**63


_HEX_DIGITS = np.full(256, 255, dtype=np.uint8)
_HEX_DIGITS[0] = 16  # NumPy pads shorter strings with NUL bytes: no digit
for _digit, _char in enumerate("0123456789abcdef"):
    _HEX_DIGITS[ord(_char)] = _HEX_DIGITS[ord(_char.upper())] = _digit


def _parse_hex(cells: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The uint64 values of a 2-d array of hex strings (0 where empty), and a mask of the
    cells that are not hex numbers of at most 16 digits. One pass per digit position, over
    all cells at once."""
    try:
        raw = cells.astype(np.bytes_)
    except UnicodeEncodeError:  # a character outside ASCII somewhere: find the cells
        ascii_only = np.vectorize(str.isascii, otypes=[bool])(cells)
        return np.zeros(cells.shape, np.uint64), ~ascii_only
    width = raw.dtype.itemsize
    digits = _HEX_DIGITS[raw.view(np.uint8).reshape(*cells.shape, width)]
    invalid = (digits == 255).any(axis=-1)
    if width > _MAX_HEX_DIGITS:
        invalid |= digits[..., _MAX_HEX_DIGITS:].min(axis=-1) < 16
    values = np.zeros(cells.shape, np.uint64)
    for position in range(min(width, _MAX_HEX_DIGITS)):
        digit = digits[..., position]
        present = digit < 16
        values = np.where(present, (values << np.uint64(4)) | digit, values)
    return values, invalid


def write_criteo_tsv(path, rows: CriteoRows) -> None:
    """Write `rows` as a Criteo-format file (ids as at least 8 lowercase hex digits, missing
    features as empty fields), which `read_criteo_tsv` reads back to the same batches."""
    lines = []
    for i in range(len(rows)):
        counts = [
            "" if m else str(v) for v, m in zip(rows.counts[i], rows.counts_missing[i], strict=True)
        ]
        ids = [
            "" if m else f"{v:08x}" for v, m in zip(rows.ids[i], rows.ids_missing[i], strict=True)
        ]
        lines.append("\t".join([str(rows.labels[i]), *counts, *ids]) + "\n")
    Path(path).write_text("".join(lines), encoding="utf-8")
