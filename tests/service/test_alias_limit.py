"""The aliases of a data directory are capped (VELA_MAX_ALIASES): a new alias past the cap is a 409 limit_exceeded
in the error shape and writes nothing, while switching or deleting an existing one still works."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.service.conftest import error_body, running_server, wait_job


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory, tiny_embedder_dir: Path) -> Iterator[tuple[httpx.Client, Path]]:
    data_dir = tmp_path_factory.mktemp("alias-limit")
    with running_server(data_dir, embedder=str(tiny_embedder_dir), max_aliases=3) as c:
        for name in ("blue", "green"):
            r = c.post("/index", json={"collection": name, "documents": [{"id": "a", "text": "tides"}]})
            assert wait_job(c, r.json()["job_id"])["status"] == "succeeded"
        yield c, data_dir


def test_a_new_alias_past_the_cap_is_refused_and_writes_nothing(client: tuple[httpx.Client, Path]) -> None:
    c, data_dir = client
    for alias in ("a1", "a2", "a3"):
        assert c.put(f"/aliases/{alias}", json={"collection": "blue"}).status_code == 200
    before = (data_dir / "aliases.json").read_bytes()

    r = c.put("/aliases/a4", json={"collection": "blue"})
    assert r.status_code == 409, r.text
    err = error_body(r)
    assert err["code"] == "limit_exceeded" and "VELA_MAX_ALIASES" in err["message"], err
    assert "3 aliases" in err["message"]
    assert (data_dir / "aliases.json").read_bytes() == before
    assert c.get("/aliases/a4").status_code == 404

    assert c.put("/aliases/a1", json={"collection": "green"}).status_code == 200  # a switch is not a new alias
    assert c.get("/aliases/a1").json()["collection"] == "green"
    assert c.delete("/aliases/a2").status_code == 204
    assert c.put("/aliases/a4", json={"collection": "blue"}).status_code == 200  # room again
    assert [a["alias"] for a in c.get("/aliases").json()["aliases"]] == ["a1", "a3", "a4"]
