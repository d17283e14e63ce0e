"""Run unmodified PyTorch programs on tideflow: `import torch` resolves to tideflow.

>>> import tideflow.mock_torch
>>> with tideflow.mock_torch.enabled():
...     import torch
...     import torch.nn as nn
...     from torch.utils.data import DataLoader
>>> nn.Linear is tideflow.nn.Linear, torch.cuda.is_available()
(True, False)

From the command line: `python -m tideflow.mock_torch train.py --epochs 3` runs `train.py`
as `__main__` with the mock enabled.
"""

from ._importer import disable, enable, enabled, is_enabled

__all__ = ["disable", "enable", "enabled", "is_enabled"]
