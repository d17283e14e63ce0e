"""Run on every rank under mpiexec -n 2, 4 or 8: a GPT (tied embeddings, causal attention,
cross entropy with ignored targets) trained as an nn.Graph with data, tensor (Megatron's
column- and row-parallel layers, the embeddings split by vocabulary), pipeline (two stages,
the tied head weight moved to the last one), on 4 ranks data x tensor and data x pipeline,
and on 8 ranks data x tensor x pipeline parallelism, against the same steps on one process."""

from __future__ import annotations

import numpy as np
from global_checks import SIZE, S, close, done, global_of, train_one_process

import tideflow as flow
import tideflow.parallel as par
from tideflow.models import GPT, GPTConfig
from tideflow.nn.graph import GraphModule

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
    def __init__(self, model):
        super().__init__()
        self.model = model
        self.add_optimizer(flow.optim.AdamW(model.parameters(), lr=1e-2))

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


def megatron(model, where):
    """Attention and MLP projections column- then row-parallel over the last axis, the tied
    embedding split by vocabulary, the rest broadcast."""
    for block in model.transformer.h:
        tensor_parallel_block(block, where)
    whole = tuple(S.broadcast for _ in range(where.ndim))
    par.module_to_global(model, where, lambda t: t.sbp if t.is_global else whole)
    par.module_to_global(model.lm_head, where, (*whole[:-1], S.split(0)))
    return model


def broadcast(model, where):
    return par.module_to_global(model, where, tuple(S.broadcast for _ in range(where.ndim)))


def megatron_stage(module, where):
    """Megatron's layers of the blocks in `module` (a GPT or one of its parts) on `where`,
    already global tensors moved with their layout, the rest broadcast."""
    blocks = module.transformer.h if isinstance(module, GPT) else [module]
    for block in blocks:
        if hasattr(block, "attn"):
            tensor_parallel_block(block, where)
    whole = tuple(S.broadcast for _ in range(where.ndim))
    return par.module_to_global(module, where, lambda t: t.sbp if t.is_global else whole)


def tensor_parallel_block(block, where):
    par.column_parallel(block.attn.c_attn, where)
    par.row_parallel(block.attn.c_proj, where)
    par.column_parallel(block.mlp.c_fc, where)
    par.row_parallel(block.mlp.c_proj, where)



def check(name, layout, where, data_sbp) -> None:
    want = one_process()
    model = layout(gpt(), where)
    graph = TrainGraph(model)
    outs = [graph(global_of(t[:, :-1], where, data_sbp), global_of(t[:, 1:], where, data_sbp))
            for t in TOKENS]  # fmt: skip
    close(np.array([o.numpy() for o in outs]), want, f"{name}: losses", atol=2e-5)


class PipelineGraph(TrainGraph):
    """Two stages: the embeddings and the first block, then the second block and the head
    (whose tied weight stays with the embedding on the first stage), 2 micro-batches."""

    def __init__(self, model, stages):
        super().__init__(model)
        self.config.set_gradient_accumulation_steps(2)
        first, last = stages
        blocks = self.model.transformer.h
        blocks[0].to(GraphModule).set_stage(0, first)
        blocks[1].to(GraphModule).set_stage(1, last)
        self.model.transformer.ln_f.to(GraphModule).set_stage(1, last)


def check_pipeline(stages, data_sbp, layout=broadcast) -> None:
    """`layout(module, placement)` lays out each stage's modules (on 2-D stages: Megatron)."""
    want = one_process(micro_batches=2)
    model = gpt()
    first, last = stages
    layout(model, first)  # the embeddings (and so the tied head) and block 0
    for module in (model.transformer.h[1], model.transformer.ln_f):
        layout(module, last)
    graph = PipelineGraph(model, stages)
    outs = [graph(global_of(t[:, :-1], first, data_sbp), global_of(t[:, 1:], last, data_sbp))
            for t in TOKENS]  # fmt: skip
    close(np.concatenate([o.numpy() for o in outs]), want, "pipeline: losses", atol=2e-5)


if SIZE in (2, 4):
    LINE = par.placement("cpu", list(range(SIZE)))
    check("data parallel", broadcast, LINE, S.split(0))
    check("tensor parallel", megatron, LINE, S.broadcast)
    check_pipeline([par.placement("cpu", [0]), par.placement("cpu", [1])], S.broadcast)
if SIZE == 4:
    GRID = par.placement("cpu", [[0, 1], [2, 3]])
    check("data x tensor parallel", megatron, GRID, (S.split(0), S.broadcast))
    halves = [par.placement("cpu", [0, 1]), par.placement("cpu", [2, 3])]
    check_pipeline(halves, S.split(0))  # data x pipeline parallel
if SIZE == 8:  # data x tensor x pipeline: two stages of 2x2 grids
    grids = [par.placement("cpu", [[0, 1], [2, 3]]), par.placement("cpu", [[4, 5], [6, 7]])]
    check_pipeline(grids, (S.split(0), S.broadcast), megatron_stage)
done()
