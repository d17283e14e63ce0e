"""Collective costs in the alpha-beta model over a two-level link hierarchy.

A message of M bytes over one link costs `alpha + M / bandwidth`. Collectives among n ranks
(M is the full buffer: the all-reduced tensor, the gathered output, the scattered input):

    ring all-reduce       2 (n-1) alpha + 2 (n-1)/n M / bw
    tree all-reduce       2 ceil(log2 n) alpha + 2 M / bw      (pipelined double binary tree)
    all-gather            (n-1) alpha + (n-1)/n M / bw         (ring)
    reduce-scatter        (n-1) alpha + (n-1)/n M / bw         (ring)
    all-to-all            (n-1) alpha + (n-1)/n M / bw         (pairwise exchange)
    send/recv             alpha + M / bw

A group whose ranks span nodes runs hierarchically, as NCCL does: reduce-scatter within the
node (NVLink), the across-node collective on 1/k of the data by each of the node's k ranks
over its own NIC in parallel, all-gather within the node. All-reduce takes the cheaper of
ring and tree.
"""

from __future__ import annotations

import dataclasses
import math

GB = 1e9


@dataclasses.dataclass(frozen=True)
class Link:
    """One level of the hierarchy: per-rank, per-direction bandwidth (bytes/s) and latency."""

    bandwidth: float
    latency_s: float

    def time(self, nbytes: float, steps: float = 1) -> float:
        return steps * self.latency_s + nbytes / self.bandwidth


def ring_allreduce(link: Link, nbytes: float, n: int) -> float:
    if n == 1:
        return 0.0
    return 2 * (n - 1) * link.latency_s + 2 * (n - 1) / n * nbytes / link.bandwidth


def tree_allreduce(link: Link, nbytes: float, n: int) -> float:
    if n == 1:
        return 0.0
    return 2 * math.ceil(math.log2(n)) * link.latency_s + 2 * nbytes / link.bandwidth


def allgather(link: Link, nbytes: float, n: int) -> float:
    if n == 1:
        return 0.0
    return (n - 1) * link.latency_s + (n - 1) / n * nbytes / link.bandwidth


reduce_scatter = allgather
alltoall = allgather


def sendrecv(link: Link, nbytes: float) -> float:
    return link.time(nbytes)


def flat_allreduce(link: Link, nbytes: float, n: int) -> float:
    return min(ring_allreduce(link, nbytes, n), tree_allreduce(link, nbytes, n))


@dataclasses.dataclass(frozen=True)
class Network:
    """Links within a node and between nodes; a process group is described by its size and
    how many of its ranks share a node (`per_node`)."""

    intra: Link
    inter: Link

    def allreduce(self, nbytes: float, n: int, per_node: int) -> float:
        if n == 1:
            return 0.0
        if per_node >= n:
            return flat_allreduce(self.intra, nbytes, n)
        nodes = n // per_node
        return (
            reduce_scatter(self.intra, nbytes, per_node)
            + flat_allreduce(self.inter, nbytes / per_node, nodes)
            + allgather(self.intra, nbytes, per_node)
        )

    def allgather(self, nbytes: float, n: int, per_node: int) -> float:
        if per_node >= n:
            return allgather(self.intra, nbytes, n)
        nodes = n // per_node
        return allgather(self.inter, nbytes / per_node, nodes) + allgather(
            self.intra, nbytes, per_node
        )

    def reduce_scatter(self, nbytes: float, n: int, per_node: int) -> float:
        return self.allgather(nbytes, n, per_node)

    def alltoall(self, nbytes: float, n: int, per_node: int) -> float:
        if per_node >= n:
            return alltoall(self.intra, nbytes, n)
        # NOTE: of each rank's outgoing data, the share for other nodes crosses the NIC.
        remote = (n - per_node) / n
        return (n - 1) * self.inter.latency_s + remote * nbytes / self.inter.bandwidth

    def sendrecv(self, nbytes: float, same_node: bool) -> float:
        return sendrecv(self.intra if same_node else self.inter, nbytes)


# NOTE: per-GPU, per-direction figures: NVLink 3 (A100) 600 GB/s and NVLink 4 (H100/H200)
# 900 GB/s both directions together; one HDR (200 Gb/s) or NDR (400 Gb/s) InfiniBand NIC
# per GPU as in DGX A100 / DGX H100. Latencies are NCCL's per-step costs of the order it
# reports (microseconds), not wire latencies.
PRESET_NETWORKS = {
    "a100-80gb": Network(Link(300 * GB, 5e-6), Link(25 * GB, 10e-6)),
    "h100-80gb": Network(Link(450 * GB, 5e-6), Link(50 * GB, 10e-6)),
    "h200": Network(Link(450 * GB, 5e-6), Link(50 * GB, 10e-6)),
}
