"""tideflow: a PyTorch-shaped deep-learning framework with global tensors and compiled graphs.

import tideflow as flow
x = flow.randn(3, requires_grad=True)
(x * x).sum().backward()
"""

from . import (
    _C,
    amp,
    autograd,
    comm,
    distributed,
    env,
    fft,
    func,
    linalg,
    models,
    nn,
    one_embedding,
    ops,
    optim,
    parallel,
    special,
    utils,
)
from ._compat import *
from .amp import autocast
from .framework.device import device
from .framework.dtype import DType as dtype
from .framework.dtype import (
    bfloat16,
    complex64,
    complex128,
    float16,
    float32,
    float64,
    get_default_complex_dtype,
    get_default_dtype,
    int8,
    int16,
    int32,
    int64,
    promote_types,
    set_default_dtype,
    uint8,
)
from .framework.dtype import bool_ as bool
from .framework.errors import (
    ArgumentError,
    AutogradError,
    DTypeError,
    ShapeError,
    TensorIndexError,
    TideflowError,
)
from .framework.grad_mode import (
    enable_grad,
    inference_mode,
    is_grad_enabled,
    is_inference_mode_enabled,
    no_grad,
    set_grad_enabled,
)
from .framework.tensor import Size, Tensor
from .func import vmap
from .io import load, save
from .nn._top_level import *
from .ops.assembly import *
from .ops.binary import *
from .ops.calculus import *
from .ops.complex import *
from .ops.conversion import *
from .ops.creation import *
from .ops.indexing import *
from .ops.linalg import *
from .ops.linalg_compositions import *
from .ops.linalg_householder import *
from .ops.linalg_lowrank import *
from .ops.linalg_lu import *
from .ops.linalg_matrix_exp import *
from .ops.linalg_rank import *
from .ops.linalg_svd import *
from .ops.nn.softmax import log_softmax, softmax
from .ops.predicates import *
from .ops.random import *
from .ops.reduction import *
from .ops.shape import *
from .ops.shorthands import *
from .ops.special import *
from .ops.spectral import *
from .ops.statistics import *
from .ops.strided import *
from .ops.unary import *
from .ops.windows import *
from .parallel import placement, sbp
from .utils.dlpack import from_dlpack

half = float16
float = float32
double = float64
cfloat = complex64
cdouble = complex128
short = int16
int = int32
long = int64

__version__ = "0.1.0"
