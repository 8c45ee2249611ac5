"""The tiered merge policy on its own: what it picks, and how often a row is rewritten under a stream of commits."""

from __future__ import annotations

from typing import Any

from indexing.merge_policy import TieredMergePolicy


def _segments(*rows: int) -> list[dict[str, Any]]:
    return [{"name": f"s{i}", "rows": n, "dead": 0} for i, n in enumerate(rows)]


def test_a_large_segment_is_not_rewritten_to_absorb_tiny_commits() -> None:
    """A shard of 3,500 rows took in every third commit of a few rows by rewriting itself whole: the segment
    below the floor's tier held everything under 8,000 rows."""
    policy = TieredMergePolicy()
    assert policy.pick(_segments(3_500, 8, 8, 8)) == []
    assert sorted(policy.pick(_segments(3_500, 8, 8, 8, 8))) == ["s1", "s2", "s3", "s4"]  # the tiny ones alone
    assert sorted(policy.pick(_segments(1_100, 2_000, 3_000, 4_000))) == ["s0", "s1", "s2", "s3"]  # alike sizes
    floor = policy.floor_rows
    assert [policy.tier(n) for n in (0, floor - 1, floor, 4 * floor - 1, 4 * floor, 16 * floor)] == [0, 0, 1, 1, 2, 3]


def _rewrites(policy: TieredMergePolicy, start: int, commits: int, rows: int) -> float:
    """Rows the merges copy per row committed, over a stream of `commits` commits of `rows` rows each onto a shard
    that begins as one segment of `start` rows."""
    segments, copied, made = _segments(start), 0, 0
    for c in range(commits):
        segments.append({"name": f"c{c}", "rows": rows, "dead": 0})
        while picked := policy.pick(segments):
            merged = [s for s in segments if s["name"] in picked]
            total = sum(s["rows"] for s in merged)
            copied += total
            made += 1
            segments = [s for s in segments if s["name"] not in picked] + [{"name": f"m{made}", "rows": total}]
    return copied / (commits * rows)


def test_each_row_is_rewritten_about_log_n_times() -> None:
    """Rows climb the tiers once each, a factor of 4 at a time; the large segment is left alone until segments of
    its size have gathered (it was about 40 to 60 rewrites a row)."""
    policy = TieredMergePolicy()
    assert _rewrites(policy, start=3_500, commits=600, rows=8) < 6
    assert _rewrites(policy, start=0, commits=600, rows=8) < 6
