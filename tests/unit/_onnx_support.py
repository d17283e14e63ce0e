"""Helpers of the ONNX export tests: export a model, check the file with onnx's full checker,
run it in onnxruntime and OpenVINO, and compare with tideflow's eager results."""

from __future__ import annotations

import numpy as np
import pytest

import tideflow as flow
from tideflow.testing.accuracy import unit_roundoff

onnx = pytest.importorskip("onnx")
tideflow_onnx = pytest.importorskip("tideflow.onnx")
ort = pytest.importorskip("onnxruntime")
ov = pytest.importorskip("openvino")

U32 = unit_roundoff("float32")
_CORE = None


def _openvino():
    global _CORE
    if _CORE is None:
        _CORE = ov.Core()
    return _CORE


def run_onnxruntime(path, feeds: dict) -> list[np.ndarray]:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1  # the test machine's cores are shared
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def run_openvino(path, feeds: dict) -> list[np.ndarray]:
    # NOTE: OpenVINO's CPU plugin computes in bfloat16 on CPUs that have it unless told not to
    config = {"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": 1}
    compiled = _openvino().compile_model(str(path), "CPU", config)
    result = compiled(feeds)
    return [np.asarray(result[out]) for out in compiled.outputs]


def eager(model, args) -> list[np.ndarray]:
    with flow.no_grad():
        out = model(*args)
    flat = out if isinstance(out, tuple | list) else (out,)
    return [t.numpy() for t in _tensors(flat)]


def _tensors(values):
    """The tensors of nested tuples and lists, in order (None skipped, as outputs are)."""
    for v in values:
        if isinstance(v, tuple | list):
            yield from _tensors(v)
        elif v is not None:
            yield v


def assert_matches(got, want, bound: float, what: str) -> None:
    """Exact for integers and bools; within `bound` (absolute) for floats."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != eager {want.shape}"
    if want.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want, err_msg=what)
        return
    err = np.abs(got.astype(np.float64) - want.astype(np.float64))
    both_nan = np.isnan(got) & np.isnan(want)
    same_inf = np.isinf(want) & (got == want)
    bad = ~(both_nan | same_inf | (err <= bound))
    assert not bad.any(), (
        f"{what}: {int(bad.sum())} of {bad.size} values differ by more than {bound:.3g} "
        f"(largest {np.nanmax(np.where(bad, err, 0)):.3g})"
    )


def float32_bound(depth: int, n: int, outputs) -> float:
    """How far two float32 evaluations of one model may differ: a dot product of length n
    has a forward error of at most n u |x|.|y| (Higham, with u float32's unit roundoff);
    each of `depth` layers can add that much, relative to the size of the values (at
    least 1: normalized activations)."""
    scale = max([1.0, *(float(np.abs(o[np.isfinite(o)]).max(initial=0.0)) for o in outputs)])
    return 2 * depth * n * U32 * scale


def export_and_run(tmp_path, model, args, *, dynamic=None, opset=17, name="model"):
    """Export `model` on `args` (input i named x<i>, output j y<j>, `dynamic`: input index ->
    its dynamic axes; the outputs' dims that follow them are found by the exporter), check
    the file fully, and return (path, a function running it on arguments in onnxruntime and
    in OpenVINO)."""
    path = tmp_path / f"{name}.onnx"
    tensors = list(_tensors(args))
    n_out = len(eager(model, args))
    axes = {f"x{i}": list(a) for i, a in (dynamic or {}).items()}
    tideflow_onnx.export(
        model,
        tuple(args),
        path,
        input_names=[f"x{i}" for i in range(len(tensors))],
        output_names=[f"y{j}" for j in range(n_out)],
        dynamic_axes=axes,
        opset_version=opset,
    )
    onnx.checker.check_model(onnx.load(str(path)), full_check=True)

    def run(call_args):
        feeds = {f"x{i}": t.numpy() for i, t in enumerate(_tensors(call_args))}
        return run_onnxruntime(path, feeds), run_openvino(path, feeds)

    return path, run


def check_model(tmp_path, model, args, *, depth, n, dynamic=None, second=None, opset=17):
    """Export, check, and compare onnxruntime's and OpenVINO's results with eager ones on
    `args` and, through the dynamic axes, on `second`."""
    model.eval()
    _, run = export_and_run(tmp_path, model, args, dynamic=dynamic, opset=opset)
    for call_args in (args, second) if second is not None else (args,):
        want = eager(model, call_args)
        bound = float32_bound(depth, n, want)
        for runtime, got in zip(("onnxruntime", "OpenVINO"), run(call_args), strict=True):
            assert len(got) == len(want)
            for j, (g, w) in enumerate(zip(got, want, strict=True)):
                assert_matches(g, w, bound, f"{runtime} output {j}")
