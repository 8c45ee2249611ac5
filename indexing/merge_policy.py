"""Which segments of a shard to merge: a tiered policy in the manner of Lucene's TieredMergePolicy.

Segments are sized by their live rows and put in tiers of `merge_factor`x size steps above `floor_rows`
(every segment below the floor is in the lowest tier: tiny segments are all alike, and a segment of the floor's size
or more is never in their tier, so a large segment is not rewritten to absorb a few tiny commits). When a tier holds
`merge_factor` segments, its smallest `merge_factor` are merged into one of the next tier, so each merge
copies rows of similar sizes and a row is rewritten about log(N) times over its life. Two more rules:
a segment with more than `reclaim_deletes` of its rows deleted is rewritten (that drops its dead rows),
and when a shard holds more than `max_segments`, its smallest segments are merged until it does not.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TieredMergePolicy:
    merge_factor: int = 4
    # Below this, segments are alike (a commit of a few documents). It was 2,000: a shard under 8,000 live rows
    # then sat in one tier, and every few commits rewrote it whole (about 60 rewrites a row under steady churn).
    floor_rows: int = 64
    max_segments: int = 10
    reclaim_deletes: float = 0.3

    def tier(self, live: int) -> int:
        """0 below the floor; 1 from the floor up to `merge_factor` times it; and so on, one per factor."""
        if live < self.floor_rows:
            return 0
        return 1 + int(math.log(live / self.floor_rows, self.merge_factor))

    def pick(self, segments: Sequence[dict[str, Any]]) -> list[str]:
        """Names of the segments to merge next (empty: none). Call again after each merge."""
        sized = sorted(((int(s["rows"]) - int(s.get("dead", 0)), s["name"], s) for s in segments), key=lambda x: x[:2])
        if not sized:
            return []
        empty = [name for live, name, _ in sized if live == 0]
        if empty and len(sized) > 1:
            # Fully deleted segments: merged with the smallest live one, which costs next to nothing.
            live_ones = [name for live, name, _ in sized if live > 0]
            return empty + live_ones[:1]
        tiers: dict[int, list[str]] = {}
        for live, name, _ in sized:
            tiers.setdefault(self.tier(live), []).append(name)
        for t in sorted(tiers):
            if len(tiers[t]) >= self.merge_factor:
                return tiers[t][: self.merge_factor]
        if len(sized) > self.max_segments:
            return [name for _, name, _ in sized[: len(sized) - self.max_segments + 1]]
        for _, name, s in sized:
            if int(s["rows"]) and int(s.get("dead", 0)) / int(s["rows"]) > self.reclaim_deletes:
                return [name]
        return []
