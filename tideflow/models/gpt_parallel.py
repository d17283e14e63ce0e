"""A GPT laid out for data x tensor x pipeline parallel training in an `nn.Graph`, by SBP
annotations only (Megatron-LM's layout); the model code does not change.

The world's `dp * tp * pp` ranks are ordered [pp][dp][tp]: pipeline stage s holds ranks
`s*dp*tp ... (s+1)*dp*tp - 1` as a dp x tp grid (a 1-D placement when dp or tp is 1). Inside a
stage, attention and MLP projections are column- then row-parallel over the tp axis and
everything else is broadcast; the batch is split over the dp axis. Blocks are cut into pp
contiguous groups; the embeddings sit on the first stage, the last LayerNorm and the loss on
the last one (the output layer reuses the token embedding there, see `GPT._logits`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..distributed.world import get_world
from ..framework.tensor import Tensor
from ..nn.graph import GraphModule
from ..parallel.creation import create_global
from ..parallel.placement import placement as Placement
from ..parallel.sbp import broadcast, split
from ..parallel.tensor_parallel import column_parallel, row_parallel
from ..parallel.to_global import module_to_global
from .gpt import GPT

__all__ = ["GPTParallelLayout", "check_gpt_parallel", "parallelize_gpt"]


@dataclass(frozen=True)
class GPTParallelLayout:
    """Where `parallelize_gpt` put a GPT: `stages[s]` is stage s's placement and
    `blocks[s]` the range of transformer blocks it runs."""

    dp: int
    tp: int
    pp: int
    stages: tuple[Placement, ...]
    blocks: tuple[range, ...]

    @property
    def data_sbp(self) -> tuple:
        """The layout of a batch on a stage: split over dp, broadcast over tp."""
        if self.dp > 1 and self.tp > 1:
            return (split(0), broadcast)
        return (split(0),) if self.dp > 1 else (broadcast,)

    def inputs(self, idx: Tensor, targets: Tensor) -> tuple[Tensor, Tensor]:
        """Global views of a batch every rank holds whole: the token ids on the first stage,
        the targets on the last (where the loss is), each split over dp."""
        return self.batch_on(idx, 0), self.batch_on(targets, self.pp - 1)

    def batch_on(self, t: Tensor, stage: int) -> Tensor:
        # NOTE: every rank drew the same batch (one seed), so no rank's values are sent.
        return create_global(lambda _: t, tuple(t.shape), self.stages[stage], self.data_sbp,
                             synchronize=False)  # fmt: skip

    def set_stages(self, model) -> None:
        """Assign the pipeline stages to `model`, a graph's view of the GPT (`self.model`
        in an `nn.Graph`'s `__init__`), so that each block's input moves to its stage's
        ranks. Nothing to do without pipeline parallelism."""
        if self.pp == 1:
            return
        h = model.transformer.h
        for stage, (where, blocks) in enumerate(zip(self.stages, self.blocks, strict=True)):
            for i in blocks:
                h[i].to(GraphModule).set_stage(stage, where)
        for module in (model.transformer.wte, model.transformer.wpe):
            module.to(GraphModule).set_stage(0, self.stages[0])
        model.transformer.ln_f.to(GraphModule).set_stage(self.pp - 1, self.stages[-1])


def check_gpt_parallel(config, dp: int, tp: int, pp: int, world_size: int | None = None) -> None:
    """Raise ValueError naming the sizes when a GPT of `config` (anything with `n_layer`,
    `n_head` and `n_embd`) cannot be laid out as dp x tp x pp (on `world_size` ranks, when
    given)."""
    for name, value in (("dp", dp), ("tp", tp), ("pp", pp)):
        if value < 1:
            raise ValueError(f"{name} must be at least 1, got {value}")
    if world_size is not None and dp * tp * pp != world_size:
        raise ValueError(
            f"dp x tp x pp = {dp} x {tp} x {pp} = {dp * tp * pp} ranks, but the world has "
            f"{world_size}: launch {dp * tp * pp} processes (python -m "
            f"tideflow.distributed.launch --nproc_per_node {dp * tp * pp} ...) or change them"
        )
    for name in ("n_head", "n_embd"):
        if getattr(config, name) % tp:
            raise ValueError(
                f"tensor parallelism splits the attention heads and the features: {name} "
                f"({getattr(config, name)}) must be divisible by tp ({tp})"
            )
    if config.n_layer < pp:
        raise ValueError(
            f"every pipeline stage needs a transformer block: n_layer ({config.n_layer}) must "
            f"be at least pp ({pp})"
        )


def parallelize_gpt(model: GPT, dp: int = 1, tp: int = 1, pp: int = 1,
                    device: str = "cpu") -> GPTParallelLayout:  # fmt: skip
    """Lay `model` out over the world's `dp * tp * pp` ranks, in place (parameters keep their
    identity: make the optimizer before or after). Returns the layout: the stage placements,
    `inputs(idx, targets)` to lay a batch out, and `set_stages(graph.model)` for the graph.

    >>> model = flow.models.GPT(flow.models.GPTConfig(vocab_size=11, block_size=8, n_layer=2,
    ...                                               n_head=2, n_embd=16))
    >>> layout = flow.models.parallelize_gpt(model)  # one rank: a graph's reference layout
    >>> layout.stages
    (tideflow.placement(type="cpu", ranks=[0]),)
    """
    check_gpt_parallel(model.config, dp, tp, pp, get_world().size)
    per_stage = dp * tp
    stages = []
    for s in range(pp):
        ranks = list(range(s * per_stage, (s + 1) * per_stage))
        grid = [ranks[r * tp : (r + 1) * tp] for r in range(dp)] if dp > 1 and tp > 1 else ranks
        stages.append(Placement(device, grid))
    n = model.config.n_layer
    blocks = tuple(range(s * n // pp, (s + 1) * n // pp) for s in range(pp))
    layout = GPTParallelLayout(dp, tp, pp, tuple(stages), blocks)

    t = model.transformer
    first, last = stages[0], stages[-1]
    whole = (broadcast,) * first.ndim
    for stage, where in enumerate(stages):
        for i in blocks[stage]:
            if tp > 1:
                _megatron_block(t.h[i], where, layout.data_sbp)
            _keep_or_broadcast(t.h[i], where)
    _keep_or_broadcast(t.wte, first)
    _keep_or_broadcast(t.wpe, first)
    _keep_or_broadcast(t.ln_f, last)
    if tp > 1 and pp == 1:
        # The output layer split by vocabulary: each rank computes its slice of the logits,
        # and the cross entropy reduces over the split (Megatron's parallel vocabulary). With
        # pipelines the tied weight moves to the last stage whole (`GPT._logits`).
        # NOTE: from a global tensor: a local one made global with a split would be taken
        # as this rank's shard.
        module_to_global(model.lm_head, first, (*whole[:-1], split(0)))
    if tp > 1:  # the embeddings' sum (partial over a vocabulary split) whole again
        t.drop.register_forward_hook(_laid_out_as(layout.data_sbp))
    return layout


def _megatron_block(block, where: Placement, residual_sbp: tuple) -> None:
    column_parallel(block.attn.c_attn, where)
    row_parallel(block.attn.c_proj, where)
    column_parallel(block.mlp.c_fc, where)
    row_parallel(block.mlp.c_proj, where)
    for branch in (block.attn, block.mlp):
        branch.register_forward_hook(_laid_out_as(residual_sbp))


def _laid_out_as(sbp: tuple):
    """A forward hook giving a module's global output the layout `sbp`. NOTE: a row-parallel
    output is partial; left to choose, the ops after it would reduce-scatter it along the
    batch and gather the next layer's weights instead of keeping the residual stream whole
    over the tensor-parallel axis (Megatron's all-reduce)."""

    def hook(module, args, out):
        return out.to_global(sbp=sbp) if out.is_global else out

    return hook


def _keep_or_broadcast(module, where: Placement) -> None:
    """The module's tensors on `where`: those laid out already keep their SBP, the others are
    broadcast."""
    whole = (broadcast,) * where.ndim
    module_to_global(module, where, lambda t: t.sbp if t.is_global else whole)
