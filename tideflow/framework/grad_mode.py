"""Grad mode: whether the dispatcher records autograd nodes (thread-local, like PyTorch)."""

from __future__ import annotations

import functools
import threading
import types


class _State(threading.local):
    enabled = True
    inference = False


STATE = _State()


def is_grad_enabled() -> bool:
    return STATE.enabled


def is_inference_mode_enabled() -> bool:
    return STATE.inference


class _GradModeContext:
    """Context manager that is also a decorator (`@no_grad()` and `@no_grad`)."""

    _enabled: bool

    def __init__(self, func=None) -> None:
        self._func = func
        if func is not None:
            functools.update_wrapper(self, func)

    def __call__(self, *args, **kwargs):
        if self._func is None:  # @no_grad() applied to a function
            return type(self)(args[0])
        with type(self)():
            return self._func(*args, **kwargs)

    def __get__(self, obj, objtype=None):  # decorated methods bind like functions
        return self if obj is None else types.MethodType(self, obj)

    def __enter__(self) -> None:
        self._prev = STATE.enabled
        STATE.enabled = self._enabled

    def __exit__(self, *exc) -> None:
        STATE.enabled = self._prev


class no_grad(_GradModeContext):
    """Disable gradient recording. `with flow.no_grad(): y = model(x)`"""

    _enabled = False


class enable_grad(_GradModeContext):
    """Enable gradient recording inside a `no_grad` region."""

    _enabled = True


class set_grad_enabled:
    """`flow.set_grad_enabled(False)` as a call, a context manager or a decorator."""

    def __init__(self, mode: bool) -> None:
        self._prev = STATE.enabled
        self._mode = bool(mode)
        STATE.enabled = self._mode

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc) -> None:
        STATE.enabled = self._prev

    def __call__(self, func):
        STATE.enabled = self._prev  # the constructor call applied the mode; a decorator must not

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            prev = STATE.enabled
            STATE.enabled = self._mode
            try:
                return func(*args, **kwargs)
            finally:
                STATE.enabled = prev

        return wrapper


class inference_mode(_GradModeContext):
    """Like `no_grad`; tensors created inside are marked as inference tensors."""

    _enabled = False

    def __init__(self, mode=True) -> None:
        func = mode if callable(mode) else None
        super().__init__(func)
        self._mode = True if func is not None else bool(mode)

    def __enter__(self) -> None:
        self._prev = STATE.enabled
        self._prev_inf = STATE.inference
        if self._mode:
            STATE.enabled = False
            STATE.inference = True

    def __exit__(self, *exc) -> None:
        STATE.enabled = self._prev
        STATE.inference = self._prev_inf
