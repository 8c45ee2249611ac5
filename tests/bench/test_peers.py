"""bench.peers: the peers' wrappers against brute force on a tiny synthetic corpus (default run), and the whole
bench on a tiny BEIR folder with a tiny random model, the end-to-end arm through a real server (slow). The
peers' tests need the `peers` extra (`make install-peers`) and are skipped without it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bench.peer_systems import MODES, Corpus, Lance, Qdrant, first_docs, ndcg10
from bench.peers import interleaved, main, summary

TOPICS = ["insulin", "graphene", "tides", "appeals", "volcano", "enzymes", "glacier", "malaria", "quasar", "vaccine"]


def synthetic(n_docs: int = 150, n_queries: int = 12, d: int = 16) -> Corpus:
    """Two passages per document, random unit vectors, texts on ten topics; each query judges its topic's docs."""
    rng = np.random.default_rng(0)
    pids = np.arange(2 * n_docs, dtype=np.int64)
    docs = [f"d{p // 2}" for p in pids]
    texts = [f"{TOPICS[(p // 2) % 10]} passage {p} trial {p % 7}" for p in pids]
    vecs = rng.standard_normal((len(pids), d)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    queries = {f"q{n}": f"{TOPICS[n % 10]} trial {n % 7}" for n in range(n_queries)}
    qrels = {f"q{n}": {f"d{i}": 1 for i in range(n % 10, n_docs, 10)} for n in range(n_queries)}
    return Corpus(pids, docs, texts, vecs, queries, qrels)


def test_peers_answer_like_brute_force(tmp_path: Path) -> None:
    pytest.importorskip("lancedb")
    pytest.importorskip("qdrant_client")
    corpus = synthetic()
    qvecs = np.random.default_rng(1).standard_normal((len(corpus.qids), 16)).astype(np.float32)
    qvecs /= np.linalg.norm(qvecs, axis=1, keepdims=True)
    lance, qdrant = Lance(tmp_path / "lance", corpus, qvecs, 20), Qdrant(corpus, qvecs, 20)
    for qi, qv in enumerate(qvecs):
        exact = first_docs([corpus.docs[i] for i in np.argsort(-(corpus.vectors @ qv), kind="stable")])
        assert lance.searcher("dense")(qi) == exact
        assert qdrant.searcher("dense")(qi) == exact
        assert len(lance.searcher("bm25")(qi)) == 10
        topic = corpus.queries[qi].split()[0]  # its full-text index finds exactly the documents of a topic word
        hits = lance.query("bm25", topic, None, ["doc"]).column("doc").to_pylist()
        assert hits and set(hits) <= set(corpus.qrels[corpus.qids[qi]])
        assert len(lance.searcher("hybrid")(qi)) == 10
    systems = {"a": lance.searcher("hybrid"), "b": qdrant.searcher("dense")}
    times, answers = interleaved(systems, len(corpus.qids), rounds=2, warm=1)
    assert {len(t) for t in times.values()} == {2 * len(corpus.qids)}
    assert {len(a) for a in answers.values()} == {len(corpus.qids)}
    assert 0 < ndcg10(corpus.qrels, dict(zip(corpus.qids, answers["a"], strict=True))) <= 1


def test_summary_targets() -> None:
    def row(p50: float, ndcg: float) -> dict[str, float]:
        return {"p50_ms": p50, "p99_ms": 2 * p50, "ndcg@10": ndcg}

    engine = {"hybrid": {"vela": row(2.0, 0.7), "lancedb": row(6.5, 0.69)}, "dense": {"vela": row(1, 0.6)}}
    e2e = {m: {"vela_http": row(5.0, 0.7), "lancedb_inprocess": row(6.0, 0.7)} for m in MODES}
    s = summary(engine, e2e)
    assert s["target_hybrid_engine_3x_at_equal_ndcg"]["speedup_p50"] == 3.25
    assert s["target_hybrid_engine_3x_at_equal_ndcg"]["met"]
    assert s["target_e2e_vela_http_faster_every_mode"]["met"]
    engine["hybrid"]["lancedb"]["ndcg@10"] = 0.71  # faster but worse: not met
    assert not summary(engine, e2e)["target_hybrid_engine_3x_at_equal_ndcg"]["met"]
    e2e["bm25"]["vela_http"]["p50_ms"] = 6.5
    assert not summary(engine, e2e)["target_e2e_vela_http_faster_every_mode"]["met"]


def write_beir(root: Path, docs: int = 150, queries: int = 12) -> Path:
    """A BEIR folder: documents on ten topics (every fifth long enough for several passages), one query each."""
    root.mkdir()
    lines = []
    for i in range(docs):
        topic = TOPICS[i % 10]
        body = " ".join(f"{topic} sample {i} shows effect {j} in trial {i % 7}." for j in range(4 + 40 * (i % 5 == 0)))
        lines.append({"_id": f"d{i}", "title": f"On {topic} {i}", "text": body})
    (root / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in lines))
    qs = [{"_id": f"q{n}", "text": f"{TOPICS[n % 10]} trial {n % 7}"} for n in range(queries)]
    (root / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in qs))
    (root / "qrels").mkdir()
    rows = ["query-id\tcorpus-id\tscore"] + [f"q{n}\td{i}\t1" for n in range(queries) for i in range(n % 10, docs, 70)]
    (root / "qrels" / "test.tsv").write_text("\n".join(rows) + "\n")
    return root


@pytest.mark.slow
def test_peers_bench_tiny(tmp_path: Path, tiny_embedder_dir: Path) -> None:
    pytest.importorskip("lancedb")
    pytest.importorskip("qdrant_client")
    data = write_beir(tmp_path / "tiny")
    out = tmp_path / "peers.json"
    args = ["--data", str(data), "--workdir", str(tmp_path / "wd"), "--embedder", str(tiny_embedder_dir)]
    main([*args, "--rounds", "2", "--peers", "lancedb,qdrant", "--out", str(out)])
    r = json.loads(out.read_text())
    assert r["passages"] > r["documents"] == 150 and r["queries"] == 12
    assert r["peers"] == ["lancedb", "qdrant"]
    for mode in MODES:
        for s in r["engine"][mode].values():
            assert s["searches"] == 2 * 12 and 0 < s["p50_ms"] <= s["p99_ms"] and 0 <= s["ndcg@10"] <= 1
        e2e = r["end_to_end"][mode]
        assert set(e2e) == {"vela_http", "lancedb_inprocess"}
        assert e2e["vela_http"]["server_timing_p50_ms"]["total"] > 0
    # The same vectors searched exhaustively: the dense answers agree (up to float ties).
    dense = r["engine"]["dense"]
    assert abs(dense["vela"]["ndcg@10"] - dense["lancedb"]["ndcg@10"]) < 0.05
    assert abs(dense["vela"]["ndcg@10"] - dense["qdrant"]["ndcg@10"]) < 0.05
    assert set(r["summary"]["target_e2e_vela_http_faster_every_mode"]["speedup_p50"]) == set(MODES)
    assert r["versions"]["lancedb"] and r["cpu_model"] and len(r["loadavg_start"]) == 3 and r["loadavg_end"]
    assert r["command"]
