"""DataParallel: PyTorch's single-process, multi-device replication. tideflow runs on the
CPU, where PyTorch's DataParallel has no devices to replicate to and calls the module itself;
so does this one. For data parallelism across processes use DistributedDataParallel."""

from __future__ import annotations

from ...framework.errors import TideflowError
from ..modules.module import Module


class DataParallel(Module):
    """`module` wrapped as PyTorch wraps it (`module.` state-dict prefix, the `module`
    attribute); without accelerator devices the call runs `module` on the whole batch.

    >>> m = flow.nn.DataParallel(flow.nn.Linear(2, 3))
    >>> list(m.state_dict())
    ['module.weight', 'module.bias']
    """

    def __init__(self, module: Module, device_ids=None, output_device=None, dim: int = 0) -> None:
        super().__init__()
        if device_ids:
            raise TideflowError(
                f"DataParallel: device_ids={list(device_ids)} names accelerator devices, which "
                "tideflow does not have; use DistributedDataParallel across processes"
            )
        self.module = module
        self.device_ids: list = []
        self.output_device = output_device
        self.dim = dim

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)
