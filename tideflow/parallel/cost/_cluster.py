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
    device: DeviceProfile
    network: Network
    gpus_per_node: int
    nodes: int

    @property
    def devices(self) -> int:
        return self.gpus_per_node * self.nodes


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
