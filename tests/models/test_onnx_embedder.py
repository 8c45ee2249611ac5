"""ONNX backend: export the tiny random BERT (fp32 and int8), load through the normal loader, compare."""

from __future__ import annotations

import dataclasses
import json
import threading
from pathlib import Path

import numpy as np
import pytest

from models import Embedder, EmbedderCache, EmbedderConfig, load_embedder
from models.embedder.configuration_embedder import CONFIG_NAME
from models.embedder.onnx_embedder import OnnxEmbedder
from models.onnx_export import export

TEXTS = [
    "what causes tides",
    "a much longer text about the gravity of the moon and the sun " * 3,
    "photosynthesis",
]


@pytest.fixture(scope="module")
def exported(tiny_embedder_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("onnx")
    return {
        "fp32": export(str(tiny_embedder_dir), str(root / "fp32"), quantize=False),
        "int8": export(str(tiny_embedder_dir), str(root / "int8")),
    }


def test_loader_picks_the_onnx_backend(exported: dict[str, Path], tiny_embedder_dir: Path) -> None:
    torch_emb = load_embedder(tiny_embedder_dir)
    for precision, path in exported.items():
        e = load_embedder(path)
        assert isinstance(e, OnnxEmbedder) and isinstance(e, Embedder)
        assert e.config.backend == "onnx" and e.precision == precision and e.device == "cpu"
        assert (e.dim, e.max_tokens) == (torch_emb.dim, torch_emb.max_tokens)
        assert e.tokenizer.vocab_size == torch_emb.tokenizer.vocab_size
        assert {"model.onnx", "config.json", "tokenizer.json", CONFIG_NAME} <= {p.name for p in path.iterdir()}
    # The cache keys by directory, as for torch embedders.
    cache = EmbedderCache()
    assert cache.get(exported["int8"]) is cache.get(str(exported["int8"]))


def test_fp32_matches_torch(exported: dict[str, Path], tiny_embedder_dir: Path) -> None:
    torch_emb, onnx_emb = load_embedder(tiny_embedder_dir), load_embedder(exported["fp32"])
    np.testing.assert_allclose(onnx_emb.encode_queries(TEXTS), torch_emb.encode_queries(TEXTS), atol=1e-4)
    np.testing.assert_allclose(onnx_emb.encode_documents(TEXTS), torch_emb.encode_documents(TEXTS), atol=1e-4)


def test_int8_is_close_to_torch(exported: dict[str, Path], tiny_embedder_dir: Path) -> None:
    want = load_embedder(tiny_embedder_dir).encode_documents(TEXTS)  # (n, d), unit rows
    got = load_embedder(exported["int8"]).encode_documents(TEXTS)  # (n, d), unit rows
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    assert (got * want).sum(1).min() > 0.95


def test_concurrent_calls_agree(exported: dict[str, Path]) -> None:
    e = load_embedder(exported["int8"])
    want = e.encode_queries(TEXTS)
    results: list[np.ndarray] = []

    def work() -> None:
        results.append(e.encode_queries(TEXTS))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 4 and all(np.allclose(r, want, atol=1e-6) for r in results)


def test_config_round_trip_with_backend(exported: dict[str, Path], tiny_embedder_dir: Path, tmp_path: Path) -> None:
    source = EmbedderConfig.from_dir(tiny_embedder_dir)
    saved = EmbedderConfig.from_dir(exported["int8"])
    assert saved.backend == "onnx" and saved == dataclasses.replace(source, backend="onnx")
    assert EmbedderConfig.from_dict(saved.to_dict()) == saved
    # Configs written before the field existed load as torch.
    old = source.to_dict()
    del old["backend"]
    (tmp_path / CONFIG_NAME).write_text(json.dumps(old))
    assert EmbedderConfig.from_dir(tmp_path).backend == "torch"
    with pytest.raises(ValueError, match="backend"):
        EmbedderConfig(backend="tensorrt")


def test_export_refuses_to_clobber(exported: dict[str, Path], tiny_embedder_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("keep me")
    with pytest.raises(FileExistsError):
        export(str(tiny_embedder_dir), str(tmp_path))
    assert (tmp_path / "notes.txt").read_text() == "keep me"
    with pytest.raises(ValueError, match="already an ONNX embedder"):
        export(str(exported["int8"]), str(tmp_path / "again"))
    assert not any(p.name.startswith(".again") for p in tmp_path.iterdir())  # no temp dir left behind
    # An earlier export is replaced whole.
    again = tmp_path / "again"
    export(str(tiny_embedder_dir), str(again), quantize=False)
    assert load_embedder(export(str(tiny_embedder_dir), str(again))).precision == "int8"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["again", "notes.txt"]


@pytest.fixture(scope="module")
def asymmetric_dir(tiny_embedder_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model with a query encoder of its own (what `vela adapt` writes)."""
    from tests.tiny_models import save_asymmetric

    return save_asymmetric(tiny_embedder_dir, tmp_path_factory.mktemp("asym") / "model")


@pytest.mark.parametrize("quantize", [False, True])
def test_an_asymmetric_model_exports_its_query_encoder_as_the_query_graph(
    asymmetric_dir: Path, tmp_path: Path, quantize: bool
) -> None:
    out = export(str(asymmetric_dir), str(tmp_path / "onnx"), quantize=quantize)
    onnx_emb, torch_emb = load_embedder(out), load_embedder(asymmetric_dir)
    assert isinstance(onnx_emb, OnnxEmbedder) and onnx_emb.config.query_encoder == ""
    assert {"model.onnx", "model.documents.onnx"} <= {p.name for p in out.iterdir()}
    assert not (out / "query_encoder").exists()
    want_q, want_d = torch_emb.encode_queries(TEXTS), torch_emb.encode_documents(TEXTS)  # (n, d) each
    got_q, got_d = onnx_emb.encode_queries(TEXTS), onnx_emb.encode_documents(TEXTS)
    assert (want_q * want_d).sum(1).max() < 0.999  # the two sides differ, so matching each one means something
    if quantize:
        assert (got_q * want_q).sum(1).min() > 0.95 and (got_d * want_d).sum(1).min() > 0.95
    else:
        np.testing.assert_allclose(got_q, want_q, atol=1e-4)
        np.testing.assert_allclose(got_d, want_d, atol=1e-4)


def test_the_per_token_export_of_an_asymmetric_model_keeps_the_fp32_document_graph(
    asymmetric_dir: Path, tmp_path: Path
) -> None:
    out = export(str(asymmetric_dir), str(tmp_path / "onnx"), token_int8_documents=True, token_int8_queries=True)
    names = {p.name for p in out.iterdir()}
    assert {"model.onnx", "model.documents.onnx", "model.documents.fp32.onnx"} <= names
    assert (out / "model.onnx").read_bytes() != (out / "model.documents.onnx").read_bytes()


def test_an_asymmetric_model_is_served_by_its_onnx_form_where_the_default_is(
    asymmetric_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VELA_MODEL_CACHE", str(tmp_path / "cache"))
    onnx_cache, torch_cache = EmbedderCache(encoder="onnx"), EmbedderCache(encoder="torch")
    served = onnx_cache.get(asymmetric_dir)
    assert isinstance(served, OnnxEmbedder) and served.precision == "int8-token"
    assert onnx_cache.resolve(asymmetric_dir) == asymmetric_dir  # the identity a collection stores: the model's own
    assert onnx_cache.served_dir(asymmetric_dir).parent == tmp_path / "cache"
    plain = torch_cache.get(asymmetric_dir)
    assert not isinstance(plain, OnnxEmbedder) and plain.query_model is not None
    cos_q = (served.encode_queries(TEXTS) * plain.encode_queries(TEXTS)).sum(1)
    cos_d = (served.encode_documents(TEXTS) * plain.encode_documents(TEXTS)).sum(1)
    assert cos_q.min() > 0.95 and cos_d.min() > 0.95
    # A second cache (another process) finds the export made: the same directory, nothing exported again.
    assert EmbedderCache(encoder="onnx").served_dir(asymmetric_dir) == onnx_cache.served_dir(asymmetric_dir)


@pytest.mark.parametrize(("base", "onnx"), [(None, True), ("default", True), ("c1", False)])
def test_a_model_adapted_from_another_model_keeps_that_models_torch_form(
    asymmetric_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, base: str | None, onnx: bool
) -> None:
    # Its document side is its base's: served as an int8 graph while the base (a trained torch model) is served
    # as torch, its vectors differed, and a collection reindexed from the base to it embedded every document
    # again (and into int8 vectors) instead of keeping the ones it had.
    import json
    import shutil

    from models.loading import onnx_servable

    model = tmp_path / "model"
    shutil.copytree(asymmetric_dir, model)
    if base is not None:
        (model / "training_args.json").write_text(json.dumps({"recipe": "adapt", "base_model": base}))
    assert onnx_servable(model) is onnx
    monkeypatch.setenv("VELA_MODEL_CACHE", str(tmp_path / "cache"))
    served = EmbedderCache(encoder="onnx").served_dir(model)
    assert (served == model) is not onnx
