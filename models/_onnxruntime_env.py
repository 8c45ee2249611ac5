"""ONNX Runtime sends no usage telemetry from a Vela process, unless the environment asks for it.

Since 1.2x its Linux wheels carry a OneDS telemetry client: a few seconds after a session is created, threads of
its own resolve and post to mobile.events.data.microsoft.com, and keep retrying where the network is closed. A
search service must not phone home, nor stall on DNS in an air-gapped cluster. `onnxruntime.disable_telemetry_events()`
does not stop it (measured: the lookups still happen); ORT_DISABLE_TELEMETRY=1 does, and ONNX Runtime reads it when
the library loads, so this module runs before anything imports onnxruntime (models/__init__.py imports it first).
tests/models/test_onnxruntime_env.py checks both halves under strace; tests/test_import_order.py that it runs first.
"""

from __future__ import annotations

import os

os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
