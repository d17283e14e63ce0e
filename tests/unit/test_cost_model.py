"""The cost model's parts against hand calculations (tideflow.parallel.cost)."""

import json
import math

import pytest

from tideflow.framework.errors import ArgumentError, ShapeError, TideflowError
from tideflow.parallel.cost import (
    ATTENTION_TILE,
    AttentionShape,
    DeviceProfile,
    GPTSpec,
    Link,
    Network,
    _calibrate,
    _memory,
    _network,
    attention_times,
    bubble_fraction,
    make_cluster,
    matmul_cost,
    megatron_flops,
    op_time,
    pipeline_time,
    pointwise_cost,
)

GB = 1e9


def test_gemm_efficiency_follows_the_stated_curve():
    device = DeviceProfile("d", 100e12, 1e12, 80 * GB, max_efficiency=0.7, half_size=16)
    assert device.gemm_efficiency(2048, 128, 4096) == pytest.approx(0.7 * 128 / 144)
    # 2 m n k FLOPs at 100 TFLOP/s * 0.7 * 4096/4112; compute-bound at this size
    expected = 2 * 4096**3 / (100e12 * 0.7 * 4096 / 4112)
    assert device.gemm_time(4096, 4096, 4096) == pytest.approx(expected)


def test_each_matrix_of_a_batch_after_the_first_costs_a_call():
    device = DeviceProfile("cpu", 1e11, 1e12, 8 * GB, max_efficiency=1.0, half_size=0.0,
                           gemm_call_s=2e-6, op_overhead_s=5e-6)  # fmt: skip
    flops = 2 * 32 * 64 * 16 * 64 / 1e11
    assert device.gemm_time(32, 64, 16, batch=64) == pytest.approx(flops + 63 * 2e-6 + 5e-6)
    assert device.gemm_time(32, 64, 16) == pytest.approx(flops / 64 + 5e-6)


def test_the_per_matrix_call_is_the_slope_less_the_flops():
    batches = [16, 64, 256]
    seconds = [7e-6 + b * (1e-6 + 2.5e-6) for b in batches]
    assert _calibrate.fit_gemm_call(batches, seconds, 1e-6) == pytest.approx(2.5e-6)
    assert _calibrate.fit_gemm_call(batches, seconds, 5e-6) == 0  # FLOPs priced slower


def test_a_thin_gemm_is_bound_by_memory():
    device = DeviceProfile("d", 100e12, 1e12, 80 * GB, max_efficiency=0.7, half_size=16)
    # (8192 x 1) @ (1 x 8192): 2*8192^2 FLOPs, but the 8192^2 fp16 result alone is 134 MB
    moved = 2 * (8192 + 8192 + 8192 * 8192)
    assert device.gemm_time(8192, 8192, 1) == pytest.approx(moved / 1e12)


def test_op_costs_from_shapes():
    # (4, 1, 64, 32) @ (3, 32, 16): batch 4*3 broadcast, 2 b m n k FLOPs
    cost = matmul_cost((4, 1, 64, 32), (3, 32, 16), itemsize=4)
    assert cost.flops == 2 * 12 * 64 * 16 * 32
    assert cost.bytes == 4 * (4 * 64 * 32 + 3 * 32 * 16 + 12 * 64 * 16)
    assert cost.gemm == (12, 64, 16, 32)
    # a broadcast add: both operands read, the output written
    add = pointwise_cost([(8, 128), (128,)], (8, 128), itemsize=2)
    assert (add.flops, add.bytes) == (8 * 128, 2 * (8 * 128 + 128 + 8 * 128))
    with pytest.raises(ShapeError, match=r"cannot multiply \(2, 3\) by \(4, 5\)"):
        matmul_cost((2, 3), (4, 5), itemsize=4)


def test_op_time_is_the_roofline():
    device = DeviceProfile("d", 1e12, 1e11, 8 * GB, max_efficiency=0.5, half_size=0.0)
    add = pointwise_cost([(1000,), (1000,)], (1000,), itemsize=4)
    assert op_time(device, add) == pytest.approx(12000 / 1e11)  # bandwidth-bound
    square = matmul_cost((256, 256), (256, 256), itemsize=4)
    assert op_time(device, square, itemsize=4) == pytest.approx(2 * 256**3 / 0.5e12)


def test_ring_tree_and_ring_collectives_in_the_alpha_beta_model():
    link = Link(bandwidth=10 * GB, latency_s=1e-5)
    m = 1 * GB
    assert _network.ring_allreduce(link, m, 4) == pytest.approx(6e-5 + 2 * 3 / 4 * 0.1)
    assert _network.tree_allreduce(link, m, 4) == pytest.approx(4e-5 + 2 * 0.1)
    assert _network.allgather(link, m, 4) == pytest.approx(3e-5 + 3 / 4 * 0.1)
    assert _network.reduce_scatter(link, m, 4) == _network.allgather(link, m, 4)
    assert _network.sendrecv(link, m) == pytest.approx(1e-5 + 0.1)
    assert _network.ring_allreduce(link, m, 1) == 0.0
    # small messages: the tree's log2(n) latency steps beat the ring's n-1
    assert _network.flat_allreduce(link, 8, 64) == _network.tree_allreduce(link, 8, 64)
    assert _network.flat_allreduce(link, m, 64) == _network.ring_allreduce(link, m, 64)


def test_a_group_across_nodes_reduces_hierarchically():
    intra, inter = Link(300 * GB, 5e-6), Link(25 * GB, 10e-6)
    net = Network(intra, inter)
    m = 8 * GB
    # 32 ranks, 8 per node: reduce-scatter in the node, all-reduce 1/8 of the data over the 4
    # nodes (each of the 8 ranks on its own NIC), all-gather in the node
    within = 7 * 5e-6 + 7 / 8 * m / (300 * GB)
    across = min(
        2 * 3 * 10e-6 + 2 * 3 / 4 * (m / 8) / (25 * GB), 2 * 2 * 10e-6 + 2 * (m / 8) / (25 * GB)
    )
    assert net.allreduce(m, 32, per_node=8) == pytest.approx(2 * within + across)
    # one rank per node: every byte crosses the NIC
    assert net.allreduce(m, 4, per_node=1) == pytest.approx(_network.flat_allreduce(inter, m, 4))
    assert net.allreduce(m, 8, per_node=8) == pytest.approx(_network.flat_allreduce(intra, m, 8))


def test_all_to_all_within_and_across_nodes():
    intra, inter = Link(300 * GB, 5e-6), Link(25 * GB, 10e-6)
    net = Network(intra, inter)
    m = 1 * GB
    assert net.alltoall(m, 8, per_node=8) == pytest.approx(7 * 5e-6 + 7 / 8 * m / (300 * GB))
    # 16 ranks, 8 per node: half of each rank's buffer goes to the other node, over its NIC
    assert net.alltoall(m, 16, per_node=8) == pytest.approx(15 * 10e-6 + 0.5 * m / (25 * GB))


def test_model_states_under_each_zero_stage():
    psi, dp = 1e9, 8
    assert _memory.model_state_bytes(psi, dp, 0) == pytest.approx(16e9)
    assert _memory.model_state_bytes(psi, dp, 1) == pytest.approx(4e9 + 12e9 / 8)
    assert _memory.model_state_bytes(psi, dp, 2) == pytest.approx(2e9 + 14e9 / 8)
    assert _memory.model_state_bytes(psi, dp, 3) == pytest.approx(16e9 / 8)


def test_activations_under_1f1b_with_and_without_recompute():
    spec = GPTSpec(layers=8, hidden=1024, heads=16, seq=512, vocab=1000)
    s, b, h, a, t = 512, 2, 1024, 16, 2
    per_layer = s * b * h * (10 + 24 / t + 5 * a * s / (h * t))
    assert _memory.layer_activation_bytes(spec, b, t) == pytest.approx(per_layer)
    # p=4 stages of 2 layers; the first holds min(p, m) micro-batches
    assert _memory.stage_activation_bytes(spec, b, t, 4, 16, False) == pytest.approx(
        4 * 2 * per_layer
    )
    assert _memory.stage_activation_bytes(spec, b, t, 4, 3, False) == pytest.approx(
        3 * 2 * per_layer
    )
    # recompute keeps each layer's 2-byte input, plus one layer's full set being recomputed
    assert _memory.stage_activation_bytes(spec, b, t, 4, 16, True) == pytest.approx(
        4 * 2 * (2 * s * b * h) + per_layer
    )
    # interleaving with v=2 chunks: (1 + (p-1)/(p v)) times as much in flight
    assert _memory.stage_activation_bytes(spec, b, t, 4, 16, False, 2) == pytest.approx(
        4 * (1 + 3 / 8) * 2 * per_layer
    )


def test_equal_stages_give_the_1f1b_and_interleaved_bubbles():
    p, m = 8, 32
    plain = pipeline_time([1.0] * p, m)
    assert plain.total_s == pytest.approx(m + p - 1)
    assert plain.bubble_fraction == pytest.approx(bubble_fraction(p, m)) == (p - 1) / (m + p - 1)
    interleaved = pipeline_time([1.0] * p, m, interleave=4)
    assert interleaved.total_s == pytest.approx(m + (p - 1) / 4)
    assert interleaved.bubble_fraction == pytest.approx((p - 1) / (4 * m + p - 1))


def test_the_slowest_stage_paces_the_pipeline():
    # stages of 1, 1, 2 s: the first micro-batch crosses in 4 s, the other 9 wait on the 2 s one
    assert pipeline_time([1.0, 1.0, 2.0], 10).total_s == pytest.approx(10 * 2 + 2)


def test_megatron_flop_count():
    spec = GPTSpec(layers=1, hidden=1, heads=1, seq=1, vocab=16)
    # 96 B s l h^2 (1 + s/6h + V/16lh) with recompute, 72 (1 + s/6h + V/12lh) without
    assert megatron_flops(spec, 1, recompute=True) == pytest.approx(96 * (1 + 1 / 6 + 1))
    assert megatron_flops(spec, 1, recompute=False) == pytest.approx(72 * (1 + 1 / 6 + 16 / 12))


@pytest.mark.parametrize(
    ("layers", "hidden", "heads", "published_billions"),
    [(24, 2304, 24, 1.7), (48, 8192, 64, 39.1), (128, 25600, 160, 1008.0)],
)
def test_parameter_count_matches_megatron_table_1(layers, hidden, heads, published_billions):
    spec = GPTSpec(layers=layers, hidden=hidden, heads=heads, seq=2048, vocab=51200)
    assert spec.parameters / 1e9 == pytest.approx(published_billions, rel=0.03)


def test_spec_refuses_heads_that_do_not_divide_hidden():
    with pytest.raises(ArgumentError, match="hidden 100 is not divisible by heads 3"):
        GPTSpec(layers=2, hidden=100, heads=3, seq=8, vocab=10)


def test_fit_recovers_the_curve():
    sizes = [16, 64, 256, 1024]
    rates = [5e10 * d / (d + 40) for d in sizes]
    peak, half = _calibrate.fit_gemm_curve(sizes, rates)
    assert peak == pytest.approx(5e10)
    assert half == pytest.approx(40)


def test_fit_stays_positive_on_noisy_rates():
    # rates measured on a busy machine: falling with size, the unconstrained fit's 1/R < 0
    sizes = [256, 512, 1024, 64, 16, 64, 128]
    rates = [98e9, 101e9, 35e9, 86e9, 78e9, 76e9, 29e9]
    peak, half = _calibrate.fit_gemm_curve(sizes, rates)
    assert peak > 0 and half >= 0
    assert min(rates) <= peak <= 2 * max(rates)


def test_one_slow_timing_does_not_drag_the_peak_down():
    # the curve of a 100 GFLOP/s core, every rate off by a few percent, and one GEMM timed
    # while another process ran (a twentieth of its rate): a fit weighting rows by 1/r gave
    # nearly that rate as the peak; relative errors keep the peak within 10% of the truth
    sizes = [256, 512, 1024, 64, 16, 64, 128]
    noise = [1.03, 0.98, 1.0, 0.97, 1.02, 1.0, 0.99]
    rates = [1e11 * d / (d + 8) * e for d, e in zip(sizes, noise, strict=True)]
    rates[2] /= 20
    peak, half = _calibrate.fit_gemm_curve(sizes, rates)
    assert peak == pytest.approx(1e11, rel=0.1)
    assert 0 <= half < 32


PROFILE = {
    "peak_flops": 1e11, "half_size": 20.0, "blas_threads": 2, "gemm_cores": 2,
    "memory_bandwidth": 1e10, "memory_bytes": 16e9, "op_overhead_s": 1e-5, "node_s": 2e-6,
    "task_s": 3e-6, "switch_s": 8e-6, "gemm_call_s": 1e-6, "link_bandwidth": 2e9,
    "link_latency_s": 4e-6,
    "attention_score_s": 5e-9, "attention_grad_score_s": 3e-9,
    "collective_waits": {"2": 1e-5, "4": 1e-4, "8": 2e-3, "16": 4e-3}, "cpus": 4,
}  # fmt: skip


def _cache(tmp_path, monkeypatch, profile: dict) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    path = _calibrate.cache_path()
    assert path == tmp_path / "tideflow" / "cost_profile.json"
    path.parent.mkdir()
    path.write_text(json.dumps(profile))


def test_local_cluster_reads_the_calibration_cache(tmp_path, monkeypatch):
    _cache(tmp_path, monkeypatch, PROFILE)
    cluster = make_cluster("local", gpus_per_node=2)
    assert cluster.devices == 2
    assert cluster.device.memory_bytes == 8e9  # two ranks share the machine
    assert cluster.device.gemm_efficiency(20, 20, 20) == pytest.approx(0.5)
    assert cluster.network.intra == Link(2e9, 4e-6) == cluster.network.inter
    assert (cluster.device.node_s, cluster.device.task_s, cluster.device.switch_s) == (
        2e-6, 3e-6, 8e-6,
    )  # fmt: skip
    # two ranks on four cores: each has two, all its BLAS threads use
    assert cluster.rank_device == cluster.device
    assert cluster.rank_network == cluster.network
    assert cluster.collective_wait_s == 1e-5  # measured with two ranks


def test_ranks_beyond_the_cores_share_them(tmp_path, monkeypatch):
    _cache(tmp_path, monkeypatch, PROFILE)
    cluster = make_cluster("local", gpus_per_node=8)  # half a core each
    rank = cluster.rank_device
    # GEMMs were timed on 2 cores: a quarter of that rate; the rest was on one: half
    assert rank.peak_flops == pytest.approx(1e11 / 4)
    assert rank.memory_bandwidth == pytest.approx(1e10 / 2)
    assert (rank.node_s, rank.task_s, rank.switch_s) == pytest.approx((4e-6, 6e-6, 16e-6))
    assert cluster.rank_network.intra.bandwidth == pytest.approx(2e9 / 2)  # copies, too
    assert cluster.collective_wait_s == 2e-3  # measured with eight ranks
    # three ranks: a core each, but one BLAS thread's worth of GEMM (4/3 cores of 2 used)
    three = make_cluster("local", gpus_per_node=3).rank_device
    assert three.peak_flops == pytest.approx(1e11 * (4 / 3) / 2)
    assert three.node_s == 2e-6


def test_collective_waits_between_and_beyond_the_job_sizes_measured():
    waits = {"2": 1e-5, "4": 1e-4, "8": 2e-3}
    assert _calibrate.wait_for(waits, 1) == 0  # no peers
    assert _calibrate.wait_for(waits, 6) == pytest.approx((1e-4 + 2e-3) / 2)
    assert _calibrate.wait_for(waits, 12) == pytest.approx(2e-3 * 12 / 8)


def test_a_collective_wait_is_the_iteration_less_its_work():
    # four ranks on two cores: 4 ms of slabs take 2 ms of the cores; the busiest alone, 1.2
    probe = {"iteration_s": 2.5e-3, "work_sum_s": 4e-3, "work_max_s": 1.2e-3}
    assert _calibrate.collective_wait(probe, ranks=4, cores=2) == pytest.approx(0.5e-3)
    # two ranks with a core each: the busiest rank's slab is the iteration's work
    probe = {"iteration_s": 1.3e-3, "work_sum_s": 2e-3, "work_max_s": 1.2e-3}
    assert _calibrate.collective_wait(probe, ranks=2, cores=2) == pytest.approx(0.1e-3)


def test_a_profile_cached_before_graph_overheads_were_measured_is_refused(tmp_path, monkeypatch):
    old = {k: v for k, v in PROFILE.items() if k not in ("node_s", "task_s", "switch_s")}
    _cache(tmp_path, monkeypatch, old)
    with pytest.raises(
        TideflowError, match=r"lacks \['node_s', 'switch_s', 'task_s'\].*--calibrate"
    ):
        make_cluster("local")


def test_cluster_spec_from_json(tmp_path):
    spec = {
        "gpus_per_node": 4, "nodes": 2,
        "device": {"peak_tflops": 100, "memory_gb": 40, "memory_bandwidth_gbs": 1500},
        "intra": {"bandwidth_gbs": 100, "latency_us": 2},
        "inter": {"bandwidth_gbs": 10, "latency_us": 8},
    }  # fmt: skip
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(spec))
    cluster = make_cluster(str(path), nodes=3)
    assert (cluster.devices, cluster.device.peak_flops) == (12, 100e12)
    assert cluster.network.inter == Link(10 * GB, 8e-6)
    path.write_text(json.dumps({"nodes": 1}))
    with pytest.raises(ArgumentError, match="cannot read the cluster spec"):
        make_cluster(str(path))


def test_unknown_device_is_named():
    with pytest.raises(ArgumentError, match="unknown device 'v100'"):
        make_cluster("v100")


@pytest.mark.slow
def test_calibration_measures_this_machine(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    profile = _calibrate.calibrate()
    assert _calibrate.cache_path().exists()
    for key in ("peak_flops", "memory_bandwidth", "link_bandwidth", "link_latency_s",
                "node_s", "task_s"):  # fmt: skip
        assert math.isfinite(profile[key]) and profile[key] > 0
    assert profile["gemm_cores"] == min(profile["blas_threads"], profile["cpus"])
    make_cluster("local")  # the cache it wrote is read back


def test_the_cost_model_tiles_attention_as_the_kernel_does():
    from tideflow.ops.nn.attention import TILE

    assert TILE == ATTENTION_TILE
    causal = AttentionShape(batch=8, rows=64, keys=64, dim=16, value_dim=8, causal=True)
    # rows [0, 32) see keys [0, 32); rows [32, 64) see all 64
    assert causal.tiles() == [(32, 32), (32, 64)]
    assert causal.key_tiles() == [(32, 64), (32, 32)]  # keys [32, 64) are seen by rows 32..
    assert causal.scores() == 8 * (32 * 32 + 32 * 64)
    ragged = AttentionShape(batch=1, rows=40, keys=40, dim=4, value_dim=4, causal=True)
    assert ragged.tiles() == [(32, 32), (8, 40)]
    whole = AttentionShape(batch=8, rows=64, keys=48, dim=16, value_dim=8, causal=False)
    assert whole.tiles() == [(64, 48)] and whole.key_tiles() == [(48, 64)]
    assert whole.scores() == 8 * 64 * 48


def test_attention_is_its_tiles_products_and_a_cost_per_score():
    device = DeviceProfile("cpu", 1e11, 1e15, 8 * GB, max_efficiency=1.0, half_size=0.0,
                           op_overhead_s=5e-6, attention_score_s=4e-9,
                           attention_grad_score_s=3e-9)  # fmt: skip
    shape = AttentionShape(batch=8, rows=64, keys=64, dim=16, value_dim=8, causal=True)
    forward, backward = attention_times(device, shape, itemsize=4)
    # per row tile (r rows, k keys): q k^T is 2 r k d, p v is 2 r k dv; 8 matrices each
    forward_flops = 8 * sum(2 * r * k * (16 + 8) for r, k in [(32, 32), (32, 64)])
    scores = 8 * (32 * 32 + 32 * 64)
    assert forward == pytest.approx(forward_flops / 1e11 + scores * 4e-9 + 5e-6)
    # backward: dO v^T and dS k per row tile, p^T dO and dS^T q per key tile (the same
    # pairs of sizes), each as many FLOPs as forward's two products
    assert backward == pytest.approx(2 * forward_flops / 1e11 + scores * 3e-9 + 5e-6)
