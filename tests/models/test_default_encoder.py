"""The packaged default served by ONNX Runtime int8: which encoder `auto` picks, the cached export, numpy pooling."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch

from models import EmbedderCache, EmbedderConfig, load_embedder
from models.embedder.modeling_embedder import pool
from models.embedder.onnx_embedder import OnnxEmbedder, pool_numpy
from models.loading import choose_encoder, packaged_minilm_dir, resolve_model_dir
from models.packaged_onnx import READY, cached_int8_export, export_key


def test_auto_is_onnx_on_a_cpu_in_fp32_and_torch_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VELA_ENCODER", raising=False)
    assert choose_encoder(None, device="cpu", precision="fp32") == "onnx"
    assert choose_encoder(None, device="cpu", precision="bf16") == "torch"
    assert choose_encoder(None, device="cuda:0", precision="fp32") == "torch"
    assert choose_encoder("torch", device="cpu", precision="fp32") == "torch"
    monkeypatch.setenv("VELA_ENCODER", "torch")
    assert choose_encoder(None, device="cpu", precision="fp32") == "torch"
    assert EmbedderCache().encoder == "torch"
    monkeypatch.setenv("VELA_ENCODER", "tensorflow")
    with pytest.raises(ValueError, match="VELA_ENCODER"):
        EmbedderCache()


def test_trainers_keep_the_torch_default() -> None:
    assert resolve_model_dir("default") == packaged_minilm_dir()
    assert resolve_model_dir("minilm-torch", encoder="onnx") == packaged_minilm_dir()


def test_export_is_made_once_and_reused(tiny_embedder_dir: Path, tmp_path: Path) -> None:
    first = cached_int8_export(tiny_embedder_dir, name="tiny", root=tmp_path)
    stamp = (first / "model.onnx").stat().st_mtime_ns
    again = cached_int8_export(tiny_embedder_dir, name="tiny", root=tmp_path)
    assert again == first and (first / "model.onnx").stat().st_mtime_ns == stamp and (first / READY).is_file()
    e = load_embedder(first)
    assert isinstance(e, OnnxEmbedder) and e.precision == "int8-token"
    want = load_embedder(tiny_embedder_dir).encode_queries(["what causes tides", "photosynthesis"])
    assert (e.encode_queries(["what causes tides", "photosynthesis"]) * want).sum(1).min() > 0.95


def test_documents_can_keep_the_fp32_graph(tiny_embedder_dir: Path, tmp_path: Path) -> None:
    from models.onnx_export import export

    both = load_embedder(export(str(tiny_embedder_dir), str(tmp_path / "both"), fp32_documents=True))
    plain = load_embedder(tiny_embedder_dir)
    assert isinstance(both, OnnxEmbedder) and (both.precision, both.document_precision) == ("int8", "fp32")
    texts = ["what causes tides", "a much longer text about the gravity of the moon and the sun " * 3]
    np.testing.assert_allclose(both.encode_documents(texts), plain.encode_documents(texts), atol=1e-4)
    assert not np.allclose(both.encode_queries(texts), plain.encode_queries(texts), atol=1e-6)  # int8 queries


def test_an_interrupted_export_is_redone(tiny_embedder_dir: Path, tmp_path: Path) -> None:
    out = cached_int8_export(tiny_embedder_dir, name="tiny", root=tmp_path)
    (out / READY).unlink()  # as if the process died between the rename and the marker
    assert cached_int8_export(tiny_embedder_dir, name="tiny", root=tmp_path) == out and (out / READY).is_file()


def test_the_key_follows_the_source_files(tiny_embedder_dir: Path, tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    for p in tiny_embedder_dir.iterdir():
        (src / p.name).write_bytes(p.read_bytes())
    key = export_key(src)
    assert export_key(src) == key
    (src / "extra.txt").write_text("changed")
    assert export_key(src) != key


def test_the_packaged_default_is_served_by_onnx_int8(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VELA_ENCODER", raising=False)
    cache = EmbedderCache()
    fast, slow = cache.get("default"), EmbedderCache(encoder="torch").get("default")
    assert isinstance(fast, OnnxEmbedder) and fast.precision == "int8-token" and cache.get("minilm-onnx") is fast
    assert fast.document_precision == "int8-token"
    assert not isinstance(slow, OnnxEmbedder) and slow.name == str(packaged_minilm_dir())
    texts = ["what causes tides", "insulin resistance in type 2 diabetes", "graphene conductivity"]
    cos = (fast.encode_queries(texts) * slow.encode_queries(texts)).sum(1)  # both unit rows
    assert cos.min() > 0.98, cos
    # Documents go through the per-token int8 graph (0.998 or more on SciFact sentences) ...
    cos = (fast.encode_documents(texts) * slow.encode_documents(texts)).sum(1)
    assert cos.min() > 0.995, cos
    # ... and through the fp32 graph one setting away: then the vectors a collection stores are torch fp32's.
    monkeypatch.setenv("VELA_DOCUMENT_PRECISION", "fp32")
    fp32_documents = EmbedderCache().get("default")
    assert isinstance(fp32_documents, OnnxEmbedder) and fp32_documents.document_precision == "fp32"
    np.testing.assert_allclose(fp32_documents.encode_documents(texts), slow.encode_documents(texts), atol=1e-4)
    assert os.fspath(fast.name) != os.fspath(slow.name)  # collections and evals tell the two apart


@pytest.mark.parametrize("pooling", ["mean", "cls", "last"])
def test_numpy_pooling_matches_torch(pooling: str) -> None:
    rng = np.random.default_rng(0)
    hidden = rng.standard_normal((3, 5, 8)).astype(np.float32)  # (B, L, d)
    mask = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]], dtype=np.int64)  # (B, L), right padding
    config = EmbedderConfig(pooling=pooling)
    want = pool(torch.from_numpy(hidden), torch.from_numpy(mask), config).numpy()
    np.testing.assert_allclose(pool_numpy(hidden, mask, config), want, atol=1e-6)


def test_the_packaged_model_has_one_identity_and_two_forms(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VELA_ENCODER", raising=False)
    fast, slow = EmbedderCache(), EmbedderCache(encoder="torch")
    for name in ("default", "minilm-torch", "minilm-onnx", str(packaged_minilm_dir())):
        # What a collection stores: never the path of a cached export.
        assert fast.resolve(name) == slow.resolve(name) == packaged_minilm_dir()
    # A collection that stored the package directory (torch fp32 vectors) is served by the chosen form.
    assert fast.served_dir(packaged_minilm_dir()) == fast.served_dir("default") != packaged_minilm_dir()
    assert slow.served_dir(packaged_minilm_dir()) == packaged_minilm_dir()
    assert fast.served_dir("minilm-torch") == packaged_minilm_dir()  # a name that asks for a form gets it
    assert slow.served_dir("minilm-onnx") == fast.served_dir("default")


def test_a_query_vector_does_not_depend_on_its_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    """Queries run the per-token int8 graph: what shares a query's encoder pass (concurrent requests batched
    together) does not change its vector, so results at concurrency 8 equal those at concurrency 1."""
    monkeypatch.delenv("VELA_ENCODER", raising=False)
    e = EmbedderCache().get("default")
    queries = ["what causes tides", "graphene", "insulin resistance in type 2 diabetes and obesity in adults " * 3]
    alone = np.stack([e.encode_queries([q])[0] for q in queries])
    np.testing.assert_array_equal(e.encode_queries(queries), alone)
    np.testing.assert_array_equal(e.encode_queries(queries[::-1])[::-1], alone)
