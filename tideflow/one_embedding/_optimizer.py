"""`flow.one_embedding.Optimizer`: a dense optimizer that also trains embedding rows.

The wrapped optimizer updates the dense parameters as it always does. For each embedding,
`step` applies the same optimizer's rule to the rows the embedding's lookups read since the
last step (their gradients, handed over by the lookups' grad rule, summed per key), with the
hyperparameters of the parameter group holding the embedding's shadow parameter (the first
group otherwise): learning-rate schedulers drive the rows too.

In an `nn.Graph` the embedding update is an update node like the dense ones: the graph
captures `step` (tideflow.compiler.trace.capture_updates) with the gradients the trace
handed over, and feeds its hyperparameters on every call.
"""

from __future__ import annotations

from ..compiler.lazy import is_lazy
from ..framework.dispatch import dispatch
from ..framework.errors import TideflowError
from ..framework.grad_mode import enable_grad, no_grad
from ..optim.optimizer import Optimizer as DenseOptimizer
from ._embedding import UPDATE, Embedding
from ._rules import rule_for
from ._sharded import ShardedTable


class Optimizer(DenseOptimizer):
    """`optimizer` (SGD, Adam, AdamW, Adagrad or `flow.one_embedding.Ftrl`) for the dense
    parameters, and its rule, per row, for `embeddings`. Per-row state lives in the store
    next to each row; only rows looked up since the last step are read and written.

    >>> store = flow.one_embedding.make_cached_host_mem_store_options(8, None, 1000)
    >>> emb = flow.one_embedding.MultiTableEmbedding("doc", 4, flow.float32, flow.int64,
    ...                                              None, store)
    >>> head = flow.nn.Linear(4, 1)
    >>> opt = flow.one_embedding.Optimizer(
    ...     flow.optim.Adam(head.parameters(), lr=0.01), embeddings=[emb])
    >>> loss = head(emb(flow.tensor([[1], [2], [1]])).squeeze(1)).square().mean()
    >>> loss.backward()
    >>> opt.step()
    >>> opt.zero_grad()
    """

    def __init__(self, optimizer: DenseOptimizer, embeddings) -> None:
        if not isinstance(optimizer, DenseOptimizer):
            raise TideflowError(
                "one_embedding.Optimizer: optimizer must be a tideflow optimizer, got "
                f"{type(optimizer).__name__}"
            )
        embeddings = list(embeddings)
        for e in embeddings:
            if not isinstance(e, Embedding):
                raise TideflowError(
                    "one_embedding.Optimizer: embeddings must be MultiTableEmbedding or "
                    f"MultiTableMultiColumnEmbedding modules, got {type(e).__name__}"
                )
        if len({id(e) for e in embeddings}) != len(embeddings):
            raise TideflowError("one_embedding.Optimizer: an embedding is listed twice")
        self.optimizer = optimizer
        self.embeddings = embeddings
        self._rule = rule_for(optimizer)
        self._steps = [0] * len(embeddings)
        for e in embeddings:
            e._table.attach(self._rule, self._group_of(e))

    # NOTE: the wrapped optimizer's groups and state are this optimizer's: schedulers, graphs
    # and state dicts see one optimizer.
    @property
    def param_groups(self) -> list[dict]:
        return self.optimizer.param_groups

    @property
    def state(self):
        return self.optimizer.state

    @property
    def defaults(self) -> dict:
        return self.optimizer.defaults

    def _group_of(self, embedding: Embedding) -> dict:
        for group in self.param_groups:
            if any(p is embedding.shadow for p in group["params"]):
                return group
        return self.param_groups[0]

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.optimizer.zero_grad(set_to_none)
        for e in self.embeddings:
            e.shadow.grad = None
            _take_gradients(e)

    @no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        for i, e in enumerate(self.embeddings):
            gradients = _take_gradients(e)
            e.shadow.grad = None  # the rows' update is the shadow's: no dense step for it
            # NOTE: a sharded embedding updates on every rank, with gradients or not: each
            # rank's update serves the keys it owns (collectives)
            if not gradients and not isinstance(e._table, ShardedTable):
                continue
            self._steps[i] += 1
            hyper = self._rule.hyper(self._group_of(e), self._steps[i])
            parts = [t for entry in gradients for t in entry]
            dispatch(UPDATE, (e.shadow, *parts), {"table": e._table, "rule_hyper": hyper})
        self.optimizer.step()
        return loss

    def state_dict(self) -> dict:
        """The wrapped optimizer's state dict, plus each embedding's step count (the rows'
        state is in their store: see `MultiTableEmbedding.save_snapshot`)."""
        return {**self.optimizer.state_dict(), "embedding_steps": list(self._steps)}

    def load_state_dict(self, state_dict: dict) -> None:
        state_dict = dict(state_dict)
        steps = state_dict.pop("embedding_steps", None)
        if steps is None or len(steps) != len(self.embeddings):
            raise TideflowError(
                f"one_embedding.Optimizer: the state dict has step counts for "
                f"{'no' if steps is None else len(steps)} embeddings, this optimizer trains "
                f"{len(self.embeddings)}"
            )
        self.optimizer.load_state_dict(state_dict)
        self._steps = [int(s) for s in steps]

    def __repr__(self) -> str:
        names = ", ".join(repr(e.name) for e in self.embeddings)
        return f"one_embedding.Optimizer(embeddings=[{names}], {self.optimizer!r})"


def _take_gradients(embedding: Embedding) -> list[tuple]:
    """The gradients the embedding's lookups handed over since the last step. Eager ones
    are taken (the next step must not apply them again); those of a graph's trace stay, as
    every call of the compiled graph recaptures its step with them."""
    pending = embedding._table.gradients
    eager = [g for g in pending if not is_lazy(g[2])]
    if eager:
        pending[:] = [g for g in pending if is_lazy(g[2])]
        return eager
    return list(pending)
