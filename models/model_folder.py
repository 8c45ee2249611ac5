"""What makes a folder a model Vela can serve, judged from its files alone: a config.json that is a JSON object,
and weights. The registry judges what it adds and what it lists by these, so the two never disagree."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# models.reranker.configuration_reranker.MODEL_TYPE, spelled here so that listing models needs no transformers.
RERANKER_MODEL_TYPE = "vela_reranker"


class InvalidModelDir(ValueError):
    """A directory that is not a model Vela can serve: no config.json, one that is not a JSON object, no weights."""


def read_config(root: Path) -> dict[str, Any]:
    """A model directory's config.json as a dict; InvalidModelDir when it is missing, unreadable or not an object."""
    try:
        data = json.loads((root / "config.json").read_bytes())
    except FileNotFoundError as exc:
        raise InvalidModelDir("no config.json: not a Hugging Face model directory") from exc
    except (OSError, ValueError) as exc:
        raise InvalidModelDir(f"config.json does not parse as JSON ({type(exc).__name__})") from exc
    if not isinstance(data, dict):
        raise InvalidModelDir(f"config.json is a JSON {type(data).__name__}, not an object")
    return data


# What a folder must hold besides config.json to be loadable: weights, whole or sharded (an ONNX export's graph).
WEIGHT_PATTERNS = ("*.safetensors", "*.bin", "*.onnx", "*.safetensors.index.json", "*.bin.index.json")


def check_weights(root: Path) -> None:
    """InvalidModelDir unless the folder holds weights: registering one without would accept a model that fails
    on its first use."""
    if not any(next(root.glob(pattern), None) for pattern in WEIGHT_PATTERNS):
        raise InvalidModelDir("no weights (model.safetensors, pytorch_model.bin or model.onnx): not a whole model")


def check_readable_weights(root: Path) -> None:
    """InvalidModelDir when a safetensors file in the folder (or a folder of it: an adapted model's query encoder)
    is not one: a truncated or damaged copy would be registered and then fail on the first request that loads
    it. Reads each file's header, not its tensors."""
    from safetensors import SafetensorError, safe_open

    for path in sorted([*root.glob("*.safetensors"), *root.glob("*/*.safetensors")]):
        try:
            with safe_open(str(path), framework="numpy"):
                pass
        except (SafetensorError, OSError) as exc:
            rel = path.relative_to(root)
            raise InvalidModelDir(f"{rel} is not a readable safetensors file ({exc}): a damaged copy?") from exc


def kind_of(config: dict[str, Any]) -> str:
    """As models.reranker tells them apart: a reranker's model_type is `vela_reranker`; anything else is an embedder
    (models.loading's table picks its class)."""
    return "reranker" if config.get("model_type") == RERANKER_MODEL_TYPE else "embedder"


def dims_of(config: dict[str, Any]) -> int | None:
    """An embedder's output dims: the hidden size of the encoder that makes the vectors (CDE: its second stage)."""
    inner = {"vela_cde": "second_stage", "vela_moe": "encoder"}.get(str(config.get("model_type")))
    source = config.get(inner) if inner else config
    size = source.get("hidden_size") if isinstance(source, dict) else None
    return size if isinstance(size, int) and not isinstance(size, bool) else None
