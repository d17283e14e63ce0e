"""`GraphConfig`: the compilation options of an `nn.Graph`, with OneFlow's names."""

from __future__ import annotations

from ...framework import dtype as dtypes


class GraphConfig:
    """Options of one graph, set in its `__init__` (before the first call compiles it).

    Active now: `enable_amp` (with `Graph.set_grad_scaler` for loss scaling),
    `allow_fuse_cast_scale`, `set_gradient_accumulation_steps`, `set_outputs_buffer_size`
    (how many iterations' outputs each task may hold ahead: the runtime's register quota),
    `set_plan_cache_size` (how many compiled input signatures are kept), `enable_zero`
    (stages 1 and 2, for global parameters) and `enable_auto_parallel`. Accepted and
    recorded for the passes that will use them, as they do not change results:
    `allow_fuse_add_to_output`, `allow_fuse_model_update_ops`, `enable_compress_memory`,
    `enable_straighten_algorithm`, `enable_cudnn_conv_heuristic_search_algo`.

    >>> class Train(flow.nn.Graph):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.config.set_outputs_buffer_size(3)
    ...         self.config.allow_fuse_add_to_output(True)
    """

    def __init__(self) -> None:
        self.training = False  # a graph with an optimizer trains (set by add_optimizer)
        self.gradient_accumulation_steps = 1
        self.amp = False
        self.amp_dtype = dtypes.float16
        self.zero = False
        self.zero_options: dict = {}
        self.outputs_buffer_size = 2
        self.plan_cache_size = 8
        self.optimizations: dict[str, object] = {}
        self.auto_parallel_options: dict = {}

    # -- active ---------------------------------------------------------------------------
    def set_outputs_buffer_size(self, value: int = 2) -> None:
        """How many iterations ahead each task may run (its output register quota)."""
        self.outputs_buffer_size = _positive_int("set_outputs_buffer_size", value)

    def set_plan_cache_size(self, size: int) -> None:
        """How many compiled input signatures (shapes, dtypes) to keep; the least recently
        used plan is released beyond that. Not a OneFlow option: there, dynamic shapes need
        `with_dynamic_input_shape(size=...)`; here they are on by default."""
        self.plan_cache_size = _positive_int("set_plan_cache_size", size)

    def set_gradient_accumulation_steps(self, value: int) -> None:
        """OneFlow's gradient accumulation: one call takes a whole mini-batch, which the graph
        splits along dim 0 into `value` micro-batches; build runs on each, their gradients
        add up (divide the loss by `value` in build for their mean) and the optimizer
        updates once. Scalar outputs come back as a vector of `value` entries (one per
        micro-batch), others concatenated along dim 0. PyTorch instead accumulates across
        calls: `backward()` per micro-batch, `step()` every `value` of them."""
        self.gradient_accumulation_steps = _positive_int("set_gradient_accumulation_steps", value)

    def enable_amp(self, mode: bool = True, *, dtype=dtypes.float16) -> None:
        """Mixed precision in `dtype` (float16 or bfloat16): build is traced under
        `flow.autocast("cpu", dtype=dtype)`, so the graph computes what eager code in that
        region computes (low-precision matmuls and convolutions, float32 losses, float32
        master weights whose casts are nodes of the plan). Loss scaling comes with a grad
        scaler (`Graph.set_grad_scaler`)."""
        dtype = dtypes.to_dtype(dtype)
        if dtype not in (dtypes.float16, dtypes.bfloat16):
            raise ValueError(f"enable_amp: dtype must be float16 or bfloat16, got {dtype}")
        self.amp = bool(mode)
        self.amp_dtype = dtype

    def allow_fuse_cast_scale(self, mode: bool = True) -> None:
        """Run a cast and a multiplication by a scalar next to each other (AMP's gradient
        unscaling) as one node (`compiler.passes.fuse_cast_scale`); results are unchanged."""
        self.optimizations["fuse_cast_scale"] = bool(mode)

    # -- recorded, applied by later passes ---------------------------------------------------

    def enable_zero(self, mode: bool = True, *, stage: int = 1, shard_min_size: int = 1024,
                    shard_restore_level: int = 1) -> None:  # fmt: skip
        """ZeRO over the data-parallel axes of global parameters (see `nn/graph/zero.py`):
        stage 1 shards optimizer state and updates (2: with the gradient reduce-scattered,
        which stage 1 gets too); stage 3 shards the parameters too: from the first call on
        each is a global tensor split like its state (same logical value, 1/n of it on each
        rank), gathered inside the step right before it is used, in forward and again in
        backward. Parameters under `shard_min_size` elements stay whole, with whole state.
        `shard_restore_level` is recorded for OneFlow compatibility and not used."""
        if stage not in (1, 2, 3):
            raise ValueError(f"enable_zero: stage must be 1, 2 or 3, got {stage!r}")
        self.zero = bool(mode)
        self.zero_options = dict(
            stage=stage, shard_min_size=shard_min_size, shard_restore_level=shard_restore_level
        )

    def allow_fuse_add_to_output(self, mode: bool = True) -> None:
        self.optimizations["fuse_add_to_output"] = bool(mode)

    def allow_fuse_model_update_ops(self, mode: bool = True) -> None:
        self.optimizations["fuse_model_update_ops"] = bool(mode)

    def enable_auto_parallel(
        self, mode: bool = True, *, memory_limit: float | None = None, cluster=None
    ) -> None:
        """Choose the layouts (SBP) of build's ops to minimise the step time the cost model
        predicts, within `memory_limit` bytes per rank (None: no limit), instead of each
        op's least-boxing layout (see docs/parallel_graphs.md). The layouts of inputs,
        parameters and `to_global` calls in build stay the user's. `cluster`: a
        `parallel.cost.Cluster` to price with (default: this machine's calibrated `local`
        profile). `memory_limit` and `cluster` are tideflow's, not OneFlow's."""
        self.optimizations["auto_parallel"] = bool(mode)
        self.auto_parallel_options = dict(memory_limit=memory_limit, cluster=cluster)

    def enable_compress_memory(self, mode: bool = True) -> None:
        self.optimizations["compress_memory"] = bool(mode)

    def enable_straighten_algorithm(self, mode: str = "MemoryFirst") -> None:
        self.optimizations["straighten_algorithm"] = mode

    def enable_cudnn_conv_heuristic_search_algo(self, mode: bool = True) -> None:
        self.optimizations["cudnn_conv_heuristic_search_algo"] = bool(mode)

    def __repr__(self) -> str:
        fields = [
            f"training={self.training}",
            f"gradient_accumulation_steps={self.gradient_accumulation_steps}",
            f"amp={self.amp}",
            f"zero={self.zero}",
            f"outputs_buffer_size={self.outputs_buffer_size}",
            f"plan_cache_size={self.plan_cache_size}",
            *(f"{k}={v}" for k, v in self.optimizations.items()),
        ]
        return f"GraphConfig({', '.join(fields)})"


def _positive_int(what: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{what}: expected a positive integer, got {value!r}")
    return value
