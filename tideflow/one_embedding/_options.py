"""OneFlow's option builders: initializers, table and column options, store options.

They return plain dicts, as OneFlow's do, so configurations written for OneFlow (or read from
JSON) work unchanged; `MultiTableEmbedding` validates them when it is built.
"""

from __future__ import annotations

import os

from ..framework.errors import TideflowError

INITIALIZER_FIELDS = {
    "uniform": ("low", "high"),
    "normal": ("mean", "std"),
    "constant": ("value",),
    "trunc_normal": ("mean", "std", "a", "b"),
}


def make_uniform_initializer(low: float = 0.0, high: float = 1.0) -> dict:
    """Rows drawn from U(low, high).

    >>> flow.one_embedding.make_uniform_initializer(low=-0.05, high=0.05)
    {'type': 'uniform', 'low': -0.05, 'high': 0.05}
    """
    return {"type": "uniform", "low": low, "high": high}


def make_normal_initializer(mean: float = 0.0, std: float = 1.0) -> dict:
    """Rows drawn from N(mean, std^2).

    >>> flow.one_embedding.make_normal_initializer(mean=0, std=0.01)
    {'type': 'normal', 'mean': 0, 'std': 0.01}
    """
    return {"type": "normal", "mean": mean, "std": std}


def make_constant_initializer(value: float) -> dict:
    """Rows filled with `value`.

    >>> flow.one_embedding.make_constant_initializer(0.5)
    {'type': 'constant', 'value': 0.5}
    """
    return {"type": "constant", "value": value}


def make_trunc_normal_initializer(
    mean: float = 0.0, std: float = 1.0, a: float = -2.0, b: float = 2.0
) -> dict:
    """Rows drawn from N(mean, std^2) restricted to [a, b] (PyTorch's `trunc_normal_`
    arguments: the bounds are values, not multiples of std).

    >>> flow.one_embedding.make_trunc_normal_initializer(std=0.02, a=-0.04, b=0.04)
    {'type': 'trunc_normal', 'mean': 0.0, 'std': 0.02, 'a': -0.04, 'b': 0.04}
    """
    return {"type": "trunc_normal", "mean": mean, "std": std, "a": a, "b": b}


def make_column_options(initializer: dict) -> dict:
    """One column of a table (`MultiTableMultiColumnEmbedding`): its initializer."""
    return {"initializer": initializer}


def make_table_options(param) -> dict:
    """A table's options: an initializer for the whole row, or a list of column options (one
    per column of a `MultiTableMultiColumnEmbedding`).

    >>> init = flow.one_embedding.make_uniform_initializer(low=-0.1, high=0.1)
    >>> flow.one_embedding.make_table_options(init)
    {'initializer': {'type': 'uniform', 'low': -0.1, 'high': 0.1}}
    """
    if isinstance(param, dict):
        return {"initializer": param}
    if isinstance(param, list | tuple):
        return {"columns": list(param)}
    raise TideflowError(
        "make_table_options: param must be an initializer (dict) or a list of column options, "
        f"got {type(param).__name__}"
    )


make_table = make_table_options


def _store(kind: str, persistent_path, capacity, size_factor, storage_dim, cache_budget_mb=None):
    call = f"make_{kind}_store_options"
    if persistent_path is not None and not isinstance(persistent_path, str | os.PathLike | list):
        raise TideflowError(
            f"{call}: persistent_path must be a path or a list of paths (one per rank), got "
            f"{type(persistent_path).__name__}"
        )
    if capacity is not None and (not isinstance(capacity, int) or capacity <= 0):
        raise TideflowError(f"{call}: capacity must be a positive int, got {capacity!r}")
    if cache_budget_mb is not None and not cache_budget_mb > 0:
        raise TideflowError(f"{call}: cache_budget_mb must be positive, got {cache_budget_mb!r}")
    if not isinstance(size_factor, int) or size_factor < 1:
        raise TideflowError(f"{call}: size_factor must be an int >= 1, got {size_factor!r}")
    return {
        "kind": "disk" if kind == "cached_ssd" else "host",
        "persistent_path": persistent_path,
        "capacity": capacity,
        "cache_budget_mb": cache_budget_mb,
        "size_factor": size_factor,
        "storage_dim": storage_dim,
    }


def make_cached_ssd_store_options(
    cache_budget_mb, persistent_path, capacity=None, size_factor=1, storage_dim=-1,
    physical_block_size=4096, host_cache_budget_mb=0,
) -> dict:  # fmt: skip
    """Rows in a memory-mapped file under `persistent_path`, with `cache_budget_mb` of the
    most recently used rows in memory: tables larger than the memory work, and the process
    keeps about the cache budget resident (on CPU the cache is host memory: OneFlow's
    device cache and `host_cache_budget_mb` are one cache of their sum).
    `capacity` bounds the number of keys (all ranks together).

    >>> opts = flow.one_embedding.make_cached_ssd_store_options(
    ...     cache_budget_mb=64, persistent_path="/tmp/emb", capacity=1_000_000)
    """
    budget = (cache_budget_mb or 0) + (host_cache_budget_mb or 0)
    return _store("cached_ssd", persistent_path, capacity, size_factor, storage_dim, budget)


def make_cached_host_mem_store_options(
    cache_budget_mb, persistent_path, capacity, size_factor=1, storage_dim=-1,
    physical_block_size=4096,
) -> dict:  # fmt: skip
    """The whole table in host memory (on CPU the device cache of `cache_budget_mb` is the
    table itself). `persistent_path` (None: no snapshots) is where snapshots go; `capacity`
    bounds the number of keys (all ranks together; None: unbounded).

    >>> opts = flow.one_embedding.make_cached_host_mem_store_options(
    ...     cache_budget_mb=64, persistent_path=None, capacity=1_000_000)
    """
    return _store("cached_host_mem", persistent_path, capacity, size_factor, storage_dim)


def make_device_mem_store_options(
    persistent_path, capacity, size_factor=1, storage_dim=-1, physical_block_size=4096
) -> dict:
    """The whole table in device memory: host memory on CPU (the host store)."""
    return _store("device_mem", persistent_path, capacity, size_factor, storage_dim)
