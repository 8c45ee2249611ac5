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
from transformers import AutoConfig, AutoModel, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

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


def _fp32_graph(model_dir: Path, tokenizer: PreTrainedTokenizerBase, path: Path) -> Path:
    """The fp32 graph of the encoder in `model_dir`, parity-checked against torch."""
    # Eager attention: plain MatMul/Softmax nodes, which the int8 quantizer and ORT's fusions know.
    hf = AutoModel.from_pretrained(model_dir, local_files_only=True, attn_implementation="eager").eval()
    names = _export_graph(hf, tokenizer, path)
    _check_parity(hf, tokenizer, path, names)
    return path


def _write_graph(fp32: Path, dst: Path, kind: str) -> None:
    """`dst`: the fp32 graph as it is, or quantized (`int8`: dynamic; `int8-token`: per token), tagged."""
    if kind == TOKEN_INT8:
        quantize_per_token(fp32, dst, weight_bits=8 if cpu_has_vnni() else 7)
    elif kind == "int8":
        quantize_dynamic_int8(fp32, dst)
    else:
        shutil.copyfile(fp32, dst)
    tag_precision(dst, kind)


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
        # An asymmetric model (`vela adapt`): queries run its query encoder, documents the encoder in `src`.
        query_src = src / config.query_encoder if config.query_encoder else src
        fp32_query = _fp32_graph(query_src, tokenizer, tmp / "query.fp32.onnx")
        fp32_docs = _fp32_graph(src, tokenizer, tmp / "documents.fp32.onnx") if config.query_encoder else fp32_query
        query_kind = "fp32" if not quantize else TOKEN_INT8 if token_int8_queries else "int8"
        doc_kind = "fp32" if not quantize or fp32_documents else TOKEN_INT8 if token_int8_documents else query_kind
        _write_graph(fp32_query, tmp / MODEL_FILE, query_kind)
        # Documents share model.onnx when it is their graph too; the per-token document graph always has a file
        # (a session of its own, with the fp32 graph beside it for VELA_DOCUMENT_PRECISION=fp32).
        if fp32_docs == fp32_query and doc_kind == query_kind and token_int8_documents:
            shutil.copyfile(tmp / MODEL_FILE, tmp / DOCUMENT_MODEL_FILE)  # the same graph: quantize once
        elif fp32_docs != fp32_query or doc_kind != query_kind or token_int8_documents:
            _write_graph(fp32_docs, tmp / DOCUMENT_MODEL_FILE, doc_kind)
        if token_int8_documents:
            shutil.copyfile(fp32_docs, tmp / DOCUMENT_FP32_MODEL_FILE)
            tag_precision(tmp / DOCUMENT_FP32_MODEL_FILE, "fp32")
        for fp32 in {fp32_query, fp32_docs}:
            fp32.unlink()
        tokenizer.save_pretrained(tmp)
        AutoConfig.from_pretrained(src, local_files_only=True).save_pretrained(tmp)
        # The two graphs carry an asymmetric model's split: the ONNX directory has no query_encoder subdirectory.
        dataclasses.replace(config, backend="onnx", query_encoder="").save(tmp)
        tmp.chmod(0o755)  # mkdtemp makes it owner-only; the exported embedder is read like any model dir
        _move_into_place(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out
