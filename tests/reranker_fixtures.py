"""Tiny random rerankers of each backbone family (BERT, GPT-2, Llama, Mamba), built offline in seconds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from transformers import PreTrainedTokenizerBase

FAMILY_OF = {"bert": "encoder", "gpt2": "causal", "llama": "causal", "mamba": "mamba"}
TEXTS = [
    "document: Paris is the capital and largest city of France.",
    "query: what is the capital of France?",
    "Berlin is the capital of Germany. The domestic cat is a small carnivorous mammal.",
    "Photosynthesis converts light energy into chemical energy in plants.",
]


def causal_tokenizer() -> PreTrainedTokenizerBase:
    """A byte-level BPE tokenizer with <s>/</s>, trained on a few sentences (no hub download)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300, special_tokens=["<unk>", "<s>", "</s>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(TEXTS, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>")


def backbone_config(kind: str, vocab_size: int) -> Any:
    from transformers import BertConfig, GPT2Config, LlamaConfig, MambaConfig

    if kind == "bert":
        return BertConfig(
            vocab_size=vocab_size,
            hidden_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=64,
            max_position_embeddings=128,
        )
    if kind == "gpt2":
        return GPT2Config(
            vocab_size=vocab_size, n_embd=32, n_layer=1, n_head=2, n_positions=128, bos_token_id=1, eos_token_id=2
        )
    if kind == "llama":
        return LlamaConfig(
            vocab_size=vocab_size,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=1,
            max_position_embeddings=128,
            bos_token_id=1,
            eos_token_id=2,
            pad_token_id=2,
        )
    if kind == "mamba":
        return MambaConfig(
            vocab_size=vocab_size,
            hidden_size=32,
            state_size=8,
            num_hidden_layers=1,
            bos_token_id=1,
            eos_token_id=2,
            pad_token_id=2,
        )
    raise ValueError(kind)


def make_backbone(kind: str, root: Path) -> Path:
    """A tiny random backbone directory (weights + tokenizer) of one family."""
    import torch
    from transformers import AutoModel, BertTokenizerFast

    from models.loading import packaged_minilm_dir

    torch.manual_seed(0)
    if kind == "bert":
        tok = BertTokenizerFast.from_pretrained(packaged_minilm_dir(), local_files_only=True)
    else:
        tok = causal_tokenizer()
    AutoModel.from_config(backbone_config(kind, len(tok))).save_pretrained(root)
    tok.save_pretrained(root)
    return root


def make_reranker(kind: str, root: Path, *, max_length: int = 64) -> Path:
    """A tiny random reranker directory (what `vela train reranker` writes, minus the training)."""
    from transformers import AutoTokenizer

    from models.reranker import RerankerModel

    backbone = make_backbone(kind, root.parent / f"{root.name}-backbone")
    RerankerModel.from_backbone(backbone, max_length=max_length).save_pretrained(root)
    AutoTokenizer.from_pretrained(backbone).save_pretrained(root)
    return root
