"""`flow.placement` and `flow.sbp` attribute by attribute, as OneFlow documents them:
`ranks` is a NumPy array in the grid's shape, sbp values are also callable, and both are
hashable values with OneFlow's repr."""

from __future__ import annotations

import copy
import doctest
import importlib
import pickle

import numpy as np
import pytest

import tideflow as flow
from tideflow.parallel import global_mode as global_mode_module
from tideflow.parallel import sbp as sbp_module

pytestmark = pytest.mark.usefixtures("local_dispatch")


# -- placement ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("ranks", "shape"),
    [([0], (1,)), ([[0]], (1, 1)), ([[[0]]], (1, 1, 1)), (range(1), (1,)), (0, (1,))],
)
def test_ranks_is_an_int64_array_in_the_grid_shape(ranks, shape):
    p = flow.placement("cpu", ranks)
    assert isinstance(p.ranks, np.ndarray) and p.ranks.dtype == np.int64
    assert p.ranks.shape == shape and p.ranks.ndim == len(shape)
    assert tuple(p.hierarchy) == shape and p.ranks.ravel().tolist() == [0]


def test_ranks_from_numpy_arrays_of_any_int_dtype():
    for dtype in (np.int32, np.int64, np.uint8):
        p = flow.placement(type="cpu", ranks=np.zeros((1, 1), dtype))
        assert p == flow.placement("cpu", [[0]])


def test_ranks_is_a_copy():
    p = flow.placement("cpu", [0])
    p.ranks[0] = 7
    assert p.ranks.tolist() == [0]


def test_type_repr_and_str():
    p = flow.placement("cpu", [[0]])
    assert p.type == "cpu"
    assert repr(p) == str(p) == 'tideflow.placement(type="cpu", ranks=[[0]])'


def test_equality_and_hash_follow_type_and_grid():
    same = [
        flow.placement("cpu", [0]),
        flow.placement("cpu", np.array([0])),
        flow.placement.all("cpu"),
    ]
    assert len(set(same)) == 1 and all(p == same[0] for p in same)
    assert flow.placement("cpu", [0]) != flow.placement("cpu", [[0]])
    assert flow.placement("cpu", [0]) != flow.placement("cuda", [0])


def test_all_device_placement_is_every_rank():
    assert flow.env.all_device_placement("cpu") == flow.placement("cpu", [0])
    assert flow.env.all_device_placement("cpu").ranks.tolist() == [0]


def test_placement_survives_pickle_and_copy():
    p = flow.placement("cpu", [[0]])
    assert pickle.loads(pickle.dumps(p)) == p and copy.deepcopy(p) == p


# -- sbp ---------------------------------------------------------------------------------------
def test_sbp_reprs():
    assert repr(flow.sbp.split(1)) == str(flow.sbp.split(1)) == "tideflow.sbp.split(dim=1)"
    assert repr(flow.sbp.broadcast) == "tideflow.sbp.broadcast"
    assert repr(flow.sbp.partial_sum) == "tideflow.sbp.partial_sum"


def test_sbp_values_are_also_callable():
    # OneFlow writes both `flow.sbp.broadcast` and `flow.sbp.broadcast()`
    assert flow.sbp.broadcast() is flow.sbp.broadcast
    assert flow.sbp.partial_sum() is flow.sbp.partial_sum
    assert flow.sbp.split(0)() == flow.sbp.split(0)


def test_sbp_equality_hash_and_pickle():
    values = [flow.sbp.split(0), flow.sbp.split(1), flow.sbp.broadcast, flow.sbp.partial_sum]
    assert len(set(values)) == 4 and flow.sbp.split(0) == flow.sbp.split(0)
    for v in values:
        assert pickle.loads(pickle.dumps(v)) == v and hash(copy.copy(v)) == hash(v)


def test_split_needs_an_integer_dim():
    with pytest.raises(TypeError, match=r"sbp\.split: dim must be an integer"):
        flow.sbp.split(0.5)


# -- tensors -----------------------------------------------------------------------------------
def test_tensor_placement_and_sbp_tuple():
    p = flow.placement("cpu", [[0]])
    t = flow.ones(2, 3).to_global(p, (flow.sbp.broadcast(), flow.sbp.split(1)))
    assert t.placement == p and t.placement.ranks.shape == (1, 1)
    assert t.sbp == (flow.sbp.broadcast, flow.sbp.split(1))


def test_a_local_tensor_has_no_placement_or_sbp():
    t = flow.ones(2)
    with pytest.raises(flow.TideflowError, match=r"only global tensors have a placement"):
        _ = t.placement
    with pytest.raises(AttributeError, match=r"only global tensors have an sbp"):
        _ = t.sbp
    assert not hasattr(t, "placement") and not hasattr(flow.nn.Parameter(t), "sbp")


def test_module_to_global_takes_an_sbp_or_a_function_of_the_tensor():
    p = flow.placement("cpu", [0])
    lin = flow.nn.Linear(3, 2).to_global(p, flow.sbp.broadcast())
    assert lin.weight.sbp == (flow.sbp.broadcast,)
    lin = flow.nn.Linear(3, 2)
    lin.to_global(p, lambda t: flow.sbp.split(0) if t.ndim == 2 else flow.sbp.broadcast)
    assert lin.weight.sbp == (flow.sbp.split(0),) and lin.bias.sbp == (flow.sbp.broadcast,)


# -- global_mode -------------------------------------------------------------------------------
def test_global_mode_makes_creators_global_and_nests():
    from tideflow.utils.global_view import current_global_mode, global_mode

    p = flow.placement("cpu", [0])
    with global_mode(True, placement=p, sbp=flow.sbp.split(0)):
        mode = current_global_mode()
        assert mode.is_enabled and mode.placement == p and mode.sbp == (flow.sbp.split(0),)
        made = [flow.ones(2, 3), flow.randn(4, device="cpu"), flow.arange(3), flow.eye(2)]
        with global_mode(False):
            assert not flow.zeros(2).is_global and not current_global_mode().is_enabled
        assert flow.zeros(2).is_global  # the outer mode is back
    assert all(t.is_global and t.sbp == (flow.sbp.split(0),) for t in made)
    assert not flow.ones(2).is_global and current_global_mode().placement is None


def test_global_mode_needs_a_placement_and_sbp():
    from tideflow.utils.global_view import global_mode

    with pytest.raises(ValueError, match="needs both placement= and sbp="):
        global_mode(True, placement=flow.placement("cpu", [0]))
    with pytest.raises(TypeError, match=r"placement must be a flow\.placement"):
        global_mode(True, placement="cpu", sbp=flow.sbp.broadcast)
    with pytest.raises(TypeError, match=r"sbp must be a flow\.sbp"):
        global_mode(True, placement=flow.placement("cpu", [0]), sbp="B")


# NOTE: `tideflow.parallel.placement` the attribute is the class; the module is imported by name
placement_module = importlib.import_module("tideflow.parallel.placement")


@pytest.mark.parametrize("module", [placement_module, sbp_module, global_mode_module, flow.env])
def test_docstring_examples_run(module):
    result = doctest.testmod(module, extraglobs={"flow": flow}, verbose=False)
    assert result.failed == 0 and result.attempted > 0
