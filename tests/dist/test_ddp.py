"""Data parallelism. DistributedDataParallel on 2 and 4 real processes against training on one
process (workers/ddp_train.py), in a world of one against PyTorch, and its reducer in one
process on a communicator that stands for a second rank. Global modules trained by the
optimizers, on tensors made by the creators' placement= and sbp= (workers/ddp_global_*.py)."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import tideflow as flow
import tideflow.mock_torch
import tideflow.parallel as par
from tideflow.distributed.backend import LocalCommunicator, ReduceOp
from tideflow.framework.tensor import accumulator
from tideflow.nn.parallel import DistributedDataParallel as DDP
from tideflow.nn.parallel import distributed as ddp_impl
from tideflow.nn.parallel._reducer import BucketCaps, Reducer, assign_buckets

from ..unit.test_nn_layers import run_doctests
from .jobs import WORKERS, every_rank_ok


@pytest.mark.mpi
@pytest.mark.parametrize("n", [2, 4])
def test_ddp_trains_like_one_process(launch, n):
    every_rank_ok(launch(n, [str(WORKERS / "ddp_train.py")], timeout=120), n)


@pytest.mark.mpi
@pytest.mark.parametrize("n", [2, 4])
def test_global_creators_and_optimizers_match_one_process(launch, n):
    """Data parallelism the global way: creators with placement= and sbp=, and optimizers
    whose state follows global parameters (workers/ddp_global_training.py)."""
    every_rank_ok(launch(n, [str(WORKERS / "ddp_global_training.py")], timeout=180), n)


def mlp(seed: int = 0):
    flow.manual_seed(seed)
    return flow.nn.Sequential(flow.nn.Linear(3, 4), flow.nn.Tanh(), flow.nn.Linear(4, 2))


# -- a world of one ----------------------------------------------------------------------------
def test_docstring_examples_run():
    run_doctests(ddp_impl)


def test_in_a_world_of_one_ddp_is_the_module():
    model, bare = DDP(mlp()), mlp()
    x = flow.randn(5, 3)
    model(x).pow(2).sum().backward()
    bare(x).pow(2).sum().backward()
    for p, q in zip(model.module.parameters(), bare.parameters(), strict=True):
        np.testing.assert_array_equal(p.grad.numpy(), q.grad.numpy())
    assert list(model.state_dict()) == [f"module.{k}" for k in bare.state_dict()]
    model.load_state_dict(DDP(mlp(1)).state_dict())
    np.testing.assert_array_equal(model.module[0].weight.detach().numpy(),
                                  mlp(1)[0].weight.detach().numpy())  # fmt: skip
    with model.no_sync():
        assert not model.require_backward_grad_sync
    assert model.require_backward_grad_sync


def test_attributes_the_wrapper_lacks_come_from_the_module_as_in_oneflow():
    model = DDP(flow.nn.Linear(3, 2), use_bucket=False)
    assert model.in_features == 3 and model.weight is model.module.weight
    with pytest.raises(AttributeError, match="'DistributedDataParallel' object has no attribute"):
        _ = model.no_such_attribute
    with tideflow.mock_torch.enabled(), pytest.raises(AttributeError, match="in_features"):
        _ = model.in_features  # PyTorch's wrapper has only its own attributes


@pytest.fixture(scope="module")
def torch_world(tmp_path_factory):
    torch = pytest.importorskip("torch")
    store = tmp_path_factory.mktemp("torch_store") / "store"
    torch.distributed.init_process_group("gloo", init_method=f"file://{store}", rank=0,
                                         world_size=1)  # fmt: skip
    yield torch
    torch.distributed.destroy_process_group()


@pytest.mark.torch
def test_matches_pytorch_in_a_world_of_one(torch_world):
    torch = torch_world
    ours = DDP(mlp(), bucket_cap_mb=1)
    theirs = torch.nn.parallel.DistributedDataParallel(
        torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2)),
        bucket_cap_mb=1,
    )
    theirs.load_state_dict({k: torch.tensor(v.numpy()) for k, v in ours.state_dict().items()})
    x = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    ours(flow.tensor(x)).pow(2).sum().backward()
    theirs(torch.tensor(x)).pow(2).sum().backward()
    for p, q in zip(ours.parameters(), theirs.parameters(), strict=True):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-5, atol=1e-6)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert repr(ours) == repr(theirs)
    for name in ("broadcast_buffers", "forward_sync_buffers", "find_unused_parameters",
                 "gradient_as_bucket_view", "require_backward_grad_sync", "device_ids", "dim",
                 "bucket_bytes_cap"):  # fmt: skip
        assert getattr(ours, name) == getattr(theirs, name), name


@pytest.mark.torch
def test_signature_follows_pytorch(torch_world):
    torch = torch_world
    theirs = list(inspect.signature(torch.nn.parallel.DistributedDataParallel).parameters)
    ours = list(inspect.signature(DDP).parameters)
    assert (
        ours[: theirs.index("delay_all_reduce_named_params")]
        == theirs[: theirs.index("delay_all_reduce_named_params")]
    )
    assert "forward_sync_buffers" in ours and "bucket_size" in ours


_MISUSE = {  # (module from nn, keywords, exception, message)
    "no parameter requires grad": (
        lambda nn: nn.Linear(2, 2).requires_grad_(False),
        {},
        RuntimeError,
        "is not needed",
    ),
    "device_ids on the CPU": (
        lambda nn: nn.Linear(2, 2),
        {"device_ids": [0]},
        ValueError,
        "only work with single",
    ),
    "two device_ids": (
        lambda nn: nn.Linear(2, 2),
        {"device_ids": [0, 1]},
        ValueError,
        "contain a single element",
    ),
}


@pytest.mark.torch
@pytest.mark.parametrize("case", _MISUSE)
def test_misuse_raises_what_pytorch_raises(torch_world, case):
    torch = torch_world
    make, kwargs, error, match = _MISUSE[case]
    with pytest.raises(error, match=match):
        torch.nn.parallel.DistributedDataParallel(make(torch.nn), **kwargs)
    with pytest.raises(error, match=match):
        DDP(make(flow.nn), **kwargs)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"bucket_size": 2, "bucket_cap_mb": 1}, ValueError, "not both"),
        ({"bucket_size": 0}, ValueError, "bucket_size must be a positive number"),
        ({"bucket_cap_mb": -1}, ValueError, "bucket_cap_mb must be positive"),
        ({"process_group": [0]}, TypeError, "process_group must be a ProcessGroup"),
    ],
)
def test_bad_arguments_are_named(kwargs, error, match):
    with pytest.raises(error, match=match):
        DDP(mlp(), **kwargs)


def test_deprecated_arguments_warn_as_in_pytorch():
    with pytest.warns(FutureWarning, match="check_reduction"):
        DDP(mlp(), check_reduction=True)
    with pytest.warns(FutureWarning, match="value is ignored"):
        model = DDP(mlp(), broadcast_buffers=True, forward_sync_buffers=False)
    assert model.broadcast_buffers is False


@pytest.mark.usefixtures("local_dispatch")
def test_a_global_module_is_not_replicated():
    model = mlp().to_global(par.placement("cpu", [0]), flow.sbp.broadcast)
    with pytest.raises(flow.TideflowError, match=r"parameters \['0.weight'.*are global"):
        DDP(model)


# -- creators with placement= and sbp=, in a world of one ----------------------------------------
ONE = par.placement("cpu", [0])


@pytest.mark.usefixtures("local_dispatch")
def test_creators_make_global_tensors_and_like_forms_follow_them():
    x = flow.arange(6.0, placement=ONE, sbp=flow.sbp.split(0), requires_grad=True)
    assert x.is_global and x.is_leaf and x.requires_grad and x.sbp == (flow.sbp.split(0),)
    for made in (flow.zeros_like(x), x.new_ones(2, 3), flow.randn_like(x), x.new_tensor(1.0)):
        assert made.is_global and made.placement == ONE
    assert x.new_tensor(1.0).sbp == (flow.sbp.broadcast,)  # a 0-d tensor has no dim to split
    assert not flow.zeros_like(flow.ones(2)).is_global


@pytest.mark.parametrize(
    ("create", "match"),
    [
        (lambda: flow.zeros(2, placement=ONE), "zeros: a global tensor needs both .* sbp= is"),
        (lambda: flow.rand(2, sbp=flow.sbp.broadcast), "rand: .* placement= is missing"),
        (lambda: flow.ones(2, device="cpu", placement=ONE, sbp=flow.sbp.broadcast),
         "ones: give device= for a local tensor or placement= and sbp= for a global one"),
        (lambda: flow.full((2,), 1.0, placement="cpu", sbp=flow.sbp.broadcast),
         "needs a flow.placement and an sbp"),
    ],
)  # fmt: skip
@pytest.mark.usefixtures("local_dispatch")
def test_creator_misuse_is_named(create, match):
    with pytest.raises(flow.TideflowError, match=match):
        create()


# -- the reducer, with a second rank that contributes zeros ------------------------------------
class _TwoRanks(LocalCommunicator):
    """Rank 0 of two, whose peer contributes zeros to every sum; `log` records the calls."""

    size = 2
    ranks = (0, 1)

    def __init__(self) -> None:
        self.log: list[tuple[str, int]] = []

    def allreduce(self, sendbuf, recvbuf, op) -> None:
        self.log.append(("allreduce", sendbuf.size))
        recvbuf[...] = sendbuf


class _TwoRanksNonBlocking(_TwoRanks):
    """The same with a non-blocking allreduce: the sum lands when the request is waited for."""

    def iallreduce(self, sendbuf, recvbuf, op):
        log = self.log
        log.append(("start", sendbuf.size))
        assert op is ReduceOp.SUM

        class Request:
            def wait(self) -> int:
                log.append(("wait", sendbuf.size))
                recvbuf[...] = sendbuf
                return 0

        return Request()


class _Mirror(LocalCommunicator):
    """Rank 0 of two whose peer holds the same values: sums double, gathers repeat."""

    size = 2
    ranks = (0, 1)

    def allreduce(self, sendbuf, recvbuf, op) -> None:
        recvbuf[...] = sendbuf * (2 if op is ReduceOp.SUM else 1)

    def allgather(self, sendbuf, recvbuf, counts=None) -> None:
        recvbuf.reshape(2, -1)[...] = sendbuf.reshape(1, -1)


def _reduced(comm, caps: BucketCaps, **kwargs):
    model = mlp()
    named = list(model.named_parameters())
    reducer = Reducer([p for _, p in named], [n for n, _ in named], comm, caps, **kwargs)
    x = flow.randn(6, 3)
    out = model(x)
    reducer.prepare_for_backward(out)
    out.pow(2).sum().backward()
    alone = mlp()
    alone(x).pow(2).sum().backward()
    return model, alone, reducer


@pytest.mark.parametrize("comm_class", [_TwoRanks, _TwoRanksNonBlocking])
@pytest.mark.parametrize("as_view", [False, True])
def test_gradients_are_averaged_over_the_ranks(comm_class, as_view):
    comm = comm_class()
    model, alone, _ = _reduced(comm, BucketCaps(params=1), gradient_as_bucket_view=as_view)
    for p, q in zip(model.parameters(), alone.parameters(), strict=True):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy() / 2, rtol=1e-6)
        assert (p.grad._data.base is not None) == as_view  # a view of the bucket, or its own
    sizes = [p.numel() for p in reversed(list(model.parameters()))]
    if comm_class is _TwoRanks:
        assert comm.log == [("allreduce", n) for n in sizes]
    else:  # each bucket starts as soon as it is ready; all are waited for at the end
        assert comm.log == [("start", n) for n in sizes] + [("wait", n) for n in sizes]


def test_buckets_follow_reverse_registration_order_and_caps():
    params = [flow.nn.Parameter(flow.zeros(n)) for n in (4, 4, 4, 4)]  # 16 bytes each
    assert assign_buckets(params, BucketCaps(params=3)) == [[3, 2, 1], [0]]
    assert assign_buckets(params, BucketCaps(first_bytes=16, bytes=32)) == [[3], [2, 1], [0]]
    mixed = [*params[:2], flow.nn.Parameter(flow.zeros(4, dtype=flow.float64))]
    assert assign_buckets(mixed, BucketCaps(first_bytes=1000, bytes=1000)) == [[2], [1, 0]]


def test_a_gradient_twice_in_one_iteration_is_an_error():
    model = mlp()
    named = list(model.named_parameters())
    reducer = Reducer([p for _, p in named], [n for n, _ in named], _TwoRanks(),
                      BucketCaps(first_bytes=1 << 20, bytes=1 << 20))  # fmt: skip
    x = flow.randn(2, 3)
    out = model(x)
    reducer.prepare_for_backward(out)
    model[2](flow.randn(2, 4)).sum().backward()  # the head's gradients arrive ...
    with pytest.raises(flow.TideflowError, match=r"'2\.(weight|bias)' received its gradient twice"):
        out.sum().backward()  # ... and again


class Branchy(flow.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.used = flow.nn.Linear(3, 2)
        self.spare = flow.nn.Linear(3, 2)

    def forward(self, x, spare: bool):
        return self.used(x) + (self.spare(x) if spare else 0)


def test_an_unfinished_reduction_is_reported_at_the_next_forward(monkeypatch):
    monkeypatch.setattr(ddp_impl, "_communicator", lambda group: _Mirror())
    model = DDP(Branchy())
    x = flow.randn(2, 3)
    model(x, False).sum().backward()  # `spare` gets no gradient: the reduction cannot finish
    with pytest.raises(flow.TideflowError, match=r"finished reduction.*spare\.weight, spare\.bias"):
        model(x, False)


def test_a_parameter_used_outside_the_forward_output_is_reported(monkeypatch):
    monkeypatch.setattr(ddp_impl, "_communicator", lambda group: _Mirror())
    model = DDP(Branchy(), find_unused_parameters=True)
    out = model(flow.randn(2, 3), False)
    with pytest.raises(flow.TideflowError, match=r"'spare\.bias' received a gradient, but the"):
        (out.sum() + model.module.spare.bias.sum()).backward()


@pytest.mark.parametrize("static_graph", [False, True])
def test_unused_parameters_keep_no_gradient_when_no_rank_used_them(monkeypatch, static_graph):
    monkeypatch.setattr(ddp_impl, "_communicator", lambda group: _Mirror())
    kwargs = {"static_graph": True} if static_graph else {"find_unused_parameters": True}
    model = DDP(Branchy(), **kwargs)
    x = flow.randn(2, 3)
    for _ in range(2):
        model(x, False).sum().backward()
        assert model.module.spare.weight.grad is None
    np.testing.assert_allclose(model.module.used.bias.grad.numpy(), [4.0, 4.0])  # two passes


def test_no_sync_then_sync_averages_the_accumulated_gradient(monkeypatch):
    monkeypatch.setattr(ddp_impl, "_communicator", lambda group: _Mirror())
    model, alone = DDP(mlp()), mlp()
    xs = [flow.randn(2, 3) for _ in range(3)]
    with model.no_sync():
        for x in xs[:2]:
            model(x).sum().backward()
    model(xs[2]).sum().backward()
    for x in xs:
        alone(x).sum().backward()
    for p, q in zip(model.module.parameters(), alone.parameters(), strict=True):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-6)


def test_a_dropped_wrapper_stops_reducing(monkeypatch):
    comm = _TwoRanks()
    monkeypatch.setattr(ddp_impl, "_communicator", lambda group: comm)
    monkeypatch.setattr(ddp_impl, "_broadcast_coalesced", lambda tensors, comm: None)
    monkeypatch.setattr(ddp_impl, "_verify_same_parameters", lambda module, comm: None)
    module = mlp()
    wrapper = DDP(module)
    wrapper(flow.randn(2, 3))  # a synced forward: the wrapper expects a backward ...
    del wrapper  # ... but is dropped: the module's own backward must not reduce
    module(flow.randn(2, 3)).sum().backward()
    assert comm.log == []
    assert not any(accumulator(p)._posthooks for p in module.parameters())
