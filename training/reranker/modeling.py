"""`build` a reranker for training (LoRA attached if asked), `load` one for inference (LoRA merged), `save`.

A saved `--out` directory is always a plain merged reranker: `AutoModel.from_pretrained(dir)`, or
`models.reranker.load_reranker(dir)`, loads it in one call. LoRA checkpoints written during training hold
only adapters; `load` rebuilds their backbone from `backbone_name_or_path` and merges them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from transformers import AutoModel, AutoTokenizer, PreTrainedTokenizerBase

from models.loading import resolve_model_dir
from models.reranker import RerankerConfig, RerankerModel, prepare_tokenizer
from training.reranker.arguments import ModelArguments
from training.run_record import write_training_record

ARGS_FILE = "training_args.json"
ADAPTER_FILE = "adapter_config.json"


def build(args: ModelArguments) -> tuple[Any, PreTrainedTokenizerBase]:
    """A fresh reranker over the backbone's pretrained weights (random head), and its tokenizer."""
    backbone_dir = resolve_model_dir(args.backbone)  # 'default' -> the packaged MiniLM
    model: Any = RerankerModel.from_backbone(
        backbone_dir,
        family=args.family,
        pooling=args.pooling,
        max_length=args.max_length,
        head_dropout=args.head_dropout,
    )
    tokenizer = prepare_tokenizer(AutoTokenizer.from_pretrained(backbone_dir, local_files_only=True))
    if args.lora:
        from peft import LoraConfig, get_peft_model

        targets: str | list[str] = args.lora_target_modules
        if targets != "all-linear":
            targets = [t.strip() for t in str(targets).split(",") if t.strip()]
        lora = LoraConfig(
            r=args.lora_r,
            lora_alpha=args.lora_alpha,
            lora_dropout=args.lora_dropout,
            target_modules=targets,
            # The head starts random: it is trained in full, never through a low-rank update.
            exclude_modules=["head"],
            modules_to_save=["head"],
        )
        model = get_peft_model(model, lora)
    return model, tokenizer


def merged(model: Any) -> RerankerModel:
    """The plain reranker: LoRA adapters folded into the weights (no-op without LoRA)."""
    if hasattr(model, "merge_and_unload"):
        model = model.merge_and_unload()
    if not isinstance(model, RerankerModel):
        raise TypeError(f"expected a RerankerModel, got {type(model).__name__}")
    return model


def save(
    model: Any, tokenizer: PreTrainedTokenizerBase, out: str | os.PathLike[str], arguments: dict[str, Any]
) -> Path:
    """Write a directory that loads in one call: merged weights, config, tokenizer, and the arguments JSON."""
    root = Path(out)
    root.mkdir(parents=True, exist_ok=True)
    plain = merged(model)
    plain.save_pretrained(root)
    tokenizer.save_pretrained(root)
    write_training_record(root, arguments)
    return root


def load(path: str | os.PathLike[str]) -> tuple[RerankerModel, PreTrainedTokenizerBase]:
    """A reranker for inference from an `--out` directory or a (LoRA) training checkpoint, merged."""
    root = Path(path)
    tokenizer = prepare_tokenizer(AutoTokenizer.from_pretrained(root, local_files_only=True))
    if not (root / ADAPTER_FILE).exists():
        model = AutoModel.from_pretrained(root, local_files_only=True)
        if not isinstance(model, RerankerModel):
            raise TypeError(f"{root} is a {type(model).__name__}, not a reranker")
        return model, tokenizer
    from peft import PeftModel

    config = RerankerConfig.from_pretrained(root)
    if not config.backbone_name_or_path:
        raise ValueError(f"{root}: a LoRA checkpoint whose config does not name its backbone")
    base = RerankerModel.from_backbone(
        config.backbone_name_or_path,
        family=config.family,
        pooling=config.pooling,
        max_length=config.max_length,
        head_dropout=config.head_dropout,
    )
    return merged(PeftModel.from_pretrained(base, root)), tokenizer


__all__ = ["build", "load", "merged", "save"]
