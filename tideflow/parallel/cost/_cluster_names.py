"""`make_cluster(name)`: a cluster by the name `tideflow plan --cluster` takes."""

from __future__ import annotations

from ._calibrate import local_cluster
from ._cluster import Cluster, cluster_from_json
from ._devices import preset_device
from ._network import PRESET_NETWORKS


def make_cluster(name: str, nodes: int | None = None, gpus_per_node: int | None = None) -> Cluster:
    """A preset, `local` or a JSON file; presets default to one node of 8 devices."""
    if name == "local":
        return local_cluster(nodes, gpus_per_node)
    if name.endswith(".json"):
        return cluster_from_json(name, nodes, gpus_per_node)
    device = preset_device(name)
    return Cluster(device, PRESET_NETWORKS[name], gpus_per_node or 8, nodes or 1)
