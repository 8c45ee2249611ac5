"""Contextual document embeddings (CDE): configuration, model, and a collection's corpus context.

Importing this package registers the architecture, so `AutoModel.from_pretrained(dir)` restores a saved CDE.
"""

from transformers import AutoConfig, AutoModel

from models.cde.configuration_cde import CdeConfig
from models.cde.modeling_cde import CdeModel
from models.context import CorpusContext

AutoConfig.register(CdeConfig.model_type, CdeConfig, exist_ok=True)
AutoModel.register(CdeConfig, CdeModel, exist_ok=True)

__all__ = ["CdeConfig", "CdeModel", "CorpusContext"]
