"""Condenser pretraining: configuration and model. Importing the package registers the architecture."""

from transformers import AutoConfig, AutoModelForPreTraining

from models.condenser.configuration_condenser import CondenserConfig
from models.condenser.modeling_condenser import CondenserForPretraining, CondenserOutput

AutoConfig.register(CondenserConfig.model_type, CondenserConfig, exist_ok=True)
AutoModelForPreTraining.register(CondenserConfig, CondenserForPretraining, exist_ok=True)

__all__ = ["CondenserConfig", "CondenserForPretraining", "CondenserOutput"]
