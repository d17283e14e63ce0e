"""Every operator, one definition each, grouped by family. Importing this package registers
the ops and binds their Tensor methods."""

from . import (
    activation,
    binary,
    conversion,
    creation,
    indexing,
    linalg,
    optim,
    random,
    reduction,
    shape,
    strided,
    special,
    unary,
)
from .nn import (
    attention,
    conv,
    ctc,
    distance,
    dropout,
    embedding,
    fold,
    grid_sampling,
    linear,
    loss,
    normalization,
    padding,
    pooling,
    sampling,
    softmax,
)

__all__ = [
    "activation",
    "attention",
    "binary",
    "conv",
    "conversion",
    "ctc",
    "creation",
    "distance",
    "dropout",
    "embedding",
    "fold",
    "grid_sampling",
    "indexing",
    "linalg",
    "linear",
    "loss",
    "optim",
    "normalization",
    "padding",
    "pooling",
    "random",
    "reduction",
    "sampling",
    "shape",
    "softmax",
    "strided",
    "special",
    "unary",
]

# NOTE: after every op family: registers generated kernels on the ops defined above.
from . import _generated  # noqa: F401
