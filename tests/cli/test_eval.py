"""`vela eval` end to end on a small slice of SciFact (real data, real model, real ingest and search)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli.main import build_parser, main
from tests.reranker_fixtures import make_reranker


def _slice(beir: Path, out: Path, n_queries: int = 12) -> Path:
    src = beir / "scifact"
    rows = [line.split("\t") for line in (src / "qrels" / "test.tsv").read_text().splitlines()[1:]]
    qids = list(dict.fromkeys(r[0] for r in rows))[:n_queries]
    wanted = {r[1] for r in rows if r[0] in qids}
    corpus = [json.loads(x) for x in (src / "corpus.jsonl").read_text().splitlines()]
    keep = [d for d in corpus if d["_id"] in wanted] + corpus[:40]
    (out / "qrels").mkdir(parents=True)
    (out / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in {d["_id"]: d for d in keep}.values()))
    queries = [json.loads(x) for x in (src / "queries.jsonl").read_text().splitlines()]
    (out / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in queries if q["_id"] in qids))
    (out / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "\n".join("\t".join(r) for r in rows if r[0] in qids)
    )
    return out


def test_eval_writes_the_documented_json(beir_dir: Path, tmp_path: Path) -> None:
    data = _slice(beir_dir, tmp_path / "mini")
    out = tmp_path / "eval.json"
    args = ["eval", "--data", str(data), "--modes", "bm25,dense,hybrid", "--json", str(out)]
    assert main([*args, "--workdir", str(tmp_path / "work")]) == 0
    result = json.loads(out.read_text())
    assert result["dataset"] == "mini" and result["dim"] == "full" and result["seconds"] > 0
    assert set(result["metrics"]) == {"bm25", "dense", "hybrid"}
    for m in result["metrics"].values():
        assert set(m) == {"ndcg@10", "recall@100", "mrr@10"}
        assert 0.3 < m["ndcg@10"] <= 1.0  # relevant docs are a good share of this tiny corpus
    # Re-running on the same workdir reuses the ingested collection (unchanged docs are not re-embedded);
    # --query-ids scores a subset (a reranker's held-out dev queries, say).
    ids = tmp_path / "ids.txt"
    some = sorted(json.loads(x)["_id"] for x in (data / "queries.jsonl").read_text().splitlines())[:3]
    ids.write_text("# dev\n" + "\n".join(some) + "\nnot-a-query\n")
    assert main([*args, "--workdir", str(tmp_path / "work"), "--dim", "256", "--query-ids", str(ids)]) == 0
    again = json.loads(out.read_text())
    assert again["dim"] == "256" and again["queries"] == 3 and again["query_ids"] == str(ids)
    # The metrics are means over the 3 queries, not over all the split's (a subset must not score lower).
    assert again["metrics"]["bm25"]["recall@100"] > 0.5
    assert main([*args, "--query-ids", str(tmp_path / "missing.txt")]) == 2


def test_eval_reranks_at_several_weights_from_one_scoring(beir_dir: Path, tmp_path: Path) -> None:
    data = _slice(beir_dir, tmp_path / "mini", n_queries=6)
    reranker = make_reranker("bert", tmp_path / "rr")
    out = tmp_path / "eval.json"
    args = ["eval", "--data", str(data), "--modes", "hybrid", "--workdir", str(tmp_path / "work"), "--json", str(out)]
    assert main([*args, "--rerank", str(reranker), "--rerank-top-n", "10", "--rerank-weight", "1,0"]) == 0
    result = json.loads(out.read_text())
    info = result["rerank"]
    assert info["weight"] == 1.0 and info["added_latency_ms_p50"]["hybrid"] > 0
    assert info["metrics_by_weight"]["1"] == result["metrics"]
    assert info["metrics_by_weight"]["0"] == result["baseline"]  # weight 0: the fused order, whatever the model says
    assert main([*args, "--rerank", str(reranker), "--rerank-weight", "1,2"]) == 2


@pytest.mark.slow  # sharded equals unsharded is in the default suite through the API (test_sharded_search.py)
def test_eval_of_a_sharded_collection_equals_the_unsharded_one(beir_dir: Path, tmp_path: Path) -> None:
    data = _slice(beir_dir, tmp_path / "mini")
    metrics = []
    for shards in ("1", "3"):
        out = tmp_path / f"eval-{shards}.json"
        argv = ["eval", "--data", str(data), "--modes", "bm25,dense,hybrid", "--shards", shards, "--json", str(out)]
        assert main([*argv, "--workdir", str(tmp_path / "work")]) == 0
        metrics.append(json.loads(out.read_text())["metrics"])
    assert metrics[0] == metrics[1]


def test_parser_has_the_subcommands() -> None:
    choices = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert {"serve", "eval"} <= set(choices)


def test_bad_paths_and_flags_are_refused_before_the_ingest(
    beir_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _slice(beir_dir, tmp_path / "mini", n_queries=2)
    work = tmp_path / "work"
    cases = [
        (["--data", str(tmp_path / "none")], "--data: no folder"),
        (["--data", str(data / "corpus.jsonl")], "is a file, not a BEIR folder"),
        (["--data", str(tmp_path)], "has no corpus.jsonl or queries.jsonl"),
        (["--data", str(data), "--split", "dev"], "has no qrels/dev.tsv (splits there: test)"),
        (["--data", str(data), "--modes", " , "], "--modes: none given"),
        (["--data", str(data), "--json", "/proc/vela/x.json"], "--json: cannot write in /proc"),
        (["--data", str(data), "--run-dir", "/proc/vela"], "--run-dir: cannot write in /proc"),
    ]
    for flags, needle in cases:
        assert main(["eval", *flags, "--workdir", str(work)]) == 2, flags
        err = capsys.readouterr().err
        assert needle in err and "Traceback" not in err, (flags, err)
    assert not work.exists()  # nothing ingested, no empty collection left behind


def test_an_unknown_reranker_fails_before_the_ingest(
    beir_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _slice(beir_dir, tmp_path / "mini", n_queries=2)
    work = tmp_path / "work"
    assert main(["eval", "--data", str(data), "--workdir", str(work), "--rerank", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert "--rerank: " in err and "is neither a registered model" in err and err.count("\n") == 1
    assert not work.exists()  # refused before anything was made
