"""Mixed precision: `autocast` regions and loss scaling (`GradScaler`, `StaticGradScaler`)."""

from ..compiler import amp as _compiler_amp
from .autocast_mode import autocast, get_autocast_dtype, is_autocast_enabled
from .grad_scaler import GradScaler, StaticGradScaler

# NOTE: graphs trace build under autocast with config.enable_amp(True); nn.graph cannot import
# this package (a sibling layer), so it is handed to the compiler.
_compiler_amp.bind_autocast(autocast)

__all__ = [
    "GradScaler",
    "StaticGradScaler",
    "autocast",
    "get_autocast_dtype",
    "is_autocast_enabled",
]
