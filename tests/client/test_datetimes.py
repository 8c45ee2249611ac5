"""Python `datetime` and `date` values through both clients against a real server: in documents' metadata (`index`,
`index_in_batches`, `patch_document`) and in filters (search, count, facet, scroll, delete many), sent as ISO-8601
text (RFC 3339; a naive datetime as it is, which the server reads as UTC; a date as YYYY-MM-DD)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta, timezone

import pytest
from vela_client import AsyncVelaClient, Document, VelaClient
from vela_client.encoding import dumps

from tests.client.conftest import API_KEY

BERLIN_SUMMER = timezone(timedelta(hours=2))
SCHEMA = {"published": "datetime", "day": "datetime", "lang": "keyword"}


def since(when: datetime | date) -> dict[str, object]:
    return {"must": [{"key": "published", "range": {"gte": when}}]}


def test_datetimes_and_dates_are_encoded_as_iso_8601() -> None:
    assert dumps({"at": datetime(2024, 5, 1, 10, 0, tzinfo=UTC)}) == '{"at":"2024-05-01T10:00:00+00:00"}'
    assert dumps([datetime(2024, 5, 1, 12, 0, 0, 250, tzinfo=BERLIN_SUMMER)]) == '["2024-05-01T12:00:00.000250+02:00"]'
    assert dumps(datetime(2024, 5, 1, 10, 30)) == '"2024-05-01T10:30:00"'  # naive: sent as it is (UTC to the server)
    assert dumps(date(2024, 5, 1)) == '"2024-05-01"'
    with pytest.raises(TypeError, match="set is not JSON serializable"):
        dumps({"tags": {"a"}})
    with pytest.raises(ValueError):
        dumps(float("nan"))


def test_datetimes_in_metadata_and_filters(client: VelaClient, unique: Callable[[str], str]) -> None:
    name = unique("dates")
    docs = [
        Document(id="old", text="otters in 2023", metadata={"published": datetime(2023, 6, 1, tzinfo=UTC)}),
        {"id": "naive", "text": "otters in spring", "metadata": {"published": datetime(2024, 4, 1, 8, 0)}},
        {
            "id": "aware",
            "text": "otters in summer",
            "metadata": {"published": datetime(2024, 7, 1, tzinfo=UTC), "lang": "en"},
        },
    ]
    client.index(name, docs, schema=SCHEMA, wait=True)
    assert client.get_document(name, "naive").metadata == {"published": "2024-04-01T08:00:00"}
    assert client.get_document(name, "aware").metadata == {"published": "2024-07-01T00:00:00+00:00", "lang": "en"}

    # 2024-04-01T10:00+02:00 is 08:00 UTC: the naive time, read as UTC, is on the bound.
    bound = datetime(2024, 4, 1, 10, 0, tzinfo=BERLIN_SUMMER)
    hits = client.search(name, "otters", mode="bm25", filter=since(bound)).hits
    assert {hit.id for hit in hits} == {"naive", "aware"}
    assert client.count(name, since(date(2024, 1, 1))) == 2
    assert client.count(name, since(datetime(2024, 4, 1, 8, 0, 1))) == 1  # naive bound: UTC
    assert [d.id for d in client.scroll_documents(name, filter=since(date(2024, 5, 1))).documents] == ["aware"]
    facet = client.facet(name, "lang", filter=since(date(2024, 5, 1)))
    assert [(h.value, h.count) for h in facet.hits] == [("en", 1)]
    similar = client.recommend(name, ["old"], filter=since(date(2024, 5, 1)))
    assert [hit.id for hit in similar.hits] == ["aware"]

    client.patch_document(name, "old", {"day": date(2023, 6, 2)}, wait=True)
    assert client.get_document(name, "old").metadata == {"published": "2023-06-01T00:00:00+00:00", "day": "2023-06-02"}
    client.delete_documents(name, filter=since(date(2024, 1, 1)), wait=True)
    assert [d.id for d in client.scroll_documents(name).documents] == ["old"]


def test_datetimes_in_index_in_batches(client: VelaClient, unique: Callable[[str], str]) -> None:
    name = unique("dates-bulk")
    start = datetime(2024, 1, 1, tzinfo=UTC)
    docs = (
        {"id": f"d{i}", "text": f"otter {i}", "metadata": {"published": start + timedelta(days=i)}} for i in range(6)
    )
    jobs = client.index_in_batches(name, docs, batch_size=4, schema=SCHEMA, wait=True)
    assert [job.total for job in jobs] == [4, 2]
    assert client.count(name, since(date(2024, 1, 4))) == 3
    assert client.get_document(name, "d5").metadata == {"published": "2024-01-06T00:00:00+00:00"}


@pytest.mark.anyio
async def test_iter_documents_async_takes_a_datetime_filter(vela_url: str, unique: Callable[[str], str]) -> None:
    name = unique("dates-async")
    docs = [{"id": f"d{i}", "text": "otters", "metadata": {"published": date(2024, 1, 1 + i)}} for i in range(4)]
    async with AsyncVelaClient(vela_url, api_key=API_KEY) as vela:
        await vela.index(name, docs, schema=SCHEMA, wait=True)
        later = since(datetime(2024, 1, 2, 12, 0, tzinfo=UTC))
        assert [d.id async for d in vela.iter_documents(name, filter=later, page_size=1)] == ["d2", "d3"]
