"""The three training workloads every benchmark times, each built in tideflow and in PyTorch
from the same weights and fed the same batch (training.py puts them side by side):

    W1  MLP 784-1024-1024-10, batch 128, Adam
    W2  CNN conv(3,16,3)-relu-pool-conv(16,32,3)-relu-pool-fc on 3x32x32, batch 32, SGD momentum
    W3  GPT vocab 512, 4 layers, 4 heads, width 256, block 128, batch 8, AdamW

Steps of the two libraries are timed interleaved (one tideflow step, one torch step, ...), so
a busy machine slows both alike and the ratio stays meaningful when absolute times do not.
"""

from __future__ import annotations

import ctypes
import glob
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

import tideflow as flow
from tideflow.models import GPT, GPTConfig

WARMUP_STEPS = 3
TIMED_STEPS = 15

GPT_CONFIG = GPTConfig(vocab_size=512, block_size=128, n_layer=4, n_head=4, n_embd=256)


def _mlp(lib):
    nn = lib.nn
    return nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                         nn.Linear(1024, 10))  # fmt: skip


def _cnn(lib):
    nn = lib.nn
    return nn.Sequential(
        nn.Conv2d(3, 16, 3), nn.ReLU(), nn.MaxPool2d(2),  # 16 x 15 x 15
        nn.Conv2d(16, 32, 3), nn.ReLU(), nn.MaxPool2d(2),  # 32 x 6 x 6
        nn.Flatten(), nn.Linear(32 * 6 * 6, 10),
    )  # fmt: skip


def _torch_gpt(torch, c: GPTConfig):
    """nanoGPT's model in PyTorch, module for module the same as `tideflow.models.GPT`."""
    nn, F = torch.nn, torch.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(c.n_embd, bias=c.bias)
            self.attn = nn.Module()
            self.attn.c_attn = nn.Linear(c.n_embd, 3 * c.n_embd, bias=c.bias)
            self.attn.c_proj = nn.Linear(c.n_embd, c.n_embd, bias=c.bias)
            self.ln_2 = nn.LayerNorm(c.n_embd, bias=c.bias)
            self.mlp = nn.Module()
            self.mlp.c_fc = nn.Linear(c.n_embd, 4 * c.n_embd, bias=c.bias)
            self.mlp.c_proj = nn.Linear(4 * c.n_embd, c.n_embd, bias=c.bias)

        def forward(self, x):
            b, t, e = x.shape
            q, k, v = self.attn.c_attn(self.ln_1(x)).split(e, dim=2)
            q, k, v = (z.view(b, t, c.n_head, -1).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.attn.c_proj(y.transpose(1, 2).reshape(b, t, e))
            return x + self.mlp.c_proj(F.gelu(self.mlp.c_fc(self.ln_2(x))))

    class TorchGPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.transformer = nn.ModuleDict(
                {
                    "wte": nn.Embedding(c.vocab_size, c.n_embd),
                    "wpe": nn.Embedding(c.block_size, c.n_embd),
                    "h": nn.ModuleList(Block() for _ in range(c.n_layer)),
                    "ln_f": nn.LayerNorm(c.n_embd, bias=c.bias),
                }
            )
            self.lm_head = nn.Linear(c.n_embd, c.vocab_size, bias=False)
            self.transformer.wte.weight = self.lm_head.weight

        def forward(self, idx, targets):
            tr = self.transformer
            x = tr.wte(idx) + tr.wpe(torch.arange(idx.shape[1]))
            for block in tr.h:
                x = block(x)
            logits = self.lm_head(tr.ln_f(x))
            return logits, F.cross_entropy(logits.flatten(0, 1), targets.flatten())

    return TorchGPT()


@dataclass
class Workload:
    name: str
    model: Callable  # lib -> Module
    optimizer: Callable  # (lib, parameters) -> Optimizer
    loss: Callable  # (lib, model, inputs, targets) -> scalar Tensor
    batch: tuple[np.ndarray, np.ndarray]  # inputs, targets


def _classification_loss(lib, model, x, y):
    return lib.nn.functional.cross_entropy(model(x), y)


def _gpt_loss(lib, model, idx, targets):
    return model(idx, targets)[1]


def _workloads() -> list[Workload]:
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, GPT_CONFIG.vocab_size, (8, GPT_CONFIG.block_size + 1))
    return [
        Workload(
            "W1 MLP 784-1024-1024-10, Adam", _mlp,
            lambda lib, params: lib.optim.Adam(params, lr=1e-3), _classification_loss,
            (rng.standard_normal((128, 784), dtype=np.float32), rng.integers(0, 10, 128)),
        ),
        Workload(
            "W2 small CNN 3x32x32, SGD+momentum", _cnn,
            lambda lib, params: lib.optim.SGD(params, lr=0.01, momentum=0.9),
            _classification_loss,
            (rng.standard_normal((32, 3, 32, 32), dtype=np.float32), rng.integers(0, 10, 32)),
        ),
        Workload(
            "W3 GPT 4x256, block 128, AdamW",
            lambda lib: GPT(GPT_CONFIG) if lib is flow else _torch_gpt(lib, GPT_CONFIG),
            lambda lib, params: lib.optim.AdamW(params, lr=3e-4), _gpt_loss,
            (tokens[:, :-1], tokens[:, 1:]),
        ),
    ]  # fmt: skip


def _training_step(lib, model, workload: Workload) -> Callable[[], None]:
    optimizer = workload.optimizer(lib, model.parameters())
    x, y = (lib.tensor(a) for a in workload.batch)

    def step():
        optimizer.zero_grad(set_to_none=True)
        workload.loss(lib, model, x, y).backward()
        optimizer.step()

    return step


def paired_models(torch, workload: Workload):
    """`workload`'s tideflow model and its PyTorch twin, with the same weights."""
    ours, theirs = workload.model(flow), workload.model(torch)
    theirs.load_state_dict(
        {k: torch.from_numpy(v.numpy().copy()) for k, v in ours.state_dict().items()}
    )
    return ours, theirs


def _steps(torch, workload: Workload) -> tuple[Callable[[], None], Callable[[], None]]:
    """The tideflow and the torch training step of `workload`, from the same weights."""
    ours, theirs = paired_models(torch, workload)
    return _training_step(flow, ours, workload), _training_step(torch, theirs, workload)


def _interleaved_medians(ours: Callable, theirs: Callable) -> tuple[float, float]:
    for _ in range(WARMUP_STEPS):
        ours()
        theirs()
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(TIMED_STEPS):
        for fn, sink in ((ours, times[0]), (theirs, times[1])):
            start = time.perf_counter()
            fn()
            sink.append(time.perf_counter() - start)
    return statistics.median(times[0]) * 1e3, statistics.median(times[1]) * 1e3


def _blas_threads_from_environment() -> int | None:
    """The thread count NumPy's OpenBLAS was told to use when it loaded, if any."""
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name])
    return None


def openblas_core() -> str:
    """The kernel family NumPy's OpenBLAS runs ("SkylakeX", "Haswell", ...): machines may
    force an older one with OPENBLAS_CORETYPE, which slows NumPy's GEMMs, not PyTorch's."""
    libs = glob.glob(
        os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs", "*openblas*")
    )
    for path in libs:
        lib = ctypes.CDLL(path)
        for name in ("scipy_openblas_get_corename64_", "openblas_get_corename64_",
                     "openblas_get_corename"):  # fmt: skip
            fn = getattr(lib, name, None)
            if fn is not None:
                fn.restype = ctypes.c_char_p
                return fn().decode()
    return "unknown"


def thread_setup(torch) -> str:
    """Give torch as many threads as NumPy's BLAS uses: as threadpoolctl reports, else as
    OPENBLAS_NUM_THREADS / OMP_NUM_THREADS asked; with neither, both keep their defaults.
    Also says which OpenBLAS kernels NumPy runs."""
    return f"{_threads(torch)}; NumPy's OpenBLAS kernels: {openblas_core()}"


def _threads(torch) -> str:
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        blas = _blas_threads_from_environment()
        source = "from the environment (threadpoolctl not installed)"
    else:
        counts = [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]
        blas = max(counts, default=None)
        source = "reported by threadpoolctl"
    if blas is None:
        return (
            f"threads: defaults (threadpoolctl not installed, OPENBLAS_NUM_THREADS unset): "
            f"torch {torch.get_num_threads()}, NumPy's OpenBLAS its default; "
            f"{os.cpu_count()} CPUs"
        )
    torch.set_num_threads(blas)
    return f"threads: NumPy BLAS {blas} {source}, torch {torch.get_num_threads()}"
