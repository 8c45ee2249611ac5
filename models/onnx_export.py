"""Export a saved torch embedder to ONNX, optionally with dynamic int8 quantization, as a new embedder dir.

    vela export-onnx default --out .vela/models/minilm-onnx-int8

The output directory loads like any other embedder (`load_embedder(dir)`, `VELA_EMBEDDER=dir`): its
`vela_embedder.json` is the source's config with `"backend": "onnx"`. It is written to a temporary sibling
directory and renamed into place, so a failed export never leaves a half-written embedder behind.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import shutil
import tempfile
import warnings
from pathlib import Path

import numpy as np
import onnxruntime as ort
import torch
from transformers import AutoModel, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from models.device import cpu_has_vnni
from models.embedder.configuration_embedder import CONFIG_NAME, EmbedderConfig
from models.embedder.onnx_embedder import (
    DOCUMENT_FP32_MODEL_FILE,
    DOCUMENT_MODEL_FILE,
    MODEL_FILE,
    OUTPUT_NAME,
    TOKEN_INT8,
)
from models.model_dirs import _set_offline, resolve_torch_dir
from models.onnx_quantize import quantize_dynamic_int8, quantize_per_token, tag_precision

INPUTS = ("input_ids", "attention_mask", "token_type_ids")
OPSET = 17  # has LayerNormalization as one op; supported by every onnxruntime release we pin
# Largest |ONNX fp32 - torch| allowed on the check batch before the export is declared broken.
PARITY_ATOL = 1e-3
# Sample texts of different lengths, so the traced batch and the check batch both carry padding.
_TRACE_TEXTS = ["a short query", "a longer passage about tides, the moon and the gravity of the sun"]
_CHECK_TEXTS = ["what causes tides", "photosynthesis", "Berlin has 3.7 million inhabitants and many lakes."]


class _LastHiddenState(torch.nn.Module):
    """The HF model with tensor inputs and one tensor output, as the ONNX graph exposes them."""

    def __init__(self, model: PreTrainedModel, input_names: list[str]) -> None:
        super().__init__()
        self.model = model
        self.input_names = input_names

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        return self.model(**dict(zip(self.input_names, inputs, strict=True))).last_hidden_state  # (B, L, d)


def _input_names(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> list[str]:
    """Inputs the tokenizer produces and the model accepts (token_type_ids only for models that use them)."""
    accepted = inspect.signature(model.forward).parameters
    produced = set(tokenizer.model_input_names)
    return [n for n in INPUTS if n in accepted and (n != "token_type_ids" or n in produced)]


def _export_graph(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, path: Path) -> list[str]:
    names = _input_names(model, tokenizer)
    batch = tokenizer(_TRACE_TEXTS, padding=True, return_tensors="pt")
    args = tuple(batch[n] if n in batch else torch.zeros_like(batch["input_ids"]) for n in names)
    axes = {n: {0: "batch", 1: "sequence"} for n in [*names, OUTPUT_NAME]}
    # .eval() on the wrapper: the exporter restores the wrapper's mode afterwards, and a fresh module is in
    # training mode, which would switch dropout on in the torch model used for the parity check.
    wrapper = _LastHiddenState(model, names).eval()
    with warnings.catch_warnings():
        # The TorchScript exporter is deprecated, and it flags a shape test in transformers' mask code that
        # is constant for encoders; the parity check below is what proves the graph right.
        warnings.simplefilter("ignore")
        torch.onnx.export(
            wrapper,
            args,
            str(path),
            input_names=names,
            output_names=[OUTPUT_NAME],
            dynamic_axes=axes,
            opset_version=OPSET,
            dynamo=False,  # torch.export needs onnxscript and gains nothing for a plain encoder
        )
    return names


def _check_parity(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, path: Path, names: list[str]) -> None:
    """Run the fp32 graph on a batch of another shape than the traced one and compare with torch."""
    batch = tokenizer(_CHECK_TEXTS, padding=True, return_tensors="pt")
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feeds = {n: (batch[n] if n in batch else torch.zeros_like(batch["input_ids"])).numpy() for n in names}
    (got,) = session.run([OUTPUT_NAME], feeds)  # (B, L, d)
    with torch.inference_mode():
        want = model(**{n: torch.from_numpy(v) for n, v in feeds.items()}).last_hidden_state.numpy()  # (B, L, d)
    err = float(np.abs(got - want).max())
    if err > PARITY_ATOL:
        raise RuntimeError(f"ONNX export does not match torch (max abs diff {err:.2e} > {PARITY_ATOL})")


def _replaceable(out: Path) -> bool:
    """An empty directory, or an earlier ONNX export: never overwrite anything else."""
    if not out.exists():
        return True
    if not out.is_dir():
        return False
    if not any(out.iterdir()):
        return True
    own = out / CONFIG_NAME
    return own.is_file() and (out / MODEL_FILE).is_file() and EmbedderConfig.from_dir(out).backend == "onnx"


def _move_into_place(tmp: Path, out: Path) -> None:
    if out.exists() and any(out.iterdir()):
        old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
        os.replace(out, old / out.name)
        os.replace(tmp, out)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, out)  # rename(2) also replaces an empty directory


def export(
    model: str,
    out_dir: str,
    *,
    quantize: bool = True,
    fp32_documents: bool = False,
    token_int8_documents: bool = False,
    token_int8_queries: bool = False,
) -> Path:
    """Export `model` ('default' or a local HF model dir) to an ONNX embedder directory; returns it.

    With `quantize`, queries run the dynamic int8 graph (model.onnx) and documents by default the same graph;
    `fp32_documents`: documents run the fp32 graph (model.documents.onnx); `token_int8_documents`: documents
    run the per-token int8 graph (model.documents.onnx, `onnx_quantize.quantize_per_token`), with the fp32 graph
    beside it (model.documents.fp32.onnx) for VELA_DOCUMENT_PRECISION=fp32; `token_int8_queries`: queries run the
    per-token int8 graph too (model.onnx), instead of the dynamic one."""
    if fp32_documents and token_int8_documents:
        raise ValueError("choose one document graph: fp32_documents or token_int8_documents")
    _set_offline()
    src = resolve_torch_dir(model)
    config = EmbedderConfig.from_dir(src)
    if config.backend != "torch":
        raise ValueError(f"{src} is already an ONNX embedder; export from the torch model directory")
    out = Path(out_dir).expanduser().resolve()
    if not _replaceable(out):
        raise FileExistsError(f"{out} exists and is not an earlier ONNX export; choose another --out")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    try:
        tokenizer = AutoTokenizer.from_pretrained(src, local_files_only=True)
        # Eager attention: plain MatMul/Softmax nodes, which the int8 quantizer and ORT's fusions know.
        hf = AutoModel.from_pretrained(src, local_files_only=True, attn_implementation="eager").eval()
        fp32 = tmp / "model.fp32.onnx"
        names = _export_graph(hf, tokenizer, fp32)
        _check_parity(hf, tokenizer, fp32, names)
        if quantize:
            if token_int8_documents or token_int8_queries:
                quantize_per_token(fp32, tmp / DOCUMENT_MODEL_FILE, weight_bits=8 if cpu_has_vnni() else 7)
                tag_precision(tmp / DOCUMENT_MODEL_FILE, TOKEN_INT8)
            if token_int8_queries:  # the same graph: a query's vector does not depend on its batch either
                shutil.copyfile(tmp / DOCUMENT_MODEL_FILE, tmp / MODEL_FILE)
            else:
                quantize_dynamic_int8(fp32, tmp / MODEL_FILE)
                tag_precision(tmp / MODEL_FILE, "int8")
            if token_int8_documents:
                fp32.rename(tmp / DOCUMENT_FP32_MODEL_FILE)
                tag_precision(tmp / DOCUMENT_FP32_MODEL_FILE, "fp32")
            elif fp32_documents:
                fp32.rename(tmp / DOCUMENT_MODEL_FILE)
                tag_precision(tmp / DOCUMENT_MODEL_FILE, "fp32")
            else:
                if token_int8_queries:  # queries and documents share model.onnx
                    (tmp / DOCUMENT_MODEL_FILE).unlink()
                fp32.unlink()
        else:
            fp32.rename(tmp / MODEL_FILE)
            tag_precision(tmp / MODEL_FILE, "fp32")
        tokenizer.save_pretrained(tmp)
        hf.config.save_pretrained(tmp)
        dataclasses.replace(config, backend="onnx").save(tmp)
        tmp.chmod(0o755)  # mkdtemp makes it owner-only; the exported embedder is read like any model dir
        _move_into_place(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out
