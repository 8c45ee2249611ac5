"""Every kind of bad input gets a clear 4xx with a stable code and message; nothing is half-written."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.service.conftest import OK_DOC, error_body, running_server


def _search(client: httpx.Client, **body: object) -> httpx.Response:
    return client.post("/search", json={"collection": "c", "query": "text", **body})


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ({"query": ""}, "query: query must not be empty"),
        ({"query": "   \t"}, "query: query must not be empty"),
        ({"k": 0}, "k: Input should be greater than or equal to 1"),
        ({"k": 1001}, "k: Input should be less than or equal to 1000"),
        ({"mode": "semantic"}, "mode: Input should be 'dense', 'bm25' or 'hybrid'"),
        ({"dim": "128"}, "dim: Input should be 'full' or '256'"),
        ({"weights": {"dense": -1}}, "weights: weights must be >= 0"),
        ({"weights": {"dense": 0, "bm25": 0}}, "weights: at least one weight must be above 0"),
        ({"unknown_field": 1}, "unknown_field: Extra inputs are not permitted"),
    ],
)
def test_search_validation_is_422_with_a_stable_message(small: httpx.Client, body: dict, needle: str) -> None:
    r = _search(small, **body)
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    assert err["code"] == "invalid_request" and needle in err["message"]
    assert small.get("/healthz").status_code == 200


def test_probes_answer_head_without_a_body(small: httpx.Client) -> None:
    for path in ("/healthz", "/readyz"):
        r = small.head(path)
        assert r.status_code == 200 and r.content == b""
    assert "head" not in small.get("/openapi.json").json()["paths"]["/healthz"]


def test_head_says_whether_a_collection_or_a_document_exists(small: httpx.Client) -> None:
    # As Elasticsearch's HEAD /{index} and HEAD /{index}/_doc/{id}: the status alone.
    for path, status in (
        ("/collections/c", 200),
        ("/collections/nope", 404),
        ("/collections/c/documents/a", 200),
        ("/collections/c/documents/nope", 404),
        ("/collections/nope/documents/a", 404),
    ):
        r = small.head(path)
        assert (r.status_code, r.content) == (status, b""), path


def test_unknown_collection_is_404(small: httpx.Client) -> None:
    r = small.post("/search", json={"collection": "nope", "query": "x"})
    assert r.status_code == 404 and error_body(r) == {
        "code": "collection_not_found",
        "message": "no collection named 'nope'",
    }
    assert small.get("/collections/nope").status_code == 404
    assert small.delete("/collections/nope").status_code == 404
    assert small.delete("/collections/nope/documents/x").status_code == 404


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/collections/c/"),
        ("GET", "/collections/"),
        ("GET", "/jobs/"),
        ("POST", "/search/"),
        ("GET", "/healthz/"),
    ],
)
def test_a_path_with_a_trailing_slash_is_a_404_in_the_error_shape(small: httpx.Client, method: str, path: str) -> None:
    # Not a bare 307 to the path without it: no route has the slash, and the answer says so as any unknown path does.
    r = small.request(method, path, json={"collection": "c", "query": "text"} if method == "POST" else None)
    assert r.status_code == 404 and "location" not in r.headers, (r.status_code, r.headers)
    assert error_body(r)["code"] == "not_found"
    assert small.get("/ui/").status_code == 200  # the console's own two spellings stay routes


def test_every_422_has_details(small: httpx.Client) -> None:
    for r in (
        _search(small, k=0),  # a validation error
        small.post("/index", json={"collection": "dups", "documents": [OK_DOC, OK_DOC]}),  # raised by a route
        _search(small, filter={"must": [{"key": "k", "match": {"values": 1}}]}),  # a filter's fault
    ):
        assert r.status_code == 422, r.text
        details = r.json()["error"]["details"]
        assert details and all({"loc", "msg"} <= set(d) and isinstance(d["loc"], list) for d in details), r.text


def test_duplicate_ids_are_422_and_nothing_is_written(small: httpx.Client) -> None:
    r = small.post("/index", json={"collection": "dups", "documents": [OK_DOC, OK_DOC]})
    assert r.status_code == 422 and "duplicate document ids in one request: ['a']" in r.json()["error"]["message"]
    assert small.get("/collections/dups").status_code == 404


def test_document_over_the_size_limit_is_413_and_nothing_is_written(small: httpx.Client) -> None:
    docs = [{"id": "ok", "text": "fine"}, {"id": "big", "text": "x" * 1001}]
    r = small.post("/index", json={"collection": "big", "documents": docs})
    assert r.status_code == 413
    assert error_body(r) == {
        "code": "payload_too_large",
        "message": "document 'big' has 1001 bytes of text; the limit is 1000: split it",
    }
    assert small.get("/collections/big").status_code == 404


def test_batch_over_the_limit_is_413(small: httpx.Client) -> None:
    docs = [{"id": str(i), "text": "t"} for i in range(6)]
    r = small.post("/index", json={"collection": "c", "documents": docs})
    assert r.status_code == 413 and "6 documents in one request; the limit is 5" in r.json()["error"]["message"]
    r = small.post("/search/batch", json={"collection": "c", "queries": ["a", "b", "c", "d"]})
    assert r.status_code == 413 and r.json()["error"]["code"] == "payload_too_large"
    assert small.get("/collections/c").json()["documents"] == 1


@pytest.mark.parametrize(
    ("doc", "needle"),
    [
        ({"id": "x", "text": "  "}, "document text must not be empty"),
        ({"id": "", "text": "t"}, "documents.0.id"),
        ({"text": "t"}, "documents.0.id: Field required"),
    ],
)
def test_bad_documents_are_422(small: httpx.Client, doc: dict, needle: str) -> None:
    r = small.post("/index", json={"collection": "c", "documents": [doc]})
    assert r.status_code == 422 and needle in r.json()["error"]["message"]


SURROGATE = '"\\udc00 tides"'  # JSON can spell a lone UTF-16 surrogate; it is not Unicode text


@pytest.mark.parametrize(
    ("method", "path", "body", "where"),
    [
        ("POST", "/index", '{"collection": "c", "documents": [{"id": "s", "text": %s}]}', "documents.0.text"),
        (
            "POST",
            "/index",
            '{"collection": "c", "documents": [{"id": "s", "text": "t", "metadata": {"k": %s}}]}',
            "documents.0.metadata.k",
        ),
        (
            "POST",
            "/index",
            '{"collection": "c", "documents": [{"id": "s", "text": "t", "metadata": {%s: 1}}]}',
            "documents.0.metadata.",
        ),
        ("POST", "/search/batch", '{"collection": "c", "queries": ["ok", %s]}', "queries.1"),
        (
            "POST",
            "/search",
            '{"collection": "c", "query": "x", "filter": {"must": [{"key": "k", "match": %s}]}}',
            "filter.must.0.match",
        ),
        ("PATCH", "/collections/c/documents/a", '{"metadata": {"k": %s}}', "metadata.k"),
        # The key and its value both: the message names the key escaped, never the surrogate itself (was a 500).
        (
            "POST",
            "/index",
            '{"collection": "c", "documents": [{"id": "s", "text": "t", "metadata": {%(s)s: %(s)s}}]}',
            "documents.0.metadata.",
        ),
        ("PATCH", "/collections/c/documents/a", '{"metadata": {%(s)s: [%(s)s]}}', "metadata."),
        ("POST", "/search", '{"collection": "c", "query": "x", "filter": {%(s)s: %(s)s}}', "filter."),
        ("POST", "/collections/c/count", '{"filter": {"must": [{"key": "k", "match": %s}]}}', "filter.must.0.match"),
    ],
)
def test_a_lone_surrogate_anywhere_is_422_naming_where(
    small: httpx.Client, method: str, path: str, body: str, where: str
) -> None:
    content = (body % {"s": SURROGATE} if "%(s)s" in body else body % SURROGATE).encode()
    r = small.request(method, path, content=content, headers={"Content-Type": "application/json"})
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    assert err["code"] == "invalid_request" and err["message"].startswith(where) and "surrogate" in err["message"]
    assert small.get("/collections/c").json()["documents"] == 1  # nothing was written


def test_a_lone_surrogate_in_a_scroll_filter_is_422_as_in_a_body(small: httpx.Client) -> None:
    for raw in ('{"key": "\\udc00", "match": {"value": 1}}', '{"key": "k", "match": {"value": "\\udc00"}}'):
        r = small.get("/collections/c/documents", params={"filter": raw})
        assert r.status_code == 422, r.text
        err = r.json()["error"]
        assert err["code"] == "invalid_filter" and err["message"].startswith("filter.")
        assert "surrogate" in err["message"]


def test_bad_collection_name_and_empty_batch_are_422(small: httpx.Client) -> None:
    r = small.post("/index", json={"collection": "../etc", "documents": [OK_DOC]})
    assert r.status_code == 422 and r.json()["error"]["message"].startswith("collection:")
    r = small.post("/index", json={"collection": "c", "documents": []})
    assert r.status_code == 422


def test_unknown_embedder_is_422(small: httpx.Client) -> None:
    r = small.post("/index", json={"collection": "emb", "documents": [OK_DOC], "embedder": "/no/such/model"})
    assert r.status_code == 422 and r.json()["error"]["code"] == "unknown_model"
    assert small.get("/collections/emb").status_code == 404


def test_api_keys(tmp_path: Path) -> None:
    with running_server(tmp_path, api_keys="k1,k2") as client:
        r = client.post("/search", json={"collection": "c", "query": "x"})
        assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized"
        assert "missing API key" in r.json()["error"]["message"]
        r = client.get("/collections", headers={"Authorization": "Bearer wrong"})
        assert r.status_code == 401 and r.json()["error"]["message"] == "invalid API key"
        assert client.get("/collections", headers={"Authorization": "Bearer k2"}).status_code == 200
        assert client.get("/collections", headers={"X-API-Key": "k1"}).status_code == 200
        assert client.get("/healthz").status_code == 200  # probes stay open


def test_a_long_unknown_id_is_not_echoed_in_full(small: httpx.Client) -> None:
    r = small.get("/jobs/" + "x" * 5000)
    assert r.status_code == 404 and r.json()["error"]["code"] == "job_not_found"
    message = r.json()["error"]["message"]
    assert len(message) < 200 and "first 100 of 5000 characters" in message


def test_a_filter_holds_256_conditions(small: httpx.Client) -> None:
    # docs/filters.md: "A filter holds at most 256 conditions" (the filter's own node is not one of them).
    should = [{"key": "k", "match": {"value": f"v{i}"}} for i in range(257)]
    assert _search(small, filter={"should": should[:256]}).status_code == 200
    r = _search(small, filter={"should": should})
    assert r.status_code == 422, r.text
    err = error_body(r)
    assert err["code"] == "invalid_filter"
    assert err["message"] == "filter.should[256]: a filter may hold at most 256 conditions"
    assert err["details"][0]["loc"] == [] and err["details"][0]["msg"] == err["message"]


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ({"mode": "bm25", "fusion": {"method": "convex", "alpha": 0.9}}, "fusion: only hybrid mode fuses lists"),
        ({"mode": "dense", "weights": {"dense": 3}}, "weights: only hybrid mode fuses lists"),
        ({"mode": "bm25", "rrf_k": 5}, "rrf_k: only hybrid mode fuses lists"),
        ({"fusion": {"method": "rrf", "normalization": "zscore"}}, "normalization goes with fusion method convex"),
        ({"fusion": {"method": "dense", "alpha": 0.3}}, "fusion method dense is that list alone"),
        ({"fusion": {"method": "convex"}, "weights": {"dense": 2}}, "fusion method convex does not use them"),
        ({"fusion": {"method": "rrf", "alpha": 0.5}, "weights": {"dense": 5}}, "either weights or fusion.alpha"),
        ({"fusion": {"method": "convex"}, "rrf_k": 10}, "rrf_k is RRF's constant"),
        ({"mode": "dense", "depth": 5}, "depth: only hybrid mode fuses lists"),
        ({"mode": "bm25", "depth": 300}, "depth: only hybrid mode fuses lists"),
        ({"mode": "bm25", "dim": "256", "rescore": False}, "dim, rescore: only the dense list uses them"),
        ({"mode": "bm25", "dim": "256"}, "dim: only the dense list uses them"),
        ({"mode": "bm25", "rescore": False}, "rescore: only the dense list uses them"),
        ({"mode": "dense", "rescore": False}, 'rescore: false goes with dim "256"'),
        ({"dim": "full", "rescore": False}, 'rescore: false goes with dim "256"'),
    ],
)
def test_an_option_that_could_not_change_the_answer_is_refused(
    small: httpx.Client, body: dict[str, object], needle: str
) -> None:
    r = _search(small, **body)
    assert r.status_code == 422, r.text
    assert error_body(r)["code"] == "invalid_request" and needle in error_body(r)["message"], r.text


def test_options_that_apply_are_taken(small: httpx.Client) -> None:
    for body in (
        {"weights": {"dense": 2}},  # weighted RRF: what weights alone ask for
        {"fusion": {"method": "rrf"}, "rrf_k": 10, "weights": {"bm25": 0.5}},
        {"fusion": {"method": "convex", "alpha": 0.3, "normalization": "dbsf"}},
        {"depth": 50, "dim": "256", "rescore": False},
        {"mode": "dense", "dim": "256", "rescore": False},
        {"mode": "dense", "dim": "full", "rescore": True},
        {"mode": "bm25", "k": 3},
        # The schema's defaults, sent explicitly (a generated client may send every field): nothing to refuse.
        {"mode": "bm25", "dim": "full", "rescore": True, "depth": 200, "rrf_k": 60},
        {"mode": "dense", "depth": 200, "rrf_k": 60},
        {"fusion": {"method": "convex"}, "rrf_k": 60},
        {"mode": "dense", "fusion": {"method": "auto"}},  # auto is what no fusion means
        {"mode": "bm25", "fusion": {"method": "auto"}, "weights": None},
        {"group_by": {"key": "topic", "depth": 500}, "depth": 200},  # deepened to the groups, as when left out
    ):
        assert _search(small, **body).status_code == 200, body


def test_the_default_depth_sent_is_deepened_to_the_page_as_when_left_out(small: httpx.Client) -> None:
    """docs/api.md: a default sent in any mode is taken. depth: 200 was an explicit depth, below offset + k."""
    page = {"offset": 195, "k": 10}
    left_out = _search(small, **page)
    sent = _search(small, **page, depth=200)
    assert left_out.status_code == sent.status_code == 200, sent.text
    assert sent.json()["hits"] == left_out.json()["hits"]
    assert _search(small, **page, depth=201).status_code == 422  # another depth is explicit: it must reach the page
