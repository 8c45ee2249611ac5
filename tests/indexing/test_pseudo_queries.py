"""Title pseudo-queries: one per titled document, the title left out of its positive."""

from __future__ import annotations

from pathlib import Path

from indexing.pseudo_queries import title_pseudo_queries
from tests.indexing.test_fusion_choice import OracleEmbedder, build, synonym_vector


def test_a_title_of_enough_prose_words_is_a_query_and_is_left_out_of_its_positive(tmp_path: Path) -> None:
    docs = [
        {"id": "a", "title": "Insulin resistance rises with age", "text": "Older patients needed more insulin here."},
        {"id": "b", "title": "Short title", "text": "Too few words in the title to be asked for."},
        {"id": "c", "title": "", "text": "No title at all in this document, only the body text."},
        {"id": "d", "title": "x = f(y) for all y", "text": "A title that is code is no query a person types."},
        {"id": "e", "title": "Graphene sheets conduct heat well", "text": "ok"},  # a body too short to learn from
    ]
    coll = build(tmp_path, docs, OracleEmbedder(synonym_vector))
    pqs = title_pseudo_queries(coll)
    assert [(p.doc_id, p.query) for p in pqs] == [("a", "Insulin resistance rises with age")]
    p = pqs[0]
    assert p.rest == "Older patients needed more insulin here." and "Insulin resistance" not in p.rest
    doc = coll.document("a")
    assert doc is not None and p.pids == frozenset(x[0] for x in doc.passages)
