"""indexing.gpu_index on a CPU host: the CPU index whenever no GPU copy can or should be made; with a fake
faiss exposing the GPU API, the copy is made on the right device and answers searches the GPU can."""

from __future__ import annotations

import threading
import types
from typing import Any

import faiss
import numpy as np
import pytest

from indexing import gpu_index, torch_flat
from indexing.gpu_index import GPU_MAX_K, GpuSearchIndex, place


def _flat(n: int, d: int = 16, seed: int = 0) -> faiss.IndexFlatIP:
    rng = np.random.default_rng(seed)
    index = faiss.IndexFlatIP(d)
    index.add(rng.standard_normal((n, d)).astype(np.float32))
    return index


class FakeGpuIndex:
    """Stands for a GpuIndexFlatIP: an exact flat index, recording what it was asked."""

    def __init__(self, source: Any, device: int) -> None:
        self.device, self.source, self.calls = device, source, []

    def search(self, x: np.ndarray, k: int) -> Any:
        self.calls.append(k)
        return self.source.search(x, k)


def _fake_faiss(gpus: int = 1) -> Any:
    copies: list[tuple[Any, int, Any]] = []

    def index_cpu_to_gpu(resources: Any, device: int, index: Any) -> FakeGpuIndex:
        copies.append((resources, device, index))
        return FakeGpuIndex(index, device)

    return types.SimpleNamespace(
        StandardGpuResources=object,
        index_cpu_to_gpu=index_cpu_to_gpu,
        get_num_gpus=lambda: gpus,
        IndexFlatIP=faiss.IndexFlatIP,
        copies=copies,
    )


@pytest.fixture(autouse=True)
def _fresh_state(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gpu_index, "_resources", {})
    monkeypatch.setattr(gpu_index, "_locks", {})
    monkeypatch.setattr(gpu_index, "_warned", set())
    monkeypatch.setattr(gpu_index, "_config", {"device": "cpu", "min_passages": 20_000})


def test_cpu_device_and_small_segments_stay_on_the_cpu() -> None:
    index = _flat(100)
    fake = _fake_faiss()
    assert place(index, "cpu", min_passages=0, faiss_module=fake) is index
    assert place(index, "cuda:0", min_passages=101, faiss_module=fake) is index  # below the threshold
    assert fake.copies == []


def test_faiss_without_gpu_support_returns_the_cpu_index(caplog: pytest.LogCaptureFixture) -> None:
    index = _flat(100)
    assert not hasattr(faiss, "StandardGpuResources")  # the faiss-cpu build of the test environment
    assert place(index, "cuda:0", min_passages=0) is index
    assert place(index, "cuda:0", min_passages=0, faiss_module=types.SimpleNamespace()) is index
    assert place(index, "cuda:0", min_passages=0, faiss_module=_fake_faiss(gpus=0)) is index
    assert sum("no GPU support" in r.getMessage() for r in caplog.records) == 1  # warned once, not per segment


def test_gpu_copy_on_the_right_device() -> None:
    index = _flat(500)
    fake = _fake_faiss()
    placed = place(index, "cuda:1", min_passages=500, faiss_module=fake)
    assert isinstance(placed, GpuSearchIndex)
    (resources, device, copied) = fake.copies[0]
    assert device == 1 and copied is index and placed.gpu == 1
    # One resources object per GPU, shared by every segment copied to it.
    place(_flat(500, seed=1), "cuda:1", min_passages=0, faiss_module=fake)
    assert fake.copies[1][0] is resources
    place(_flat(500, seed=2), "cuda:0", min_passages=0, faiss_module=fake)
    assert fake.copies[2][0] is not resources and fake.copies[2][1] == 0


def test_configured_process_defaults() -> None:
    fake = _fake_faiss()
    gpu_index.configure("cuda:0", 1000)
    small = _flat(999)
    assert place(small, faiss_module=fake) is small and fake.copies == []
    assert isinstance(place(_flat(1000), faiss_module=fake), GpuSearchIndex)


def test_search_contract_and_cpu_fallbacks() -> None:
    index = _flat(3000)
    fake = _fake_faiss()
    placed = place(index, "cuda:0", min_passages=0, faiss_module=fake)
    q = np.random.default_rng(5).standard_normal((4, 16)).astype(np.float32)
    scores, rows = placed.search(q, 10)
    want_scores, want_rows = index.search(q, 10)
    np.testing.assert_array_equal(rows, want_rows)
    np.testing.assert_allclose(scores, want_scores)
    assert placed.gpu_index.calls == [10]
    # Deleted rows (a selector) and deep searches go to the CPU index, with the caller's parameters.
    bits = np.packbits(np.ones(3000, dtype=bool), bitorder="little")
    sel = faiss.IDSelectorBitmap(3000, faiss.swig_ptr(bits))
    fa: Any = faiss
    placed.search(q, 10, params=fa.SearchParameters(sel=sel))
    placed.search(q, GPU_MAX_K + 1)
    assert placed.gpu_index.calls == [10]
    # Everything else is the CPU index's: what rescoring and the engine read.
    assert placed.ntotal == 3000 and placed.d == 16
    np.testing.assert_array_equal(placed.reconstruct_batch(np.array([3, 7])), index.reconstruct_batch(np.array([3, 7])))
    assert getattr(placed, "hnsw", None) is None


def test_hnsw_goes_to_the_gpu_as_exact_flat() -> None:
    rng = np.random.default_rng(1)
    vecs = rng.standard_normal((400, 16)).astype(np.float32)
    hnsw = faiss.IndexHNSWFlat(16, 8, faiss.METRIC_INNER_PRODUCT)
    hnsw.add(vecs)
    fake = _fake_faiss()
    placed = place(hnsw, "cuda:0", min_passages=0, faiss_module=fake)
    copied = fake.copies[0][2]
    assert isinstance(copied, faiss.IndexFlatIP) and copied.ntotal == 400
    np.testing.assert_array_equal(copied.reconstruct_n(0, 400), vecs)
    q = rng.standard_normal((2, 16)).astype(np.float32)
    params = faiss.SearchParametersHNSW(efSearch=64)  # HNSW-only parameters: the exact copy ignores them
    _, rows = placed.search(q, 5, params=params)
    np.testing.assert_array_equal(rows, np.argsort(-(q @ vecs.T), axis=1, kind="stable")[:, :5])


def test_an_index_faiss_cannot_copy_stays_on_the_cpu() -> None:
    fake = _fake_faiss()

    def refuse(resources: Any, device: int, index: Any) -> Any:
        raise RuntimeError("not implemented for this type of index")

    fake.index_cpu_to_gpu = refuse
    index = _flat(10)
    assert place(index, "cuda:0", min_passages=0, faiss_module=fake) is index


def test_gpu_searches_are_serialised() -> None:
    fake = _fake_faiss()
    placed = place(_flat(50), "cuda:0", min_passages=0, faiss_module=fake)
    assert isinstance(placed._lock, type(threading.Lock()))


def test_backend_choice() -> None:
    assert gpu_index.backend(_fake_faiss(), torch_cuda=True) == "faiss"  # faiss-gpu first
    assert gpu_index.backend(faiss, torch_cuda=True) == "torch"
    assert gpu_index.backend(faiss, torch_cuda=False) == "none"
    assert gpu_index.backend(faiss) == "none"  # this host: faiss-cpu, CPU torch


def test_without_faiss_gpu_torch_makes_the_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[str] = []
    from_index = torch_flat.from_index

    def on_cpu(index: Any, device: str) -> Any:  # the copy a CUDA host would make, made on this CPU
        made.append(device)
        return from_index(index, "cpu")

    monkeypatch.setattr(torch_flat, "from_index", on_cpu)
    index = _flat(300)
    placed = place(index, "cuda:1", min_passages=0, torch_cuda=True)
    assert isinstance(placed, GpuSearchIndex) and made == ["cuda:1"] and placed.gpu == 1
    q = np.random.default_rng(3).standard_normal((5, 16)).astype(np.float32)
    scores, rows = placed.search(q, 10)
    want_scores, want_rows = index.search(q, 10)
    np.testing.assert_array_equal(rows, want_rows)
    np.testing.assert_allclose(scores, want_scores, rtol=1e-5, atol=1e-5)
    # HNSW goes as its stored vectors; an L2 index (not what segments hold) stays on the CPU.
    hnsw = faiss.IndexHNSWFlat(16, 8, faiss.METRIC_INNER_PRODUCT)
    hnsw.add(np.random.default_rng(4).standard_normal((50, 16)).astype(np.float32))
    assert isinstance(place(hnsw, "cuda:0", min_passages=0, torch_cuda=True), GpuSearchIndex)
    l2 = faiss.IndexFlatL2(16)
    l2.add(np.zeros((3, 16), np.float32))
    assert place(l2, "cuda:0", min_passages=0, torch_cuda=True) is l2
