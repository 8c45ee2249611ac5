"""Requests name models by registry name only: every other value of every model-naming field gets one identical
422, and handling those requests opens nothing outside the data directory and the registry (checked with audit
hooks in this process, and with strace on a `vela serve` subprocess, which also sees every stat)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import httpx
import pytest

from models.registry import ModelRegistry
from tests.reranker_fixtures import make_reranker
from tests.service.conftest import running_app, wait_job

REPO = Path(__file__).resolve().parents[2]
DOC = {"id": "d1", "text": "tides and the moon"}


def bad_names(real_model_dir: Path) -> list[str]:
    """Path-like or unregistered values: none may resolve, and all must fail alike."""
    return [
        "nope",  # simply not registered
        "../",
        "..",
        "../../etc",
        "../../../../../../etc/passwd",
        "/etc/passwd",
        "/",
        "~",
        "~root",
        "~/models",
        "evil",  # a symlink inside the registry that points out of it (at a real model)
        str(real_model_dir),  # an existing model directory's absolute path
        str(real_model_dir) + "/",
        "tiny/../tiny",
        "default/../x",
        "./tiny",
        ".tiny",
        "tiny/",
        "tiny\x00",
        "\x00",
        "ti\x00ny",
        "tiny\n",
        "\ttiny",
        "%2e%2e%2f",
        "..%2f",
        "%2Fetc%2Fpasswd",
        "tiny%00",
        "x" * 65,
        "y" * 5000,
        "C:\\x",
        "..\\..\\windows",
        "\\\\server\\share",
        "file:///etc/passwd",
        "\u2024\u2024/etc",  # one-dot leaders
        "\uff0e\uff0e\uff0fetc",  # fullwidth dot, dot, solidus
        "tiny\u2215..",  # division slash
        "t\u0131ny",  # dotless i: not "tiny"
        "\u202etiny",  # right-to-left override
    ]


FIELDS: dict[str, Callable[[str], tuple[str, dict[str, Any]]]] = {
    "embedder": lambda v: ("/index", {"collection": "fresh", "documents": [DOC], "embedder": v}),
    "rerank.model": lambda v: ("/search", {"collection": "c", "query": "moon", "rerank": {"model": v}}),
    "batch rerank.model": lambda v: ("/search/batch", {"collection": "c", "queries": ["moon"], "rerank": {"model": v}}),
    "reindex embedder": lambda v: ("/collections/c/reindex", {"embedder": v}),
}
MESSAGE = {
    "embedder": "embedder",
    "rerank.model": "rerank.model",
    "batch rerank.model": "rerank.model",
    "reindex embedder": "embedder",
}


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory, tiny_embedder_dir: Path) -> dict[str, Path]:
    """A data directory whose registry holds `tiny` (embedder), `rr` (reranker) and `evil`, a symlink to a real
    model outside it."""
    root = tmp_path_factory.mktemp("names")
    data = root / "data"
    registry = ModelRegistry(data / "models")
    registry.register("tiny", tiny_embedder_dir)
    registry.register("rr", make_reranker("bert", root / "rr"))
    outside = shutil.copytree(tiny_embedder_dir, root / "outside-model")
    (registry.root / "evil").symlink_to(outside, target_is_directory=True)
    return {"data": data, "models": registry.root, "outside": outside}


@pytest.fixture(scope="module")
def app_client(setup: dict[str, Path], tiny_embedder_dir: Path) -> Iterator[tuple[httpx.Client, Any]]:
    with running_app(setup["data"], embedder=str(tiny_embedder_dir)) as (client, app):
        r = client.post("/index", json={"collection": "c", "documents": [DOC]})
        assert wait_job(client, r.json()["job_id"])["status"] == "succeeded"
        yield client, app


def _send(client: httpx.Client, field: str, value: str) -> httpx.Response:
    path, body = FIELDS[field](value)
    return client.post(path, json=body)


def _error(r: httpx.Response) -> dict[str, Any]:
    error = dict(r.json()["error"])
    error.pop("request_id")
    return error


@pytest.mark.parametrize("field", sorted(FIELDS))
def test_every_unregistered_name_gets_the_same_422(
    app_client: tuple[httpx.Client, Any], field: str, tiny_embedder_dir: Path
) -> None:
    client, _ = app_client
    values = bad_names(tiny_embedder_dir)
    assert len(values) >= 20
    message = f"{MESSAGE[field]}: no registered model of that name (GET /models lists them)"
    expected = {
        "code": "unknown_model",
        "message": message,
        "details": [{"loc": [], "msg": message, "type": "unknown_model"}],  # every 422 lists its problems
    }
    for value in values:
        r = _send(client, field, value)
        assert r.status_code == 422, (value, r.text)
        assert _error(r) == expected, value
    assert client.get("/collections/fresh").status_code == 404  # no bad request created anything


def test_registered_names_work(app_client: tuple[httpx.Client, Any]) -> None:
    client, _ = app_client
    r = client.post("/index", json={"collection": "by-name", "documents": [DOC], "embedder": "tiny"})
    assert r.status_code == 202, r.text
    assert wait_job(client, r.json()["job_id"])["status"] == "succeeded"
    body = client.post("/search", json={"collection": "by-name", "query": "moon", "rerank": {"model": "rr"}}).json()
    assert body["rerank"]["status"] == "ok" and body["rerank"]["model"] == "rr"  # the name, not a server path
    # A registered model of the other kind is a different, named error.
    r = client.post("/search", json={"collection": "c", "query": "moon", "rerank": {"model": "tiny"}})
    assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_model"
    assert r.json()["error"]["message"] == "rerank.model: 'tiny' is an embedder, not a reranker"
    r = client.post("/collections/by-name/reindex", json={"embedder": "tiny", "promote": "manual"})
    assert r.status_code == 202 and wait_job(client, r.json()["job_id"])["status"] == "succeeded"
    r = client.post("/collections/c/reindex", json={"embedder": "rr"})
    assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_model"
    listed = {m["name"]: m for m in client.get("/models").json()["models"]}
    assert set(listed) == {"default", "tiny", "rr"}  # the symlinked entry is no model
    assert (listed["tiny"]["kind"], listed["tiny"]["dims"], listed["rr"]["kind"]) == ("embedder", 32, "reranker")


def allowed_roots(data_dir: Path) -> list[str]:
    """Where handling a request may look: the data directory (the registry is inside it), the Python installation
    and this project's sources (modules imported late), and the kernel's pseudo-filesystems."""
    roots = {data_dir.resolve(), Path(sys.prefix), Path(sys.base_prefix), Path(sys.exec_prefix)}
    roots |= {Path(p) for p in sysconfig.get_paths().values()}
    roots |= {REPO / pkg for pkg in ("service", "indexing", "models", "velaio", "client")}
    return [str(r) for r in roots] + ["/proc", "/sys", "/dev"]


def outside(paths: list[str], roots: list[str]) -> list[str]:
    def inside(path: str) -> bool:
        return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)

    return sorted({p for p in paths if not inside(os.path.normpath(p))})


# --- audit hooks: every open and directory listing in this (the server's) process ---------------------------
_SEEN: list[str] = []
_RECORDING = threading.Event()
_EVENTS = {"open", "os.listdir", "os.scandir", "os.mkdir", "os.rename", "os.remove", "os.rmdir", "os.symlink"}


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if not _RECORDING.is_set() or event not in _EVENTS or not args:
        return
    path = args[0]
    if isinstance(path, str | bytes | os.PathLike):
        _SEEN.append(os.path.abspath(os.fsdecode(path)))


def _install_hook() -> None:
    # Once per process, and only when this test runs: a hook cannot be removed (idle, it checks one flag).
    if not getattr(sys, "_vela_names_hook", False):
        sys.addaudithook(_hook)
        sys._vela_names_hook = True  # type: ignore[attr-defined]


def test_bad_names_open_nothing_outside_the_data_dir(
    app_client: tuple[httpx.Client, Any], setup: dict[str, Path], tiny_embedder_dir: Path
) -> None:
    client, _ = app_client
    _install_hook()
    _SEEN.clear()
    _RECORDING.set()
    try:
        for field in FIELDS:
            for value in bad_names(tiny_embedder_dir):
                assert _send(client, field, value).status_code == 422
    finally:
        _RECORDING.clear()
    # The hook sees what it should (each request looks its collection name up among the aliases)...
    assert str(setup["data"].resolve() / "aliases.json") in _SEEN
    assert outside(_SEEN, allowed_roots(setup["data"])) == []  # ...and nothing outside


# --- strace: every file syscall (stat, access, readlink included) of a `vela serve` process ----------------------
STRACE = shutil.which("strace")


def strace_works() -> bool:
    """strace is installed and may trace here (some containers forbid ptrace)."""
    if STRACE is None:
        return False
    done = subprocess.run([STRACE, "-f", "-qq", "-e", "trace=%file", "-o", os.devnull, "true"], capture_output=True)
    return done.returncode == 0


# pid syscall(  [dirfd<dir>, ] "path"
_CALL = re.compile(r'^\d+\s+\w+\((?:(?:AT_FDCWD|-?\d+)(?:<([^>]*)>)?, )?"((?:[^"\\]|\\.)*)"')


def traced_paths(lines: list[str]) -> list[str]:
    out = []
    for line in lines:
        m = _CALL.match(line)
        if m is None:
            continue
        base, path = m.group(1) or "", m.group(2)
        out.append(os.path.join(base, path) if path else base)
    return out


@contextmanager
def traced_server(data_dir: Path, embedder: Path, trace: Path) -> Iterator[httpx.Client]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # One API process: a second one loading its models or catching up on the collection during the window
    # would open files outside the data directory that no request caused.
    env = {
        **os.environ,
        "VELA_DATA_DIR": str(data_dir),
        "VELA_EMBEDDER": str(embedder),
        "VELA_PROCESSES": "1",
        "TZ": "UTC",
    }
    vela = str(Path(sys.executable).with_name("vela"))
    # --seccomp-bpf: the kernel stops the server only at the traced (file) calls, not at every call: the same trace,
    # a quicker start-up under strace
    command = [STRACE or "strace", "-f", "--seccomp-bpf", "-qq", "-y", "-s", "512", "-e", "trace=%file"]
    command += ["-o", str(trace)]
    proc = subprocess.Popen(
        [*command, vela, "serve", "--port", str(port)],
        env=env,
        cwd=data_dir,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
            deadline = time.time() + 300  # start-up under strace is slow; not an assertion, a guard against a hang
            while True:
                try:
                    if client.get("/readyz").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if proc.poll() is not None or time.time() > deadline:
                    raise RuntimeError("the traced server did not start")
                time.sleep(0.2)
            yield client
    finally:
        # The first traced line is the server's own execve: stop the server, and strace ends with it.
        first = trace.read_text(errors="replace").split(maxsplit=1)[:1] if trace.exists() else []
        if first and first[0].isdigit():
            with suppress(ProcessLookupError):
                os.kill(int(first[0]), signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(60)


@pytest.mark.skipif(not strace_works(), reason="strace is not installed (make strace installs it) or cannot trace")
def test_bad_names_touch_nothing_outside_the_data_dir_under_strace(
    tmp_path: Path, setup: dict[str, Path], tiny_embedder_dir: Path
) -> None:
    data = tmp_path / "data"
    shutil.copytree(setup["data"] / "models", data / "models", symlinks=True)  # `evil` stays a symlink out
    trace = tmp_path / "trace.txt"
    with traced_server(data, tiny_embedder_dir, trace) as client:
        r = client.post("/index", json={"collection": "c", "documents": [DOC]})
        assert wait_job(client, r.json()["job_id"])["status"] == "succeeded"
        client.get("/models")  # the registry's folder resolved once, before the window
        client.post("/search", json={"collection": "c", "query": "moon"})  # the query encoder loaded before it too
        client.get("/collections/strace-window-opens")  # 404; its stat marks the window in the trace
        for field in FIELDS:
            for value in bad_names(tiny_embedder_dir):
                assert _send(client, field, value).status_code == 422
        client.get("/collections/strace-window-closes")
    lines = trace.read_text(errors="replace").splitlines()
    start = next(i for i, line in enumerate(lines) if "strace-window-opens" in line)
    end = next(i for i, line in enumerate(lines) if "strace-window-closes" in line)
    window = traced_paths(lines[start:end])
    assert any(p.endswith("/models/evil") for p in window)  # the registry was looked in (lstat of the entry)...
    assert outside(window, allowed_roots(data)) == []  # ...and nothing else
