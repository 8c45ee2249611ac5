"""Micro-batching: concurrent queries share forward passes and get exactly their own vectors back."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from models import EmbedderCache
from service.batching import MicroBatcher, QueryEncoders


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

    def encode_queries(self, texts: Sequence[str], *, batch_size: int = 64) -> np.ndarray:
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
    assert encoders.get(str(tiny_embedder_dir)) is cache.get(tiny_embedder_dir)
    batched = QueryEncoders(cache, max_batch=8, max_wait_ms=1)
    try:
        first = batched.get(str(tiny_embedder_dir))
        assert isinstance(first, MicroBatcher) and batched.get(str(tiny_embedder_dir)) is first
    finally:
        batched.stop()
