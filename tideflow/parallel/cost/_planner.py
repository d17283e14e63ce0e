"""Predict one GPT training step of a DP x TP x PP layout on a cluster, and search layouts.

Ranks are ordered as Megatron-LM orders them: tensor-parallel ranks adjacent (inside a
node), then data-parallel, then pipeline stages outermost. What lies on the critical path:
every layer's GEMMs and memory-bound kernels, its tensor-parallel all-reduces (two per
forward, two per backward, two more per recomputed forward), the activations sent between
stages (blocking, split over the tp ranks and gathered after, as Megatron's scatter/gather
does), the pipeline's fill and drain, the data-parallel gradient reduction after the flush
of which a fraction `dp_overlap` is hidden behind backward (0 by default: Megatron-LM's 2021
runtime reduces after the last micro-batch), and the optimizer step.
"""

from __future__ import annotations

import dataclasses
import itertools

from ...framework.errors import ArgumentError
from ._cluster import Cluster
from ._gpt import GPTSpec, layer_forward, logits_forward, megatron_flops
from ._memory import GRAD_BYTES, MemoryBreakdown, memory_per_device, stage_parameters
from ._schedule import pipeline_time

ADAM_BYTES_PER_PARAM = (
    28  # fp32 weight, momentum, variance read and written, fp16 grad in, weight out
)
# NOTE: of a device's memory, the CUDA context, communication buffers and allocator
# fragmentation take about a tenth; layouts must fit in the rest.
USABLE_MEMORY_FRACTION = 0.9


@dataclasses.dataclass(frozen=True)
class Layout:
    tp: int
    pp: int
    dp: int
    micro_batch: int
    recompute: bool
    zero: int = 0
    interleave: int = 1

    def describe(self) -> str:
        return (
            f"tp={self.tp} pp={self.pp} dp={self.dp} micro-batch={self.micro_batch} "
            f"recompute={'on' if self.recompute else 'off'} zero={self.zero} "
            f"interleave={self.interleave}"
        )


@dataclasses.dataclass(frozen=True)
class Plan:
    """A predicted step. `costs` are seconds of the step by cause, largest first."""

    layout: Layout
    global_batch: int
    step_time_s: float
    tflops_per_device: float
    memory: MemoryBreakdown
    memory_limit_bytes: float
    bubble_fraction: float
    costs: tuple[tuple[str, float], ...]
    picked: tuple[str, ...] = ()

    @property
    def memory_per_device_gb(self) -> float:
        return self.memory.total / 1e9

    @property
    def fits(self) -> bool:
        return self.memory.total <= self.memory_limit_bytes

    def to_json(self) -> dict:
        return {
            "step_time_s": self.step_time_s,
            "tflops_per_device": self.tflops_per_device,
            "memory_per_device_gb": self.memory_per_device_gb,
            "memory_limit_gb": self.memory_limit_bytes / 1e9,
            "fits": self.fits,
            "bubble_fraction": self.bubble_fraction,
            "layout": dataclasses.asdict(self.layout),
            "global_batch": self.global_batch,
            "picked": list(self.picked),
            "costs_s": dict(self.costs),
        }


def check_layout(spec: GPTSpec, cluster: Cluster, global_batch: int, layout: Layout) -> None:
    tp, pp, dp, b, v = layout.tp, layout.pp, layout.dp, layout.micro_batch, layout.interleave
    problems = []
    if tp * pp * dp != cluster.devices:
        problems.append(f"tp*pp*dp = {tp}*{pp}*{dp} is not the {cluster.devices} devices")
    if spec.heads % tp:
        problems.append(f"heads {spec.heads} are not divisible by tp {tp}")
    if spec.layers < pp:
        problems.append(f"layers {spec.layers} are fewer than pp {pp} stages")
    elif v > 1 and spec.layers % (pp * v):
        problems.append(f"layers {spec.layers} are not divisible by pp*interleave {pp}*{v}")
    if global_batch % (dp * b):
        problems.append(f"global batch {global_batch} is not divisible by dp*micro-batch {dp}*{b}")
    elif v > 1 and (pp == 1 or (global_batch // (dp * b)) % pp):
        problems.append(f"interleave {v} needs pp > 1 and micro-batches divisible by pp {pp}")
    if layout.zero not in (0, 1, 2, 3):
        problems.append(f"ZeRO stage {layout.zero} is not 0-3")
    if problems:
        raise ArgumentError("plan: " + "; ".join(problems) + f" ({layout.describe()})")


def evaluate(
    spec: GPTSpec, cluster: Cluster, global_batch: int, layout: Layout, dp_overlap: float = 0.0
) -> Plan:
    """The predicted step of `layout`; raises ArgumentError for a layout that cannot run."""
    check_layout(spec, cluster, global_batch, layout)
    if not 0 <= dp_overlap <= 1:
        raise ArgumentError(f"plan: dp_overlap is a fraction in [0, 1], got {dp_overlap}")
    tp, pp, dp, b, v = layout.tp, layout.pp, layout.dp, layout.micro_batch, layout.interleave
    device, net, g = cluster.rank_device, cluster.network, cluster.gpus_per_node
    m = global_batch // (dp * b)

    layer = layer_forward(spec, device, b, tp)
    forwards = 2 if layout.recompute else 1
    tp_allreduce = net.allreduce(layer.allreduce_bytes, tp, min(tp, g))
    per_layer = {
        "GEMMs": (forwards + 2) * layer.gemm_s,
        "memory-bound kernels": (forwards + 2) * layer.elementwise_s,
        "tensor-parallel all-reduce": (2 * forwards + 2) * tp_allreduce,
    }
    # NOTE: layers that do not divide evenly go one more to each of the first stages (the
    # last one already holds the output layer); the fullest stage paces the pipeline.
    fullest, extra = -(-spec.layers // pp), spec.layers % pp
    stage = {name: fullest * t for name, t in per_layer.items()}
    if pp > 1:
        boundary_bytes = layer.allreduce_bytes / tp
        same_node = tp * dp < g
        hop = net.sendrecv(boundary_bytes, same_node) + net.allgather(
            layer.allreduce_bytes, tp, min(tp, g)
        )
        stage["pipeline send/recv"] = 2 * v * hop
    logits = 3 * logits_forward(spec, device, b, tp)
    stage_time = sum(stage.values())
    layer_time = sum(per_layer.values())
    stage_times = [stage_time] * pp
    if extra:
        stage_times[extra:] = [stage_time - layer_time] * (pp - extra)
    stage_times[-1] += logits
    pipe = pipeline_time(stage_times, m, v)

    first_params, last_params = stage_parameters(spec, tp, pp)
    params = max(first_params, last_params)
    dp_per_node = max(1, min(dp, g // tp))
    grad_sync = net.allreduce(GRAD_BYTES * params, dp, dp_per_node)
    if layout.zero == 3:
        # NOTE: weights gathered for every forward and backward of every micro-batch.
        gathers = m * (forwards + 1) * net.allgather(GRAD_BYTES * params, dp, dp_per_node)
        grad_sync = m * net.reduce_scatter(GRAD_BYTES * params, dp, dp_per_node) + gathers
    exposed_sync = (1 - dp_overlap) * grad_sync
    optimizer_shard = params / dp if layout.zero >= 1 else params
    optimizer = device.stream_time(ADAM_BYTES_PER_PARAM * optimizer_shard, ops=1)

    step = pipe.total_s + exposed_sync + optimizer
    # NOTE: the slowest stage's work by cause; whatever else the pipeline takes is bubble.
    slowest = max(range(pp), key=stage_times.__getitem__)
    scale = (stage_times[slowest] - (logits if slowest == pp - 1 else 0)) / stage_time
    costs = {name: m * t * scale for name, t in stage.items()}
    if slowest == pp - 1:
        costs["output layer and loss"] = m * logits
    costs["pipeline bubble"] = pipe.total_s - pipe.busy_s
    costs["data-parallel gradient sync"] = exposed_sync
    costs["optimizer step"] = optimizer
    ranked = tuple(sorted(((k, t) for k, t in costs.items() if t > 0), key=lambda kv: -kv[1]))
    memory = memory_per_device(spec, b, tp, pp, dp, m, layout.recompute, layout.zero, v)
    flops = megatron_flops(spec, global_batch, layout.recompute)
    return Plan(
        layout, global_batch, step, flops / step / cluster.devices / 1e12, memory,
        USABLE_MEMORY_FRACTION * device.memory_bytes, pipe.bubble_fraction, ranked,
    )  # fmt: skip


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def candidate_layouts(spec: GPTSpec, cluster: Cluster, global_batch: int, fixed: dict):
    """Every layout that can run, with the fields in `fixed` held to their values.

    Tensor parallelism stays inside a node (its all-reduces are on the critical path);
    micro-batches are powers of two up to 8 and interleaving up to 8 chunks, past which
    GEMMs gain little and stage-to-stage traffic grows."""
    n, g = cluster.devices, cluster.gpus_per_node
    choices = {
        "tp": [t for t in _divisors(g) if spec.heads % t == 0],
        "pp": [p for p in _divisors(n) if p <= spec.layers],
        "micro_batch": [1, 2, 4, 8],
        "recompute": [False, True],
        "zero": [0, 1, 2, 3],
        "interleave": list(range(1, 9)),
    }
    for name, value in fixed.items():
        if name != "dp":
            choices[name] = [value]
    names = list(choices)
    for values in itertools.product(*(choices[k] for k in names)):
        fields = dict(zip(names, values, strict=True))
        if n % (fields["tp"] * fields["pp"]):
            continue
        fields["dp"] = n // (fields["tp"] * fields["pp"])
        if "dp" in fixed and fields["dp"] != fixed["dp"]:
            continue
        layout = Layout(**fields)
        try:
            check_layout(spec, cluster, global_batch, layout)
        except ArgumentError:
            continue
        yield layout


def plan(
    spec: GPTSpec, cluster: Cluster, global_batch: int, dp_overlap: float = 0.0, **fixed
) -> Plan:
    """The fastest predicted layout that fits in device memory, with the layout fields given
    in `fixed` (tp, pp, dp, micro_batch, recompute, zero, interleave) held; the others are
    picked and named in `Plan.picked`. With every field given, that layout is evaluated and
    returned even when it does not fit (`Plan.fits` says so).

    >>> from tideflow.parallel.cost import GPTSpec, make_cluster, plan
    >>> gpt = GPTSpec(layers=24, hidden=2304, heads=24, seq=2048, vocab=51200)
    >>> plan(gpt, make_cluster("a100-80gb", nodes=4), 512, tp=1, pp=1).fits
    True
    """
    fixed = {k: v for k, v in fixed.items() if v is not None}
    unknown = set(fixed) - {f.name for f in dataclasses.fields(Layout)}
    if unknown:
        raise ArgumentError(f"plan: unknown layout fields {sorted(unknown)}")
    fields = {f.name for f in dataclasses.fields(Layout)}
    if fields <= set(fixed) | ({"dp"} if {"tp", "pp"} <= set(fixed) else set()):
        dp = fixed.get("dp", cluster.devices // (fixed["tp"] * fixed["pp"]))
        return evaluate(spec, cluster, global_batch, Layout(**{**fixed, "dp": dp}), dp_overlap)
    best, runnable = None, 0
    for layout in candidate_layouts(spec, cluster, global_batch, fixed):
        runnable += 1
        candidate = evaluate(spec, cluster, global_batch, layout, dp_overlap)
        if candidate.fits and (best is None or candidate.step_time_s < best.step_time_s):
            best = candidate
    if not runnable:
        # NOTE: the simplest layout with the given fields says what is wrong with them.
        tp, pp = fixed.get("tp", 1), fixed.get("pp", 1)
        simplest = {"micro_batch": 1, "recompute": True, "zero": 0, "interleave": 1}
        simplest |= {"tp": tp, "pp": pp, "dp": max(cluster.devices // (tp * pp), 1)} | fixed
        check_layout(spec, cluster, global_batch, Layout(**simplest))
    if best is None:
        raise ArgumentError(
            f"plan: no {'layout' if runnable else 'runnable layout'} with "
            f"{fixed or 'free fields'} fits in "
            f"{USABLE_MEMORY_FRACTION * cluster.device.memory_bytes / 1e9:.0f} GB usable per "
            f"device on {cluster.devices} devices"
        )
    picked = tuple(sorted(fields - set(fixed)))
    return dataclasses.replace(best, picked=picked)
