"""What crosses the process boundary between the DataLoader and its workers, and how.

Workers encode each reply themselves (`dumps`) before queueing it: a batch that cannot be
pickled then becomes an error naming the worker, instead of a reply lost in the queue's feeder
thread while the main process waits for it forever. Plain tensors travel as their NumPy array
and `requires_grad` flag only, so a view does not drag its base along and no autograd graph
crosses processes.
"""

from __future__ import annotations

import io
import pickle
import sys
import traceback
from dataclasses import dataclass

from ....framework.tensor import Tensor, make_tensor

# How long either side blocks on a queue before checking that the other side is alive.
STATUS_CHECK_INTERVAL = 1.0


@dataclass(frozen=True)
class IterableDatasetStopIteration:
    """A worker's reply once its copy of an IterableDataset is exhausted."""

    worker_id: int


@dataclass(frozen=True)
class ResumeIteration:
    """Tells a persistent worker to start a new epoch; the worker echoes it back."""


class KeyErrorMessage(str):
    """A str whose repr is itself: KeyError prints the repr of its argument, and the
    worker's traceback should read as text, not as one escaped line."""

    def __repr__(self) -> str:
        return self


class ExceptionWrapper:
    """The exception being handled in a worker, carried as its type and traceback text.
    `reraise()` raises the same type in the main process with the worker's traceback."""

    def __init__(self, where: str) -> None:
        exc_type, exc, tb = sys.exc_info()
        self.exc_type_name = exc_type.__name__
        # NOTE: an exception class defined where the main process cannot import it would
        # make the whole reply unpicklable; RuntimeError carries its message instead.
        self.exc_type = exc_type if _picklable(exc_type) else RuntimeError
        self.exc_msg = "".join(traceback.format_exception(exc_type, exc, tb))
        self.where = where

    def reraise(self):
        msg = f"Caught {self.exc_type_name} {self.where}.\nOriginal {self.exc_msg}"
        if self.exc_type is KeyError:
            raise KeyError(KeyErrorMessage(msg))
        try:
            exception = self.exc_type(msg)
        except Exception:  # the type's constructor takes other arguments
            raise RuntimeError(msg) from None
        raise exception


def _picklable(obj) -> bool:
    try:
        pickle.dumps(obj)
    except Exception:
        return False
    return True


def _rebuild_tensor(array, requires_grad: bool) -> Tensor:
    return make_tensor(array, requires_grad)


class _Pickler(pickle.Pickler):
    def reducer_override(self, obj):
        # Subclasses (Parameter) keep their own pickling: they carry more than data.
        if type(obj) is not Tensor:
            return NotImplemented
        if obj.requires_grad and obj.grad_fn is not None:
            raise RuntimeError(
                "a DataLoader worker cannot send a tensor that requires grad and is not a "
                "leaf: autograd graphs do not cross processes. Call detach() on it in the "
                "dataset or collate_fn."
            )
        return _rebuild_tensor, (obj._data, obj.requires_grad)


def dumps(obj) -> bytes:
    buffer = io.BytesIO()
    _Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    return buffer.getvalue()


loads = pickle.loads
