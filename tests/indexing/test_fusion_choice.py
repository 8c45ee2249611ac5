"""The fusion chooser on synthetic collections where one retriever is clearly the better, with no judgements.

Documents are sentences of made-up words. An oracle "embedder" stands in for a model:
- `SynonymEmbedder` knows which document each word belongs to (word w{d}s{j} means document d): every
  sentence of a document embeds alike, though no two sentences of it share a word. BM25 cannot tie a
  sentence to the rest of its document; the dense side can. The chooser must pick dense, or lean to it.
- `NoiseEmbedder` maps every text to a random vector: here the sentences of a document share key words,
  BM25 ties them, dense is noise. The chooser must pick BM25, or lean to it.
"""

from __future__ import annotations

import logging
import random
import re
import sys
import zlib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from indexing import fusion_choice
from indexing.bm25 import BM25Params
from indexing.chunking import ChunkingParams
from indexing.collection import Collection, CollectionSettings
from indexing.engine import LOCAL_FANOUT
from indexing.fusion import FusionSpec
from indexing.fusion_choice import TARGET, choice_due, choose_fusion, refresh_choice
from indexing.merger import BACKGROUND, wait_background
from indexing.prepare import chunk_and_embed
from indexing.pseudo_queries import ChoiceParams, sample_pseudo_queries
from indexing.store import CollectionStore
from tests.tiny_models import minilm_tokenizer

DOCS, SENTENCES, COMMON = 80, 4, 40
DIM = DOCS + 8


class OracleEmbedder:
    contextual = False

    def __init__(self, vector: Callable[[str], np.ndarray]) -> None:
        self.tokenizer = minilm_tokenizer()
        self.vector = vector
        self.dim = DIM
        self.name = "oracle"

    def encode_queries(self, texts: Sequence[str], *, batch_size: int = 64, context: Any = None) -> np.ndarray:
        return np.stack([self.vector(t) for t in texts]).astype(np.float32)

    def encode_documents(self, texts: Sequence[str], *, batch_size: int = 32, context: Any = None) -> np.ndarray:
        return self.encode_queries(texts)


def synonym_vector(text: str) -> np.ndarray:
    v = np.zeros(DIM)
    for d in re.findall(r"\bw(\d+)s\d+x\d+", text):
        v[int(d)] += 1.0
    v[-1] = 0.1  # never the zero vector
    return v / np.linalg.norm(v)


def noise_vector(text: str) -> np.ndarray:
    v = np.random.default_rng(zlib.crc32(text.encode())).normal(size=DIM)
    return v / np.linalg.norm(v)


def synonym_docs() -> list[dict[str, Any]]:
    """Sentence j of document d: its own words w{d}s{j}x{k} and common words shared by every document."""
    rng = random.Random(1)
    out = []
    for d in range(DOCS):
        sentences = []
        for j in range(SENTENCES):
            words = [f"w{d}s{j}x{k}" for k in range(4)] + [f"common{rng.randrange(COMMON)}" for _ in range(3)]
            rng.shuffle(words)
            sentences.append(" ".join(words) + ".")
        out.append({"id": f"doc{d}", "title": "", "text": " ".join(sentences)})
    return out


def keyword_docs() -> list[dict[str, Any]]:
    """Every sentence of document d holds two of its five key words key{d}k{i}, and common words."""
    rng = random.Random(2)
    out = []
    for d in range(DOCS):
        sentences = []
        for _ in range(SENTENCES):
            words = [f"key{d}k{i}" for i in rng.sample(range(5), 2)] + [
                f"common{rng.randrange(COMMON)}" for _ in range(4)
            ]
            rng.shuffle(words)
            sentences.append(" ".join(words) + ".")
        out.append({"id": f"doc{d}", "title": "", "text": " ".join(sentences)})
    return out


def build(tmp_path: Path, docs: list[dict[str, Any]], embedder: OracleEmbedder) -> Collection:
    settings = CollectionSettings(
        name="synthetic", embedder="oracle", dim=DIM, chunking=ChunkingParams(max_tokens=512), bm25=BM25Params()
    )
    coll = CollectionStore(tmp_path).create(settings)
    coll.docstore.upsert(chunk_and_embed(docs, chunking=settings.chunking, embedder=embedder))  # type: ignore[arg-type]
    with coll.writer():
        coll.commit()
    return coll


@pytest.fixture
def opened() -> Iterator[list[str]]:
    """Every path the process opens while the test runs (an audit hook cannot be removed: it goes quiet)."""
    paths: list[str] = []
    live = [True]

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if live[0] and event == "open" and isinstance(args[0], str | bytes | Path):
            paths.append(str(args[0]))

    sys.addaudithook(hook)
    yield paths
    live[0] = False


def test_pseudo_queries_leave_their_sentence_out_of_the_passage(tmp_path: Path) -> None:
    coll = build(tmp_path, synonym_docs(), OracleEmbedder(synonym_vector))
    pqs = sample_pseudo_queries(coll, ChoiceParams(samples=20))
    assert len(pqs) == 20 and len({p.doc_id for p in pqs}) == 20
    for p in pqs:
        doc = coll.document(p.doc_id)
        assert doc is not None and p.query not in p.rest and len(p.query.split()) == 7
        assert set(p.query.split()) <= set(doc.text.split())
    assert sample_pseudo_queries(coll, ChoiceParams(samples=20)) == pqs  # a fixed seed: the same queries
    whole = sample_pseudo_queries(coll, ChoiceParams(samples=20, cut=False))  # the comparison the bench runs
    assert [p.query for p in whole] == [p.query for p in pqs] and all(p.query[:-1] in p.rest for p in whole)


def test_dense_wins_where_only_meaning_ties_a_sentence_to_its_document(tmp_path: Path, opened: list[str]) -> None:
    embedder = OracleEmbedder(synonym_vector)
    coll = build(tmp_path, synonym_docs(), embedder)
    choice = choose_fusion(coll, embedder, LOCAL_FANOUT, ChoiceParams(samples=60))
    assert choice.scores["dense"] == 1.0 and choice.scores["bm25"] < 0.5  # BM25 has only the common words
    assert choice.scores["rrf"] < 1.0  # BM25's common-word matches push the source down
    assert choice.spec == FusionSpec("dense")  # the first candidate of those that find every source first
    assert not [p for p in opened if "qrels" in p]


def test_bm25_wins_where_dense_is_noise(tmp_path: Path, opened: list[str]) -> None:
    embedder = OracleEmbedder(noise_vector)
    coll = build(tmp_path, keyword_docs(), embedder)
    choice = choose_fusion(coll, embedder, LOCAL_FANOUT, ChoiceParams(samples=60))
    assert choice.scores["bm25"] > choice.scores["rrf"] > choice.scores["dense"]
    spec = choice.spec
    assert spec.method == "bm25" or (spec.alpha is not None and spec.alpha <= 0.3), spec
    assert not [p for p in opened if "qrels" in p]


def test_the_choice_is_kept_and_made_again_when_the_collection_doubles(tmp_path: Path) -> None:
    embedder = OracleEmbedder(synonym_vector)
    coll = build(tmp_path, synonym_docs()[:50], embedder)
    assert coll.settings.fusion == {"method": "rrf"} and choice_due(coll)
    choice = refresh_choice(coll, embedder, LOCAL_FANOUT, ChoiceParams(samples=30))
    stored = coll.settings.fusion
    assert FusionSpec.from_json(stored) == choice.spec and stored["chosen"]["documents"] == 50
    assert coll.stats()["fusion"] == stored
    reopened = CollectionStore(tmp_path).get("synthetic")
    assert reopened.settings.fusion == stored  # in collection.json
    assert not choice_due(coll)
    coll.docstore.upsert(chunk_and_embed(synonym_docs()[50:], chunking=coll.settings.chunking, embedder=embedder))  # type: ignore[arg-type]
    assert not choice_due(coll)  # 80 documents: not yet twice 50
    more = [{**d, "id": f"{d['id']}-b"} for d in synonym_docs()[:20]]
    coll.docstore.upsert(chunk_and_embed(more, chunking=coll.settings.chunking, embedder=embedder))  # type: ignore[arg-type]
    assert choice_due(coll)


def test_the_source_is_put_back_in_both_lists(tmp_path: Path) -> None:
    from indexing.fusion_choice import pseudo_runs

    embedder = OracleEmbedder(synonym_vector)
    coll = build(tmp_path, synonym_docs(), embedder)
    params = ChoiceParams(samples=5, depth=10)
    runs = pseudo_runs(coll, embedder, LOCAL_FANOUT, sample_pseudo_queries(coll, params), params)
    for r in runs:
        assert r["dense"][0][0] == TARGET and len(r["dense"]) == 10
        assert sum(key == TARGET for key, _ in r["bm25"]) <= 1 and len(r["bm25"]) <= 10
        scores = [s for _, s in r["bm25"]]
        assert scores == sorted(scores, reverse=True)


def test_code_lines_are_no_queries_a_docstring_is(tmp_path: Path) -> None:
    code = (
        "def split_lines(value):\n"
        '    """Split a multiline string into a list of its lines."""\n'
        "    parts = [element for element in value.split('\\n')]\n"
        "    return [p.strip() for p in parts if p]\n"
    )
    docs = [{"id": f"c{i}", "title": "", "text": code.replace("split_lines", f"split_lines_{i}")} for i in range(3)]
    coll = build(tmp_path, docs, OracleEmbedder(noise_vector))
    pqs = sample_pseudo_queries(coll, ChoiceParams(samples=3))
    assert [p.query for p in pqs] == ['"""Split a multiline string into a list of its lines."""'] * 3
    assert all("return [p.strip()" in p.rest and "Split a multiline" not in p.rest for p in pqs)


class CommittingEmbedder(OracleEmbedder):
    """Commits new documents, more times than manifests are kept, while the chooser encodes its pseudo-queries:
    what a stream of ingest jobs does beside a background choice."""

    def __init__(self, coll: Collection | None = None) -> None:
        super().__init__(synonym_vector)
        self.coll, self.commits = coll, 0

    def encode_documents(self, texts: Sequence[str], *, batch_size: int = 32, context: Any = None) -> np.ndarray:
        if self.coll is not None:
            from indexing.manifest import KEEP_MANIFESTS

            for i in range(KEEP_MANIFESTS + 2):
                doc = {"id": f"late{self.commits}-{i}", "title": "", "text": "w1s1x1 w1s1x2 common1 late."}
                coll = self.coll
                self.coll = None  # chunk_and_embed below encodes with this embedder too
                coll.docstore.upsert(chunk_and_embed([doc], chunking=coll.settings.chunking, embedder=self))  # type: ignore[arg-type]
                with coll.writer():
                    coll.commit()
                coll.query_context(LOCAL_FANOUT)  # a search loads the new view: older ones leave the cache
                self.coll = coll
            self.commits += 1
        return super().encode_documents(texts)


def test_commits_while_the_chooser_encodes_do_not_fail_it(tmp_path: Path) -> None:
    # The chooser read the published versions before encoding; commits meanwhile removed their manifests and
    # the background choice failed with a ManifestError. It reads the index after encoding (and again if needed).
    embedder = CommittingEmbedder()
    coll = build(tmp_path, synonym_docs(), embedder)
    embedder.coll = coll
    before = coll.published_versions()
    choice = choose_fusion(coll, embedder, LOCAL_FANOUT, ChoiceParams(samples=30))
    assert embedder.commits >= 1 and coll.published_versions() != before
    assert choice.queries == 30 and choice.scores["dense"] > 0.9


class DeletingEmbedder(OracleEmbedder):
    """Deletes the collection while the chooser encodes its pseudo-queries: a DELETE right after an ingest."""

    def __init__(self, store: CollectionStore) -> None:
        super().__init__(synonym_vector)
        self.store: CollectionStore | None = store

    def encode_queries(self, texts: Sequence[str], *, batch_size: int = 64, context: Any = None) -> np.ndarray:
        if self.store is not None:
            self.store.delete("synthetic")
            self.store = None
        return super().encode_queries(texts)


def test_work_on_a_collection_deleted_meanwhile_ends_quietly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A collection deleted right after its ingest: the fusion choice the ingest queued found no published index
    (IndexNotReady) and logged "background work failed" with a traceback, an ERROR for what is no fault. A
    genuine failure is still one."""
    monkeypatch.setattr(fusion_choice, "AUTO_CHOOSE", True)
    caplog.set_level(logging.INFO, logger="vela.merge")
    build(tmp_path, synonym_docs()[:50], OracleEmbedder(synonym_vector))
    store = CollectionStore(tmp_path)
    coll = store.get("synthetic")
    embedder = DeletingEmbedder(store)
    fusion_choice.after_ingest(store, coll, SimpleNamespace(get=lambda _: embedder))  # deleted as it chooses
    assert wait_background(60) and embedder.store is None and not store.exists("synthetic")
    stopped = [r for r in caplog.records if r.name == "vela.merge"]
    assert [(r.levelname, r.getMessage()) for r in stopped] == [("INFO", "background work stopped: collection deleted")]
    assert stopped[0].__dict__["work"] == "fusion" and stopped[0].__dict__["collection"] == "synthetic"

    caplog.clear()
    live = build(tmp_path / "live", synonym_docs()[:50], OracleEmbedder(synonym_vector))

    def broken() -> None:
        raise RuntimeError("a real fault")

    BACKGROUND.submit(("fusion", id(live)), broken, live)
    assert wait_background(60)
    [failed] = [r for r in caplog.records if r.name == "vela.merge"]
    assert failed.levelname == "ERROR" and failed.getMessage() == "background work failed" and failed.exc_info
