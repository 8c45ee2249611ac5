"""What the resource mixins call on their client: `SyncBase` for `VelaClient`'s, `AsyncBase` for `AsyncVelaClient`'s.

Each client inherits its base through its mixins (sync_documents.py, sync_collections.py, sync_snapshots.py and
their async twins)
and defines `_send` (one request, with retries) and `_submit` (a write that starts a job, then maybe waits for it);
the stubs here only give the mixins those signatures to type-check against.
"""

from __future__ import annotations

from typing import TypeVar

from vela_client.models import Job, JobAccepted
from vela_client.routes import Call
from vela_client.waiting import AsyncProgressCallback, ProgressCallback

T = TypeVar("T")


class SyncBase:
    """The transport `VelaClient` gives its mixins."""

    def _send(self, call: Call[T]) -> T:
        raise NotImplementedError

    def _submit(
        self, call: Call[JobAccepted], wait: bool, on_progress: ProgressCallback | None, timeout: float | None
    ) -> JobAccepted | Job:
        raise NotImplementedError


class AsyncBase:
    """The transport `AsyncVelaClient` gives its mixins."""

    async def _send(self, call: Call[T]) -> T:
        raise NotImplementedError

    async def _submit(
        self, call: Call[JobAccepted], wait: bool, on_progress: AsyncProgressCallback | None, timeout: float | None
    ) -> JobAccepted | Job:
        raise NotImplementedError
