"""bench.trainer_result: the acceptance file chains the training and eval commands and keeps every baseline."""

from __future__ import annotations

import json
from pathlib import Path

from bench.trainer_result import main


def _write(path: Path, data: dict) -> str:
    path.write_text(json.dumps(data))
    return str(path)


def test_commands_are_chained_in_training_order_and_baselines_kept(tmp_path: Path) -> None:
    pre, fine = tmp_path / "pre", tmp_path / "fine"
    for d, cmd in ((pre, "vela train condenser --out pre"), (fine, "vela train contrastive --model pre --out fine")):
        d.mkdir()
        _write(d / "training_args.json", {"command": cmd, "steps": 3, "secret": "not kept"})
    metrics = {"dense": {"ndcg@10": 0.5}}
    ev = _write(tmp_path / "ev.json", {"dataset": "x", "metrics": metrics, "command": "vela eval --embedder fine"})
    base = _write(tmp_path / "b.json", {"dataset": "x", "metrics": metrics, "command": "vela eval --embedder default"})
    out = tmp_path / "out.json"
    main(["--eval", ev, "--model-dir", str(pre), str(fine), "--baseline", f"untrained={base}", "--out", str(out)])
    result = json.loads(out.read_text())
    assert result["command"] == (
        "vela train condenser --out pre && vela train contrastive --model pre --out fine && vela eval --embedder fine"
    )
    assert result["training"][str(fine)] == {"steps": 3}
    assert result["baseline"]["untrained"]["command"] == "vela eval --embedder default"


def test_a_rerank_eval_keeps_its_fused_baseline(tmp_path: Path) -> None:
    fused = {"hybrid": {"ndcg@10": 0.70}}
    ev = _write(
        tmp_path / "ev.json",
        {"dataset": "x", "metrics": {"hybrid": {"ndcg@10": 0.7}}, "baseline": fused, "command": "vela eval --rerank r"},
    )
    out = tmp_path / "out.json"
    main(["--eval", ev, "--out", str(out)])
    result = json.loads(out.read_text())
    assert result["baseline"]["fused"] == {"metrics": fused, "command": "vela eval --rerank r"}
