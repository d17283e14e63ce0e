"""Flatten and Unflatten: reshape a range of dims into one, and one dim into several."""

from __future__ import annotations

from .module import Module


class Flatten(Module):
    """Flatten dims `start_dim` to `end_dim` into one (by default all but the batch dim).

    >>> flow.nn.Flatten()(flow.randn(32, 1, 5, 5)).shape
    tideflow.Size([32, 25])
    """

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input):
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Expand dim `dim` into `unflattened_size` (a tuple or list of ints; one may be -1).

    >>> flow.nn.Unflatten(1, (2, 5, 5))(flow.randn(2, 50)).shape
    tideflow.Size([2, 2, 5, 5])
    """

    def __init__(self, dim: int, unflattened_size) -> None:
        super().__init__()
        if not isinstance(unflattened_size, (tuple, list)):
            raise TypeError(
                "unflattened_size must be a tuple of ints, but found type "
                f"{type(unflattened_size).__name__}"
            )
        for pos, size in enumerate(unflattened_size):
            if not isinstance(size, int):
                raise TypeError(
                    "unflattened_size must be tuple of ints, but found element of type "
                    f"{type(size).__name__} at pos {pos}"
                )
        self.dim = dim
        self.unflattened_size = unflattened_size

    def forward(self, input):
        return input.unflatten(self.dim, self.unflattened_size)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"
