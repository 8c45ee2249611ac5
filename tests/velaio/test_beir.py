"""The BEIR readers in the leaf package: what every layer (cli, training, bench) reads a dataset with."""

from __future__ import annotations

import json
from pathlib import Path

from velaio.beir import read_corpus, read_qrels, read_queries, read_query_ids, write_query_ids
from velaio.text import passage_text


def _beir(root: Path) -> Path:
    (root / "qrels").mkdir(parents=True)
    docs = [{"_id": 1, "title": "T", "text": "body"}, {"_id": "2", "title": "Only a title", "text": " "}]
    (root / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs) + "\n")
    (root / "queries.jsonl").write_text(json.dumps({"_id": 7, "text": "q?"}) + "\n")
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n7\t1\t2\n7\t2\t-1\n")
    return root


def test_readers_give_string_ids_and_clamp_negative_grades(tmp_path: Path) -> None:
    root = _beir(tmp_path / "ds")
    assert list(read_corpus(root)) == [
        {"id": "1", "title": "T", "text": "body"},
        {"id": "2", "title": "Only a title", "text": "Only a title"},  # the API refuses empty texts
    ]
    assert read_queries(root) == {"7": "q?"}
    assert read_qrels(root, "test") == {"7": {"1": 2, "2": 0}}


def test_query_ids_round_trip_and_skip_comments(tmp_path: Path) -> None:
    path = tmp_path / "dev.txt"
    write_query_ids(path, ["a", "b"])
    assert read_query_ids(path) == {"a", "b"}
    path.write_text("# held out\na  # first\n\nb\n")
    assert read_query_ids(path) == {"a", "b"}
    assert not list(tmp_path.glob(".*.tmp"))  # the atomic write leaves no temp file


def test_passage_text_puts_the_title_first() -> None:
    assert passage_text("T", "body") == "T\nbody"
    assert passage_text("", "body") == "body"
