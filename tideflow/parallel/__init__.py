"""Global tensors: one logical tensor laid over a placement of ranks with an SBP per axis.

`flow.placement` says where, `flow.sbp` how (`split(dim)`, `broadcast`, `partial_sum`);
`tensor.to_global(placement, sbp)` makes a global tensor, and every op on global tensors
picks a layout it accepts, converting (boxing) its operands as needed. See
docs/global_tensors.md.
"""

from . import global_view, sbp
from .creation import create_global
from .global_tensor import GlobalTensor
from .placement import placement
from .tensor_parallel import column_parallel, row_parallel
from .to_global import module_to_global

__all__ = [
    "GlobalTensor",
    "column_parallel",
    "create_global",
    "global_view",
    "module_to_global",
    "placement",
    "row_parallel",
    "sbp",
]
