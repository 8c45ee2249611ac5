"""The Redis stream holds only the jobs not yet done: an entry is deleted with its acknowledgement, never while it
is pending, so the job of a worker killed mid-job is still there to be taken over."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import redis

from indexing.redis_queue import GROUP, RedisJobQueue, ensure_group, trim_acknowledged
from indexing.redis_worker import RedisWorker
from tests.redis_fixtures import RedisServer, until

STREAM = "vela:jobs"


@contextmanager
def serving(url: str, ran: list[str], *, name: str, claim_idle_s: float) -> Iterator[RedisWorker]:
    worker = RedisWorker(url, lambda job_id, _hb: ran.append(job_id), name=name, claim_idle_s=claim_idle_s, block_s=0.1)
    stop = threading.Event()
    thread = threading.Thread(target=worker.serve, args=(stop,), daemon=True)
    thread.start()
    try:
        yield worker
    finally:
        stop.set()
        thread.join(30)
        assert not thread.is_alive()


def _job_ids(client: redis.Redis) -> list[str]:
    entries: Any = client.xrange(STREAM)
    return [str(fields["job_id"]) for _, fields in entries]


def test_the_stream_does_not_grow_with_every_job(redis_server: RedisServer) -> None:
    client = redis.Redis.from_url(redis_server.url, decode_responses=True)
    queue = RedisJobQueue(redis_server.url)
    queue.start()
    ran: list[str] = []
    n = 200
    with serving(redis_server.url, ran, name="w", claim_idle_s=3600):
        for i in range(n):
            queue.submit(f"j{i}")
        until("every job ran", lambda: len(ran) == n)
        until("every entry is gone", lambda: client.xlen(STREAM) == 0)
    assert ran == [f"j{i}" for i in range(n)]
    assert client.xpending(STREAM, GROUP)["pending"] == 0


def test_a_killed_workers_pending_entry_survives_and_is_taken_over(redis_server: RedisServer) -> None:
    client = redis.Redis.from_url(redis_server.url, decode_responses=True)
    queue = RedisJobQueue(redis_server.url)
    queue.start()
    queue.submit("lost")
    # A worker read it and was SIGKILLed: the entry stays pending to that consumer, never acknowledged.
    client.xreadgroup(GROUP, "killed", {STREAM: ">"}, count=1)
    for i in range(20):
        queue.submit(f"j{i}")
    ran: list[str] = []
    with serving(redis_server.url, ran, name="w1", claim_idle_s=3600):  # not stale yet for this worker
        until("the other jobs ran", lambda: len(ran) == 20)
        until("their entries are gone", lambda: client.xlen(STREAM) == 1)
    assert _job_ids(client) == ["lost"]
    assert trim_acknowledged(client, STREAM) == 0  # a sweep leaves the pending entry too
    assert _job_ids(client) == ["lost"]
    assert client.xpending(STREAM, GROUP)["consumers"] == [{"name": "killed", "pending": 1}]

    taken: list[str] = []
    with serving(redis_server.url, taken, name="w2", claim_idle_s=0.05):  # registering sweeps the stream first
        until("the pending job was taken over", lambda: taken == ["lost"])
        until("its entry is gone", lambda: client.xlen(STREAM) == 0 and client.xpending(STREAM, GROUP)["pending"] == 0)


def test_a_sweep_deletes_only_entries_below_the_oldest_pending_one(redis_server: RedisServer) -> None:
    """A stream grown by an older worker (acknowledged, never deleted): the sweep at a worker's start removes what
    every consumer is done with and nothing a takeover could still need."""
    client = redis.Redis.from_url(redis_server.url, decode_responses=True)
    ensure_group(client, STREAM)
    ids = [client.xadd(STREAM, {"job_id": f"j{i}"}) for i in range(10)]
    client.xreadgroup(GROUP, "old", {STREAM: ">"}, count=8)  # j8, j9 never delivered
    client.xack(STREAM, GROUP, *ids[:3], *ids[4:8])  # j3 still pending
    assert trim_acknowledged(client, STREAM) == 3
    assert _job_ids(client) == [f"j{i}" for i in range(3, 10)]
    client.xack(STREAM, GROUP, ids[3])
    assert trim_acknowledged(client, STREAM) == 5  # j3 to j7; the undelivered j8 and j9 stay
    assert _job_ids(client) == ["j8", "j9"]


def test_no_sweep_when_another_group_reads_the_stream(redis_server: RedisServer) -> None:
    client = redis.Redis.from_url(redis_server.url, decode_responses=True)
    ensure_group(client, STREAM)
    client.xgroup_create(STREAM, "someone-else", id="0")
    entry = client.xadd(STREAM, {"job_id": "j"})
    client.xreadgroup(GROUP, "w", {STREAM: ">"}, count=1)
    client.xack(STREAM, GROUP, entry)
    assert trim_acknowledged(client, STREAM) == 0
    assert client.xlen(STREAM) == 1
