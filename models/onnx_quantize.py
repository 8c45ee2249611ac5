"""The int8 forms of an exported embedder graph (models/onnx_export.py writes them).

- `quantize_dynamic_int8`: onnxruntime's dynamic quantization of the attention output and feed-forward up
  projections (activation ranges per batch);
- `quantize_per_token`: every weight MatMul rewritten as int8 arithmetic with a scale and zero point per token,
  so a text's vector does not depend on what shares its batch.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnxruntime.quantization import QuantType, quantize_dynamic

from models.embedder.onnx_embedder import PRECISION_KEY


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


def quantize_dynamic_int8(src: Path, dst: Path) -> None:
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


def quantize_per_token(src: Path, dst: Path, *, weight_bits: int = 8) -> None:
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


def tag_precision(path: Path, precision: str) -> None:
    model = onnx.load(str(path))
    onnx.helper.set_model_props(model, {PRECISION_KEY: precision})
    onnx.save(model, str(path))
