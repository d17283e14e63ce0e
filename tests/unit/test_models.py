"""Reference models against PyTorch twins written here (torchvision / nanoGPT / Hugging Face
definitions, since those packages are not installed): same weights in, same outputs and
gradients out. Also their errors, the character data and the GPT training loop."""

import math
import types

import numpy as np
import pytest

import tideflow as flow
from tideflow import models
from tideflow.models.char_gpt import (
    CharGPTTrainConfig,
    load_char_gpt,
    train_char_gpt,
    warmup_cosine_schedule,
)


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


@pytest.fixture(scope="module")
def ref(torch):
    return _reference_models(torch)


# -- PyTorch twins ------------------------------------------------------------------------------
def _reference_models(torch):
    nn, F = torch.nn, torch.nn.functional

    class BasicBlock(nn.Module):  # torchvision.models.resnet.BasicBlock
        expansion = 1

        def __init__(self, inplanes, planes, stride=1, downsample=None):
            super().__init__()
            self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(planes)
            self.relu = nn.ReLU(inplace=True)
            self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(planes)
            self.downsample = downsample

        def forward(self, x):
            identity = x if self.downsample is None else self.downsample(x)
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            return self.relu(out + identity)

    class Bottleneck(nn.Module):  # torchvision.models.resnet.Bottleneck
        expansion = 4

        def __init__(self, inplanes, planes, stride=1, downsample=None):
            super().__init__()
            self.conv1 = nn.Conv2d(inplanes, planes, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(planes)
            self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(planes)
            self.conv3 = nn.Conv2d(planes, planes * 4, 1, bias=False)
            self.bn3 = nn.BatchNorm2d(planes * 4)
            self.relu = nn.ReLU(inplace=True)
            self.downsample = downsample

        def forward(self, x):
            identity = x if self.downsample is None else self.downsample(x)
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.relu(self.bn2(self.conv2(out)))
            out = self.bn3(self.conv3(out))
            return self.relu(out + identity)

    class ResNet(nn.Module):  # torchvision.models.resnet.ResNet
        def __init__(self, block, layers, num_classes):
            super().__init__()
            self.inplanes = 64
            self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
            self.bn1 = nn.BatchNorm2d(64)
            self.relu = nn.ReLU(inplace=True)
            self.maxpool = nn.MaxPool2d(3, 2, 1)
            self.layer1 = self._make_layer(block, 64, layers[0], 1)
            self.layer2 = self._make_layer(block, 128, layers[1], 2)
            self.layer3 = self._make_layer(block, 256, layers[2], 2)
            self.layer4 = self._make_layer(block, 512, layers[3], 2)
            self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
            self.fc = nn.Linear(512 * block.expansion, num_classes)

        def _make_layer(self, block, planes, blocks, stride):
            downsample = None
            if stride != 1 or self.inplanes != planes * block.expansion:
                downsample = nn.Sequential(
                    nn.Conv2d(self.inplanes, planes * block.expansion, 1, stride, bias=False),
                    nn.BatchNorm2d(planes * block.expansion),
                )
            layers = [block(self.inplanes, planes, stride, downsample)]
            self.inplanes = planes * block.expansion
            layers += [block(self.inplanes, planes) for _ in range(1, blocks)]
            return nn.Sequential(*layers)

        def forward(self, x):
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
            return self.fc(torch.flatten(self.avgpool(x), 1))

    class LeNet5(nn.Module):
        def __init__(self, num_classes, act, pool):
            super().__init__()
            self.features = nn.Sequential(
                nn.Conv2d(1, 6, 5, padding=2), act(), pool(2), nn.Conv2d(6, 16, 5), act(), pool(2)
            )
            self.classifier = nn.Sequential(
                nn.Linear(400, 120), act(), nn.Linear(120, 84), act(), nn.Linear(84, num_classes)
            )

        def forward(self, x):
            return self.classifier(torch.flatten(self.features(x), 1))

    class CausalSelfAttention(nn.Module):  # nanoGPT model.py
        def __init__(self, c):
            super().__init__()
            self.c_attn = nn.Linear(c.n_embd, 3 * c.n_embd, bias=c.bias)
            self.c_proj = nn.Linear(c.n_embd, c.n_embd, bias=c.bias)
            self.n_head, self.n_embd = c.n_head, c.n_embd

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
            q, k, v = (
                z.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for z in (q, k, v)
            )
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))

    class GPTMLP(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.c_fc = nn.Linear(c.n_embd, 4 * c.n_embd, bias=c.bias)
            self.gelu = nn.GELU()
            self.c_proj = nn.Linear(4 * c.n_embd, c.n_embd, bias=c.bias)

        def forward(self, x):
            return self.c_proj(self.gelu(self.c_fc(x)))

    class GPTBlock(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.ln_1 = nn.LayerNorm(c.n_embd, bias=c.bias)
            self.attn = CausalSelfAttention(c)
            self.ln_2 = nn.LayerNorm(c.n_embd, bias=c.bias)
            self.mlp = GPTMLP(c)

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.transformer = nn.ModuleDict(
                dict(
                    wte=nn.Embedding(c.vocab_size, c.n_embd),
                    wpe=nn.Embedding(c.block_size, c.n_embd),
                    h=nn.ModuleList(GPTBlock(c) for _ in range(c.n_layer)),
                    ln_f=nn.LayerNorm(c.n_embd, bias=c.bias),
                )
            )
            self.lm_head = nn.Linear(c.n_embd, c.vocab_size, bias=False)
            self.transformer.wte.weight = self.lm_head.weight

        def forward(self, idx, targets):
            pos = torch.arange(idx.shape[1])
            x = self.transformer.wte(idx) + self.transformer.wpe(pos)
            for block in self.transformer.h:
                x = block(x)
            logits = self.lm_head(self.transformer.ln_f(x))
            loss = F.cross_entropy(
                logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1
            )
            return logits, loss

    class BertLayer(nn.Module):  # transformers BertLayer, flattened
        def __init__(self, c):
            super().__init__()
            h = c.hidden_size
            self.attention = nn.ModuleDict(
                dict(
                    self=nn.ModuleDict(
                        dict(query=nn.Linear(h, h), key=nn.Linear(h, h), value=nn.Linear(h, h))
                    ),
                    output=nn.ModuleDict(
                        dict(dense=nn.Linear(h, h), LayerNorm=nn.LayerNorm(h, eps=c.layer_norm_eps))
                    ),
                )
            )
            self.intermediate = nn.ModuleDict(dict(dense=nn.Linear(h, c.intermediate_size)))
            self.output = nn.ModuleDict(
                dict(
                    dense=nn.Linear(c.intermediate_size, h),
                    LayerNorm=nn.LayerNorm(h, eps=c.layer_norm_eps),
                )
            )
            self.heads = c.num_attention_heads

        def forward(self, x, additive_mask):
            B, T, H = x.shape
            a = self.attention["self"]
            q, k, v = (
                a[n](x).view(B, T, self.heads, -1).transpose(1, 2)
                for n in ("query", "key", "value")
            )
            scores = q @ k.transpose(-1, -2) / math.sqrt(H // self.heads) + additive_mask
            ctx = (scores.softmax(-1) @ v).transpose(1, 2).reshape(B, T, H)
            out = self.attention["output"]
            x = out["LayerNorm"](out["dense"](ctx) + x)
            y = self.output["dense"](F.gelu(self.intermediate["dense"](x)))
            return self.output["LayerNorm"](y + x)

    class Bert(nn.Module):
        def __init__(self, c):
            super().__init__()
            h = c.hidden_size
            self.embeddings = nn.ModuleDict(
                dict(
                    word_embeddings=nn.Embedding(c.vocab_size, h, padding_idx=c.pad_token_id),
                    position_embeddings=nn.Embedding(c.max_position_embeddings, h),
                    token_type_embeddings=nn.Embedding(c.type_vocab_size, h),
                    LayerNorm=nn.LayerNorm(h, eps=c.layer_norm_eps),
                )
            )
            self.encoder = nn.ModuleDict(
                dict(layer=nn.ModuleList(BertLayer(c) for _ in range(c.num_hidden_layers)))
            )
            self.pooler = nn.ModuleDict(dict(dense=nn.Linear(h, h)))

        def forward(self, ids, mask, token_types):
            e = self.embeddings
            pos = torch.arange(ids.shape[1])
            x = (
                e["word_embeddings"](ids)
                + e["position_embeddings"](pos)
                + e["token_type_embeddings"](token_types)
            )
            x = e["LayerNorm"](x)
            additive = (1.0 - mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
            for layer in self.encoder["layer"]:
                x = layer(x, additive)
            return x, torch.tanh(self.pooler["dense"](x[:, 0]))

    return types.SimpleNamespace(**locals())


# -- helpers ------------------------------------------------------------------------------------
def _copy_weights(torch, ours, theirs) -> None:
    """Load our state dict into the torch twin: the keys must match one for one."""
    state = {k: torch.from_numpy(v.numpy().copy()) for k, v in ours.state_dict().items()}
    assert set(state) == set(theirs.state_dict()), "state-dict keys differ from the twin's"
    theirs.load_state_dict(state)


def _assert_close(ours, theirs, rtol=1e-4, atol=1e-5, what="") -> None:
    expected = theirs.detach().numpy()
    scale = max(1.0, float(np.abs(expected).max()))
    np.testing.assert_allclose(
        ours.detach().numpy(), expected, rtol=rtol, atol=atol * scale, err_msg=what
    )


def _assert_grads_close(ours, theirs, rtol=1e-4, atol=1e-5) -> None:
    our_params = dict(ours.named_parameters())
    their_params = dict(theirs.named_parameters())
    assert set(our_params) == set(their_params)
    for name, p in our_params.items():
        assert p.grad is not None, f"no gradient for {name}"
        _assert_close(p.grad, their_params[name].grad, rtol, atol, what=name)


def _images(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _compare_classifier(torch, ours, theirs, x, rtol=1e-4, atol=1e-5):
    """Forward a batch, backprop a cross-entropy loss, compare logits and every gradient.
    A float64 `x` compares the models in float64."""
    if x.dtype == np.float64:
        ours.double()
        theirs.double()
    _copy_weights(torch, ours, theirs)
    labels = np.arange(x.shape[0]) % 3
    out = ours(flow.tensor(x))
    flow.nn.functional.cross_entropy(out, flow.tensor(labels)).backward()
    ref = theirs(torch.from_numpy(x))
    torch.nn.functional.cross_entropy(ref, torch.from_numpy(labels)).backward()
    _assert_close(out, ref, rtol, atol, "logits")
    _assert_grads_close(ours, theirs, rtol, atol)


# -- MLP and LeNet-5 ----------------------------------------------------------------------------
@pytest.mark.torch
def test_mlp_matches_torch_sequential(torch):
    flow.manual_seed(0)
    mlp = models.MLP([20, 32, 16, 5], activation=flow.nn.GELU)
    twin = torch.nn.Sequential(
        torch.nn.Linear(20, 32), torch.nn.GELU(), torch.nn.Linear(32, 16), torch.nn.GELU(),
        torch.nn.Linear(16, 5),
    )  # fmt: skip
    _compare_classifier(torch, mlp, twin, _images((8, 20)))


def test_mlp_layers_and_dropout():
    mlp = models.MLP([4, 8, 8, 2], dropout=0.5)
    kinds = [type(m).__name__ for m in mlp]
    assert kinds == ["Linear", "ReLU", "Dropout", "Linear", "ReLU", "Dropout", "Linear"]
    assert mlp(flow.randn(3, 4)).shape == (3, 2)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"sizes": [4]}, r"sizes needs an input and an output size, got \[4\]"),
        ({"sizes": [4, 0, 2]}, r"sizes must be positive integers, got \[4, 0, 2\]"),
        ({"sizes": [4, 2], "dropout": 1.0}, r"dropout must be in \[0, 1\), got 1.0"),
    ],
)
def test_mlp_rejects_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        models.MLP(**kwargs)


@pytest.mark.torch
@pytest.mark.parametrize("variant", ["original", "modern"])
def test_lenet5_matches_torch(torch, ref, variant):
    flow.manual_seed(1)
    if variant == "original":
        ours, twin = models.LeNet5(), ref.LeNet5(10, torch.nn.Tanh, torch.nn.AvgPool2d)
    else:
        ours = models.LeNet5(activation=flow.nn.ReLU, pool=flow.nn.MaxPool2d)
        twin = ref.LeNet5(10, torch.nn.ReLU, torch.nn.MaxPool2d)
    _compare_classifier(torch, ours, twin, _images((4, 1, 28, 28)))


# -- ResNet -------------------------------------------------------------------------------------
@pytest.mark.torch
def test_resnet18_matches_torchvision_in_train_and_eval_mode(torch, ref):
    flow.manual_seed(2)
    ours = models.resnet18(num_classes=5)
    twin = ref.ResNet(ref.BasicBlock, [2, 2, 2, 2], 5)
    # NOTE: float64: with 2 images, layer4's BatchNorm normalizes 2 values per channel, which
    # amplifies float32 rounding differences far beyond any useful tolerance.
    x = _images((2, 3, 32, 32)).astype(np.float64)
    _compare_classifier(torch, ours, twin, x, rtol=1e-9, atol=1e-10)
    # Training mode updated the BatchNorm running statistics the same way.
    _assert_close(ours.bn1.running_var, twin.bn1.running_var, what="running_var")
    ours.eval()
    twin.eval()
    with flow.no_grad(), torch.no_grad():
        _assert_close(ours(flow.tensor(x)), twin(torch.from_numpy(x)), 1e-9, 1e-10, "eval")


@pytest.mark.slow
@pytest.mark.torch
def test_resnet50_matches_torchvision(torch, ref):
    flow.manual_seed(3)
    ours = models.resnet50(num_classes=4)
    twin = ref.ResNet(ref.Bottleneck, [3, 4, 6, 3], 4)
    # 64x64: layer4's BatchNorms see 2x2 positions per image (see the ResNet-18 test).
    x = _images((2, 3, 64, 64)).astype(np.float64)
    _compare_classifier(torch, ours, twin, x, rtol=1e-9, atol=1e-10)


def test_resnet_initialization_follows_torchvision():
    flow.manual_seed(4)
    net = models.resnet18(num_classes=3, zero_init_residual=True)
    assert all(
        float(b.bn2.weight.abs().sum()) == 0
        for b in net.modules()
        if isinstance(b, models.BasicBlock)
    )
    assert float(net.bn1.weight.sum()) == 64 and float(net.bn1.bias.abs().sum()) == 0
    # kaiming_normal_(mode="fan_out", nonlinearity="relu"): std sqrt(2 / (64 * 7 * 7)).
    assert net.conv1.weight.std().item() == pytest.approx(math.sqrt(2 / (64 * 49)), rel=0.05)


def test_resnet50_uses_bottlenecks_with_expansion_4():
    net = models.resnet50(num_classes=7)
    assert isinstance(net.layer1[0], models.Bottleneck)
    assert net.layer4[0].conv3.out_channels == 2048 and net.fc.in_features == 2048
    assert sum(p.numel() for p in net.parameters()) == 23_522_375  # torchvision: same count


def test_resnet_rejects_bad_arguments():
    with pytest.raises(ValueError, match=r"layers needs 4 block counts, got \[2, 2\]"):
        models.ResNet(models.BasicBlock, [2, 2])
    with pytest.raises(ValueError, match="BasicBlock only supports groups=1 and base_width=64"):
        models.ResNet(models.BasicBlock, [1, 1, 1, 1], groups=2)
    with pytest.raises(ValueError, match="3-element tuple, got"):
        models.resnet50(replace_stride_with_dilation=[True])


def test_resnext_and_dilation_options_build_working_nets():
    net = models.resnet50(num_classes=2, groups=4, width_per_group=8,
                          replace_stride_with_dilation=[False, True, True])  # fmt: skip
    assert net.layer1[0].conv2.groups == 4 and net.layer1[0].conv2.out_channels == 32
    # As torchvision: a stage's first block keeps the previous stage's dilation.
    assert net.layer4[0].conv2.dilation == (2, 2) and net.layer4[1].conv2.dilation == (4, 4)
    assert net(flow.randn(1, 3, 32, 32)).shape == (1, 2)


# -- GPT ----------------------------------------------------------------------------------------
def _small_gpt_config(**overrides):
    config = dict(vocab_size=37, block_size=12, n_layer=2, n_head=4, n_embd=32)
    return models.GPTConfig(**{**config, **overrides})


@pytest.mark.torch
@pytest.mark.parametrize("bias", [True, False])
def test_gpt_matches_nanogpt(torch, ref, bias):
    flow.manual_seed(5)
    config = _small_gpt_config(bias=bias)
    ours, twin = models.GPT(config), ref.GPT(config)
    _copy_weights(torch, ours, twin)
    rng = np.random.default_rng(0)
    idx = rng.integers(0, config.vocab_size, (3, 10))
    targets = rng.integers(0, config.vocab_size, (3, 10))
    targets[0, :4] = -1  # ignored positions
    logits, loss = ours(flow.tensor(idx), flow.tensor(targets))
    loss.backward()
    ref_logits, ref_loss = twin(torch.from_numpy(idx), torch.from_numpy(targets))
    ref_loss.backward()
    _assert_close(logits, ref_logits, what="logits")
    _assert_close(loss, ref_loss, what="loss")
    _assert_grads_close(ours, twin)


def test_gpt_ties_the_output_head_to_the_token_embedding():
    model = models.GPT(_small_gpt_config())
    assert model.lm_head.weight is model.transformer.wte.weight
    names = [n for n, _ in model.named_parameters()]
    assert "lm_head.weight" not in names and "transformer.wte.weight" in names
    # Position embeddings are left out of the count by default, as nanoGPT does.
    everything = sum(p.numel() for p in model.parameters())
    assert model.num_parameters(non_embedding=False) == everything
    assert model.num_parameters() == everything - 12 * 32


def test_gpt_initialization_scales_residual_projections():
    flow.manual_seed(6)
    model = models.GPT(_small_gpt_config(n_layer=8, n_embd=128, n_head=4, vocab_size=500))
    std = 0.02 / math.sqrt(2 * 8)
    assert model.transformer.h[0].attn.c_proj.weight.std().item() == pytest.approx(std, rel=0.05)
    assert model.transformer.h[0].mlp.c_fc.weight.std().item() == pytest.approx(0.02, rel=0.05)
    assert float(model.transformer.h[0].mlp.c_fc.bias.abs().sum()) == 0


def test_gpt_parameter_groups_decay_matrices_only():
    model = models.GPT(_small_gpt_config())
    decay, no_decay = model.parameter_groups(0.1)
    assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0
    assert all(p.ndim == 2 for p in decay["params"])
    assert all(p.ndim == 1 for p in no_decay["params"])
    assert len(decay["params"]) + len(no_decay["params"]) == len(list(model.parameters()))


def test_gpt_is_causal():
    model = models.GPT(_small_gpt_config()).eval()
    idx = flow.randint(0, 37, (1, 8))
    changed = idx.clone()
    changed[0, 5] = (idx[0, 5] + 1) % 37
    with flow.no_grad():
        a, _ = model(idx)
        b, _ = model(changed)
    np.testing.assert_array_equal(a[0, :5].numpy(), b[0, :5].numpy())
    assert not np.allclose(a[0, 5:].numpy(), b[0, 5:].numpy())


@pytest.mark.torch
def test_gpt_greedy_generation_matches_torch_argmax_decoding(torch, ref):
    flow.manual_seed(7)
    config = _small_gpt_config(block_size=6)
    ours, twin = models.GPT(config).eval(), ref.GPT(config).eval()
    _copy_weights(torch, ours, twin)
    out = ours.generate(flow.tensor([[1, 2, 3]]), 8, top_k=1)  # top_k=1: always the argmax
    expected = torch.tensor([[1, 2, 3]])
    with torch.no_grad():
        for _ in range(8):
            context = expected[:, -config.block_size :]  # the context window slides
            logits, _ = twin(context, torch.zeros_like(context))
            expected = torch.cat([expected, logits[:, -1].argmax(-1, keepdim=True)], 1)
    np.testing.assert_array_equal(out.numpy(), expected.numpy())


def test_gpt_sampling_is_reproducible_and_respects_top_k():
    model = models.GPT(_small_gpt_config()).eval()
    prompt = flow.zeros(2, 1, dtype=flow.long)

    def sample(**kwargs):
        return model.generate(prompt, 20, generator=flow.Generator().manual_seed(0), **kwargs)

    np.testing.assert_array_equal(sample().numpy(), sample().numpy())
    with flow.no_grad():
        logits, _ = model(prompt)
    top3 = set(np.argsort(logits[0, -1].numpy())[-3:].tolist())
    first = sample(top_k=3, temperature=2.0)[:, 1]
    assert set(first.tolist()) <= top3


def test_gpt_errors_name_the_offending_values():
    model = models.GPT(_small_gpt_config())
    with pytest.raises(flow.ShapeError, match="sequence of length 13, block_size is only 12"):
        model(flow.zeros(1, 13, dtype=flow.long))
    with pytest.raises(ValueError, match="temperature must be positive, got 0"):
        model.generate(flow.zeros(1, 1, dtype=flow.long), 1, temperature=0)
    with pytest.raises(ValueError, match="top_k must be at least 1, got 0"):
        model.generate(flow.zeros(1, 1, dtype=flow.long), 1, top_k=0)
    with pytest.raises(ValueError, match=r"n_embd \(30\) must be divisible by n_head \(4\)"):
        models.GPTConfig(n_embd=30, n_head=4)
    with pytest.raises(ValueError, match="n_layer must be positive, got 0"):
        models.GPTConfig(n_layer=0)


def test_gpt_dropout_is_active_only_in_training():
    model = models.GPT(_small_gpt_config(dropout=0.5))
    idx = flow.randint(0, 37, (2, 8))
    with flow.no_grad():
        assert not np.allclose(model(idx)[0].numpy(), model(idx)[0].numpy())
        model.eval()
        np.testing.assert_array_equal(model(idx)[0].numpy(), model(idx)[0].numpy())


# -- BERT ---------------------------------------------------------------------------------------
def _small_bert_config():
    return models.BertConfig(
        vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, max_position_embeddings=16,
    )  # fmt: skip


@pytest.mark.torch
def test_bert_matches_hugging_face_layout_in_torch(torch, ref):
    flow.manual_seed(8)
    config = _small_bert_config()
    ours, twin = models.BertModel(config).eval(), ref.Bert(config)
    _copy_weights(torch, ours, twin)
    rng = np.random.default_rng(1)
    ids = rng.integers(0, 50, (2, 9))
    types_ = rng.integers(0, 2, (2, 9))
    mask = np.ones((2, 9), dtype=np.int64)
    mask[1, 6:] = 0  # padding in the second sequence
    out = ours(flow.tensor(ids), flow.tensor(mask), flow.tensor(types_))
    (out.last_hidden_state.sum() + out.pooler_output.pow(2).sum()).backward()
    hidden, pooled = twin(*(torch.from_numpy(a) for a in (ids, mask, types_)))
    (hidden.sum() + pooled.pow(2).sum()).backward()
    _assert_close(out.last_hidden_state, hidden, what="hidden")
    _assert_close(out.pooler_output, pooled, what="pooled")
    _assert_grads_close(ours, twin)


def test_bert_padding_does_not_change_the_real_tokens():
    model = models.BertModel(_small_bert_config()).eval()
    ids = flow.randint(1, 50, (1, 5))
    padded = flow.cat([ids, flow.zeros(1, 3, dtype=flow.long)], 1)
    mask = flow.tensor([[1, 1, 1, 1, 1, 0, 0, 0]])
    with flow.no_grad():
        short = model(ids).last_hidden_state
        long = model(padded, attention_mask=mask).last_hidden_state
    np.testing.assert_allclose(long[:, :5].numpy(), short.numpy(), rtol=1e-5, atol=1e-5)


def test_bert_masked_lm_ties_decoder_and_ignores_minus_100():
    flow.manual_seed(9)
    model = models.BertForMaskedLM(_small_bert_config())
    assert model.cls.predictions.decoder.weight is model.bert.embeddings.word_embeddings.weight
    assert model.bert.pooler is None
    assert "cls.predictions.transform.LayerNorm.weight" in model.state_dict()
    ids = flow.randint(1, 50, (2, 6))
    labels = flow.full((2, 6), -100, dtype=flow.long)
    labels[0, 2] = 7
    logits, loss = model(ids, labels=labels)
    expected = flow.nn.functional.cross_entropy(logits[0, 2:3], flow.tensor([7]))
    assert loss.item() == pytest.approx(expected.item(), rel=1e-6)
    loss.backward()
    assert model.bert.embeddings.word_embeddings.weight.grad is not None


def test_bert_initialization_zeroes_the_padding_row():
    model = models.BertModel(_small_bert_config())
    assert float(model.embeddings.word_embeddings.weight[0].abs().sum()) == 0
    assert model.embeddings.position_embeddings.weight.std().item() == pytest.approx(0.02, rel=0.1)


def test_bert_errors_name_the_offending_values():
    model = models.BertModel(_small_bert_config())
    with pytest.raises(flow.ShapeError, match="length 17, max_position_embeddings is only 16"):
        model(flow.zeros(1, 17, dtype=flow.long))
    with pytest.raises(flow.ShapeError, match=r"shape of input_ids \[1, 4\], got \[1, 3\]"):
        model(flow.zeros(1, 4, dtype=flow.long), attention_mask=flow.ones(1, 3))
    with pytest.raises(ValueError, match=r"hidden_size \(30\) must be divisible by"):
        models.BertConfig(hidden_size=30)
    with pytest.raises(ValueError, match=r"hidden_act must be one of \[.*\], got 'swish'"):
        models.BertConfig(hidden_act="swish")


# -- character data -----------------------------------------------------------------------------
def test_char_tokenizer_caps_the_vocabulary_by_frequency():
    tok = models.CharTokenizer.from_text("aaaabbbccd", max_vocab=3)
    assert tok.chars == "ab" and tok.vocab_size == 3
    assert tok.encode("abcd").tolist() == [1, 2, 0, 0]
    assert tok.decode([1, 0, 2]) == "a\ufffdb"
    full = models.CharTokenizer.from_text("héllo wörld\n")
    assert full.decode(full.encode("wörld héllo\n")) == "wörld héllo\n"


def test_char_tokenizer_errors():
    with pytest.raises(ValueError, match="chars must be distinct, got 'aba'"):
        models.CharTokenizer("aba")
    with pytest.raises(ValueError, match="max_vocab must be at least 2, got 1"):
        models.CharTokenizer.from_text("abc", max_vocab=1)
    with pytest.raises(ValueError, match=r"ids must lie in \[0, 3\), got values from 0 to 3"):
        models.CharTokenizer("ab").decode([0, 3])


def test_pydoc_corpus_is_english_text():
    text = models.pydoc_text()
    assert len(text) > 100_000 and "the" in text and "def " in text


def test_random_blocks_are_seeded_shifted_windows():
    data = flow.arange(1000) * 3
    x, y = models.random_blocks(data, 16, 10, flow.Generator().manual_seed(0))
    x2, _ = models.random_blocks(data, 16, 10, flow.Generator().manual_seed(0))
    assert x.shape == (16, 10) and x.dtype == flow.int64
    np.testing.assert_array_equal(x.numpy(), x2.numpy())
    np.testing.assert_array_equal((x + 3).numpy(), y.numpy())  # next-token targets
    np.testing.assert_array_equal(np.diff(x.numpy(), axis=1), 3)  # contiguous windows
    with pytest.raises(ValueError, match="need more than block_size=10 tokens, got 10"):
        models.random_blocks(flow.arange(10), 2, 10)


def test_train_val_split_and_unigram_entropy():
    train, val = models.train_val_split(flow.arange(100), 0.1)
    assert train.tolist() == list(range(90)) and val.tolist() == list(range(90, 100))
    with pytest.raises(ValueError, match=r"val_fraction must be in \(0, 1\), got 1.5"):
        models.train_val_split(flow.arange(10), 1.5)
    ids = flow.tensor([0, 0, 1, 2])  # p = 1/2, 1/4, 1/4
    expected = -(0.5 * math.log(0.5) + 2 * 0.25 * math.log(0.25))
    assert models.unigram_entropy(ids, 5) == pytest.approx(expected)


# -- the training loop --------------------------------------------------------------------------
@pytest.mark.torch
def test_warmup_cosine_schedule_matches_torch(torch):
    def lrs(lib, schedule):
        opt = lib.optim.AdamW([lib.nn.Parameter(lib.zeros(1))], lr=1.0)
        sched = schedule(lib, opt)
        out = []
        for _ in range(12):
            out.append(opt.param_groups[0]["lr"])
            opt.step()
            sched.step()
        return out

    ours = lrs(flow, lambda _, opt: warmup_cosine_schedule(opt, 4, 12, 0.1))

    def torch_schedule(lib, opt):
        s = lib.optim.lr_scheduler
        warmup = s.LinearLR(opt, start_factor=0.25, total_iters=4)
        decay = s.CosineAnnealingLR(opt, T_max=8, eta_min=0.1)
        return s.SequentialLR(opt, [warmup, decay], milestones=[4])

    np.testing.assert_allclose(ours, lrs(torch, torch_schedule), rtol=1e-12)
    assert ours[0] == 0.25 and ours[4] == 1.0 and ours[-1] > 0.1


def _tiny_run(tmp_path, **overrides) -> CharGPTTrainConfig:
    config = dict(
        n_layer=1, n_head=2, n_embd=32, block_size=16, steps=60, batch_size=16,
        learning_rate=1e-2, min_lr=1e-3, warmup_steps=5, eval_interval=30, eval_batches=2,
        out=str(tmp_path / "run" / "gpt.safetensors"), sample_tokens=12, progress=False,
    )  # fmt: skip
    return CharGPTTrainConfig(**{**config, **overrides})


def test_training_learns_beyond_the_unigram_baseline_and_checkpoints(tmp_path):
    # A text whose next character is predictable from the previous ones: a model using
    # context must beat the unigram entropy (log 4 nats here) by far.
    text = "abcd" * 200 + "dcba" * 200
    lines = []
    result = train_char_gpt(_tiny_run(tmp_path), text=text, log=lines.append)
    assert result.unigram_entropy == pytest.approx(math.log(4))
    assert result.val_loss < 0.5 * result.unigram_entropy
    assert any("unigram entropy 1.386" in line for line in lines)
    assert any(line.startswith("step    60: train loss") for line in lines)

    model, _, checkpoint = load_char_gpt(result.checkpoint)
    assert checkpoint["step"] == 60 and checkpoint["vocab"] == "abcd"
    assert checkpoint["train_config"]["n_embd"] == 32
    assert set(checkpoint) >= {"model", "optimizer", "scheduler", "model_config"}
    assert not model.training
    # The prompt's characters are all unknown to the model: it continues the pattern anyway.
    assert result.sample.startswith("The ") and len(result.sample) == 4 + 12
    assert set(result.sample[4:]) <= set("abcd")


def test_training_is_reproducible_from_the_seed(tmp_path):
    text = "hello world, " * 50
    first = train_char_gpt(_tiny_run(tmp_path, steps=6, eval_interval=6), text, lambda _: None)
    again = train_char_gpt(_tiny_run(tmp_path, steps=6, eval_interval=6), text, lambda _: None)
    assert first.val_loss == again.val_loss and first.sample == again.sample


def test_train_config_validation():
    with pytest.raises(ValueError, match=r"warmup_steps must be in \[0, steps=10\), got 10"):
        CharGPTTrainConfig(steps=10, warmup_steps=10)
    with pytest.raises(ValueError, match="batch_size must be positive, got 0"):
        CharGPTTrainConfig(batch_size=0)
    with pytest.raises(ValueError, match=r"min_lr must be in \[0, learning_rate=0.001\]"):
        CharGPTTrainConfig(learning_rate=1e-3, min_lr=1e-2)
