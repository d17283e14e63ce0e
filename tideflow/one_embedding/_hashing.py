"""Counter-based hashing of (table, key) pairs: where a key lives, which rank owns it, and the
random numbers its row starts from.

Everything here is a pure function of its inputs (SplitMix64's finalizer on uint64 arrays,
no generator state), so one key hashes and initializes the same way on every rank of any
world size, in any order of arrival.
"""

from __future__ import annotations

import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)  # SplitMix64's Weyl increment
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31, _S32, _S11 = (np.uint64(s) for s in (30, 27, 31, 32, 11))

# Domain separators: the slot hash, the owner hash and the initializer streams of one key
# must be independent (an owner hash equal to the slot hash would leave a rank's keys in
# 1/world of its slots).
SLOT, OWNER, INIT = 1, 2, 3


def mix(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finalizer, elementwise on a uint64 array (a bijection of uint64)."""
    return mix_in_place(x.copy(), np.empty_like(x))


def mix_in_place(x: np.ndarray, scratch: np.ndarray) -> np.ndarray:
    """`mix(x)` written over `x` (returned), with `scratch` (x's shape) for the shifts: no
    array is allocated, so blocks of a large batch stay in the CPU's cache."""
    for shift, multiplier in ((_S30, _M1), (_S27, _M2)):
        np.right_shift(x, shift, out=scratch)
        x ^= scratch
        x *= multiplier
    np.right_shift(x, _S31, out=scratch)
    x ^= scratch
    return x


def key_hash(domain: int, seed: int, tables: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """A 64-bit hash of each (table, key) pair in `domain`, as uint64."""
    start = mix(np.array([((seed & (2**56 - 1)) << 8) | domain], np.uint64))
    t = mix(tables.astype(np.uint64) + start)
    return mix(keys.astype(np.int64).view(np.uint64) ^ t)


def owner_of(tables: np.ndarray, keys: np.ndarray, world: int) -> np.ndarray:
    """The rank (of `world`) that holds each key's row."""
    if world == 1:
        return np.zeros(keys.shape, np.int64)
    h = key_hash(OWNER, 0, tables, keys) >> _S32
    return (h % np.uint64(world)).astype(np.int64)


def uniforms(seed: int, tables: np.ndarray, keys: np.ndarray, n: int, offset: int = 0):
    """`(len(keys), n)` float64 uniforms in [0, 1): element j of a key's row is draw
    `offset + j` of that key's own stream."""
    base = key_hash(INIT, seed, tables, keys)
    counters = np.arange(offset + 1, offset + n + 1, dtype=np.uint64) * _GOLDEN
    bits = np.add(base[:, None], counters[None, :])
    mix_in_place(bits, np.empty_like(bits))
    bits >>= _S11  # 53 random bits: exact in a float64
    return np.multiply(bits, 1.0 / (1 << 53), dtype=np.float64)
