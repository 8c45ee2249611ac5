"""Assemble a trainer's acceptance file: a `vela eval` JSON plus the commands that trained and evaluated it
and the baselines it is compared with (each another `vela eval` JSON, with its own commands).

    python -m bench.trainer_result --eval /tmp/cde.json --model-dir .vela/models/cde-scifact \
        --baseline untrained=bench/results/eval-scifact.json --baseline bi-encoder=/tmp/bi.json:.vela/models/bi \
        --out bench/results/cde-scifact.json

A baseline is NAME=EVAL_JSON[:MODEL_DIR]; with a model dir its training command is recorded too.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def _commands(eval_json: dict[str, Any], model_dir: str | None) -> str:
    parts = []
    if model_dir:
        parts.append(json.loads((Path(model_dir) / "training_args.json").read_text())["command"])
    parts.append(eval_json["command"])
    return " && ".join(parts)


def _training(model_dir: str | None) -> dict[str, Any] | None:
    if not model_dir:
        return None
    t = json.loads((Path(model_dir) / "training_args.json").read_text())
    keep = ("pairs", "steps", "train_seconds", "loss_first", "loss_last", "mean_negative_similarity_per_epoch")
    return {k: t.get(k) for k in keep}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--eval", required=True, help="the `vela eval --json` output of the trained model")
    p.add_argument("--model-dir", default=None, help="the trained model (its training_args.json)")
    p.add_argument("--baseline", action="append", default=[], help="NAME=EVAL_JSON[:MODEL_DIR] (repeatable)")
    p.add_argument("--note", default=None, help="one line of context kept in the file")
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    result = json.loads(Path(args.eval).read_text())
    result["command"] = _commands(result, args.model_dir)
    result["training"] = _training(args.model_dir)
    baselines: dict[str, Any] = {}
    for spec in args.baseline:
        name, _, rest = spec.partition("=")
        path, _, model_dir = rest.partition(":")
        b = json.loads(Path(path).read_text())
        baselines[name] = {
            "metrics": b["metrics"],
            "embedder": b.get("embedder"),
            "command": _commands(b, model_dir or None),
            "training": _training(model_dir or None),
        }
    result["baseline"] = baselines
    if args.note:
        result["note"] = args.note
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: result[k] for k in ("dataset", "metrics")}, indent=2))


if __name__ == "__main__":
    main()
