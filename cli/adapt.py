"""`vela adapt COLLECTION --out NAME [--max_minutes M]`: adapt a collection's embedder to its own documents.

No labels: the pseudo-queries are the documents' titles (sentences cut out of passages where titles are few) and
any unlabelled queries given with --queries (cli/adapt_queries.py). The teacher is the collection's own hybrid
ranker: every pseudo-query is searched with dense and BM25 through the engine, and the z-scored combination of
both lists scores each query's list (training/adapt/dataset.py). The student, by default the query side of the
collection's embedder, trains for what is left of the time budget against the collection's fixed document
vectors (training/adapt/query_tower.py; `--tower both`: training/adapt/trainer.py); the result is registered by
name in the model registry with its training record, so `GET /models` lists it and a collection can be reindexed
with it (a reindex that copies the document vectors, the document side being the base's).

This module is the orchestration that needs the engine; training/ reads only the plain data it is given.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any

log = logging.getLogger("vela.adapt")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """COLLECTION, --out, --data-dir, and every field of AdaptArguments as a flag of the same name."""
    from training.adapt.arguments import AdaptArguments

    parser.add_argument("collection", help="the collection whose documents and embedder are adapted")
    parser.add_argument("--out", required=True, help="registry name of the adapted embedder")
    parser.add_argument("--data-dir", default=None, help="data directory (default VELA_DATA_DIR or ./.vela)")
    for f in dataclasses.fields(AdaptArguments):
        default = _default(f)
        help_ = f.metadata.get("help", "") + f" (default {default})"
        if isinstance(default, bool):
            parser.add_argument(f"--{f.name}", type=_bool, default=default, help=help_)
        elif isinstance(default, list):
            parser.add_argument(f"--{f.name}", type=float, nargs="*", default=default, help=help_)
        else:
            parser.add_argument(f"--{f.name}", type=type(default), default=default, help=help_)


def _default(f: dataclasses.Field[Any]) -> Any:
    return f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc,operator]


def _bool(s: str) -> bool:
    return s.strip().lower() in ("1", "true", "yes", "on")


def main(args: argparse.Namespace) -> int:
    from cli.adapt_checks import BudgetSpent, resolve_student
    from cli.console import quiet_libraries
    from cli.interrupts import terminate_as_interrupt
    from cli.models import check_register_name
    from training.adapt.arguments import AdaptArguments

    if args.data_dir:
        os.environ["VELA_DATA_DIR"] = str(Path(args.data_dir))
    try:  # AdaptArguments checks every number (finite, in range) before any work
        aargs = AdaptArguments(**{f.name: getattr(args, f.name) for f in dataclasses.fields(AdaptArguments)})
    except ValueError as e:
        return _fail(str(e))
    # Everything that can be checked before pseudo-labelling is: a bad argument costs no work and leaves nothing.
    why = check_register_name(args.out, flag="--out")
    if why:
        return _fail(why)
    try:
        student = resolve_student(aargs.student) if aargs.student else None
    except ValueError as e:
        return _fail(str(e))
    # Read only after pseudo-queries are made: a missing file would otherwise cost the whole pseudo-labelling.
    if aargs.queries and not Path(aargs.queries).is_file():
        return _fail(f"--queries: no file {aargs.queries}")
    try:  # `cuda:N` becomes that GPU alone (CUDA_VISIBLE_DEVICES), for the encoders and the trainer alike
        from models.device import DeviceError, pin_visible_device, resolve_device

        os.environ["VELA_DEVICE"] = pin_visible_device(os.environ.get("VELA_DEVICE", "auto"))
        resolve_device(os.environ["VELA_DEVICE"])  # `cuda` without CUDA: one line and status 2, before any work
    except DeviceError as e:
        return _fail(str(e))
    command = _command(args, aargs)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    try:  # SIGTERM as Ctrl-C: the work directory is removed either way (cli/main.py: "interrupted", 130)
        with quiet_libraries(), terminate_as_interrupt():
            entry = adapt(args.collection, args.out, aargs, command=command, student=student)
    except LookupError as e:
        return _fail(str(e))
    except BudgetSpent as e:
        print(f"vela adapt: {e}", file=sys.stderr)
        return 1
    print(json.dumps(entry))
    return 0


def _command(args: argparse.Namespace, aargs: Any) -> str:
    """The command that re-runs this adaptation: the collection, the name, and every flag off its default."""
    from training.adapt.arguments import AdaptArguments

    words = ["vela", "adapt", args.collection, "--out", args.out]
    if args.data_dir:
        words += ["--data-dir", args.data_dir]
    for f in dataclasses.fields(AdaptArguments):
        value = getattr(aargs, f.name)
        default = _default(f)
        if value != default:
            words += [
                f"--{f.name}",
                *(
                    map(str, value)
                    if isinstance(value, list)
                    else [str(value).lower() if isinstance(value, bool) else str(value)]
                ),
            ]
    return " ".join(shlex.quote(w) for w in words)


def _fail(message: str) -> int:
    print(f"vela adapt: {message}", file=sys.stderr)
    return 2


def adapt(collection: str, name: str, aargs: Any, *, command: str, student: str | None = None) -> dict[str, Any]:
    """Pseudo-queries, pseudo-labels, training, registration; the registry entry (public fields). `student`: the
    model to train, as `resolve_student` gives it (default: the collection's embedder)."""
    from cli.adapt_checks import fresh_work_dir, settle_work_dir, student_width_problem, training_minutes
    from cli.adapt_queries import bare_candidates, candidates, logged_queries, pseudo_queries
    from cli.models import models_dir
    from indexing.collection import CollectionNotFound
    from models.registry import ModelRegistry
    from service.settings import Settings
    from service.state import build_state
    from training.adapt.dataset import label, unlabelled
    from training.adapt.trainer import train, write_record

    t0 = time.monotonic()
    settings = Settings()
    state = build_state(settings)
    try:
        coll = state.collections.get(collection)
    except CollectionNotFound as e:
        raise LookupError(f"no collection named {collection!r}") from e
    embedder = state.embedders.get(coll.settings.embedder)
    fanout = state.collections.fanout
    if aargs.tower == "query" and embedder.contextual:
        raise LookupError(f"collection {collection!r} has a contextual embedder: adapt it with --tower both")
    if student and aargs.tower == "query":  # before pseudo-labelling: the vectors it trains against are fixed
        why = student_width_problem(student, collection, coll.settings.dim)
        if why:
            raise LookupError(why)
    pqs = pseudo_queries(coll, aargs) + logged_queries(aargs.queries)  # cli/adapt_queries.py
    model = student or str(coll.settings.embedder)
    if aargs.tower == "query":
        from training.adapt.dataset import listwise, sources_only
        from training.adapt.query_tower import train as train_query_tower

        if aargs.teacher == "hybrid":
            # Every pseudo-query is kept: its list says where the teacher puts the source, which the student copies.
            lists, texts, teacher = listwise(
                candidates(coll, embedder, fanout, pqs, aargs.depth), alpha=aargs.fusion_alpha, consistency_top_k=0
            )
        else:  # the ablation: the same pseudo-queries, in-batch, nothing from a teacher
            lists, texts = sources_only([bare_candidates(p) for p in pqs])
            teacher = {"pseudo_queries": len(pqs), "kept": len(lists)}
        if not lists:
            raise LookupError(f"collection {collection!r} gave no usable pseudo-queries (too few sentences?)")
        # The fixed side: every text a list holds, as the collection's own embedder (serving form) encodes it.
        vectors = embedder.encode_documents(texts, context=coll.query_context(fanout))  # (T, d)

        def run(out: Path, minutes: float) -> dict[str, Any]:
            return train_query_tower(lists, vectors, aargs, model=model, out=out, minutes=minutes)

    else:
        if aargs.teacher == "hybrid":
            examples, teacher = label(
                candidates(coll, embedder, fanout, [p for p in pqs if p.doc_id], aargs.depth),
                alpha=aargs.fusion_alpha,
                depth=aargs.depth,
                skip_top=aargs.skip_top,
                consistency_top_k=aargs.consistency_top_k,
            )
        else:  # the ablation: the same pseudo-queries, their sources as positives, nothing from a teacher
            examples = unlabelled([bare_candidates(p) for p in pqs if p.doc_id])
            teacher = {"pseudo_queries": len(pqs), "kept": len(examples)}
        if not examples:
            raise LookupError(f"collection {collection!r} gave no usable pseudo-queries (too few sentences?)")

        def run(out: Path, minutes: float) -> dict[str, Any]:
            return train(examples, aargs, model=model, out=out, minutes=minutes)

    prep_s = time.monotonic() - t0
    minutes = training_minutes(aargs.max_minutes, prep_s)  # BudgetSpent when nothing is left
    log.info("pseudo-labels in %.0f s; %.1f minutes left to train", prep_s, minutes)
    # Checkpoints stay in the work directory; the registry copies the model only.
    with fresh_work_dir(settings.data_dir / "adapt", name) as fresh:
        record = {
            "command": command,
            "recipe": "adapt",
            "collection": collection,
            "base_model": aargs.student or _model_label(str(coll.settings.embedder)),
            "recipe_args": dataclasses.asdict(aargs),
            "teacher": teacher,
            "pseudo_label_seconds": round(prep_s, 1),
            **run(fresh, minutes),
        }
        record.update(total_seconds=round(time.monotonic() - t0, 1), finished_at=time.time())
        write_record(fresh, record)
        work = settle_work_dir(fresh, settings.data_dir / "adapt" / name)
    entry = ModelRegistry(models_dir()).register(name, work)
    return {
        "registered": entry.name,
        "kind": entry.kind,
        "dims": entry.dims,
        "work_dir": str(work),
        **{k: record[k] for k in ("steps", "examples", "train_seconds", "total_seconds", "teacher")},
    }


def _model_label(embedder: str) -> str:
    """What the record (shown by GET /models) calls the base model: `default` or a name, never a server path."""
    from models.loading import packaged_minilm_dir

    if Path(embedder) == Path(packaged_minilm_dir()):
        return "default"
    return Path(embedder).name
