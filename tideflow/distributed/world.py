"""The process world: this process's rank, how many ranks there are, and where they run.

One process per device. A process started by an MPI launcher (`mpiexec`, the tideflow
launcher that wraps it, or Slurm's `srun`) learns that from the variables the launcher sets
and joins the MPI world the first time it asks anything about the world. A plain
`python train.py` is a world of one and never loads an MPI library: nothing to launch,
nothing to configure.

NOTE: MPI_Init waits for every rank of the job, so under a launcher either every rank uses
tideflow's distributed API or none does.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass

from ..framework.errors import TideflowError
from . import failure
from .backend import Communicator, LocalCommunicator

# (rank, size) variables of each launcher family, most specific first: MPICH's Hydra and PMI
# servers (srun --mpi=pmi2 too), Open MPI, PMIx.
_LAUNCHER_VARS = (
    ("PMI_RANK", "PMI_SIZE"),
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
    ("PMIX_RANK", None),
)
_SLURM_VARS = ("SLURM_PROCID", "SLURM_STEP_NUM_TASKS")  # set by srun for each task of a step
# (local rank, processes on the node) variables: Hydra, Open MPI, srun (no local size).
_LOCAL_VARS = (
    ("MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
    ("OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"),
    ("SLURM_LOCALID", None),
)
_TIMEOUT_VAR = "TIDEFLOW_COMM_TIMEOUT"  # seconds; a blocking call that takes longer aborts
# NOTE: PyTorch's default for its CPU backends: a hung job ends, a slow one is left alone
DEFAULT_TIMEOUT = 1800.0


def launcher_rank_and_size(environ: Mapping[str, str] | None = None) -> tuple[int, int | None]:
    """(rank, world size) as the launcher that started this process tells them, without MPI;
    (0, None) for a plain process. The size is None where the launcher does not say."""
    env = os.environ if environ is None else environ
    for rank_var, size_var in _LAUNCHER_VARS:
        if rank_var in env:
            size = int(env[size_var]) if size_var is not None and size_var in env else None
            return int(env[rank_var]), size
    rank_var, size_var = _SLURM_VARS
    if rank_var in env and int(env.get(size_var, "1")) > 1:
        return int(env[rank_var]), int(env[size_var])
    return 0, None


def launcher_local_rank_and_size(environ: Mapping[str, str] | None = None):
    """(rank on this node, processes on this node) as the launcher tells them, without MPI;
    None for what it does not say."""
    env = os.environ if environ is None else environ
    for rank_var, size_var in _LOCAL_VARS:
        if rank_var in env:
            size = int(env[size_var]) if size_var is not None and size_var in env else None
            return int(env[rank_var]), size
    return None, None


def launched(environ: Mapping[str, str] | None = None) -> bool:
    """Whether a launcher started this process as one rank of a job."""
    env = os.environ if environ is None else environ
    if any(rank_var in env for rank_var, _ in _LAUNCHER_VARS):
        return True
    return launcher_rank_and_size(env)[1] is not None


@dataclass(frozen=True)
class World:
    """Every process of the job. `local_rank` / `local_size`: this process's rank among the
    processes on its node and their number; `node_size`: the number of nodes. `comm` is the
    library's communicator of every rank, `user_comm` a duplicate for user-level calls."""

    rank: int
    size: int
    local_rank: int
    local_size: int
    node_size: int
    comm: Communicator
    user_comm: Communicator


_lock = threading.Lock()
_state: dict = {"world": None}


def get_world() -> World:
    """The world, joined on first use."""
    world = _state["world"]
    return world if world is not None else init()


def init(backend: str | None = None, timeout: float | None = None) -> World:
    """Join the world now. `backend`: None joins MPI only if a launcher started this process;
    'mpi' joins it in any case (a plain process becomes an MPI world of one). `timeout`
    (seconds; default $TIDEFLOW_COMM_TIMEOUT, else 30 minutes): a blocking call that takes
    longer ends the job, instead of hanging on a failed or mismatched rank."""
    if backend not in (None, "mpi"):
        raise ValueError(f"unknown communication backend {backend!r}; expected None or 'mpi'")
    with _lock:
        world = _state["world"]
        use_mpi = backend == "mpi" or launched()
        joining = world is None
        if joining:
            world = _state["world"] = _join(use_mpi)
        elif use_mpi and world.comm.backend != "mpi":
            raise TideflowError(
                "this process already joined a world of one without MPI; ask for the 'mpi' "
                "backend before any other distributed call"
            )
        if timeout is None and joining:
            timeout = float(os.environ.get(_TIMEOUT_VAR, DEFAULT_TIMEOUT))
        if timeout is not None and world.comm.backend == "mpi":
            from . import mpi_backend

            mpi_backend.set_timeout(timeout, world.rank)
        return world


def _join(use_mpi: bool) -> World:
    if not use_mpi:
        comm: Communicator = LocalCommunicator()
    else:
        from . import mpi_backend  # initializes MPI

        comm = mpi_backend.connect()
        _check_size(comm.size)
        failure.install(comm.rank)
    local_rank, local_size, node_size = comm.node_layout()
    return World(comm.rank, comm.size, local_rank, local_size, node_size, comm, comm.dup())


def _check_size(size: int) -> None:
    expected = launcher_rank_and_size()[1]
    if expected is not None and expected != size:
        raise TideflowError(
            f"the launcher started {expected} processes, but MPI sees a world of {size}: the "
            "MPI library cannot reach the launcher's process manager (under srun, pass "
            "--mpi=pmi2 or --mpi=pmix, or start the job with mpiexec)"
        )


if launched():
    # NOTE: from import on, not from joining: a rank that fails before it joins must still
    # end the ranks already waiting for it in MPI_Init.
    failure.install(launcher_rank_and_size()[0])
