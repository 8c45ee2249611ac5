"""Dense search on the GPU: a GPU copy of a segment's CPU FAISS index, above a size threshold.

The CPU index stays the source of truth: it is what is written to and read from disk, what rows are
reconstructed from (rescoring) and what every search the GPU cannot answer goes to. `place(index)` returns
either the CPU index itself or a `GpuSearchIndex` that answers `search` on the GPU and forwards every other
attribute to the CPU index, so callers need not know which they hold.

What goes to the GPU: flat inner-product indexes, and HNSW ones as an exact GPU flat index over the HNSW's
stored vectors (exact top-k: what `VELA_DENSE_INDEX=flat` returns, never worse than the graph's). What stays on
the CPU: the fp16 Matryoshka prefix index (FAISS has no GPU scalar-quantizer flat index), segments below
VELA_GPU_MIN_PASSAGES, searches with a row selector (deleted rows) and searches asking for more than the GPU's
top-k limit.

Two GPU backends, chosen once per process: faiss-gpu's GpuIndexFlatIP where faiss was built with GPU support
(the `gpu` extra), else an exact torch flat index (indexing/torch_flat.py) where torch sees the GPU, as on a
host whose CUDA stack faiss-gpu's CUDA 12 wheels do not match. Both answer with faiss' results contract. With
neither, everything stays on the CPU (logged once).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import numpy as np

from indexing import torch_flat

log = logging.getLogger("vela.gpu_index")

# faiss' GPU k-selection handles k up to 2048; a deeper search is answered by the CPU index.
GPU_MAX_K = 2048

_config: dict[str, Any] = {"device": "cpu", "min_passages": 20_000}
_resources: dict[int, Any] = {}  # one StandardGpuResources per GPU, per process
_locks: dict[int, threading.Lock] = {}  # a GPU's resources serve one search at a time (not thread-safe)
_guard = threading.Lock()
_warned: set[str] = set()


def configure(device: str, min_passages: int) -> None:
    """The process's resolved device (models.device.resolve_device) and threshold; set once at start-up."""
    _config["device"], _config["min_passages"] = device, int(min_passages)


def _faiss() -> Any:
    import faiss

    return faiss


def gpu_support(faiss_module: Any) -> bool:
    """Whether this faiss build can copy indexes to a GPU and sees one."""
    if not all(hasattr(faiss_module, a) for a in ("StandardGpuResources", "index_cpu_to_gpu")):
        return False
    get_num_gpus = getattr(faiss_module, "get_num_gpus", None)
    return get_num_gpus is None or int(get_num_gpus()) > 0


def _warn_once(key: str, message: str, level: int = logging.WARNING, **extra: Any) -> None:
    if key not in _warned:
        _warned.add(key)
        log.log(level, message, extra=extra)


def _gpu_resources(faiss_module: Any, gpu: int) -> tuple[Any, threading.Lock]:
    with _guard:
        if gpu not in _resources:
            _resources[gpu] = faiss_module.StandardGpuResources()
            _locks[gpu] = threading.Lock()
        return _resources[gpu], _locks[gpu]


def _flat_source(index: Any, faiss_module: Any) -> Any:
    """The index to copy: the index itself, or for HNSW a flat inner-product index of its stored vectors."""
    if getattr(index, "hnsw", None) is None:
        return index
    flat = faiss_module.IndexFlatIP(index.d)
    if index.ntotal:
        flat.add(index.reconstruct_n(0, index.ntotal))  # (n, d): the vectors the graph links
    return flat


class GpuSearchIndex:
    """`search` on a GPU copy; every other attribute (ntotal, d, reconstruct_batch, hnsw, ...) is the CPU index's."""

    def __init__(self, cpu: Any, gpu_index: Any, gpu: int, lock: threading.Lock) -> None:
        self.cpu, self.gpu_index, self.gpu, self._lock = cpu, gpu_index, gpu, lock

    def __getattr__(self, name: str) -> Any:  # only for what this class does not define itself
        if name in ("cpu", "gpu_index"):  # not set yet (copying, unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.cpu, name)

    def search(self, x: np.ndarray, k: int, params: Any = None, **kw: Any) -> Any:
        selector = getattr(params, "sel", None) if params is not None else None
        if k > GPU_MAX_K or selector is not None or kw:
            # Deleted rows (an IDSelector) and deep searches: the CPU index answers, with the same parameters.
            return self.cpu.search(x, k, params=params, **kw) if params is not None else self.cpu.search(x, k, **kw)
        with self._lock:  # HNSW-only parameters (efSearch) do not apply to the exact GPU copy
            return self.gpu_index.search(np.ascontiguousarray(x, dtype=np.float32), k)


def backend(faiss_module: Any = None, *, torch_cuda: bool | None = None) -> str:
    """Which GPU copy this process makes: 'faiss' (faiss built with GPU support), 'torch' (torch sees a CUDA
    device) or 'none'."""
    if gpu_support(_faiss() if faiss_module is None else faiss_module):
        return "faiss"
    return "torch" if (torch_flat.torch_cuda_available() if torch_cuda is None else torch_cuda) else "none"


def _torch_lock(gpu: int) -> threading.Lock:
    with _guard:
        return _locks.setdefault(gpu, threading.Lock())


def place(
    index: Any,
    device: str | None = None,
    *,
    min_passages: int | None = None,
    faiss_module: Any = None,
    torch_cuda: bool | None = None,
) -> Any:
    """The index to search with on `device` (default: the process's, set by `configure`): a GpuSearchIndex
    when the device is CUDA, a GPU backend is there (`backend`) and the index holds at least `min_passages`
    rows (default VELA_GPU_MIN_PASSAGES); else `index` itself. Never raises for a missing GPU: the CPU index
    always works."""
    device = _config["device"] if device is None else device
    min_passages = _config["min_passages"] if min_passages is None else min_passages
    if not device.startswith("cuda") or index.ntotal < min_passages:
        return index
    fa = _faiss() if faiss_module is None else faiss_module
    kind = backend(fa, torch_cuda=torch_cuda)
    if kind == "none":
        _warn_once(
            "no-gpu-faiss",
            "device is CUDA but neither faiss (no GPU support) nor torch (no CUDA device) can search on it: "
            "dense search stays on the CPU (install the gpu extra and the CUDA build of torch as the README says)",
            device=device,
        )
        return index
    gpu = int(device.partition(":")[2] or 0)
    try:
        if kind == "faiss":
            resources, lock = _gpu_resources(fa, gpu)
            gpu_index = fa.index_cpu_to_gpu(resources, gpu, _flat_source(index, fa))
        elif getattr(index, "metric_type", 0) != getattr(fa, "METRIC_INNER_PRODUCT", 0):
            raise RuntimeError("the torch GPU copy is inner-product only")
        else:
            lock, gpu_index = _torch_lock(gpu), torch_flat.from_index(index, f"cuda:{gpu}")
    except (RuntimeError, AttributeError) as e:  # an index type the backend cannot copy, or out of memory
        _warn_once(f"copy-{type(index).__name__}", "index kept on the CPU", index=type(index).__name__, error=str(e))
        return index
    _warn_once(f"backend-{kind}", "dense search on the GPU", logging.INFO, backend=kind, device=device)
    return GpuSearchIndex(index, gpu_index, gpu, lock)
