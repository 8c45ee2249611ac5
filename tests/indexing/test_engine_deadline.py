"""A search whose request has passed its deadline stops in the engine (its client has had a 503 already): between
shards, before each list, at each widening; outside a request it runs to its end."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from indexing import deadline
from indexing.engine import LOCAL_FANOUT
from indexing.engine import search as engine_search
from indexing.ranking import RankRequest
from tests.indexing.test_fusion_choice import OracleEmbedder, build, synonym_docs, synonym_vector


@pytest.mark.parametrize("mode", ["dense", "bm25", "hybrid"])
def test_a_search_past_its_deadline_stops_and_one_without_a_deadline_runs(tmp_path: Path, mode: str) -> None:
    embedder = OracleEmbedder(synonym_vector)
    coll = build(tmp_path, synonym_docs(), embedder)
    queries = ["w3s0x1 w3s0x2 common1"]
    qv = embedder.encode_queries(queries) if mode != "bm25" else None
    req = RankRequest(mode=mode, k=5)  # type: ignore[arg-type]

    with deadline.until(time.monotonic() - 1.0), pytest.raises(deadline.DeadlineExceeded):
        engine_search(coll, LOCAL_FANOUT, qv, queries, req)

    with deadline.until(time.monotonic() + 60.0):  # a deadline not yet passed: the search is answered
        (within,) = engine_search(coll, LOCAL_FANOUT, qv, queries, req)
    (free,) = engine_search(coll, LOCAL_FANOUT, qv, queries, req)  # no request, no deadline
    assert within.top == free.top and len(free.top) == 5
