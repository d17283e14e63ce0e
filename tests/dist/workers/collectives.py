"""Run on every rank under mpiexec: each collective, op and dtype against NumPy.

Every rank can rebuild every other rank's inputs (they come from seeded generators), so each
checks its own results against the single-process NumPy answer. Mismatches are listed and the
rank exits with status 1; an exception aborts the job (tideflow's failure hook).
"""

from __future__ import annotations

import sys
import warnings

import ml_dtypes
import numpy as np

import tideflow as flow
import tideflow.comm as comm
import tideflow.distributed as dist
import tideflow.env as env
from tideflow.distributed import groups

RANK, SIZE = env.get_rank(), env.get_world_size()
FAILURES: list[str] = []
CHECKED = [0]
BF16 = np.dtype(ml_dtypes.bfloat16)


def check(name: str, got, want) -> None:
    """Arrays must agree in dtype, shape and every value; anything else must be ==."""
    CHECKED[0] += 1
    if isinstance(got, flow.Tensor) or isinstance(want, np.ndarray):
        got = got.numpy() if isinstance(got, flow.Tensor) else np.asarray(got)
        same = got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got, want)
    else:
        same = got == want
    if not same:
        FAILURES.append(f"{name}: got {got!r}, want {want!r}")


def data(rank: int, shape, dtype, low=-4, high=5) -> np.ndarray:
    """Rank `rank`'s input: small integers (exact in every dtype and under every sum order)."""
    rng = np.random.default_rng([rank, *np.atleast_1d(shape), len(str(np.dtype(dtype)))])
    values = rng.integers(low, high, size=shape)
    return (values > 0 if np.dtype(dtype) == np.bool_ else values).astype(dtype)


def t(array: np.ndarray) -> flow.Tensor:
    return flow.from_numpy(array.copy())


# -- the world ---------------------------------------------------------------------------------
check("world size", dist.get_world_size(), SIZE)
check("local rank", env.get_local_rank(), RANK)  # every test rank runs on this one node
check("node size", env.get_node_size(), 1)
check("backend", dist.get_backend() == "mpi", True)
dist.init_process_group("gloo", world_size=SIZE, rank=RANK)
check("initialized", dist.is_initialized(), True)

# -- all_reduce: every op and dtype --------------------------------------------------------------
REDUCTIONS = {
    "sum": lambda xs: np.sum(xs, axis=0),
    "product": lambda xs: np.prod(xs, axis=0),
    "min": lambda xs: np.min(xs, axis=0),
    "max": lambda xs: np.max(xs, axis=0),
    "avg": lambda xs: np.sum(xs, axis=0) / len(xs),
    "band": lambda xs: np.bitwise_and.reduce(xs, axis=0),
    "bor": lambda xs: np.bitwise_or.reduce(xs, axis=0),
    "bxor": lambda xs: np.bitwise_xor.reduce(xs, axis=0),
}
FLOATS, INTS = ("float32", "float64", "float16", BF16), ("int64", "int32", "uint8")
for op_name, reference in REDUCTIONS.items():
    op = getattr(dist.ReduceOp, op_name.upper())
    if op_name in ("band", "bor", "bxor"):
        kinds = (*INTS, "bool")
    else:
        kinds = FLOATS if op_name == "avg" else FLOATS + INTS
    for dtype in kinds:
        xs = [data(r, (3, 5), dtype, low=1 if op_name == "product" else -4) for r in range(SIZE)]
        if dtype == "uint8":
            xs = [np.abs(x.astype(np.int64)).astype(np.uint8) for x in xs]
        x = t(xs[RANK])
        dist.all_reduce(x, op=op)
        if dtype in (BF16, "float16"):  # tideflow reduces these in float32, rounding once
            want = reference(np.stack([v.astype(np.float32) for v in xs])).astype(dtype)
        else:
            want = reference(np.stack(xs)).astype(dtype)
        check(f"all_reduce {op_name} {np.dtype(dtype)}", x, want)

for op_name, logical in (("sum", np.any), ("max", np.any), ("product", np.all), ("min", np.all)):
    xs = [data(r, (4,), np.bool_) for r in range(SIZE)]
    x = t(xs[RANK])
    dist.all_reduce(x, op=op_name)
    check(f"all_reduce {op_name} bool", x, logical(np.stack(xs), axis=0))

# a strided view is reduced in place, and its base sees the result
base = t(data(RANK, (4, 6), np.float32))
view = base[:, ::2]
dist.all_reduce(view)
want_base = data(RANK, (4, 6), np.float32)
want_base[:, ::2] = sum(data(r, (4, 6), np.float32)[:, ::2] for r in range(SIZE))
check("all_reduce strided view", base, want_base)
check("all_reduce bumps the version", view._version_count >= 1, True)

work = comm.all_reduce(t(np.ones(3, np.float32)), async_op=True)
check("async_op work", (work.is_completed(), work.wait()), (True, True))

# -- all_gather ----------------------------------------------------------------------------------
for dtype in ("float32", BF16, "int64", "bool"):
    xs = [data(r, (2, 3), dtype) for r in range(SIZE)]
    outs = [flow.from_numpy(np.zeros((2, 3), dtype)) for _ in range(SIZE)]
    dist.all_gather(outs, t(xs[RANK]))
    for r in range(SIZE):
        check(f"all_gather {np.dtype(dtype)} [{r}]", outs[r], xs[r])

xs = [data(r, (r + 1, 2), np.float64) for r in range(SIZE)]  # uneven sizes
outs = [flow.zeros(r + 1, 2, dtype=flow.float64) for r in range(SIZE)]
comm.all_gather(outs, t(xs[RANK]))
for r in range(SIZE):
    check(f"all_gather uneven [{r}]", outs[r], xs[r])

mine = t(data(RANK, (3,), np.float32))
outs = [mine if r == RANK else flow.zeros(3) for r in range(SIZE)]  # the input is an output
dist.all_gather(outs, mine)
for r in range(SIZE):
    check(f"all_gather aliased [{r}]", outs[r], data(r, (3,), np.float32))

xs = [data(r, (2, 3), BF16) for r in range(SIZE)]
out = flow.zeros(2 * SIZE, 3, dtype=flow.bfloat16)
dist.all_gather_into_tensor(out, t(xs[RANK]))
check("all_gather_into_tensor concat", out, np.concatenate(xs))
out = flow.zeros(SIZE, 2, 3, dtype=flow.bfloat16)
dist.all_gather_into_tensor(out, t(xs[RANK]))
check("all_gather_into_tensor stacked", out, np.stack(xs))
out = t(np.zeros((2 * SIZE, 3), BF16))
dist.all_gather_into_tensor(out, out[2 * RANK : 2 * RANK + 2].copy_(t(xs[RANK])))
check("all_gather_into_tensor in place", out, np.concatenate(xs))

# -- reduce_scatter ------------------------------------------------------------------------------
for op_name in ("sum", "max", "avg"):
    shards = [[data(r, (j + 1,), np.float32) for j in range(SIZE)] for r in range(SIZE)]
    out = flow.zeros(RANK + 1)
    dist.reduce_scatter(out, [t(s) for s in shards[RANK]], op=op_name)
    mine = np.stack([shards[r][RANK] for r in range(SIZE)])
    check(f"reduce_scatter {op_name} uneven", out, REDUCTIONS[op_name](mine).astype(np.float32))

xs = [data(r, (SIZE * 2, 3), BF16) for r in range(SIZE)]
out = flow.zeros(2, 3, dtype=flow.bfloat16)
dist.reduce_scatter_tensor(out, t(xs[RANK]))
total = np.sum([x.astype(np.float32) for x in xs], axis=0).astype(BF16)
check("reduce_scatter_tensor bfloat16", out, total[2 * RANK : 2 * RANK + 2])
out = flow.zeros(3, dtype=flow.int64)
dist.reduce_scatter_tensor(out, t(data(RANK, (SIZE, 3), np.int64)), op=dist.ReduceOp.MIN)
check(
    "reduce_scatter_tensor stacked min",
    out,
    np.min([data(r, (SIZE, 3), np.int64)[RANK] for r in range(SIZE)], axis=0),
)

# -- broadcast and reduce ------------------------------------------------------------------------
for root in range(SIZE):
    for dtype in ("float32", BF16, "bool"):
        x = t(data(RANK, (2, 2), dtype))
        comm.broadcast(x, root)
        check(f"broadcast from {root} {np.dtype(dtype)}", x, data(root, (2, 2), dtype))
    x = t(data(RANK, (5,), np.int64))
    dist.reduce(x, dst=root, op=dist.ReduceOp.MAX)
    want = np.max([data(r, (5,), np.int64) for r in range(SIZE)], axis=0)
    check(f"reduce to {root}", x, want if root == RANK else data(RANK, (5,), np.int64))
x = t(data(RANK, (3,), np.float16))
dist.reduce(x, group_dst=SIZE - 1, op="sum")
if RANK == SIZE - 1:
    want = np.sum([data(r, (3,), np.float16).astype(np.float32) for r in range(SIZE)], axis=0)
    check("reduce float16 group_dst", x, want.astype(np.float16))


# -- all_to_all ----------------------------------------------------------------------------------
def block(src: int, dst: int) -> np.ndarray:
    return data(100 * src + dst, (src + dst + 1,), np.int64)  # uneven in both directions


outs = [flow.zeros(r + RANK + 1, dtype=flow.int64) for r in range(SIZE)]
dist.all_to_all(outs, [t(block(RANK, j)) for j in range(SIZE)])
for r in range(SIZE):
    check(f"all_to_all uneven [{r}]", outs[r], block(r, RANK))

x = t(data(RANK, (2 * SIZE, 3), np.float32))
out = flow.zeros(2 * SIZE, 3)
comm.all_to_all_single(out, x)
rows = slice(2 * RANK, 2 * RANK + 2)
want = np.concatenate([data(r, (2 * SIZE, 3), np.float32)[rows] for r in range(SIZE)])
check("all_to_all_single even", out, want)

splits = [[(s + d) % 3 for d in range(SIZE)] for s in range(SIZE)]  # rows rank s sends rank d
xs = [data(s, (sum(splits[s]), 2), np.float64) for s in range(SIZE)]
out = flow.zeros(sum(splits[s][RANK] for s in range(SIZE)), 2, dtype=flow.float64)
dist.all_to_all_single(out, t(xs[RANK]), [splits[s][RANK] for s in range(SIZE)], splits[RANK])
pieces = []
for s in range(SIZE):
    start = sum(splits[s][:RANK])
    pieces.append(xs[s][start : start + splits[s][RANK]])
check("all_to_all_single splits", out, np.concatenate(pieces))

# -- scatter and gather --------------------------------------------------------------------------
root = SIZE - 1
chunks = [data(1000 + r, (r + 2,), BF16) for r in range(SIZE)]
x = flow.zeros(RANK + 2, dtype=flow.bfloat16)
dist.scatter(x, [t(c) for c in chunks] if root == RANK else None, src=root)
check("scatter uneven bfloat16", x, chunks[RANK])

x = flow.zeros(2, 2)
dist.scatter(x, [t(np.full((2, 2), r, np.float32)) for r in range(SIZE)] if RANK == 0 else None)
check("scatter default src 0", x, np.full((2, 2), RANK, np.float32))

mine = t(data(RANK, (RANK + 1,), np.int64))
gathered = [mine if r == RANK else flow.zeros(r + 1, dtype=flow.int64) for r in range(SIZE)]
dist.gather(mine, gathered if RANK == 1 else None, dst=1)
if RANK == 1:
    for r in range(SIZE):
        check(f"gather uneven aliased [{r}]", gathered[r], data(r, (r + 1,), np.int64))

# -- point to point ------------------------------------------------------------------------------
right, left = (RANK + 1) % SIZE, (RANK - 1) % SIZE
inbox = flow.zeros(4, dtype=flow.bfloat16)
works = [dist.isend(t(data(RANK, (4,), BF16)), right), dist.irecv(inbox, left)]
for w in works:
    w.wait()
check("isend/irecv ring", inbox, data(left, (4,), BF16))

inbox = flow.zeros(2, 3)
works = [dist.isend(t(data(RANK, (2, 3), np.float32)), right, tag=7), dist.irecv(inbox, tag=7)]
for w in works:
    w.wait()
check("irecv from any source", inbox, data(left, (2, 3), np.float32))

if RANK == 0:
    for r in range(1, SIZE):
        dist.send(t(data(r, (r, 2), np.int64)), dst=r, tag=3)
        comm.send(t(data(r, (2, r), np.float64)), r)
    senders = set()
    for _ in range(1, SIZE):
        box = flow.zeros(3)
        senders.add(dist.recv(box))
    check("recv from any source: senders", sorted(senders), list(range(1, SIZE)))
else:
    box = flow.zeros(RANK, 2, dtype=flow.int64)
    check("recv returns the sender", dist.recv(box, src=0, tag=3), 0)
    check("recv data", box, data(RANK, (RANK, 2), np.int64))
    check("flow.comm.recv allocates", comm.recv(0), data(RANK, (2, RANK), np.float64))
    dist.send(flow.full((3,), float(RANK)), dst=0)

# -- Python objects -----------------------------------------------------------------------------
seen = [None] * SIZE
dist.all_gather_object(seen, {"rank": RANK, "name": "r" * (RANK + 1)})  # uneven sizes
check("all_gather_object", seen, [{"rank": r, "name": "r" * (r + 1)} for r in range(SIZE)])
config = [{"lr": 0.1}, ("run", SIZE - 1)] if RANK == SIZE - 1 else [None, None]
dist.broadcast_object_list(config, src=SIZE - 1)
check("broadcast_object_list", config, [{"lr": 0.1}, ("run", SIZE - 1)])

# -- groups --------------------------------------------------------------------------------------
evens = list(range(0, SIZE, 2))
odds = list(range(1, SIZE, 2))
mine_group = dist.new_group(evens if RANK % 2 == 0 else odds)
other_group = dist.new_group(odds if RANK % 2 == 0 else evens)
x = t(np.full(3, RANK, np.int64))
dist.all_reduce(x, group=mine_group)
check("group all_reduce", x, np.full(3, sum(evens if RANK % 2 == 0 else odds), np.int64))
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    untouched = t(np.ones(2, np.float32))
    result = dist.all_reduce(untouched, group=other_group)
check("non-member does nothing", (result, untouched.numpy().tolist()), (None, [1.0, 1.0]))
check("non-member warns", any("does not belong" in str(w.message) for w in caught), True)
check("group rank", mine_group.rank(), (evens if RANK % 2 == 0 else odds).index(RANK))
check("other group rank", other_group.rank(), -1)
first = groups.communicator(mine_group.ranks)
check("communicator cached", groups.communicator(list(mine_group.ranks)) is first, True)

backwards = dist.new_group(list(reversed(range(SIZE))), sort_ranks=False)
x = t(np.full(2, RANK, np.float32))
dist.broadcast(x, group=backwards, group_src=0)  # group rank 0 is world rank SIZE - 1
check("broadcast group_src", x, np.full(2, SIZE - 1, np.float32))
check("global rank", dist.get_global_rank(backwards, 0), SIZE - 1)

if SIZE >= 3:  # two members talk; the third need not take part
    trio = dist.new_group([0, 1, 2])
    if RANK == 0:
        dist.send(flow.full((2,), 5.0), dst=1, group=trio)
    elif RANK == 1:
        box = flow.zeros(2)
        check(
            "send within a group",
            (dist.recv(box, group=trio, group_src=0), box.tolist()),
            (0, [5.0, 5.0]),
        )

if SIZE >= 4:
    pair = dist.new_group([1, 3])
    if RANK in (1, 3):
        x = t(np.full(2, RANK, np.float32))
        dist.all_gather_into_tensor(out := flow.zeros(4), x, group=pair)
        check("pair all_gather", out, np.array([1, 1, 3, 3], np.float32))
        dist.barrier(group=pair)

dist.destroy_process_group()
check("destroyed", dist.is_initialized(), False)
env.barrier()
if FAILURES:
    print(f"rank {RANK}: {len(FAILURES)} mismatches:\n" + "\n".join(FAILURES), flush=True)
    sys.exit(1)
print(f"rank {RANK}: ok, {CHECKED[0]} checks", flush=True)
