"""The planner against published runs, its search, and `tideflow plan`'s output."""

import json
import re
import shlex
from pathlib import Path

import pytest

from tideflow import cli
from tideflow.cli import main
from tideflow.framework.errors import ArgumentError
from tideflow.parallel.cost import GPTSpec, Layout, evaluate, explain, make_cluster, plan

DOC = Path(__file__).resolve().parents[2] / "docs" / "planning.md"

# Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU Clusters Using
# Megatron-LM", Table 1 (A100-80GB, DGX nodes of 8, sequence 2048, vocabulary 51200, activation
# recompute): parameters (billions), heads, hidden, layers, tensor-parallel size,
# pipeline-parallel size, GPUs, batch size, achieved TFLOP/s per GPU. Values as published in
# the paper (quoted from it, not fetched here).
MEGATRON_TABLE_1 = [
    (1.7, 24, 2304, 24, 1, 1, 32, 512, 137),
    (3.6, 32, 3072, 30, 2, 1, 64, 512, 138),
    (7.5, 32, 4096, 36, 4, 1, 128, 512, 142),
    (18.4, 48, 6144, 40, 8, 1, 256, 1024, 135),
    (39.1, 64, 8192, 48, 8, 2, 512, 1536, 138),
    (76.1, 80, 10240, 60, 8, 4, 1024, 1792, 140),
    (145.6, 96, 12288, 80, 8, 8, 1536, 2304, 148),
    (310.1, 128, 16384, 96, 8, 16, 1920, 2160, 155),
    (529.6, 128, 20480, 105, 8, 35, 2520, 2520, 163),
    (1008.0, 160, 25600, 128, 8, 64, 3072, 3072, 163),
]
# Only the published hardware numbers and the one efficiency curve (tideflow.parallel.cost
# ._devices) enter the prediction; the micro-batch size, not in the table, is the planner's.
TOLERANCE = 0.15


def predict_megatron_row(heads, hidden, layers, tp, pp, gpus, batch):
    spec = GPTSpec(layers=layers, hidden=hidden, heads=heads, seq=2048, vocab=51200)
    cluster = make_cluster("a100-80gb", nodes=gpus // 8)
    return plan(spec, cluster, batch, tp=tp, pp=pp, recompute=True, zero=0, interleave=1)


@pytest.mark.parametrize("row", MEGATRON_TABLE_1, ids=lambda row: f"{row[0]}B")
def test_megatron_table_1_is_predicted_within_15_percent(row):
    _, heads, hidden, layers, tp, pp, gpus, batch, published = row
    predicted = predict_megatron_row(heads, hidden, layers, tp, pp, gpus, batch)
    assert predicted.fits
    assert predicted.tflops_per_device == pytest.approx(published, rel=TOLERANCE)


# BLOOM-176B (BigScience 2022, "BLOOM: A 176B-Parameter Open-Access Multilingual Language
# Model", its training setup): Megatron-DeepSpeed on 384 A100-80GB (48 nodes), tensor 4 x
# pipeline 12 x data 8, ZeRO stage 1, micro-batch 2, global batch 2048, 70 layers, hidden 14336, 112
# heads, vocabulary 250880, activation recompute; 156 TFLOP/s per GPU in its fastest
# configuration.
BLOOM = GPTSpec(layers=70, hidden=14336, heads=112, seq=2048, vocab=250880)
BLOOM_LAYOUT = Layout(tp=4, pp=12, dp=8, micro_batch=2, recompute=True, zero=1)


def test_bloom_176b_on_deepspeed_is_predicted_within_15_percent():
    predicted = evaluate(BLOOM, make_cluster("a100-80gb", nodes=48), 2048, BLOOM_LAYOUT)
    assert predicted.fits
    assert predicted.tflops_per_device == pytest.approx(156, rel=TOLERANCE)


GPT3 = GPTSpec(layers=96, hidden=12288, heads=96, seq=2048, vocab=51200)
# Megatron-LM's layout rule in Table 1 (tensor parallel over the 8 GPUs of a node, the fewest
# pipeline stages that fit: its 145.6B row with the same hidden size runs 8 x 8) for the 175B
# GPT-3 on 1024 A100s with batch 1536: the paper estimates GPT-3's training time from 140
# TFLOP/s per GPU there.
MEGATRON_175B = Layout(tp=8, pp=8, dp=16, micro_batch=1, recompute=True)


def test_search_on_175b_over_1024_a100s_beats_megatrons_layout_and_says_why():
    cluster = make_cluster("a100-80gb", nodes=128)
    published = evaluate(GPT3, cluster, 1536, MEGATRON_175B)
    found = plan(GPT3, cluster, 1536)
    assert published.fits and found.fits
    assert found.step_time_s <= published.step_time_s
    assert published.tflops_per_device == pytest.approx(140, rel=TOLERANCE)
    why = explain(found, published)
    # every cost that changed is named with both values, and the memory it costs
    for name, seconds in published.costs:
        if abs(dict(found.costs).get(name, 0.0) - seconds) >= 0.001 * published.step_time_s:
            assert name in why
    assert "memory per device" in why


def test_every_field_left_out_is_picked_within_the_memory_limit():
    cluster = make_cluster("a100-80gb", nodes=2)
    spec = GPTSpec(layers=24, hidden=4096, heads=32, seq=2048, vocab=51200)
    chosen = plan(spec, cluster, 64, tp=4)
    assert chosen.layout.tp == 4
    assert set(chosen.picked) == {"pp", "dp", "micro_batch", "recompute", "zero", "interleave"}
    assert chosen.fits
    for other_pp in (1, 2, 4):
        try:
            other = plan(spec, cluster, 64, tp=4, pp=other_pp)
        except ArgumentError:
            continue
        assert chosen.step_time_s <= other.step_time_s


def test_a_layout_that_does_not_fit_says_so():
    whole = plan(
        GPT3, make_cluster("a100-80gb", nodes=128), 2048,
        tp=1, pp=1, micro_batch=1, recompute=True, zero=0, interleave=1,
    )  # fmt: skip
    assert not whole.fits
    assert whole.memory_per_device_gb > 16 * GPT3.parameters / 1e9


def test_zero_stages_shrink_memory_and_interleaving_shrinks_the_bubble():
    cluster = make_cluster("a100-80gb", nodes=16)
    base = dict(tp=8, pp=4, dp=4, micro_batch=1, recompute=True)
    memories = [evaluate(GPT3, cluster, 512, Layout(**base, zero=z)).memory.total for z in range(4)]
    assert memories == sorted(memories, reverse=True)
    bubbles = [
        evaluate(GPT3, cluster, 512, Layout(**base, interleave=v)).bubble_fraction
        for v in (1, 2, 4)
    ]
    assert bubbles == sorted(bubbles, reverse=True)


def test_overlapping_the_gradient_sync_hides_it():
    cluster = make_cluster("a100-80gb", nodes=4)
    spec = GPTSpec(layers=24, hidden=2304, heads=24, seq=2048, vocab=51200)
    layout = Layout(tp=1, pp=1, dp=32, micro_batch=2, recompute=True)
    exposed = evaluate(spec, cluster, 512, layout)
    hidden = evaluate(spec, cluster, 512, layout, dp_overlap=1.0)
    sync = dict(exposed.costs)["data-parallel gradient sync"]
    assert exposed.step_time_s - hidden.step_time_s == pytest.approx(sync)
    with pytest.raises(ArgumentError, match=r"dp_overlap is a fraction in \[0, 1\], got 2"):
        evaluate(spec, cluster, 512, layout, dp_overlap=2)


def test_impossible_layouts_are_refused_with_the_sizes():
    cluster = make_cluster("a100-80gb", nodes=1)
    with pytest.raises(ArgumentError, match=r"tp\*pp\*dp = 2\*2\*1 is not the 8 devices"):
        evaluate(GPT3, cluster, 8, Layout(tp=2, pp=2, dp=1, micro_batch=1, recompute=True))
    with pytest.raises(ArgumentError, match="global batch 12 is not divisible by dp"):
        evaluate(GPT3, cluster, 12, Layout(tp=1, pp=1, dp=8, micro_batch=1, recompute=True))


PLAN_ARGS = [
    "plan", "--model", "gpt", "--layers", "24", "--hidden", "2304", "--heads", "24",
    "--seq", "2048", "--vocab", "51200", "--global-batch", "512", "--cluster", "a100-80gb",
    "--nodes", "4", "--gpus-per-node", "8",
]  # fmt: skip


def test_plan_json_matches_the_api(capsys):
    assert main([*PLAN_ARGS, "--tp", "1", "--pp", "1", "--recompute", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    spec = GPTSpec(layers=24, hidden=2304, heads=24, seq=2048, vocab=51200)
    expected = plan(spec, make_cluster("a100-80gb", nodes=4), 512, tp=1, pp=1, recompute=True)
    for key in ("step_time_s", "tflops_per_device", "memory_per_device_gb", "bubble_fraction"):
        assert report[key] == pytest.approx(getattr(expected, key))
    assert report["layout"]["dp"] == 32
    assert set(report["picked"]) == {"dp", "micro_batch", "zero", "interleave"}


def test_plan_search_json_carries_the_given_layout_too(capsys):
    assert main([*PLAN_ARGS, "--tp", "8", "--pp", "1", "--search", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["given_layout"]["layout"]["tp"] == 8
    assert report["step_time_s"] <= report["given_layout"]["step_time_s"]
    assert len(report["picked"]) == 7


def test_plan_text_names_picks_and_a_layout_that_does_not_fit(capsys):
    gpt3 = ["--layers", "96", "--hidden", "12288", "--heads", "96"]
    whole = ["--tp", "1", "--pp", "1", "--micro-batch", "1", "--recompute", "--zero", "0"]
    main([*PLAN_ARGS, *gpt3, *whole, "--interleave", "1"])
    out = capsys.readouterr().out
    assert "DOES NOT FIT" in out
    main([*PLAN_ARGS, "--tp", "2"])
    out = capsys.readouterr().out
    assert "picked by the planner: dp, interleave, micro_batch, pp, recompute, zero" in out
    assert re.search(r"step time\s+\d+\.\d+ s", out)


def test_plan_refuses_a_bad_layout_with_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([*PLAN_ARGS, "--tp", "5", "--pp", "1"])
    assert exit_info.value.code == 2
    assert "heads 24 are not divisible by tp 5" in capsys.readouterr().err


def test_plan_needs_a_model_unless_it_only_calibrates(capsys, monkeypatch):
    with pytest.raises(SystemExit) as exit_info:
        main(["plan", "--cluster", "local", "--layers", "2"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "the following arguments are required: --hidden, --heads, --global-batch" in err
    measured = {"peak_flops": 1e11}
    monkeypatch.setattr(cli.cost, "calibrate", lambda: measured)
    assert main(["plan", "--cluster", "local", "--calibrate"]) == 0
    assert json.loads(capsys.readouterr().out) == measured


def test_the_planning_doc_commands_print_what_it_shows(capsys):
    sessions = re.findall(r"```console\n\$ (.*?)\n(.*?)```", DOC.read_text(), flags=re.S)
    assert len(sessions) == 2
    for command, shown in sessions:
        assert main(shlex.split(command)[1:]) == 0
        assert capsys.readouterr().out == shown


def test_the_planning_doc_runs_and_its_table_is_the_model():
    text = DOC.read_text()
    namespace = {"__name__": "planning_doc"}
    blocks = list(re.finditer(r"```python\n(.*?)```", text, flags=re.S))
    assert blocks
    for block in blocks:
        first_line = text.count("\n", 0, block.start(1))
        exec(compile("\n" * first_line + block.group(1), str(DOC), "exec"), namespace)
    rows = re.findall(r"^\| (\d+\.\d)B \|.*\| (\d+) \| (\d+\.\d) \| ([+-]\d+\.\d)% \|$", text, re.M)
    assert len(rows) == len(MEGATRON_TABLE_1)
    for (billions, published, predicted, _), row in zip(rows, MEGATRON_TABLE_1, strict=True):
        assert (float(billions), int(published)) == (row[0], row[8])
        ours = predict_megatron_row(*row[1:8]).tflops_per_device
        assert float(predicted) == pytest.approx(ours, abs=0.05)
