"""`vela train reranker`: BM25-negative groups, the InfoNCE loss, and runs of each backbone family (tiny)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from cli.main import main as vela
from models.reranker import RerankerModel, load_reranker
from tests.reranker_fixtures import make_backbone
from training.reranker.arguments import DataArguments
from training.reranker.dataset import build_groups
from training.reranker.modeling import load
from training.reranker.trainer import RerankerTrainer

TOPICS = ["cats", "dogs", "paris", "berlin", "plants", "telescopes", "volcanoes", "jazz", "chess", "coffee"]


@pytest.fixture(scope="module")
def beir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """60 documents on 10 topics; query j is about topic j and document j is its only relevant one."""
    root = tmp_path_factory.mktemp("beir")
    (root / "qrels").mkdir()
    with open(root / "corpus.jsonl", "w") as f:
        for i in range(60):
            t = TOPICS[i % 10]
            f.write(
                json.dumps({"_id": f"d{i}", "title": t, "text": f"Document {i} is about {t} and {t} facts."}) + "\n"
            )
    with open(root / "queries.jsonl", "w") as f:
        for j, t in enumerate(TOPICS):
            f.write(json.dumps({"_id": f"q{j}", "text": f"facts about {t}"}) + "\n")
    (root / "qrels" / "train.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"q{j}\td{j}\t1\n" for j in range(10))
    )
    return root


@pytest.fixture(scope="module")
def backbones(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("backbones")
    return {kind: make_backbone(kind, root / kind) for kind in ("bert", "gpt2", "mamba")}


def test_groups_are_positive_first_with_bm25_negatives(beir: Path) -> None:
    groups, stats = build_groups(DataArguments(data=str(beir), negatives=3, bm25_depth=6), seed=1)
    assert stats["groups"] == len(groups) == 10 and stats["group_size"] == 4
    for j, g in enumerate(groups):
        assert len(g.documents) == 4 and g.query == f"facts about {TOPICS[j]}"
        assert g.documents[0] == f"{TOPICS[j]}\nDocument {j} is about {TOPICS[j]} and {TOPICS[j]} facts."
        assert all(d != g.documents[0] for d in g.documents[1:])
        # BM25's top 6 for "facts about cats" are the cat documents: hard negatives, all on the same topic.
        assert all(d.startswith(TOPICS[j]) for d in g.documents[1:])
    again, _ = build_groups(DataArguments(data=str(beir), negatives=3, bm25_depth=6), seed=1)
    assert again == groups  # a fixed seed, the same training set


def test_dev_queries_are_held_out_of_training(beir: Path) -> None:
    args = DataArguments(data=str(beir), negatives=3, bm25_depth=6, dev_queries=3)
    groups, stats = build_groups(args, seed=1)
    dev = stats["dev_query_ids"]
    assert len(dev) == 3 and stats["queries"] == 7 and len(groups) == 7
    queries = {json.loads(x)["_id"]: json.loads(x)["text"] for x in (beir / "queries.jsonl").read_text().splitlines()}
    assert not {queries[q] for q in dev} & {g.query for g in groups}
    assert build_groups(args, seed=1)[1]["dev_query_ids"] == dev  # the same draw every time
    with pytest.raises(ValueError, match="leaves no query to train on"):
        build_groups(DataArguments(data=str(beir), negatives=3, bm25_depth=6, dev_queries=10), seed=1)


def test_loss_is_cross_entropy_with_the_positive_first() -> None:
    class Fixed(torch.nn.Module):
        def forward(self, scores: torch.Tensor) -> object:
            return type("Out", (), {"logits": scores})()

    trainer = RerankerTrainer.__new__(RerankerTrainer)
    trainer.group_size = 4
    scores = torch.tensor([2.0, 1.0, 0.0, -1.0, 0.0, 3.0, 0.0, 0.0])
    loss = trainer.compute_loss(Fixed(), {"scores": scores})
    expected = F.cross_entropy(scores.view(2, 4), torch.zeros(2, dtype=torch.long))
    assert torch.allclose(loss, expected)  # type: ignore[arg-type]


def _train(beir: Path, backbone: Path, out: Path, *extra: str) -> dict:
    args = ["--data", str(beir), "--backbone", str(backbone), "--max_length", "48", "--negatives", "3"]
    args += ["--per_device_train_batch_size", "2", "--max_steps", "2", "--warmup_steps", "1", "--use_cpu", "true"]
    assert vela(["train", "reranker", "--out", str(out), *args, *extra]) == 0
    return dict(json.loads((out / "training_args.json").read_text()))


def test_train_writes_a_reranker_that_loads_in_one_call(beir: Path, backbones: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "bert-reranker"
    saved = _train(beir, backbones["bert"], out, "--learning_rate", "1e-3")
    assert saved["model"]["backbone"] == str(backbones["bert"]) and saved["data"]["negatives"] == 3
    assert saved["training"]["learning_rate"] == 1e-3 and saved["training"]["weight_decay"] == 0.01
    assert saved["data_stats"]["groups"] == 10 and saved["command"].startswith("vela train reranker --out")
    assert saved["machine"]["cpu"]["model"]
    assert saved["train_metrics"]["train_loss"] > 0
    scores = load_reranker(out).score("facts about cats", ["cats\nDocument 0", "jazz\nDocument 7"])
    assert scores.shape == (2,) and np.isfinite(scores).all()
    model, _ = load(out)
    assert isinstance(model, RerankerModel) and model.config.max_length == 48


@pytest.mark.parametrize("kind", ["gpt2", "mamba"])
def test_train_causal_and_mamba_backbones(beir: Path, backbones: dict[str, Path], tmp_path: Path, kind: str) -> None:
    out = tmp_path / kind
    saved = _train(beir, backbones[kind], out)
    assert saved["model"]["family"] == "auto"
    encoder = load_reranker(out)
    assert encoder.model.config.family == ("mamba" if kind == "mamba" else "causal")
    assert np.isfinite(encoder.score("facts about jazz", ["jazz\nDocument 7"])).all()


def test_lora_is_merged_into_the_output_and_checkpoints_load(
    beir: Path, backbones: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "lora"
    saved = _train(beir, backbones["gpt2"], out, "--lora", "true", "--lora_r", "4", "--save_strategy", "steps")
    assert saved["model"]["lora"] is True
    assert not (out / "adapter_config.json").exists()  # the output is a plain, merged reranker
    merged = load_reranker(out)
    checkpoint = out / "checkpoint-2"
    assert (checkpoint / "adapter_config.json").exists()
    model, tokenizer = load(checkpoint)  # adapters over the backbone, merged: the same model as the output
    assert isinstance(model, RerankerModel)
    for (name, p), (_, q) in zip(model.state_dict().items(), merged.model.state_dict().items(), strict=True):
        assert torch.allclose(p, q, atol=1e-6), name


def test_config_file_sets_flags_and_the_command_line_wins(
    beir: Path, backbones: dict[str, Path], tmp_path: Path
) -> None:
    config = tmp_path / "reranker.yaml"
    config.write_text("learning_rate: 0.0005\nhead_dropout: 0.1\nmax_length: 40\n")
    out = tmp_path / "out"
    saved = _train(beir, backbones["bert"], out, "--config", str(config), "--max_length", "56", "--dev_queries", "2")
    assert saved["training"]["learning_rate"] == 5e-4 and saved["model"]["head_dropout"] == 0.1
    assert saved["model"]["max_length"] == 56
    # The held-out queries are listed beside the model, for `vela eval --query-ids`.
    dev = (out / "dev_queries.txt").read_text().split()
    assert dev == saved["data_stats"]["dev_query_ids"] and len(dev) == 2 and saved["data_stats"]["queries"] == 8


def test_bad_arguments_are_refused(beir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:  # refused by the recipe's parser, as every recipe's bad argument is
        vela(["train", "reranker", "--out", str(tmp_path / "x"), "--data", str(beir), "--negatives", "0"])
    assert stop.value.code == 2 and "negatives" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        vela(["train", "reranker", "--data", str(beir)])  # --out is required
