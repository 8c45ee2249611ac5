"""Collection aliases through real HTTP: create, read, switch, delete; every route that takes a collection name
takes an alias; a switch under a searching thread is atomic; aliases are shared by processes and survive a restart."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest

from indexing.store import CollectionStore
from tests.service.conftest import running_server, wait_job

DOCS = {
    "blue": [{"id": f"blue-{i}", "text": f"tides and the moon, blue document {i}"} for i in range(4)],
    "green": [{"id": f"green-{i}", "text": f"tides and the moon, green document {i}"} for i in range(4)],
}


def _index(client: httpx.Client, collection: str, docs: list[dict[str, Any]]) -> dict[str, Any]:
    r = client.post("/index", json={"collection": collection, "documents": docs})
    assert r.status_code == 202, r.text
    job = wait_job(client, r.json()["job_id"])
    assert job["status"] == "succeeded", job
    return job


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("aliases")


@pytest.fixture(scope="module")
def client(data_dir: Path, tiny_embedder_dir: Path) -> Iterator[httpx.Client]:
    with running_server(data_dir, embedder=str(tiny_embedder_dir)) as c:
        for name, docs in DOCS.items():
            _index(c, name, docs)
        yield c


def _error(r: httpx.Response) -> tuple[int, str]:
    return r.status_code, r.json()["error"]["code"]


def test_create_read_switch_and_delete(client: httpx.Client) -> None:
    assert client.put("/aliases/crud", json={"collection": "blue"}).json() == {"alias": "crud", "collection": "blue"}
    assert client.get("/aliases/crud").json() == {"alias": "crud", "collection": "blue"}
    assert {"alias": "crud", "collection": "blue"} in client.get("/aliases").json()["aliases"]
    assert "crud" in client.get("/collections/blue").json()["aliases"]  # a collection lists its aliases
    assert client.put("/aliases/crud", json={"collection": "green"}).status_code == 200  # a switch
    assert client.get("/aliases/crud").json()["collection"] == "green"
    assert "crud" not in client.get("/collections/blue").json()["aliases"]
    listed = {c["name"]: c["aliases"] for c in client.get("/collections").json()["collections"]}
    assert "crud" in listed["green"] and listed["green"] == sorted(listed["green"])
    assert client.delete("/aliases/crud").status_code == 204
    assert _error(client.get("/aliases/crud")) == (404, "alias_not_found")
    assert _error(client.delete("/aliases/crud")) == (404, "alias_not_found")
    assert client.get("/collections/green").status_code == 200  # the collection stays


def test_bad_aliases(client: httpx.Client) -> None:
    assert _error(client.put("/aliases/blue", json={"collection": "green"})) == (409, "conflict")  # a collection
    assert _error(client.put("/aliases/a1", json={"collection": "nowhere"})) == (404, "collection_not_found")
    client.put("/aliases/a1", json={"collection": "blue"})
    r = client.put("/aliases/a2", json={"collection": "a1"})  # aliases point at collections, not at aliases
    assert _error(r) == (404, "collection_not_found") and "is an alias" in r.json()["error"]["message"]
    assert _error(client.put("/aliases/.hidden", json={"collection": "blue"}))[0] == 422
    assert _error(client.put("/aliases/a3", json={"collection": "blue", "extra": 1})) == (422, "invalid_request")
    assert _error(client.put("/aliases/a3", json={})) == (422, "invalid_request")
    # A new collection cannot take an alias's name: indexing into an alias writes into its collection instead.
    job = _index(client, "a1", [{"id": "blue-via-alias", "text": "written through an alias"}])
    assert job["collection"] == "blue"
    assert client.get("/collections/a1").json()["name"] == "blue"
    assert "a1" not in [c["name"] for c in client.get("/collections").json()["collections"]]
    client.delete("/aliases/a1")


def test_every_route_that_names_a_collection_takes_an_alias(client: httpx.Client) -> None:
    client.put("/aliases/all-routes", json={"collection": "green"})
    hits = client.post("/search", json={"collection": "all-routes", "query": "moon", "k": 10}).json()["hits"]
    assert hits and all(h["id"].startswith("green-") for h in hits)
    batch = client.post("/search/batch", json={"collection": "all-routes", "queries": ["moon", "tides"]}).json()
    assert all(h["id"].startswith("green-") for r in batch["results"] for h in r["hits"])
    assert client.get("/collections/all-routes").json()["name"] == "green"
    r = client.delete("/collections/all-routes/documents/green-3")
    assert r.status_code == 202 and wait_job(client, r.json()["job_id"])["collection"] == "green"
    after = client.post("/search", json={"collection": "green", "query": "moon", "k": 10}).json()["hits"]
    assert "green-3" not in {h["id"] for h in after}
    client.delete("/aliases/all-routes")


def test_an_alias_deletes_no_collection_and_a_deleted_collections_aliases_go_with_it(client: httpx.Client) -> None:
    _index(client, "doomed", [{"id": "x", "text": "short lived"}])
    client.put("/aliases/doomed-a", json={"collection": "doomed"})
    client.put("/aliases/doomed-b", json={"collection": "doomed"})
    client.put("/aliases/keeper", json={"collection": "blue"})
    r = client.delete("/collections/doomed-a")  # a client holding the alias as its handle drops nothing
    assert _error(r) == (409, "conflict") and "DELETE /collections/doomed" in r.json()["error"]["message"]
    assert client.get("/collections/doomed").json()["documents"] == 1
    assert client.delete("/collections/doomed").status_code == 204
    assert _error(client.get("/collections/doomed")) == (404, "collection_not_found")
    names = {a["alias"] for a in client.get("/aliases").json()["aliases"]}
    assert not names & {"doomed-a", "doomed-b"} and "keeper" in names
    client.delete("/aliases/keeper")


def test_a_switch_is_atomic_for_searches_running_through_it(client: httpx.Client) -> None:
    """One thread searches through the alias without pause while another flips it between two collections: every
    answer is a 200 with hits of one collection or the other, never an error or a mix."""
    client.put("/aliases/live", json={"collection": "blue"})
    searched = threading.Condition()
    count = 0
    stop = threading.Event()
    errors: list[str] = []
    seen: set[str] = set()

    def search() -> None:
        nonlocal count
        with httpx.Client(base_url=client.base_url, timeout=60) as own:
            while not stop.is_set():
                r = own.post("/search", json={"collection": "live", "query": "moon", "k": 10, "mode": "bm25"})
                colours = {h["id"].split("-")[0] for h in r.json().get("hits", [])} if r.status_code == 200 else set()
                if r.status_code != 200 or len(colours) != 1:
                    errors.append(f"{r.status_code}: {r.text[:200]}")
                seen.update(colours)
                with searched:
                    count += 1
                    searched.notify_all()

    def searches_past(n: int) -> bool:
        return count > n

    thread = threading.Thread(target=search)
    thread.start()
    try:
        for i in range(60):
            with searched:
                before = count
            target = "green" if i % 2 == 0 else "blue"
            assert client.put("/aliases/live", json={"collection": target}).status_code == 200
            with searched:  # at least one search ran after each flip (no timing: a bound against a hang only)
                assert searched.wait_for(partial(searches_past, before + 1), timeout=120)
    finally:
        stop.set()
        thread.join(120)
    assert errors == []
    assert seen == {"blue", "green"}
    assert count > 60
    client.delete("/aliases/live")


def test_aliases_are_shared_and_durable(client: httpx.Client, data_dir: Path, tiny_embedder_dir: Path) -> None:
    # Another process's store (a worker, another API process) sees a switch at once: the file is the state.
    other = CollectionStore(data_dir)
    client.put("/aliases/shared", json={"collection": "blue"})
    assert other.resolve("shared") == "blue" and other.get("shared").name == "blue"
    client.put("/aliases/shared", json={"collection": "green"})
    assert other.get("shared").name == "green"
    assert (data_dir / "aliases.json").is_file()


def test_aliases_survive_a_restart(tmp_path: Path, tiny_embedder_dir: Path) -> None:
    with running_server(tmp_path, embedder=str(tiny_embedder_dir)) as c:
        _index(c, "kept", [{"id": "k", "text": "kept across restarts"}])
        c.put("/aliases/stays", json={"collection": "kept"})
    with running_server(tmp_path, embedder=str(tiny_embedder_dir)) as c:
        assert c.get("/aliases/stays").json() == {"alias": "stays", "collection": "kept"}
        assert c.post("/search", json={"collection": "stays", "query": "kept"}).json()["hits"][0]["id"] == "k"
