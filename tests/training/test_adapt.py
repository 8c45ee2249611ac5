"""`vela adapt`'s pieces on tiny data: margin-MSE, the teacher's pseudo-labels, the collator, and the proof that
the whole recipe reads no qrels (unreadable files plus an audit hook that fails any open of a qrels path)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from training.adapt.collator import AdaptCollator
from training.adapt.dataset import Candidates, ExampleDataset, label, teacher_scores, unlabelled
from training.losses.margin_mse import MarginMSELoss

ARMED: list[str] = []  # non-empty while the audit hook guards qrels; the opens it refused are appended


def _guard(event: str, args: tuple[Any, ...]) -> None:
    if ARMED and event == "open" and args and isinstance(args[0], str | bytes | os.PathLike) and _is_qrels(args[0]):
        ARMED.append(os.fsdecode(args[0]))
        raise PermissionError(f"adapt opened a qrels file: {os.fsdecode(args[0])}")


def _is_qrels(path: Any) -> bool:
    """A BEIR qrels folder or file (qrels/test.tsv, qrels.txt), wherever it lies."""
    p = Path(os.fsdecode(path))
    return "qrels" in p.parts or p.name.startswith("qrels")


sys.addaudithook(_guard)  # audit hooks cannot be removed: it only acts while ARMED is set


def unit(x: Any) -> torch.Tensor:
    t = torch.tensor(x)
    return t / t.norm(dim=-1, keepdim=True)


def test_margin_mse_is_zero_when_the_student_margins_match_the_teacher() -> None:
    q, p, n = unit([[1.0, 0.0]]), unit([[1.0, 0.0]]), unit([[[0.0, 1.0]]])
    loss = MarginMSELoss(scale=2.0)
    assert loss(q, p, n, torch.tensor([[2.0]])).item() == pytest.approx(0.0)  # (1 - 0) * 2 = 2
    assert loss(q, p, n, torch.tensor([[0.0]])).item() == pytest.approx(4.0)


def cands(query: str, pos: tuple[float, float], others: list[tuple[float, float]]) -> Candidates:
    return Candidates(
        query,
        f"positive of {query}",
        f"src-{query}",
        [f"{query} other {i}" for i in range(len(others))],
        [f"o{i}" for i in range(len(others))],
        np.array([pos[0], *(o[0] for o in others)]),
        np.array([pos[1], *(o[1] for o in others)]),
    )


def test_teacher_filters_ranks_and_gives_margins() -> None:
    good = cands("good", (0.9, 12.0), [(0.8, 5.0), (0.5, np.nan), (np.nan, 3.0), (0.2, 1.0)])
    bad = cands("bad", (0.1, 0.0), [(0.9, 9.0), (0.8, 8.0), (0.7, 7.0), (0.6, 6.0)])
    t = teacher_scores(good, alpha=0.5)
    assert t[0] == t.max()  # the source is the teacher's first
    examples, stats = label([good, bad], alpha=0.5, depth=3, skip_top=1, consistency_top_k=2)
    assert [e.query for e in examples] == ["good"] and stats["kept"] == 1 and stats["source_top1"] == 0.5
    e = examples[0]
    assert len(e.negatives) == 2 and "other 0" not in e.negatives[0]  # the teacher's first other is skipped
    assert (e.margins > 0).all() and e.margins[0] <= e.margins[1]  # best first: smallest margin first


def test_collator_shapes_and_masks(tiny_embedder_dir: Path) -> None:
    from transformers import AutoTokenizer

    from models import EmbedderConfig

    a = cands("a", (0.9, 10.0), [(0.8, 9.5), (0.3, 1.0), (0.2, 0.5)])
    b = cands("b", (0.9, 10.0), [(0.95, 12.0), (0.3, 1.0), (0.2, 0.5)])  # its first other beats the source
    examples, _ = label([a, b], alpha=0.5, depth=10, skip_top=0, consistency_top_k=0)
    tok = AutoTokenizer.from_pretrained(tiny_embedder_dir)
    collate = AdaptCollator(ExampleDataset(examples), tok, EmbedderConfig.from_dir(tiny_embedder_dir), 2, 16, 32)
    batch = collate([0, 1])
    assert batch["queries"]["input_ids"].shape[0] == 2 and batch["documents"]["input_ids"].shape[0] == 2 + 4
    assert batch["margins"].shape == (2, 2) and batch["exclude"].shape == (2, 6)
    assert not batch["exclude"][[0, 1], [0, 1]].any()  # never the positive
    # A negative the teacher scores above the positive is no negative for InfoNCE (still one for margin-MSE).
    assert (batch["exclude"][1, 4:] == (batch["margins"][1] <= 0)).all()
    plain = AdaptCollator(
        ExampleDataset(unlabelled([a, b])), tok, EmbedderConfig.from_dir(tiny_embedder_dir), 2, 16, 32
    )
    assert plain([0, 1])["negatives"] == 0 and "margins" not in plain([0, 1])


def test_the_recipe_reads_no_qrels(tmp_path: Path, tiny_embedder_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A BEIR folder whose qrels are unreadable (mode 000) and guarded by an audit hook: ingest its corpus, then
    adapt, with and without the teacher; no qrels path is opened."""
    from cli.main import main
    from tests.cli.test_adapt import write_docs

    beir = tmp_path / "beir"
    (beir / "qrels").mkdir(parents=True)
    write_docs(beir / "corpus.jsonl", id_key="_id")  # BEIR spells the id _id
    (beir / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "insulin study"}) + "\n")
    qrels = beir / "qrels" / "test.tsv"
    qrels.write_text("query-id\tcorpus-id\tscore\nq1\td0\t1\n")
    vela = tmp_path / "vela"
    monkeypatch.delenv("VELA_MODELS_DIR", raising=False)
    base = ["ingest", "--data", str(beir), "--data-dir", str(vela), "--embedder", str(tiny_embedder_dir)]
    assert main([*base, "--collection", "notes"]) == 0
    os.chmod(qrels, 0)
    ARMED.append("armed")
    try:
        with pytest.raises(PermissionError):  # the guard itself works
            qrels.open().close()
        del ARMED[1:]
        flags = [
            "--data-dir",
            str(vela),
            "--max_minutes",
            "0.05",
            "--batch_size",
            "4",
            "--depth",
            "8",
            "--bf16",
            "false",
        ]
        # The default (the query encoder) with unlabelled logged queries beside the pseudo-queries, its ablation,
        # and the two-sided recipe.
        queries = ["--queries", str(beir / "queries.jsonl")]
        assert main(["adapt", "notes", "--out", "with-teacher", *queries, *flags]) == 0
        assert main(["adapt", "notes", "--out", "no-teacher", "--teacher", "none", *flags]) == 0
        assert main(["adapt", "notes", "--out", "both", "--tower", "both", *flags]) == 0
    finally:
        opened = ARMED[1:]
        ARMED.clear()
        os.chmod(qrels, 0o644)
    assert opened == []
    assert {p.name for p in (vela / "models").iterdir() if not p.name.startswith(".")} == {
        "with-teacher",
        "no-teacher",
        "both",
    }


def test_listwise_kl_is_zero_when_the_student_list_matches_the_teacher() -> None:
    from training.losses.listwise_kl import ListwiseKLLoss

    loss = ListwiseKLLoss(student_temperature=0.5, teacher_temperature=1.0)
    cos = torch.tensor([[0.5, 0.0, -0.5, 0.3]])  # the last slot is padding
    mask = torch.tensor([[True, True, True, False]])
    assert loss(cos, cos / 0.5, mask).item() == pytest.approx(0.0, abs=1e-6)  # same distribution over real slots
    assert loss(cos, torch.tensor([[0.0, 0.0, 5.0, 99.0]]), mask).item() > 1.0  # padding's 99 counts for nothing
    flat = loss(cos, torch.tensor([[0.0, 0.0, 0.0, 0.0]]), mask)
    assert 0 < flat.item() < loss(cos, torch.tensor([[0.0, 0.0, 5.0, 0.0]]), mask).item()


def test_listwise_lists_share_one_text_table_and_keep_logged_queries() -> None:
    from training.adapt.dataset import listwise, sources_only

    good = cands("good", (0.9, 12.0), [(0.8, 5.0), (0.5, np.nan), (np.nan, 3.0)])
    bad = cands("bad", (0.1, 0.0), [(0.9, 9.0), (0.8, 8.0), (0.7, 7.0), (0.6, 6.0)])
    # A logged query has no source: row 0 is not scored (NaN) and is left out of its list.
    logged = Candidates("logged", "", "", ["good other 0", "x"], ["o0", "x"], np.array([np.nan, 0.2, 0.9]),
                        np.array([np.nan, 1.0, 4.0]))  # fmt: skip
    lists, texts, stats = listwise([good, bad, logged], alpha=0.5, consistency_top_k=2)
    assert [e.query for e in lists] == ["good", "logged"] and stats["with_source"] == 2 and stats["kept"] == 2
    assert texts[lists[0].rows[0]] == "positive of good" and lists[0].teacher[0] == lists[0].teacher.max()
    assert len(lists[1].rows) == 2 and texts[lists[1].rows[0]] == "good other 0"  # one table row per text
    assert lists[1].teacher[1] > lists[1].teacher[0]
    assert len(texts) == len(set(texts))
    alone, table = sources_only([good, bad, logged])
    assert [e.query for e in alone] == ["good", "bad"] and table == ["positive of good", "positive of bad"]


def test_a_query_encoder_is_read_only_by_the_torch_backend_and_only_from_inside_the_model(tmp_path: Path) -> None:
    from models import EmbedderConfig
    from models.loading import embedder_from_dir

    for bad in ("../elsewhere", "/etc", "a/b", "..", ".hidden"):
        with pytest.raises(ValueError, match="query_encoder"):
            EmbedderConfig(query_encoder=bad)
    (tmp_path / "vela_embedder.json").write_text(json.dumps({"backend": "onnx", "query_encoder": "query_encoder"}))
    with pytest.raises(ValueError, match="torch backend"):
        embedder_from_dir(tmp_path)


def test_query_texts_are_read_from_plain_lines_or_json_lines(tmp_path: Path) -> None:
    from velaio.beir import read_query_texts

    f = tmp_path / "log.txt"
    f.write_text('insulin dose\n\n{"_id": "1", "text": "graphene  sheets "}\ninsulin dose\n{"text": 3}\n')
    assert read_query_texts(f) == ["insulin dose", "graphene  sheets"]


def test_the_saved_query_side_is_the_weight_space_interpolation(tmp_path: Path, tiny_embedder_dir: Path) -> None:
    from transformers import AutoModel

    from training.adapt.query_tower import build, save

    student, tokenizer, config, base = build(str(tiny_embedder_dir))
    start = {k: v.detach().clone() for k, v in student.backbone.state_dict().items()}
    with torch.no_grad():  # stands in for training: every weight moved by 1
        for p in student.backbone.parameters():
            p.add_(1.0)
    save(student, tokenizer, config, base, tmp_path / "half", start=start, weight=0.5)
    save(student, tokenizer, config, base, tmp_path / "whole", start=start, weight=1.0)
    half = AutoModel.from_pretrained(tmp_path / "half" / "query_encoder").state_dict()
    whole = AutoModel.from_pretrained(tmp_path / "whole" / "query_encoder").state_dict()
    names = [k for k, _ in student.backbone.named_parameters()]
    assert names and all(k in half for k in names)
    for k in names:
        assert torch.allclose(half[k], start[k] + 0.5, atol=1e-6)
        assert torch.allclose(whole[k], start[k] + 1.0, atol=1e-6)
    # The document side is the base's own files, untouched.
    assert (tmp_path / "half" / "model.safetensors").read_bytes() == (base / "model.safetensors").read_bytes()


@pytest.mark.parametrize("weight", [0.0, -0.5, 1.5])
def test_an_interpolation_outside_0_to_1_is_refused(weight: float) -> None:
    from training.adapt.arguments import AdaptArguments

    with pytest.raises(ValueError, match="interpolation"):
        AdaptArguments(interpolation=weight)
    assert AdaptArguments().interpolation == 0.5 and AdaptArguments(interpolation=1.0).interpolation == 1.0
