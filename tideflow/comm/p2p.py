"""OneFlow's point-to-point calls: `send(tensor, dst)` and `recv(src)`, which returns a new
tensor shaped and typed as the sender's (or fills `out`)."""

from __future__ import annotations

import numpy as np

from ..distributed import p2p
from ..distributed.arguments import check_tag, member_group, peer_rank
from ..framework.device import device as as_device
from ..framework.dtype import to_dtype
from ..framework.errors import DeviceError, DTypeError, ShapeError
from ..framework.tensor import Tensor, make_tensor


def send(tensor, dst: int, send_meta: bool = True, *, group=None, tag: int = 0) -> None:
    """Send `tensor` to rank `dst` (`oneflow.comm.send`).

    The tensor's dtype and shape always travel with it (a few hundred bytes), whatever
    `send_meta` says, so that every `recv` can check what arrives.

    >>> import tideflow as flow
    >>> if flow.env.get_world_size() > 1 and flow.env.get_rank() == 0:
    ...     flow.comm.send(flow.ones(2, 3), dst=1)
    """
    p2p.send(tensor, dst, group=group, tag=tag)


def recv(src: int, shape=None, dtype=None, device=None, *, out=None, group=None, tag: int = 0):
    """Receive the tensor rank `src` sends (`oneflow.comm.recv`): a new tensor, or `out`
    filled in place. Given `shape`/`dtype` must match the sender's.

    >>> import tideflow as flow
    >>> if flow.env.get_world_size() > 1 and flow.env.get_rank() == 1:
    ...     t = flow.comm.recv(0)  # shape [2, 3], float32
    """
    pg = member_group(group, "recv")
    if pg is None:
        return None
    if device is not None and as_device(device).type != "cpu":
        raise DeviceError(f"recv: tensors are received on the cpu, got device {device}")
    peer = peer_rank(pg, src, None, "recv", "src")
    tag = check_tag(tag, "recv")
    header = p2p.receive_header(pg, peer, tag)
    if shape is not None and tuple(shape) != header.shape:
        raise ShapeError(
            f"recv: rank {header.source} sent shape {list(header.shape)}, expected {list(shape)}"
        )
    if dtype is not None and to_dtype(dtype) is not header.dtype:
        raise DTypeError(f"recv: rank {header.source} sent {header.dtype}, expected {dtype}")
    if out is None:
        out = make_tensor(np.empty(header.shape, header.dtype.np))
    elif not isinstance(out, Tensor):
        raise TypeError(f"recv: out must be a tideflow.Tensor, got {type(out).__name__}")
    p2p.receive_data(pg, out, header, tag)
    return out
