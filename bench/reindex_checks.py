"""The checks of `vela bench reindex` (bench/reindex.py) after the promotion: documents, vectors, rollback, and the
gated reindex to a worse model."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from bench.common import random_bert_encoder, wait_jobs

BEIR = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "beir" / "scifact"


def results(client: httpx.Client, queries: list[str]) -> list[list[tuple[str, float]]]:
    out = []
    for q in queries:
        r = client.post("/search", json={"collection": "scifact", "query": q, "mode": "hybrid", "k": 10})
        r.raise_for_status()
        out.append([(h["id"], h["score"]) for h in r.json()["hits"]])
    return out


def first_step(data: Path) -> list[str]:
    """The documents the reindex embeds in its first step, in its order (indexing.gen_sync.pending's), read before
    it starts: the writes that follow sort after them and cannot change it."""
    from indexing import generations as gens
    from indexing.gen_sync import PAGE, stored_hashes

    return list(stored_hashes(gens.open_generation(data / "collections" / "scifact", 0)))[:PAGE]


def checks(
    client: httpx.Client,
    data: Path,
    new_ids: list[str],
    compare: list[str],
    before: list[list[tuple[str, float]]],
    page: list[str],
) -> dict[str, Any]:
    from indexing import generations as gens
    from indexing.gen_sync import stored_hashes
    from indexing.prepare import prepare_documents
    from models import EmbedderCache

    root = data / "collections" / "scifact"
    info = client.get("/collections/scifact").json()
    pointer = gens.read_pointer(root)
    new, old = gens.open_generation(root, pointer.current), gens.open_generation(root, pointer.previous or 0)
    held = stored_hashes(new)
    served = sum(client.get(f"/collections/scifact/documents/{d}").status_code == 200 for d in new_ids)
    # The reindex's first step, encoded again with the registered embedder: the same input in the same order, so
    # the vectors must be the promoted generation's bit for bit (the int8 encoder's output depends on the batch).
    embedder = EmbedderCache().get(new.settings.embedder)
    records = old.documents(page).values()
    docs = [{"id": r.doc_id, "title": r.title, "text": r.text, "metadata": r.metadata} for r in records]
    again = prepare_documents(docs, new, embedder)
    vec_new = np.concatenate([_vectors(new, d.doc_id) for d in again])
    vec_old = np.concatenate([_vectors(old, d.doc_id) for d in again])
    vec_again = np.concatenate([d.embeddings for d in again])
    old_model = EmbedderCache().get(old.settings.embedder)
    vec_old_again = np.concatenate([d.embeddings for d in prepare_documents(docs, old, old_model)])
    cos = (vec_new * vec_old).sum(1) / np.linalg.norm(vec_new, axis=1) / np.linalg.norm(vec_old, axis=1)
    promoted = results(client, compare)
    rollback = client.post("/collections/scifact/rollback").json()["job_id"]
    rolled = wait_jobs(client, [rollback])[0]
    restored = results(client, compare)
    return {
        "current_generation": info["generations"]["current"],
        "previous_generation": info["generations"]["previous"],
        "new_documents_in_promoted_generation": sum(d in held for d in new_ids),
        "new_documents_served_after_promotion": served,
        "promoted_generation_documents": len(held),
        "vectors": {
            "passages_checked": int(len(vec_new)),
            "max_abs_diff_promoted_vs_new_embedder": float(np.abs(vec_new - vec_again).max()),
            "max_abs_diff_promoted_vs_previous_generation": float(np.abs(vec_new - vec_old).max()),
            "max_abs_diff_previous_generation_vs_old_embedder": float(np.abs(vec_old - vec_old_again).max()),
            "mean_cosine_promoted_vs_previous_generation": round(float(cos.mean()), 6),
        },
        "rollback_job": rolled["status"],
        "queries_compared": len(compare),
        "promoted_results_differ_from_before": sum(a != b for a, b in zip(promoted, before, strict=True)),
        "rollback_results_identical_to_before": sum(a == b for a, b in zip(restored, before, strict=True)),
        "rollback_same_ids_as_before": sum(
            [i for i, _ in a] == [i for i, _ in b] for a, b in zip(restored, before, strict=True)
        ),
        "rollback_max_score_diff": max(
            (abs(x[1] - y[1]) for a, b in zip(restored, before, strict=True) for x, y in zip(a, b, strict=False)),
            default=0.0,
        ),
    }


def _vectors(coll: Any, doc_id: str) -> np.ndarray:
    """A document's stored passage vectors, in passage order."""
    pids = [p for p, _, _, _ in coll.docstore.document(doc_id).passages]
    return np.stack([next(iter(coll.docstore.batches_after(p - 1, 1))).embeddings[0] for p in pids])


def gate(client: httpx.Client, data: Path, work: Path) -> dict[str, Any]:
    """A gated reindex to a randomly initialised tiny model, judged on SciFact's test queries: refused."""
    from models.registry import ModelRegistry

    folder = data / "datasets" / "scifact"
    (folder / "qrels").mkdir(parents=True)
    shutil.copy(BEIR / "queries.jsonl", folder / "queries.jsonl")
    shutil.copy(BEIR / "qrels" / "test.tsv", folder / "qrels" / "test.tsv")
    tiny = random_bert_encoder(work / "random", hidden=32, heads=2, intermediate=64, max_positions=512, max_length=256)
    ModelRegistry(data / "models").register("random-tiny", tiny)
    body = {"embedder": "random-tiny", "gate": {"dataset": "scifact", "mode": "dense", "tolerance": 0.01}}
    t = time.time()
    job = wait_jobs(client, [client.post("/collections/scifact/reindex", json=body).json()["job_id"]])[0]
    return {
        "request": body,
        "status": job["status"],
        "error": job["error"],
        "result": job["result"],
        "seconds": round(time.time() - t, 1),
        "serving_embedder_after": client.get("/collections/scifact").json()["generations"]["current"],
    }


def generations_on_disk(data: Path) -> dict[str, Any]:
    from indexing import generations as gens

    root = data / "collections" / "scifact"
    leftovers = [p.name for p in (root / gens.GEN_DIR).iterdir() if not p.name.isdigit()]
    return {"generations": gens.on_disk(root), "leftovers": leftovers}
