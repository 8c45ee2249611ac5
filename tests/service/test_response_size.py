"""The response size limit (VELA_MAX_RESPONSE_BYTES) of /search and /search/batch: a response whose size, estimated
from the hydrated hits, passes the limit is refused (413) before any of it is built; one within the limit is the
same body, byte for byte, as serialising the response models directly gives."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import tracemalloc
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

import service.api.routes.search as search_routes
import service.response_size as response_size
from service.errors import ApiError
from service.rerank import RerankOutcome
from service.search import Hit, SearchResult
from service.search_schemas import BatchSearchResponse, HitOut, PassageRef, Ranks, RerankInfo, SearchResponse
from service.settings import Settings
from tests.service.conftest import running_server, wait_job

LIMIT = 200_000
BLOB = 20_000  # bytes of metadata of each indexed document: a few hits pass LIMIT


def _hit(doc: str, pid: int, metadata: Any, *, score: float = 0.5, text: str = "a passage", **kw: Any) -> Hit:
    return Hit(
        id=doc,
        score=score,
        title=kw.pop("title", "Title"),
        text=text,
        metadata=metadata,
        passage_id=pid,
        passage_index=kw.pop("index", 0),
        start=kw.pop("start", 0),
        end=kw.pop("end", len(text)),
        ranks=kw.pop("ranks", {"dense": 1, "bm25": None}),
        **kw,
    )


def _reference(result: SearchResult) -> SearchResponse:
    """The response models as the route built them before: every hit validated with its own metadata."""
    return SearchResponse(
        hits=[
            HitOut(
                id=h.id,
                score=h.score,
                title=h.title,
                text=h.text,
                metadata=h.metadata,
                passage=PassageRef(id=h.passage_id, index=h.passage_index, start=h.start, end=h.end),
                ranks=Ranks(dense=h.ranks.get("dense"), bm25=h.ranks.get("bm25")),
                rerank_score=h.rerank_score,
                highlights=h.highlights,
            )
            for h in result.hits
        ],
        took_ms=result.took_ms,
        rerank=RerankInfo(**dataclasses.asdict(result.rerank)) if result.rerank is not None else None,
    )


def _varied() -> list[SearchResult]:
    """Hits with what the body escapes or cleans: non-ASCII, quotes and control characters, non-finite numbers,
    nesting past the response's depth limit, values that are not JSON, a rerank report, passages of one document
    with equal metadata objects, a passage shared by two queries, and highlights (none, and several)."""
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(200):
        node["d"] = {}
        node = node["d"]
    shared = _hit("z", 9, {"k": [1, 2.5, None, True]}, text="shared")
    first = [
        _hit("a", 1, {"t": "é ü 日本 🎉", 'q"': "\\\n\t\x01\x7f\u2028"}, text='say "hi"\n\ttab é 日本 🎉\x00'),
        _hit("a", 2, {"t": "é ü 日本 🎉", 'q"': "\\\n\t\x01\x7f\u2028"}, text="second passage", index=1, start=40),
        _hit("b", 3, {"nan": float("nan"), "inf": [float("-inf")], "n": 10**30, "f": 0.1}, title=""),
        _hit("c", 4, deep, score=-3.25, ranks={"dense": None, "bm25": 12345}),
        _hit("d", 5, {"odd": (1, 2), "when": Path("/x")}, score=1e22, rerank_score=0.75),
        _hit("e", 123456789, {}, title="", text="", start=10**9, end=10**9, highlights=[]),
        _hit("g", 7, {}, text="moon tides " * 2000, highlights=[(0, 4), (5, 10), (12345, 123456)]),
        shared,
    ]
    outcome = RerankOutcome(model="ce", status="timeout", top_n=50, scored=7, took_ms=12.5, error='slow "model"')
    return [
        SearchResult(hits=first, took_ms=3.0625),
        SearchResult(hits=[shared, _hit("f", 6, {"x": "y"})], took_ms=0.5, rerank=outcome),
        SearchResult(hits=[], took_ms=1.0),
    ]


def _shared_metadata(*, passages: int, queries: int, blob: int) -> list[SearchResult]:
    """Hits as hydration gives them: passages of one document, each with its own (equal) copy of the document's
    metadata, every query finding every passage."""
    meta = {"blob": "y" * blob}
    hits = [_hit("big", pid, copy.deepcopy(meta), text=f"passage {pid} " * 20, index=pid) for pid in range(passages)]
    return [SearchResult(hits=hits, took_ms=1.5) for _ in range(queries)]


# --- the estimate ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("batch", [False, True])
def test_the_estimate_is_the_body_size_or_just_above(batch: bool) -> None:
    results = _varied()
    if batch:
        body = BatchSearchResponse(results=[_reference(r) for r in results], took_ms=2.5).model_dump_json()
        slack = response_size.TOOK_MS_BYTES - len("2.5")  # the batch's took_ms is not known to the estimate
    else:
        body, slack = _reference(results[0]).model_dump_json(), 0
        results = results[:1]
    assert response_size.estimated_size(results, batch=batch) == len(body.encode()) + slack


def test_a_float_with_a_small_exponent_makes_the_estimate_a_byte_longer_never_shorter() -> None:
    result = SearchResult(hits=[_hit("a", 1, {"f": 1e-7}, score=2.5e-9, rerank_score=-1e-5)], took_ms=1e-6)
    size = len(_reference(result).model_dump_json().encode())
    assert size < response_size.estimated_size([result], batch=False) <= size + 4


# --- within the limit: the same body -----------------------------------------------------------------------------


def _state(limit: int) -> Any:
    return SimpleNamespace(settings=Settings(data_dir=Path("/nonexistent"), max_response_bytes=limit))


def test_a_response_within_the_limit_is_byte_identical_and_one_at_the_limit_passes() -> None:
    results = _varied()
    for r in results:
        expected = _reference(r).model_dump_json().encode()
        state = _state(max(len(expected), 1024))
        search_routes._check_estimate(state, [r], batch=False)
        assert search_routes._bounded(state, search_routes._to_response(r)).body == expected
    expected = BatchSearchResponse(results=[_reference(r) for r in results], took_ms=2.5).model_dump_json().encode()
    cleaned: dict[int, dict[str, Any]] = {}
    response = BatchSearchResponse(results=[search_routes._to_response(r, cleaned) for r in results], took_ms=2.5)
    assert search_routes._bounded(_state(len(expected)), response).body == expected
    with pytest.raises(ApiError) as exc:
        search_routes._bounded(_state(len(expected) - 1), response)
    assert exc.value.status_code == 413


def test_hits_of_one_metadata_object_share_its_cleaned_copy() -> None:
    results = _shared_metadata(passages=3, queries=4, blob=10)
    cleaned: dict[int, dict[str, Any]] = {}
    out = [search_routes._to_response(r, cleaned) for r in results]
    assert len(cleaned) == 3  # one per passage's metadata object, not one per hit
    assert out[0].hits[1].metadata is out[3].hits[1].metadata
    assert out[0].hits[0].metadata == {"blob": "y" * 10}


# --- over the limit: refused before anything is built ------------------------------------------------------------


@pytest.fixture(scope="module")
def tight(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    with running_server(tmp_path_factory.mktemp("size"), max_response_bytes=LIMIT) as client:
        docs = [
            {"id": f"d{i}", "text": f"moon tides sea number {i}", "metadata": {"blob": "y" * BLOB, "n": i}}
            for i in range(20)
        ]
        r = client.post("/index", json={"collection": "fat", "documents": docs})
        assert wait_job(client, r.json()["job_id"])["status"] == "succeeded"
        yield client


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What the routes built or serialised: `_to_response` (the response models) and `_bounded` (the body)."""
    calls: list[str] = []

    def spy(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            calls.append(name)
            return real(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(search_routes, "_to_response", spy("_to_response", search_routes._to_response))
    monkeypatch.setattr(search_routes, "_bounded", spy("_bounded", search_routes._bounded))
    return calls


def _refused(r: httpx.Response) -> int:
    """The size a 413 names, after checking the message's shape."""
    assert r.status_code == 413, r.text
    error = r.json()["error"]
    assert error["code"] == "payload_too_large"
    head, _, tail = error["message"].partition(" bytes; ")
    assert head.startswith("the response would be ")
    assert tail == f"the limit is {LIMIT} (VELA_MAX_RESPONSE_BYTES): lower k or split the batch"
    return int(head.removeprefix("the response would be "))


@pytest.mark.parametrize(
    "body",
    [
        {"queries": [f"moon tides {i}" for i in range(8)], "k": 20, "mode": "dense"},
        {"queries": ["sea number"], "k": 20, "mode": "bm25"},
    ],
)
def test_an_over_limit_search_is_refused_before_the_response_is_built(
    tight: httpx.Client, built: list[str], body: dict[str, Any]
) -> None:
    r = tight.post("/search/batch", json={"collection": "fat", **body})
    assert _refused(r) > LIMIT and built == []
    if len(body["queries"]) == 1:
        single = {k: v for k, v in body.items() if k != "queries"} | {"query": body["queries"][0]}
        assert _refused(tight.post("/search", json={"collection": "fat", **single})) > LIMIT and built == []
    ok = tight.post("/search/batch", json={"collection": "fat", **body, "queries": body["queries"][:1], "k": 2})
    assert ok.status_code == 200, ok.text
    assert [h["metadata"]["blob"] for h in ok.json()["results"][0]["hits"]] == ["y" * BLOB] * 2
    assert built == ["_to_response", "_bounded"]


def test_the_refusal_costs_far_less_memory_than_the_body(
    tight: httpx.Client, built: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The repro of the report, scaled: 60 queries x 50 passages of a document with 64 KB of metadata would be
    ~200 MB of body (and as much again encoded); the refusal's peak stays a small fraction of that."""
    results = _shared_metadata(passages=50, queries=60, blob=64_000)

    async def found(state: Any, opts: Any, queries: Sequence[str], access: Any) -> list[SearchResult]:
        return results[: len(queries)]

    monkeypatch.setattr(search_routes, "_run", found)
    would_be = len(results) * len(results[0].hits) * 64_000
    tracemalloc.start()
    try:
        r = tight.post("/search/batch", json={"collection": "fat", "queries": ["q"] * 60, "k": 50})
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    size = _refused(r)
    assert would_be < size < would_be * 1.05 and built == []
    assert peak < would_be / 20, f"{peak} bytes at peak for a {size}-byte refusal"


def test_a_search_response_is_built_and_serialised_off_the_event_loop(
    tight: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Building and serialising tens of megabytes of hits takes seconds: on a worker thread, where no event loop
    runs, so that the process goes on answering other requests meanwhile (searches and /recommend alike)."""
    on_loop: list[bool] = []

    def spy(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                asyncio.get_running_loop()
                on_loop.append(True)
            except RuntimeError:
                on_loop.append(False)
            return real(*args, **kwargs)

        return wrapper

    for name in ("_check_estimate", "_to_response", "_bounded"):
        monkeypatch.setattr(search_routes, name, spy(name, getattr(search_routes, name)))
    one = {"collection": "fat", "k": 2, "mode": "bm25"}
    assert tight.post("/search", json={**one, "query": "sea"}).status_code == 200
    assert tight.post("/search/batch", json={**one, "queries": ["sea", "moon"]}).status_code == 200
    assert len(on_loop) == 3 + 4 and not any(on_loop)
