"""The distributed API in one plain process: a world of one without MPI, PyTorch's calling
conventions and errors, the launcher's command line. Multi-process runs: tests/dist/."""

from __future__ import annotations

import datetime
import inspect
import json
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import tideflow as flow
import tideflow.comm as comm
import tideflow.distributed as dist
import tideflow.env as env
from tideflow.distributed import failure, groups, launch, p2p, run, world
from tideflow.distributed.backend import LocalCommunicator, ReduceOp, to_reduce_op
from tideflow.framework.errors import DTypeError, ShapeError, TideflowError


@pytest.fixture(autouse=True)
def _no_process_group_left():
    yield
    if dist.is_initialized():
        dist.destroy_process_group()


def _plain_env() -> dict[str, str]:
    """This environment without any launcher's variables: a plain process."""
    launcher_vars = {v for pair in world._LAUNCHER_VARS for v in pair if v}
    return {k: v for k, v in os.environ.items() if k not in {*launcher_vars, *world._SLURM_VARS}}


# -- a world of one ------------------------------------------------------------------------------
def test_a_plain_process_is_a_world_of_one_without_mpi():
    # NOTE: a fresh interpreter, without launcher variables: this one may have loaded MPI.
    script = textwrap.dedent(
        """
        import json, sys
        import tideflow as flow, tideflow.comm as comm, tideflow.distributed as dist
        import tideflow.env as env
        t = flow.tensor([1.0, 2.0])
        comm.all_reduce(t)
        dist.init_process_group()
        env.barrier()
        print(json.dumps([env.get_rank(), env.get_world_size(), env.get_local_rank(),
                          env.get_node_size(), dist.get_backend(), t.tolist(),
                          "mpi4py.MPI" in sys.modules, sys.excepthook is sys.__excepthook__]))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
        env=_plain_env(),
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == [0, 1, 0, 1, "local", [1.0, 2.0], False, True]


def test_the_mpi_backend_can_be_asked_for_without_a_launcher():
    script = textwrap.dedent(
        """
        import json, sys
        import tideflow as flow, tideflow.distributed as dist
        dist.init_process_group("mpi")
        t = flow.tensor([1.0, 2.0])
        dist.all_reduce(t, op="max")
        print(json.dumps([dist.get_backend(), dist.get_world_size(), t.tolist(),
                          "mpi4py.MPI" in sys.modules, sys.excepthook.__module__]))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
        env=_plain_env(),
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == ["mpi", 1, [1.0, 2.0], True, failure.__name__]


def test_the_mpi_backend_comes_first(monkeypatch):
    monkeypatch.setattr(world, "_state", {"world": None})
    world.init()
    with pytest.raises(TideflowError, match=r"already joined a world of one without MPI"):
        world.init(backend="mpi")


def test_env_and_process_group_queries():
    assert (env.get_rank(), env.get_world_size(), env.get_local_rank(), env.get_node_size()) == (
        0,
        1,
        0,
        1,
    )
    assert (dist.get_rank(), dist.get_world_size(), dist.is_available()) == (0, 1, True)
    assert dist.get_process_group_ranks(None) == [0]
    assert dist.get_process_group_ranks(dist.group.WORLD) == [0]


def _collective_results(lib, d) -> dict:
    """Every collective on the same inputs, for tideflow and (as the oracle) PyTorch."""
    out = {}
    x = lib.tensor([[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]])
    for op in ("SUM", "PRODUCT", "MIN", "MAX", "AVG"):
        t = x.clone()
        d.all_reduce(t, op=getattr(d.ReduceOp, op))
        out[f"all_reduce {op}"] = t
    for op in ("BAND", "BOR", "BXOR"):
        t = lib.tensor([5, 6, 7])
        d.all_reduce(t, op=getattr(d.ReduceOp, op))
        out[f"all_reduce {op}"] = t
    t = x.to(lib.bfloat16)
    d.all_reduce(t)
    out["all_reduce bfloat16"] = t.to(lib.float32)
    parts = [lib.zeros(2, 3)]
    d.all_gather(parts, x)
    out["all_gather"] = parts[0]
    t = lib.zeros(2, 3)  # (the stacked form [1, 2, 3] too, which Gloo does not take)
    d.all_gather_single(t, x)
    out["all_gather_single"] = t
    t = lib.zeros(2, 3)
    d.reduce_scatter(t, [x])
    out["reduce_scatter"] = t
    t = lib.zeros(2, 3)
    d.reduce_scatter_single(t, x)
    out["reduce_scatter_single"] = t
    t = x.clone()
    d.broadcast(t, src=0)
    out["broadcast"] = t
    t = x.clone()
    d.reduce(t, dst=0)
    out["reduce"] = t
    parts = [lib.zeros(3)]
    d.all_to_all(parts, [lib.tensor([7.0, 8.0, 9.0])])
    out["all_to_all"] = parts[0]
    t = lib.zeros(2, 3)
    d.all_to_all_single(t, x, [2], [2])
    out["all_to_all_single"] = t
    t = lib.zeros(2, 3)
    d.scatter(t, [x], src=0)
    out["scatter"] = t
    parts = [lib.zeros(2, 3)]
    d.gather(x, parts, dst=0)
    out["gather"] = parts[0]
    d.barrier()
    return {k: np.asarray(v.tolist()) for k, v in out.items()}


@pytest.fixture(scope="module")
def torch_world(tmp_path_factory):
    torch = pytest.importorskip("torch")
    tdist = torch.distributed
    store = tmp_path_factory.mktemp("torch_store") / "store"
    tdist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)
    yield torch, tdist
    tdist.destroy_process_group()


@pytest.mark.torch
def test_collectives_in_a_world_of_one_match_pytorch(torch_world):
    torch, tdist = torch_world
    ours, theirs = _collective_results(flow, dist), _collective_results(torch, tdist)
    assert ours.keys() == theirs.keys()
    for name in ours:
        np.testing.assert_array_equal(ours[name], theirs[name], err_msg=name)


_BAD_CALLS = {
    "list too long": lambda lib, d: d.all_gather([lib.zeros(2), lib.zeros(2)], lib.zeros(2)),
    "list entry of the wrong size": lambda lib, d: d.all_gather([lib.zeros(3)], lib.zeros(2)),
    "output of the wrong size": lambda lib, d: d.all_gather_single(lib.zeros(3), lib.zeros(2)),
    "reduce_scatter list too long": lambda lib, d: d.reduce_scatter(
        lib.zeros(2), [lib.zeros(2), lib.zeros(2)]
    ),
    "src out of range": lambda lib, d: d.broadcast(lib.zeros(2), 3),
    "no src": lambda lib, d: d.broadcast(lib.zeros(2)),
    "src and group_src": lambda lib, d: d.broadcast(lib.zeros(2), src=0, group_src=0),
    "send to self": lambda lib, d: d.send(lib.zeros(2), 0),
    "bitwise op on floats": lambda lib, d: d.all_reduce(lib.zeros(2), op=d.ReduceOp.BAND),
    "scatter without a list on src": lambda lib, d: d.scatter(lib.zeros(2), None, src=0),
    "gather without a list on dst": lambda lib, d: d.gather(lib.zeros(2), None, dst=0),
    "all_to_all list too long": lambda lib, d: d.all_to_all(
        [lib.zeros(2), lib.zeros(2)], [lib.zeros(2)]
    ),
    "init twice": lambda lib, d: d.init_process_group("gloo"),
    "group larger than the world": lambda lib, d: d.new_group([0, 1]),
}


@pytest.mark.torch
@pytest.mark.parametrize("case", _BAD_CALLS)
def test_misuse_raises_the_exception_type_pytorch_raises(torch_world, case):
    torch, tdist = torch_world
    with pytest.raises(Exception) as theirs:
        _BAD_CALLS[case](torch, tdist)
    dist.init_process_group()  # for "init twice"; harmless elsewhere
    with pytest.raises(type(theirs.value)):
        _BAD_CALLS[case](flow, dist)


@pytest.mark.torch
def test_signatures_follow_pytorch(torch_world):
    _, tdist = torch_world
    for name in dist.__all__:
        theirs = getattr(tdist, name, None)
        if not inspect.isfunction(theirs):
            continue
        params = [p for p in inspect.signature(theirs).parameters if not p.startswith("_")]
        assert list(inspect.signature(getattr(dist, name)).parameters)[: len(params)] == params, (
            name
        )
    assert {op.name for op in ReduceOp} <= set(dir(tdist.ReduceOp))


# -- results in place ----------------------------------------------------------------------------
def test_results_land_in_strided_tensors_and_bump_their_version():
    base = flow.arange(12.0).reshape(3, 4)
    column = base[:, 1]
    before = column._version_count
    comm.broadcast(column, 0)
    dist.all_reduce(column, op="max")
    assert column._version_count == before + 1  # broadcast does not change the root's tensor
    out = flow.zeros(4, 3).t()
    dist.all_gather_into_tensor(out, flow.arange(12.0).reshape(3, 4))
    np.testing.assert_array_equal(out.numpy(), np.arange(12.0).reshape(3, 4))


def test_async_op_returns_a_completed_work():
    work = dist.all_reduce(flow.ones(2), async_op=True)
    assert isinstance(work, dist.Work)
    assert work.is_completed() and work.wait()
    assert dist.all_reduce(flow.ones(2)) is None


def test_objects_travel_pickled():
    seen = [None]
    dist.all_gather_object(seen, {"loss": [0.5, 0.25]})
    assert seen == [{"loss": [0.5, 0.25]}]
    config = ["run-7", {"lr": 0.1}]
    dist.broadcast_object_list(config, src=0)
    assert config == ["run-7", {"lr": 0.1}]
    with pytest.raises(TideflowError, match=r"object_list has 2 slots, expected one per rank"):
        dist.all_gather_object([None, None], 1)
    with pytest.raises(TypeError, match=r"broadcast_object_list: object_list must be a list"):
        dist.broadcast_object_list(("a",), src=0)


def test_comm_names_are_the_collectives():
    assert comm.all_reduce is dist.all_reduce and comm.scatter is dist.scatter
    assert comm.ReduceOp is dist.ReduceOp


# -- errors ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (
            lambda: dist.all_reduce(flow.ones(2, dtype=flow.int64), op=dist.ReduceOp.AVG),
            DTypeError,
            r"all_reduce: ReduceOp.AVG needs a floating point tensor, got tideflow.int64",
        ),
        (
            lambda: dist.all_reduce(flow.ones(2), op=dist.ReduceOp.BXOR),
            DTypeError,
            r"ReduceOp.BXOR needs an integer or bool tensor, got tideflow.float32",
        ),
        (lambda: dist.all_reduce(flow.ones(2), op="mean"), ValueError, r"unknown reduce op 'mean'"),
        (
            lambda: dist.all_reduce([1.0, 2.0]),
            TypeError,
            r"all_reduce: tensor must be a tideflow.Tensor, got list",
        ),
        (
            lambda: dist.all_gather([flow.zeros(2, dtype=flow.int64)], flow.zeros(2)),
            DTypeError,
            r"all_gather: tensor_list\[0\] is tideflow.int64, expected tideflow.float32",
        ),
        (
            lambda: dist.all_gather([flow.zeros(3)], flow.zeros(2)),
            ShapeError,
            r"tensor_list\[0\] \(this rank's\) has shape \[3\], expected the shape of tensor",
        ),
        (
            lambda: dist.all_gather([flow.zeros(2)] * 2, flow.zeros(2)),
            TideflowError,
            r"all_gather: tensor_list has 2 tensors, expected one per rank of the group \(1\)",
        ),
        (
            lambda: dist.all_gather(flow.zeros(2), flow.zeros(2)),
            TypeError,
            r"all_gather: tensor_list must be a list of tensors, got Tensor",
        ),
        (
            lambda: dist.all_gather_into_tensor(flow.zeros(3), flow.zeros(2)),
            ShapeError,
            r"output_tensor has shape \[3\], but with 1 ranks and input_tensor of shape \[2\] "
            r"it must be \[2\] or \[1, 2\]",
        ),
        (
            lambda: dist.all_gather_into_tensor(flow.zeros(2, dtype=flow.float64), flow.zeros(2)),
            DTypeError,
            r"output_tensor is tideflow.float64 but input_tensor is tideflow.float32",
        ),
        (
            lambda: dist.reduce_scatter(flow.zeros(3), [flow.zeros(2)]),
            ShapeError,
            r"reduce_scatter: input_list\[0\] \(this rank's\) has shape \[2\] \(2 elements\), "
            r"expected 3 elements",
        ),
        (
            lambda: dist.broadcast(flow.zeros(2), 1),
            ValueError,
            r"broadcast: src 1 is not a rank of the group \[0\]",
        ),
        (lambda: dist.broadcast(flow.zeros(2)), ValueError, r"broadcast: src .* is required"),
        (
            lambda: dist.reduce(flow.zeros(2), dst=0, group_dst=0),
            ValueError,
            r"reduce: give dst or group_dst, not both",
        ),
        (
            lambda: dist.reduce(flow.zeros(2), group_dst=2),
            ValueError,
            r"reduce: group_dst 2 is out of range for a group of 1 ranks",
        ),
        (
            lambda: dist.broadcast(flow.zeros(2), src=0.0),
            TypeError,
            r"broadcast: src must be an int, got float",
        ),
        (
            lambda: dist.scatter(flow.zeros(2), None),
            ValueError,
            r"scatter: scatter_list must be given on the source rank",
        ),
        (
            lambda: dist.gather(flow.zeros(2), [flow.zeros(3)]),
            ShapeError,
            r"gather: gather_list\[0\] \(this rank's\) has shape \[3\]",
        ),
        (
            lambda: dist.all_to_all_single(flow.zeros(3), flow.zeros(3), [2], [3]),
            ValueError,
            r"output_split_sizes \[2\] must be 1 non-negative sizes that add up to output's 3",
        ),
        (
            lambda: dist.all_to_all_single(flow.zeros(3, 2), flow.zeros(3, 4)),
            ShapeError,
            r"output has shape \[3, 2\] and input \[3, 4\]; they must agree past dim 0",
        ),
        (
            lambda: dist.send(flow.zeros(2), 0),
            ValueError,
            r"send: dst 0 is this process's own rank; a rank cannot send to or receive from",
        ),
        (
            lambda: dist.recv(flow.zeros(2), 0),
            ValueError,
            r"recv: src 0 is this process's own rank",
        ),
        (lambda: comm.recv(0), ValueError, r"recv: src 0 is this process's own rank"),
        (
            lambda: dist.isend(flow.zeros(2), 1),
            ValueError,
            r"isend: dst 1 is not a rank of the group \[0\]",
        ),
        (
            lambda: dist.send(flow.zeros(2), 1, tag=-1),
            ValueError,
            r"send: tag must be non-negative, got -1",
        ),
        (lambda: dist.all_reduce(flow.zeros(2), group=[0]), TypeError, r"group must be a"),
        (lambda: dist.new_group([0, 0]), ValueError, r"a group's ranks must be distinct"),
        (lambda: dist.new_group([]), ValueError, r"a group needs at least one rank"),
        (
            lambda: dist.new_group([0, 3, 5]),
            ValueError,
            r"ranks \[3, 5\] are out of range for a world of 1 \(ranks 0 to 0\)",
        ),
        (lambda: dist.new_group(["a"]), TypeError, r"a group's ranks must be integers"),
        (
            lambda: dist.init_process_group("smoke-signals"),
            ValueError,
            r"unknown backend 'smoke-signals'; tideflow accepts PyTorch's backend names",
        ),
        (
            lambda: dist.init_process_group(world_size=2),
            ValueError,
            r"init_process_group: world_size=2, but the launched world has world_size 1",
        ),
        (
            lambda: dist.init_process_group(store=object()),
            TideflowError,
            r"ranks meet through the MPI launcher, not a store",
        ),
        (
            lambda: dist.init_process_group(timeout=30),
            TypeError,
            r"timeout must be a datetime.timedelta, got int",
        ),
    ],
)
def test_misuse_is_named(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_flow_comm_recv_checks_what_arrives():
    pg = dist.group.WORLD
    header = p2p.Header(0, flow.float32, (2, 3))
    assert p2p._parse(p2p._header(np.zeros((2, 3), np.float32), "send"), 0) == header
    with pytest.raises(DTypeError, match=r"recv: rank 0 sent a tideflow.float32 tensor, but"):
        p2p.receive_data(pg, flow.zeros(6, dtype=flow.int64), header, 0)
    with pytest.raises(ShapeError, match=r"rank 0 sent a tensor of shape \[2, 3\], but the"):
        p2p.receive_data(pg, flow.zeros(5), header, 0)


@pytest.mark.parametrize("dtype", ["bool", "uint8", "int64", "float16", "bfloat16", "float64"])
def test_headers_carry_every_dtype_and_shape(dtype):
    a = flow.zeros(2, 0, 3, dtype=getattr(flow, dtype))._data
    assert p2p._parse(p2p._header(a, "send"), 1) == (1, getattr(flow, dtype), (2, 0, 3))


def test_reduce_ops_by_member_or_name():
    assert to_reduce_op(ReduceOp.MIN) is ReduceOp.MIN
    assert to_reduce_op("prod") is to_reduce_op("PRODUCT") is ReduceOp.PRODUCT
    assert repr(ReduceOp.AVG) == "ReduceOp.AVG"


# -- process groups ------------------------------------------------------------------------------
def test_init_process_group_accepts_pytorch_calls():
    assert not dist.is_initialized()
    dist.init_process_group(
        "cpu:gloo,cuda:nccl", init_method="env://", world_size=1, rank=0,
        timeout=datetime.timedelta(minutes=5),
    )  # fmt: skip
    assert dist.is_initialized()
    dist.destroy_process_group()
    assert not dist.is_initialized()
    dist.init_process_group("nccl")


def test_groups_and_their_communicators():
    g = dist.new_group([0])
    assert (g.rank(), g.size(), g.ranks, repr(g)) == (0, 1, (0,), "ProcessGroup(ranks=[0])")
    assert dist.new_group() is dist.group.WORLD
    assert repr(dist.group.WORLD) == "ProcessGroup(WORLD)"
    assert dist.get_group_rank(g, 0) == 0 and dist.get_global_rank(g, 0) == 0
    assert dist.get_rank(g) == 0 and dist.get_world_size(g) == 1
    the_world = world.get_world()
    assert dist.group.WORLD.comm is the_world.user_comm
    assert groups.communicator((0,)) is groups.communicator([0]) is the_world.comm
    dist.destroy_process_group(g)
    with pytest.raises(TideflowError, match=r"ProcessGroup\(ranks=\[0\]\) was destroyed"):
        dist.all_reduce(flow.ones(1), group=g)
    dist.destroy_process_group(dist.group.WORLD)  # the world outlives it
    dist.all_reduce(flow.ones(1), group=dist.group.WORLD)


def test_a_world_of_one_has_no_peer():
    with pytest.raises(TideflowError, match=r"send: a world of one process has no peer"):
        LocalCommunicator().send(np.zeros(2), 0)


# -- the launcher --------------------------------------------------------------------------------
def _command(*argv: str) -> list[str]:
    return launch.command(launch.parser().parse_args(list(argv)), "MPIEXEC", "PY")


def test_launch_wraps_mpiexec():
    assert _command("--nproc_per_node", "4", "train.py", "--lr", "0.1") == [
        "MPIEXEC", "-n", "4", "-ppn", "4",
        "PY", "-m", "tideflow.distributed.run", "train.py", "--lr", "0.1",
    ]  # fmt: skip
    assert _command("--nproc-per-node=2", "-m", "pkg.train")[5:] == [
        "PY", "-m", "tideflow.distributed.run", "-m", "pkg.train",
    ]  # fmt: skip


def test_launch_reads_a_hostfile(tmp_path):
    hosts = tmp_path / "hosts"
    hosts.write_text("# the cluster\nnode1\nnode2:8  # fast\n\n")
    assert launch.read_hostfile(str(hosts)) == ["node1", "node2:8"]
    cmd = _command("--nproc_per_node", "2", "--hostfile", str(hosts), "train.py")
    assert cmd[:7] == ["MPIEXEC", "-n", "4", "-ppn", "2", "-f", str(hosts)]
    cmd = _command("--nproc_per_node", "2", "--nnodes", "1", "-f", str(hosts), "train.py")
    assert cmd[:3] == ["MPIEXEC", "-n", "2"]
    with pytest.raises(SystemExit, match=r"--nnodes 3 but the hostfile .* names only 2 hosts"):
        _command("--nnodes", "3", "--hostfile", str(hosts), "train.py")
    (tmp_path / "empty").write_text("# nobody\n")
    with pytest.raises(SystemExit, match=r"names no hosts"):
        launch.read_hostfile(str(tmp_path / "empty"))
    with pytest.raises(SystemExit, match=r"cannot read the hostfile"):
        launch.read_hostfile(str(tmp_path / "missing"))


def test_launch_needs_hosts_for_several_nodes(monkeypatch):
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    with pytest.raises(SystemExit, match=r"--nnodes 2 needs --hostfile"):
        _command("--nnodes", "2", "train.py")
    with pytest.raises(SystemExit):
        launch.parser().parse_args(["--nproc_per_node", "0", "train.py"])


def test_launch_finds_the_wheels_mpiexec():
    path = launch.find_mpiexec()
    assert path.endswith("mpiexec")
    assert subprocess.run([path, "--version"], capture_output=True, timeout=30).returncode == 0


@pytest.mark.parametrize(
    ("environ", "rank_and_size", "is_launched"),
    [
        ({}, (0, None), False),
        ({"PMI_RANK": "3", "PMI_SIZE": "4"}, (3, 4), True),
        ({"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2"}, (1, 2), True),
        ({"PMIX_RANK": "5"}, (5, None), True),
        ({"SLURM_PROCID": "2", "SLURM_STEP_NUM_TASKS": "8"}, (2, 8), True),
        # a batch script (no step) or a one-task step is not a job of several ranks
        ({"SLURM_PROCID": "0", "SLURM_NTASKS": "8"}, (0, None), False),
        ({"SLURM_PROCID": "0", "SLURM_STEP_NUM_TASKS": "1"}, (0, None), False),
        # Hydra inside a Slurm step: Hydra's variables win
        ({"PMI_RANK": "1", "PMI_SIZE": "2", "SLURM_PROCID": "0"}, (1, 2), True),
    ],
)
def test_launchers_are_recognized(environ, rank_and_size, is_launched):
    assert world.launcher_rank_and_size(environ) == rank_and_size
    assert world.launched(environ) is is_launched


def test_the_runner_exports_torchrun_variables():
    environ = {"PMI_RANK": "1", "PMI_SIZE": "2", "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "2"}
    environ["RANK"] = "7"  # already set: kept
    run.export_torch_variables(environ)
    assert [environ[k] for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")] == [
        "7",
        "2",
        "1",
        "2",
    ]
    environ = {"SLURM_PROCID": "3", "SLURM_STEP_NUM_TASKS": "4", "SLURM_LOCALID": "1"}
    run.export_torch_variables(environ)
    assert "LOCAL_WORLD_SIZE" not in environ and environ["LOCAL_RANK"] == "1"
    assert [run.exit_status(c) for c in (None, 0, 3, "message")] == [0, 0, 3, 1]


def test_the_runner_runs_a_script_as_main(tmp_path, monkeypatch, capsys):
    script = tmp_path / "hello.py"
    script.write_text("import sys\nprint(__name__, sys.argv)\nsys.exit(4)\n")
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.setattr(sys, "path", list(sys.path))
    with pytest.raises(SystemExit) as e:  # not launched: the exit is the process's own
        run.main([str(script), "a", "b"])
    assert e.value.code == 4
    assert capsys.readouterr().out == f"__main__ {[str(script), 'a', 'b']}\n"
    with pytest.raises(SystemExit, match=r"usage: python -m tideflow.distributed.run"):
        run.main([])


# -- failure reporting ---------------------------------------------------------------------------
def test_failures_name_the_rank_and_keep_the_traceback(monkeypatch):
    monkeypatch.setattr(sys, "excepthook", sys.__excepthook__)
    monkeypatch.setattr(threading, "excepthook", threading.__excepthook__)
    failure.install(3)
    assert failure.installed() and threading.excepthook is failure._thread_excepthook
    try:
        raise KeyError("lost")
    except KeyError as e:
        text = failure.failure_message(type(e), e, e.__traceback__, " in thread loader")
    failure.uninstall()
    assert not failure.installed()
    first, *rest = text.splitlines()
    assert first == "tideflow: rank 3 failed in thread loader: KeyError: 'lost'"
    assert rest[0] == "Traceback (most recent call last):" and "raise KeyError" in text


def test_a_watchdog_needs_a_positive_timeout():
    with pytest.raises(ValueError, match=r"the communication timeout must be positive, got 0"):
        failure.Watchdog(0, rank=0)
