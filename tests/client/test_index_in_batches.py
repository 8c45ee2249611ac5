"""`index_in_batches` through both clients against real servers: a corpus over the server's limits indexed from a
generator read as it goes, requests bounded by count and by bytes (the caller's and the server's, read from
`GET /limits`), a repeated id, a document too large for any request, errors that say what was sent, and a proxy
whose 413 the limits did not predict."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from vela_client import IndexProgress, InvalidRequest, Job, JobAccepted, NotFound, PayloadTooLarge, VelaClient

from tests.client.conftest import API_KEY, ClientFactory
from tests.client.limiting_proxy import limiting_proxy
from tests.service.conftest import running_app

TIGHT_JSON_BYTES = 4096
TIGHT_BATCH = 5
TIGHT_TEXT_BYTES = 1500


@pytest.fixture(scope="module")
def tight_url(tmp_path_factory: pytest.TempPathFactory, tiny_embedder_dir: Path) -> Iterator[str]:
    """A server with small limits, so that a few dozen documents are more than one request may hold."""
    settings = {
        "api_keys": API_KEY,
        "embedder": str(tiny_embedder_dir),
        "max_json_bytes": TIGHT_JSON_BYTES,
        "max_batch_documents": TIGHT_BATCH,
        "max_document_bytes": TIGHT_TEXT_BYTES,
    }
    with running_app(tmp_path_factory.mktemp("vela-tight"), **settings) as (http, _):
        yield str(http.base_url)


def corpus(n: int, *, start: int = 0, pad: int = 30) -> Iterator[dict[str, Any]]:
    for i in range(start, start + n):
        yield {"id": f"d{i:03}", "title": f"Note {i}", "text": f"note {i} about otters " + "and rivers " * pad}


def wait_all(client: VelaClient, collection: str) -> None:
    """Every job of the collection ended (what a call that raised had sent)."""
    for job in client.list_jobs(collection=collection).jobs:
        client.wait_job(job, check=False)


def test_limits_are_the_servers(make_client: ClientFactory, tight_url: str) -> None:
    limits = make_client(tight_url).limits()
    assert (limits.max_json_bytes, limits.max_batch_documents) == (TIGHT_JSON_BYTES, TIGHT_BATCH)
    assert limits.max_document_bytes == TIGHT_TEXT_BYTES


def test_a_corpus_over_the_server_limits_is_indexed_from_a_generator(
    make_client: ClientFactory, tight_url: str, unique: Callable[[str], str]
) -> None:
    client = make_client(tight_url)
    name = unique("bulk")
    docs = list(corpus(40))
    with pytest.raises(PayloadTooLarge) as one_request:  # what `index` alone meets
        client.index(name, docs)
    assert any("index_in_batches" in note for note in one_request.value.__notes__)

    seen: list[IndexProgress] = []
    jobs = client.index_in_batches(name, iter(docs), wait=True, on_progress=seen.append)
    assert all(isinstance(job, Job) and job.succeeded for job in jobs)
    assert sum(job.total for job in jobs) == 40 and max(job.total for job in jobs) <= TIGHT_BATCH
    assert client.get_collection(name).documents == 40
    assert client.search(name, "note 37 about otters", mode="bm25", k=1).hits[0].id == "d037"
    last = seen[-1]
    assert (last.documents_sent, last.documents_done, last.total) == (40, 40, None)  # a generator has no len()
    assert (last.batches_sent, last.batches_finished) == (len(jobs), len(jobs)) and last.job == jobs[-1]
    done = [p.documents_done for p in seen]
    assert done == sorted(done)  # progress never goes back

    again = client.index_in_batches(name, docs, wait=True, on_progress=seen.append)  # a list: total known
    assert seen[-1].total == 40 and len(again) == len(jobs)


def test_a_generator_is_read_only_as_far_as_the_batch_being_sent(
    client: VelaClient, unique: Callable[[str], str]
) -> None:
    pulled = 0

    def documents() -> Iterator[dict[str, Any]]:
        nonlocal pulled
        for doc in corpus(12):
            pulled += 1
            yield doc

    sends: list[tuple[int, int]] = []
    accepted = client.index_in_batches(
        unique("lazy"), documents(), batch_size=4, on_progress=lambda p: sends.append((p.documents_sent, pulled))
    )
    assert all(isinstance(job, JobAccepted) for job in accepted) and len(accepted) == 3
    # A batch goes once the document after it arrives (or the input ends): never more than that is held.
    assert sends == [(4, 5), (8, 9), (12, 12)]
    for job in accepted:
        assert client.wait_job(job).succeeded


def test_each_request_holds_at_most_batch_size_documents_and_batch_bytes(
    make_client: ClientFactory, flavor: str, unique: Callable[[str], str]
) -> None:
    sizes: list[int] = []

    def record(request: httpx.Request) -> None:
        if request.url.path == "/index":
            sizes.append(len(request.content))

    async def record_async(request: httpx.Request) -> None:
        record(request)

    hook = record_async if flavor == "async" else record
    client = make_client(http_options={"event_hooks": {"request": [hook]}})
    docs = list(corpus(30))
    by_bytes = client.index_in_batches(unique("bytes"), docs, batch_bytes=2048, wait=True)
    assert len(sizes) == len(by_bytes) > 1 and max(sizes) <= 2048
    assert sum(job.total for job in by_bytes) == 30
    by_count = client.index_in_batches(unique("count"), docs[:10], batch_size=3, wait=True)
    assert [job.total for job in by_count] == [3, 3, 3, 1]


def test_a_repeated_id_starts_a_new_batch_so_the_later_document_wins(
    client: VelaClient, unique: Callable[[str], str]
) -> None:
    name = unique("again")
    docs = [{"id": "a", "text": "first"}, {"id": "b", "text": "bee"}, {"id": "a", "text": "second"}]
    jobs = client.index_in_batches(name, docs, wait=True)
    assert [job.total for job in jobs] == [2, 1]
    assert client.get_document(name, "a").text == "second"


def test_a_document_over_the_text_limit_is_named_and_nothing_from_its_batch_on_is_sent(
    make_client: ClientFactory, tight_url: str, unique: Callable[[str], str]
) -> None:
    client = make_client(tight_url)
    name = unique("huge")
    docs = [*corpus(7), {"id": "huge", "text": "otter " * 400}, *corpus(3, start=100)]
    with pytest.raises(PayloadTooLarge) as refused:
        client.index_in_batches(name, docs, wait=True)
    error = refused.value
    assert (error.code, error.status) == ("document_too_large", None)
    assert "position 7 (id 'huge')" in error.message and "VELA_MAX_DOCUMENT_BYTES" in error.message
    assert any("first 5 documents" in note for note in error.__notes__)
    wait_all(client, name)
    assert client.get_collection(name).documents == 5
    with pytest.raises(NotFound):
        client.get_document(name, "d005")  # batched with the huge one: not sent


def test_a_document_over_the_body_limit_says_which_limit(
    make_client: ClientFactory, tight_url: str, unique: Callable[[str], str]
) -> None:
    client = make_client(tight_url)
    wide = {"id": "wide", "text": "otters", "metadata": {"pad": "x" * TIGHT_JSON_BYTES}}
    with pytest.raises(PayloadTooLarge) as over_server:
        client.index_in_batches(unique("wide"), [wide])
    assert "position 0 (id 'wide')" in over_server.value.message
    assert "VELA_MAX_JSON_BYTES" in over_server.value.message
    assert any("nothing had been sent" in note for note in over_server.value.__notes__)
    roomy = {"id": "roomy", "text": "otters", "metadata": {"pad": "x" * 3000}}
    with pytest.raises(PayloadTooLarge) as over_caller:
        client.index_in_batches(unique("wide"), [roomy], batch_bytes=2048)
    assert f"raise batch_bytes (the server takes up to {TIGHT_JSON_BYTES} bytes)" in over_caller.value.message


def test_a_refused_batch_says_how_much_was_accepted_before_it(client: VelaClient, unique: Callable[[str], str]) -> None:
    name = unique("partial")
    docs = [*corpus(4), {"id": "no-text"}, *corpus(2, start=50)]
    with pytest.raises(InvalidRequest) as refused:
        client.index_in_batches(name, docs, batch_size=4)
    assert any("first 4 documents of the input, in 1 jobs" in note for note in refused.value.__notes__)
    wait_all(client, name)
    assert client.get_collection(name).documents == 4


@pytest.mark.parametrize(
    "options",
    [{"batch_size": 0}, {"batch_size": True}, {"batch_bytes": 100}, {"batch_bytes": 2.5e6}, {"timeout": 5}],
    ids=["size-0", "size-bool", "bytes-small", "bytes-float", "timeout-without-wait"],
)
def test_bad_options_send_nothing(client: VelaClient, unique: Callable[[str], str], options: dict[str, Any]) -> None:
    name = unique("bad")
    with pytest.raises(ValueError):
        client.index_in_batches(name, corpus(3), **options)
    with pytest.raises(TypeError):
        client.index_in_batches(name, "not documents")
    with pytest.raises(NotFound):
        client.get_collection(name)


def test_a_timeout_without_wait_names_only_the_timeout(client: VelaClient, unique: Callable[[str], str]) -> None:
    """on_progress is taken without wait (it reports the batches sent); a timeout is not, and the message says just
    that."""
    with pytest.raises(ValueError, match=r"^timeout applies only with wait=True$"):
        client.index_in_batches(unique("bad"), corpus(3), timeout=5, on_progress=print)
    with pytest.raises(ValueError, match=r"^on_progress and timeout apply only with wait=True$"):
        client.index(unique("bad"), list(corpus(1)), on_progress=print, timeout=5)  # type: ignore[call-overload]
    with pytest.raises(ValueError, match=r"^on_progress applies only with wait=True$"):
        client.index(unique("bad"), list(corpus(1)), on_progress=print)  # type: ignore[call-overload]


def test_no_documents_is_no_job(client: VelaClient, unique: Callable[[str], str]) -> None:
    name = unique("empty")
    assert client.index_in_batches(name, iter([]), wait=True) == []
    with pytest.raises(NotFound):
        client.get_collection(name)


def test_batches_shrink_after_a_413_the_limits_did_not_announce(
    make_client: ClientFactory, vela_url: str, unique: Callable[[str], str]
) -> None:
    """Behind a proxy with a smaller body limit, and without GET /limits (an older server): the 413 halves the
    batches until they pass, and later batches stay that small."""
    name = unique("proxied")
    with limiting_proxy(vela_url, max_body=3000, hide_limits=True) as proxy:
        jobs = make_client(proxy.url).index_in_batches(name, corpus(30), wait=True)
    assert proxy.refused >= 1 and all(job.succeeded for job in jobs) and sum(job.total for job in jobs) == 30
    over = [size > 3000 for size in proxy.bodies if size]
    assert over == [True] * proxy.refused + [False] * (len(over) - proxy.refused)  # refused at the start only
    assert make_client().get_collection(name).documents == 30


def test_a_lone_document_a_proxy_refuses_is_named(
    make_client: ClientFactory, vela_url: str, unique: Callable[[str], str]
) -> None:
    docs = [{"id": "small", "text": "otters"}, {"id": "big", "text": "otters " * 600}]
    with (
        limiting_proxy(vela_url, max_body=3000, hide_limits=True) as proxy,
        pytest.raises(PayloadTooLarge) as refused,
    ):
        make_client(proxy.url).index_in_batches(unique("proxied"), docs)
    assert proxy.refused == 2  # the pair, then "big" alone
    assert refused.value.status == 413
    notes = refused.value.__notes__
    assert any("one document, the document at position 1 (id 'big')" in note for note in notes)
    assert any("first 1 documents" in note for note in notes)


def test_after_a_413_a_document_larger_than_half_the_refused_batch_still_goes_alone(
    make_client: ClientFactory, vela_url: str, unique: Callable[[str], str]
) -> None:
    """The 413 says the limit is below the refused batch, not how far: halving is a guess, so a document over
    the guess but under the limits known for certain is sent alone, and the server decides."""
    name = unique("proxied")
    docs = list(corpus(2, pad=140))  # each a request of about 1.6 kB alone; both together, over 3000 bytes
    with limiting_proxy(vela_url, max_body=3000, hide_limits=True) as proxy:
        jobs = make_client(proxy.url).index_in_batches(name, docs, wait=True)
    assert proxy.refused == 1 and [job.total for job in jobs] == [1, 1]
    assert make_client().get_collection(name).documents == 2


def test_an_error_once_everything_was_sent_says_so(client: VelaClient, unique: Callable[[str], str]) -> None:
    def stop(progress: IndexProgress) -> None:
        if progress.documents_sent == 3:
            raise RuntimeError("stopped by the progress callback")

    with pytest.raises(RuntimeError) as stopped:
        client.index_in_batches(unique("stop"), corpus(3), batch_size=2, on_progress=stop)
    assert any("accepted all 3 documents, in 2 jobs" in note for note in stopped.value.__notes__)


def test_a_document_that_cannot_be_json_is_named(client: VelaClient, unique: Callable[[str], str]) -> None:
    name = unique("nojson")
    tags = {"id": "tags", "text": "otters", "metadata": {"tags": {"a", "b"}}}  # a set: JSON has no form for it
    with pytest.raises(TypeError, match=r"the document at position 1 \(id 'tags'\) cannot be sent as JSON"):
        client.index_in_batches(name, [{"id": "a", "text": "otters"}, tags])
    nan = {"id": "nan", "text": "otters", "metadata": {"score": float("nan")}}
    with pytest.raises(ValueError, match=r"position 0 \(id 'nan'\) cannot be sent as JSON"):
        client.index_in_batches(name, [nan])
    with pytest.raises(NotFound):
        client.get_collection(name)
