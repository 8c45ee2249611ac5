"""`vela adapt` end to end on a tiny collection: pseudo-labels from the collection, training, registration."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from cli.main import main

TOPICS = ["insulin", "graphene", "tides", "appeals", "volcano", "enzymes", "glaciers", "proteins"]


def write_docs(path: Path, n: int = 40, *, id_key: str = "id") -> Path:
    """Documents of three sentences each: enough words per sentence to make pseudo-queries."""
    docs = []
    for i in range(n):
        a, b = TOPICS[i % len(TOPICS)], TOPICS[(i * 3 + 1) % len(TOPICS)]
        text = (
            f"The {a} study number {i} measured several outcomes in patients. "
            f"Results about {b} were compared with earlier {a} reports. "
            f"Further work on {a} and {b} is planned for next year."
        )
        docs.append({id_key: f"d{i}", "title": f"On {a} {i}", "text": text})
    path.write_text("\n".join(json.dumps(d) for d in docs))
    return path


def ingest(tmp_path: Path, embedder: Path) -> Path:
    vela = tmp_path / "vela"
    data = write_docs(tmp_path / "docs.jsonl")
    base = ["ingest", "--data", str(data), "--data-dir", str(vela), "--embedder", str(embedder)]
    assert main([*base, "--collection", "notes"]) == 0
    return vela


def test_adapt_trains_and_registers_the_model(
    tmp_path: Path, tiny_embedder_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    vela = ingest(tmp_path, tiny_embedder_dir)
    monkeypatch.delenv("VELA_MODELS_DIR", raising=False)
    capsys.readouterr()
    flags = ["--max_minutes", "0.1", "--batch_size", "4", "--depth", "8", "--bf16", "false", "--learning_rate", "0.01"]
    flags += ["--warmup_steps", "0", "--checkpoint_minutes"]
    assert main(["adapt", "notes", "--out", "notes-adapted", "--data-dir", str(vela), *flags, "0.001"]) == 0
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert printed["registered"] == "notes-adapted" and printed["kind"] == "embedder" and printed["steps"] >= 1
    assert printed["teacher"]["pseudo_queries"] > 0
    # Registered with its training record (what GET /models shows), the checkpoints left in the work dir.
    from models.registry import ModelRegistry

    entry = ModelRegistry(vela / "models").get("notes-adapted")
    assert entry.training is not None and entry.training["recipe"] == "adapt"
    assert entry.training["command"].startswith("vela adapt notes --out notes-adapted")
    assert (Path(printed["work_dir"]) / "checkpoint-0.001min" / "query_encoder" / "config.json").is_file()
    assert not any(p.name.startswith("checkpoint-") for p in entry.path.iterdir())  # type: ignore[union-attr]
    # The default recipe trains the query side alone: documents encode as the base model encodes them, queries
    # by the trained query encoder.
    from models import load_embedder

    adapted, base = load_embedder(entry.path), load_embedder(tiny_embedder_dir)  # type: ignore[arg-type]
    assert adapted.config.query_encoder == "query_encoder" and adapted.query_model is not None
    texts = ["insulin study results", "graphene tides"]
    assert np.array_equal(adapted.encode_documents(texts), base.encode_documents(texts))
    assert not np.allclose(adapted.encode_queries(texts), base.encode_queries(texts), atol=1e-6)
    # --student: an earlier adaptation, by its registered name, trained further.
    more = ["--max_minutes", "0.1", "--batch_size", "4", "--depth", "8", "--bf16", "false"]
    assert main(["adapt", "notes", "--out", "again", "--student", "notes-adapted", "--data-dir", str(vela), *more]) == 0
    assert ModelRegistry(vela / "models").get("again").training["base_model"] == "notes-adapted"  # type: ignore[index]
    # The two-sided recipe from that asymmetric model: its document side trains, saved as a plain model.
    both = ["--tower", "both", "--student", "notes-adapted", "--data-dir", str(vela), *more]
    assert main(["adapt", "notes", "--out", "plain", *both]) == 0
    plain = load_embedder(ModelRegistry(vela / "models").get("plain").path)  # type: ignore[arg-type]
    assert plain.config.query_encoder == "" and plain.query_model is None
    # The name is taken now; an unknown collection is refused.
    assert main(["adapt", "notes", "--out", "notes-adapted", "--data-dir", str(vela)]) == 2
    assert main(["adapt", "nope", "--out", "other", "--data-dir", str(vela)]) == 2
