"""Sparse Mixture-of-Experts embedders upcycled from a BERT-family encoder (Nomic Embed v2, sections 3.2, 4.3).

Importing this package registers the architecture, so `AutoModel.from_pretrained(dir)` restores a saved MoE model
and `models.load_embedder(dir)` serves it with one call.
"""

from transformers import AutoConfig, AutoModel

from models.moe.configuration_moe import MoeConfig
from models.moe.modeling_moe import MoeFeedForward, MoeModel, MoeModelOutput, balance_loss

AutoConfig.register(MoeConfig.model_type, MoeConfig, exist_ok=True)
AutoModel.register(MoeConfig, MoeModel, exist_ok=True)

__all__ = ["MoeConfig", "MoeFeedForward", "MoeModel", "MoeModelOutput", "balance_loss"]
