"""Micro-batching: concurrent queries share forward passes and get exactly their own vectors back."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from models import EmbedderCache
from service.batching import Chunked, MicroBatcher, QueryEncoders


def test_concurrent_queries_are_coalesced_and_answered_exactly(tiny_embedder_dir: Path) -> None:
    embedder = EmbedderCache().get(tiny_embedder_dir)
    batcher = MicroBatcher(embedder, max_batch=64, max_wait_ms=200)
    queries = [f"query number {i} about topic {i % 3}" for i in range(16)]
    start = threading.Barrier(len(queries))

    def one(q: str) -> np.ndarray:
        start.wait()
        return batcher.encode_queries([q])

    try:
        with ThreadPoolExecutor(len(queries)) as pool:
            got = list(pool.map(one, queries))
    finally:
        batcher.stop()
    expected = embedder.encode_queries(queries)  # (16, d)
    for q_vec, e_vec in zip(got, expected, strict=True):
        assert q_vec.shape == (1, embedder.dim)
        assert np.allclose(q_vec[0], e_vec, atol=1e-5)  # padding to a longer batch changes nothing
    assert batcher.texts == len(queries)
    assert batcher.batches <= 4, f"{batcher.batches} passes for {len(queries)} concurrent queries"


def test_a_lone_query_waits_at_most_the_window_and_multi_text_requests_stay_in_order(
    tiny_embedder_dir: Path,
) -> None:
    embedder = EmbedderCache().get(tiny_embedder_dir)
    batcher = MicroBatcher(embedder, max_batch=4, max_wait_ms=0)
    try:
        texts = ["a b c", "the longest text of the three texts here", "x"]
        assert np.allclose(batcher.encode_queries(texts), embedder.encode_queries(texts), atol=1e-5)
    finally:
        batcher.stop()
    with pytest.raises(RuntimeError, match="stopped"):
        batcher.encode_queries(["late"])


class _Broken:
    name = "broken"

    def encode_queries(self, texts: Sequence[str], *, batch_size: int = 64, context: object = None) -> np.ndarray:
        raise ValueError("encoder exploded")


def test_an_encoder_error_reaches_every_waiter_and_the_batcher_keeps_serving() -> None:
    batcher = MicroBatcher(_Broken(), max_batch=8, max_wait_ms=50)  # type: ignore[arg-type]
    try:
        with ThreadPoolExecutor(4) as pool:
            futures = [pool.submit(batcher.encode_queries, [f"q{i}"]) for i in range(4)]
            for f in futures:
                with pytest.raises(ValueError, match="exploded"):
                    f.result(timeout=10)
        with pytest.raises(ValueError, match="exploded"):
            batcher.encode_queries(["again"])
    finally:
        batcher.stop()


def test_max_batch_one_turns_batching_off(tiny_embedder_dir: Path) -> None:
    cache = EmbedderCache()
    encoders = QueryEncoders(cache, max_batch=1, max_wait_ms=1)
    plain = encoders.get(str(tiny_embedder_dir))  # no micro-batching: the embedder, its passes checked for the deadline
    assert isinstance(plain, Chunked) and plain.embedder is cache.get(tiny_embedder_dir)
    batched = QueryEncoders(cache, max_batch=8, max_wait_ms=1)
    try:
        first = batched.get(str(tiny_embedder_dir))
        assert isinstance(first, MicroBatcher) and batched.get(str(tiny_embedder_dir)) is first
    finally:
        batched.stop()


class _ContextEcho:
    """Encodes a text as [context marker, len(text)] and records what each forward pass held."""

    name = "echo"

    def __init__(self) -> None:
        self.passes: list[set[str | None]] = []

    def encode_queries(self, texts: Sequence[str], *, batch_size: int = 64, context: Any = None) -> np.ndarray:
        time.sleep(0.01)  # long enough that requests pile up behind a pass
        self.passes.append({context.id if context is not None else None})
        marker = float(context.vectors[0, 0]) if context is not None else -1.0
        return np.array([[marker, len(t)] for t in texts], dtype=np.float32)


def test_requests_share_a_pass_only_when_they_share_a_context() -> None:
    from models.cde.context import CorpusContext

    contexts = [None] + [CorpusContext(np.full((2, 2), i, np.float32), ("a", "b"), "fp") for i in (1, 2)]
    echo = _ContextEcho()
    batcher = MicroBatcher(echo, max_batch=64, max_wait_ms=20)  # type: ignore[arg-type]
    try:
        with ThreadPoolExecutor(12) as pool:
            jobs = [(i, contexts[i % 3]) for i in range(36)]
            futures = [pool.submit(batcher.encode_queries, ["x" * i], context=c) for i, c in jobs]
            for (i, c), f in zip(jobs, futures, strict=True):
                marker = -1.0 if c is None else float(c.vectors[0, 0])
                np.testing.assert_array_equal(f.result(timeout=10), [[marker, i]])
    finally:
        batcher.stop()
    assert all(len(p) == 1 for p in echo.passes)  # no pass mixed two contexts
    assert len(echo.passes) < 36  # and requests of one context did share passes
