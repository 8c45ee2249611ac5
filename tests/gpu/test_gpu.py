"""The CUDA path on real hardware (marker `gpu`, `make test-gpu`): skipped on hosts without CUDA.

GPU vs CPU dense search top-10, the bf16 GPU encoder vs the fp32 CPU one, and one contrastive training step."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import faiss
import numpy as np
import pytest
import torch

from indexing import torch_flat
from indexing.gpu_index import GPU_MAX_K, GpuSearchIndex, backend, gpu_support, place
from models import load_embedder
from models.device import resolve_device, resolve_precision

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


def test_auto_resolves_to_cuda_in_bf16() -> None:
    device = resolve_device("auto")
    assert device == "cuda:0"
    major, _ = torch.cuda.get_device_capability(0)
    assert resolve_precision("auto", device) == ("bf16" if major >= 8 else "fp32")


def _unit(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    v = rng.standard_normal((n, d)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


@pytest.mark.parametrize("backend", ["faiss", "torch"])
def test_gpu_flat_index_top10_matches_the_cpu_index(backend: str) -> None:
    if backend == "faiss" and not gpu_support(faiss):
        pytest.skip("faiss without GPU support (install the gpu extra)")
    rng = np.random.default_rng(0)
    n, d = 100_000, 384  # the size of the 100k bench corpus, MiniLM's dims
    cpu = faiss.IndexFlatIP(d)
    cpu.add(_unit(rng, n, d))
    if backend == "torch":
        placed: Any = torch_flat.from_index(cpu, "cuda:0")
    else:
        placed = place(cpu, "cuda:0", min_passages=1)
        assert isinstance(placed, GpuSearchIndex)
    queries = _unit(rng, 500, d)
    cpu_scores, cpu_rows = cpu.search(queries, 10)
    gpu_scores, gpu_rows = placed.search(queries, 10)
    np.testing.assert_allclose(gpu_scores, cpu_scores, atol=1e-4)
    # Identical rows, except where two candidates tie within float rounding.
    same = (gpu_rows == cpu_rows).all(axis=1)
    assert same.mean() >= 0.99, same.mean()


def test_place_picks_a_gpu_backend_and_keeps_the_contract() -> None:
    """Whichever backend this host has (faiss-gpu, else torch), `place` puts a segment's index on the GPU,
    and deleted rows (a selector) and deep searches still go to the CPU index."""
    assert backend() in ("faiss", "torch")
    rng = np.random.default_rng(1)
    cpu = faiss.IndexFlatIP(64)
    cpu.add(_unit(rng, 5000, 64))
    placed = place(cpu, "cuda:0", min_passages=1)
    assert isinstance(placed, GpuSearchIndex)
    q = _unit(rng, 8, 64)
    np.testing.assert_array_equal(placed.search(q, 20)[1], cpu.search(q, 20)[1])
    fa: Any = faiss
    bits = np.packbits(np.arange(5000) % 2 == 0, bitorder="little")  # even rows only
    params = fa.SearchParameters(sel=faiss.IDSelectorBitmap(5000, faiss.swig_ptr(bits)))
    rows = placed.search(q, 10, params=params)[1]
    assert (rows % 2 == 0).all()
    assert placed.search(q, GPU_MAX_K + 1)[1].shape == (8, GPU_MAX_K + 1)


def test_bf16_gpu_encoder_matches_the_fp32_cpu_one() -> None:
    texts = [f"passage {i} about {t}" for i, t in enumerate(["tides", "insulin", "graphs", "proteins"] * 16)]
    cpu = load_embedder("default", device="cpu", precision="fp32").encode_documents(texts)
    gpu = load_embedder("default", device="cuda:0", precision="bf16").encode_documents(texts)
    cos = (cpu * gpu).sum(1) / (np.linalg.norm(cpu, axis=1) * np.linalg.norm(gpu, axis=1))
    assert cos.min() >= 0.999, cos.min()


def test_one_contrastive_training_step_on_cuda(
    tmp_path: Path, tiny_embedder_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cli.main import main as vela
    from tests.tiny_models import write_topic_corpus

    corpus = write_topic_corpus(tmp_path / "corpus")
    out = tmp_path / "out"
    monkeypatch.setenv("VELA_DEVICE", "cuda")
    argv = [
        "train", "contrastive", "--out", str(out), "--model", str(tiny_embedder_dir),
        "--surrogate", str(tiny_embedder_dir), "--pairs", f"mine:{corpus}", "--doc_max_length", "32",
        "--batch_size", "6", "--max_steps", "1",
    ]  # fmt: skip
    monkeypatch.setattr("sys.argv", ["vela", *argv])
    assert vela(argv) == 0
    record = json.loads((out / "training_args.json").read_text())
    assert record["steps"] == 1
    bf16 = torch.cuda.get_device_capability(0)[0] >= 8  # VELA_PRECISION=auto: bf16 where the GPU has it
    assert record["training_args"]["bf16"] == bf16 and not record["training_args"]["use_cpu"]
    assert load_embedder(out, device="cuda:0").encode_documents(["insulin"]).shape == (1, 32)
