"""A live `vela worker` keeps its job while the job is silent for longer than the claim time (a long batch, a wait
for the collection's writer lock): a second worker finds nothing to take over, and the job runs once."""

from __future__ import annotations

import threading
import time

import pytest

from indexing.redis_queue import RedisJobQueue
from indexing.redis_worker import RedisWorker
from tests.redis_fixtures import RedisServer


@pytest.mark.slow  # the default suite keeps a live worker's job from a re-run in test_redis_abandoned.py
def test_a_silent_job_is_not_taken_over_from_a_live_worker(redis_server: RedisServer) -> None:
    stream = "vela:heartbeat-test"
    queue = RedisJobQueue(redis_server.url, stream=stream)
    queue.start()
    runs: list[tuple[str, str]] = []
    started = threading.Event()

    def silent(name: str):  # type: ignore[no-untyped-def]
        def run(job_id: str, heartbeat: object) -> None:  # never calls heartbeat: 3 claim times of silence
            runs.append((name, job_id))
            started.set()
            time.sleep(3.0)

        return run

    first = RedisWorker(redis_server.url, silent("w1"), name="w1", stream=stream, claim_idle_s=1.0, block_s=0.2)
    second = RedisWorker(redis_server.url, silent("w2"), name="w2", stream=stream, claim_idle_s=1.0, block_s=0.2)
    stop = threading.Event()
    queue.submit("job-1")
    one = threading.Thread(target=first.serve, args=(stop,), daemon=True)
    one.start()
    assert started.wait(30)
    two = threading.Thread(target=second.serve, args=(stop,), daemon=True)
    two.start()  # polls (XAUTOCLAIM with a 1 s idle time) the whole time the first worker is silent
    deadline = time.monotonic() + 30  # a guard against a hang, not a timed assertion
    while not first._unacked and not runs[1:] and time.monotonic() < deadline:
        time.sleep(0.05)
    stop.set()
    one.join(30)
    two.join(30)
    assert runs == [("w1", "job-1")]
