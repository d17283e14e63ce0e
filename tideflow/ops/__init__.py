"""Every operator, one definition each, grouped by family. Importing this package registers
the ops and binds their Tensor methods."""

from . import (
    activation,
    assembly,
    binary,
    calculus,
    complex,
    conversion,
    creation,
    fft,
    indexing,
    linalg,
    linalg_compositions,
    linalg_eig,
    linalg_ex,
    linalg_householder,
    linalg_lowrank,
    linalg_lu,
    linalg_matrix_exp,
    linalg_rank,
    linalg_svd,
    optim,
    random,
    reduction,
    shape,
    special,
    spectral,
    statistics,
    strided,
    unary,
)
from .nn import (
    attention,
    conv,
    ctc,
    deform_conv,
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
    "assembly",
    "attention",
    "binary",
    "calculus",
    "complex",
    "conv",
    "conversion",
    "ctc",
    "deform_conv",
    "creation",
    "distance",
    "dropout",
    "embedding",
    "fft",
    "fold",
    "grid_sampling",
    "indexing",
    "linalg",
    "linalg_compositions",
    "linalg_eig",
    "linalg_ex",
    "linalg_householder",
    "linalg_lowrank",
    "linalg_lu",
    "linalg_matrix_exp",
    "linalg_rank",
    "linalg_svd",
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
    "spectral",
    "statistics",
    "strided",
    "special",
    "unary",
]

# NOTE: after every op family: registers generated kernels on the ops defined above.
from . import _generated  # noqa: F401
from ._rules import numpy_names


def _accept_numpy_names() -> None:
    """The public functions of every family that take `dim`/`keepdim` also take `axis`/
    `keepdims`, as PyTorch's do (`numpy_names`); done here, before `tideflow` and its
    namespaces (`flow.fft`, `flow.linalg`, `nn.functional`) import them, so each function is
    written once with PyTorch's own parameter names."""
    for family_name in __all__:
        family = globals()[family_name]
        for name, fn in list(vars(family).items()):
            if not name.startswith("_") and getattr(fn, "__module__", None) == family.__name__:
                setattr(family, name, numpy_names(fn))


_accept_numpy_names()
