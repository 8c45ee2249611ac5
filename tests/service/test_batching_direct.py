"""Micro-batching without a window: a lone query runs its own pass in its own thread; concurrent ones still share."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from models import EmbedderCache
from service import timing
from service.batching import MicroBatcher


class _ThreadEcho:
    """Encodes a text as [len(text)], and records the thread and size of every forward pass."""

    name = "thread-echo"

    def __init__(self, pause_s: float = 0.0) -> None:
        self.pause_s = pause_s
        self.passes: list[tuple[str, int]] = []

    def encode_queries(self, texts: Sequence[str], *, batch_size: int = 64, context: Any = None) -> np.ndarray:
        time.sleep(self.pause_s)
        self.passes.append((threading.current_thread().name, len(texts)))
        return np.array([[len(t)] for t in texts], dtype=np.float32)


def test_a_lone_query_runs_in_the_callers_thread_and_records_its_stages() -> None:
    echo = _ThreadEcho()
    batcher = MicroBatcher(echo, max_batch=8, max_wait_ms=0)  # type: ignore[arg-type]
    try:
        timings, token = timing.begin()
        try:
            np.testing.assert_array_equal(batcher.encode_queries(["abc", "de"]), [[3], [2]])
        finally:
            timing.end(token)
    finally:
        batcher.stop()
    assert echo.passes == [(threading.current_thread().name, 2)]
    assert timings.stages["queue"] == 0.0 and timings.stages["encode"] >= 0.0
    assert (batcher.batches, batcher.texts) == (1, 2)


def test_concurrent_queries_without_a_window_share_passes_and_get_their_own_vectors() -> None:
    echo = _ThreadEcho(pause_s=0.02)  # long enough that requests pile up behind a pass
    batcher = MicroBatcher(echo, max_batch=64, max_wait_ms=0)  # type: ignore[arg-type]
    start = threading.Barrier(12)

    def one(i: int) -> np.ndarray:
        start.wait()
        return batcher.encode_queries(["x" * i])

    try:
        with ThreadPoolExecutor(12) as pool:
            got = list(pool.map(one, range(12)))
    finally:
        batcher.stop()
    for i, v in enumerate(got):
        np.testing.assert_array_equal(v, [[i]])
    assert batcher.texts == 12 and sum(n for _, n in echo.passes) == 12
    assert len(echo.passes) < 12, echo.passes  # requests that came while a pass ran shared the next one
    assert any(name.startswith("encoder-") for name, _ in echo.passes)  # those went through the encoder thread


def test_a_request_larger_than_a_pass_goes_through_the_encoder_thread(tiny_embedder_dir: Path) -> None:
    embedder = EmbedderCache().get(tiny_embedder_dir)
    batcher = MicroBatcher(embedder, max_batch=2, max_wait_ms=0)
    texts = ["one", "a second text", "three", "the fourth and longest text of all"]
    try:
        timings, token = timing.begin()
        try:
            got = batcher.encode_queries(texts)
        finally:
            timing.end(token)
    finally:
        batcher.stop()
    np.testing.assert_allclose(got, embedder.encode_queries(texts), atol=1e-5)
    assert batcher.batches == 2 and {"queue", "encode"} <= set(timings.stages)
