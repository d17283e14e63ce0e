"""The cost model: predicted compute, communication, memory and schedule of a training step,
and the cluster planner behind `tideflow plan`. See docs/planning.md."""

from ._calibrate import calibrate
from ._cluster import Cluster
from ._cluster_names import make_cluster
from ._devices import PRESET_DEVICES, DeviceProfile
from ._gpt import GPTSpec, megatron_flops
from ._network import PRESET_NETWORKS, Link, Network
from ._ops import (
    ATTENTION_TILE,
    AttentionShape,
    OpCost,
    attention_times,
    matmul_cost,
    op_time,
    pointwise_cost,
)
from ._planner import Layout, Plan, evaluate, plan
from ._report import explain, format_plan
from ._schedule import bubble_fraction, pipeline_time

__all__ = [
    "ATTENTION_TILE",
    "PRESET_DEVICES",
    "PRESET_NETWORKS",
    "AttentionShape",
    "Cluster",
    "DeviceProfile",
    "GPTSpec",
    "Layout",
    "Link",
    "Network",
    "OpCost",
    "Plan",
    "attention_times",
    "bubble_fraction",
    "calibrate",
    "evaluate",
    "explain",
    "format_plan",
    "make_cluster",
    "matmul_cost",
    "megatron_flops",
    "op_time",
    "pipeline_time",
    "plan",
    "pointwise_cost",
]
