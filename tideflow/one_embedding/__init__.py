"""`flow.one_embedding`: embedding tables of arbitrary int64 keys in key-value stores (host
memory, or a memory-mapped file behind an in-memory cache), looked up and trained sparsely,
sharded over ranks by key hash under MPI. OneFlow's API; see docs/one_embedding.md.
"""

from ._embedding import Embedding, MultiTableEmbedding, MultiTableMultiColumnEmbedding
from ._ftrl import Ftrl
from ._optimizer import Optimizer
from ._options import (
    make_cached_host_mem_store_options,
    make_cached_ssd_store_options,
    make_column_options,
    make_constant_initializer,
    make_device_mem_store_options,
    make_normal_initializer,
    make_table,
    make_table_options,
    make_trunc_normal_initializer,
    make_uniform_initializer,
)
from ._snapshot import make_persistent_table_reader, make_persistent_table_writer

__all__ = [
    "Embedding",
    "Ftrl",
    "MultiTableEmbedding",
    "MultiTableMultiColumnEmbedding",
    "Optimizer",
    "make_cached_host_mem_store_options",
    "make_cached_ssd_store_options",
    "make_column_options",
    "make_constant_initializer",
    "make_device_mem_store_options",
    "make_normal_initializer",
    "make_persistent_table_reader",
    "make_persistent_table_writer",
    "make_table",
    "make_table_options",
    "make_trunc_normal_initializer",
    "make_uniform_initializer",
]
