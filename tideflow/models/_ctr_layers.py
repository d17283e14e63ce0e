"""What DeepFM and DLRM build alike: their embedding tables and the start of their MLPs."""

from __future__ import annotations

from .. import nn, one_embedding
from .mlp import MLP


def embedding_tables(num_tables: int, std: float) -> list:
    """Options of `num_tables` tables whose new rows start as N(0, std^2)."""
    initializer = one_embedding.make_normal_initializer(mean=0.0, std=std)
    return [one_embedding.make_table_options(initializer) for _ in range(num_tables)]


def init_mlp_(mlp: MLP) -> MLP:
    """Xavier-normal weights and zero biases, as OneFlow's recommenders start their MLPs."""
    for name, param in mlp.named_parameters():
        if name.endswith("weight"):
            nn.init.xavier_normal_(param)
        else:
            nn.init.zeros_(param)
    return mlp
