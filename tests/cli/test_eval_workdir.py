"""`vela eval` on a reused --workdir: the evaluated collection mirrors the dataset folder it was given."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cli.main import main
from tests.cli.beir_data import read_docs, write_beir, write_corpus


def _eval(data: Path, work: Path, embedder: Path, tmp_path: Path) -> dict[str, Any]:
    out, runs = tmp_path / "eval.json", tmp_path / "runs"
    flags = ["--modes", "bm25,dense", "--embedder", str(embedder), "--json", str(out), "--run-dir", str(runs)]
    assert main(["eval", "--data", str(data), "--workdir", str(work), *flags]) == 0
    result = json.loads(out.read_text())
    result["ranked"] = {line.split()[2] for f in runs.glob("*.run") for line in f.read_text().splitlines()}
    return result


def test_documents_removed_from_the_corpus_leave_the_collection(
    tmp_path: Path, tiny_embedder_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data, work = write_beir(tmp_path / "mini"), tmp_path / "work"
    assert _eval(data, work, tiny_embedder_dir, tmp_path)["documents"] == 8
    write_corpus(data, read_docs(data)[:6])  # d6 and d7 removed
    again = _eval(data, work, tiny_embedder_dir, tmp_path)
    fresh = _eval(data, tmp_path / "fresh", tiny_embedder_dir, tmp_path)
    assert again["documents"] == fresh["documents"] == 6
    assert again["ranked"] == fresh["ranked"] == {f"d{i}" for i in range(6)}  # dense ranks every stored document
    assert again["metrics"] == fresh["metrics"]
    # An unchanged corpus is not embedded again: the content hashes match.
    import indexing.ingest

    embedded: list[int] = []
    real = indexing.ingest.prepare_documents

    def prepare(docs: list[Any], *rest: Any) -> Any:
        embedded.append(len(docs))
        return real(docs, *rest)

    monkeypatch.setattr(indexing.ingest, "prepare_documents", prepare)
    assert _eval(data, work, tiny_embedder_dir, tmp_path)["documents"] == 6
    assert embedded == []


def test_two_folders_of_one_name_get_a_collection_each(tmp_path: Path, tiny_embedder_dir: Path) -> None:
    work = tmp_path / "work"
    first = write_beir(tmp_path / "a" / "mini", docs=5)
    second = write_beir(tmp_path / "b" / "mini", docs=3, prefix="x")
    assert _eval(first, work, tiny_embedder_dir, tmp_path)["documents"] == 5
    assert _eval(second, work, tiny_embedder_dir, tmp_path)["ranked"] == {"x0", "x1", "x2"}
    assert _eval(first, work, tiny_embedder_dir, tmp_path)["ranked"] == {f"d{i}" for i in range(5)}
    assert len(list((work / "collections").iterdir())) == 2
