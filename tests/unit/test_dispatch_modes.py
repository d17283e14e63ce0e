"""Dispatch modes (`framework/modes.py`): a per-thread stack, innermost first, each mode
handed the one below; the base below all of them; and the one function that picks kernels
(generated ones where numba is available, `backends/jit.py`)."""

import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import tideflow as flow
from tideflow.backends import jit
from tideflow.framework.errors import DeviceError, TideflowError
from tideflow.framework.modes import STACK, dispatch_mode
from tideflow.framework.registry import OpDef, get_op, kernel_for, use_generated_kernels


def _logging(log: list, name: str):
    def handle(op, args, attrs, below):
        log.append((name, op.name))
        return below(op, args, attrs)

    return handle


def test_modes_see_calls_innermost_first_and_pass_them_down():
    log: list = []
    with dispatch_mode(_logging(log, "outer")), dispatch_mode(_logging(log, "inner")):
        out = flow.ones(2) * 3
    assert log == [("inner", "full"), ("outer", "full"), ("inner", "mul"), ("outer", "mul")]
    np.testing.assert_array_equal(out.numpy(), [3.0, 3.0])
    assert STACK.levels == []


def test_a_mode_may_replace_the_call():
    def doubled(op, args, attrs, below):
        out = below(op, args, attrs)
        return out * 2 if op.name == "add" else out

    with dispatch_mode(doubled):
        out = flow.tensor([1.0]) + 1
    np.testing.assert_array_equal(out.numpy(), [4.0])


def test_modes_leave_in_reverse_order():
    outer, inner = dispatch_mode(_logging([], "outer")), dispatch_mode(_logging([], "inner"))
    outer.__enter__()
    inner.__enter__()
    with pytest.raises(TideflowError, match="reverse order"):
        outer.__exit__(None, None, None)
    inner.__exit__(None, None, None)
    outer.__exit__(None, None, None)
    assert STACK.levels == []


def test_modes_are_per_thread():
    log: list = []
    other: list = []
    with dispatch_mode(_logging(log, "main")):
        thread = threading.Thread(target=lambda: other.append(flow.ones(2) + 1))
        thread.start()
        thread.join()
    assert log == [] and not isinstance(other[0], Exception)
    np.testing.assert_array_equal(other[0].numpy(), [2.0, 2.0])


def test_autocast_regions_nest_and_only_the_innermost_applies():
    a, b = flow.ones(2, 2), flow.ones(2, 2)
    with flow.autocast("cpu", dtype=flow.bfloat16):
        assert (a @ b).dtype == flow.bfloat16
        with flow.autocast("cpu", dtype=flow.float16):
            assert (a @ b).dtype == flow.float16
            with flow.autocast("cpu", enabled=False):
                assert (a @ b).dtype == flow.float32
        assert (a @ b).dtype == flow.bfloat16
    assert (a @ b).dtype == flow.float32 and STACK.levels == []


def test_kernel_for_names_the_op_and_the_device():
    add = get_op("add")
    assert kernel_for(add) is add.kernels["cpu"]
    with pytest.raises(DeviceError, match=r"add: no kernel for device type 'cuda'"):
        kernel_for(add, "cuda")


def test_generated_kernels_are_preferred_where_numba_is_available():
    op = OpDef(
        "twice", inputs=("x",), meta=lambda x: x, sbp=lambda *a: [],
        kernels={"cpu": lambda x: 2 * x}, differentiable=False,
    )  # fmt: skip
    numpy_kernel = kernel_for(op)
    op.kernel(jit.KERNEL_KEY)(lambda x: x + x)
    generated = op.kernels[jit.KERNEL_KEY]
    assert kernel_for(op) is (generated if jit.available() else numpy_kernel)
    before = use_generated_kernels(False)
    try:
        assert kernel_for(op) is numpy_kernel
    finally:
        use_generated_kernels(before)
    assert kernel_for(op) is (generated if jit.available() else numpy_kernel)


def test_jit_compiles_on_the_first_call():
    @jit.jit
    def axpy(a, x, y):
        out = np.empty_like(x)
        for i in range(x.size):
            out[i] = a * x[i] + y[i]
        return out

    x = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(axpy(np.float32(2), x, x), 3 * x)


def test_tideflow_jit_0_turns_generated_kernels_off():
    code = "from tideflow.backends import jit; assert not jit.available()"
    env = {**os.environ, "TIDEFLOW_JIT": "0"}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=60)
