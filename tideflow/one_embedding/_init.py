"""Initial rows of new keys, from each table's (and column's) initializer.

Every value is a function of (seed, table, key, position in the row) through counter-based
streams (`_hashing.uniforms`): a key starts from the same vector on any number of ranks,
whenever it first arrives.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from ..framework.errors import TideflowError
from ._hashing import uniforms
from ._options import INITIALIZER_FIELDS

_BLOCK = 4096  # keys initialized at a time


def check_initializer(owner: str, init) -> dict:
    """`init` validated: a dict of a known type with its fields (numbers)."""
    if not isinstance(init, dict) or init.get("type") not in INITIALIZER_FIELDS:
        raise TideflowError(
            f"one_embedding {owner!r}: an initializer must be a dict made by "
            f"make_{{{','.join(INITIALIZER_FIELDS)}}}_initializer, got {init!r}"
        )
    for field in INITIALIZER_FIELDS[init["type"]]:
        if not isinstance(init.get(field), int | float):
            raise TideflowError(
                f"one_embedding {owner!r}: the {init['type']} initializer needs a number "
                f"{field!r}, got {init.get(field)!r}"
            )
    if init["type"] in ("normal", "trunc_normal") and not init["std"] > 0:
        raise TideflowError(f"one_embedding {owner!r}: std must be positive, got {init['std']}")
    if init["type"] == "trunc_normal" and not init["a"] < init["b"]:
        raise TideflowError(
            f"one_embedding {owner!r}: trunc_normal needs a < b, got a={init['a']}, b={init['b']}"
        )
    return init


def sample(init: dict, seed: int, tables, keys, start: int, stop: int) -> np.ndarray:
    """Columns [start, stop) of the initial rows of (tables, keys), float64."""
    n = stop - start
    kind = init["type"]
    if kind == "constant":
        return np.full((keys.size, n), float(init["value"]))
    if kind == "uniform":
        u = uniforms(seed, tables, keys, n, offset=start)
        return init["low"] + (init["high"] - init["low"]) * u
    if kind == "normal":
        # NOTE: Box-Muller on two draws per value; 1 - u lies in (0, 1], so the log is finite
        u = uniforms(seed, tables, keys, 2 * n, offset=2 * start)
        radius = np.sqrt(-2.0 * np.log1p(-u[:, 0::2]))
        return init["mean"] + init["std"] * radius * np.cos(2.0 * math.pi * u[:, 1::2])
    # trunc_normal: the inverse CDF of the normal on the uniform's image of [a, b]
    mean, std = init["mean"], init["std"]
    lo, hi = special.ndtr((init["a"] - mean) / std), special.ndtr((init["b"] - mean) / std)
    u = uniforms(seed, tables, keys, n, offset=start)
    values = mean + std * special.ndtri(lo + (hi - lo) * u)
    return np.clip(values, init["a"], init["b"])


class RowInitializer:
    """Initial rows of width `width`: the embedding from the key's table's column
    initializers, then the optimizer state's fill values (`state_fill`, one per column)."""

    def __init__(self, seed: int, columns: list[list[tuple[dict, int, int]]], dim: int, dtype):
        self.seed = seed
        self.columns = columns  # per table: (initializer, start, stop) per column
        self.dim = dim
        self.dtype = np.dtype(dtype)
        self.state_fill = np.zeros(0, self.dtype)

    def embeddings(self, tables: np.ndarray, keys: np.ndarray) -> np.ndarray:
        out = np.empty((keys.size, self.dim), self.dtype)
        # NOTE: block by block, the float64 draws of a block stay in the CPU's cache (a
        # whole batch's would be tens of times the size of the float32 rows)
        for start in range(0, keys.size, _BLOCK):
            part = slice(start, start + _BLOCK)
            self._embeddings_into(out[part], tables[part], keys[part])
        return out

    def _embeddings_into(self, out: np.ndarray, tables: np.ndarray, keys: np.ndarray) -> None:
        first, last = tables[0], tables[-1]
        if first == last and (tables == first).all():  # keys of one table (a fill)
            self._table_into(out, int(first), tables, keys)
            return
        for table in np.unique(tables):
            mine = np.flatnonzero(tables == table)
            rows = np.empty((mine.size, self.dim), self.dtype)
            self._table_into(rows, int(table), tables[mine], keys[mine])
            out[mine] = rows

    def _table_into(self, out: np.ndarray, table: int, tables, keys) -> None:
        for init, start, stop in self.columns[table]:
            out[:, start:stop] = sample(init, self.seed, tables, keys, start, stop)

    def __call__(self, tables: np.ndarray, keys: np.ndarray) -> np.ndarray:
        rows = np.empty((keys.size, self.dim + self.state_fill.size), self.dtype)
        rows[:, : self.dim] = self.embeddings(tables, keys)
        rows[:, self.dim :] = self.state_fill
        return rows
