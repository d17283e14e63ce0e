"""Fused optimizer updates, checked through the optimizers that use them: three steps of
tideflow.optim.X and torch.optim.X from the same parameter and gradients."""

from ..opinfo import OpInfo, Sample, make_array

_CONFIGS = {
    "SGD": [dict(lr=0.1), dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01),
            dict(lr=0.05, momentum=0.5, dampening=0.1, maximize=True)],
    "Adam": [dict(lr=0.01), dict(lr=0.01, amsgrad=True, weight_decay=0.1, maximize=True)],
    "AdamW": [dict(lr=0.01, betas=(0.8, 0.99), eps=1e-6)],
}  # fmt: skip


def _steps(lib, optim_cls, p, grads, kw):
    param = lib.nn.Parameter(p.detach().clone())
    opt = getattr(lib.optim, optim_cls)([param], **kw)
    for g in grads:
        param.grad = g.detach().clone()
        opt.step()
    return param.detach()


def _samples(optim_cls):
    def build(rng, dtype):
        return [
            Sample((make_array(rng, (3, 4), dtype), make_array(rng, (3, 4), dtype),
                    make_array(rng, (3, 4), dtype)), dict(kw))
            for kw in _CONFIGS[optim_cls]
        ]  # fmt: skip

    return build


def _record(optim_cls):
    import tideflow as flow

    return OpInfo(
        f"optim.{optim_cls}",
        _samples(optim_cls),
        op=lambda p, g1, g2, **kw: _steps(flow, optim_cls, p, (g1, g2, g1), kw),
        torch=lambda t, p, g1, g2, **kw: _steps(t, optim_cls, p, (g1, g2, g1), kw),
        grad=False,
    )


RECORDS = [_record(name) for name in _CONFIGS]
