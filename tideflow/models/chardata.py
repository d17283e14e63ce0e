"""Character-level text data for the GPT demo: an offline corpus, a capped character
vocabulary, a train/validation split and random block sampling."""

from __future__ import annotations

from collections import Counter

import numpy as np

from ..framework import dtype as dtypes
from ..framework.tensor import Tensor, make_tensor
from ..ops.creation import arange
from ..ops.random import randint


def pydoc_text() -> str:
    """The English text of CPython's interactive help (`pydoc_data.topics`): about 0.5-1 MB
    depending on the Python version, present in every CPython installation, so the demo needs
    no download. The text is part of the Python documentation, (c) Python Software Foundation,
    under the PSF License Agreement (Python Software Foundation License, version 2).

    >>> len(flow.models.pydoc_text()) > 100_000
    True
    """
    from pydoc_data.topics import topics

    return "\n\n".join(topics[name] for name in sorted(topics))


class CharTokenizer:
    """Maps characters to token ids and back. Id 0 is the unknown token: characters outside
    the vocabulary encode to it and it decodes to `unknown` (U+FFFD, the replacement
    character, by default). The vocabulary is `chars`, ids 1..len(chars) in that order.

    >>> tok = flow.models.CharTokenizer.from_text("hello", max_vocab=4)  # keeps l, e, h
    >>> tok.vocab_size, tok.decode(tok.encode("hole"))
    (4, 'h\ufffdle')
    """

    def __init__(self, chars: str, unknown: str = "\ufffd") -> None:
        if not chars:
            raise ValueError("CharTokenizer: chars must not be empty")
        if len(set(chars)) != len(chars):
            raise ValueError(f"CharTokenizer: chars must be distinct, got {chars!r}")
        self.chars = chars
        self.unknown = unknown
        # Sorted code points + their ids: encoding is one vectorized searchsorted.
        codes = np.array([ord(c) for c in chars], dtype=np.uint32)
        order = np.argsort(codes)
        self._codes = codes[order]
        self._ids = order.astype(np.int64) + 1
        self._alphabet = np.array([unknown, *chars])

    @classmethod
    def from_text(cls, text: str, max_vocab: int = 96) -> CharTokenizer:
        """The `max_vocab - 1` most frequent characters of `text` (ties broken by code point)
        plus the unknown token. Capping the vocabulary keeps the embedding and output layers
        small; the rare characters it drops share the unknown token."""
        if not text:
            raise ValueError("CharTokenizer.from_text: text is empty")
        if max_vocab < 2:
            raise ValueError(f"CharTokenizer: max_vocab must be at least 2, got {max_vocab}")
        counts = Counter(text)
        kept = sorted(counts, key=lambda c: (-counts[c], c))[: max_vocab - 1]
        return cls("".join(sorted(kept)))

    @property
    def vocab_size(self) -> int:
        return len(self.chars) + 1

    def encode(self, text: str) -> Tensor:
        """The token ids of `text`, a 1-d int64 tensor."""
        codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
        pos = np.searchsorted(self._codes, codes).clip(max=len(self._codes) - 1)
        known = self._codes[pos] == codes
        return make_tensor(np.where(known, self._ids[pos], 0))

    def decode(self, ids) -> str:
        """The text of a 1-d sequence of token ids (a tensor or any integer sequence)."""
        ids = np.asarray(ids.numpy() if isinstance(ids, Tensor) else ids, dtype=np.int64)
        if ids.ndim != 1:
            raise ValueError(f"CharTokenizer.decode: expected a 1-d sequence, got {ids.shape}")
        if ids.size and (ids.min() < 0 or ids.max() >= self.vocab_size):
            raise ValueError(
                f"CharTokenizer.decode: ids must lie in [0, {self.vocab_size}), got values "
                f"from {ids.min()} to {ids.max()}"
            )
        return "".join(self._alphabet[ids].tolist())


def train_val_split(ids: Tensor, val_fraction: float = 0.1) -> tuple[Tensor, Tensor]:
    """The first `1 - val_fraction` of a token sequence for training, the rest for validation
    (a contiguous tail, so no validation text leaks into training blocks)."""
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"train_val_split: val_fraction must be in (0, 1), got {val_fraction}")
    n_train = int(len(ids) * (1.0 - val_fraction))
    return ids[:n_train], ids[n_train:]


def random_blocks(
    data: Tensor, batch_size: int, block_size: int, generator=None
) -> tuple[Tensor, Tensor]:
    """`batch_size` blocks of `block_size` consecutive tokens at uniformly random offsets of
    `data` (1-d), and the same blocks shifted one token on: inputs and next-token targets,
    both (batch_size, block_size) int64.

    >>> x, y = flow.models.random_blocks(flow.arange(100), 4, 8)
    >>> bool((x[:, 1:] == y[:, :-1]).all())
    True
    """
    if len(data) <= block_size:
        raise ValueError(
            f"random_blocks: need more than block_size={block_size} tokens, got {len(data)}"
        )
    starts = randint(0, len(data) - block_size, (batch_size, 1), generator=generator)
    offsets = starts + arange(block_size, dtype=dtypes.int64)
    return data[offsets], data[offsets + 1]


def unigram_entropy(ids: Tensor, vocab_size: int) -> float:
    """The entropy, in nats, of the token frequencies of `ids`: the cross-entropy per token a
    model reaches by predicting every token from these frequencies alone, ignoring context.
    A language model has learnt something once its loss is clearly below it."""
    counts = np.bincount(ids.numpy().reshape(-1), minlength=vocab_size)
    p = counts[counts > 0] / counts.sum()
    return float(-(p * np.log(p)).sum())
