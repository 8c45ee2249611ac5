"""Adversarial contextual batching, false-negative filtering, and the pair sources."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from training.data.batching import false_negative_mask, make_batches, mean_negative_similarity
from training.data.pairs import load_pairs, mined_pairs, qrels_pairs


def _clustered(n_topics: int = 8, per_topic: int = 24, dim: int = 16, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Pairs from topics: a query and its document sit near their topic's centre."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(n_topics, dim))
    topic = np.repeat(np.arange(n_topics), per_topic)
    q = centres[topic] + 0.5 * rng.normal(size=(len(topic), dim))
    d = centres[topic] + 0.5 * rng.normal(size=(len(topic), dim))
    unit = lambda x: (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)  # noqa: E731
    return unit(q), unit(d)


@pytest.mark.parametrize("strategy,packing", [("cluster", "tsp"), ("cluster", "random"), ("random", "tsp")])
def test_batches_are_equal_size_and_disjoint(strategy: str, packing: str) -> None:
    q, d = _clustered()
    batches = make_batches(q, d, 16, strategy=strategy, packing=packing, seed=1)
    assert all(len(b) == 16 for b in batches)
    flat = [i for b in batches for i in b]
    assert len(flat) == len(set(flat)) and len(flat) >= len(q) - 16


def test_clustered_batches_hold_harder_negatives_than_random_ones() -> None:
    q, d = _clustered()
    clustered = make_batches(q, d, 16, strategy="cluster", seed=0)
    random = make_batches(q, d, 16, strategy="random", seed=0)
    assert mean_negative_similarity(q, d, clustered) > mean_negative_similarity(q, d, random) + 0.2


def test_false_negative_mask() -> None:
    q = np.eye(4, dtype=np.float32)
    d = np.array([[0.5, 0, 0, 0], [0.9, 0.1, 0, 0], [0, 0, 1, 0], [0, 0, 0.2, 1]], dtype=np.float32)
    mask = false_negative_mask(q, d, [0, 1, 2, 3], ["q0", "q1", "q2", "q2"], ["a", "b", "c", "d"], margin=0.1)
    assert mask[0, 1]  # scores 0.9 vs its positive's 0.5: too close to call a negative
    assert mask[2, 3] and mask[3, 2]  # the same query's other positive
    assert not mask.diagonal().any() and not mask[1, 0]


def _beir(root: Path) -> Path:
    root.mkdir()
    docs = [
        {
            "_id": "d1",
            "title": "Insulin and the pancreas",
            "text": "Insulin is made in the pancreas. It lowers glucose.",
        },
        {"_id": "d2", "title": "", "text": "Graphene conducts heat very well. It is a carbon sheet."},
    ]
    (root / "corpus.jsonl").write_text("\n".join(json.dumps(x) for x in docs))
    (root / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "what makes insulin"}))
    (root / "qrels").mkdir()
    (root / "qrels" / "train.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td9\t1\n")
    return root


def test_pairs_from_qrels_and_mined_from_a_corpus(tmp_path: Path) -> None:
    root = _beir(tmp_path / "b")
    pairs = qrels_pairs(root)
    assert [(p.query_id, p.doc_id) for p in pairs] == [("q1", "d1")]  # d9 is not in the corpus
    assert pairs[0].document.startswith("Insulin and the pancreas\n")
    mined = mined_pairs(root)
    kinds = {(p.query_id.split(":")[0], p.doc_id) for p in mined}
    assert kinds == {("title", "d1"), ("sent", "d1"), ("sent", "d2")}
    sent = next(p for p in mined if p.query_id == "sent:d2")
    assert sent.query == "Graphene conducts heat very well." and sent.document == "It is a carbon sheet."
    assert len(load_pairs([f"qrels:{root}:train", f"mine:{root}"])) == 4
    with pytest.raises(ValueError, match="unknown pair source"):
        load_pairs(["bogus:x"])
