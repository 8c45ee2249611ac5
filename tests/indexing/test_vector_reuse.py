"""The copy-or-encode decision of a reindex is made once (the end-to-end copies are in test_generations.py)."""

from __future__ import annotations

from typing import Any

import pytest

from indexing import vector_reuse


def test_the_document_side_is_probed_once_per_reindex(monkeypatch: pytest.MonkeyPatch) -> None:
    probes: list[tuple[Any, ...]] = []

    def probe(*args: Any) -> bool:
        probes.append(args)
        return True

    monkeypatch.setattr(vector_reuse, "same_document_side", probe)
    old, new, target, source = object(), object(), object(), object()
    reuse = vector_reuse.VectorReuse(old)  # type: ignore[arg-type]
    # Nothing to write yet (an empty first pass): nothing decided, nothing probed.
    assert reuse.copies(new, target, source, []) is False and probes == []  # type: ignore[arg-type]
    # The first pass with documents probes; the catch-up passes and the switch keep its answer.
    for todo in (["a", "b"], ["c"], ["d"]):
        assert reuse.copies(new, target, source, todo) is True  # type: ignore[arg-type]
    assert probes == [(old, new, target, source, ["a", "b"])]
