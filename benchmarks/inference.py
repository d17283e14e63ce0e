"""Inference latency of ResNet-18 (batch 1 and 32, 3x224x224) and GPT-2 small (batch 1, 128
tokens) in one run: tideflow eager, tideflow nn.Graph, the model exported with
`tideflow.onnx.export` and run by onnxruntime and by OpenVINO, and PyTorch eager on the same
weights. Runs are interleaved (one call of each runner per round, so a busy machine slows all
alike); the table gives median milliseconds and each one's ratio to PyTorch. The runtimes get
as many threads as PyTorch has (`train_workloads.thread_setup`); OpenVINO computes in
float32. Every runner's output is checked against tideflow eager first.

    OPENBLAS_NUM_THREADS=1 python benchmarks/inference.py
    python benchmarks/inference.py --quick     (small models, three rounds: a smoke test)
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import train_workloads as tw

import tideflow as flow
import tideflow.onnx
from tideflow.models import GPT, GPTConfig, resnet18

RUNNERS = ("tideflow eager", "tideflow graph", "onnxruntime", "OpenVINO", "PyTorch eager")


@dataclass
class Case:
    name: str
    model: Callable  # () -> a tideflow model
    torch_model: Callable  # (torch, tideflow model) -> its PyTorch twin, same weights
    inputs: np.ndarray


class _Inference(flow.nn.Graph):
    def __init__(self, model) -> None:
        super().__init__()
        self.model = model

    def build(self, x):
        return self.model(x)


def _logits(out):
    return out[0] if isinstance(out, tuple) else out


def _torch_resnet18(torch, ours):
    """torchvision's ResNet-18, block for block `tideflow.models.resnet18`."""
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.relu = nn.ReLU()
            self.downsample = None
            if stride != 1 or cin != cout:
                self.downsample = nn.Sequential(
                    nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)
                )

        def forward(self, x):
            out = self.bn2(self.conv2(self.relu(self.bn1(self.conv1(x)))))
            return self.relu(out + (x if self.downsample is None else self.downsample(x)))

    class ResNet18(nn.Module):
        def __init__(self, classes):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
            self.bn1 = nn.BatchNorm2d(64)
            self.relu = nn.ReLU()
            self.maxpool = nn.MaxPool2d(3, 2, 1)
            widths = ((64, 64, 1), (64, 128, 2), (128, 256, 2), (256, 512, 2))
            for i, (cin, cout, stride) in enumerate(widths, 1):
                setattr(self, f"layer{i}", nn.Sequential(Block(cin, cout, stride),
                                                         Block(cout, cout, 1)))  # fmt: skip
            self.avgpool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(512, classes)

        def forward(self, x):
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
            return self.fc(torch.flatten(self.avgpool(x), 1))

    return _same_weights(torch, ours, ResNet18(ours.fc.out_features))


def _torch_gpt(torch, ours):
    model = _same_weights(torch, ours, tw._torch_gpt(torch, ours.config))

    def logits(idx):  # the twin's forward without the loss
        tr = model.transformer
        x = tr.wte(idx) + tr.wpe(torch.arange(idx.shape[1]))
        for block in tr.h:
            x = block(x)
        return model.lm_head(tr.ln_f(x))

    return logits


def _same_weights(torch, ours, theirs):
    state = {k: torch.from_numpy(v.numpy().copy()) for k, v in ours.state_dict().items()}
    theirs.load_state_dict(state)
    return theirs.eval()


def _cases(quick: bool) -> list[Case]:
    rng = np.random.default_rng(0)
    side, gpt = (32, GPTConfig(65, 128, 2, 2, 64)) if quick else (224, GPTConfig())
    images = {b: rng.standard_normal((b, 3, side, side), dtype=np.float32) for b in (1, 32)}
    tokens = rng.integers(0, gpt.vocab_size, (1, 128))
    resnet = lambda: resnet18(num_classes=1000)  # noqa: E731
    return [
        Case(f"ResNet-18, batch 1, 3x{side}x{side}", resnet, _torch_resnet18, images[1]),
        Case(
            f"ResNet-18, batch {2 if quick else 32}, 3x{side}x{side}",
            resnet,
            _torch_resnet18,
            images[32][: 2 if quick else 32],
        ),
        Case(
            f"GPT ({gpt.n_layer}x{gpt.n_embd}), batch 1, 128 tokens",
            lambda: GPT(gpt),
            _torch_gpt,
            tokens,
        ),
    ]


def _runners(torch, case: Case, folder: Path, threads: int) -> dict[str, Callable]:
    import onnxruntime as ort
    import openvino as ov

    flow.manual_seed(0)
    model = case.model().eval()
    x = flow.tensor(case.inputs)
    path = folder / "model.onnx"
    tideflow.onnx.export(model, x, path, input_names=["x"])
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    config = {"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": threads}
    compiled = ov.Core().compile_model(str(path), "CPU", config)
    graph = _Inference(model)
    twin = case.torch_model(torch, model)
    tx = torch.from_numpy(case.inputs)

    def eager():
        with flow.no_grad():
            return _logits(model(x)).numpy()

    def in_graph():
        with flow.no_grad():
            return _logits(graph(x)).numpy()

    def in_torch():
        with torch.no_grad():
            return twin(tx).numpy()

    return {
        "tideflow eager": eager,
        "tideflow graph": in_graph,
        "onnxruntime": lambda: session.run(None, {"x": case.inputs})[0],
        "OpenVINO": lambda: compiled({"x": case.inputs})[compiled.outputs[0]],
        "PyTorch eager": in_torch,
    }


def _medians(runners: dict[str, Callable], rounds: int) -> dict[str, float]:
    reference = runners["tideflow eager"]()
    for name, run in runners.items():  # also the warm-up (graph compiles, sessions allocate)
        out = run()
        scale = max(1.0, float(np.abs(reference).max()))
        if not np.allclose(out, reference, rtol=1e-3, atol=1e-3 * scale):
            raise AssertionError(f"{name} disagrees with tideflow eager")
    times: dict[str, list[float]] = {name: [] for name in runners}
    for _ in range(rounds):
        for name, run in runners.items():
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) * 1e3 for name, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small models, three rounds")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    import torch

    print(tw.thread_setup(torch))
    rounds = 3 if args.quick else args.rounds
    threads = torch.get_num_threads()
    width = max(len(r) for r in RUNNERS)
    with tempfile.TemporaryDirectory() as folder:
        for case in _cases(args.quick):
            ms = _medians(_runners(torch, case, Path(folder), threads), rounds)
            print(f"\n{case.name} (median ms of {rounds} rounds; ratio to PyTorch eager)")
            for name in RUNNERS:
                ratio = ms[name] / ms["PyTorch eager"]
                print(f"  {name:<{width}}  {ms[name]:9.2f}  {ratio:6.2f}x")


if __name__ == "__main__":
    main()
