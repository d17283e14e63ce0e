"""A plan as text, and why one plan beats another."""

from __future__ import annotations

from ._cluster import Cluster
from ._gpt import GPTSpec
from ._planner import Plan


def format_plan(plan: Plan, spec: GPTSpec, cluster: Cluster, top: int = 5) -> str:
    layout = plan.layout
    picked = f"   (picked by the planner: {', '.join(plan.picked)})" if plan.picked else ""
    fits = "fits" if plan.fits else "DOES NOT FIT"
    lines = [
        f"GPT {spec.parameters / 1e9:.1f}B parameters ({spec.layers} layers, hidden "
        f"{spec.hidden}, {spec.heads} heads, seq {spec.seq}, vocab {spec.vocab}), "
        f"global batch {plan.global_batch}",
        f"cluster {cluster.device.name}: {cluster.nodes} nodes x {cluster.gpus_per_node} = "
        f"{cluster.devices} devices",
        f"layout              {layout.describe()}{picked}",
        f"step time           {plan.step_time_s:.3f} s",
        f"TFLOP/s per device  {plan.tflops_per_device:.1f} (counted as Megatron-LM does, "
        "recomputed forwards included)",
        f"memory per device   {plan.memory_per_device_gb:.1f} GB of "
        f"{plan.memory_limit_bytes / 1e9:.1f} GB usable: {fits}",
        f"bubble fraction     {plan.bubble_fraction:.1%}",
        "top costs (seconds of the step):",
    ]
    for name, seconds in plan.costs[:top]:
        lines.append(f"  {name:<30} {seconds:8.3f} s  {seconds / plan.step_time_s:6.1%}")
    return "\n".join(lines)


def explain(found: Plan, baseline: Plan) -> str:
    """Where `found` saves time over `baseline`: the costs that differ, largest first."""
    ratio = baseline.step_time_s / found.step_time_s
    lines = [
        f"{found.layout.describe()} takes {found.step_time_s:.3f} s a step, "
        f"{ratio:.3f}x faster than {baseline.layout.describe()} ({baseline.step_time_s:.3f} s):"
    ]
    ours, theirs = dict(found.costs), dict(baseline.costs)
    deltas = {name: ours.get(name, 0.0) - theirs.get(name, 0.0) for name in ours | theirs}
    for name, delta in sorted(deltas.items(), key=lambda kv: kv[1]):
        if abs(delta) >= 0.001 * baseline.step_time_s:
            lines.append(
                f"  {name:<30} {theirs.get(name, 0.0):8.3f} s -> {ours.get(name, 0.0):8.3f} s"
            )
    if found.layout.recompute != baseline.layout.recompute:
        lines.append(
            "  recompute "
            + ("off: the forward is not run twice" if baseline.layout.recompute else "on")
        )
    lines.append(
        f"  memory per device {baseline.memory_per_device_gb:.1f} GB -> "
        f"{found.memory_per_device_gb:.1f} GB (usable {found.memory_limit_bytes / 1e9:.1f} GB)"
    )
    return "\n".join(lines)
