"""At start-up a process raises its soft open-files limit to the hard one (a systemd service starts at 1,024),
and says so when the shards already stored need more files than even that allows: checked in a child process
started with a low RLIMIT_NOFILE."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from indexing.collection import CollectionSettings
from indexing.shard_budget import MIN_SHARD_CAP
from indexing.store import CollectionStore
from models import EmbedderCache
from velaio.open_files import UNLIMITED_CAP

ROOT = Path(__file__).resolve().parents[2]
START = """
import json, resource, sys
from pathlib import Path
from indexing.logs import configure_logging
from service.settings import Settings
from service.state import build_state, check_open_files

configure_logging("info")
state = build_state(Settings(data_dir=Path(sys.argv[1]), embedder=sys.argv[2]))
check_open_files(state)
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
print(json.dumps({"soft": soft, "hard": hard, "cap": state.collections.shard_cap.limit}))
"""


def _limit(soft: int, hard: int) -> Callable[[], None]:
    return lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _start(data_dir: Path, embedder: Path, soft: int, hard: int) -> tuple[dict[str, int], list[dict[str, object]]]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run(
        [sys.executable, "-c", START, str(data_dir), str(embedder)],
        preexec_fn=_limit(soft, hard),
        capture_output=True,
        text=True,
        env=env,
        check=True,
        cwd=ROOT,
    )
    lines = [json.loads(line) for line in out.stderr.splitlines() if line.startswith("{")]
    return json.loads(out.stdout.strip().splitlines()[-1]), lines


def test_the_soft_limit_is_raised_to_the_hard_one(tmp_path: Path, tiny_embedder_dir: Path) -> None:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    expected = UNLIMITED_CAP if hard == resource.RLIM_INFINITY else hard  # "unlimited" cannot be a soft limit
    limits, logs = _start(tmp_path, tiny_embedder_dir, 256, hard)
    assert limits["soft"] == expected
    raised = [line for line in logs if line["msg"] == "open files limit raised"]
    assert raised and raised[0]["from"] == 256 and raised[0]["to"] == expected


def test_stored_shards_past_the_limit_are_served_and_reported(tmp_path: Path, tiny_embedder_dir: Path) -> None:
    store = CollectionStore(tmp_path)
    dim = EmbedderCache().get(tiny_embedder_dir).dim
    for name in ("a", "b"):
        store.create(CollectionSettings(name=name, embedder=str(tiny_embedder_dir), dim=dim, shards=12))
    limits, logs = _start(tmp_path, tiny_embedder_dir, 600, 600)  # no room to raise: 600 is all there is
    assert limits["soft"] == 600 and limits["cap"] == MIN_SHARD_CAP  # the worst case holds none: the floor
    too_low = [line for line in logs if line["msg"].startswith("open files limit too low")]
    assert too_low and too_low[0]["level"] == "error"
    assert (too_low[0]["shards"], too_low[0]["open_files_limit"]) == (24, 600)
    assert any(line["msg"].startswith("shards stored past the cap") for line in logs)
