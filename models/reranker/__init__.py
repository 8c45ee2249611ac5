"""Cross-encoder rerankers (RankMamba): encoder-only, causal LM or Mamba backbone + a linear head.

Importing this package registers `vela_reranker` with AutoConfig/AutoModel, so a reranker directory loads
with `AutoModel.from_pretrained(dir)`, or ready to score with `load_reranker(dir)`.
"""

from transformers import AutoConfig, AutoModel

from models.reranker.configuration_reranker import MODEL_TYPE, RerankerConfig, infer_family
from models.reranker.loading import CrossEncoder, NotARerankerError, RerankerCache, load_reranker, resolve_reranker_dir
from models.reranker.modeling_reranker import RerankerModel
from models.reranker.processing_reranker import RerankerProcessor, document_text, prepare_tokenizer

AutoConfig.register(MODEL_TYPE, RerankerConfig, exist_ok=True)
AutoModel.register(RerankerConfig, RerankerModel, exist_ok=True)

__all__ = [
    "CrossEncoder",
    "NotARerankerError",
    "RerankerCache",
    "RerankerConfig",
    "RerankerModel",
    "RerankerProcessor",
    "document_text",
    "infer_family",
    "load_reranker",
    "prepare_tokenizer",
    "resolve_reranker_dir",
]
