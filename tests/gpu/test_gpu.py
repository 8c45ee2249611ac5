"""The CUDA path on real hardware (marker `gpu`, `make test-gpu`): skipped on hosts without CUDA.

GPU vs CPU dense search top-10, the bf16 GPU encoder vs the fp32 CPU one, and one contrastive training step."""

from __future__ import annotations

import json
from pathlib import Path

import faiss
import numpy as np
import pytest
import torch

from indexing.gpu_index import GpuSearchIndex, gpu_support, place
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


@pytest.mark.skipif(not gpu_support(faiss), reason="faiss without GPU support (install the gpu extra)")
def test_gpu_flat_index_top10_matches_the_cpu_index() -> None:
    rng = np.random.default_rng(0)
    n, d = 100_000, 384  # the size of the 100k bench corpus, MiniLM's dims
    vecs = rng.standard_normal((n, d)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    cpu = faiss.IndexFlatIP(d)
    cpu.add(vecs)
    placed = place(cpu, "cuda:0", min_passages=1)
    assert isinstance(placed, GpuSearchIndex)
    queries = rng.standard_normal((500, d)).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    cpu_scores, cpu_rows = cpu.search(queries, 10)
    gpu_scores, gpu_rows = placed.search(queries, 10)
    np.testing.assert_allclose(gpu_scores, cpu_scores, atol=1e-4)
    # Identical rows, except where two candidates tie within float rounding.
    same = (gpu_rows == cpu_rows).all(axis=1)
    assert same.mean() >= 0.99, same.mean()


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
