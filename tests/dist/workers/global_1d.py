"""Run on every rank under mpiexec (2 or 4 ranks): global tensors on 1-D placements against
the single-process results: every boxing conversion forward and backward, placement moves,
local -> global, uneven splits, a set of ops and layers, training, and the errors."""

from __future__ import annotations

import itertools

import numpy as np
from global_checks import LAYOUTS, RANK, SIZE, S, close, done, global_of, raises

import tideflow as flow
import tideflow.parallel as par

ALL = par.placement("cpu", list(range(SIZE)))
rng = np.random.default_rng(0)


def check_boxing() -> None:
    """Each conversion between the four layouts (uneven: 5 rows, 7 columns), and its
    gradient: the leaf's gradient comes back in the leaf's layout."""
    x = rng.standard_normal((5, 7)).astype(np.float32)
    w = rng.standard_normal((5, 7)).astype(np.float32)
    weight = global_of(w, ALL, S.broadcast)
    for src, dst in itertools.product(LAYOUTS, LAYOUTS):
        leaf = global_of(x, ALL, src, requires_grad=True)
        y = leaf.to_global(sbp=dst)
        assert y.sbp == (dst,) and y.shape == flow.Size([5, 7])
        close(y.detach().numpy(), x, f"{src} -> {dst}")
        (y * weight).sum().backward()
        assert leaf.grad.sbp == (src,)
        close(leaf.grad.numpy(), w, f"gradient of {src} -> {dst}")


def check_placement_moves() -> None:
    x = np.arange(24, dtype=np.float32).reshape(6, 4)
    w = rng.standard_normal((6, 4)).astype(np.float32)
    reversed_ranks = par.placement("cpu", list(reversed(range(SIZE))))
    first, last = par.placement("cpu", [0]), par.placement("cpu", [SIZE - 1])
    moves = [(ALL, last), (first, ALL), (ALL, reversed_ranks)]
    if SIZE == 4:
        moves.append((par.placement("cpu", [0, 1]), par.placement("cpu", [3, 2])))
    for (src, dst), a, b in itertools.product(moves, LAYOUTS, LAYOUTS):
        leaf = global_of(x, src, a, requires_grad=True)
        y = leaf.to_global(dst, b)
        assert y.placement == dst and y.sbp == (b,)
        close(y.detach().numpy(), x, f"{src} {a} -> {dst} {b}")
        (y * global_of(w, dst, S.broadcast)).sum().backward()
        close(leaf.grad.numpy(), w, f"gradient of {src} {a} -> {dst} {b}")
        if RANK not in src.flat_ranks:  # a rank outside the placement holds nothing
            assert leaf.grad.to_local().shape == flow.Size([0, 0])


def check_local_to_global() -> None:
    """Each rank's local tensor is its shard (split), a part (partial_sum), or replaced by
    the first rank's (broadcast); gradients go back to each rank's local tensor."""
    local = flow.tensor([1.0, 2.0]) + 10 * RANK
    parts = [[1 + 10 * r, 2 + 10 * r] for r in range(SIZE)]
    close(local.to_global(ALL, S.split(0)).numpy(), np.concatenate(parts), "split")
    close(local.to_global(ALL, S.broadcast).numpy(), parts[0], "broadcast")
    close(local.to_global(ALL, S.partial_sum).numpy(), np.sum(parts, 0), "partial_sum")
    tail = par.placement("cpu", [SIZE - 1])
    # ranks outside the placement may pass anything: only the placement's tensors count
    mine = local if RANK == SIZE - 1 else flow.zeros(3, 3, dtype=flow.float64)
    on_tail = mine.to_global(tail, S.split(0))
    assert on_tail.dtype == flow.float32 and on_tail.shape == flow.Size([2])
    close(on_tail.numpy(), parts[-1], "a placement without this rank")
    assert on_tail.to_local().shape == (flow.Size([2]) if RANK == SIZE - 1 else flow.Size([0]))
    for sbp, grad in ((S.split(0), 2.0), (S.broadcast, 2.0), (S.partial_sum, 1.0)):
        x = local.clone().requires_grad_()
        g = x.to_global(ALL, sbp)
        (g * g if sbp != S.partial_sum else g).sum().backward()
        seen = x.detach().numpy() if sbp == S.split(0) else np.array(parts[0], np.float32)
        close(x.grad.numpy(), grad * seen if sbp != S.partial_sum else np.ones(2), f"grad {sbp}")
    explicit = local.clone().requires_grad_()
    (explicit.to_global(ALL, S.broadcast, grad_sbp=S.partial_sum) * 3).sum().backward()
    summed = explicit.grad.to_global(ALL, S.partial_sum).numpy()
    close(summed, np.full(2, 3.0), "grad_sbp=partial_sum: the ranks' gradients sum to it")


def check_uneven_splits() -> None:
    for rows in (1, 3, 5):
        x = np.arange(rows * 3, dtype=np.float32).reshape(rows, 3)
        g = global_of(x, ALL, S.split(0))
        assert g.to_local().shape[0] == len(np.array_split(x, SIZE)[RANK])
        close(g.exp().to_global(sbp=S.split(1)).numpy(), np.exp(x), f"exp of {rows} rows")
        close((g * 2).sum(0).numpy(), 2 * x.sum(0), f"sum of {rows} rows")
    # a reshape of unevenly split rows cannot keep the split (the shards would not be the
    # canonical ones): it must still give the right value
    x = np.arange(24, dtype=np.float32).reshape(6, 4)
    close(global_of(x, ALL, S.split(0)).reshape(24).numpy(), x.reshape(24), "reshape")
    close(global_of(x, ALL, S.split(0)).view(3, 8).numpy(), x.reshape(3, 8), "view")


def check_ops() -> None:
    a = rng.standard_normal((6, 5)).astype(np.float32)
    b = rng.standard_normal((5, 3)).astype(np.float32)
    v = rng.standard_normal(5).astype(np.float32)
    for sa, sb in itertools.product(LAYOUTS, LAYOUTS):  # every matmul signature and more
        x, y = global_of(a, ALL, sa, True), global_of(b, ALL, sb, True)
        out = x @ y
        close(out.detach().numpy(), a @ b, f"matmul {sa} {sb}")
        (out * out).sum().backward()
        ta, tb = flow.tensor(a, requires_grad=True), flow.tensor(b, requires_grad=True)
        ((ta @ tb) * (ta @ tb)).sum().backward()
        close(x.grad.numpy(), ta.grad.numpy(), f"matmul grad a {sa} {sb}", atol=1e-4)
        close(y.grad.numpy(), tb.grad.numpy(), f"matmul grad b {sa} {sb}", atol=1e-4)
    for sa in LAYOUTS:
        x = global_of(a, ALL, sa, True)
        row = global_of(v, ALL, S.split(0) if sa == S.split(1) else S.broadcast)
        y = (x * row + 1.0).sigmoid()  # elementwise with broadcasting and a scalar
        close(y.detach().numpy(), 1 / (1 + np.exp(-(a * v + 1))), f"elementwise {sa}")
        s = flow.softmax(x, dim=1)
        close(s.detach().numpy(), flow.softmax(flow.tensor(a), dim=1).numpy(), f"softmax {sa}")
        total = x.sum(0)
        if sa == S.split(0):
            assert total.sbp == (S.partial_sum,)  # a reduction over the split dim
        close(total.detach().numpy(), a.sum(0), f"sum {sa}")
        (s[:, 0].sum() + (total * total).sum()).backward()
        t = flow.tensor(a, requires_grad=True)
        (flow.softmax(t, dim=1)[:, 0].sum() + (t.sum(0) ** 2).sum()).backward()
        close(x.grad.numpy(), t.grad.numpy(), f"softmax and sum grads {sa}", atol=1e-4)


def check_linear_layers() -> None:
    """Linear with weight split(0) (column parallel) then split(1) (row parallel) equals
    the local layers, values and gradients."""
    first, second, ref1, ref2 = (flow.nn.Linear(*s) for s in ((5, 8), (8, 3), (5, 8), (8, 3)))
    ref1.load_state_dict(first.state_dict())
    ref2.load_state_dict(second.state_dict())
    par.column_parallel(first, ALL)
    par.row_parallel(second, ALL)
    a = rng.standard_normal((4, 5)).astype(np.float32)
    hidden = first(global_of(a, ALL, S.broadcast))
    assert hidden.sbp == (S.split(1),)
    out = second(hidden.relu())
    assert out.sbp == (S.partial_sum,)
    want = ref2(ref1(flow.tensor(a)).relu())
    close(out.detach().numpy(), want.detach().numpy(), "column + row parallel")
    out.sum().backward()
    want.sum().backward()
    for mine, ref in ((first, ref1), (second, ref2)):
        close(mine.weight.grad.numpy(), ref.weight.grad.numpy(), "weight grad", atol=1e-4)
        close(mine.bias.grad.numpy(), ref.bias.grad.numpy(), "bias grad", atol=1e-4)


def check_data_parallel_training() -> None:
    model, ref = flow.nn.Linear(3, 2), flow.nn.Linear(3, 2)
    ref.load_state_dict(model.state_dict())
    par.module_to_global(model, ALL, S.broadcast)
    opt, ref_opt = (flow.optim.SGD(m.parameters(), lr=0.1) for m in (model, ref))
    data = rng.standard_normal((3, 8, 3)).astype(np.float32)
    for batch in data:
        x = global_of(batch, ALL, S.split(0))
        loss = (model(x) ** 2).sum() / 8
        opt.zero_grad()
        loss.backward()
        opt.step()
        ref_loss = (ref(flow.tensor(batch)) ** 2).sum() / 8
        ref_opt.zero_grad()
        ref_loss.backward()
        ref_opt.step()
        close(loss.item(), ref_loss.item(), "loss")
    assert model.weight.grad.sbp == (S.broadcast,)
    close(model.weight.detach().numpy(), ref.weight.detach().numpy(), "trained weight")


def check_errors() -> None:
    """Each mistake is the same clear error on every rank, and the job goes on."""
    x = global_of(np.ones((4, 2), np.float32), ALL, S.split(0))
    first = global_of(np.ones((4, 2), np.float32), par.placement("cpu", [0]), S.broadcast)
    raises(flow.TideflowError, "add: operands are on different placements", lambda: x + first)
    raises(flow.TideflowError, "operand 1 is a local tensor", lambda: x * flow.ones(4, 2))
    raises(
        flow.ShapeError, r"\[4, 2\] and \[3\] cannot be broadcast", lambda: x + x[0, :1].expand(3)
    )
    raises(
        IndexError,
        r"split\(dim=2\) is out of range",
        lambda: flow.ones(2, 2).to_global(ALL, S.split(2)),
    )
    raises(
        ValueError,
        rf"ranks \[{SIZE}\] are outside the world of {SIZE}",
        lambda: par.placement("cpu", [0, SIZE]),
    )
    uneven = flow.ones(3 if RANK == 1 else 2, 2)
    raises(flow.TideflowError, r"rank 1 holds \[3, 2\]", lambda: uneven.to_global(ALL, S.split(0)))
    raises(flow.TideflowError, r"rank 1 holds \[3, 2\]", lambda: uneven.to_global(ALL, S.broadcast))
    mixed = flow.ones(2, dtype=flow.float64 if RANK == SIZE - 1 else flow.float32)
    raises(
        flow.TideflowError,
        "differ in number of dims or dtype",
        lambda: mixed.to_global(ALL, S.broadcast),
    )
    close(x.sum().numpy(), 8.0, "still in step after the errors")


check_boxing()
check_placement_moves()
check_local_to_global()
check_uneven_splits()
check_ops()
check_linear_layers()
check_data_parallel_training()
check_errors()
done()
