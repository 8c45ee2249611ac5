"""Redis going away under `vela worker`: the worker logs the outage, reconnects with backoff and runs what is sent
after Redis is back; a stop during the backoff ends it at once. /readyz shows the queue unreachable meanwhile."""

from __future__ import annotations

import json
import shutil
import signal
import threading
from pathlib import Path

import pytest
import redis

from indexing.redis_queue import GROUP, RedisJobQueue
from indexing.redis_worker import RedisWorker
from tests.redis_fixtures import RedisServer, start_worker, until, worker_env, worker_logs
from tests.service.conftest import _free_port, running_server, wait_job

OUTAGE = "job queue unreachable: reconnecting"  # the worker's log line (JSON), once per reconnect attempt


def _consumers(url: str) -> set[str]:
    try:
        return {c["name"] for c in redis.Redis.from_url(url, decode_responses=True).xinfo_consumers("vela:jobs", GROUP)}
    except redis.RedisError:
        return set()


def _log_lines(path: Path, msg: str) -> list[dict[str, object]]:
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.startswith("{")]
    return [line for line in lines if line.get("msg") == msg]


@pytest.mark.slow  # `make test-slow`: the default suite keeps under 15 minutes
def test_a_worker_survives_a_redis_restart(tmp_path: Path, redis_server: RedisServer, tiny_embedder_dir: Path) -> None:
    env = worker_env(tmp_path, redis_server.url, tiny_embedder_dir)
    log = tmp_path / "w1.log"
    worker = start_worker("w1", env)
    try:
        with running_server(tmp_path / "data", redis_url=redis_server.url, embedder=str(tiny_embedder_dir)) as client:
            until("the worker is registered", lambda: "w1" in _consumers(redis_server.url) or worker.poll() is not None)
            assert worker.poll() is None, worker_logs(env)
            assert client.get("/readyz").json()["queue"] == "ok"

            redis_server.stop()
            until("the outage is logged", lambda: bool(_log_lines(log, OUTAGE)))
            assert worker.poll() is None, worker_logs(env)  # still there, waiting for Redis
            outage = _log_lines(log, OUTAGE)[0]
            assert outage["level"] == "warning" and outage["worker"] == "w1" and outage["attempt"] == 1
            assert float(str(outage["retry_in_s"])) > 0
            ready = client.get("/readyz")  # searches go on: still ready, the body says the queue is away
            assert ready.status_code == 200 and ready.json()["queue"] == "unreachable", ready.text
            assert str(redis_server.port) not in ready.text

            redis_server.start()
            until("the worker is back", lambda: bool(_log_lines(log, "job queue reachable again")), timeout=120)
            assert worker.poll() is None, worker_logs(env)
            assert client.get("/readyz").json()["queue"] == "ok"
            docs = [{"id": f"d{i}", "text": f"text {i} with marker mk{i}z"} for i in range(50)]
            r = client.post("/index", json={"collection": "a", "documents": docs})
            assert r.status_code == 202, r.text
            job = wait_job(client, r.json()["job_id"], timeout=300)
            assert job["status"] == "succeeded" and job["worker"] == "w1", (job, worker_logs(env))
            assert client.get("/collections/a").json()["documents"] == 50

            # SIGTERM while the worker waits for Redis: it stops, cleanly.
            seen = len(_log_lines(log, OUTAGE))
            redis_server.stop()
            until(
                "the second outage is logged",
                lambda: len(_log_lines(log, OUTAGE)) > seen,
            )
            worker.send_signal(signal.SIGTERM)
            assert worker.wait(60) == 0, worker_logs(env)
            assert _log_lines(log, "worker stopped")
    finally:
        worker.kill()
        worker.wait(10)


def test_stop_ends_the_reconnect_backoff_at_once(tmp_path: Path) -> None:
    """Nothing listens on the port; the first wait is 10 minutes: setting `stop` (SIGTERM does) ends it."""
    url = f"redis://127.0.0.1:{_free_port()}/0"
    waits: list[float] = []
    worker = RedisWorker(url, lambda *_: None, name="w", reconnect_first_s=600, reconnect_max_s=600)
    backoff = worker.backoff

    def recorded(failures: int) -> float:
        waits.append(backoff(failures))
        return waits[-1]

    worker.backoff = recorded  # type: ignore[method-assign]
    stop = threading.Event()
    thread = threading.Thread(target=worker.serve, args=(stop,), daemon=True)
    thread.start()
    until("the worker backs off", lambda: bool(waits))
    assert waits[0] >= 300  # half to all of 600 s
    stop.set()
    thread.join(60)
    assert not thread.is_alive()


def test_backoff_doubles_up_to_its_cap() -> None:
    worker = RedisWorker("redis://127.0.0.1:1/0", lambda *_: None, name="w", reconnect_first_s=0.5, reconnect_max_s=8)
    for failures, full in [(1, 0.5), (2, 1.0), (3, 2.0), (4, 4.0), (5, 8.0), (6, 8.0), (100, 8.0)]:
        assert full / 2 <= worker.backoff(failures) <= full


def test_an_in_process_worker_reconnects_and_takes_new_jobs(tmp_path: Path) -> None:
    """Redis restarted with nothing kept (no AOF): the worker makes the group again and runs what comes next."""
    server = RedisServer(tmp_path)
    ran: list[str] = []
    server.start()
    worker = RedisWorker(server.url, lambda job_id, _hb: ran.append(job_id), name="w", block_s=0.2)
    worker.reconnect_max_s = 0.5
    stop = threading.Event()
    thread = threading.Thread(target=worker.serve, args=(stop,), daemon=True)
    thread.start()
    queue = RedisJobQueue(server.url)
    try:
        until("the worker is registered", lambda: "w" in _consumers(server.url))
        queue.submit("before")
        until("the first job ran", lambda: ran == ["before"])
        server.stop()
        assert not queue.reachable()
        shutil.rmtree(tmp_path / "appendonlydir")  # Redis comes back empty: no stream, no group
        (tmp_path / "dump.rdb").unlink(missing_ok=True)
        server.start()
        until("the worker registered again", lambda: "w" in _consumers(server.url))
        assert queue.reachable()
        queue.submit("after")
        until("the job sent after the restart ran", lambda: ran == ["before", "after"])
        assert thread.is_alive()
    finally:
        stop.set()
        thread.join(30)
        queue.stop()
        server.stop()
