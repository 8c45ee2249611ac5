"""Query encoding stops for a request whose deadline has passed or whose client has gone: the micro-batcher drops
it before the next pass (the requests behind it go on), the unbatched encoder checks between its passes, and the
request guard sets the 'gone' flag when the connection closes after the body."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from starlette.types import Message, Receive, Scope, Send

from indexing import deadline
from service.batching import Chunked, MicroBatcher
from service.middleware import request_guard


class _Slow:
    """Encodes a text as [len(text)], pausing on every pass, and counts the texts of each pass."""

    name = "slow"

    def __init__(self, pause_s: float) -> None:
        self.pause_s = pause_s
        self.passes: list[int] = []

    def encode_queries(self, texts: Sequence[str], *, context: Any = None) -> np.ndarray:
        time.sleep(self.pause_s)
        self.passes.append(len(texts))
        return np.array([[len(t)] for t in texts], dtype=np.float32)


def test_a_request_whose_client_went_away_leaves_the_batcher_and_the_others_are_served() -> None:
    slow = _Slow(pause_s=0.05)
    batcher = MicroBatcher(slow, max_batch=8, max_wait_ms=0)  # type: ignore[arg-type]
    gone = threading.Event()
    failed: list[BaseException] = []

    def abandoned() -> None:
        with deadline.until(None, gone):
            try:
                batcher.encode_queries(["q"] * 800)  # 100 passes of 8 if it ran to its end
            except deadline.DeadlineExceeded as exc:
                failed.append(exc)

    try:
        worker = threading.Thread(target=abandoned)
        worker.start()
        time.sleep(0.2)
        gone.set()
        worker.join(5)
        assert failed and not worker.is_alive()
        assert sum(slow.passes) < 100  # a few passes of 8, then nothing more for it
        served = sum(slow.passes)
        np.testing.assert_array_equal(batcher.encode_queries(["abc"] * 20), [[3]] * 20)  # the encoder goes on
        assert sum(slow.passes) == served + 20
    finally:
        batcher.stop()


def test_a_request_past_its_deadline_is_not_encoded_and_one_with_time_left_is() -> None:
    slow = _Slow(pause_s=0.0)
    batcher = MicroBatcher(slow, max_batch=4, max_wait_ms=0)  # type: ignore[arg-type]
    try:
        with deadline.until(time.monotonic() - 1), pytest.raises(deadline.DeadlineExceeded):
            batcher.encode_queries(["q"] * 40)
        assert slow.passes == []
        with deadline.until(time.monotonic() + 60):
            assert batcher.encode_queries(["ab"] * 10).shape == (10, 1)
    finally:
        batcher.stop()


def test_the_unbatched_encoder_checks_its_budget_between_passes() -> None:
    slow = _Slow(pause_s=0.0)
    chunked = Chunked(slow, size=8)  # type: ignore[arg-type]
    np.testing.assert_array_equal(chunked.encode_queries(["a", "bb"] * 10), [[1], [2]] * 10)
    assert slow.passes == [8, 8, 4]
    with deadline.until(time.monotonic() - 1), pytest.raises(deadline.DeadlineExceeded):
        chunked.encode_queries(["q"] * 40)
    assert slow.passes == [8, 8, 4]


def test_the_guard_marks_a_request_gone_when_its_client_disconnects_after_the_body() -> None:
    saw: list[str] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        assert (await receive())["type"] == "http.request"

        def work() -> None:  # a computation in a thread, as a search's is: it checks its budget as it goes
            for _ in range(500):
                try:
                    deadline.check()
                except deadline.DeadlineExceeded:
                    saw.append("stopped")
                    return
                time.sleep(0.01)
            saw.append("ran to its end")

        await asyncio.get_running_loop().run_in_executor(None, deadline_context_copy(work))

    messages = [{"type": "http.request", "body": b"{}", "more_body": False}]

    async def receive() -> Message:
        if messages:
            return messages.pop()
        await asyncio.sleep(0.2)  # the client hangs up while the work runs
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        pass

    guarded = request_guard(app, timeout_s=30, window_s=5, min_bytes=1)
    began = time.monotonic()
    asyncio.run(guarded({"type": "http", "method": "POST", "path": "/x", "headers": []}, receive, send))
    assert saw == ["stopped"] and time.monotonic() - began < 3


def deadline_context_copy(fn: Any) -> Any:
    """`fn` run in the caller's context (as Starlette's thread pool runs a route)."""
    import contextvars

    ctx = contextvars.copy_context()
    return lambda: ctx.run(fn)
