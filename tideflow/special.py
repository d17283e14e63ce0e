"""`tideflow.special`: PyTorch's torch.special namespace. Every name is an op defined once
elsewhere (`ops/special.py`, or the unary, binary, reduction and softmax families); PyTorch's
special names for them (expit, psi, gammaln, multigammaln) are aliases, not new ops.

>>> import tideflow as flow
>>> flow.special.ndtr(flow.tensor([0.0, 1.0]))
tensor([0.5000, 0.8413])
"""

from .ops.binary import xlogy
from .ops.nn.softmax import log_softmax, softmax
from .ops.reduction import logsumexp
from .ops.special import (
    bessel_j0,
    bessel_j1,
    digamma,
    entr,
    erfcx,
    gammainc,
    gammaincc,
    i0,
    i0e,
    i1,
    i1e,
    log_ndtr,
    logit,
    ndtr,
    ndtri,
    polygamma,
    sinc,
    xlog1py,
    zeta,
)
from .ops.special import lgamma as gammaln
from .ops.special import mvlgamma as multigammaln
from .ops.unary import erf, erfc, erfinv, exp2, expm1, log1p, round
from .ops.unary import sigmoid as expit

psi = digamma

__all__ = [
    "bessel_j0",
    "bessel_j1",
    "digamma",
    "entr",
    "erf",
    "erfc",
    "erfcx",
    "erfinv",
    "exp2",
    "expit",
    "expm1",
    "gammainc",
    "gammaincc",
    "gammaln",
    "i0",
    "i0e",
    "i1",
    "i1e",
    "log1p",
    "log_ndtr",
    "log_softmax",
    "logit",
    "logsumexp",
    "multigammaln",
    "ndtr",
    "ndtri",
    "polygamma",
    "psi",
    "round",
    "sinc",
    "softmax",
    "xlog1py",
    "xlogy",
    "zeta",
]
