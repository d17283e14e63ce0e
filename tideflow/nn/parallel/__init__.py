"""Parallel training of modules: `DistributedDataParallel` (a replica per rank, gradients
averaged in backward) and tensor parallelism's annotations, `column_parallel` and
`row_parallel` (a Linear layer's weight split over the ranks, see `tideflow.parallel`)."""

from ...parallel.tensor_parallel import column_parallel, row_parallel
from .data_parallel import DataParallel
from .distributed import DistributedDataParallel

__all__ = ["DataParallel", "DistributedDataParallel", "column_parallel", "row_parallel"]
