"""Where a store's arrays live: host memory, or memory-mapped files in a directory.

A file-backed array costs the process resident memory only for the pages it touched since
the last `drop_resident()`, which hands them back to the kernel's page cache (written back
to the file, not lost): that is how a disk store keeps its resident set near its cache
budget however large the table.
"""

from __future__ import annotations

import math
import mmap
import os

import numpy as np


class HostArrays:
    """Zero-filled arrays in host memory."""

    def __call__(self, name: str, shape: tuple, dtype) -> np.ndarray:
        return np.zeros(shape, dtype)

    def release(self, name: str) -> None:
        pass  # the garbage collector frees it with its last reference

    def drop_resident(self) -> None:
        pass


class FileArrays:
    """Zero-filled arrays, each in its own sparse file `directory/name`, mapped shared."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self._maps: dict[str, mmap.mmap] = {}

    def __call__(self, name: str, shape: tuple, dtype) -> np.ndarray:
        count = math.prod(shape)
        nbytes = max(count * np.dtype(dtype).itemsize, 1)  # mmap refuses empty files
        path = os.path.join(self.directory, name)
        with open(path, "w+b") as f:  # truncates what an earlier run left there
            f.truncate(nbytes)  # a sparse file: zeros that take no disk until written
            # NOTE: keys land anywhere: no readahead around a fault (which would also fill
            # the page cache with large folios, each mapped whole by the next touch)
            os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_RANDOM)
            mapped = mmap.mmap(f.fileno(), nbytes)
        mapped.madvise(mmap.MADV_RANDOM)
        self._maps[name] = mapped
        return np.frombuffer(mapped, dtype, count=count).reshape(shape)

    def release(self, name: str) -> None:
        # NOTE: the mapping lives until its arrays are gone (closing it under a NumPy view
        # would fail); the unlinked file's blocks are freed then.
        self._maps.pop(name, None)
        os.remove(os.path.join(self.directory, name))

    def drop_resident(self) -> None:
        for mapped in self._maps.values():
            mapped.madvise(mmap.MADV_DONTNEED)
