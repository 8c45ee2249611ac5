"""Process-wide OpenMP behaviour, set before torch (and through it FAISS) loads an OpenMP runtime.

torch and faiss-cpu each ship a libgomp. Loaded torch first, FAISS's calls bind to torch's runtime (torch loads it
into the global symbol scope), so the process has one OpenMP thread pool; loaded FAISS first, each keeps its own and
the two pools compete for the cores (service.main imports models first for this reason; tests/test_import_order.py
checks it). Idle OpenMP threads then sleep instead of spinning (OMP_WAIT_POLICY=PASSIVE, unless the environment
says otherwise): a spinning pool holds a core that the other pools of the process (ONNX Runtime's, the HTTP
server's) or other processes on a small machine need. On two cores under a load average of about 10, encode +
dense search of one query took a median 437 ms spinning and 14 ms passive with the torch encoder, and 60 vs 23 ms
with the ONNX Runtime one (docs/performance.md).
"""

from __future__ import annotations

import os

# Read by libgomp once, when it is loaded: this module must run before `import torch` / `import faiss`.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
