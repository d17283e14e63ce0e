"""Every op database record whose ops have ONNX lowerings, exported and run: the checker's full
check, onnxruntime and OpenVINO against tideflow's float64 values, within float32's error
bound (`tideflow.testing.accuracy`), and again with dim 0 one longer through a dynamic axis
where the op allows it (its eager call does). Each record's first exportable float32 sample
in onnxruntime; under the slow marker every sample, and the first in OpenVINO too (which the
reference models' and layers' tests run on every export)."""

from __future__ import annotations

import numpy as np
import pytest

import tideflow as flow
from tideflow import nn
from tideflow.framework.errors import AutogradError, TideflowError, UnsupportedError
from tideflow.framework.tensor import Tensor
from tideflow.testing.accuracy import half_error_bound, operand_bounds
from tideflow.testing.harness import flatten, flow_fn
from tideflow.testing.op_db import OP_DB

from ._onnx_support import onnx, run_onnxruntime, run_openvino

tideflow_onnx = pytest.importorskip("tideflow.onnx")

# NOTE: nn.Graph cannot trace ops whose output shapes depend on values (tracing nonzero's
# unknown size fails in getitem's meta rule with a ValueError)
_DATA_DEPENDENT_SHAPES = {"nonzero.as_tuple", "where.condition_only", "where.nonzero"}
# NOTE: random ops' values cannot be compared; the records' float32 samples cover the rest
CASES = [
    pytest.param(info, id=info.id)
    for info in OP_DB
    if "float32" in info.dtypes and not info.random and info.id not in _DATA_DEPENDENT_SHAPES
]
# NOTE: OpenVINO's CPU plugin drops the Slice that cuts gather's input to an index shorter
# than it off the gathered axis, then refuses GatherElements' shapes; onnxruntime runs it
_OPENVINO_REFUSES = {"gather": "an index shorter than the input off the gathered axis"}
# the operand dtypes checked: float32 (what ONNX runtimes serve on CPU: onnxruntime's kernels
# cover few ops in float16 or float64, its Python API takes no bfloat16 or complex arrays),
# with integers and bools
_FED = {"bool", "uint8", "int8", "int16", "int32", "int64", "float32"}
_SEED = 20260


class _Call(nn.Module):
    """One sample call as a module: the sample's arrays are its inputs, in order."""

    def __init__(self, fn, args: tuple, kwargs: dict) -> None:
        super().__init__()
        self.fn, self.args, self.kwargs = fn, args, kwargs

    def forward(self, *tensors):
        it = iter(tensors)
        args = [next(it) if isinstance(a, np.ndarray) else a for a in self.args]
        return tuple(t for t in flatten(self.fn(*args, **self.kwargs)) if isinstance(t, Tensor))


def _outputs(call: _Call, arrays) -> list[np.ndarray]:
    with flow.no_grad():
        return [t.numpy() for t in call(*(flow.from_numpy(a.copy()) for a in arrays))]


def _wider(arrays):
    return [a.astype(np.float64) if a.dtype.kind == "f" else a for a in arrays]


def _exact(info, call: _Call, arrays, outputs) -> list[np.ndarray]:
    """The call's float outputs in float64 (from float64 operands), where the op takes them
    and its values do not depend on the dtype beyond rounding (nan_to_num's defaults)."""
    if info.dtype_dependent:
        return outputs
    try:
        wide = _outputs(call, _wider(arrays))
    except Exception:  # a float32-only op: its own outputs are the reference
        return outputs
    return [e if w.dtype.kind == "f" else w for e, w in zip(wide, outputs, strict=True)]


def _grown(call: _Call, arrays, want) -> tuple[list, list] | None:
    """The arrays with dim 0 one longer (their first row repeated) where that dim is the
    first array's, and the outputs: when the eager call accepts them and every output's
    dim 0 grows by one too (the op treats dim 0 as a batch); else None."""
    n = arrays[0].shape[0] if arrays[0].ndim else None
    if n is None or any(not w.ndim or w.shape[0] != n for w in want):
        return None
    grown = [np.concatenate([a, a[:1]]) if a.ndim and a.shape[0] == n else a for a in arrays]
    try:
        got = _outputs(call, grown)
    except Exception:  # the op ties dim 0 to another operand or an argument
        return None
    if any(g.shape != (w.shape[0] + 1, *w.shape[1:]) for g, w in zip(got, want, strict=True)):
        return None
    return grown, got


def _check(runtime: str, got, exact, arrays, what: str) -> None:
    n, magnitude = operand_bounds(arrays)
    for j, (g, e) in enumerate(zip(got, exact, strict=True)):
        assert g.shape == e.shape, f"{what} {runtime} output {j}: {g.shape} != {e.shape}"
        if e.dtype.kind in "biu":
            np.testing.assert_array_equal(g, e, err_msg=f"{what} {runtime} output {j}")
            continue
        e64 = e.astype(np.float64)
        bound = half_error_bound(e64, g.dtype.name, n, magnitude)  # in the output's dtype
        err = np.abs(g.astype(np.float64) - e64)
        special = (np.isnan(g) & np.isnan(e64)) | (np.isinf(e64) & (g == e64))
        bad = ~(special | (err <= bound))
        assert not bad.any(), (
            f"{what} {runtime} output {j}: {int(bad.sum())} values beyond {g.dtype}'s bound "
            f"(n={n}, M={magnitude:.3g}): got {g[bad][:4]}, exact {e64[bad][:4]}"
        )


def _export(call: _Call, arrays, path, grown) -> tuple | None:
    """Export the call, its grown arrays' dim 0 dynamic; the grown arrays and outputs, or None
    when the exporter refused that dim (an op whose lowering fixes it, such as a roll along
    it: then exported with every dim static)."""
    names = [f"x{i}" for i in range(len(arrays))]
    tensors = tuple(flow.from_numpy(a.copy()) for a in arrays)
    if grown is not None:
        pairs = zip(names, arrays, grown[0], strict=True)
        dynamic = {name: [0] for name, a, b in pairs if a is not b}
        try:
            tideflow_onnx.export(call, tensors, path, input_names=names, dynamic_axes=dynamic)
            return grown
        except UnsupportedError as error:
            if "dynamic axes" not in str(error):
                raise
    tideflow_onnx.export(call, tensors, path, input_names=names)
    return None


def _run_and_compare(info, call, path, sample, runs, openvino: bool) -> None:
    for inputs, outputs in runs:
        feeds = {f"x{i}": a for i, a in enumerate(inputs)}
        exact = _exact(info, call, inputs, outputs)
        what = f"{sample} at dim 0 = {inputs[0].shape[0] if inputs[0].ndim else '-'}"
        _check("onnxruntime", run_onnxruntime(path, feeds), exact, inputs, what)
        if not openvino:
            continue
        try:
            _check("OpenVINO", run_openvino(path, feeds), exact, inputs, what)
        except RuntimeError:
            if info.id not in _OPENVINO_REFUSES:
                raise


def _check_record(info, tmp_path, every_sample: bool) -> None:
    """Export and run the record's float32 samples (the first exportable one in onnxruntime
    unless `every_sample`; then every one, the first in OpenVINO too); skip when none is
    exportable, saying why."""
    rng = np.random.default_rng(_SEED)
    checked, unlowered = 0, set()
    for k, sample in enumerate(info.samples(rng, "float32")):
        arrays = [a for a in sample.args if isinstance(a, np.ndarray)]
        if not arrays or any(a.size == 0 or a.dtype.name not in _FED for a in arrays):
            continue  # runtimes differ on empty tensors (OpenVINO refuses them)
        call = _Call(flow_fn(info), sample.args, sample.kwargs)
        try:
            want = _outputs(call, arrays)
        except AutogradError as error:  # the record's call runs a backward
            pytest.skip(f"not an inference call: {error}")
        if not want or any(w.size == 0 or w.dtype.name not in _FED for w in want):
            continue
        path = tmp_path / f"sample{k}.onnx"
        try:
            grown = _export(call, arrays, path, _grown(call, arrays, want))
        except UnsupportedError as error:
            # an op without a lowering, or one refusing these operands (a boolean mask's
            # data-dependent size): not exportable, and said so
            if not any(why in str(error) for why in ("has no ONNX lowering", "cannot be exported")):
                raise
            unlowered.add(str(error).split("'")[1])
            continue
        except TideflowError as error:
            # NOTE: the trace refused the call: it reads tensor values in Python, writes
            # tensors captured from outside (running statistics, optimizer state) or runs a
            # backward; none of these is an inference graph
            pytest.skip(f"not an inference graph: {error}")
        onnx.checker.check_model(onnx.load(str(path)), full_check=True)
        runs = [(arrays, want)] + ([grown] if grown else [])
        # NOTE: OpenVINO compiles a model in 0.3 s: it runs the first sample, in the slow test
        _run_and_compare(info, call, path, sample, runs, openvino=every_sample and not checked)
        checked += 1
        if not every_sample:
            return
    if not checked:
        pytest.skip(f"not exportable: ops without a lowering or refusing {sorted(unlowered)}")


@pytest.mark.parametrize("info", CASES)
def test_record_exports_and_runs(info, tmp_path):
    _check_record(info, tmp_path, every_sample=False)


@pytest.mark.slow
@pytest.mark.parametrize("info", CASES)
def test_record_every_sample(info, tmp_path):
    _check_record(info, tmp_path, every_sample=True)
