"""The data and the systems `vela bench peers` measures: one collection read back (passages, vectors, queries,
qrels), and each system built from the same passages and vectors: Vela's engine call,
LanceDB (flat vectors, native FTS, both fused by RRF), Qdrant local mode and Chroma (see bench/peers.py)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
K = 10
MODES: tuple[str, ...] = ("dense", "bm25", "hybrid")
DISTRIBUTIONS = {"lancedb": "lancedb", "qdrant": "qdrant-client", "chroma": "chromadb"}
Search = Callable[[int], list[str]]  # query number -> ranked document ids


# ---- data: one collection, read back -------------------------------------------------------------------------


def ensure_collection(data: Path, data_dir: Path, name: str, embedder: str | None, max_docs: int | None) -> None:
    """The corpus ingested by `vela ingest` with the defaults into data_dir (once; later runs reuse it)."""
    from indexing.store import CollectionStore

    store = CollectionStore(data_dir)
    if store.exists(name) and store.get(name).read_versions():
        return
    cmd = [sys.executable, "-m", "cli.main", "ingest", "--data", str(data), "--collection", name]
    cmd += ["--data-dir", str(data_dir)]
    cmd += ["--embedder", embedder] if embedder else []
    cmd += ["--max-docs", str(max_docs)] if max_docs else []
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, cwd=REPO)


class Corpus:
    """Passages (ids, document ids, title + passage texts, vectors) and the judged queries that reach them."""

    def __init__(
        self,
        pids: np.ndarray,
        docs: list[str],
        texts: list[str],
        vectors: np.ndarray,
        queries: dict[str, str],
        qrels: dict[str, dict[str, int]],
        max_queries: int = 0,
    ) -> None:
        self.pids, self.docs, self.texts = pids, docs, texts
        self.vectors = np.ascontiguousarray(vectors, dtype=np.float32)  # (n, d)
        self.doc_by_pid = dict(zip(pids.tolist(), docs, strict=True))
        present = set(docs)
        qids = [q for q in qrels if q in queries and any(d in present for d in qrels[q])]
        self.qids = qids[:max_queries] if max_queries else qids
        self.queries = [queries[q] for q in self.qids]
        self.qrels = {q: qrels[q] for q in self.qids}

    @classmethod
    def read(cls, coll: Any, queries: dict[str, str], qrels: dict[str, dict[str, int]], max_queries: int) -> Corpus:
        """A one-shard collection's passages as its doc store holds them (the vectors its index was built from)."""
        pids, texts, vecs = [], [], []
        for p, t, v in coll.docstore.iter_passages():
            pids.append(p)
            texts.extend(t)
            vecs.append(v)
        all_pids = np.concatenate(pids)
        doc_of = coll.docstore.passage_docs(all_pids.tolist())
        docs = [doc_of[int(p)] for p in all_pids]
        return cls(all_pids, docs, texts, np.concatenate(vecs), queries, qrels, max_queries)


def ndcg10(qrels: dict[str, dict[str, int]], runs: dict[str, list[str]]) -> float:
    import ir_measures

    run = {q: {d: float(K - i) for i, d in enumerate(docs)} for q, docs in runs.items()}
    return round(float(ir_measures.calc_aggregate([ir_measures.nDCG @ 10], qrels, run)[ir_measures.nDCG @ 10]), 4)


def first_docs(doc_ids: Sequence[str], k: int = K) -> list[str]:
    """The first k distinct documents of a ranked passage list."""
    seen: dict[str, None] = {}
    for d in doc_ids:
        seen.setdefault(d, None)
        if len(seen) == k:
            break
    return list(seen)


class Vela:
    """Vela's engine call, as the service makes it (without encoding and hydration)."""

    def __init__(self, coll: Any, corpus: Corpus, qvecs: np.ndarray) -> None:
        from indexing.engine import LOCAL_FANOUT
        from indexing.fusion import FusionSpec, fusion_in_force
        from indexing.ranking import RankRequest

        coll.refresh(LOCAL_FANOUT)
        self.coll, self.fanout, self.corpus, self.qvecs = coll, LOCAL_FANOUT, corpus, qvecs
        fusion = fusion_in_force(None, coll.settings.fusion)
        self.requests = {m: RankRequest(mode=m, k=K, fusion=fusion) for m in MODES}  # type: ignore[arg-type]
        # Plain RRF (k 60), LanceDB's fusion: what the collection's chosen fusion adds, apart from speed.
        self.requests["hybrid-rrf"] = RankRequest(mode="hybrid", k=K, fusion=FusionSpec())
        self.fusion = fusion.label

    def searcher(self, mode: str) -> Search:
        """`mode`: dense, bm25, hybrid (the collection's fusion) or hybrid-rrf."""
        from indexing.engine import search

        req, coll, fanout = self.requests[mode], self.coll, self.fanout
        queries, doc_of = self.corpus.queries, self.corpus.doc_by_pid

        def run(qi: int) -> list[str]:
            qv = self.qvecs[qi : qi + 1] if mode != "bm25" else None
            (fused,) = search(coll, fanout, qv, [queries[qi]], req)
            return [doc_of[pid] for _, _, pid in fused.top]

        return run


class Lance:
    """LanceDB: flat vector search, native FTS, and both fused by RRF."""

    def __init__(self, root: Path, corpus: Corpus, qvecs: np.ndarray, limit: int) -> None:
        os.environ.setdefault("LANCEDB_LOG", "error")  # its sub-queries warn on every hybrid search otherwise
        import lancedb
        import pyarrow as pa
        from lancedb.index import FTS
        from lancedb.rerankers import RRFReranker

        d = corpus.vectors.shape[1]
        vectors = pa.FixedSizeListArray.from_arrays(pa.array(corpus.vectors.ravel()), d)
        table = pa.table({"pid": corpus.pids, "doc": corpus.docs, "text": corpus.texts, "vector": vectors})
        self.table: Any = lancedb.connect(str(root)).create_table("peers", table)
        self.table.create_index("text", config=FTS())
        self.rrf = RRFReranker()
        self.corpus, self.qvecs, self.limit = corpus, qvecs, limit

    def query(self, mode: str, text: str, vector: np.ndarray | None, columns: list[str]) -> Any:
        t = self.table
        if mode == "dense":
            q = t.search(vector, query_type="vector").distance_type("cosine").select([*columns, "_distance"])
        elif mode == "bm25":
            q = t.search(text, query_type="fts").select([*columns, "_score"])
        else:
            q = t.search(query_type="hybrid").vector(vector).text(text).distance_type("cosine").rerank(self.rrf)
            q = q.select(columns)
        return q.limit(self.limit).to_arrow()

    def searcher(self, mode: str) -> Search:
        queries, qvecs = self.corpus.queries, self.qvecs

        def run(qi: int) -> list[str]:
            out = self.query(mode, queries[qi], qvecs[qi] if mode != "bm25" else None, ["doc"])
            return first_docs(out.column("doc").to_pylist())

        return run


class Qdrant:
    """Qdrant local mode (in memory, exhaustive cosine)."""

    def __init__(self, corpus: Corpus, qvecs: np.ndarray, limit: int) -> None:
        from qdrant_client import QdrantClient, models

        self.client = QdrantClient(":memory:")
        d = corpus.vectors.shape[1]
        self.client.create_collection("peers", models.VectorParams(size=d, distance=models.Distance.COSINE))
        self.client.upload_collection("peers", corpus.vectors, ids=corpus.pids.tolist(), wait=True)
        self.corpus, self.qvecs, self.limit = corpus, qvecs, limit

    def searcher(self, mode: str) -> Search:
        doc_of, qvecs, client, limit = self.corpus.doc_by_pid, self.qvecs, self.client, self.limit

        def run(qi: int) -> list[str]:
            res = client.query_points("peers", query=qvecs[qi], limit=limit, with_payload=False)
            return first_docs([doc_of[int(p.id)] for p in res.points])

        return run


class Chroma:
    """Chroma in memory (cosine HNSW, its default index)."""

    def __init__(self, corpus: Corpus, qvecs: np.ndarray, limit: int) -> None:
        import chromadb
        from chromadb.config import Settings

        client = chromadb.EphemeralClient(Settings(anonymized_telemetry=False))
        self.coll = client.create_collection("peers", metadata={"hnsw:space": "cosine"}, embedding_function=None)
        ids = [str(p) for p in corpus.pids.tolist()]
        for s in range(0, len(ids), 4096):
            self.coll.add(ids=ids[s : s + 4096], embeddings=corpus.vectors[s : s + 4096])
        self.corpus, self.qvecs, self.limit = corpus, qvecs, limit

    def searcher(self, mode: str) -> Search:
        doc_of, qvecs, coll, limit = self.corpus.doc_by_pid, self.qvecs, self.coll, self.limit

        def run(qi: int) -> list[str]:
            res = coll.query(query_embeddings=qvecs[qi : qi + 1], n_results=limit, include=[])
            return first_docs([doc_of[int(p)] for p in res["ids"][0]])

        return run


PEER_MODES = {"lancedb": MODES, "qdrant": ("dense",), "chroma": ("dense",)}


def versions(peers: Sequence[str]) -> dict[str, str]:
    names = ["faiss-cpu", "bm25s", "onnxruntime", *(DISTRIBUTIONS[p] for p in peers)]
    if "lancedb" in peers:
        names.append("pyarrow")
    out = {}
    for n in names:
        try:
            out[n] = importlib.metadata.version(n)
        except importlib.metadata.PackageNotFoundError:
            out[n] = "not installed"
    return out


def available(wanted: Sequence[str]) -> list[str]:
    modules = {"lancedb": "lancedb", "qdrant": "qdrant_client", "chroma": "chromadb"}
    return [p for p in wanted if importlib.util.find_spec(modules[p]) is not None]
