"""The BEIR readers in the leaf package: what every layer (cli, training, bench) reads a dataset with."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from velaio.beir import read_corpus, read_qrels, read_queries, read_query_ids, read_query_texts, write_query_ids
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


GOOD_DOC = json.dumps({"_id": "d", "text": "body"})
QRELS_HEAD = "query-id\tcorpus-id\tscore\n"


@pytest.mark.parametrize(
    ("file", "content", "needle"),
    [
        ("corpus.jsonl", f"{GOOD_DOC}\n\n[1, 2]\n", "corpus.jsonl:3: a document is a JSON object, got list"),
        ("corpus.jsonl", f"{GOOD_DOC}\n" * 4 + '{"_id": "x", "text": "a\tb"}\n', "corpus.jsonl:5: not a JSON line"),
        ("corpus.jsonl", f"{GOOD_DOC}\n" + '{"_id": "x", "text": "caf\xe9"}\n', "corpus.jsonl:2: not UTF-8 text"),
        ("corpus.jsonl", '{"text": "no id"}\n', "corpus.jsonl:1: the document has no id"),
        ("corpus.jsonl", '{"_id": "x", "text": 3}\n', "corpus.jsonl:1: the document's text is a int, not a string"),
        ("queries.jsonl", '{"_id": "7"}\n', "queries.jsonl:1: the query has no text"),
        ("queries.jsonl", '"q"\n', "queries.jsonl:1: a query is a JSON object, got str"),
        ("qrels/test.tsv", "7\td\t1\n", "test.tsv:1: the header line must name the columns query-id, corpus-id"),
        ("qrels/test.tsv", f"{QRELS_HEAD}7\td\n", "test.tsv:2: 2 tab-separated fields, expected 3"),
        ("qrels/test.tsv", f"{QRELS_HEAD}7\td\thigh\n", "test.tsv:2: the score 'high' is not a number"),
    ],
)
def test_every_fault_names_its_file_and_line(tmp_path: Path, file: str, content: str, needle: str) -> None:
    root = _beir(tmp_path / "ds")
    (root / file).write_bytes(content.encode("latin-1" if "\xe9" in content else "utf-8"))
    with pytest.raises(ValueError, match=re.escape(needle)):
        list(read_corpus(root))
        read_queries(root)
        read_qrels(root, "test")


def test_query_lists_name_the_line_of_a_fault(tmp_path: Path) -> None:
    path = tmp_path / "log.txt"
    path.write_text('insulin\n{"text": "graphene"\n')
    with pytest.raises(ValueError, match=re.escape("log.txt:2: not a JSON line")):
        read_query_texts(path)
    path.write_bytes(b"a\n\xff\n")
    with pytest.raises(ValueError, match=re.escape("log.txt:2: not UTF-8 text")):
        read_query_ids(path)
