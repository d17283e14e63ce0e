"""Random number generators: `Generator`, the default generator and the seeding API.

A Generator wraps NumPy's PCG64 bit generator. Its state is a uint8 tensor of fixed layout
(PCG64 state, increment and buffered 32-bit value), so checkpoints store it as plain bytes:
restoring a state never unpickles anything.
"""

from __future__ import annotations

import os

import numpy as np

from .errors import TideflowError
from .tensor import Tensor, make_tensor

_DEFAULT_SEED = 67280421310721  # PyTorch's default seed
_STATE_BYTES = 16 + 16 + 1 + 4  # state (128 bit), inc (128 bit), has_uint32, uinteger


class Generator:
    """A source of random numbers: `flow.rand(3, generator=flow.Generator().manual_seed(0))`"""

    def __init__(self, device="cpu") -> None:
        self.device = device
        self.manual_seed(_DEFAULT_SEED)

    def manual_seed(self, seed: int) -> Generator:
        seed = int(seed)
        if seed < 0:
            seed += 1 << 64
        self._seed = seed
        self.rng = np.random.Generator(np.random.PCG64(seed))
        return self

    def seed(self) -> int:
        """Reseed from OS entropy and return the new seed."""
        seed = int.from_bytes(os.urandom(8), "little") >> 1
        self.manual_seed(seed)
        return seed

    def initial_seed(self) -> int:
        return self._seed

    def get_state(self) -> Tensor:
        st = self.rng.bit_generator.state
        raw = (
            st["state"]["state"].to_bytes(16, "little")
            + st["state"]["inc"].to_bytes(16, "little")
            + bytes([st["has_uint32"]])
            + st["uinteger"].to_bytes(4, "little")
        )
        return make_tensor(np.frombuffer(raw, dtype=np.uint8).copy())

    def set_state(self, state: Tensor) -> Generator:
        raw = np.asarray(state._data if isinstance(state, Tensor) else state, dtype=np.uint8)
        if raw.shape != (_STATE_BYTES,):
            raise TideflowError(
                f"Generator.set_state: expected a uint8 tensor of {_STATE_BYTES} bytes, "
                f"got shape {list(raw.shape)}"
            )
        b = raw.tobytes()
        bit_gen = np.random.PCG64()
        bit_gen.state = {
            "bit_generator": "PCG64",
            "state": {
                "state": int.from_bytes(b[:16], "little"),
                "inc": int.from_bytes(b[16:32], "little"),
            },
            "has_uint32": b[32],
            "uinteger": int.from_bytes(b[33:37], "little"),
        }
        self.rng = np.random.Generator(bit_gen)
        return self


default_generator = Generator()


def manual_seed(seed: int) -> Generator:
    """Seed the default generator: the same seed gives the same random tensors."""
    return default_generator.manual_seed(seed)


def seed() -> int:
    return default_generator.seed()


def initial_seed() -> int:
    return default_generator.initial_seed()


def get_rng_state() -> Tensor:
    return default_generator.get_state()


def set_rng_state(state: Tensor) -> None:
    default_generator.set_state(state)
