"""An exact inner-product flat index on a torch device: the GPU copy when faiss has no GPU support.

faiss-gpu's wheels are built against CUDA 12 and bring their own CUDA 12 runtime and cuBLAS (about a gigabyte);
a host whose CUDA torch is another build (CUDA 13 today) already has everything a flat search needs: one GEMM
and a top-k. So where `faiss.StandardGpuResources` is missing but torch sees the GPU, `indexing.gpu_index`
copies the segment's vectors here instead of leaving dense search on the CPU.

The results contract is faiss' `IndexFlatIP.search`: float32 scores and int64 row ids, (nq, k) each, best
first; where k exceeds the rows, the tail is row -1 with score -FLT_MAX. Scores are fp32 products (torch
leaves TF32 off for float32 matrix products unless a program turns it on), so they match the CPU index to float
rounding, and the rows match except where two candidates tie within it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

MISSING_SCORE = float(np.finfo(np.float32).min)  # what faiss reports for a result slot with no row
# Queries per product: the (queries, rows) score block stays under 2**28 floats (1 GiB) however large the index.
BLOCK_FLOATS = 1 << 28


class TorchFlatIP:
    """`search(x, k)` over `vectors` (n, d) held on `device` in fp32, as faiss.IndexFlatIP answers it."""

    def __init__(self, vectors: np.ndarray, device: str) -> None:
        import torch

        self._torch = torch
        self.device = torch.device(device)
        vecs = np.ascontiguousarray(vectors, dtype=np.float32)
        self.ntotal, self.d = int(vecs.shape[0]), int(vecs.shape[1])
        self.vectors = torch.from_numpy(vecs).to(self.device)  # (n, d) fp32

    def search(self, x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        torch = self._torch
        q = np.ascontiguousarray(x, dtype=np.float32).reshape(-1, self.d)  # (nq, d)
        nq, k = q.shape[0], int(k)
        scores = np.full((nq, k), MISSING_SCORE, dtype=np.float32)
        rows = np.full((nq, k), -1, dtype=np.int64)
        top = min(k, self.ntotal)
        if nq == 0 or top == 0:
            return scores, rows
        step = max(1, BLOCK_FLOATS // max(1, self.ntotal))
        with torch.inference_mode():
            for start in range(0, nq, step):
                block = torch.from_numpy(q[start : start + step]).to(self.device)  # (b, d)
                values, ids = torch.topk(block @ self.vectors.T, top, dim=1)  # (b, n) -> (b, top)
                scores[start : start + step, :top] = values.cpu().numpy()
                rows[start : start + step, :top] = ids.cpu().numpy()
        return scores, rows


def torch_cuda_available() -> bool:
    """Whether torch is importable and sees a CUDA device (no import error for a CPU-only host)."""
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency
        return False
    return bool(torch.cuda.is_available())


def from_index(index: Any, device: str) -> TorchFlatIP:
    """A TorchFlatIP of a CPU faiss index's stored vectors (flat or HNSW, inner product)."""
    vectors = index.reconstruct_n(0, index.ntotal) if index.ntotal else np.zeros((0, index.d), np.float32)
    return TorchFlatIP(vectors, device)
