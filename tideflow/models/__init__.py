"""Reference models with PyTorch-equivalent architectures (MLP, LeNet-5, ResNet, GPT, BERT),
the recommenders DeepFM and DLRM on `flow.one_embedding`, the character-level data and
training loop of the GPT demo, and click logs in the Criteo format.

>>> model = flow.models.resnet18(num_classes=10)
"""

from .bert import BertConfig, BertForMaskedLM, BertModel, BertModelOutput
from .chardata import CharTokenizer, pydoc_text, random_blocks, train_val_split, unigram_entropy
from .criteo import CriteoBatch, CriteoFormatError, CriteoRows, read_criteo_tsv, write_criteo_tsv
from .deepfm import DeepFM
from .dlrm import DLRM
from .gpt import GPT, GPTConfig
from .gpt_parallel import GPTParallelLayout, parallelize_gpt
from .lenet import LeNet5
from .metrics import log_loss, roc_auc
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
from .synthetic_criteo import SyntheticCriteo

__all__ = [
    "DLRM",
    "GPT",
    "MLP",
    "BasicBlock",
    "BertConfig",
    "BertForMaskedLM",
    "BertModel",
    "BertModelOutput",
    "Bottleneck",
    "CharTokenizer",
    "CriteoBatch",
    "CriteoFormatError",
    "CriteoRows",
    "DeepFM",
    "GPTConfig",
    "GPTParallelLayout",
    "LeNet5",
    "ResNet",
    "SyntheticCriteo",
    "log_loss",
    "parallelize_gpt",
    "pydoc_text",
    "random_blocks",
    "read_criteo_tsv",
    "resnet18",
    "resnet34",
    "resnet50",
    "resnet101",
    "resnet152",
    "roc_auc",
    "train_val_split",
    "unigram_entropy",
    "write_criteo_tsv",
]
