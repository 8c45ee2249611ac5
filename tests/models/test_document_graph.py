"""The documents' int8 graph quantized per token, and fp32 documents one setting away (VELA_DOCUMENT_PRECISION)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from models import load_embedder
from models.embedder.onnx_embedder import (
    DOCUMENT_FP32_MODEL_FILE,
    DOCUMENT_MODEL_FILE,
    DOCUMENT_PRECISION_ENV,
    MODEL_FILE,
    TOKEN_INT8,
    OnnxEmbedder,
    document_file,
)
from models.onnx_export import export
from models.onnx_quantize import quantize_per_token
from models.packaged_onnx import export_key

TEXTS = [
    "what causes tides",
    "a much longer text about the gravity of the moon and the sun " * 3,
    "photosynthesis in the leaves of plants",
    "Berlin has 3.7 million inhabitants and many lakes.",
]


@pytest.fixture(scope="module")
def token_dir(tiny_embedder_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return export(str(tiny_embedder_dir), str(tmp_path_factory.mktemp("docs") / "token"), token_int8_documents=True)


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1)  # unit rows


def test_documents_run_the_per_token_graph_with_fp32_beside_it(
    token_dir: Path, tiny_embedder_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(DOCUMENT_PRECISION_ENV, raising=False)
    assert {p.name for p in token_dir.glob("*.onnx")} == {MODEL_FILE, DOCUMENT_MODEL_FILE, DOCUMENT_FP32_MODEL_FILE}
    e = load_embedder(token_dir)
    assert isinstance(e, OnnxEmbedder) and (e.precision, e.document_precision) == ("int8", TOKEN_INT8)
    want = load_embedder(tiny_embedder_dir).encode_documents(TEXTS)  # torch fp32
    got = e.encode_documents(TEXTS)
    assert _cosines(got, want).min() > 0.99
    assert not np.allclose(got, want, atol=1e-5)  # int8, not the fp32 graph


def test_fp32_documents_are_one_setting_away(
    token_dir: Path, tiny_embedder_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    want = load_embedder(tiny_embedder_dir).encode_documents(TEXTS)
    monkeypatch.setenv(DOCUMENT_PRECISION_ENV, "fp32")
    e = load_embedder(token_dir)
    assert isinstance(e, OnnxEmbedder) and (e.precision, e.document_precision) == ("int8", "fp32")
    np.testing.assert_allclose(e.encode_documents(TEXTS), want, atol=1e-4)
    # The argument wins over the environment; queries keep their graph either way.
    auto = OnnxEmbedder.from_dir(token_dir, document_precision="auto")
    assert auto.document_precision == TOKEN_INT8
    np.testing.assert_array_equal(auto.encode_queries(TEXTS), e.encode_queries(TEXTS))


def test_the_setting_is_checked_and_falls_back(token_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=DOCUMENT_PRECISION_ENV):
        document_file(token_dir, "bf16")
    assert document_file(token_dir, "fp32") == token_dir / DOCUMENT_FP32_MODEL_FILE
    assert document_file(token_dir, "auto") == token_dir / DOCUMENT_MODEL_FILE
    assert document_file(tmp_path, "fp32") is None  # no document graph: documents share model.onnx


def test_a_documents_vector_does_not_depend_on_its_batch(token_dir: Path) -> None:
    """Each token is quantized on its own range: neighbours in the batch (and their padding) change nothing."""
    e = load_embedder(token_dir)
    batch = e.encode_documents(TEXTS)  # one padded run
    alone = np.concatenate([e.encode_documents([t]) for t in TEXTS])
    np.testing.assert_allclose(batch, alone, atol=1e-5)


@pytest.mark.parametrize("bits", [8, 7])
def test_per_token_graph_follows_the_fp32_graph(tiny_embedder_dir: Path, tmp_path: Path, bits: int) -> None:
    fp32_dir = export(str(tiny_embedder_dir), str(tmp_path / "fp32"), quantize=False)
    src, dst = fp32_dir / MODEL_FILE, tmp_path / f"token{bits}.onnx"
    quantize_per_token(src, dst, weight_bits=bits)
    ops = [n.op_type for n in onnx.load(str(dst)).graph.node]
    weight_matmuls = ops.count("MatMulInteger")
    assert weight_matmuls > 0 and weight_matmuls + ops.count("MatMul") == [
        n.op_type for n in onnx.load(str(src)).graph.node
    ].count("MatMul")  # every weight MatMul replaced; the attention's two activation products stay
    e = load_embedder(fp32_dir)
    assert isinstance(e, OnnxEmbedder)
    tok = e.tokenizer(TEXTS, padding=True, return_tensors="np")
    fp32, token = (ort.InferenceSession(str(p), providers=["CPUExecutionProvider"]) for p in (src, dst))
    feeds = {i.name: tok[i.name].astype(np.int64) for i in fp32.get_inputs()}
    (want,) = fp32.run(None, feeds)  # (B, L, d)
    (got,) = token.run(None, feeds)
    mask = tok["attention_mask"].astype(bool)
    a, b = want[mask], got[mask]  # (tokens, d)
    cos = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    assert cos.min() > 0.99, cos.min()


def test_the_cache_key_follows_vnni(tiny_embedder_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import models.packaged_onnx as packaged

    monkeypatch.setattr(packaged, "cpu_has_vnni", lambda: True)
    with_vnni = export_key(tiny_embedder_dir)
    monkeypatch.setattr(packaged, "cpu_has_vnni", lambda: False)
    assert export_key(tiny_embedder_dir) != with_vnni


def test_one_document_graph_at_a_time(tiny_embedder_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="one document graph"):
        export(str(tiny_embedder_dir), str(tmp_path / "x"), fp32_documents=True, token_int8_documents=True)
