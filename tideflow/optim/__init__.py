"""Optimizers with PyTorch's update rules and state-dict format, and `optim.lr_scheduler`."""

from . import lr_scheduler, swa_utils
from .adadelta import Adadelta
from .adagrad import Adagrad
from .adam import Adam, AdamW
from .adam_variants import Adamax, NAdam, RAdam
from .asgd import ASGD
from .lamb import LAMB
from .lbfgs import LBFGS
from .optimizer import Optimizer
from .rmsprop import RMSprop
from .rprop import Rprop
from .sgd import SGD

__all__ = [
    "ASGD",
    "LAMB",
    "LBFGS",
    "SGD",
    "Adadelta",
    "Adagrad",
    "Adam",
    "AdamW",
    "Adamax",
    "NAdam",
    "Optimizer",
    "RAdam",
    "RMSprop",
    "Rprop",
    "lr_scheduler",
    "swa_utils",
]
