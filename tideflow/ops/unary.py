"""Unary elementwise ops: math functions and activations."""

from __future__ import annotations

import numpy as np

from ..framework.dispatch import inplace
from ._rules import defop, dispatch, elementwise_sbp, methods, same_meta

__all__ = ["neg", "negative", "exp"]


_NO_ATTRS: dict = {}


def _unary(name, kernel, *, grad=None, saves=(), promote=None, partial=None):
    return defop(
        name,
        inputs=("input",),
        meta=same_meta,
        sbp=elementwise_sbp(partial),
        kernels={"cpu": kernel},
        grad=grad,
        saves=saves,
        promote=promote,
    )


_neg = _unary("neg", np.negative, grad=lambda ctx, gy: (-gy,), partial="linear")
_exp = _unary("exp", np.exp, grad=lambda ctx, gy: (gy * ctx.out,), saves=("out",), promote="float")


def neg(input):
    """`-input`."""
    return dispatch(_neg, (input,), _NO_ATTRS)


def exp(input):
    """Elementwise e**x. Integer inputs give the default float dtype."""
    return dispatch(_exp, (input,), _NO_ATTRS)


negative = neg

methods(
    neg=neg,
    negative=neg,
    __neg__=neg,
    exp=exp,
    neg_=inplace(neg, "neg_"),
    exp_=inplace(exp, "exp_"),
)
