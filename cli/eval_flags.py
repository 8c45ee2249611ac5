"""`vela eval`'s flags checked before anything is read or created: one line naming the flag (exit 2)."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from cli.eval_data import dataset_problem, other_dataset
from cli.eval_report import check_baseline
from cli.model_names import ModelChoice


def unwritable(path: Path, *, folder: bool, flag: str) -> str | None:
    """Why nothing can be written at `path` (a folder, or a file's folder), found by writing a probe file in
    the nearest folder that exists (nothing is created)."""
    where = path if folder else path.parent
    while not where.exists() and where != where.parent:
        where = where.parent
    if not where.is_dir():
        return f"{flag}: {where} is not a folder"
    if not folder and path.is_dir():
        return f"{flag}: {path} is a folder: name a file"
    try:
        with tempfile.TemporaryFile(dir=where):
            pass
    except OSError as e:
        return f"{flag}: cannot write in {where}: {e.strerror or e}"
    return None


def dim_problem(dim: str, emb: ModelChoice) -> str | None:
    """Why `--dim` cannot be searched with the embedder (None: it can, or its config does not say): a 256-d index
    of a narrower model is its full vectors under another name, and the results would say "dim 256"."""
    from cli.models import model_dims

    width = model_dims(emb.load)
    if dim == "full" or width is None or width >= int(dim):
        return None
    return f"--dim {dim}: embedder {emb.given!r} makes {width}-d vectors: use --dim full"


def refused(args: argparse.Namespace) -> str | None:
    """Why the flags cannot run (None: they can), found before anything is read or created."""
    modes = modes_of(args)
    bad = [m for m in modes if m not in ("bm25", "dense", "hybrid")]
    if bad or not modes:
        return f"--modes: {'unknown ' + str(bad) if bad else 'none given'}: use bm25, dense, hybrid"
    why = dataset_problem(Path(args.data), args.split)
    for flag, out, folder in (("--json", args.json_out, False), ("--run-dir", args.run_dir, True)):
        why = why or (out and unwritable(Path(out), folder=folder, flag=flag))
    why = why or (args.report and unwritable(Path(args.report), folder=True, flag="--report"))
    if why:
        return why
    try:
        weights = tuple(float(w) for w in args.rerank_weight.split(","))
    except ValueError:
        weights = ()
    if not weights or not all(0.0 <= w <= 1.0 for w in weights):
        return f"--rerank-weight: numbers within [0, 1], comma-separated; got {args.rerank_weight!r}"
    if args.query_ids and not Path(args.query_ids).is_file():
        return f"--query-ids: no file {args.query_ids}"
    baselines = [Path(b) for b in args.baseline or []]
    if baselines and not args.report:
        return "--baseline: only the report (--report DIR) shows baselines"
    for b in baselines:
        why = check_baseline(b) or other_dataset(b, Path(args.data), args.split)
        if why:
            return f"--baseline: {why}"
    return None


def modes_of(args: argparse.Namespace) -> list[str]:
    return [m.strip() for m in args.modes.split(",") if m.strip()]
