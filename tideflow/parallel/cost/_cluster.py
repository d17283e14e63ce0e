"""A cluster: identical devices, `gpus_per_node` to a node, linked by a two-level network.

A cluster is a preset name (`a100-80gb`, `h100-80gb`, `h200`), `local` (this machine, from
the calibration cache), or a JSON file:

    {"gpus_per_node": 8, "nodes": 4,
     "device": "a100-80gb" | {"peak_tflops": 312, "memory_gb": 80, "memory_bandwidth_gbs": 2039},
     "intra": {"bandwidth_gbs": 300, "latency_us": 5},
     "inter": {"bandwidth_gbs": 25, "latency_us": 10}}

`intra`/`inter` default to the device preset's network when the device is a preset.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from ...framework.errors import ArgumentError
from ._devices import GB, TERA, DeviceProfile, preset_device
from ._network import PRESET_NETWORKS, Link, Network


@dataclasses.dataclass(frozen=True)
class Cluster:
    """`cores_per_node` is set where the ranks are processes sharing a node's CPU cores (the
    `local` cluster), None where each rank has a device of its own. With more ranks than
    cores the scheduler time-slices them, so each computes at cores/ranks of its speed (the
    step's work summed over ranks, over the cores). `collective_wait_s` is what each
    collective costs beyond its transfer there: waiting for peers the scheduler has not
    run yet, and for the ranks' busy polling to give the cores back; measured with a job of
    this many ranks (`_calibrate.measure_collective_waits`), zero on accelerators."""

    device: DeviceProfile
    network: Network
    gpus_per_node: int
    nodes: int
    cores_per_node: float | None = None
    collective_wait_s: float = 0.0

    @property
    def devices(self) -> int:
        return self.gpus_per_node * self.nodes

    @property
    def rank_device(self) -> DeviceProfile:
        """The device as one rank sees it: its share of the node's cores."""
        if self.cores_per_node is None:
            return self.device
        return self.device.on_cores(self.cores_per_node / self.gpus_per_node)

    @property
    def rank_network(self) -> Network:
        """The links as one rank sees them: where ranks time-share the cores, the copies
        that carry a message through shared memory run at the rank's share of a core."""
        share = 1.0 if self.cores_per_node is None else self.cores_per_node / self.gpus_per_node
        if share >= 1:
            return self.network
        intra, inter = self.network.intra, self.network.inter
        return Network(
            Link(intra.bandwidth * share, intra.latency_s),
            Link(inter.bandwidth * share, inter.latency_s),
        )


def _link(spec: dict) -> Link:
    return Link(spec["bandwidth_gbs"] * GB, spec["latency_us"] * 1e-6)


def _device_from_json(spec) -> DeviceProfile:
    if isinstance(spec, str):
        return preset_device(spec)
    return DeviceProfile(
        spec.get("name", "custom"),
        spec["peak_tflops"] * TERA,
        spec["memory_bandwidth_gbs"] * GB,
        spec["memory_gb"] * GB,
        **{k: spec[k] for k in ("max_efficiency", "half_size") if k in spec},
    )


def cluster_from_json(path: str | Path, nodes: int | None, gpus_per_node: int | None) -> Cluster:
    try:
        spec = json.loads(Path(path).read_text())
        device = _device_from_json(spec["device"])
        preset = PRESET_NETWORKS.get(device.name)
        intra = _link(spec["intra"]) if "intra" in spec else preset.intra
        inter = _link(spec["inter"]) if "inter" in spec else preset.inter
        return Cluster(
            device,
            Network(intra, inter),
            gpus_per_node or spec["gpus_per_node"],
            nodes or spec["nodes"],
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise ArgumentError(f"plan: cannot read the cluster spec {path}: {e!r}") from None
