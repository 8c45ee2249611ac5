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
import onnx
import onnxruntime as ort
import torch
from onnxruntime.quantization import QuantType, quantize_dynamic
from transformers import AutoModel, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from models.device import cpu_has_vnni
from models.embedder.configuration_embedder import CONFIG_NAME, EmbedderConfig
from models.embedder.onnx_embedder import (
    DOCUMENT_FP32_MODEL_FILE,
    DOCUMENT_MODEL_FILE,
    MODEL_FILE,
    OUTPUT_NAME,
    PRECISION_KEY,
    TOKEN_INT8,
)
from models.model_dirs import _set_offline, resolve_torch_dir

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


def _down_projections(model: onnx.ModelProto) -> list[str]:
    """MatMuls whose constant weight narrows (K > N): the feed-forward down projections.

    Their input is the activation (GELU) output, whose outliers per-tensor uint8 activations quantize
    worst: on MiniLM / SciFact queries, quantizing them too gives min cosine 0.982 instead of 0.992.
    """
    weights = {w.name: w.dims for w in model.graph.initializer}
    return [
        n.name
        for n in model.graph.node
        if n.op_type == "MatMul"
        and len(weights.get(n.input[1], ())) == 2
        and weights[n.input[1]][0] > weights[n.input[1]][1]
    ]


def _attention_projections(model: onnx.ModelProto) -> list[str]:
    """Query, key and value projections: the weight MatMuls that read one activation three at a time.

    Quantizing them moves the attention pattern itself: with them in int8, hybrid NDCG@10 on CoSQA-dev fell
    0.006 below torch fp32 although the mean cosine was 0.996; kept fp32 it is within 0.003.
    """
    weights = {w.name: w.dims for w in model.graph.initializer}
    readers: dict[str, list[str]] = {}
    for n in model.graph.node:
        if n.op_type == "MatMul" and len(weights.get(n.input[1], ())) == 2:
            readers.setdefault(n.input[0], []).append(n.name)
    return [name for names in readers.values() if len(names) >= 3 for name in names]


def _quantize(src: Path, dst: Path) -> None:
    """Dynamic int8: weights quantized once, activations per batch at run time.

    Per-channel QInt8 weights (per-tensor loses far more: min cosine 0.91 on MiniLM); MatMuls only (the
    embedding Gathers stay fp32: quantizing them saves disk, not time); 7-bit weights (reduce_range), so
    u8 x s8 products cannot saturate on CPUs without VNNI. FFN down projections and the attention's query, key
    and value projections stay fp32 (see above): the attention output and FFN up projections run in int8.
    """
    model = onnx.load(str(src))
    quantize_dynamic(
        src,
        dst,
        weight_type=QuantType.QInt8,
        op_types_to_quantize=["MatMul"],
        per_channel=True,
        reduce_range=True,
        nodes_to_exclude=sorted({*_down_projections(model), *_attention_projections(model)}),
    )


def _weight_matmuls(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    weights = {w.name: w.dims for w in model.graph.initializer}
    return [n for n in model.graph.node if n.op_type == "MatMul" and len(weights.get(n.input[1], ())) == 2]


def _per_token_int8_nodes(
    node: onnx.NodeProto, w: np.ndarray, qmax: int
) -> tuple[list[onnx.NodeProto], list[onnx.TensorProto]]:
    """`node` (MatMul of an activation (..., K) by the constant w (K, N)) as int8 arithmetic with one scale and
    zero point per token (asymmetric u8) and one scale per output channel (symmetric s8).

    MatMulInteger takes one zero point for all of A on the CPU, so the matrix product runs with none and each
    token's zero point comes off after: y = s_tok * s_out * (A_q W_q - zp_tok * colsum(W_q)).
    """
    h = onnx.helper
    p = node.name.strip("/").replace("/", "_") or node.output[0]
    k, n = w.shape
    w_scale = np.maximum(np.abs(w).max(0), 1e-12) / qmax  # (N,)
    w_q = np.clip(np.round(w / w_scale), -qmax, qmax).astype(np.int8)  # (K, N)
    consts = {
        f"{p}_wq": w_q,
        f"{p}_wscale": w_scale.astype(np.float32),
        f"{p}_colsum": w_q.astype(np.int32).sum(0).astype(np.float32),  # (N,)
        f"{p}_rows": np.array([-1, k], np.int64),
        f"{p}_n": np.array([n], np.int64),
    }
    a, t = node.input[0], f"{p}_pt"  # t: prefix of the intermediate tensors
    nodes = [
        h.make_node("Shape", [a], [f"{t}_shape"]),
        h.make_node("Reshape", [a, f"{p}_rows"], [f"{t}_a"]),  # (M, K): one row per token
        h.make_node("ReduceMin", [f"{t}_a"], [f"{t}_min0"], keepdims=1, axes=[1]),  # (M, 1)
        h.make_node("ReduceMax", [f"{t}_a"], [f"{t}_max0"], keepdims=1, axes=[1]),
        h.make_node("Min", [f"{t}_min0", "vela_pt_zero"], [f"{t}_min"]),  # the range holds 0 exactly
        h.make_node("Max", [f"{t}_max0", "vela_pt_zero"], [f"{t}_max"]),
        h.make_node("Sub", [f"{t}_max", f"{t}_min"], [f"{t}_range"]),
        h.make_node("Div", [f"{t}_range", "vela_pt_255"], [f"{t}_scale0"]),
        h.make_node("Max", [f"{t}_scale0", "vela_pt_tiny"], [f"{t}_scale"]),  # (M, 1)
        h.make_node("Div", [f"{t}_min", f"{t}_scale"], [f"{t}_zp0"]),
        h.make_node("Round", [f"{t}_zp0"], [f"{t}_zp1"]),
        h.make_node("Neg", [f"{t}_zp1"], [f"{t}_zp"]),  # (M, 1), in [0, 255]
        # One QuantizeLinear along axis 0 (a scale and zero point per row) instead of Div, Round, Add, Clip and
        # Cast: the same numbers in one pass over A, 1.15x the documents/s of the five.
        h.make_node("Reshape", [f"{t}_scale", "vela_pt_last"], [f"{t}_scale_m"]),  # (M,)
        h.make_node("Reshape", [f"{t}_zp", "vela_pt_last"], [f"{t}_zp_m"]),
        h.make_node("Cast", [f"{t}_zp_m"], [f"{t}_zp_u8"], to=onnx.TensorProto.UINT8),
        h.make_node("QuantizeLinear", [f"{t}_a", f"{t}_scale_m", f"{t}_zp_u8"], [f"{t}_aq"], axis=0),
        h.make_node("MatMulInteger", [f"{t}_aq", f"{p}_wq"], [f"{t}_yi"]),  # (M, N) int32
        h.make_node("Cast", [f"{t}_yi"], [f"{t}_yf"], to=onnx.TensorProto.FLOAT),
        h.make_node("Mul", [f"{t}_zp", f"{p}_colsum"], [f"{t}_corr"]),
        h.make_node("Sub", [f"{t}_yf", f"{t}_corr"], [f"{t}_yc"]),
        h.make_node("Mul", [f"{t}_yc", f"{t}_scale"], [f"{t}_y1"]),
        h.make_node("Mul", [f"{t}_y1", f"{p}_wscale"], [f"{t}_y2"]),
        h.make_node("Slice", [f"{t}_shape", "vela_pt_0", "vela_pt_last"], [f"{t}_lead"]),
        h.make_node("Concat", [f"{t}_lead", f"{p}_n"], [f"{t}_out_shape"], axis=0),
        h.make_node("Reshape", [f"{t}_y2", f"{t}_out_shape"], [node.output[0]]),
    ]
    return nodes, [onnx.numpy_helper.from_array(v, name) for name, v in consts.items()]


def _quantize_per_token(src: Path, dst: Path, *, weight_bits: int = 8) -> None:
    """Every weight MatMul in int8 with a scale and zero point per token (the documents' graph).

    Dynamic quantization (`_quantize`) gives a whole batch one activation range: a token with an outlier
    coarsens every other token of every text in the batch, and a document's vector depends on the batch it
    was embedded in. Here each token gets its own range (asymmetric: GELU outputs barely go below zero), so
    all 36 weight MatMuls of MiniLM run in int8, feed-forward down projections and query/key/value included:
    on SciFact sentences min cosine 0.9979 to torch fp32 (dynamic int8 of the same MatMuls: 0.986) at 1.8x
    the fp32 graph's documents/s on one core. `weight_bits` 7 where the CPU lacks VNNI: u8 x s8 products of
    full-range weights can saturate in the older kernels (the reason for `reduce_range` in `_quantize`).
    """
    model = onnx.load(str(src))
    qmax = 2 ** (weight_bits - 1) - 1
    weights = {w.name: w for w in model.graph.initializer}
    shared: dict[str, np.ndarray] = {
        "vela_pt_zero": np.array(0.0, np.float32),
        "vela_pt_255": np.array(255.0, np.float32),
        "vela_pt_tiny": np.array(1e-8, np.float32),
        "vela_pt_0": np.array([0], np.int64),
        "vela_pt_last": np.array([-1], np.int64),
    }
    replaced: dict[str, list[onnx.NodeProto]] = {}
    added = [onnx.numpy_helper.from_array(v, name) for name, v in shared.items()]
    for node in _weight_matmuls(model):
        w = onnx.numpy_helper.to_array(weights[node.input[1]]).astype(np.float32)  # (K, N)
        nodes, consts = _per_token_int8_nodes(node, w, qmax)
        replaced[node.name] = nodes
        added += consts
    graph_nodes = list(model.graph.node)
    del model.graph.node[:]
    for node in graph_nodes:
        model.graph.node.extend(replaced.get(node.name, [node]))
    used = {i for node in model.graph.node for i in node.input}
    kept = [w for w in model.graph.initializer if w.name in used]  # the fp32 weights of replaced MatMuls go
    del model.graph.initializer[:]
    model.graph.initializer.extend([*kept, *added])
    onnx.checker.check_model(model)
    onnx.save(model, str(dst))


def _tag_precision(path: Path, precision: str) -> None:
    model = onnx.load(str(path))
    onnx.helper.set_model_props(model, {PRECISION_KEY: precision})
    onnx.save(model, str(path))


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
    run the per-token int8 graph (model.documents.onnx, `_quantize_per_token`), with the fp32 graph beside it
    (model.documents.fp32.onnx) for VELA_DOCUMENT_PRECISION=fp32; `token_int8_queries`: queries run the per-token
    int8 graph too (model.onnx), instead of the dynamic one."""
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
                _quantize_per_token(fp32, tmp / DOCUMENT_MODEL_FILE, weight_bits=8 if cpu_has_vnni() else 7)
                _tag_precision(tmp / DOCUMENT_MODEL_FILE, TOKEN_INT8)
            if token_int8_queries:  # the same graph: a query's vector does not depend on its batch either
                shutil.copyfile(tmp / DOCUMENT_MODEL_FILE, tmp / MODEL_FILE)
            else:
                _quantize(fp32, tmp / MODEL_FILE)
                _tag_precision(tmp / MODEL_FILE, "int8")
            if token_int8_documents:
                fp32.rename(tmp / DOCUMENT_FP32_MODEL_FILE)
                _tag_precision(tmp / DOCUMENT_FP32_MODEL_FILE, "fp32")
            elif fp32_documents:
                fp32.rename(tmp / DOCUMENT_MODEL_FILE)
                _tag_precision(tmp / DOCUMENT_MODEL_FILE, "fp32")
            else:
                if token_int8_queries:  # queries and documents share model.onnx
                    (tmp / DOCUMENT_MODEL_FILE).unlink()
                fp32.unlink()
        else:
            fp32.rename(tmp / MODEL_FILE)
            _tag_precision(tmp / MODEL_FILE, "fp32")
        tokenizer.save_pretrained(tmp)
        hf.config.save_pretrained(tmp)
        dataclasses.replace(config, backend="onnx").save(tmp)
        tmp.chmod(0o755)  # mkdtemp makes it owner-only; the exported embedder is read like any model dir
        _move_into_place(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out
