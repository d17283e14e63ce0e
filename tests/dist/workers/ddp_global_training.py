"""Run on every rank under mpiexec (2 or 4 ranks): data parallelism the global way. Creators
with placement= and sbp= give the single-process values; `*_like` / `new_*` of global tensors
and the in-place random fills stay global; Adam, AdamW and SGD with momentum (whose state is
`zeros_like` of the parameters) train data-parallel (broadcast) and tensor-parallel (split)
parameters like one process does."""

from __future__ import annotations

import itertools

import numpy as np
from global_checks import SIZE, S, close, done, raises

import tideflow as flow
import tideflow.parallel as par

ALL = par.placement("cpu", list(range(SIZE)))
LAYOUTS = (S.split(0), S.broadcast, S.partial_sum)
GRID = par.placement("cpu", [[0, 1], [2, 3]]) if SIZE == 4 else None

CREATORS = {  # name -> creator(**placement and sbp keywords): one 2-d tensor (or 1-d)
    "zeros": lambda **kw: flow.zeros(5, 3, **kw),
    "ones": lambda **kw: flow.ones((5, 3), dtype=flow.float64, **kw),
    "empty": lambda **kw: flow.empty(5, 3, **kw),
    "full": lambda **kw: flow.full((5, 3), 2.5, **kw),
    "arange": lambda **kw: flow.arange(1, 11, 2, **kw),
    "linspace": lambda **kw: flow.linspace(0, 1, 7, **kw),
    "eye": lambda **kw: flow.eye(5, 3, **kw),
    "rand": lambda **kw: flow.rand(5, 3, **kw),
    "randn": lambda **kw: flow.randn(5, 3, **kw),
    "randint": lambda **kw: flow.randint(0, 10, (5, 3), **kw),
    "normal": lambda **kw: flow.normal(1.0, 2.0, (5, 3), **kw),
    "randperm": lambda **kw: flow.randperm(7, **kw),
    "tensor": lambda **kw: flow.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], **kw),
}


def layouts():
    yield from ((ALL, s) for s in LAYOUTS)
    if GRID is not None:
        yield from ((GRID, nd) for nd in itertools.product(LAYOUTS, LAYOUTS))


def check_creators() -> None:
    for (name, create), (where, sbp) in itertools.product(CREATORS.items(), layouts()):
        flow.manual_seed(7)
        expected = create().numpy()
        flow.manual_seed(7)
        got = create(placement=where, sbp=sbp)
        nd = sbp if isinstance(sbp, tuple) else (sbp,)
        assert got.is_global and got.placement == where and got.sbp == nd, name
        close(got.numpy(), expected, f"{name} on {where} {sbp}")
    grad = flow.randn(4, 2, placement=ALL, sbp=S.split(0), requires_grad=True)
    assert grad.requires_grad and grad.is_leaf


def check_like_and_new() -> None:
    for where, sbp in layouts():
        x = flow.randn(6, 4, placement=where, sbp=sbp)
        made = {
            "zeros_like": flow.zeros_like(x),
            "ones_like": flow.ones_like(x),
            "empty_like": flow.empty_like(x),
            "full_like": flow.full_like(x, 3.0),
            "rand_like": flow.rand_like(x),
            "randn_like": flow.randn_like(x),
            "randint_like": flow.randint_like(x, 0, 5),
            "new_zeros": x.new_zeros(6, 4),
            "new_ones": x.new_ones((6, 4)),
            "new_empty": x.new_empty(6, 4),
            "new_full": x.new_full((6, 4), 1.5),
            "new_tensor": x.new_tensor(np.ones((6, 4))),
        }
        for name, t in made.items():
            assert t.is_global and t.placement == x.placement and t.sbp == x.sbp, name
            assert t.shape == x.shape and t.dtype == x.dtype, name
        close(made["full_like"].numpy(), np.full((6, 4), 3.0), "full_like value")
    x = flow.zeros(6, 4, placement=ALL, sbp=S.split(0))
    assert flow.zeros_like(x, sbp=S.broadcast).sbp == (S.broadcast,)  # a keyword overrides


def check_random_fills() -> None:
    """uniform_, normal_, random_ and nn.init on a global tensor draw its logical value as one
    process draws the local one."""
    fills = {
        "uniform_": lambda t: t.uniform_(-1, 1),
        "normal_": lambda t: t.normal_(2.0, 0.5),
        "random_": lambda t: t.random_(0, 9),
        "kaiming_uniform_": lambda t: flow.nn.init.kaiming_uniform_(t, a=5**0.5),
        "trunc_normal_": lambda t: flow.nn.init.trunc_normal_(t, std=0.5, a=-0.4, b=0.4),
        "xavier_normal_": flow.nn.init.xavier_normal_,
    }
    for (name, fill), (where, sbp) in itertools.product(fills.items(), layouts()):
        flow.manual_seed(11)
        expected = fill(flow.empty(6, 4)).numpy()
        t = flow.empty(6, 4, placement=where, sbp=sbp)
        flow.manual_seed(11)
        fill(t)
        assert t.placement == where, name
        close(t.numpy(), expected, f"{name} on {where} {sbp}")


def check_errors() -> None:
    raises(flow.TideflowError, "zeros: a global tensor needs both placement= and sbp=, but sbp",
           lambda: flow.zeros(2, placement=ALL))  # fmt: skip
    raises(flow.TideflowError, "randn: a global tensor needs both.*placement= is missing",
           lambda: flow.randn(2, sbp=S.broadcast))  # fmt: skip
    raises(flow.TideflowError, "ones: give device= for a local tensor or placement=",
           lambda: flow.ones(2, device="cpu", placement=ALL, sbp=S.broadcast))  # fmt: skip
    raises(flow.TensorIndexError, r"split\(dim=1\) is out of range for a 1-d tensor",
           lambda: flow.arange(4, placement=ALL, sbp=S.split(1)))  # fmt: skip


# -- optimizers on global parameters -----------------------------------------------------------
OPTIMIZERS = {
    "Adam": lambda ps: flow.optim.Adam(ps, lr=0.02, weight_decay=0.01, amsgrad=True),
    "AdamW": lambda ps: flow.optim.AdamW(ps, lr=0.02),
    "SGD": lambda ps: flow.optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=True),
}
BATCHES = np.random.default_rng(3).standard_normal((3, 8, 4)).astype(np.float32)


def mlp():
    return flow.nn.Sequential(flow.nn.Linear(4, 6), flow.nn.ReLU(), flow.nn.Linear(6, 3))


def data_parallel(model, where):
    model.to_global(where, [S.broadcast] * where.ndim)
    return [S.split(0)] + [S.broadcast] * (where.ndim - 1)


def tensor_parallel(model, where):
    par.column_parallel(model[0], where)
    par.row_parallel(model[2], where)
    return [S.broadcast] * where.ndim


def hybrid(model, where):  # the grid's rows split the batch, its columns the weights
    tensor_parallel(model, where)
    return [S.split(0), S.broadcast]


def check_optimizers() -> None:
    plans = [(data_parallel, ALL), (tensor_parallel, ALL)]
    if GRID is not None:
        plans.append((hybrid, GRID))
    for (opt_name, make_opt), (plan, where) in itertools.product(OPTIMIZERS.items(), plans):
        flow.manual_seed(5)
        model, reference = mlp(), mlp()
        reference.load_state_dict(model.state_dict())
        data_sbp = plan(model, where)
        opt, ref_opt = make_opt(list(model.parameters())), make_opt(list(reference.parameters()))
        what = f"{opt_name} {plan.__name__}"
        for batch in BATCHES:
            x = flow.tensor(batch, placement=where, sbp=data_sbp)
            loss = (model(x) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            ref_loss = (reference(flow.tensor(batch)) ** 2).mean()
            ref_opt.zero_grad()
            ref_loss.backward()
            ref_opt.step()
            close(loss.item(), ref_loss.item(), f"{what}: loss", atol=1e-5)
        for (name, p), q in zip(model.named_parameters(), reference.parameters(), strict=True):
            state = opt.state[p]
            for key, value in state.items():
                if isinstance(value, flow.Tensor):
                    assert value.is_global and value.sbp == p.sbp, f"{what}: {name} {key}"
            close(p.detach().numpy(), q.detach().numpy(), f"{what}: {name}", atol=1e-5)


check_creators()
check_like_and_new()
check_random_fills()
check_errors()
check_optimizers()
done()
