"""The CLI's document bar: drawn from the start when the total is known (an ingest knows it), at 0, so that
nothing looks stuck during the first batch and the rate counts from the start; else from the first report."""

from __future__ import annotations

import pytest

from cli.console import DocumentBar


def test_a_known_total_draws_the_bar_at_once(capsys: pytest.CaptureFixture[str]) -> None:
    with DocumentBar("ingest c", total=300) as bar:
        assert "0/300" in capsys.readouterr().err  # before any batch has reported
        bar(100, 300)
        bar(300, 300)
    assert "300/300" in capsys.readouterr().err


def test_an_unknown_total_waits_for_the_first_report(capsys: pytest.CaptureFixture[str]) -> None:
    with DocumentBar("reindex c") as bar:
        assert capsys.readouterr().err == ""
        bar(5, 10)
        assert "/10 " in capsys.readouterr().err  # drawn now (tqdm redraws the count at its own pace)
