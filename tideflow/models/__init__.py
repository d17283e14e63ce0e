"""Reference models with PyTorch-equivalent architectures (MLP, LeNet-5, ResNet, GPT, BERT),
and the character-level data and training loop of the GPT demo.

>>> model = flow.models.resnet18(num_classes=10)
"""

from .bert import BertConfig, BertForMaskedLM, BertModel, BertModelOutput
from .chardata import CharTokenizer, pydoc_text, random_blocks, train_val_split, unigram_entropy
from .gpt import GPT, GPTConfig
from .gpt_parallel import GPTParallelLayout, parallelize_gpt
from .lenet import LeNet5
from .mlp import MLP
from .resnet import (
    BasicBlock,
    Bottleneck,
    ResNet,
    resnet18,
    resnet34,
    resnet50,
    resnet101,
    resnet152,
)

__all__ = [
    "GPT",
    "MLP",
    "BasicBlock",
    "BertConfig",
    "BertForMaskedLM",
    "BertModel",
    "BertModelOutput",
    "Bottleneck",
    "CharTokenizer",
    "GPTConfig",
    "GPTParallelLayout",
    "LeNet5",
    "ResNet",
    "parallelize_gpt",
    "pydoc_text",
    "random_blocks",
    "resnet18",
    "resnet34",
    "resnet50",
    "resnet101",
    "resnet152",
    "train_val_split",
    "unigram_entropy",
]
