"""Start-up maintenance: a collection whose check fails is logged and passed over, so the other collections'
checks run and the job runner still starts its lanes (it once held the lock and ran nothing)."""

from __future__ import annotations

from pathlib import Path

import pytest

from indexing.collection import Collection, CollectionSettings
from indexing.jobs import JobStore
from indexing.store import CollectionStore
from service.state import maintain


def test_a_collection_whose_check_fails_does_not_stop_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    store = CollectionStore(tmp_path / "vela")
    for name in ("broken", "fine"):
        store.create(CollectionSettings(name=name, embedder="unused", dim=8))
    checked: list[str] = []
    real = Collection.check_consistency

    def check(self: Collection) -> str:
        if self.name == "broken":
            raise OverflowError("int too large to convert to float")  # any defect met while loading it
        checked.append(self.name)
        return real(self)

    monkeypatch.setattr(Collection, "check_consistency", check)
    maintain(store, JobStore(tmp_path / "vela" / "jobs.sqlite3"))
    assert checked == ["fine"]
    assert any(r.message == "collection check failed" and r.levelname == "ERROR" for r in caplog.records)
