"""Run on every rank under mpiexec -n 2, 4 or 8: a GPT (tied embeddings, causal attention,
cross entropy with ignored targets) laid out by `tideflow.models.parallelize_gpt` and trained
as an nn.Graph with data, tensor (Megatron's column- and row-parallel layers, the embeddings
split by vocabulary), pipeline (two stages, the tied head weight moved to the last one)
parallelism, on 4 ranks their 2-D combinations, and on 8 ranks all three, against the same
steps on one process."""

from __future__ import annotations

import numpy as np
from global_checks import SIZE, close, done, train_one_process

import tideflow as flow
from tideflow.models import GPT, GPTConfig, parallelize_gpt

CONFIG = GPTConfig(vocab_size=11, block_size=8, n_layer=2, n_head=2, n_embd=16)
STEPS = 4
rng = np.random.default_rng(0)
TOKENS = [rng.integers(0, CONFIG.vocab_size, (4, CONFIG.block_size + 1)) for _ in range(STEPS)]
for t in TOKENS:
    t[0, -1] = -1  # an ignored target


def gpt():
    flow.manual_seed(0)
    return GPT(CONFIG)


class TrainGraph(flow.nn.Graph):
    def __init__(self, model, layout, micro_batches: int):
        super().__init__()
        self.model = model
        layout.set_stages(self.model)
        self.add_optimizer(flow.optim.AdamW(model.parameters(), lr=1e-2))
        if micro_batches > 1:
            self.config.set_gradient_accumulation_steps(micro_batches)

    def build(self, idx, targets):
        _, loss = self.model(idx, targets)
        loss.backward()
        return loss


def one_process(micro_batches: int = 1):
    """Per-step losses of eager training on one process (see `train_one_process`)."""
    model = gpt()
    opt = flow.optim.AdamW(model.parameters(), lr=1e-2)
    batches = [(t[:, :-1], t[:, 1:]) for t in TOKENS]
    return train_one_process(model, opt, batches, lambda m, x, y: m(x, y)[1], micro_batches)[0]


def check(name: str, dp: int = 1, tp: int = 1, pp: int = 1) -> None:
    """Pipelines run 2 micro-batches (one per stage), whose losses come back one each."""
    micro_batches = 2 if pp > 1 else 1
    want = one_process(micro_batches)
    model = gpt()
    layout = parallelize_gpt(model, dp=dp, tp=tp, pp=pp)
    graph = TrainGraph(model, layout, micro_batches)
    outs = [graph(*layout.inputs(flow.tensor(t[:, :-1]), flow.tensor(t[:, 1:]))) for t in TOKENS]
    got = np.concatenate([np.atleast_1d(o.numpy()) for o in outs])
    close(got, want, f"{name}: losses", atol=2e-5)


if SIZE == 2:
    check("data parallel", dp=2)
    check("tensor parallel", tp=2)
    check("pipeline", pp=2)
if SIZE == 4:
    check("data parallel", dp=4)
    check("tensor parallel", tp=2, dp=2)
    check("data x pipeline parallel", dp=2, pp=2)
    check("tensor x pipeline parallel", tp=2, pp=2)
if SIZE == 8:  # data x tensor x pipeline: two stages of 2x2 grids
    check("data x tensor x pipeline parallel", dp=2, tp=2, pp=2)
done()
