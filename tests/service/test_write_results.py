"""A write job's `result` says what it did, as Elasticsearch's `result` (created, updated, noop) does: an upsert
counts the documents it embedded, those whose metadata alone it rewrote, and those it found stored as sent; a
patch counts those it changed, found already so, or found deleted since it was queued."""

from __future__ import annotations

from pathlib import Path

from indexing.jobs import JobKind
from tests.service.conftest import running_app, wait_job


def test_an_upsert_and_a_patch_say_what_they_did(tmp_path: Path, tiny_embedder_dir: Path) -> None:
    with running_app(tmp_path, embedder=str(tiny_embedder_dir)) as (client, _):

        def upsert(docs: list[dict[str, object]]) -> dict[str, object]:
            job = wait_job(client, client.post("/index", json={"collection": "c", "documents": docs}).json()["job_id"])
            assert job["status"] == "succeeded", job
            return dict(job["result"])

        a, b = {"id": "a", "text": "tides and the moon"}, {"id": "b", "text": "rust and water"}
        assert upsert([a, b]) == {"embedded": 2, "metadata_only": 0, "unchanged": 0}
        assert upsert([a, b]) == {"embedded": 0, "metadata_only": 0, "unchanged": 2}  # a noop, said so
        moved = {**b, "metadata": {"k": 1}}
        assert upsert([a, moved, {"id": "c", "text": "new"}]) == {"embedded": 1, "metadata_only": 1, "unchanged": 1}

        r = client.patch("/collections/c/documents/a", json={"metadata": {"k": 2}})
        assert wait_job(client, r.json()["job_id"])["result"] == {"patched": 1, "unchanged": 0, "not_found": 0}
        r = client.patch("/collections/c/documents/a", json={"metadata": {"k": 2}})
        assert wait_job(client, r.json()["job_id"])["result"] == {"patched": 0, "unchanged": 1, "not_found": 0}
        # A patch queued behind a delete of its document (both recorded as their routes record them, the delete
        # first: writes run in that order) finds it gone, and says so rather than "succeeded" alone.
        state = _.state.vela
        delete = state.jobs.create(collection="c", kind=JobKind.DELETE, payload=["b"])
        patch = state.jobs.create(
            collection="c", kind=JobKind.PATCH, payload=[{"id": "b", "metadata": {"k": 3}, "mode": "merge"}]
        )
        for job in (delete, patch):
            state.queue.submit(job.id)
        assert wait_job(client, delete.id)["result"] == {"deleted": 1}
        assert wait_job(client, patch.id)["result"] == {"patched": 0, "unchanged": 0, "not_found": 1}
