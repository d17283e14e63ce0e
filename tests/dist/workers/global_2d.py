"""Run on every rank under mpiexec -n 4: global tensors on the 2x2 placement [[0, 1], [2, 3]]
against the single-process results: every n-D conversion forward and backward (nested and
uneven splits included), matmul across n-D layouts, a data x tensor parallel MLP, and
reshapes with an inferred dim."""

from __future__ import annotations

import itertools

import numpy as np
from global_checks import LAYOUTS, S, close, done, global_of

import tideflow as flow
import tideflow.parallel as par

GRID = par.placement("cpu", [[0, 1], [2, 3]])
ND = list(itertools.product(LAYOUTS, LAYOUTS))
rng = np.random.default_rng(0)


def check_nd_boxing() -> None:
    x = rng.standard_normal((5, 7)).astype(np.float32)
    w = rng.standard_normal((5, 7)).astype(np.float32)
    weight = global_of(w, GRID, (S.broadcast, S.broadcast))
    for src, dst in itertools.product(ND, ND):
        leaf = global_of(x, GRID, src, requires_grad=True)
        y = leaf.to_global(sbp=dst)
        close(y.detach().numpy(), x, f"{src} -> {dst}")
        (y * weight).sum().backward()
        assert leaf.grad.sbp == src
        close(leaf.grad.numpy(), w, f"gradient of {src} -> {dst}")


def check_nd_matmul() -> None:
    a = rng.standard_normal((6, 5)).astype(np.float32)
    b = rng.standard_normal((5, 4)).astype(np.float32)
    pairs = list(itertools.product(ND[::3], ND[::2]))  # each layout of each operand, mixed
    for sa, sb in pairs:
        x, y = global_of(a, GRID, sa, True), global_of(b, GRID, sb, True)
        out = x @ y
        close(out.detach().numpy(), a @ b, f"matmul {sa} {sb}")
        out.sum().backward()
        close(x.grad.numpy(), np.ones((6, 4)) @ b.T, f"matmul grad a {sa} {sb}", atol=1e-4)
        close(y.grad.numpy(), a.T @ np.ones((6, 4)), f"matmul grad b {sa} {sb}", atol=1e-4)


def check_hybrid_parallel_mlp() -> None:
    """Data parallel over the grid's rows, tensor parallel (Megatron MLP) over its columns."""
    first, second, ref1, ref2 = (flow.nn.Linear(*s) for s in ((4, 6), (6, 3), (4, 6), (6, 3)))
    ref1.load_state_dict(first.state_dict())
    ref2.load_state_dict(second.state_dict())
    par.column_parallel(first, GRID)
    par.row_parallel(second, GRID)
    assert first.weight.sbp == (S.broadcast, S.split(0))
    opt = flow.optim.SGD([*first.parameters(), *second.parameters()], lr=0.05)
    ref_opt = flow.optim.SGD([*ref1.parameters(), *ref2.parameters()], lr=0.05)
    for batch in rng.standard_normal((2, 8, 4)).astype(np.float32):
        out = second(first(global_of(batch, GRID, (S.split(0), S.broadcast))).relu())
        assert out.sbp == (S.split(0), S.partial_sum)
        loss = (out**2).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        ref_loss = (ref2(ref1(flow.tensor(batch)).relu()) ** 2).sum()
        ref_opt.zero_grad()
        ref_loss.backward()
        ref_opt.step()
        close(loss.item(), ref_loss.item(), "loss", atol=1e-4)
    close(first.weight.detach().numpy(), ref1.weight.detach().numpy(), "first weight")
    close(second.weight.detach().numpy(), ref2.weight.detach().numpy(), "second weight")


def check_reshape_with_an_inferred_dim() -> None:
    """reshape(64, -1) of a tensor split along dims 0 and 2 (a GPT's logits before the cross
    entropy): the -1 written by the user is not where either axis's local shape has it."""
    x = rng.standard_normal((8, 8, 82)).astype(np.float32)
    t = global_of(x, GRID, (S.split(0), S.split(2)))
    for shape in ((64, -1), (-1, 82), (64, 82)):
        close(t.reshape(*shape).numpy(), x.reshape(64, 82), f"reshape{shape}")


check_nd_boxing()
check_nd_matmul()
check_hybrid_parallel_mlp()
check_reshape_with_an_inferred_dim()
done()
