"""A reindex to a model with a new query side only: copying the document vectors against encoding them again.

The copy a reindex starts with (indexing/gen_sync.py `sync`) is run twice from one collection into two fresh empty
collections with the adapted model's settings: once as a reindex runs it (the document side is probed, found the
same, and the stored vectors copied) and once without a `VectorReuse` (every document encoded by the model as
it serves). Reported: the seconds of each, their ratio, how close the copied vectors are to the encoded ones, and
the test queries' dense NDCG@10 and top-10 overlap in both, searched with the model's query side. (Copied
vectors are the collection's as it was ingested; encoded ones are what the serving form gives now. Where the
collection was ingested in another precision the two differ by that, not by the model.)

    python -m bench.reindex_copy --data-dir .vela/adapt-data --collection scifact-1f3b2a32 \
        --model .vela/adapt-data/models/adapt-scifact-dev --out bench/results/reindex-copy-scifact.json
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import command, machine, write_result


def _build(
    source: Any, root: Path, name: str, embedder: Any, source_embedder: Any, model: str, copy: bool
) -> tuple[Any, float, Any]:
    from indexing.gen_sync import sync
    from indexing.store import CollectionStore
    from indexing.vector_reuse import VectorReuse

    store = CollectionStore(root)
    settings = dataclasses.replace(source.settings, name=name, embedder=model, created_at=time.time())
    target = store.create(settings)
    t0 = time.perf_counter()
    with target.writer():
        outcome = sync(source, target, embedder, reuse=VectorReuse(source_embedder) if copy else None)
    return store.get(name), time.perf_counter() - t0, outcome


def run(args: argparse.Namespace) -> dict[str, Any]:
    from indexing.engine import search as engine_search
    from indexing.ranking import RankRequest
    from service.settings import Settings
    from service.state import build_state
    from velaio.beir import read_qrels, read_queries
    from velaio.measures import NDCG10, ranked_scores, score_run

    state = build_state(Settings(data_dir=Path(args.data_dir)))
    source = state.collections.get(args.collection)
    model = str(Path(args.model).resolve())
    embedder = state.embedders.get(model)
    source_embedder = state.embedders.get(source.settings.embedder)
    with tempfile.TemporaryDirectory(dir=args.data_dir) as tmp:
        copied, copy_s, copy_out = _build(source, Path(tmp), "copied", embedder, source_embedder, model, True)
        encoded, encode_s, encode_out = _build(source, Path(tmp), "encoded", embedder, source_embedder, model, False)
        ids = [d for shard in source.shard_list for d in shard.docstore.document_ids()]
        a, b = copied.stored_documents(ids), encoded.stored_documents(ids)
        va = np.concatenate([a[d].embeddings for d in ids])  # (P, d)
        vb = np.concatenate([b[d].embeddings for d in ids])  # (P, d)
        cos = (va * vb).sum(1) / (np.linalg.norm(va, axis=1) * np.linalg.norm(vb, axis=1))  # (P,)
        data = Path(args.data)
        queries, qrels = read_queries(data), read_qrels(data, "test")
        qids = [q for q in qrels if q in queries]
        qv = embedder.encode_queries([queries[q] for q in qids])  # (Q, d)
        req = RankRequest(mode="dense", k=10)
        runs = []
        for coll in (copied, encoded):
            found = engine_search(coll, state.collections.fanout, qv, [queries[q] for q in qids], req)
            passages = coll.passages({pid: f.shard_of[pid] for f in found for _, _, pid in f.top})
            docs = [list(dict.fromkeys(passages[pid].doc_id for _, _, pid in f.top)) for f in found]
            runs.append({q: ranked_scores(d) for q, d in zip(qids, docs, strict=True)})
        overlap = np.mean([len(set(runs[0][q]) & set(runs[1][q])) / max(1, len(runs[1][q])) for q in qids])
        ndcg = [score_run(qrels, r, {"ndcg@10": NDCG10})["ndcg@10"] for r in runs]
    return {
        "command": command(),
        "collection": args.collection,
        "documents": len(ids),
        "passages": len(va),
        "copy": {"seconds": round(copy_s, 2), "embedded": copy_out.embedded, "copied": copy_out.copied},
        "encode": {"seconds": round(encode_s, 2), "embedded": encode_out.embedded, "copied": encode_out.copied},
        "encode_over_copy": round(encode_s / copy_s, 1),
        "vector_cosine_copied_vs_encoded": {"min": round(float(cos.min()), 6), "mean": round(float(cos.mean()), 6)},
        "dense_ndcg@10": {"copied": ndcg[0], "encoded": ndcg[1]},
        "dense_top10_overlap": round(float(overlap), 4),
        "machine": machine(),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", required=True, help="the data directory holding the collection")
    p.add_argument("--collection", required=True)
    p.add_argument("--model", required=True, help="the adapted model's directory")
    p.add_argument("--data", default="../shared/data/beir/scifact", help="BEIR folder of the test queries")
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args()
    result = run(args)
    if args.out:
        write_result(args.out, result)
    else:
        import json

        print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
