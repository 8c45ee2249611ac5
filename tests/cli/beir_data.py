"""A tiny BEIR-layout dataset written by hand: tests that need only its shape, not real retrieval quality."""

from __future__ import annotations

import json
from pathlib import Path

TOPICS = ["tides", "volcanoes", "glaciers", "orchids", "comets", "coral", "deserts", "lichens"]


def write_beir(root: Path, *, docs: int = 8, prefix: str = "d") -> Path:
    """`docs` documents (ids `<prefix>0`...), one topic each, and a judged test query for each of the first two."""
    (root / "qrels").mkdir(parents=True)
    corpus = [{"_id": f"{prefix}{i}", "title": t, "text": f"notes on {t} and more {t}"} for i, t in enumerate(TOPICS)]
    write_corpus(root, corpus[:docs])
    queries = [{"_id": f"q{i}", "text": f"what about {TOPICS[i]}?"} for i in range(2)]
    (root / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    judged = "".join(f"q{i}\t{prefix}{i}\t1\n" for i in range(2))
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + judged)
    return root


def write_corpus(root: Path, docs: list[dict[str, str]]) -> None:
    (root / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))


def read_docs(root: Path) -> list[dict[str, str]]:
    return [json.loads(line) for line in (root / "corpus.jsonl").read_text().splitlines() if line]
