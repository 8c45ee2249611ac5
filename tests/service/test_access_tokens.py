"""Scoped access tokens over real HTTP: a token reaches the collections it names and nothing else, a read grant's
pinned filter bounds every read (search in every mode, batch, recommend, count, facet, scroll, reads by id), and a
token that does not verify, has expired or grants nonsense is a 401. Tokens are made by `vela token`."""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest

from cli.main import main as vela
from service.access_tokens import TokenError, mint, verify
from tests.service.conftest import running_server, wait_job

KEY = "admin-key-0123456789abcdef0123456789"  # >= 32 bytes: shorter keys sign no tokens
ADMIN = {"X-API-Key": KEY}
ACME = {"must": [{"key": "tenant", "match": {"value": "acme"}}]}
GLOBEX = {"must": [{"key": "tenant", "match": {"value": "globex"}}]}
DOCS = [
    {"id": f"d{i}", "text": f"tides and ocean currents report {i}", "metadata": {"tenant": t, "n": i}}
    for i, t in enumerate(["acme", "globex", "acme", "globex", "acme", "initech"])
]
ACME_IDS = {"d0", "d2", "d4"}
LATER = [
    {"id": f"z{i:02d}", "text": "a later report", "metadata": {"tenant": "globex", "n": 100 + i}} for i in range(25)
]


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _token(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert vela(["token", "--key", KEY, *args]) == 0
    return capsys.readouterr().out.strip()


def _ok(r: httpx.Response) -> Any:
    assert r.status_code in (200, 201, 202), r.text
    return r.json()


def _index(client: httpx.Client, collection: str, docs: list[dict[str, Any]], **extra: Any) -> None:
    r = client.post("/index", json={"collection": collection, "documents": docs, **extra}, headers=ADMIN)
    client.headers.update(ADMIN)
    try:
        assert wait_job(client, _ok(r)["job_id"])["status"] == "succeeded"
    finally:
        del client.headers["X-API-Key"]


def test_a_tenant_token_reads_its_documents_alone(
    tmp_path: Path, tiny_embedder_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with running_server(tmp_path, embedder=str(tiny_embedder_dir), api_keys=KEY) as client:
        schema = {"fields": {"tenant": "keyword", "n": "integer"}}
        _index(client, "notes", DOCS + LATER, schema=schema)
        _index(client, "other", DOCS[:2])
        h = _bearer(_token(capsys, "--read", "notes", "--filter", json.dumps(ACME), "--expires", "1h"))

        for mode in ("dense", "bm25", "hybrid"):
            hits = _ok(client.post("/search", json={"collection": "notes", "query": "tides", "mode": mode}, headers=h))
            assert {x["id"] for x in hits["hits"]} == ACME_IDS, mode
        mine = {"must": [{"key": "n", "range": {"gte": 2}}]}  # the request's own filter is ANDed with the pin
        hits = _ok(client.post("/search", json={"collection": "notes", "query": "tides", "filter": mine}, headers=h))
        assert {x["id"] for x in hits["hits"]} == {"d2", "d4"}
        batch = _ok(client.post("/search/batch", json={"collection": "notes", "queries": ["tides", "x"]}, headers=h))
        assert all({x["id"] for x in r["hits"]} <= ACME_IDS for r in batch["results"])

        assert _ok(client.post("/collections/notes/count", json={}, headers=h))["count"] == 3
        assert _ok(client.post("/collections/notes/count", headers=h))["count"] == 3  # no body: the pin still holds
        facet = _ok(client.post("/collections/notes/facet", json={"key": "tenant"}, headers=h))
        assert [(x["value"], x["count"]) for x in facet["hits"]] == [("acme", 3)]
        page = _ok(client.get("/collections/notes/documents", headers=h))
        assert {d["id"] for d in page["documents"]} == ACME_IDS
        page = _ok(client.get("/collections/notes/documents", params={"filter": json.dumps(mine)}, headers=h))
        assert {d["id"] for d in page["documents"]} == {"d2", "d4"}
        # Page by page: a page of one looks at 10 documents, so pages end on hidden ones, and their cursors are
        # sealed: they name no document, and one made by hand is refused.
        seen, cursors, params = [], [], {"limit": 1}
        while True:
            page = _ok(client.get("/collections/notes/documents", params=params, headers=h))
            seen += [d["id"] for d in page["documents"]]
            if page["next_cursor"] is None:
                break
            cursors.append(page["next_cursor"])
            params = {"limit": 1, "cursor": page["next_cursor"]}
        assert sorted(seen) == sorted(ACME_IDS) and len(cursors) >= 4
        assert len({len(c) for c in cursors}) == 1  # padded before sealing: a length tells nothing of a hidden id
        globex = _bearer(mint(KEY, [{"collection": "notes", "access": "r", "filter": GLOBEX}]))
        r = client.get("/collections/notes/documents", params={"limit": 1, "cursor": cursors[0]}, headers=globex)
        assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_cursor"  # another tenant's: sealed apart
        for c in cursors:  # a Fernet token (version byte 0x80, then ciphertext), not a readable position
            assert _unb64(c)[:1] == b"\x80" and b"v1\n" not in _unb64(c)
        ordered, params = [], {"limit": 1, "order_by": "n", "direction": "desc"}  # ordered: sealed the same way
        while True:
            page = _ok(client.get("/collections/notes/documents", params=params, headers=h))
            ordered += [d["id"] for d in page["documents"]]
            if page["next_cursor"] is None:
                break
            assert _unb64(page["next_cursor"])[:1] == b"\x80" and b"o1\n" not in _unb64(page["next_cursor"])
            params = {**params, "cursor": page["next_cursor"]}
        assert ordered == ["d4", "d2", "d0"]
        admin_cursor = _ok(client.get("/collections/notes/documents", params={"limit": 1}, headers=ADMIN))
        for forged in (admin_cursor["next_cursor"], base64.urlsafe_b64encode(b"v1\nz").decode(), cursors[0][:-4]):
            r = client.get("/collections/notes/documents", params={"limit": 1, "cursor": forged}, headers=h)
            assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_cursor", r.text

        assert _ok(client.get("/collections/notes/documents/d0", headers=h))["metadata"]["tenant"] == "acme"
        hidden = client.get("/collections/notes/documents/d1", headers=h)
        assert hidden.status_code == 404 and hidden.json()["error"]["code"] == "document_not_found"
        assert client.head("/collections/notes/documents/d1", headers=h).status_code == 404
        many = _ok(client.post("/collections/notes/documents", json={"ids": ["d1", "d0", "zz", "d2"]}, headers=h))
        assert [d["id"] for d in many["documents"]] == ["d0", "d2"] and many["not_found"] == ["d1", "zz"]

        rec = _ok(client.post("/recommend", json={"collection": "notes", "like": ["d0"]}, headers=h))
        assert {x["id"] for x in rec["hits"]} == ACME_IDS - {"d0"}
        for like, unlike in ((["d1"], []), (["d0"], ["d3"])):  # another tenant's document is not there
            r = client.post("/recommend", json={"collection": "notes", "like": like, "unlike": unlike}, headers=h)
            assert r.status_code == 404 and r.json()["error"]["code"] == "document_not_found", r.text
        # Hidden and missing alike: the message names both, so it tells neither apart.
        r = client.post("/recommend", json={"collection": "notes", "like": ["d0", "d1", "zz"]}, headers=h)
        assert r.status_code == 404 and "'d1', 'zz'" in r.json()["error"]["message"], r.text

        _ok(client.put("/aliases/notes-globex", json={"collection": "notes"}, headers=ADMIN))
        assert _ok(client.get("/collections/notes", headers=ADMIN))["aliases"] == ["notes-globex"]
        assert _ok(client.get("/collections/notes", headers=h))["aliases"] == []  # another tenant's alias: unseen
        assert [c["name"] for c in _ok(client.get("/collections", headers=h))["collections"]] == ["notes"]
        assert _ok(client.get("/collections", headers=h))["collections"][0]["aliases"] == []
        assert client.head("/collections", headers=h).status_code != 403
        assert _ok(client.get("/collections/notes", headers=h))["name"] == "notes"
        assert _ok(client.get("/limits", headers=h))

        refused = [
            client.post("/search", json={"collection": "other", "query": "tides"}, headers=h),
            client.post("/search", json={"collection": "nowhere", "query": "tides"}, headers=h),
            client.post("/recommend", json={"collection": "other", "like": ["d0"]}, headers=h),
            client.get("/collections/other", headers=h),
            client.get("/collections/other/documents/d0", headers=h),
            client.post("/collections/other/count", json={}, headers=h),
            client.post("/index", json={"collection": "notes", "documents": [{"id": "x", "text": "x"}]}, headers=h),
            client.patch("/collections/notes/documents/d0", json={"metadata": {"n": 9}}, headers=h),
            client.delete("/collections/notes/documents/d0", headers=h),
            client.post("/collections/notes/delete", json={"ids": ["d0"]}, headers=h),
            client.put("/collections/notes/schema", json={"fields": {"x": "keyword"}}, headers=h),
            client.delete("/collections/notes", headers=h),
            client.post("/collections/notes/snapshots", headers=h),
            client.put("/aliases/live", json={"collection": "notes"}, headers=h),
            client.get("/aliases", headers=h),
            client.get("/jobs", headers=h),
            client.get("/models", headers=h),
        ]
        for r in refused:
            assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden", (r.request.url, r.text)
        assert _ok(client.get("/collections/notes/documents/d0", headers=ADMIN))["metadata"]["n"] == 0  # unchanged
        assert _ok(client.get("/collections/notes", headers=ADMIN))["documents"] == len(DOCS) + len(LATER)
        job = _ok(client.post("/collections/notes/delete", json={"ids": ["zz"]}, headers=ADMIN))["job_id"]
        r = client.get(f"/jobs/{job}", headers=h)  # a job's error and result may name any document: no job shown
        assert r.status_code == 404 and r.json()["error"]["code"] == "job_not_found"
        r = client.post("/index", content=b"{" * 10_000, headers=h)  # refused on the headers, not a 422
        assert r.status_code == 403 and "may only read" in r.json()["error"]["message"]

        # A pin the collection's schema no longer takes: every read of it is a 403, stored ids and others alike.
        _ok(
            client.put(
                "/collections/strict", json={"schema": {"fields": {"n": "integer"}, "strict": True}}, headers=ADMIN
            )
        )
        bad = _bearer(mint(KEY, [{"collection": "strict", "access": "r", "filter": ACME}]))
        for path in ("/collections/strict/documents/d0", "/collections/strict/documents/nope"):
            r = client.get(path, headers=bad)
            assert r.status_code == 403 and "does not fit" in r.json()["error"]["message"], r.text


def test_a_write_token_writes_its_collection_and_follows_its_jobs(
    tmp_path: Path, tiny_embedder_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with running_server(tmp_path, embedder=str(tiny_embedder_dir), api_keys=KEY) as client:
        _index(client, "notes", DOCS)
        admin_job = _ok(client.post("/collections/notes/delete", json={"ids": ["zz"]}, headers=ADMIN))["job_id"]
        _ok(client.put("/collections/drafts", headers=ADMIN))
        _ok(client.put("/aliases/live", json={"collection": "drafts"}, headers=ADMIN))
        h = _bearer(_token(capsys, "--write", "live", "--read", "notes"))

        job = _ok(client.post("/index", json={"collection": "live", "documents": DOCS[:3]}, headers=h))
        deadline = time.time() + 120
        while (state := _ok(client.get(f"/jobs/{job['job_id']}", headers=h)))["status"] != "succeeded":
            assert state["status"] in ("queued", "running") and time.time() < deadline, state
            time.sleep(0.1)
        assert _ok(client.patch("/collections/live/documents/d0", json={"metadata": {"n": 7}}, headers=h))
        assert _ok(client.post("/search", json={"collection": "notes", "query": "tides"}, headers=h))["hits"]
        assert [c["name"] for c in _ok(client.get("/collections", headers=h))["collections"]] == ["drafts", "notes"]

        hidden = client.get(f"/jobs/{admin_job}", headers=h)  # a job of a collection it reads, not writes
        assert hidden.status_code == 404
        other = _ok(client.post("/index", json={"collection": "third", "documents": DOCS[:1]}, headers=ADMIN))
        r = client.get(f"/jobs/{other['job_id']}", headers=h)
        assert r.status_code == 404 and r.json()["error"]["code"] == "job_not_found"
        r = client.post("/index", json={"collection": "notes", "documents": DOCS[:1]}, headers=h)
        assert r.status_code == 403 and "only read" in r.json()["error"]["message"]
        r = client.post("/index", json={"collection": "drafts", "documents": DOCS[:1]}, headers=h)  # by its alias only
        assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden"
        new = _bearer(mint(KEY, [{"collection": "fresh", "access": "rw"}]))  # making a collection needs a key
        r = client.post("/index", json={"collection": "fresh", "shards": 8, "documents": DOCS[:1]}, headers=new)
        assert r.status_code == 403 and "needs a key" in r.json()["error"]["message"], r.text
        assert client.get("/collections/fresh", headers=ADMIN).status_code == 404


def _unb64(cursor: str) -> bytes:
    return base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))


def _forged(claims: dict[str, Any], key: str = KEY, alg: str = "HS256") -> str:
    return jwt.encode(claims, key, algorithm=alg)


def test_tokens_that_do_not_verify_are_401(tmp_path: Path, tiny_embedder_dir: Path) -> None:
    other_key = "another-key-0123456789abcdef01234567"
    good = mint(KEY, [{"collection": "notes", "access": "r"}])
    head, body, sig = good.split(".")
    widened = base64.urlsafe_b64encode(json.dumps({"access": "rw"}).encode()).rstrip(b"=").decode()
    unsigned = ".".join(
        base64.urlsafe_b64encode(json.dumps(part).encode()).rstrip(b"=").decode()
        for part in ({"alg": "none", "typ": "JWT"}, {"access": "rw"})
    )
    cases = {
        "expired": (_forged({"access": "r", "exp": int(time.time()) - 10}), "expired"),
        "another key": (_forged({"access": "r"}, other_key), "invalid API key"),
        "payload edited": (f"{head}.{widened}.{sig}", "invalid API key"),
        "alg none": (unsigned + ".", "invalid API key"),
        "HS512": (_forged({"access": "rw"}, KEY * 2, alg="HS512"), "invalid API key"),
        "not base64": ("a" * 20 + ".b!.c", "invalid API key"),
        "an empty filter": (
            _forged({"access": [{"collection": "n", "access": "r", "filter": {"must": []}}]}),
            "nothing",
        ),
        "an empty nested filter": (
            _forged({"access": [{"collection": "n", "access": "r", "filter": {"should": [{"must": []}]}}]}),
            "nothing",
        ),
        "no access claim": (_forged({"sub": "x"}), "invalid token"),
        "a filter with write": (
            _forged({"access": [{"collection": "notes", "access": "rw", "filter": ACME}]}),
            "read access",
        ),
        "a collection twice": (
            _forged({"access": [{"collection": "n", "access": "r"}, {"collection": "n", "access": "rw"}]}),
            "named twice",
        ),
        "an unknown access": (_forged({"access": [{"collection": "n", "access": "admin"}]}), "invalid token"),
    }
    keys = {"api_keys": f"{KEY},short", "read_api_keys": "reader-key"}
    with running_server(tmp_path, embedder=str(tiny_embedder_dir), **keys) as client:
        for name, (token, message) in cases.items():
            r = client.post("/search", json={"collection": "notes", "query": "x"}, headers=_bearer(token))
            assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized", (name, r.text)
            assert message in r.json()["error"]["message"], (name, r.json())
        with pytest.warns(jwt.warnings.InsecureKeyLengthWarning):
            short = _forged({"access": "rw"}, "short")  # a key of the server, too short to sign tokens
        assert client.get("/limits", headers=_bearer(short)).status_code == 401
        assert client.get("/limits", headers={"X-API-Key": "short"}).status_code == 200  # still a key
        reader = _bearer(_forged({"access": "r"}))  # every collection, read only: a read-only key
        assert client.post("/search", json={"collection": "notes", "query": "x"}, headers=reader).status_code == 404
        r = client.post("/index", json={"collection": "notes", "documents": [{"id": "a", "text": "a"}]}, headers=reader)
        assert r.status_code == 403
        full = _bearer(_forged({"access": "rw"}))  # every collection, everything: a key of VELA_API_KEYS
        r = client.post("/index", json={"collection": "notes", "documents": [{"id": "a", "text": "a"}]}, headers=full)
        assert r.status_code == 202, r.text


def test_every_route_outside_a_grant_is_refused(tmp_path: Path, tiny_embedder_dir: Path) -> None:
    """Fail closed: each operation the API publishes, sent with a token for another collection, never succeeds."""
    h = _bearer(mint(KEY, [{"collection": "elsewhere", "access": "rw"}]))
    with running_server(tmp_path, embedder=str(tiny_embedder_dir), api_keys=KEY) as client:
        _index(client, "notes", DOCS[:2])
        spec = _ok(client.get("/openapi.json"))
        sent = 0
        for path, ops in spec["paths"].items():
            url = path.replace("{name}", "notes").replace("{alias}", "notes").replace("{doc_id}", "d0")
            url = url.replace("{job_id}", "x").replace("{snapshot}", "s").replace("{generation}", "1")
            for method in ops:
                body = {"collection": "notes", "query": "x", "queries": ["x"], "like": ["d0"], "documents": []}
                r = client.request(method.upper(), url, json=body, headers=h)
                sent += 1
                if path in ("/collections", "/limits", "/jobs/{job_id}", "/healthz", "/readyz", "/metrics"):
                    continue  # reachable: an empty listing, the limits, a job it cannot see (404); public ones
                if path.startswith("/ui"):
                    continue  # the console's files: public
                assert r.status_code in (403, 404, 422), (method, url, r.status_code, r.text)
        assert sent > 30
        assert _ok(client.get("/collections", headers=h))["collections"] == []


def test_a_token_of_any_of_the_keys_verifies() -> None:
    """Keys are tried in turn: another key's signature moves on to the next, whatever the order of the keys."""
    keys = [f"key-{i}-0123456789abcdef0123456789abcdef".encode() for i in range(4)]
    for i, key in enumerate(keys):
        token = mint(key.decode(), [{"collection": "n", "access": "r"}]).encode()
        for order in (keys, keys[::-1], keys[i:] + keys[:i], keys[i + 1 :] + keys[: i + 1]):
            assert verify(token, order).grant is not None
    with pytest.raises(TokenError, match="invalid API key"):
        verify(mint(keys[0].decode(), "r").encode(), keys[1:])


def test_mint_refuses_what_the_server_would() -> None:
    with pytest.raises(TokenError, match="at least 32 bytes"):
        mint("short", "r")
    with pytest.raises(TokenError, match="read access"):
        mint(KEY, [{"collection": "n", "access": "rw", "filter": ACME}])
    assert verify(mint(KEY, "r").encode(), [KEY.encode()]).read_only
    shut = mint(KEY, [{"collection": "n", "access": "r", "filter": {"must_not": [{"must": []}]}}])  # keeps all out
    assert verify(shut.encode(), [KEY.encode()]).grant is not None
