"""`vela serve` on several processes: one listening socket, N forked API processes, and this supervisor.

Why processes: one Python process answers searches on at most about one and a half cores. Encoding and index
scans release the GIL, but HTTP parsing, validation, fusion, hydration and serialisation hold it. With a
second process on a 2-core machine, hybrid throughput at concurrency 8 went from 195 to 265 q/s
(`vela bench latency`, bench/results/latency.json). This is uvicorn's and gunicorn's model: the kernel shares
the connections of one socket among the processes that accept on it.

What the processes share is the data directory, and each part already works across processes. Searches read
published manifests, which every process's background reader follows. Jobs run in one process at a time
(indexing/job_runner.py). Metrics are summed over the processes at scrape time (prometheus_client's
multiprocess mode: this module sets PROMETHEUS_MULTIPROC_DIR, `<data dir>/run/metrics-<port>` unless set, before the
processes are forked).

The supervisor forks the processes after the imports (so they start fast and share those pages) and before
any thread pool is started. It starts a process again when one dies. It stops them all on SIGTERM or SIGINT,
and when one exits with status 2, which means the configuration is wrong (for example VELA_DEVICE=cuda
without CUDA): starting it again would fail the same way. To stop, it closes its own copy of the listening
socket and then sends SIGTERM to each process, which stops accepting (closing its copy), answers the requests it
has and stops its job: from then on the port refuses new connections at once, as a single process's would. Each
process gets SIGTERM when the supervisor dies, so a killed supervisor leaves no server behind.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import shutil
import signal
import socket
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType

from indexing.logs import SLOT_ENV

log = logging.getLogger("vela.service")
CONFIG_ERROR = 2  # a process's exit status that stops them all (the CLI's status for a configuration error)
STOP_WAIT_S = 40.0  # a process's graceful stop (uvicorn, then the job queue's own 30 s) before SIGKILL
RESPAWN_DELAY_S = 1.0
PR_SET_PDEATHSIG = 1


def bind(host: str, port: int, backlog: int = 2048) -> socket.socket:
    """The listening socket every process accepts on (inherited through fork)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(backlog)
    sock.set_inheritable(True)
    return sock


def _die_with_parent(parent: int) -> None:
    """Linux: SIGTERM to this process when the supervisor dies (prctl); elsewhere nothing is armed."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # it died before the call above
        os._exit(0)


def _child(slot: int, sock: socket.socket, run_one: Callable[[socket.socket], int], parent: int) -> None:
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)  # uvicorn installs its own handlers
    _die_with_parent(parent)
    os.environ[SLOT_ENV] = str(slot)  # every log line of this process names its slot (indexing/logs.py)
    code = 1
    try:
        code = run_one(sock)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:
        log.exception("API process failed", extra={"slot": slot})
    finally:
        logging.shutdown()
        os._exit(code)


def serve(n: int, host: str, port: int, run_one: Callable[[socket.socket], int], metrics_dir: Path) -> int:
    """Run `run_one(socket)` in `n` forked processes until SIGTERM/SIGINT; the exit status for the CLI.

    `metrics_dir`: where the processes keep their metric values unless PROMETHEUS_MULTIPROC_DIR names another
    folder. It is emptied at start, because files of an earlier run would add to the counts (prometheus_client's
    rule), and removed at exit; a killed server's files are emptied by the next start."""
    sock = bind(host, port)
    own_metrics_dir = "PROMETHEUS_MULTIPROC_DIR" not in os.environ  # else the operator's: left as it is
    if own_metrics_dir:
        shutil.rmtree(metrics_dir, ignore_errors=True)
        metrics_dir.mkdir(parents=True)
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(metrics_dir)
    os.environ["VELA_SERVING_PROCESSES"] = str(n)
    parent = os.getpid()
    children: dict[int, int] = {}  # pid -> slot
    stopping = False
    status = 0

    def on_signal(signum: int, _: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    def spawn(slot: int) -> None:
        pid = os.fork()
        if pid == 0:
            _child(slot, sock, run_one, parent)
        children[pid] = slot

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    log.info("serving", extra={"processes": n, "host": host, "port": port})
    for slot in range(n):
        spawn(slot)
    try:
        while not stopping:
            pid, wait_status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                time.sleep(0.1)
                continue
            if pid not in children:
                continue
            slot = children.pop(pid)
            code = os.waitstatus_to_exitcode(wait_status)
            if code == CONFIG_ERROR:
                stopping, status = True, CONFIG_ERROR
                break
            log.warning("API process exited; starting it again", extra={"slot": slot, "pid": pid, "code": code})
            time.sleep(RESPAWN_DELAY_S)
            if not stopping:
                spawn(slot)
    finally:
        # The supervisor's copy of the socket goes first: the processes close theirs when they stop accepting
        # (uvicorn's shutdown), and the port must then refuse connections, as one process does, rather than queue
        # them for nobody while the processes drain their requests and stop their jobs (up to STOP_WAIT_S).
        sock.close()
        _stop_all(children)
        if own_metrics_dir:
            shutil.rmtree(metrics_dir, ignore_errors=True)
    return status


def _stop_all(children: dict[int, int]) -> None:
    for pid in children:
        _kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_WAIT_S
    while children and time.monotonic() < deadline:
        for pid in list(children):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done = pid
            if done:
                children.pop(pid)
        time.sleep(0.05)
    for pid, slot in children.items():
        # Said out loud: a process killed here may leave its job `running` (it runs again after the restart).
        log.warning(
            "API process did not stop in time; killing it", extra={"pid": pid, "slot": slot, "waited_s": STOP_WAIT_S}
        )
        _kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


def _kill(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)
