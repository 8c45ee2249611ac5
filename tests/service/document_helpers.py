"""Shared by the document API tests: a server on the tiny embedder, indexing and scrolling through HTTP, and a
counter of the server's document encoder calls."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from tests.service.conftest import running_app, wait_job


@contextmanager
def tiny_server(data_dir: Path, embedder: Path) -> Iterator[tuple[httpx.Client, FastAPI]]:
    with running_app(data_dir, embedder=str(embedder)) as (client, app):
        yield client, app


def run_job(client: httpx.Client, response: httpx.Response, expect: str = "succeeded") -> dict[str, Any]:
    assert response.status_code == 202, response.text
    job = wait_job(client, response.json()["job_id"])
    assert job["status"] == expect, job
    return job


def index(client: httpx.Client, collection: str, docs: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return run_job(client, client.post("/index", json={"collection": collection, "documents": docs, **extra}))


def scroll_all(
    client: httpx.Client, collection: str, *, limit: int = 100, filter: dict[str, Any] | None = None, **order: str
) -> tuple[list[dict[str, Any]], list[int]]:
    """Every document a scroll returns, and the size of each page (`order`: order_by and direction)."""
    params: dict[str, Any] = {"limit": limit, **order}
    if filter is not None:
        params["filter"] = json.dumps(filter)
    out: list[dict[str, Any]] = []
    sizes: list[int] = []
    while True:
        r = client.get(f"/collections/{collection}/documents", params=params)
        assert r.status_code == 200, r.text
        page = r.json()
        out.extend(page["documents"])
        sizes.append(len(page["documents"]))
        if page["next_cursor"] is None:
            return out, sizes
        params["cursor"] = page["next_cursor"]


class EncoderCalls:
    """Counts the texts the server process embeds as documents (every ingest path calls encode_documents)."""

    def __init__(self, app: FastAPI, collection: str, monkeypatch: pytest.MonkeyPatch) -> None:
        state = app.state.vela
        embedder = state.embedders.get(state.collections.get(collection).settings.embedder)
        self.texts = 0
        original = embedder.encode_documents

        def counting(texts: Any, **kwargs: Any) -> Any:
            self.texts += len(texts)
            return original(texts, **kwargs)

        monkeypatch.setattr(embedder, "encode_documents", counting)
