"""Exceptions users can cause. Each names the op and the offending shapes/dtypes/values."""


class TideflowError(RuntimeError):
    """Base class of every error tideflow raises for a user mistake."""


class ShapeError(TideflowError, ValueError):
    """Shapes that do not fit the op (matmul, cat, broadcasting, view, ...)."""


class DTypeError(TideflowError, TypeError):
    """A dtype the op does not accept."""


class ArgumentError(TideflowError, TypeError):
    """An argument of the wrong kind: a number or list where the op takes a tensor, a string
    where it takes an int. A `TypeError` too, as PyTorch raises one."""


class TensorIndexError(TideflowError, IndexError):
    """An index or dimension out of range, or a key that cannot index the tensor. It is an
    `IndexError` too: Python's sequence protocol and PyTorch code expect one."""


class LinAlgError(TideflowError):
    """A linear-algebra routine that cannot complete on these values: a singular matrix, one
    not positive-definite, an iteration that did not converge (`torch.linalg.LinAlgError`)."""


class DeviceError(TideflowError):
    """Operands on different devices, or a device that is not available."""


class GlobalOnlyError(TideflowError, AttributeError):
    """A global tensor's attribute (`placement`, `sbp`) read on a local tensor, as OneFlow
    refuses it. An `AttributeError` too, so `hasattr(t, "placement")` is False for a local
    tensor, as for PyTorch's tensors."""


class AutogradError(TideflowError):
    """Misuse of autograd: backward through freed graph, modified saved tensor, ..."""


class UnsupportedError(TideflowError, NotImplementedError):
    """A PyTorch feature tideflow does not provide (ONNX export, ...). A `NotImplementedError`
    too, which is what code probing for optional features catches."""


class Rejected(Exception):
    """Raised by a kernel for operands NumPy would accept but the op does not (mixed dtypes,
    shapes NumPy would broadcast). The dispatcher then asks the op's meta rule for the
    user-facing message, so kernels check cheaply and meta rules own the wording."""


def op_error(op: str, message: str, kind: type[TideflowError] = TideflowError) -> TideflowError:
    return kind(f"{op}: {message}")
